"""d2lattn.grading: the case format, release, check(), the forbidden-name scan, batch grading.

The batch tests grade one folder holding the sample master (tests/data/grading/sample.ipynb),
its released student version and every broken submission of issue 6 (built below from the
master), each in its own kernel; the rest runs in this process.
"""
import copy
import csv
import importlib.util
import json
import re
import time
from pathlib import Path

import mxnet as mx
import numpy as onp
import pytest

from d2lattn.grading import cases, check, grade, register, release, student
from d2lattn.grading.__main__ import main
from d2lattn.grading.batch import load_bundle
from d2lattn.grading.forbid import forbidden_uses
from d2lattn.grading.notebook import (STUB, NotebookError, cell_source, is_grader_cell,
                                      parse_options, question_of, read_notebook, split_tests,
                                      strip_solutions)
from d2lattn.grading.releasing import split_master

SAMPLE = Path(__file__).parent / "data" / "grading" / "sample.ipynb"
QUESTIONS = {"q1_softmax": 2, "q2_nw": 3, "q3_weight": 1}  # the sample's questions and points
needs_kernel = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("nbclient", "ipykernel")),
    reason="grading runs notebooks with nbclient and ipykernel")


def master():
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def released(tmp_path):
    """The sample's student notebook (dict) and bundle tests, released into tmp_path."""
    path, = release(SAMPLE, tmp_path / "rel")
    _, tests = load_bundle(tmp_path / "rel" / "autograder")
    return json.loads(path.read_text(encoding="utf-8")), tests


def cell_index(nb, question):
    return next(i for i, cell in enumerate(nb["cells"]) if question_of(cell) == question)


def code_cell(text):
    return {"cell_type": "code", "metadata": {}, "source": text, "outputs": [],
            "execution_count": None}


def hidden_lines(tests):
    """The messages and example sources of the hidden cases of ``tests`` (but short ones such
    as ``>>> X``, which any notebook may contain)."""
    lines = [line.lstrip("#>").strip() for test in tests
             for case in cases.cases_of(test, True) if case["hidden"]
             for line in case["code"].splitlines() if line.startswith(("#", ">>>"))]
    return [line for line in lines if len(line) > 8]


def run_cells(nb):
    """Execute a notebook's code cells (no magics) in one fresh namespace, as a kernel would."""
    env = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec(cell_source(cell), env)
    return env


# --- test cases: parsing, comparing, running, reporting ------------------------------------

def test_parse_case_joins_the_messages_and_keeps_setup_and_checks():
    message, examples = cases.parse_case("# rows sum\n# to one\n>>> X = 2\n>>> f(X,\n...   1)\n[3]")
    assert message == "rows sum to one"
    assert [(e.source, e.want) for e in examples] == [("X = 2\n", ""), ("f(X,\n  1)\n", "[3]\n")]


@pytest.mark.parametrize("received, want, ok", [
    (onp.array([0.5, 0.5]), "array([0.5, 0.5])", True),         # doctest: the same repr
    (onp.array([0.25, 0.75]), "[1 / 4, 3 / 4]", True),           # an expression, evaluated
    (onp.array([1 / 3]), "[0.333333]", True),                    # within rtol 1e-5
    (onp.array([1 / 3]), "[0.3333]", False),                     # beyond it
    (onp.array([[0.5, 0.5]]), "[0.5, 0.5]", False),              # shapes must match
    (onp.array([onp.nan, 0.0]), "[1.0, 0.0]", False),            # NaN never passes
    (onp.array([onp.nan]), "array([nan])", True),                # ... unless the repr says so
    ("abc", "'abc'", True), ("abc", "'abd'", False), (Ellipsis, "0.75", False),
    (None, "undefined_name", False),                             # a broken expectation fails
    ({"a": 1}, "{'a': 1}", True), ([1, "x"], "[1, 'x']", True),
])
def test_matches_by_repr_or_by_value(received, want, ok):
    assert cases.matches(received, want, {}) is ok


class AlwaysEqual:
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("want", ["[1.0, 2.0]", "'abc'", "{'a': 1}", "None"])
def test_matches_rejects_an_object_that_claims_to_equal_everything(want):
    assert not cases.matches(AlwaysEqual(), want, {})


def test_equal_reads_mxnet_arrays_through_asnumpy(cpu1):
    x = mx.np.array([0.25, 0.75], ctx=cpu1)
    assert cases.equal(x, [0.25, 0.75]) and not cases.equal(x, [0.75, 0.25])


def test_run_case_runs_setup_steps_then_checks_in_the_given_namespace():
    env = {"double": lambda x: 2 * x}
    assert cases.run_case(">>> y = double(3)\n>>> y + 1\n7", env) == {"passed": True, "message": ""}
    assert env["y"] == 6


def test_run_case_reports_the_first_failing_example_with_expected_and_received():
    result = cases.run_case("# doubles\n>>> double(2)\n4\n>>> double(3)\n7\n>>> double(4)\n9",
                            {"double": lambda x: 2 * x})
    assert result == {"passed": False, "message": "doubles", "source": "double(3)\n",
                      "expected": "7", "received": "6"}


def test_run_case_turns_errors_and_endless_loops_into_failures():
    def stub(x):
        raise NotImplementedError

    assert cases.run_case(">>> f(1)\n2", {"f": stub})["received"] == "raised NotImplementedError"
    assert cases.run_case(">>> 1 / 0\n1", {})["received"] == \
        "raised ZeroDivisionError: division by zero"
    start = time.monotonic()
    result = cases.run_case(">>> while True: pass", {}, time_limit=0.2)
    assert result["received"] == "raised CaseTimeout: took longer than 0.2 s"
    assert time.monotonic() - start < 2


def test_run_test_runs_hidden_cases_only_when_asked():
    test = {"name": "q", "suites": [{"cases": [{"code": ">>> 1\n1", "hidden": False},
                                               {"code": ">>> 2\n3", "hidden": True}]}]}
    assert [r["passed"] for r in cases.run_test(test, {})] == [True]
    assert [(r["hidden"], r["passed"]) for r in cases.run_test(test, {}, hidden=True)] == \
        [(False, True), (True, False)]


def test_format_report_shows_public_failures_and_only_counts_hidden_cases():
    results = [{"hidden": False, "passed": True, "message": "easy"},
               {"hidden": False, "passed": False, "message": "hard", "source": "f(2)\n",
                "expected": "4", "received": "5"},
               {"hidden": True, "passed": False, "message": "secret", "source": "f(9)\n",
                "expected": "18", "received": "19"}]
    assert cases.format_report("q1", results) == "\n".join([
        "q1: 1 of 2 public cases passed", "  case 1 passed: easy", "  case 2 FAILED: hard",
        "      >>> f(2)", "      expected: 4", "      received: 5",
        "  hidden cases: 0 of 1 passed"])


# --- the master format ----------------------------------------------------------------------

def test_strip_solutions_replaces_regions_and_one_line_solutions():
    text = ("def f(x):\n    '''doc'''\n    # BEGIN SOLUTION\n    y = x + 1\n    return y\n"
            "    # END SOLUTION\nanswer = 42  # SOLUTION\na, b = 1, 2 # SOLUTION\nz = 1")
    assert strip_solutions(text, "cell 1") == (
        f"def f(x):\n    '''doc'''\n    {STUB}\nanswer = ...\na, b = ...\nz = 1")


@pytest.mark.parametrize("text, error", [
    ("# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION",
     r"cell 1, line 2: # BEGIN SOLUTION inside a solution region"),
    ("x = 1\n# END SOLUTION", r"cell 1, line 2: # END SOLUTION without # BEGIN SOLUTION"),
    ("# BEGIN SOLUTION\nx = 1", r"cell 1: # BEGIN SOLUTION without # END SOLUTION"),
    ("# BEGIN SOLUTIONS\nx = 1", r"cell 1, line 1: unrecognised solution marker"),
    ("x += 1  # SOLUTION", r"cell 1, line 1: unrecognised solution marker"),
])
def test_strip_solutions_rejects_broken_markers_instead_of_leaking(text, error):
    with pytest.raises(ValueError, match=error):
        strip_solutions(text, "cell 1")


def test_split_tests_splits_cases_at_blank_lines_and_hidden_ones_at_the_marker():
    public, hidden = split_tests("# a\n>>> 1\n1\n\n>>> 2\n2\n# HIDDEN\n# c\n>>> 3\n3", "cell 5")
    assert public == ["# a\n>>> 1\n1", ">>> 2\n2"] and hidden == ["# c\n>>> 3\n3"]
    assert split_tests(">>> 1\n1", "cell 5") == ([">>> 1\n1"], [])


@pytest.mark.parametrize("text, error", [
    (">>> 1\n1\n# HIDDEN\n>>> 2\n2\n# HIDDEN\n>>> 3\n3", r"cell 5: more than one # HIDDEN line"),
    ("# just a comment\n\n>>> 1\n1", r"cell 5: a case without a >>> example"),
])
def test_split_tests_rejects_malformed_tests(text, error):
    with pytest.raises(ValueError, match=error):
        split_tests(text, "cell 5")


def test_parse_options_defaults_points_and_forbidden_names():
    assert parse_options("q", "") == {"points": 1.0, "forbid": []}
    assert parse_options("q", " points=2.5 forbid=d2lattn.masked_softmax,d2lattn.bleu") == \
        {"points": 2.5, "forbid": ["d2lattn.masked_softmax", "d2lattn.bleu"]}


@pytest.mark.parametrize("options, error", [
    ("points=0", r"question q: points must be a positive number, got '0'"),
    ("points=two", r"question q: points must be a positive number, got 'two'"),
    ("points=nan", r"points must be a positive number"),
    ("bonus=1", r"question q: unknown option 'bonus=1'"),
])
def test_parse_options_rejects_bad_options(options, error):
    with pytest.raises(ValueError, match=error):
        parse_options("q", options)


@pytest.mark.parametrize("text, reason", [
    ("", "empty file"), ("  \n", "empty file"), ('{"cells": [', "not valid JSON"),
    ("[1, 2]", r"not a Jupyter notebook \(no list of cells\)"),
    ('{"cells": [1]}', "not a Jupyter notebook"),
])
def test_read_notebook_says_why_a_file_is_not_a_notebook(tmp_path, text, reason):
    path = tmp_path / "x.ipynb"
    path.write_text(text)
    with pytest.raises(NotebookError, match=reason):
        read_notebook(path)
    with pytest.raises(NotebookError, match="a folder, not a notebook file"):
        read_notebook(tmp_path)


def test_question_of_reads_metadata_first_then_the_header_line():
    header = code_cell("# QUESTION q7 points=2\nx = 1")
    assert question_of(header) == "q7"
    assert question_of(dict(code_cell("x = 1"), metadata={"d2lattn": {"question": "q8"}})) == "q8"
    assert question_of(code_cell("x = 1")) is None
    assert question_of(dict(header, cell_type="markdown")) is None


# --- release --------------------------------------------------------------------------------

def test_release_writes_the_student_notebook_and_the_bundle(tmp_path):
    student_nb, tests = released(tmp_path)
    assert [t["name"] for t in tests] == list(QUESTIONS)
    assert [t["points"] for t in tests] == list(QUESTIONS.values())
    assert tests[0]["forbid"] == ["d2lattn.masked_softmax"]
    assert [c["hidden"] for c in tests[0]["suites"][0]["cases"]] == [False, False, True, True]
    assert tests[0]["suites"][0]["cases"][2]["code"] == \
        "# large scores do not overflow\n>>> softmax(np.array([1000.0, 0.0]))\n[1.0, 0.0]"
    # Cells: the master's, the registration after the first code cell, check cells for tests.
    kinds = [("grader" if is_grader_cell(c) else question_of(c) or c["cell_type"])
             for c in student_nb["cells"]]
    assert kinds == ["markdown", "code", "grader", "markdown", "q1_softmax", "grader",
                     "markdown", "q2_nw", "grader", "markdown", "q3_weight", "grader"]
    assert [cell_source(c) for c in student_nb["cells"] if "grading-check" in
            c["metadata"].get("tags", [])] == [f'check("{q}")' for q in QUESTIONS]
    registration = student_nb["cells"][2]["metadata"]
    assert registration["jupyter"] == {"source_hidden": True} and registration["cellView"] == "form"
    assert student_nb["metadata"]["d2lattn"] == {"assignment": "sample"}
    assert all(not c.get("outputs") and c.get("id") for c in student_nb["cells"])


def test_released_notebook_holds_stubs_and_no_solution_and_no_hidden_test(tmp_path):
    student_nb, tests = released(tmp_path)
    text = (tmp_path / "rel" / "sample.ipynb").read_text()
    sources = "\n".join(cell_source(c) for c in student_nb["cells"])
    assert cell_source(student_nb["cells"][4]).endswith(f"    {STUB}")
    assert cell_source(student_nb["cells"][10]) == "# QUESTION q3_weight points=1\nanswer_q3 = ..."
    for solution in ["X.max(axis=-1, keepdims=True)", "scores.max(axis=1", "0.75  #"]:
        assert solution not in text and solution not in sources
    assert len(hidden_lines(tests)) == 9
    for line in hidden_lines(tests):
        assert line not in text and line not in sources, line


def test_released_notebook_is_valid_nbformat(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    release(SAMPLE, tmp_path)
    nbformat.validate(nbformat.read(tmp_path / "sample.ipynb", as_version=4))


@pytest.mark.parametrize("edit, error", [
    (lambda cells: cells.pop(4), r"questions without a tests cell: \['q1_softmax'\]"),
    (lambda cells: cells.pop(3), r"tests cells without a question: \['q1_softmax'\]"),
    (lambda cells: cells.append(copy.deepcopy(cells[3])), r"question q1_softmax appears twice"),
    (lambda cells: cells.append(copy.deepcopy(cells[4])), r"two tests cells for q1_softmax"),
    (lambda cells: cells[4].update(source="# TESTS q1_softmax\n>>>1\n1"),
     r"sample, tests of q1_softmax: .*lacks blank after >>>"),
])
def test_split_master_rejects_inconsistent_masters(edit, error):
    nb = master()
    edit(nb["cells"])
    with pytest.raises(ValueError, match=error):
        split_master(nb, "sample")


def test_release_refuses_bad_paths_and_to_overwrite_the_masters(tmp_path):
    with pytest.raises(ValueError, match="source must be a folder of master notebooks or a "):
        release(tmp_path / "missing", tmp_path / "out")
    with pytest.raises(ValueError, match="source holds no .ipynb file"):
        release(tmp_path, tmp_path / "out")
    (tmp_path / "sample.ipynb").write_text(SAMPLE.read_text())
    with pytest.raises(ValueError, match="out must not be the folder of the master notebooks"):
        release(tmp_path, tmp_path)
    assert (tmp_path / "sample.ipynb").read_text() == SAMPLE.read_text()


# --- check() and register() -----------------------------------------------------------------

@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(student, "_TESTS", {})


def test_released_notebook_checks_from_its_own_cells(tmp_path, registry, capsys):
    """The student notebook alone (no bundle, no neighbour file) registers its public tests."""
    student_nb, _ = released(tmp_path)
    env = run_cells(dict(student_nb, cells=student_nb["cells"][:4]))  # imports, registration
    env["check"]("q1_softmax", env)
    out = capsys.readouterr().out
    assert out.startswith("q1_softmax: 0 of 2 public cases passed\n")
    assert "received: raised NameError: name 'softmax' is not defined" in out
    assert "hidden cases:" not in out and "1000.0" not in out


def test_check_passes_a_right_answer_and_shows_expected_and_received_for_a_wrong_one(
        tmp_path, registry, capsys):
    student_nb, _ = released(tmp_path)
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


# --- forbidden names ------------------------------------------------------------------------

@pytest.mark.parametrize("code, line", [
    ("from d2lattn import masked_softmax as ms\nf = ms", 1),
    ("import d2lattn\ndef f(X):\n    return d2lattn.masked_softmax(X, None)", 3),
    ("import d2lattn as d2l\nf = d2l.attention.masked_softmax", 2),
    ("from d2lattn.attention import masked_softmax", 1),
    ("import d2lattn.attention as att\nf = att.masked_softmax", 2),
    ("from d2lattn import attention\nf = attention.masked_softmax", 2),
    ("from d2lattn import *", 1),
    ("import d2lattn\nf = getattr(d2lattn, 'masked_softmax')", 2),
    ("%pip install foo\nimport d2lattn\nf = d2lattn.masked_softmax", 3),
])
def test_forbidden_uses_finds_the_reference_however_it_is_reached(code, line):
    assert forbidden_uses([(4, code)], ["d2lattn.masked_softmax"]) == \
        [f"d2lattn.masked_softmax (cell 4, line {line})"]


def test_forbidden_uses_follows_imports_across_cells():
    cells = [(2, "import d2lattn as d"), (5, "def f(X):\n    return d.masked_softmax(X, None)")]
    assert forbidden_uses(cells, ["d2lattn.masked_softmax"]) == \
        ["d2lattn.masked_softmax (cell 5, line 2)"]


@pytest.mark.parametrize("code", [
    "def masked_softmax(X, valid_lens):\n    return masked_softmax_helper(X)",  # their own
    "import d2lattn\nd2lattn.set_seed(0)",                                     # another name
    "import mylib\nf = mylib.masked_softmax",                                  # another package
    "obj.masked_softmax(X)",                                                   # not from d2lattn
    "def broken(:\n    d2lattn.masked_softmax",                                # cannot run
])
def test_forbidden_uses_leaves_other_code_alone(code):
    assert forbidden_uses([(1, code)], ["d2lattn.masked_softmax"]) == []


# --- grading a batch ------------------------------------------------------------------------

TIMEOUT, MAX_OUTPUT = 4, 100_000
CHEAT = '''# QUESTION q1_softmax points=2 forbid=d2lattn.masked_softmax
from d2lattn import masked_softmax
from mxnet import np as mxnp

def softmax(X):
    X = np.asarray(X, dtype=float)
    out = masked_softmax(mxnp.array(X.reshape(1, -1, X.shape[-1])), None)
    return out.asnumpy().reshape(X.shape)'''
FAKE_RESULTS = f'''from IPython.display import display
display({{{cases.MIME!r}: {{"nonce": "guess", "results": {{}}}}}}, raw=True)
def publish_results(*args):
    pass
run_test = check = register = publish_results'''


def broken_submissions(tmp_path):
    """Issue 6's broken cases, built from the master and the released notebook."""
    base, (student_nb, _) = master(), released(tmp_path)
    q1, q2 = cell_index(base, "q1_softmax"), cell_index(base, "q2_nw")

    def edited(nb, edit):
        nb = copy.deepcopy(nb)
        edit(nb["cells"])
        return nb

    notebooks = {
        "master": base, "student": student_nb,
        "raises": edited(base, lambda c: c[q2].update(source="# QUESTION q2_nw\n1 / 0")),
        "dies": edited(base, lambda c: c.insert(q1 + 1, code_cell("import os\nos._exit(1)"))),
        "loops": edited(base, lambda c: c.insert(q1 + 1, code_cell("while True:\n    pass"))),
        "prints": edited(base, lambda c: c.insert(2, code_cell("print('x' * 5_000_000)"))),
        "deleted": edited(base, lambda c: c.pop(q2)),
        "reordered": edited(base, lambda c: c.reverse()),
        "forbidden": edited(base, lambda c: c[q1].update(source=CHEAT)),
        "tampered": edited(student_nb, lambda c: c.append(code_cell(FAKE_RESULTS))),
        "empty_notebook": dict(base, cells=[]),
    }
    folder = tmp_path / "submissions"
    folder.mkdir()
    for name, nb in notebooks.items():
        (folder / f"{name}.ipynb").write_text(json.dumps(nb))
    (folder / "not_json.ipynb").write_text('{"cells": [{"cell_type": "code", "sour')
    (folder / "empty_file.ipynb").write_text("")
    (folder / "unzipped").mkdir()
    (folder / ".DS_Store").write_text("ignored: hidden files are not submissions")
    return folder


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Grade every submission once: (rows, out folder, log lines, elapsed seconds)."""
    if not all(importlib.util.find_spec(name) for name in ("nbclient", "ipykernel")):
        pytest.skip("grading runs notebooks with nbclient and ipykernel")
    tmp_path = tmp_path_factory.mktemp("grading")
    folder, log = broken_submissions(tmp_path), []
    start = time.monotonic()
    rows = grade(folder, tmp_path / "rel" / "autograder", tmp_path / "grades", timeout=TIMEOUT,
                 case_timeout=2, max_output=MAX_OUTPUT, log=log.append)
    return rows, tmp_path / "grades", log, time.monotonic() - start


FULL = {q: (p, r"^\d of \d cases passed$") for q, p in QUESTIONS.items()}
EXPECTED = {
    "master": FULL,
    "reordered": FULL,
    "student": {q: (0, r"^0 of \d cases passed; failed: public case 1 \(") for q in QUESTIONS},
    "tampered": {q: (0, r"^0 of \d cases passed") for q in QUESTIONS},
    "raises": dict(FULL, q2_nw=(0, r"^0 of 4 cases passed")),
    "dies": {q: (0, r"^the kernel died in cell 5$") for q in QUESTIONS},
    "loops": {"q1_softmax": (2, rf"^4 of 4 cases passed; time limit of {TIMEOUT} s reached in "
                                r"cell 5; later cells did not run$"),
              "q2_nw": (0, r"^0 of 4 cases passed; failed: .*; time limit of 4 s"),
              "q3_weight": (0, r"^0 of 1 cases passed; failed: .*; time limit of 4 s")},
    "prints": {q: (p, rf"^\d of \d cases passed; outputs beyond {MAX_OUTPUT} characters were "
                      r"dropped$") for q, p in QUESTIONS.items()},
    "deleted": dict(FULL, q2_nw=(0, r"^question cell missing$")),
    "forbidden": {"q1_softmax": (0, r"^uses d2lattn.masked_softmax \(cell 4, line 2\), which "
                                    r"this question forbids$")},
    "empty_notebook": {q: (0, r"^question cell missing$") for q in QUESTIONS},
    "not_json": {q: (0, r"^not valid JSON \(") for q in QUESTIONS},
    "empty_file": {q: (0, r"^empty file$") for q in QUESTIONS},
    "unzipped": {q: (0, r"^a folder, not a notebook file$") for q in QUESTIONS},
}


def test_batch_gives_every_submission_a_row_per_question(batch):
    rows, *_ = batch
    assert sorted({row.student for row in rows}) == sorted(EXPECTED)
    assert sorted((row.student, row.question) for row in rows) == \
        sorted((student, q) for student in EXPECTED for q in QUESTIONS)
    assert all(row.max == QUESTIONS[row.question] and row.reason for row in rows)


@pytest.mark.parametrize("student_name", sorted(EXPECTED))
def test_batch_scores_and_reasons(batch, student_name):
    rows, *_ = batch
    got = {row.question: row for row in rows if row.student == student_name}
    for question, (points, reason) in EXPECTED[student_name].items():
        assert got[question].points == points, got[question]
        assert re.search(reason, got[question].reason), got[question]


def test_batch_writes_the_csv_as_returned(batch):
    rows, out, *_ = batch
    with open(out / "grades.csv", newline="") as table:
        written = list(csv.reader(table))
    assert written[0] == ["student", "question", "points", "max", "reason"]
    assert written[1:] == [[r.student, r.question, f"{r.points:g}", f"{r.max:g}", r.reason]
                           for r in rows]


def test_feedback_names_failing_public_cases_and_hides_hidden_ones(batch, tmp_path):
    rows, out, *_ = batch
    assert sorted(path.stem for path in (out / "feedback").iterdir()) == sorted(EXPECTED)
    text = (out / "feedback" / "raises.md").read_text()
    assert text.startswith("# sample: raises\n\nScore: 3 of 6 points (graded in ")
    assert "Cells that raised an error:\n\n- cell 7: ZeroDivisionError: division by zero\n" in text
    assert "## q2_nw: 0 of 3 points" in text
    assert "      >>> nw_predict(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([0.5]))\n" \
           "      expected: [0.5]\n" \
           "      received: raised NameError: name 'nw_predict' is not defined" in text
    assert "hidden cases: 0 of 2 passed" in text
    _, tests = released(tmp_path)
    for path in (out / "feedback").iterdir():
        assert not any(line in path.read_text() for line in hidden_lines(tests)), path


def test_executed_notebooks_keep_capped_outputs_and_no_grader_cell(batch):
    _, out, *_ = batch
    printed = json.loads((out / "executed" / "prints.ipynb").read_text())
    assert len(json.dumps(printed)) < MAX_OUTPUT + 10_000
    assert len(printed["cells"]) == 5                      # the master's 4 code cells + print
    for path in (out / "executed").iterdir():
        assert "publish_results(" not in path.read_text() or path.stem == "tampered"
    assert not (out / "executed" / "not_json.ipynb").exists()


def test_batch_time_per_submission(batch):
    """One line per student; the loop costs the time limit, the others about a kernel start."""
    *_, log, seconds = batch
    times = {line.split(":")[0]: float(re.search(r"in ([\d.]+) s$", line)[1]) for line in log}
    print(f"\ngraded {len(times)} submissions in {seconds:.1f} s:",
          ", ".join(f"{name} {t:.1f} s" for name, t in times.items()))
    assert set(times) == set(EXPECTED)
    assert times["loops"] >= TIMEOUT and times["not_json"] < 0.5


@needs_kernel
def test_a_grader_failure_on_one_submission_does_not_stop_the_batch(tmp_path, monkeypatch):
    from d2lattn.grading import kernel

    def fail(*args, **kwargs):
        raise RuntimeError("kernel failed to start")

    monkeypatch.setattr(kernel, "run_submission", fail)
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "a.ipynb").write_text(SAMPLE.read_text())
    (folder / "b.ipynb").write_text("{")
    release(SAMPLE, tmp_path / "rel")
    rows = grade(folder, tmp_path / "rel" / "autograder", tmp_path / "out")
    assert [(r.student, r.reason) for r in rows] == \
        [("a", "grader error: RuntimeError: kernel failed to start")] * 3 + \
        [("b", rows[3].reason)] * 3
    assert rows[3].reason.startswith("not valid JSON")


def test_grade_rejects_bad_arguments(tmp_path):
    release(SAMPLE, tmp_path / "rel")
    bundle = tmp_path / "rel" / "autograder"
    with pytest.raises(ValueError, match="timeout must be a positive finite number, got 0"):
        grade(tmp_path, bundle, tmp_path / "out", timeout=0)
    with pytest.raises(ValueError, match="max_output must be an int >= 1, got 0.5"):
        grade(tmp_path, bundle, tmp_path / "out", max_output=0.5)
    with pytest.raises(TypeError, match="log must be callable or None, got 'x'"):
        grade(tmp_path, bundle, tmp_path / "out", log="x")
    with pytest.raises(ValueError, match="bundle must be the autograder folder written by "):
        grade(tmp_path, tmp_path / "missing", tmp_path / "out")
    with pytest.raises(ValueError, match="submissions must be a folder, got"):
        grade(tmp_path / "missing", bundle, tmp_path / "out")
    with pytest.raises(ValueError, match=r"assignment must be one of the bundle's \['sample'\]"):
        grade(tmp_path, bundle, tmp_path / "out", assignment="ch9")
    (bundle / "other.json").write_text(json.dumps({"assignment": "other", "tests": []}))
    with pytest.raises(ValueError, match=r"assignment must be one of the bundle's \['other', "
                                         r"'sample'\] .*got None"):
        grade(tmp_path, bundle, tmp_path / "out")


def test_command_line_releases_and_grades(tmp_path, capsys):
    main(["release", str(SAMPLE.parent), "--out", str(tmp_path / "rel")])
    assert capsys.readouterr().out == f"wrote {tmp_path / 'rel' / 'sample.ipynb'}\n"
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "broken.ipynb").write_text("not a notebook")
    main(["grade", str(folder), "--bundle", str(tmp_path / "rel" / "autograder"),
          "--out", str(tmp_path / "grades"), "--timeout", "5"])
    out = capsys.readouterr().out
    assert re.fullmatch(r"broken: 0 of 6 points in [\d.]+ s\nwrote 3 rows to .*grades.csv\n", out)
    assert (tmp_path / "grades" / "feedback" / "broken.md").exists()
