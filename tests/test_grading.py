"""d2lattn.grading: the case format, plain values, release, check(), forbidden names, the
sandbox and batch grading, with a suite of cheating submissions.

The batch tests release the sample master (tests/data/grading/sample.ipynb) once and grade one
folder once: the master, its student version, issue 6's broken submissions, issue 14's cheats
(each built below as a real notebook) and hostile folder entries, each in its own sandbox.
Everything else runs in this process.
"""
import ast
import copy
import csv
import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import mxnet as mx
import numpy as onp
import pytest

import d2lattn
from d2lattn.grading import cases, check, grade, register, release, runner, sandbox, shadow, student
from d2lattn.grading import values
from d2lattn.grading.__main__ import main
from d2lattn.grading.batch import load_bundle
from d2lattn.grading.gradebook import safe_field as _safe_field
from d2lattn.grading.submissions import safe_id as _student_id
from d2lattn.grading.forbid import forbidden_uses
from d2lattn.grading.notebook import (STUB, NotebookError, cell_source, is_grader_cell,
                                      parse_options, plain_markdown, question_of,
                                      read_notebook, split_tests, strip_solutions)
from d2lattn.grading.releasing import split_master

SAMPLE = Path(__file__).parent / "data" / "grading" / "sample.ipynb"
QUESTIONS = {"q1_softmax": 2, "q2_nw": 3, "q3_weight": 1}  # the sample's questions and points
HAS_BWRAP = shutil.which("bwrap") is not None
needs_sandbox = pytest.mark.skipif(not HAS_BWRAP, reason="grading needs bubblewrap (bwrap)")


def master():
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def split():
    """The sample's student notebook (dict) and tests, without running anything."""
    return split_master(master(), "sample")


def cell_index(nb, question):
    return next(i for i, cell in enumerate(nb["cells"]) if question_of(cell) == question)


def code_cell(text, question=None):
    meta = {"d2lattn": {"question": question}} if question else {}
    return {"cell_type": "code", "metadata": meta, "source": text, "outputs": [],
            "execution_count": None}


def hidden_lines(tests, messages=False):
    """The example sources and expected values of the hidden cases of ``tests``, and their
    messages if ``messages`` (but short lines such as ``>>> X`` or ``0.75``, which any notebook
    may contain)."""
    lines = [line.lstrip("#>.").strip() for test in tests
             for case in cases.cases_of(test, True) if case["hidden"]
             for line in case["code"].splitlines() if messages or not line.startswith("#")]
    return [line for line in lines if len(line) > 8
            and not re.fullmatch(r"[\w.]+(\((\w+(, )?)*\))?", line)]  # softmax(X), answer_q3


def run_cells(nb):
    """Execute a notebook's code cells (no magics) in one fresh namespace, as a kernel would."""
    env = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec(cell_source(cell), env)
    return env


# --- plain values: encoding in the sandbox, comparing in the grader ------------------------

def plain(value):
    return runner.encode(value)


@pytest.mark.parametrize("received, expected, ok", [
    (onp.array([0.25, 0.75]), [1 / 4, 3 / 4], True),              # array vs list
    (onp.array([1 / 3]), [0.333333], True),                        # within rtol 1e-5
    (onp.array([1 / 3]), [0.3333], False),                         # beyond it
    (onp.array([[0.5, 0.5]]), [0.5, 0.5], False),                  # shapes must match
    (onp.array([onp.nan, 0.0]), [1.0, 0.0], False),                # NaN never equals a number
    (onp.array([onp.nan]), [float("nan")], True),                  # ... only NaN
    ((2, 3), [2, 3], True), (3, 3.0, True), (True, 1, True),       # numbers are numbers
    ("abc", "abc", True), ("abc", "abd", False), (Ellipsis, 0.75, False),
    (None, None, True), (None, 0, False), ({"a": 1}, {"a": 1}, True),
    ({"a": 1, "b": [2]}, {"b": [2], "a": 1}, True), ({"a": 1}, {"a": 2}, False),
    ([1, "x"], [1, "x"], True), ([1, "x"], (1, "x"), False), ({3, 1}, {1, 3}, True),
    (float, float, True), (int, float, False), (onp.dtype("float64"), onp.dtype("float64"), True),
    (onp.float32(0.5), 0.5, True), ([], [], True), ([[1, 2], [3]], [[1, 2], [3]], True),
])
def test_same_compares_plain_values(received, expected, ok):
    assert values.same(plain(received), plain(expected)) is ok


def test_encode_reads_mxnet_arrays_and_contexts(cpu1):
    x = mx.np.array([0.25, 0.75], ctx=cpu1)
    assert plain(x) == {"t": "array", "dtype": "float32", "shape": [2], "v": [0.25, 0.75]}
    assert values.same(plain(x), plain([0.25, 0.75])) and not values.same(plain(x), plain([1, 0]))
    assert values.same(plain(cpu1), plain(mx.cpu(1))) and not values.same(plain(cpu1),
                                                                          plain(mx.cpu(0)))


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __repr__(self):
        return "[0.25, 0.25, 0.25, 0.25]"


class LyingArray:
    def __array__(self, dtype=None, copy=None):
        return onp.full(4, 0.25)

    def __len__(self):
        return 4


class LyingFloat(float):
    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


class LyingNumber:
    def __float__(self):
        return 0.75


@pytest.mark.parametrize("liar", [AlwaysEqual(), LyingArray(), LyingFloat(0.1), LyingNumber()])
def test_objects_that_lie_are_never_a_number_or_an_array(liar):
    """Whatever __eq__, __array__, __float__ or __repr__ say, the grader sees an object."""
    encoded = plain(liar)
    assert encoded["t"] == "object"
    for expected in ([0.25] * 4, 0.75, 0.1, "[0.25, 0.25, 0.25, 0.25]"):
        assert not values.same(encoded, plain(expected))


@pytest.mark.parametrize("forged", [
    {"t": "num", "v": "0.75"}, {"t": "array", "shape": [2], "v": [1.0]},
    {"t": "array", "shape": [1], "v": ["0.75"]}, {"t": "bogus", "v": 1}, {"v": 1}, [0.75],
    {"t": "list", "v": [{"t": "num"}]}, None,
])
def test_malformed_plain_values_never_match(forged):
    assert not values.same(forged, plain(0.75)) and not values.same(forged, plain([1.0]))
    assert values.show(forged) == "<not a value>"


def test_encode_refuses_huge_values_and_show_cuts_long_ones():
    with pytest.raises(ValueError, match="an array of 300000 numbers"):
        plain(onp.zeros(300_000))
    assert values.show(plain(list(range(1000)))).endswith(" ...")
    assert values.show(plain(onp.array([[1.0, 2.0]]))) == "array([[1., 2.]])"


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
    assert request == {"id": 7, "question": "q", "scope": "c2NvcGU=", "steps": [
        {"call": "double(x)", "inputs": None, "want": True}]}
    assert "x = 4" not in str(request) and "8" not in str(request)
    assert cases.in_case(case, {"at": 0, "raised": "E"})["at"] == 1  # counted over the case
    assert cases.in_case(case, None) is None


def test_judge_compares_each_value_and_reports_the_first_failure():
    code = "# doubles\n>>> double(2)\n4\n>>> double(3)\n6"
    good = {"values": [plain(4), plain(6)], "wants": [], "raised": None, "at": None}
    expected = [plain(4), plain(6)]
    assert cases.judge(code, good, expected) == {"passed": True, "message": "doubles"}
    bad = dict(good, values=[plain(4), plain(7)])
    assert cases.judge(code, bad, expected) == {"passed": False, "message": "doubles",
                                               "source": "double(3)\n", "expected": "6",
                                               "received": "7"}
    raised = dict(good, values=[], raised="ValueError: no", at=0)
    assert cases.judge(code, raised, expected)["received"] == "raised ValueError: no"
    assert cases.judge(code, dict(good, values=[plain(4)]), expected)["received"] == "no value"
    assert "no result" in cases.judge(code, None, expected)["received"]


def test_run_test_runs_setup_steps_then_checks_in_a_copy_of_the_namespace():
    test = {"name": "q", "suites": [{"cases": [
        {"code": ">>> y = double(3)\n>>> y + 1\n7", "hidden": False},
        {"code": "# doubles\n>>> double(2)\n4\n>>> double(3)\n7", "hidden": False},
        {"code": ">>> 2\n3", "hidden": True}]}]}
    env = {"double": lambda x: 2 * x}
    assert cases.run_test(test, env) == [
        {"passed": True, "message": "", "hidden": False},
        {"passed": False, "message": "doubles", "source": "double(3)\n", "expected": "7",
         "received": "6", "hidden": False}]
    assert "y" not in env  # each case runs in a fresh copy of the namespace
    assert [r["hidden"] for r in cases.run_test(test, env, hidden=True)] == [False, False, True]


def test_run_test_turns_errors_and_endless_loops_into_failures():
    def stub(x):
        raise NotImplementedError

    test = {"name": "q", "suites": [{"cases": [{"code": ">>> f(1)\n2"},
                                               {"code": ">>> 1 / 0\n1"},
                                               {"code": ">>> while True: pass\n>>> 1\n1"}]}]}
    start = time.monotonic()
    results = cases.run_test(test, {"f": stub}, time_limit=0.2)
    assert [r["received"] for r in results] == [
        "raised NotImplementedError", "raised ZeroDivisionError: division by zero",
        "raised TimeoutError: took longer than 0.2 s"]
    assert time.monotonic() - start < 3


def test_format_report_shows_public_failures_and_hidden_cases_by_their_message_only():
    results = [{"hidden": False, "passed": True, "message": "easy"},
               {"hidden": False, "passed": False, "message": "hard", "source": "f(2)\n",
                "expected": "4", "received": "5"},
               {"hidden": True, "passed": True, "message": "doubles"},
               {"hidden": True, "passed": False, "message": "large inputs", "source": "f(9)\n",
                "expected": "18", "received": "19"}]
    report = cases.format_report("q1", results)
    assert report == "\n".join([
        "q1: 1 of 2 public cases passed", "  case 1 passed: easy", "  case 2 FAILED: hard",
        "      >>> f(2)", "      expected: 4", "      received: 5",
        "  hidden cases: 1 of 2 passed", "  hidden case 1 passed: doubles",
        "  hidden case 2 FAILED: large inputs"])
    assert not any(text in report for text in ("f(9)", "18", "19"))


def test_the_reason_and_the_feedback_count_and_name_cases_alike(batch):
    """A format check is counted apart and named 'format check' in both reports (the reason
    said '0 of 1 cases passed' and listed two failures; the feedback called the check a case)."""
    rows, out, *_ = batch
    reason = by_student(rows, "student")["q3_weight"].reason
    feedback = (out / "feedback" / "student.md").read_text()
    assert reason.startswith("0 of 1 cases passed (format checks: 0 of 1); failed: public "
                             "format check 1 (format: the weight is a float), hidden case 1 ")
    assert "q3_weight: 0 of 0 public cases passed (format checks: 0 of 1)\n" \
           "  format check 1 FAILED: format: the weight is a float\n" in feedback


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
    ("# BEGIN SOLUTON\nx = 1\n# END SOLUTION", r"cell 1, line 1: unrecognised solution marker"),
    ("# begin solution\nx = 1\n# end solution", r"cell 1, line 1: unrecognised solution"),
    ("#BEGIN SOLUTION\nx = 1", r"cell 1, line 1: unrecognised solution marker"),
    ("x = 1  # solution", r"cell 1, line 1: unrecognised solution marker"),
    ("x += 1  # SOLUTION", r"cell 1, line 1: unrecognised solution marker"),
    ("# BEGIN SOLUTION\nx = 1  # Solution\n# END SOLUTION", r"cell 1, line 2: unrecognised"),
])
def test_strip_solutions_rejects_ambiguous_markers_instead_of_leaking(text, error):
    with pytest.raises(ValueError, match=error):
        strip_solutions(text, "cell 1")


def test_split_tests_splits_cases_at_blank_lines_and_hidden_ones_at_the_marker():
    public, hidden = split_tests("# a\n>>> 1\n1\n\n>>> 2\n2\n# HIDDEN\n# c\n>>> 3\n3", "cell 5")
    assert public == ["# a\n>>> 1\n1", ">>> 2\n2"] and hidden == ["# c\n>>> 3\n3"]
    assert split_tests(">>> 1\n1", "cell 5") == ([">>> 1\n1"], [])


@pytest.mark.parametrize("text, error", [
    (">>> 1\n1\n# HIDDEN\n>>> 2\n2\n# HIDDEN\n>>> 3\n3", r"cell 5: more than one # HIDDEN line"),
    ("# just a comment\n\n>>> 1\n1", r"cell 5: a case without a >>> example"),
    (">>> 1\n1\n# Hidden\n>>> 2\n2", r"cell 5, line 4: '# Hidden' looks like the marker"),
    (">>> 1\n1\n#HIDDEN\n>>> 2\n2", r"'#HIDDEN' looks like the marker"),
    (">>> 1\n1\n# HIDDEN:\n>>> 2\n2", r"'# HIDDEN:' looks like the marker"),
    (">>> 1\n1\n# hiden\n>>> 2\n2", r"'# hiden' looks like the marker"),
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
    ('{"cells": [1]}', "not a Jupyter notebook"), ("[" * 100_000, "not valid JSON"),
])
def test_read_notebook_says_why_a_file_is_not_a_notebook(tmp_path, text, reason):
    path = tmp_path / "x.ipynb"
    path.write_text(text)
    with pytest.raises(NotebookError, match=reason):
        read_notebook(path)
    with pytest.raises(NotebookError, match="a folder, not a notebook file"):
        read_notebook(tmp_path)
    path.write_bytes(b'{"cells": ["caf\xe9"]}')
    with pytest.raises(NotebookError, match="not UTF-8 text"):
        read_notebook(path)


def test_question_of_reads_metadata_first_then_the_header_line():
    header = code_cell("# QUESTION q7 points=2\nx = 1")
    assert question_of(header) == "q7"
    assert question_of(dict(code_cell("x = 1"), metadata={"d2lattn": {"question": "q8"}})) == "q8"
    assert question_of(code_cell("x = 1")) is None
    assert question_of(dict(header, cell_type="markdown")) is None


def test_plain_markdown_turns_myst_roles_into_text():
    text = ("See {cite}`vaswani2017`, {ref}`the figure <fig-mha>`, {ref}`sec-intro`, "
            "{doc}`Chapter 2 <02_scoring>`, {math}`x^2` and {numref}`fig-x`.")
    assert plain_markdown(text) == ("See vaswani2017, the figure, sec-intro, Chapter 2, $x^2$ "
                                    "and fig-x.")


# --- release: the student notebook, the bundle, what release refuses -----------------------

def test_split_master_writes_the_student_notebook_and_the_tests():
    student_nb, tests = split()
    assert [t["name"] for t in tests] == list(QUESTIONS)
    assert [t["points"] for t in tests] == list(QUESTIONS.values())
    assert tests[0]["forbid"] == ["d2lattn.masked_softmax"]
    assert [c["hidden"] for c in tests[0]["suites"][0]["cases"]] == [False, False, True, True]
    assert tests[0]["suites"][0]["cases"][2]["code"] == \
        "# large scores do not overflow\n>>> softmax(np.array([1000.0, 0.0]))\n[1.0, 0.0]"
    kinds = [("grader" if is_grader_cell(c) else question_of(c) or c["cell_type"])
             for c in student_nb["cells"]]
    assert kinds == ["markdown", "code", "grader", "markdown", "q1_softmax", "grader",
                     "markdown", "q2_nw", "grader", "markdown", "q3_weight", "grader",
                     "markdown", "grader"]  # the hand-in section and the # STUDENT cell
    assert [cell_source(c) for c in student_nb["cells"] if "grading-check" in
            c["metadata"].get("tags", [])] == [f'check("{q}")' for q in QUESTIONS]
    registration = student_nb["cells"][2]["metadata"]
    assert registration["jupyter"] == {"source_hidden": True} and registration["cellView"] == "form"
    assert student_nb["metadata"]["d2lattn"] == {"assignment": "sample"}
    assert all(not c.get("outputs") and c.get("id") for c in student_nb["cells"])


def test_student_notebook_holds_stubs_and_no_solution_and_no_hidden_test():
    student_nb, tests = split()
    text = json.dumps(student_nb)
    sources = "\n".join(cell_source(c) for c in student_nb["cells"])
    assert cell_source(student_nb["cells"][4]).endswith(f"    {STUB}")
    assert cell_source(student_nb["cells"][10]) == "# QUESTION q3_weight points=1\nanswer_q3 = ..."
    for solution in ["X.max(axis=-1, keepdims=True)", "scores.max(axis=1", "= 0.75"]:
        assert solution not in text and solution not in sources
    assert len(hidden_lines(tests, messages=True)) == 13
    for line in hidden_lines(tests, messages=True):
        assert line not in text and line not in sources, line


def test_student_notebook_is_valid_nbformat():
    nbformat = pytest.importorskip("nbformat")
    nbformat.validate(nbformat.from_dict(split()[0]))


def edited_master(edit):
    nb = master()
    edit(nb["cells"])
    return nb


@pytest.mark.parametrize("edit, error", [
    (lambda cells: cells.pop(4), r"questions without a tests cell: \['q1_softmax'\]"),
    (lambda cells: cells.pop(3), r"tests cells without a question: \['q1_softmax'\]"),
    (lambda cells: cells.append(copy.deepcopy(cells[3])), r"question q1_softmax appears twice"),
    (lambda cells: cells.append(copy.deepcopy(cells[4])), r"two tests cells for q1_softmax"),
    (lambda cells: cells[4].update(source="# TESTS q1_softmax\n>>>1\n1"),
     r"sample, tests of q1_softmax: .*lacks blank after >>>"),
    (lambda cells: cells.append({"cell_type": "raw", "metadata": {}, "source": "notes"}),
     r"sample, cell 12: a raw cell that is not '# TESTS <question>'"),
    (lambda cells: cells[4].update(source="# tests q1_softmax\n>>> 1\n1"),
     r"sample, cell 5: a raw cell that is not '# TESTS <question>'"),
    (lambda cells: cells[0].update(attachments={"a.png": {"image/png": "AAAA"}}),
     r"sample, cell 1: attachments are not released"),
    (lambda cells: cells[3].update(source="# Question q1_softmax points=2\nx = 1"),
     r"sample, cell 4: '# Question q1_softmax points=2' looks like a question header"),
    (lambda cells: cells[1].update(source="# TESTS q1_softmax\n>>> 1\n1"),
     r"sample, cell 2: a tests header in a code cell"),
    (lambda cells: cells[10].update(source="# TESTS q3_weight\n# format: a float\n"
                                           ">>> type(answer_q3)\nfloat"),
     r"tests of q3_weight: only format checks"),
    (lambda cells: cells[10].update(source="# TESTS q3_weight\n>>> x = answer_q3"),
     r"tests of q3_weight: a case without an expected value"),
])
def test_split_master_rejects_inconsistent_or_ambiguous_masters(edit, error):
    with pytest.raises(ValueError, match=error):
        split_master(edited_master(edit), "sample")


def test_release_refuses_a_hidden_case_without_a_message(tmp_path):
    """A failing hidden case is named by its message alone: release requires one."""
    path = tmp_path / "masters" / "sample.ipynb"
    path.parent.mkdir()
    path.write_text(json.dumps(edited_master(lambda cells: cells[7].update(
        source=cell_source(cells[7]).replace("# a query on a training point\n", "")))))
    with pytest.raises(ValueError, match=r"^sample, tests of q2_nw: hidden case 1 has no "
                                         r"'# message' line .*'>>> nw_predict\("):
        release(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_release_refuses_bad_paths_and_to_overwrite_the_masters(tmp_path):
    with pytest.raises(ValueError, match="source must be a folder of master notebooks or a "):
        release(tmp_path / "missing", tmp_path / "out")
    with pytest.raises(ValueError, match="source holds no .ipynb file"):
        release(tmp_path, tmp_path / "out")
    (tmp_path / "sample.ipynb").write_text(SAMPLE.read_text())
    with pytest.raises(ValueError, match="out must not be the folder of the master notebooks"):
        release(tmp_path, tmp_path)
    assert (tmp_path / "sample.ipynb").read_text() == SAMPLE.read_text()


@needs_sandbox
@pytest.mark.parametrize("edit, error", [
    # a wrong solution: the master does not pass its own tests
    (lambda cells: cells[9].update(source="# QUESTION q3_weight points=1\n"
                                          "answer_q3 = 0.5  # SOLUTION"),
     r"the master does not pass its own tests: \['q3_weight, case 2: 0.5'\]"),
    # a case the stub passes: the student notebook would earn a point
    (lambda cells: cells[10].update(source=cell_source(cells[10]) + "\n\n# stub-proof\n"
                                           '>>> str(answer_q3)[:3] in ("0.7", "Ell") and "y"\n'
                                           "'y'"),
     r"the student notebook should score 0, got \['q3_weight: 0.5 of 1"),
    # an expected value that names what it cannot see
    (lambda cells: cells[10].update(source=cell_source(cells[10]).replace("0.75", "undefined")),
     r"q3_weight, case 2: raised NameError"),
])
def test_release_checks_the_master_scores_full_marks_and_its_student_version_zero(
        tmp_path, edit, error):
    path = tmp_path / "masters" / "sample.ipynb"
    path.parent.mkdir()
    path.write_text(json.dumps(edited_master(edit)))
    with pytest.raises(ValueError, match=error):
        release(path, tmp_path / "out")
    assert not (tmp_path / "out" / "sample.ipynb").exists()


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
        [f"d2lattn.masked_softmax (code cell 4, line {line})"]


def test_forbidden_uses_follows_imports_across_cells():
    cells = [(2, "import d2lattn as d"), (5, "def f(X):\n    return d.masked_softmax(X, None)")]
    assert forbidden_uses(cells, ["d2lattn.masked_softmax"]) == \
        ["d2lattn.masked_softmax (code cell 5, line 2)"]


@pytest.mark.parametrize("code", [
    "def masked_softmax(X, valid_lens):\n    return masked_softmax_helper(X)",  # their own
    "import d2lattn\nd2lattn.set_seed(0)",                                     # another name
    "import mylib\nf = mylib.masked_softmax",                                  # another package
    "obj.masked_softmax(X)",                                                   # not from d2lattn
    "def broken(:\n    d2lattn.masked_softmax",                                # cannot run
])
def test_forbidden_uses_leaves_other_code_alone(code):
    assert forbidden_uses([(1, code)], ["d2lattn.masked_softmax"]) == []


# --- the sandbox --------------------------------------------------------------------------

def test_shadow_package_holds_stubs_and_not_the_forbidden_code(tmp_path):
    package = shadow.shadow_package(["d2lattn.masked_softmax", "d2lattn.DotProductAttention"],
                                     tmp_path)
    text = (package / "attention.py").read_text()
    real = (Path(d2lattn.__file__).parent / "attention.py").read_text()
    assert "valid_lens" in real.split("def masked_softmax")[1][:2000]
    assert "def masked_softmax(*args, **kwargs):\n    raise PermissionError(" in text
    assert "class DotProductAttention:" in text
    assert "d2lattn.DotProductAttention is forbidden" in text
    assert not list(package.rglob("__pycache__")) and (package / "grading" / "runner.py").exists()
    assert (package / "pooling.py").read_text() == \
        (Path(d2lattn.__file__).parent / "pooling.py").read_text()
    with pytest.raises(ValueError, match="forbid names 'd2lattn.no_such_thing', which is not"):
        shadow.shadow_package(["d2lattn.no_such_thing"], tmp_path / "x")
    lm = shadow.shadow_package(["d2lattn.data.lm.ngram_probs"], tmp_path / "lm")  # any module
    assert "def ngram_probs(*args, **kwargs):\n    raise PermissionError(" in \
        (lm / "data" / "lm.py").read_text()


MODELS = {"attention", "bert", "decoding", "gpt", "pooling", "positional", "seq2seq",
          "transformer", "train", "data", "text", "metrics", "plotting"}


def test_the_grader_imports_no_model_module_and_no_private_name_of_another_module():
    """Imports run one way: the grader reads the package's source (its call graph) but
    imports none of its model modules, and no module takes another's private name."""
    for path in (Path(d2lattn.__file__).parent / "grading").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                source = ("." * node.level) + (node.module or "")
                assert not (source.startswith("..") and source.strip(".").split(".")[0]
                            in MODELS), (path.name, source)
                assert source != "d2lattn" and not source.startswith("d2lattn.") or \
                    source.startswith("d2lattn.grading"), (path.name, source)
                assert not any(alias.name.startswith("_") for alias in node.names), \
                    (path.name, [alias.name for alias in node.names])
            elif isinstance(node, ast.Import):
                assert not any(alias.name.startswith("d2lattn.") and alias.name.split(".")[1]
                               in MODELS for alias in node.names), path.name


GROUP_TRACES = '''import glob, os, time
seen = sorted(glob.glob("/tmp/**", recursive=True) + glob.glob("/dev/shm/*"))
alive = len([pid for pid in os.listdir("/proc") if pid.isdigit()])
first = os.fork()  # the PID namespace's counter, then the tmpfs's inode counter
if first == 0:
    os._exit(0)
os.waitpid(first, 0)
open("/tmp/count", "w").close()
counters = [first, os.stat("/tmp/count").st_ino]
os.makedirs("/tmp/locked/in")  # a folder the runner could not enter to empty it
open("/tmp/locked/in/stash", "w").write("stash = 1")
os.chmod("/tmp/locked", 0)
startup = os.path.expanduser("~/.ipython/profile_default/startup")
os.makedirs(startup, exist_ok=True)
for path in ("/tmp/stash", "/dev/shm/stash", os.path.join(startup, "00-stash.py")):
    try:
        open(path, "w").write("stash = 1")
    except OSError:
        pass
forked = 0
try:
    for _ in range(400):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        forked += 1
except OSError:
    pass'''


@needs_sandbox
def test_a_group_leaves_nothing_to_the_next_and_processes_are_capped(tmp_path):
    """Each group of questions starts from the same state, whatever the one before it wrote,
    locked or started: the same files, the same next pid and inode number (a sandbox of its
    own); the number of processes is capped even when the grader runs as root."""
    from d2lattn.grading.execute import run_submission

    shadows = shadow.Shadows(tmp_path)

    def group(number, forbid):
        return shadows(forbid), [[call_case(number, "(seen, alive, forked, counters)")]]

    first, second = run_submission(
        [(1, GROUP_TRACES)], [group(0, ()), group(1, ("d2lattn.masked_softmax",))],
        timeout=60, case_timeout=5, max_output=10_000)
    (seen, alive, forked, counters), = [[part["v"] for part in value["v"]]
                                        for value in first.results[0]["values"]]
    assert "stash" not in str(seen) and first.results[0]["values"] == second.results[1]["values"]
    assert alive == 2 and 0 < forked < sandbox.LIMITS["RLIMIT_NPROC"]  # PID 1, the runner
    assert counters[0]["v"] > 2  # the control: a fork got a pid, and the same in the next group
    assert processes_gone(runner.__doc__.splitlines()[0])  # every runner has ended


FORGER = '''import json, os, threading, time
FORGED = [{"cells_done": None}, {"phase_done": True}, {"group_done": True}] + [
    {"case": number, "values": [{"t": "num", "v": 42}], "wants": [], "raised": None, "at": None}
    for number in (0, 1)] * 20


def forge():  # records for every case and every stage, from this group into the next ones
    for _ in range(300):
        for fd in range(3, 12):
            try:
                os.write(fd, "".join(json.dumps(r) + "\\n" for r in FORGED).encode())
            except OSError:
                pass
        time.sleep(0.01)


threading.Thread(target=forge, daemon=True).start()'''


@needs_sandbox
def test_records_forged_by_a_group_never_reach_the_grader(tmp_path):
    """A group's processes write records for every case, its own and the next group's:
    the next group's sandbox is another, so whatever they write, its results are its own."""
    from d2lattn.grading.execute import run_submission

    shadows = shadow.Shadows(tmp_path)
    first, second = run_submission(
        [(1, FORGER), (2, "x = 0")], [(shadows(()), [[call_case(0, "x + 1")]]),
                                      (shadows(("d2lattn.masked_softmax",)),
                                       [[call_case(1, "x + 1")]])],
        timeout=30, case_timeout=5, max_output=10_000)
    assert second.results[1]["values"] == [{"t": "num", "v": 1}]
    assert 1 not in first.results  # a record it forged for another group's case: dropped


@needs_sandbox
def test_the_sandbox_starts_from_a_python_path_with_dot_dot(tmp_path, monkeypatch):
    from d2lattn.grading.execute import run_submission

    up = "../" * (len(tmp_path.parts) - 1)  # a folder the sandbox does not have, then up to /
    monkeypatch.setattr(sys, "executable", f"{tmp_path}/{up}{sys.executable.lstrip('/')}")
    group, = run_submission([(1, "x = 2")], [(shadow.Shadows(tmp_path)(()),
                                               [[call_case(0, "1 + x")]])], 30, 5, 1000)
    assert group.results[0]["values"] == [{"t": "num", "v": 3}], group.notes


@needs_sandbox
def test_the_sandboxed_package_keeps_its_data_files(tmp_path):
    from d2lattn.data import load_paragraphs, read_doc_topics
    from d2lattn.grading.execute import run_submission

    group, = run_submission(
        [(1, "from d2lattn.data import load_paragraphs, read_doc_topics")],
        [(shadow.Shadows(tmp_path)(("d2lattn.masked_softmax",)),
          [[call_case(0, "load_paragraphs()[:3]", "read_doc_topics('test')[0][:3]")]])],
        60, 30, 1000)
    assert group.results[0]["raised"] is None, group
    assert group.results[0]["values"] == [runner.encode(load_paragraphs()[:3]),
                                    runner.encode(read_doc_topics("test")[0][:3])]


def test_grading_refuses_to_run_without_a_sandbox(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(sandbox.SandboxError, match=r"apt-get install bubblewrap\) or, only for "
                                                   r"submissions you trust, pass --unsafe"):
        sandbox.check_sandbox()
    sandbox.check_sandbox(unsafe=True)  # the caller's explicit choice


def call_case(number, *calls):
    """A case request as grading sends it: calls on the namespace, each checked, no inputs."""
    return {"id": number, "question": f"q{number}", "scope": None,
            "steps": [{"call": call, "inputs": None, "want": True} for call in calls]}


# --- grading a batch: issue 6's broken submissions and issue 14's cheats -------------------

TIMEOUT, MAX_OUTPUT, MAX_BYTES = 15, 100_000, 2_000_000
TOKEN = f"d2lattn-cheat-{os.getpid()}-{int(time.time())}"
CHEAT = '''# QUESTION q1_softmax points=2 forbid=d2lattn.masked_softmax
from d2lattn import masked_softmax
from mxnet import np as mxnp

def softmax(X):
    X = np.asarray(X, dtype=float)
    out = masked_softmax(mxnp.array(X.reshape(1, -1, X.shape[-1])), None)
    return out.asnumpy().reshape(X.shape)'''
FAKE_RESULTS = '''from IPython.display import display
display({"application/vnd.d2lattn.grading+json": {"nonce": "guess", "results": {}}}, raw=True)
def publish_results(*args):
    pass
run_test = check = register = publish_results'''

# The reference under another name: every route to d2lattn.masked_softmax, none of them
# visible to a static scan of the question's cells; softmax uses whichever route works.
ROUTES = '''# QUESTION q1_softmax points=2 forbid=d2lattn.masked_softmax
import gc, importlib, inspect, operator, sys
import d2lattn
from mxnet import np as mxnp

name = "masked" + "_soft" + "max"
found = {}


def route(label, get):
    try:
        found[label] = get()
    except Exception as err:
        found[label] = err


def from_source(path):
    space = {"__name__": "d2lattn.attention_copy", "__package__": "d2lattn"}
    exec(compile(open(path).read(), path, "exec"), space)
    return space[name]


route("getattr", lambda: getattr(d2lattn, name))
route("importlib", lambda: getattr(importlib.import_module("d2lattn.attention"), name))
route("__import__", lambda: vars(__import__("d2lattn.attention").attention)[name])
route("exec", lambda: (exec("from d2lattn import " + name + " as stolen", globals()), stolen)[1])
route("sys.modules", lambda: sys.modules["d2lattn.attention"].__dict__[name])
route("vars", lambda: vars(d2lattn)[name])
route("attrgetter", lambda: operator.attrgetter("attention." + name)(d2lattn))
route("magic", lambda: ms_magic)
route("unparseable cell", lambda: ms_unparse)
route("source file", lambda: from_source(d2lattn.attention.__file__))
route("inspect", lambda: from_source(inspect.getsourcefile(d2lattn.attention)))
route("reload", lambda: getattr(importlib.reload(sys.modules["d2lattn.attention"]), name))
route("repository", lambda: from_source(REAL_SOURCE))
route("gc", lambda: [o for o in gc.get_objects() if getattr(o, "__name__", "") == name
                     and "valid_lens" in getattr(getattr(o, "__code__", None), "co_varnames", ())
                     and o.__code__.co_argcount == 2][-1])


def softmax(X):
    X = np.asarray(X, dtype=float)
    error = None
    route("another question's cell", lambda: ms_other)  # a cell that runs after this one
    for f in [f for f in found.values() if callable(f)]:
        try:
            return f(mxnp.array(X.reshape(1, -1, X.shape[-1])), None).asnumpy().reshape(X.shape)
        except Exception as err:
            error = err
    raise error'''

ROUTE_LABELS = re.findall(r'^ *route\("([^"]+)"', ROUTES, re.M)
FOUND = '''route("another question's cell", lambda: ms_other)
print("routes that gave a callable:", sorted(k for k, f in found.items() if callable(f)))'''

JUDGES = '''import builtins, doctest, json, os, sys, types
import numpy
numpy.allclose = numpy.array_equal = lambda *args, **kwargs: True
doctest.DocTestParser.parse = lambda self, *args, **kwargs: []
import IPython.display
IPython.display.display = lambda *args, **kwargs: None
onp = types.ModuleType("onp")
onp.allclose = lambda *args, **kwargs: True
FORGED = [dict(case=i, values=[{"t": "bool", "v": True}] * 3, wants=[], raised=None, at=None,
               passed=True, points=100) for i in range(40)]
FORGED += [{"phase_done": True}, {"cells_done": None}, {"results": "all passed"}]


def forge(*args):
    for fd in range(1, 40):
        for record in FORGED:
            try:
                os.write(fd, (json.dumps(record) + "\\n").encode())
            except OSError:
                pass


get_ipython().events.register("pre_run_cell", forge)
get_ipython().events.register("post_run_cell", forge)
forge()
_compile = builtins.compile
builtins.compile = lambda source, *args, **kwargs: _compile("True", "<forged>", "eval")'''

READER = '''import glob, importlib.util, json, os, sys
found = []
home = os.path.dirname(importlib.util.find_spec("d2lattn").origin)
places = [os.path.join(home, "..", "**", "*.ipynb"), os.path.join(home, "..", "**", "*.json"),
          SUBMISSIONS + "/*.ipynb", BUNDLE + "/*.json", SAMPLE_PATH, "/tmp/**/*.ipynb"]
for pattern in places:
    for path in glob.glob(pattern, recursive=True):
        try:
            found.append(open(path).read())
        except OSError:
            pass
for path in glob.glob("/proc/*/cmdline") + glob.glob("/proc/*/environ"):
    try:
        found.append(open(path, "rb").read().decode(errors="replace"))
    except OSError:
        pass
solutions = [text for text in found if "BEGIN SOLUTION" in text or "answer_q3 = 0.75" in text]
for text in solutions:  # a master, or a classmate's answers: run its code cells here
    for cell in json.loads(text)["cells"]:
        if cell["cell_type"] == "code":
            exec("".join(cell["source"]), globals())
bundles = [json.loads(text) for text in found if '"expected"' in text]
for bundle in bundles:
    answer_q3 = bundle["tests"][2]["suites"][0]["cases"][-1]["expected"][0]["v"]


def softmax(X):
    frame, seen = sys._getframe(1), []
    while frame is not None:  # the running case's expected value, anywhere up the stack
        seen += [v for v in frame.f_locals.values() if isinstance(v, dict) and "expected" in v]
        frame = frame.f_back
    if seen:
        return seen[0]["expected"][0]["v"]
    raise NotImplementedError
print(len(solutions), "solutions,", len(bundles), "bundles found")'''

ESCAPER = '''import os, signal, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)  # TOKEN"],
                 start_new_session=True)
if os.fork() == 0:  # a daemon that tries to outlive the run and rewrite the grades
    os.setsid()
    if os.fork() == 0:
        time.sleep(2)
        for place in (OUT, "/tmp", HOST_TMP):
            try:
                open(os.path.join(place, "escaped-TOKEN"), "w").write("x")
                open(os.path.join(place, "grades.csv"), "a").write("escaper,q1_softmax,99,2,x\\n")
            except OSError:
                pass
        os._exit(0)
    os._exit(0)
STARTUP = "softmax = lambda X: 0  # TOKEN\\nanswer_q3 = 0.75\\n"
for home in (os.path.expanduser("~"), HOST_HOME, os.environ.get("IPYTHONDIR", "/nonexistent")):
    for folder in (os.path.join(home, ".ipython", "profile_default", "startup"),
                   os.path.join(home, "profile_default", "startup")):
        try:
            os.makedirs(folder, exist_ok=True)
            open(os.path.join(folder, "00-TOKEN.py"), "w").write(STARTUP)
        except OSError:
            pass
for path in (BUNDLE_FILE, SAMPLE_PATH):
    try:
        open(path, "a").write("TOKEN")
    except OSError:
        pass
for pid in (GRADER_PID, os.getppid()):
    try:
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM if pid == GRADER_PID else signal.SIGCONT)
    except OSError:
        pass'''

LIAR = {"q1_softmax": '''class AlwaysEqual:
    def __eq__(self, other):
        return True
    def __repr__(self):
        return "[0.25, 0.25, 0.25, 0.25]"
    def asnumpy(self):
        return self

def softmax(X):
    return AlwaysEqual()''',
        "q2_nw": '''import numpy
class LyingArray(numpy.ndarray):
    def tolist(self):
        return [3.0, 3.0]
    def __eq__(self, other):
        return numpy.ones(numpy.shape(other), bool)

def nw_predict(x_train, y_train, x_query, bandwidth=1.0):
    return numpy.zeros(len(x_query)).view(LyingArray)''',
        "q3_weight": '''class LyingFloat(float):
    def __eq__(self, other):
        return True
    __hash__ = float.__hash__
    def __float__(self):
        return 0.75
    def __repr__(self):
        return "0.75"

answer_q3 = LyingFloat(0.1)'''}

LEAK = '''def softmax(X):
    with open("/tmp/seen.txt", "a") as log:
        log.write(repr(X.tolist()) + ";")
    return open("/tmp/seen.txt").read()'''


def edited(nb, edit):
    nb = copy.deepcopy(nb)
    edit(nb["cells"])
    return nb


def answered(nb, question, source):
    """``nb`` with the cell of ``question`` holding ``source`` (its header kept)."""
    def edit(cells):
        index = cell_index(nb, question)
        header = cell_source(cells[index]).splitlines()[0]
        cells[index] = dict(cells[index], source=f"{header}\n{source}")
    return edited(nb, edit)


def literal(text, **names):
    """``text`` with each NAME replaced by the repr of its value (TOKEN by the token)."""
    for name in sorted(names, key=len, reverse=True):
        value = names[name]
        text = text.replace(name, repr(value if isinstance(value, int) else str(value)))
    return text.replace("TOKEN", TOKEN)


def submissions(folder, bundle, out):
    """Every broken and cheating submission, and hostile folder entries, in ``folder``."""
    base, student_nb = master(), json.loads((bundle.parent / "sample.ipynb").read_text())
    q1, q2 = cell_index(base, "q1_softmax"), cell_index(base, "q2_nw")
    places = dict(SUBMISSIONS=folder, BUNDLE=bundle, SAMPLE_PATH=SAMPLE, OUT=out,
                  HOST_TMP="/tmp", HOST_HOME=Path.home(), BUNDLE_FILE=bundle / "sample.json",
                  GRADER_PID=os.getpid(), REAL_SOURCE=Path(d2lattn.__file__).parent /
                  "attention.py")
    def other_question_route(cells):  # an import in q2's cell; a last cell lists the routes
        cells[q2] = dict(cells[q2], source=cell_source(cells[q2]) + "\nfrom d2lattn import "
                         "masked_softmax as ms_other")
        cells.append(code_cell(FOUND))
    routes = edited(answered(base, "q1_softmax", literal(ROUTES.split("\n", 1)[1], **places)),
                    other_question_route)

    def unclaimed_routes(cells):  # cells that answer no question, before q1
        cells.insert(q1, code_cell('import d2lattn\n'
                                   '%time ms_magic = getattr(d2lattn, "masked" + "_softmax")'))
        cells.insert(q1, code_cell("import d2lattn\nms_unparse = d2lattn.masked_softmax\n"
                                   "files = !ls"))
    routes = edited(routes, unclaimed_routes)
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
        "routes": routes,
        "judges": edited(student_nb, lambda c: c.append(code_cell(JUDGES))),
        "reader": edited(student_nb, lambda c: c.append(code_cell(literal(READER, **places)))),
        "escaper": edited(base, lambda c: c.append(code_cell(literal(ESCAPER, **places)))),
        "killer": edited(base, lambda c: c.append(code_cell(
            "import os\nfor pid in (os.getppid(), 1, -1, os.getpid()):\n    try:\n"
            "        os.kill(pid, 9)\n    except OSError:\n        pass"))),
        "stopper": edited(base, lambda c: c.append(code_cell(
            "import os, signal\nfor pid in (os.getppid(), os.getpid()):\n    try:\n"
            "        os.kill(pid, signal.SIGSTOP)\n    except OSError:\n        pass"))),
        "mime_flood": edited(base, lambda c: c.append(code_cell(
            "from IPython.display import display\n"
            "display({'text/html': 'x' * 30_000_000, 'text/plain': 'y' * 3_000_000}, raw=True)\n"
            "print('z' * 3_000_000)\nimport os\nos.write(1, b'w' * 30_000_000)"))),
        "channel_flood": edited(base, lambda c: c.append(code_cell(
            "import os\nline = b'{\"cell\": 1, \"text\": \"' + b'v' * 1_000_000 + b'\"}\\n'\n"
            "for fd in range(3, 12):\n    try:\n        for _ in range(100):\n"
            "            os.write(fd, line)\n    except OSError:\n        pass"))),
        "liar": student_nb,
        "leak": answered(student_nb, "q1_softmax", LEAK),
        "zz_after": student_nb,  # graded after the escaper: must still score 0
    }
    for question, source in LIAR.items():
        notebooks["liar"] = answered(notebooks["liar"], question, source)
    for name, nb in notebooks.items():
        (folder / f"{name}.ipynb").write_text(json.dumps(nb))
    (folder / "not_json.ipynb").write_text('{"cells": [{"cell_type": "code", "sour')
    (folder / "empty_file.ipynb").write_text("")
    (folder / "unzipped").mkdir()
    (folder / ".DS_Store").write_text("ignored: hidden files are not submissions")
    # hostile names and entries
    text = json.dumps(base)
    fd = os.open(os.path.join(os.fsencode(folder), b"caf\xe9.ipynb"), os.O_CREAT | os.O_WRONLY)
    os.write(fd, text.encode())
    os.close(fd)
    (folder / ("n" * 249 + ".ipynb")).write_text(json.dumps(student_nb))
    (folder / "alice.ipynb").write_text(text)
    (folder / "alice").mkdir()
    (folder / "bad\nname.ipynb").write_text(json.dumps(student_nb))
    (folder / "=HYPERLINK(1).ipynb").write_text(json.dumps(student_nb))
    (folder / "link.ipynb").symlink_to(SAMPLE)
    os.mkfifo(folder / "fifo.ipynb")
    (folder / "huge.ipynb").write_text(" " * (MAX_BYTES + 1))
    (folder / "notes.txt").write_text(text)
    return folder


def host_state():
    """What a submission must not change on the grader's machine."""
    ipython = Path.home() / ".ipython"
    profile = sorted(str(p) for p in ipython.rglob("*")) if ipython.exists() else []
    return {"profile": profile, "tmp": sorted(p.name for p in Path("/tmp").iterdir()
                                               if TOKEN in p.name),
            "sample": hashlib.sha256(SAMPLE.read_bytes()).hexdigest()}


def processes_gone(token, seconds=10):
    """True once no process's command line holds ``token``: a killed sandbox's processes are
    ended by the kernel, a moment after its first process."""
    deadline = time.monotonic() + seconds
    while processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    return processes_with(token) == []


def processes_with(token):
    found = []
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if token.encode() in path.read_bytes():
                found.append(path.parent.name)
        except OSError:
            pass
    return found


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The sample released once (this runs the master and its student version)."""
    if not HAS_BWRAP:
        pytest.skip("grading needs bubblewrap (bwrap)")
    out = tmp_path_factory.mktemp("release")
    release(SAMPLE, out)
    return out / "autograder"


@pytest.fixture(scope="module")
def batch(bundle, tmp_path_factory):
    """Grade every submission once: (rows, out folder, log lines, seconds, host states)."""
    from d2lattn.grading import execute

    tmp_path = tmp_path_factory.mktemp("grading")
    out = tmp_path / "grades"
    (tmp_path / "submissions").mkdir()
    folder = submissions(tmp_path / "submissions", bundle, out)
    before, digest, log = host_state(), hashlib.sha256((bundle / "sample.json").read_bytes()), []
    start = time.monotonic()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(execute, "STARTUP", 5)  # the stopper waits for this beyond TIMEOUT
        rows = grade(folder, bundle, out, timeout=TIMEOUT, case_timeout=2,
                     max_output=MAX_OUTPUT, log=log.append, max_bytes=MAX_BYTES)
    seconds = time.monotonic() - start
    time.sleep(3)  # longer than the escaper's daemon waits before it writes
    after = host_state()
    return rows, out, log, seconds, (before, after, digest.hexdigest(),
                                     hashlib.sha256((bundle / "sample.json").read_bytes())
                                     .hexdigest())


def ids(rows):
    return {row.student for row in rows}


def by_student(rows, name):
    return {row.question: row for row in rows if row.student == name}


def student_named(rows, start):
    match, = [s for s in ids(rows) if s.startswith(start)]
    return match


FULL = {q: (p, r"^\d of \d cases passed( \(format checks: \d of \d\))?$")
        for q, p in QUESTIONS.items()}
ZERO = {q: (0, r"^0 of \d cases passed") for q in QUESTIONS}
DIED = {q: (0, r"the sandbox ended while its cells ran") for q in QUESTIONS}
EXPECTED = {
    "master": FULL, "reordered": FULL, "escaper": FULL, "mime_flood": FULL,
    "student": {q: (0, r"^0 of \d cases passed( \(format checks: 0 of 1\))?; failed: public ")
                for q in QUESTIONS},
    "tampered": ZERO, "judges": ZERO, "reader": ZERO, "liar": ZERO, "leak": ZERO,
    "zz_after": ZERO,
    "raises": dict(FULL, q2_nw=(0, r"^0 of 4 cases passed")),
    "dies": DIED, "channel_flood": {q: (0, "the sandbox ended") for q in QUESTIONS},
    "killer": {q: (0, "the sandbox ended") for q in QUESTIONS},  # it killed its own runner
    "stopper": {q: (0, r"the sandbox was stopped at its time limit while its cells ran|"
                       r"the notebook's time limit of 15 s was used up before these questions")
                for q in QUESTIONS},  # it stopped its first group's sandbox, which took it all
    "loops": {"q1_softmax": (2, rf"^4 of 4 cases passed; time limit of {TIMEOUT} s reached in "
                                r"code cell 3; later cells did not run$"),
              # one budget per notebook: the loop used it up in q1's group
              "q2_nw": (0, r"^0 of 4 cases passed; failed: .*; the notebook's time limit of "
                           r"15 s was used up before these questions ran$"),
              "q3_weight": (0, r"^0 of 1 cases passed \(format checks: 0 of 1\); failed: .*; the "
                               r"notebook's time limit "
                               r"of 15 s was used up")},
    "prints": FULL,
    "deleted": dict(FULL, q2_nw=(0, r"^question cell missing$")),
    "forbidden": dict(FULL, q1_softmax=(0, r"^uses d2lattn.masked_softmax \(code cell 2, line 2\), "
                                           r"which this question forbids$")),
    "routes": dict(FULL, q1_softmax=(0, r"^0 of 4 cases passed; failed: .*; called "
                                        r"d2lattn.masked_softmax, which this question forbids")),
    "empty_notebook": {q: (0, r"^question cell missing$") for q in QUESTIONS},
    "not_json": {q: (0, r"^not valid JSON \(") for q in QUESTIONS},
    "empty_file": {q: (0, r"^empty file$") for q in QUESTIONS},
}
HOSTILE = {  # entry: (its student id, its scores)
    "caf\\xe9.ipynb": (r"caf__[0-9a-f]{8}", FULL), "n * 249 + .ipynb": (r"n{64}_[0-9a-f]{8}", ZERO),
    "alice.ipynb": ("alice", FULL),
    "bad\\nname.ipynb": (r"bad_name_[0-9a-f]{8}", ZERO),
    "=HYPERLINK(1).ipynb": (r"s_HYPERLINK_1__[0-9a-f]{8}", ZERO),
    "link.ipynb": ("link", {q: (0, r"^a symbolic link, not graded$") for q in QUESTIONS}),
    "fifo.ipynb": ("fifo", {q: (0, r"^not a regular file$") for q in QUESTIONS}),
    "huge.ipynb": ("huge", {q: (0, rf"^larger than {MAX_BYTES} bytes$") for q in QUESTIONS}),
}
SKIPPED = {"unzipped/": "a folder without a notebook", "alice/": "a folder without a notebook",
           "notes.txt": "not a notebook (.ipynb)"}


def test_batch_gives_every_entry_a_row_per_question_and_a_safe_unique_id(batch):
    rows, *_ = batch
    assert len(ids(rows)) == len(EXPECTED) + len(HOSTILE)
    assert set(EXPECTED) <= ids(rows)
    assert sorted((row.student, row.question) for row in rows) == \
        sorted((student, q) for student in ids(rows) for q in QUESTIONS)
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,72}", s) for s in ids(rows))
    assert all(row.max == QUESTIONS[row.question] and 0 <= row.points <= row.max
               and row.reason for row in rows)


@pytest.mark.parametrize("student_name", sorted(EXPECTED))
def test_batch_scores_and_reasons(batch, student_name):
    rows, *_ = batch
    got = by_student(rows, student_name)
    for question, (points, reason) in EXPECTED[student_name].items():
        assert got[question].points == points, got[question]
        assert re.search(reason, got[question].reason), got[question]


@pytest.mark.parametrize("entry", sorted(HOSTILE))
def test_hostile_folder_entries_get_safe_ids_and_never_hang_or_follow_links(batch, entry):
    rows, *_ = batch
    pattern, expected = HOSTILE[entry]
    names = [s for s in ids(rows) if re.fullmatch(pattern, s)]
    assert len(names) == 1, names
    got = by_student(rows, names[0])
    for question, (points, reason) in expected.items():
        assert got[question].points == points and re.search(reason, got[question].reason), \
            got[question]


def test_entries_that_are_not_notebooks_are_skipped_not_students(batch):
    rows, out, *_ = batch
    with open(out / "skipped.csv", newline="") as table:
        assert {r["entry"]: r["why"] for r in csv.DictReader(table)} == SKIPPED
    assert not ids(rows) & {"notes.txt", "unzipped", "alice_"}


def test_every_route_to_a_forbidden_object_reaches_a_stub(batch):
    rows, out, *_ = batch
    executed = json.loads((out / "executed" / "routes.ipynb").read_text())
    printed = "".join(o["text"] for cell in executed["cells"] for o in cell["outputs"])
    found = re.search(r"routes that gave a callable: (\[.*\])", printed)[1]
    # every route but the repository's file and gc found an object: a stub
    assert set(ast.literal_eval(found)) == set(ROUTE_LABELS) - {"repository", "gc"}


def test_cheats_find_no_answer_anywhere(batch):
    rows, out, *_ = batch
    executed = json.loads((out / "executed" / "reader.ipynb").read_text())
    printed = "".join(o["text"] for cell in executed["cells"] for o in cell["outputs"])
    assert "0 solutions, 0 bundles found" in printed


def test_no_cheat_leaves_a_process_a_file_or_a_profile_change_behind(batch):
    rows, out, log, seconds, (before, after, digest, digest_after) = batch
    assert processes_with(TOKEN) == []
    assert after == before and digest_after == digest
    assert not list(out.rglob(f"*{TOKEN}*")) and not (out / "escaped").exists()
    with open(out / "grades.csv", newline="") as table:
        assert "escaper,q1_softmax,99" not in table.read()


def test_batch_writes_a_csv_no_reader_can_misread(batch):
    rows, out, *_ = batch
    text = (out / "grades.csv").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) == len(rows) + 1  # one line per row: no field holds a line break
    with open(out / "grades.csv", newline="") as table:
        written = list(csv.reader(table))
    assert written[0] == ["student", "question", "points", "max", "reason"]
    assert [row[:4] for row in written[1:]] == [
        [r.student, r.question, f"{r.points:g}", f"{r.max:g}"] for r in rows]
    assert not any(field[:1] in "=+-@" for row in written for field in row if field)


def test_safe_field_and_student_id():
    assert _safe_field("=1+1") == "'=1+1" and _safe_field("a\nb\r\nc") == "a b c"
    assert _student_id("alice.ipynb", set()) == "alice"
    assert _student_id("alice.ipynb", {"alice"}).startswith("alice_")
    assert re.fullmatch(r"s-x_[0-9a-f]{8}", _student_id("-x.ipynb", set()))


def test_feedback_shows_failing_public_cases_and_names_hidden_ones_by_message(batch, bundle):
    rows, out, *_ = batch
    files = {path.stem for path in (out / "feedback").iterdir()}
    assert files == ids(rows)
    text = (out / "feedback" / "raises.md").read_text()
    assert text.startswith("# sample: raises\n\nScore: 3 of 6 points.\n")  # no timing
    assert "Cells that raised an error:\n\n```text\ncode cell 3 (the answer to q2_nw): " \
           "ZeroDivisionError: division by zero\n```\n" in text
    assert "## q2_nw: 0 of 3 points" in text
    assert "      >>> nw_predict(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([0.5]))\n" \
           "      expected: [0.5]\n" \
           "      received: raised NameError: name 'nw_predict' is not defined" in text
    assert "  hidden cases: 0 of 2 passed\n  hidden case 1 FAILED: a query on a training point\n" \
           "  hidden case 2 FAILED: far from the data with a narrow bandwidth: no 0 / 0\n" in text
    assert "hidden case 1 (a query on a training point), hidden case 2 (far from the data" in \
        by_student(rows, "raises")["q2_nw"].reason
    assert "  hidden case 1 passed: large scores do not overflow\n" in \
        (out / "feedback" / "master.md").read_text()
    _, tests = load_bundle(bundle)
    for path in (out / "feedback").iterdir():
        assert not any(line in path.read_text() for line in hidden_lines(tests)), path
    leak = (out / "feedback" / "leak.md").read_text()
    assert "received: '[0.0, 0.0, 0.0, 0.0];'" in leak and "1000" not in leak


def test_executed_notebooks_keep_capped_outputs(batch):
    _, out, *_ = batch
    for name in ("prints", "mime_flood", "channel_flood"):
        assert (out / "executed" / f"{name}.ipynb").stat().st_size < MAX_OUTPUT + 20_000, name
    printed = json.loads((out / "executed" / "prints.ipynb").read_text())
    assert len(printed["cells"]) == 5                      # the master's 4 code cells + print
    assert not (out / "executed" / "not_json.ipynb").exists()


def test_batch_time_per_submission(batch):
    """One line per student: a submission costs about two sandbox starts here (its questions
    forbid two different sets of objects), a loop its time limit."""
    rows, out, log, seconds, _ = batch
    times = {line.split(":")[0]: float(re.search(r"points in ([\d.]+) s$", line)[1])
             for line in log if re.search(r"points in ([\d.]+) s$", line)}
    print(f"\ngraded {len(times)} entries in {seconds:.1f} s:",
          ", ".join(f"{name} {t:.1f} s" for name, t in sorted(times.items())))
    assert set(times) == ids(rows)
    assert times["loops"] >= TIMEOUT and times["not_json"] < 0.5


@needs_sandbox
def test_a_grader_failure_on_one_submission_does_not_stop_the_batch(tmp_path, monkeypatch,
                                                                    bundle):
    from d2lattn.grading import batch

    def fail(*args, **kwargs):
        raise RuntimeError("sandbox failed to start")

    monkeypatch.setattr(batch, "run_submission", fail)
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "a.ipynb").write_text(SAMPLE.read_text())
    (folder / "b.ipynb").write_text("{")
    rows = grade(folder, bundle, tmp_path / "out")
    assert [(r.student, r.reason) for r in rows] == \
        [("a", "grader error: RuntimeError")] * 3 + [("b", rows[3].reason)] * 3
    assert rows[3].reason.startswith("not valid JSON")


def test_grade_rejects_bad_arguments(tmp_path):
    bundle = tmp_path / "rel" / "autograder"
    bundle.mkdir(parents=True)
    (bundle / "sample.json").write_text(json.dumps({"assignment": "sample", "tests": []}))
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
                                         r"'sample'\], got None: the notebooks name none"):
        grade(tmp_path, bundle, tmp_path / "out")


@needs_sandbox
def test_command_line_grades_and_unsafe_mode_gives_the_same_verdict(tmp_path, capsys, bundle):
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "broken.ipynb").write_text("not a notebook")
    (folder / "master.ipynb").write_text(SAMPLE.read_text())
    main(["grade", str(folder), "--bundle", str(bundle), "--out", str(tmp_path / "grades"),
          "--timeout", "20"])
    out = capsys.readouterr().out
    assert sorted(re.findall(r"^(\w+): (\d) of 6 points in [\d.]+ s$", out, re.M)) == [
        ("broken", "0"), ("master", "6")]
    assert out.endswith("broken: new, 0 of 6\nmaster: new, 6 of 6\n"
                        "0 unchanged, 0 kept from earlier runs\n"
                        f"wrote 6 rows to {tmp_path / 'grades'}/grades.csv\n")
    main(["grade", str(folder), "--bundle", str(bundle), "--out", str(tmp_path / "unsafe"),
          "--timeout", "20", "--unsafe"])
    captured = capsys.readouterr()
    assert "master: 6 of 6 points" in captured.out and "WITHOUT a sandbox" in captured.err
