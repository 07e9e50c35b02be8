"""d2lattn.grading.master.cases: parsing, judging, running and reporting a case; the requests
sent to the sandbox."""
import time

from grading_support import plain

from d2lattn.grading.master import cases
from d2lattn.grading.protocol import CaseRecord, CaseResult

# --- test cases: parsing, judging, running, reporting ---------------------------------------

def test_parse_case_joins_the_messages_and_keeps_setup_and_checks():
    message, examples = cases.parse_case("# rows sum\n# to one\n>>> X = 2\n>>> f(X,\n...   1)\n[3]")
    assert message == "rows sum to one"
    assert [(e.source, e.want) for e in examples] == [("X = 2\n", ""), ("f(X,\n  1)\n", "[3]\n")]
    assert cases.is_format("format: a tuple") and not cases.is_format("the format of a tuple")


def test_a_call_request_holds_calls_and_data_never_sources_or_expected_values():
    case = {"code": "# doubles\n>>> x = 4\n>>> double(x)\n8", "hidden": True,
            "expected": [plain(8)], "call": {"skip": 1, "scope": "c2NvcGU=",
                                             "steps": [{"call": "double(x)", "inputs": None,
                                                        "want": True}]}}
    request = cases.call_request(7, "q", case)
    assert request == {"id": 7, "question": "q", "scope": "c2NvcGU=", "salt": 0, "steps": [
        {"call": "double(x)", "inputs": None, "want": True}]}
    assert "x = 4" not in str(request) and "8" not in str(request)
    assert cases.in_case(case, CaseRecord([], "E", 0)).at == 1  # counted over the case
    assert cases.in_case(case, None) is None


def test_judge_compares_each_value_and_reports_the_first_failure():
    code = "# doubles\n>>> double(2)\n4\n>>> double(3)\n6"
    good = CaseRecord([plain(4), plain(6)])
    expected = [plain(4), plain(6)]
    assert cases.judge(code, good, expected) == CaseResult(True, "doubles")
    bad = CaseRecord([plain(4), plain(7)])
    assert cases.judge(code, bad, expected) == CaseResult(
        False, "doubles", source="double(3)\n", expected="6", received="7")
    raised = CaseRecord([], "ValueError: no", 0)
    assert cases.judge(code, raised, expected).received == "raised ValueError: no"
    assert cases.judge(code, CaseRecord([plain(4)]), expected).received == "no value"
    assert "no result" in cases.judge(code, None, expected).received


def test_run_test_runs_setup_steps_then_checks_in_a_copy_of_the_namespace():
    test = {"name": "q", "suites": [{"cases": [
        {"code": ">>> y = double(3)\n>>> y + 1\n7", "hidden": False},
        {"code": "# doubles\n>>> double(2)\n4\n>>> double(3)\n7", "hidden": False},
        {"code": ">>> 2\n3", "hidden": True}]}]}
    env = {"double": lambda x: 2 * x}
    assert cases.run_test(test, env) == [
        CaseResult(True, ""),
        CaseResult(False, "doubles", source="double(3)\n", expected="7", received="6")]
    assert "y" not in env  # each case runs in a fresh copy of the namespace
    assert [r.hidden for r in cases.run_test(test, env, hidden=True)] == [False, False, True]


def test_run_test_turns_errors_and_endless_loops_into_failures():
    def stub(x):
        raise NotImplementedError

    test = {"name": "q", "suites": [{"cases": [{"code": ">>> f(1)\n2"},
                                               {"code": ">>> 1 / 0\n1"},
                                               {"code": ">>> while True: pass\n>>> 1\n1"}]}]}
    start = time.monotonic()
    results = cases.run_test(test, {"f": stub}, time_limit=0.2)
    assert [r.received for r in results] == [
        "raised NotImplementedError", "raised ZeroDivisionError: division by zero",
        "raised TimeoutError: took longer than 0.2 s"]
    assert time.monotonic() - start < 3


def test_format_report_shows_public_failures_and_hidden_cases_by_their_message_only():
    results = [CaseResult(True, "easy"),
               CaseResult(False, "hard", source="f(2)\n", expected="4", received="5"),
               CaseResult(True, "doubles", hidden=True),
               CaseResult(False, "large inputs", source="f(9)\n", expected="18",
                          received="19", hidden=True)]
    report = cases.format_report("q1", results)
    assert report == "\n".join([
        "q1: 1 of 2 public cases passed", "  case 1 passed: easy", "  case 2 FAILED: hard",
        "      >>> f(2)", "      expected: 4", "      received: 5",
        "  hidden cases: 1 of 2 passed", "  hidden case 1 passed: doubles",
        "  hidden case 2 FAILED: large inputs"])
    assert not any(text in report for text in ("f(9)", "18", "19"))
