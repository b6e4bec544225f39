"""The performance targets of issue #15, checked against one run's figures."""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Goal:
    """A figure of ours, bounded against the best peer and/or an absolute value.

    ``times_best_peer``: ours must be at least this multiple of the best peer
    (jobs/s). ``at_least`` / ``at_most``: an absolute bound in the metric's unit.
    """

    database: str  # a key of databases.DATABASES
    metric: str  # a label of report.METRICS
    unit: str
    times_best_peer: float | None = None
    at_least: float | None = None
    at_most: float | None = None

    def wanted(self) -> str:
        parts = []
        if self.times_best_peer:
            parts.append(f">= {self.times_best_peer:g}x best peer")
        if self.at_least is not None:
            parts.append(f">= {self.at_least:,g} {self.unit}")
        if self.at_most is not None:
            parts.append(f"<= {self.at_most:,g} {self.unit}")
        return " and ".join(parts)

    def met(self, ours: float, best_peer: float | None) -> bool | None:
        """Whether ours meets every bound; None when a needed peer is missing."""
        if self.times_best_peer and best_peer is None:
            return None
        checks = [
            not self.times_best_peer or ours >= self.times_best_peer * best_peer,
            self.at_least is None or ours >= self.at_least,
            self.at_most is None or ours <= self.at_most,
        ]
        return all(checks)


GOALS = [
    Goal("postgresql", "single enqueue", "jobs/s", times_best_peer=1.5),
    Goal("postgresql", "bulk enqueue", "jobs/s", times_best_peer=2, at_least=50_000),
    Goal("postgresql", "drain", "jobs/s", times_best_peer=10, at_least=5_000),
    Goal("postgresql", "pickup latency p50", "ms", at_most=2),
    Goal("postgresql", "pickup latency p99", "ms", at_most=5),
    Goal("postgresql", "peak RSS, process tree", "MiB", at_most=110),
    # Asked beside RSS: PSS splits the pages forked processes share.
    Goal("postgresql", "peak PSS, process tree", "MiB", at_most=110),
    Goal("sqlite", "single enqueue", "jobs/s", times_best_peer=1.2),
]

HEADER = ["database", "figure", "ours", "best peer", "target", "met"]


def rows(
    data: dict, value: Callable[[dict, str, str], float | None], fmt
) -> list[list[str]]:
    """A row per goal whose figure this run has: ours, the best peer, the verdict.

    ``value(column, database, metric)`` reads one column's figure.
    """
    table = []
    for goal in GOALS:
        if goal.database not in data["databases"]:
            continue
        ours = [
            value(column, goal.database, goal.metric)
            for column in data["columns"]
            if column["ours"]
        ]
        if not ours or ours[0] is None:
            continue
        peers = {
            c["label"]: figure
            for c in data["columns"]
            if not c["ours"]
            and (figure := value(c, goal.database, goal.metric)) is not None
        }
        # The best peer is the fastest, or the one with the least ms or MiB.
        pick = max if goal.unit == "jobs/s" else min
        best = pick(peers.items(), key=lambda item: item[1]) if peers else None
        met = goal.met(ours[0], best[1] if best else None)
        table.append(
            [
                data["databases"][goal.database],
                f"{goal.metric} ({goal.unit})",
                fmt(ours[0], goal.unit),
                f"{fmt(best[1], goal.unit)} ({best[0]})" if best else "-",
                goal.wanted(),
                "-" if met is None else "yes" if met else "NO",
            ]
        )
    return table
