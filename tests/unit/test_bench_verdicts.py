"""The bench's verdicts (bench/verdicts.py and the sections' own) on the figures a broken gateway or
a broken bench would give them: each must come out not met, and print its figure with the digits
that show why. No server: the figures are given."""

from __future__ import annotations

import pytest

from bench.anonymize import SETS, anonymize_verdicts
from bench.hostile import dead_origin_verdict
from bench.options import auto_verdict
from bench.sources import animation_verdict
from bench.verdicts import missing, shown


@pytest.mark.parametrize(
    ("value", "limit", "places", "text"),
    [
        (149.6, 150, 0, "149.6"),  # .0f would print 150 for a figure under the limit
        (150.4, 150, 0, "150.4"),
        (149.4, 150, 0, "149"),
        (4.996, 5, 2, "4.996"),  # .2f would print 5.00
        (5.004, 5, 2, "5.004"),
        (1.304, 1.3, 2, "1.304"),
        (1.296, 1.3, 2, "1.296"),
        (1.3, 1.3, 2, "1.30"),
        (0.96999, 0.97, 3, "0.96999"),
        (-0.0004, 0, 3, "-0.0004"),  # short of a target by less than .3f shows
        (2.4, 50, 1, "2.4"),
    ],
)
def test_a_figure_is_printed_on_the_side_of_its_limit_it_is_on(value, limit, places, text):
    assert shown(value, limit, places) == text
    printed = float(text)
    assert (printed < limit) == (value < limit) and (printed > limit) == (value > limit)


def test_missing_names_what_was_not_measured():
    assert missing(["a", "c"], ["a", "b", "c", "d"]) == ["b", "d"]
    assert missing({"a": 1}, ["a"]) == []


OPEN = ["503 origin_unavailable"] * 50


def test_a_dead_origin_is_met_only_where_its_breaker_answered():
    figure, met = dead_origin_verdict(2.4, OPEN, reached=0)
    assert met and figure == "2.4 ms, 50 of 50 answered 503 origin_unavailable, 0 reached the origin"
    # The breaker disabled (issue #43): every request reaches the origin, which closes at once: as quick.
    figure, met = dead_origin_verdict(2.4, ["502 origin_error"] * 50, reached=50)
    assert not met and "0 of 50" in figure and "502 origin_error" in figure and "50 reached" in figure
    assert not dead_origin_verdict(2.4, [*OPEN[:-1], "502 origin_error"], reached=1)[1]
    assert not dead_origin_verdict(2.4, OPEN, reached=1)[1]
    figure, met = dead_origin_verdict(49.96, OPEN, reached=0)
    assert met and figure.startswith("49.96 ms")
    assert not dead_origin_verdict(50.0, OPEN, reached=0)[1]
    assert not dead_origin_verdict(1.0, [], reached=0)[1]


def test_an_animation_is_met_only_where_every_frame_went_out():
    every = {"gif": ["10"] * 5, "webp": ["10"] * 5}
    assert animation_verdict({"gif": 1.1, "webp": 1.2}, every, 10) == ("worst 1.20x", True)
    # One frame out of ten (issue #43): ten times cheaper per frame, and not met.
    figure, met = animation_verdict({"gif": 0.11, "webp": 0.12}, {"gif": ["1"] * 5, "webp": ["10"] * 5}, 10)
    assert not met and "gif: 1 (not 10)" in figure
    figure, met = animation_verdict({"gif": 0.1}, {"gif": [None] * 5}, 10)
    assert not met and "none" in figure
    assert not animation_verdict({"gif": 1.1}, {"gif": []}, 10)[1]
    figure, met = animation_verdict({"gif": 1.304}, {"gif": ["10"]}, 10)
    assert not met and figure == "worst 1.304x"


METHODS = ("ours", "centre", "libvips attention (sharp)", "libvips entropy (sharp)", "thumbor")
SIZES = ((256, 256), (1200, 400))


def means(ours: float, **others: float) -> dict:
    got = {}
    for size in SIZES:
        got[("ours", size)] = ours
        for method in METHODS[1:]:
            got[(method, size)] = others.get(method.split()[0], 0.5)
    return got


def test_gravity_auto_against_the_best_is_not_met_where_a_method_was_not_measured():
    assert auto_verdict(means(0.8), METHODS, SIZES) == ("at least the best on every size", True)
    figure, met = auto_verdict(means(0.8, thumbor=0.8004), METHODS, SIZES)
    assert not met and "(0.800 < 0.8004)" in figure
    # sharp could not be installed (issue #43): libvips dropped, and not "the best on every size".
    without = {key: value for key, value in means(0.8).items() if "libvips" not in key[0]}
    figure, met = auto_verdict(without, METHODS, SIZES)
    assert not met and "not measured: libvips attention (sharp) at 256x256" in figure


def test_anonymize_on_every_set_is_not_met_where_a_set_is_missing():
    good = dict.fromkeys(SETS, (0.99, 0.90, 1.2))
    (lead, lead_met), (area, area_met) = anonymize_verdicts(good, SETS)
    assert lead_met and area_met and lead == "on every set" and area == "largest 1.20x"
    # A set missing from ../shared/faces (issue #43): skipped before, "on every set" all the same.
    fewer = {name: scores for name, scores in good.items() if name != SETS[-1]}
    (lead, lead_met), (area, area_met) = anonymize_verdicts(fewer, SETS)
    assert not lead_met and not area_met and f"not measured: {SETS[-1]}" in lead and SETS[-1] in area
    (lead, lead_met), _ = anonymize_verdicts({**good, SETS[0]: (0.9296, 0.90, 1.2)}, SETS)
    assert not lead_met and f"{SETS[0]} -0.0004" in lead
    _, (area, area_met) = anonymize_verdicts({**good, SETS[0]: (0.99, 0.90, 1.5004)}, SETS)
    assert not area_met and area == "largest 1.5004x"
    assert not anonymize_verdicts({}, SETS)[0][1]


def test_shown_takes_numpy_figures():
    import numpy as np

    assert shown(np.float64(-0.0041), 0, 3) == "-0.004" and shown(np.float32(149.6), 150, 0) == "149.6"


def test_the_video_verdicts_are_judged_on_the_worst_clip():
    """Over several clips each verdict takes its worst one (least faces hidden over deface, the
    slowest, the largest area), named in the figure: one bad clip among good ones is not met."""
    from bench.verdicts import RECORDED
    from bench.video import judge

    def judged(rows: list) -> dict:
        start = len(RECORDED)
        judge(rows, "video defaults", gain=0.03, rate=1.5, area=1.5)
        verdicts = dict(zip(("gain", "rate", "area"), RECORDED[start:], strict=True))
        del RECORDED[start:]
        return verdicts

    good = [("festival", 1.6, 0.10, 1.1), ("masks", 1.7, 0.05, 1.2)]
    verdicts = judged(good)
    assert all(v.met for v in verdicts.values())
    assert [v.figure for v in verdicts.values()] == [
        "worst +0.050 (masks)",
        "slowest 1.60x (festival)",
        "largest 1.20x (masks)",
    ]
    bad = {"gain": ("meeting", 1.8, 0.02, 1.0), "rate": ("meeting", 1.4, 0.2, 1.0), "area": ("meeting", 1.8, 0.2, 1.6)}
    for broken, row in bad.items():
        verdicts = judged([*good, row])
        assert not verdicts[broken].met and "(meeting)" in verdicts[broken].figure, verdicts[broken]
        assert all(v.met for name, v in verdicts.items() if name != broken)


def test_the_verdict_table_lists_the_newest_issue_first_in_recorded_order_and_counts_what_was_met():
    from bench.verdicts import Verdict, record, verdict_table

    verdicts = [
        Verdict("#9", "old target", "1.0", True),
        Verdict("#44", "first of 44", "2.0", False),
        Verdict("#44", "second of 44", "3.0", True),
        Verdict("#10", "middle", "4.0", True),
    ]
    lines = verdict_table(verdicts).splitlines()
    assert lines[:2] == ["| issue | target | this run | |", "|---|---|---|---|"]
    assert lines[2:6] == [
        "| #44 | first of 44 | 2.0 | **not met** |",
        "| #44 | second of 44 | 3.0 | met |",
        "| #10 | middle | 4.0 | met |",
        "| #9 | old target | 1.0 | met |",
    ]
    assert lines[-1] == "3 of 4 targets met in this run."
    from bench.verdicts import RECORDED

    before = len(RECORDED)
    assert record("#1", "t", "f", 0) is False and RECORDED[-1] == Verdict("#1", "t", "f", False)
    del RECORDED[before:]


def test_the_table_of_this_run_is_what_its_sections_recorded():
    from bench.verdicts import RECORDED, Verdict, record, verdict_table

    kept = RECORDED[:]
    try:
        RECORDED.clear()
        assert record("", "no issue", "2.0", True) is True and record("#1", "first", "1.0", 1) is True
        assert record("#3", "third", "3.0", False) is False
        lines = verdict_table().splitlines()
        assert lines[2:5] == [
            "| #3 | third | 3.0 | **not met** |",
            "| #1 | first | 1.0 | met |",
            "|  | no issue | 2.0 | met |",
        ]
        assert lines[5:] == ["", "2 of 3 targets met in this run."]
        assert verdict_table([Verdict("#2", "given", "x", True)]).count("given") == 1 and "third" not in verdict_table(
            []
        )
    finally:
        RECORDED[:] = kept


def test_a_figure_too_close_to_its_limit_for_nine_decimals_is_printed_in_full():
    assert shown(1.3 + 1e-12, 1.3) == repr(1.3 + 1e-12)
    assert shown(1.30000000012345, 1.3) == "1.30000000012345"  # not cut at ten decimals either
