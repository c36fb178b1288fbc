"""The targets `make bench` checks, and its verdict on each from what it measured in the same run:
sections `record` a target with the figure they printed beside it; the report opens with the table.
No verdict is written by hand: each results file's table (bench/results/) is this one."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    issue: str
    target: str
    figure: str
    met: bool


RECORDED: list[Verdict] = []


def record(issue: str, target: str, figure: str, met: bool) -> bool:
    """Keep the verdict on `target` (of `issue`), `figure` being what was measured; returns `met`."""
    RECORDED.append(Verdict(issue, target, figure, bool(met)))
    return bool(met)


def verdict_table(verdicts: list[Verdict] | None = None) -> str:
    """The verdicts as a table, by issue (newest first), in the order they were recorded."""
    rows = sorted(verdicts if verdicts is not None else RECORDED, key=lambda v: -int(v.issue.strip("#") or 0))
    lines = ["| issue | target | this run | |", "|---|---|---|---|"]
    lines += [f"| {v.issue} | {v.target} | {v.figure} | {'met' if v.met else '**not met**'} |" for v in rows]
    met = sum(v.met for v in rows)
    return "\n".join([*lines, "", f"{met} of {len(rows)} targets met in this run."])


def shown(value: float, limit: float, places: int = 2) -> str:
    """`value` printed with at least `places` decimals, and with as many more as it takes (up to 9)
    for the printed figure to stand on the same side of `limit` as the value itself: 149.6 against
    150 is "149.6", never "150"; 1.304 against 1.3 is "1.304", never "1.30"."""
    side = int(value > limit) - int(value < limit)  # numpy floats too: their comparisons give numpy booleans
    for digits in range(places, 10):
        text = f"{value:.{digits}f}"
        printed = float(text)
        if (printed > limit) - (printed < limit) == side:
            return text
    return repr(value)


def missing(measured: Iterable[str], expected: Iterable[str]) -> list[str]:
    """What a verdict "on every ..." was meant to cover and did not measure, in `expected`'s order."""
    have = set(measured)
    return [name for name in expected if name not in have]
