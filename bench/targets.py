"""The performance targets (issues #28 and #15), checked against one run's figures."""

from collections.abc import Callable
from dataclasses import dataclass

# The Django peers issue #15 measured us against.
DJANGO_PEERS = ("django_tasks_db", "procrastinate", "steady_queue_pypi")
# The fastest Python PostgreSQL queues, issue #28's yardstick.
FASTEST = ("pgqueuer", "oban")


@dataclass(frozen=True)
class Goal:
    """A figure of ours, bounded by the best peer's, the raw SQL's or a value.

    ``times_best_peer``: for jobs/s, ours must be at least this multiple of the
    best peer; for ms and MiB (lower is better), at most this multiple of the
    best (lowest) peer. ``peers``: the systems (keys) the best peer is chosen
    from; None, every peer. ``times_raw_sql``: ours must be at least this
    multiple of the raw SQL figure of the metric (report.CEILING_FOR).
    ``at_least`` / ``at_most``: an absolute bound in the metric's unit.
    """

    database: str  # a key of databases.DATABASES
    metric: str  # a label of report.METRICS
    unit: str
    times_best_peer: float | None = None
    peers: tuple[str, ...] | None = None
    times_raw_sql: float | None = None
    at_least: float | None = None
    at_most: float | None = None

    @property
    def higher_is_better(self) -> bool:
        return self.unit == "jobs/s"

    def wanted(self) -> str:
        parts = []
        if self.times_best_peer:
            sign = ">=" if self.higher_is_better else "<="
            who = " / ".join(self.peers) if self.peers else "best peer"
            if self.peers and len(self.peers) > 1:
                who = f"best of {who}"
            parts.append(f"{sign} {self.times_best_peer:g}x {who}")
        if self.times_raw_sql:
            parts.append(f">= {self.times_raw_sql:.0%} of raw SQL")
        if self.at_least is not None:
            parts.append(f">= {self.at_least:,g} {self.unit}")
        if self.at_most is not None:
            parts.append(f"<= {self.at_most:,g} {self.unit}")
        return " and ".join(parts)

    def met(
        self, ours: float, best_peer: float | None, raw: float | None
    ) -> bool | None:
        """Whether ours meets every bound; None when a needed figure is missing."""
        if (self.times_best_peer and best_peer is None) or (
            self.times_raw_sql and raw is None
        ):
            return None
        if not self.times_best_peer:
            versus_peer = True
        elif self.higher_is_better:
            versus_peer = ours >= self.times_best_peer * best_peer
        else:
            versus_peer = ours <= self.times_best_peer * best_peer
        checks = [
            versus_peer,
            not self.times_raw_sql or ours >= self.times_raw_sql * raw,
            self.at_least is None or ours >= self.at_least,
            self.at_most is None or ours <= self.at_most,
        ]
        return all(checks)


# Issue #28: faster than the fastest Python queues. The report opens with these.
GOALS = [
    Goal(
        "postgresql",
        "drain",
        "jobs/s",
        times_best_peer=1.2,
        peers=FASTEST,
        at_least=5_000,
    ),
    Goal(
        "postgresql",
        "drain, larger N",
        "jobs/s",
        times_best_peer=1.2,
        peers=FASTEST,
        at_least=5_000,
    ),
    Goal(
        "postgresql", "bulk enqueue", "jobs/s", times_best_peer=1.2, peers=("pgqueuer",)
    ),
    Goal("postgresql", "single enqueue", "jobs/s", times_best_peer=1),
    # With synchronous commit, one INSERT + COMMIT per job is the limit.
    Goal("postgresql", "single enqueue", "jobs/s", times_raw_sql=0.9),
    Goal("postgresql", "pickup latency p99", "ms", times_best_peer=1),
    Goal("mariadb", "pickup latency p99", "ms", times_best_peer=1),
    Goal("sqlite", "pickup latency p99", "ms", times_best_peer=1),
    Goal("mariadb", "pickup latency p50", "ms", at_most=25),
    Goal("sqlite", "pickup latency p50", "ms", at_most=25),
    Goal(
        "mariadb",
        "single enqueue",
        "jobs/s",
        times_best_peer=1,
        peers=("django_tasks_db",),
    ),
    Goal(
        "postgresql",
        "peak RSS, process tree",
        "MiB",
        times_best_peer=1,
        peers=("pgqueuer",),
    ),
    # Asked beside RSS: PSS splits the pages forked processes share.
    Goal(
        "postgresql",
        "peak PSS, process tree",
        "MiB",
        times_best_peer=1,
        peers=("pgqueuer",),
    ),
]

# Issue #15's, against the Django peers it was written for; shown below.
EARLIER_GOALS = [
    Goal(
        "postgresql",
        "single enqueue",
        "jobs/s",
        times_best_peer=1.5,
        peers=DJANGO_PEERS,
    ),
    Goal(
        "postgresql",
        "bulk enqueue",
        "jobs/s",
        times_best_peer=2,
        peers=DJANGO_PEERS,
        at_least=50_000,
    ),
    Goal(
        "postgresql",
        "drain",
        "jobs/s",
        times_best_peer=10,
        peers=DJANGO_PEERS,
        at_least=5_000,
    ),
    Goal("postgresql", "pickup latency p50", "ms", at_most=2),
    Goal("postgresql", "pickup latency p99", "ms", at_most=5),
    Goal("postgresql", "peak RSS, process tree", "MiB", at_most=110),
    Goal("postgresql", "peak PSS, process tree", "MiB", at_most=110),
    Goal(
        "sqlite",
        "single enqueue",
        "jobs/s",
        times_best_peer=1.2,
        peers=DJANGO_PEERS,
    ),
]

HEADER = ["database", "figure", "ours", "best peer", "raw SQL", "target", "met"]

# value(column, database, metric) reads one column's figure; raw(database,
# metric) the raw SQL figure the metric is compared with.
Value = Callable[[dict, str, str], float | None]
Raw = Callable[[str, str], float | None]


def best_peer(goal: Goal, data: dict, value: Value) -> tuple[str, float] | None:
    """(label, figure) of the best peer the goal names: the fastest, or the one
    with the least ms or MiB; None when none of them has the figure."""
    peers = {
        c["label"]: figure
        for c in data["columns"]
        if not c["ours"]
        and (goal.peers is None or c["system"] in goal.peers)
        and (figure := value(c, goal.database, goal.metric)) is not None
    }
    if not peers:
        return None
    pick = max if goal.higher_is_better else min
    return pick(peers.items(), key=lambda item: item[1])


def rows(
    data: dict, value: Value, raw: Raw, fmt, goals: list[Goal] = GOALS
) -> list[list[str]]:
    """A row per goal whose figure this run has: ours, the best peer, the raw
    SQL figure when the goal uses it, the target and the verdict."""
    table = []
    for goal in goals:
        if goal.database not in data["databases"]:
            continue
        ours = [
            value(column, goal.database, goal.metric)
            for column in data["columns"]
            if column["ours"]
        ]
        if not ours or ours[0] is None:
            continue
        best = best_peer(goal, data, value)
        raw_figure = raw(goal.database, goal.metric) if goal.times_raw_sql else None
        met = goal.met(ours[0], best[1] if best else None, raw_figure)
        table.append(
            [
                data["databases"][goal.database],
                f"{goal.metric} ({goal.unit})",
                fmt(ours[0], goal.unit),
                f"{fmt(best[1], goal.unit)} ({best[0]})" if best else "-",
                fmt(raw_figure, goal.unit) if goal.times_raw_sql else "",
                goal.wanted(),
                "-" if met is None else "yes" if met else "NO",
            ]
        )
    return table
