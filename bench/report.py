"""Turn the collected results into the comparison table, latest.json and latest.md."""

import json
from collections.abc import Callable
from pathlib import Path

import targets

HIGH, LOW = "higher is better", "lower is better"


def dig(data, *keys):
    """data[k1][k2]... or None when any step is missing (negative ints index lists)."""
    for key in keys:
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def drain_at(result: dict, index: int) -> dict | None:
    """The drain run at position index (0 = smallest N, -1 = largest N)."""
    drains = result.get("drain") or []
    if index == 1 and len(drains) < 2:
        return None
    return dig(drains, index)


def rows_left(result: dict) -> str | None:
    """Non-empty tables after the largest drain, e.g. 'job=500'; '0' when all empty."""
    counts = dig(drain_at(result, -1), "rows_left")
    if counts is None:
        return None
    prefixes = tuple(counts["prefixes"])

    def short(name: str) -> str:
        # pgqueuer's tables are pgqueuer, pgqueuer_log, ...: keep a name whole
        # when the prefix is all of it.
        for prefix in prefixes:
            name = name.removeprefix(prefix).lstrip("_") or name
        return name

    left = [f"{short(name)}={n}" for name, n in counts["tables"].items() if n]
    return " ".join(left) or "0"


# The mixed workload's queues, highest priority first (projects/_common/benchtasks.py).
MIXED_QUEUES = ("critical", "default", "low")


def pickup_p99_by_queue(result: dict) -> str | None:
    """'critical / default / low' pickup p99 (ms) of the mixed steady stream."""
    queues = dig(result, "mixed", "steady", "pickup_by_queue")
    if not queues:
        return None
    return " / ".join(fmt(dig(queues, q, "p99_ms"), "ms") for q in MIXED_QUEUES)


def batch_row(ceiling: dict, connections: int, batch: int, field: str):
    """A raw-SQL ceiling figure: ``field`` of the (connections, batch) run."""
    for row in ceiling.get("results") or []:
        if row["connections"] == connections and row["batch"] == batch:
            return row[field]
    return None


# The raw-SQL ceiling figure (ceiling.py) each throughput row is compared with.
CEILING_FOR: dict[str, Callable[[dict], float | None]] = {
    # One INSERT + COMMIT per job on one connection: what a commit costs.
    "single enqueue": lambda c: dig(c, "single_insert", "jobs_per_s"),
    "bulk enqueue": lambda c: batch_row(c, 1, 100, "insert_jobs_per_s"),
    "drain": lambda c: batch_row(c, 4, 10, "claim_finish_jobs_per_s"),
}


# (label, unit, direction, value getter, N getter for the cell annotation)
Metric = tuple[
    str, str, str | None, Callable[[dict], object], Callable[[dict], int] | None
]


def per_job_metric(label: str, unit: str, key: str) -> Metric:
    """A figure per job of the drain every system runs (workload.per_job)."""
    return (
        label,
        unit,
        LOW,
        lambda r: dig(drain_at(r, 0), "per_job", key),
        lambda r: dig(drain_at(r, 0), "n"),
    )


METRICS: list[Metric] = [
    ("single enqueue", "jobs/s", HIGH, lambda r: dig(r, "single", "jobs_per_s"), None),
    ("single enqueue p50", "ms", LOW, lambda r: dig(r, "single", "p50_ms"), None),
    ("single enqueue p99", "ms", LOW, lambda r: dig(r, "single", "p99_ms"), None),
    ("bulk enqueue", "jobs/s", HIGH, lambda r: dig(r, "bulk", "jobs_per_s"), None),
    (
        "drain",
        "jobs/s",
        HIGH,
        lambda r: dig(drain_at(r, 0), "jobs_per_s"),
        lambda r: dig(drain_at(r, 0), "n"),
    ),
    (
        "drain excl. start-up",
        "jobs/s",
        HIGH,
        lambda r: dig(drain_at(r, 0), "steady_jobs_per_s"),
        lambda r: dig(drain_at(r, 0), "n"),
    ),
    (
        "drain, larger N",
        "jobs/s",
        HIGH,
        lambda r: dig(drain_at(r, 1), "jobs_per_s"),
        lambda r: dig(drain_at(r, 1), "n"),
    ),
    (
        "drain, larger N excl. start-up",
        "jobs/s",
        HIGH,
        lambda r: dig(drain_at(r, 1), "steady_jobs_per_s"),
        lambda r: dig(drain_at(r, 1), "n"),
    ),
    ("pickup latency p50", "ms", LOW, lambda r: dig(r, "latency", "p50_ms"), None),
    ("pickup latency p99", "ms", LOW, lambda r: dig(r, "latency", "p99_ms"), None),
    (
        "mixed: ideal",
        "jobs/s",
        None,
        lambda r: dig(r, "mixed", "ideal_jobs_per_s"),
        None,
    ),
    (
        "mixed: throughput",
        "jobs/s",
        HIGH,
        lambda r: dig(r, "mixed", "burst", "jobs_per_s"),
        lambda r: dig(r, "mixed", "burst", "n"),
    ),
    (
        "mixed: % of ideal",
        "",
        HIGH,
        lambda r: dig(r, "mixed", "burst", "pct_of_ideal"),
        None,
    ),
    (
        "mixed: offered load",
        "jobs/s",
        None,
        lambda r: dig(r, "mixed", "steady", "offered_jobs_per_s"),
        lambda r: dig(r, "mixed", "steady", "n"),
    ),
    (
        "mixed: pickup p50",
        "ms",
        LOW,
        lambda r: dig(r, "mixed", "steady", "pickup", "p50_ms"),
        None,
    ),
    (
        "mixed: pickup p99",
        "ms",
        LOW,
        lambda r: dig(r, "mixed", "steady", "pickup", "p99_ms"),
        None,
    ),
    (
        "mixed: pickup p99 crit/def/low",
        "ms",
        None,
        pickup_p99_by_queue,
        None,
    ),
    (
        "peak RSS per process",
        "MiB",
        LOW,
        lambda r: dig(drain_at(r, -1), "memory", "per_process_peak_rss_mib"),
        None,
    ),
    (
        "peak RSS, process tree",
        "MiB",
        LOW,
        lambda r: dig(drain_at(r, -1), "memory", "tree_peak_rss_mib"),
        None,
    ),
    (
        "peak PSS, process tree",
        "MiB",
        LOW,
        lambda r: dig(drain_at(r, -1), "memory", "tree_peak_pss_mib"),
        None,
    ),
    (
        "processes in tree",
        "",
        None,
        lambda r: dig(drain_at(r, -1), "memory", "processes"),
        None,
    ),
    (
        "graceful stop",
        "s",
        LOW,
        lambda r: dig(drain_at(r, -1), "stop", "seconds"),
        None,
    ),
    ("rows left after drain", "", None, rows_left, None),
    *(
        per_job_metric(label, unit, key)
        for label, unit, key in [
            ("worker CPU per job", "µs", "worker_cpu_us"),
            ("worker CPU per job excl. start-up", "µs", "worker_cpu_us_steady"),
            ("PostgreSQL CPU per job", "µs", "postgresql_cpu_us"),
            ("WAL per job", "B", "wal_bytes"),
            ("commits per job", "", "commits"),
        ]
    ),
]


def metric_value(column: dict, db_key: str, label: str):
    """One column's figure for the metric labelled ``label`` on one database."""
    result = dig(column, "results", db_key)
    if result is None:
        return None
    get = next(m[3] for m in METRICS if m[0] == label)
    return get(result)


def fmt(value, unit: str = "") -> str:
    """Human formatting: thousands for rates, 2 decimals for small values."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if unit == "jobs/s" or (isinstance(value, int) and not unit):
        return f"{value:,.0f}"
    if abs(value) < 10:
        return f"{value:.2f}"
    return f"{value:,.1f}"


def short_n(n: int) -> str:
    """10000 -> '10k'."""
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def ceiling_value(ceiling: dict, db_key: str, metric: str) -> float | None:
    """The raw-SQL number the metric row is compared with, if any."""
    if metric not in CEILING_FOR or db_key not in ceiling:
        return None
    return CEILING_FOR[metric](ceiling[db_key])


def build_table(data: dict) -> tuple[list[str], list[list[str]]]:
    """Header and rows: a row per (database, metric), a column per system variant."""
    columns = data["columns"]
    header = [
        "database",
        "metric",
        *(c["label"] for c in columns),
        "ours / best peer",
        "raw SQL",
    ]
    rows = []
    for db_key, db_title in data["databases"].items():
        for label, unit, direction, get, get_n in METRICS:
            cells, values = [], []
            for column in columns:
                result = dig(column, "results", db_key)
                if result is None:
                    cells.append("n/a")
                    values.append(None)
                    continue
                value = get(result)
                failed = value is None and result.get("errors")
                text = "ERR" if failed else fmt(value, unit)
                if get_n and value is not None:
                    text += f" (N={short_n(get_n(result))})"
                cells.append(text)
                values.append(value)
            if all(v is None for v in values):
                continue
            name = f"{label} ({unit})" if unit else label
            ratio = ratio_cell(columns, values, direction)
            raw = ceiling_value(data.get("ceiling", {}), db_key, label)
            rows.append([db_title, name, *cells, ratio, fmt(raw, "jobs/s")])
        single = dig(data, "ceiling", db_key, "single_insert")
        if single:
            text = (
                f"{fmt(single['jobs_per_s'], 'jobs/s')} · p50"
                f" {fmt(single['p50_ms'], 'ms')} ms · p99"
                f" {fmt(single['p99_ms'], 'ms')} ms"
            )
            name = "raw SQL, 1 INSERT + COMMIT per job, 1 conn (jobs/s)"
            rows.append([db_title, name, *([""] * len(columns)), "", text])
        for row in dig(data, "ceiling", db_key, "results") or []:
            text = (
                f"insert {fmt(row['insert_jobs_per_s'], 'jobs/s')} · claim"
                f" {fmt(row['claim_jobs_per_s'], 'jobs/s')} · finish"
                f" {fmt(row['finish_jobs_per_s'], 'jobs/s')}"
            )
            name = (
                f"raw SQL, {row['connections']} conn x {row['batch']} job/txn (jobs/s)"
            )
            rows.append([db_title, name, *([""] * len(columns)), "", text])
    return header, rows


def ratio_cell(columns: list[dict], values: list, direction: str | None) -> str:
    """ours / best peer, where best is the max or min depending on direction."""
    if direction is None:
        return ""
    ours = [
        v for c, v in zip(columns, values, strict=True) if c["ours"] and v is not None
    ]
    peers = [
        v
        for c, v in zip(columns, values, strict=True)
        if not c["ours"] and v is not None
    ]
    if not ours or not peers:
        return "-"
    best = max(peers) if direction == HIGH else min(peers)
    return f"{ours[0] / best:.2f}x" if best else "-"


def text_table(header: list[str], rows: list[list[str]]) -> str:
    """A fixed-width table for the terminal."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))  # noqa: E731
    return "\n".join(
        [line(header), "  ".join("-" * w for w in widths), *map(line, rows)]
    )


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def notes(data: dict) -> list[str]:
    """Errors, skipped systems and how to read the table."""
    lines = [
        "Ratios are ours / best peer: above 1 is better for jobs/s,"
        " below 1 for ms and MiB.",
        "drain = N pre-enqueued no-op jobs, from worker start to the last finish;"
        " 'excl. start-up' counts from the first finish instead. 'larger N':"
        " ours and the peers fast enough for it (pgqueuer, oban).",
        "Pickup latency = task start - return of the enqueue call (idle workers,"
        f" {dig(data, 'sizes', 'latency_n')} jobs"
        f" {dig(data, 'sizes', 'latency_gap')} s apart).",
        "mixed = 10 ms sleep jobs on 3 queues (critical/default/low = 2/5/3 in"
        " 10, priorities 10/0/-10), workers on all queues. ideal = threads x"
        " processes / 10 ms. throughput = a backlog of ideal x"
        f" {dig(data, 'sizes', 'mixed_burst_seconds')} s of jobs committed in one"
        " transaction, jobs / (last finish - commit). Then a producer enqueues one"
        f" job at a time for {dig(data, 'sizes', 'mixed_steady_seconds')} s at"
        f" {dig(data, 'sizes', 'mixed_load')} x min(ideal, throughput) (offered"
        " load = what it achieved); pickup = task start - return of its enqueue"
        " call.",
        "Memory rows come from the largest drain; PSS splits pages shared by forked"
        " processes, so it is the fairer tree total.",
        "raw SQL column: single enqueue ← one INSERT + COMMIT per job, 1 conn;"
        " bulk ← insert, 1 conn x 100 jobs/txn; drain ← claim + finish, 4 conn x"
        " 10 jobs/txn.",
    ]
    lines += mixed_caveats(data)
    for skip in data.get("skipped", []):
        lines.append(f"Skipped {skip['what']}: {skip['reason']}")
    for column in data["columns"]:
        for db_key, result in column["results"].items():
            for phase, error in (result.get("errors") or {}).items():
                first = error.splitlines()[0][:300]
                lines.append(f"ERROR {column['label']} on {db_key}, {phase}: {first}")
    for db_key, ceiling in (data.get("ceiling") or {}).items():
        if "error" in ceiling:
            lines.append(f"ERROR raw SQL on {db_key}: {ceiling['error'][:300]}")
        deadlocks = sum(r.get("claim_deadlocks", 0) for r in ceiling.get("results", []))
        if deadlocks:
            lines.append(
                f"raw SQL on {db_key}: {deadlocks} claim transactions deadlocked"
                " and were retried."
            )
    return lines


def mixed_caveats(data: dict) -> list[str]:
    """Each system's concurrency behind its mixed ideal, and any missing priorities."""
    lines, seen = [], set()
    for column in data["columns"]:
        for result in column["results"].values():
            mixed = result.get("mixed")
            if not mixed or column["label"] in seen:
                continue
            seen.add(column["label"])
            threads, processes = mixed["threads"], mixed["processes"]
            text = (
                f"mixed, {column['label']}: {threads} per process x {processes}"
                f" processes = {threads * processes} jobs at once"
            )
            if not mixed["priorities"]:
                text += "; no task priorities, so jobs carry their queue only"
            lines.append(text + ".")
    return lines + saturated_streams(data)


# Below this share of the offered rate, the steady stream outran the workers.
KEPT_UP = 0.95


def saturated_streams(data: dict) -> list[str]:
    """Where the mixed steady stream outran the workers, so its pickup times
    measure a growing queue rather than pickup (SQLite: the producer shares
    the one writer with the workers, which the burst did not)."""
    lines = []
    for column in data["columns"]:
        for db_key, result in column["results"].items():
            steady = dig(result, "mixed", "steady") or {}
            offered = steady.get("offered_jobs_per_s")
            completed = steady.get("completed_jobs_per_s")
            if offered and completed and completed < KEPT_UP * offered:
                lines.append(
                    f"mixed, {column['label']} on {data['databases'][db_key]}:"
                    f" saturated, {completed:,.0f} jobs/s completed of"
                    f" {offered:,.0f} offered; its pickup times measure the"
                    " backlog that built up."
                )
    return lines


def machine_lines(data: dict) -> list[str]:
    """The machine and run description."""
    m = data["machine"]
    return [
        f"- CPU: {m['cpu']} x {m['cores']} cores, RAM {m['ram_gib']} GiB, {m['os']}",
        f"- Python {m['python']}; MySQL driver: {data['mysql_driver']}",
        f"- steady_queue source: {data.get('steady_queue_revision', 'unknown')}",
        *(f"- {name}: {version}" for name, version in m["db_versions"].items()),
        f"- load average (1/5/15 min) at start {m['load_avg_start']},"
        f" at end {m['load_avg_end']}",
        f"- mode: {data['mode']}; run took {data['duration_s'] / 60:.1f} min;"
        f" {data['generated_at']}",
        f"- sizes: {json.dumps(data['sizes'])}",
    ]


def write_named(
    results_dir: Path, name: str, data: dict, heading: str, notes, table: str
) -> str:
    """Write ``name``.json (the data) and ``name``.md (the heading, the machine,
    the notes and the table) in results_dir; print and return the markdown."""
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / f"{name}.json").write_text(json.dumps(data, indent=1, default=str))
    text = "\n".join([f"# {heading}", "", *machine_lines(data), *notes, "", table, ""])
    (results_dir / f"{name}.md").write_text(text)
    print()
    print(text)
    return text


def write(data: dict, results_dir: Path) -> str:
    """Write latest.json and latest.md; return the terminal rendering."""
    header, rows = build_table(data)

    def raw(db_key: str, metric: str) -> float | None:
        return ceiling_value(data.get("ceiling", {}), db_key, metric)

    goals = targets.rows(data, metric_value, raw, fmt)
    earlier = targets.rows(data, metric_value, raw, fmt, targets.EARLIER_GOALS)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "latest.json").write_text(
        json.dumps(data, indent=1, default=str) + "\n"
    )
    settings = [f"- **{c['label']}**: {c['settings']}" for c in data["columns"]]
    md = [
        "# steady_queue benchmark",
        "",
        *machine_lines(data),
        "",
        "## Targets (issue #28)",
        "",
        markdown_table(targets.HEADER, goals),
        "",
        "## All figures",
        "",
        markdown_table(header, rows),
        "",
        "## Earlier targets (issue #15, against the Django peers)",
        "",
        markdown_table(targets.HEADER, earlier),
        "",
        "## Settings",
        "",
        *settings,
        "",
        "## Notes",
        "",
        *(f"- {n}" for n in notes(data)),
        "",
    ]
    (results_dir / "latest.md").write_text("\n".join(md))
    return "\n".join(
        [
            *machine_lines(data),
            "",
            "Targets (issue #28):",
            text_table(targets.HEADER, goals),
            "",
            text_table(header, rows),
            "",
            "Earlier targets (issue #15):",
            text_table(targets.HEADER, earlier),
            "",
            *notes(data),
        ]
    )
