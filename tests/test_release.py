"""d2lattn.grading.releasing: the student notebook and the bundle, what release refuses."""
import copy
import json
import re

import pytest
from grading_support import QUESTIONS, SAMPLE, hidden_lines, master, needs_sandbox, split

import d2lattn
from d2lattn.grading import release
from d2lattn.grading.releasing import stamp
from d2lattn.grading.master.notebook import STUB, cell_source, is_grader_cell, question_of
from d2lattn.grading.releasing.split import split_master

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


@needs_sandbox
def test_the_student_notebook_and_the_bundle_record_the_same_release(tmp_path, sample_release):
    """d2lattn's version and the bundle's id, a digest of the master's questions and cases as
    split: the same in both files, with or without private cases; another master's case,
    another id."""
    release(SAMPLE, tmp_path / "two", hidden=_private_case(tmp_path))
    made = []
    for folder in (sample_release, tmp_path / "two"):
        student = json.loads((folder / "sample.ipynb").read_text())
        bundle = json.loads((folder / "autograder" / "sample.json").read_text())
        assert student["metadata"]["d2lattn"]["release"] == bundle["release"]
        made.append(bundle["release"])
    assert made[0] == made[1] == stamp("sample", split()[1])
    assert made[0]["version"] == d2lattn.__version__
    assert re.fullmatch(r"[0-9a-f]{12}", made[0]["bundle"])
    tests = split()[1]
    tests[2]["suites"][0]["cases"][0]["code"] += "\n"
    assert stamp("sample", tests)["bundle"] != made[0]["bundle"]


def _private_case(tmp_path):
    path = tmp_path / "private.txt"
    path.write_text("# TESTS sample.q3_weight\n# the weight, rounded\n>>> round(answer_q3, 1)\n"
                    "0.8\n")
    return path
