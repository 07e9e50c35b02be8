"""d2lattn.grading.student: check() and register() in a student's notebook."""

import numpy as onp
import pytest
from grading_support import master, run_cells, split

from d2lattn.grading import check, register, student
from d2lattn.grading.master.notebook import cell_source

# --- check() and register() -----------------------------------------------------------------

@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(student, "_TESTS", {})


def test_released_notebook_checks_from_its_own_cells(tmp_path, registry, capsys):
    """The student notebook alone (no bundle, no neighbour file) registers its public tests."""
    student_nb, _ = split()
    env = run_cells(dict(student_nb, cells=student_nb["cells"][:4]))  # imports, registration
    env["check"]("q1_softmax", env)
    out = capsys.readouterr().out
    assert out.startswith("q1_softmax: 0 of 2 public cases passed\n")
    assert "received: raised NameError: name 'softmax' is not defined" in out
    assert "hidden cases:" not in out and "1000.0" not in out


def test_check_passes_a_right_answer_and_shows_expected_and_received_for_a_wrong_one(
        tmp_path, registry, capsys):
    student_nb, _ = split()
    env = run_cells(dict(student_nb, cells=student_nb["cells"][:4]))
    exec(cell_source(master()["cells"][3]), env)                 # the master's solution
    check("q1_softmax", env)
    assert capsys.readouterr().out == ("q1_softmax: 2 of 2 public cases passed\n"
                                       "  case 1 passed: equal scores give equal weights\n"
                                       "  case 2 passed: each row of a matrix is normalised "
                                       "on its own\n(hidden cases, if any, run when grading)\n")
    exec("def softmax(X):\n    return np.exp(X) / np.exp(X).sum()", env)   # normalises all
    check("q1_softmax", env)
    scores = onp.array([[0.0, onp.log(3.0)], [5.0, 5.0]])
    received = onp.exp(scores) / onp.exp(scores).sum()
    out = capsys.readouterr().out
    assert "q1_softmax: 1 of 2 public cases passed" in out
    assert "  case 2 FAILED: each row of a matrix is normalised on its own\n" \
           "      >>> softmax(np.array([[0.0, np.log(3.0)], [5.0, 5.0]]))\n" \
           "      expected: [[0.25, 0.75], [0.5, 0.5]]\n" \
           f"      received: {' '.join(repr(received).split())}\n" in out


def test_check_uses_the_callers_globals_by_default(registry, capsys):
    register([{"name": "qg", "suites": [{"cases": [{"code": ">>> GLOBAL_ANSWER\n41",
                                                    "hidden": False}]}]}])
    check("qg")
    assert "received: 42" in capsys.readouterr().out


GLOBAL_ANSWER = 42


def test_check_and_register_reject_bad_arguments(registry):
    with pytest.raises(ValueError, match=r"question must be one of \[\] \(run the notebook's "
                                         r"tests cell first\), got 'q9'"):
        check("q9")
    with pytest.raises(TypeError, match="question must be a str such as 'q1_softmax', got 3"):
        check(3)
    register([{"name": "q1", "suites": []}])
    with pytest.raises(TypeError, match="env must be a dict of names, got list"):
        check("q1", [])
    with pytest.raises(TypeError, match="tests must be a list of OK-format dicts"):
        register({"name": "q1", "suites": []})
    with pytest.raises(TypeError, match="tests must be a list of OK-format dicts"):
        register([{"suites": []}])


def test_check_stops_at_an_interrupt_and_reports_values_it_cannot_compare(registry, capsys):
    """The notebook's Stop button ends check() at once, not after each remaining case's own
    time limit; an answer too large for a float is a wrong value, not an OverflowError."""
    import time

    register([{"name": "q", "forbid": [], "suites": [{"cases": [
        {"code": "# huge\n>>> f()\n1", "hidden": False},
        {"code": "# stopped\n>>> g()\n1", "hidden": False},
        {"code": "# slow\n>>> h()\n1", "hidden": False}]}]}])

    def interrupted():
        raise KeyboardInterrupt

    start = time.monotonic()
    check("q", {"f": lambda: 10 ** 400, "g": interrupted, "h": lambda: time.sleep(30)})
    out = capsys.readouterr().out
    assert time.monotonic() - start < 5
    assert out == "q: check stopped (interrupted); run the cell again to check\n"
    check("q", {"f": lambda: 10 ** 400, "g": lambda: 1, "h": lambda: 1})
    out = capsys.readouterr().out
    assert out.startswith("q: 2 of 3 public cases passed\n  case 1 FAILED: huge\n")
    assert "received: 1000000000" in out


def test_check_stops_a_question_at_its_first_case_out_of_time(registry, capsys, monkeypatch):
    """An endless loop in an answer costs one case's time limit, not one per case (180 s for
    a question of three cases): the cases after it are not run and say so."""
    monkeypatch.setattr(student, "CHECK_CASE_SECONDS", 0.5)
    calls = {"b": 0, "c": 0}
    register([{"name": "q", "forbid": [], "suites": [{"cases": [
        {"code": "# quick\n>>> a()\n1", "hidden": False},
        {"code": "# loops\n>>> b()\n1", "hidden": False},
        {"code": "# next\n>>> c()\n1", "hidden": False},
        {"code": "# format: an int\n>>> c()\n1", "hidden": False}]}]}])

    def loop():
        while True:
            calls["b"] += 1

    def count():
        calls["c"] += 1
        return 1

    check("q", {"a": lambda: 1, "b": loop, "c": count})
    out = capsys.readouterr().out
    assert calls["c"] == 0 and calls["b"] > 0
    assert out.startswith("q: 1 of 3 public cases passed (format checks: 0 of 1)\n"
                          "  case 1 passed: quick\n  case 2 FAILED: loops\n")
    assert "      received: raised TimeoutError: took longer than 0.5 s\n" in out
    assert out.count("      received: not run: an earlier case took longer than 0.5 s\n") == 2
    check("q", {"a": lambda: 1, "b": lambda: 1, "c": lambda: 1})  # the same cases run again
    assert capsys.readouterr().out.startswith("q: 3 of 3 public cases passed (format checks: "
                                              "1 of 1)\n")
