"""`make mutate`'s report (bench/mutate.py) speaks only of the modules it ran."""

from bench.mutate import report, selected, stale

KNOWN = {"gateway.web.url.options.x_trim__mutmut_8": "why", "bench.verdicts.x_verdict__mutmut_1": "why"}
# After a run of bench/verdicts.py alone: another module's listed mutant has a status from no run of it.
FOUND = {
    "gateway.web.url.options.x_trim__mutmut_8": "not checked",
    "bench.verdicts.x_verdict__mutmut_1": "killed",
    "bench.verdicts.x_verdict__mutmut_2": "no tests",  # (a survivor would have its mutated file read)
    "bench.verdicts_extra.x_other__mutmut_1": "survived",
}


def test_a_run_of_one_module_calls_only_its_own_listed_mutants_stale():
    assert stale(FOUND, ["bench/verdicts.py"], KNOWN) == ["bench.verdicts.x_verdict__mutmut_1"]
    assert stale(FOUND, [], KNOWN) == sorted(KNOWN)  # every module run


def test_modules_select_their_own_mutants_only():
    assert selected("bench.verdicts.x_verdict__mutmut_2", ["bench/verdicts.py"])
    assert not selected("bench.verdicts_extra.x_other__mutmut_1", ["bench/verdicts.py"])
    assert not selected("gateway.web.url.options.x_trim__mutmut_8", ["bench/verdicts.py"])
    assert selected("gateway.web.url.options.x_trim__mutmut_8", [])
    lines, every = report(FOUND, ["bench/verdicts.py"], KNOWN)
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| bench.verdicts"] and not every
