"""`make mutate`'s report (bench/mutate.py) speaks only of the modules it ran, and sets apart what
changes only wording (an error's message, a command line's help)."""

import pytest

from bench.mutate import report, selected, stale, wording_only

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


def test_a_module_whose_mutants_were_not_run_has_no_score():
    lines, every = report({"bench.verdicts.x_verdict__mutmut_1": "not checked"}, ["bench/verdicts.py"], {})
    assert lines[2].endswith("| 1 | none judged |") and not every


HELPED = "    parser.add_argument('--zoom', type=float, metavar='Z', help='0-1 (service default 0.5)')"


@pytest.mark.parametrize(
    "after, wording",
    [
        ("    parser.add_argument('--zoom', type=float, metavar='Z', help='XX0-1 (service default 0.5)XX')", True),
        ("    parser.add_argument('--zoom', type=float, metavar='Z', help=None)", True),
        ("    parser.add_argument('--zoom', type=float, help='0-1 (service default 0.5)')", True),
        ("    parser.add_argument('--ZOOM', type=float, metavar='Z', help='0-1 (service default 0.5)')", False),
        ("    parser.add_argument('--zoom', type=int, metavar='Z', help='0-1 (service default 0.5)')", False),
        ("    parser.add_argument('--zoom', metavar='Z', help='0-1 (service default 0.5)')", False),
        ("    parser.add_argument('--zoom', type=float, default=0.5, help='0-1 (service default 0.5)')", False),
    ],
)
def test_a_command_lines_help_text_is_wording_and_its_options_are_not(after, wording):
    assert wording_only([HELPED], [after]) is wording


def test_an_errors_message_is_wording_and_another_error_or_statement_is_not():
    raised = "        raise CommandError(f'-: give - once {x}')"
    assert wording_only([raised], ["        raise CommandError(f'XX-: give - once XX{x}')"])
    assert wording_only([raised], ["        raise CommandError(None)"])
    assert not wording_only([raised], ["        raise ValueError(f'-: give - once {x}')"])
    assert not wording_only(["    for command in (batch, video):"], ["    for command in (batch,):"])
    assert not wording_only([HELPED], [])
    assert not wording_only([], [])
