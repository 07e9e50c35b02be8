"""An instructor's workflow around grading (issue 21): a time budget per notebook, grades that
are never lost, the assignment found from the notebooks, rosters and per-student folders, the
gradebook and its Canvas and Moodle exports, shards merged into the unsharded grades."""
import base64
import csv
import json
import re
import time
from pathlib import Path

import pytest

from d2lattn.grading import grade
from d2lattn.grading.__main__ import main
from d2lattn.grading.batch.grade_folder import named_assignment
from d2lattn.grading.roster import read_roster
from d2lattn.grading.batch.gradebook import (Exports, Row, Student, canvas_column, changes,
                                             gradebook, write_exports)
from d2lattn.grading.master.notebook import cell_source, is_grader_cell, notebook_meta
from d2lattn.grading.releasing.split import assignment_of, private_cases, split_master
from d2lattn.grading.batch.identity import hand_in
from grading_support import needs_sandbox
from d2lattn.grading.batch.submissions import (Submission, find_submissions, name_students,
                                               student_identity)

SAMPLE = Path(__file__).parent / "data" / "grading" / "sample.ipynb"


def table(path):
    with open(path, newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))


def notebook(source=SAMPLE, extra=(), name=None, email=None):
    """The sample master (full marks) with ``extra`` code cells and a ``# STUDENT`` cell."""
    nb = json.loads(Path(source).read_text())
    if name is not None:
        nb["cells"].insert(0, {"cell_type": "code", "metadata": {}, "outputs": [],
                               "execution_count": None,
                               "source": f"# STUDENT\nname = {name!r}\nemail = {email!r}"})
    nb["cells"] += [{"cell_type": "code", "metadata": {}, "outputs": [], "source": text,
                     "execution_count": None} for text in extra]
    return nb


def write(path, nb):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))


def blank(bundle):
    return json.loads((bundle.parent / "sample.ipynb").read_text())


# --- release: the assignment, the hand-in cells, private hidden cases ----------------------

def test_notebook_meta_reads_the_d2lattn_dict_or_gives_an_empty_one():
    assert notebook_meta({"metadata": {"d2lattn": {"assignment": "ch1"}}}) == {
        "assignment": "ch1"}
    for broken in ({}, {"metadata": None}, {"metadata": {"d2lattn": "ch1"}},
                   {"metadata": {"other": {}}}):
        assert notebook_meta(broken) == {}


def test_the_assignment_is_the_masters_metadata_or_its_file_name():
    nb = notebook()
    assert assignment_of(nb, "sample") == "sample"
    nb["metadata"]["d2lattn"] = {"assignment": "week3-attention"}
    assert assignment_of(nb, "sample") == "week3-attention"
    assert split_master(nb, "week3-attention")[0]["metadata"]["d2lattn"] == {
        "assignment": "week3-attention"}
    for bad in ("../x", "", 3):
        nb["metadata"]["d2lattn"] = {"assignment": bad}
        with pytest.raises(ValueError, match=r"sample: metadata d2lattn.assignment must be "):
            assignment_of(nb, "sample")


def test_the_student_cell_release_writes_is_the_one_the_roster_matching_reads():
    student_nb, _ = split_master(notebook(), "sample")
    hand_in, cell = student_nb["cells"][-2:]
    assert hand_in["cell_type"] == "markdown" and "# STUDENT" in cell_source(hand_in)
    assert is_grader_cell(cell)  # grading skips it: its names never reach an answer
    assert student_identity(student_nb) == ("", "")
    cell["source"] = cell_source(cell).replace('name = ""', 'name = "Ada  Lovelace"').replace(
        'email = ""', 'email = "ADA@uni.edu"')
    assert student_identity(student_nb) == ("Ada Lovelace", "ADA@uni.edu")
    sub = Submission(None, "whatever.ipynb", student_nb, None, *student_identity(student_nb))
    named, unknown = name_students([sub], [{"student": "S1", "email": "ada@uni.edu",
                                            "login": ""}])
    assert [s.student for s in named] == ["S1"] and unknown == []


def test_release_drops_the_masters_run_metadata_so_a_rerun_master_releases_the_same():
    ran = notebook()
    for number, cell in enumerate(ran["cells"]):
        if cell["cell_type"] == "code":
            cell["execution_count"] = number
            cell["metadata"] = dict(cell["metadata"], tags=["keep"], execution={
                "iopub.execute_input": f"2026-11-22T17:03:{number:02d}Z"},
                ExecuteTime={"end_time": "2026"})
    clean = notebook()
    for cell in clean["cells"]:
        if cell["cell_type"] == "code":
            cell["metadata"] = dict(cell["metadata"], tags=["keep"])
    released = json.dumps(split_master(ran, "sample")[0], indent=1)
    assert released == json.dumps(split_master(clean, "sample")[0], indent=1)
    assert "2026" not in released and '"keep"' in released


PRIVATE = """# TESTS sample.q2_nw
# a wider bandwidth weighs the far point more
>>> nw_predict(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([0.0]), bandwidth=2.0)
[np.exp(-1 / 8) / (1 + np.exp(-1 / 8))]

# TESTS other_course.q9
# not released now: left out
>>> 1
1
"""


def test_private_cases_are_read_as_hidden_cases_of_the_named_question(tmp_path):
    tests = {"sample": split_master(notebook(), "sample")[1]}
    (tmp_path / "private.txt").write_text(PRIVATE)
    extra = private_cases(tmp_path / "private.txt", tests)
    assert list(extra) == [("sample", "q2_nw")]
    assert [case["hidden"] for case in extra["sample", "q2_nw"]] == [True]
    assert "bandwidth=2.0" in extra["sample", "q2_nw"][0]["code"]
    for text, error in [
            ("x = 1\n" + PRIVATE, r"text before the first '# TESTS <assignment>.<question>'"),
            ("# TESTS q2_nw\n# m\n>>> 1\n1", r"'# TESTS q2_nw' is not '# TESTS <assignment>"),
            ("# TESTS sample.q7\n# m\n>>> 1\n1", r"sample has no question q7"),
            ("# TESTS sample.q2_nw\n>>> 1\n1", r"hidden case 1 has no '# message' line"),
            ("# TESTS sample.q2_nw\n# m\n>>> x = 1", r"a case without an expected value"),
            ("# TESTS other.q1\n# m\n>>> 1\n1", r"no case for the assignments released "
                                                  r"\(\['sample'\]\)")]:
        (tmp_path / "bad.txt").write_text(text)
        with pytest.raises(ValueError, match=error):
            private_cases(tmp_path / "bad.txt", tests)
    with pytest.raises(ValueError, match=r"hidden must be a readable UTF-8 file"):
        private_cases(tmp_path / "missing.txt", tests)


@needs_sandbox
def test_private_cases_grade_but_never_reach_the_student_notebook(tmp_path, bundle):
    (tmp_path / "private.txt").write_text(PRIVATE)
    main(["release", str(SAMPLE), "--out", str(tmp_path / "rel"), "--hidden",
          str(tmp_path / "private.txt")])
    student_file = tmp_path / "rel" / "sample.ipynb"
    # byte for byte the notebook released without them (and released again: the same bytes)
    assert student_file.read_bytes() == (bundle.parent / "sample.ipynb").read_bytes()
    assert "bandwidth=2.0" not in student_file.read_text()
    assert "wider bandwidth" not in student_file.read_text()
    tests = json.loads((tmp_path / "rel" / "autograder" / "sample.json").read_text())["tests"]
    assert [c["hidden"] for c in tests[1]["suites"][0]["cases"]] == [False, False, True, True,
                                                                     True]
    sloppy = notebook()  # divides by bandwidth ** 2: only the private case sees it
    index = next(i for i, c in enumerate(sloppy["cells"]) if "# QUESTION q2_nw" in
                 cell_source(c))
    sloppy["cells"][index]["source"] = cell_source(sloppy["cells"][index]).replace(
        ") / bandwidth", ") / bandwidth ** 2")
    write(tmp_path / "class" / "sloppy.ipynb", sloppy)
    graded = {}
    for name, folder in (("private", tmp_path / "rel" / "autograder"), ("public", bundle)):
        rows = grade(tmp_path / "class", folder, tmp_path / name, timeout=60)
        graded[name] = next(row for row in rows if row.question == "q2_nw")
    assert graded["public"].points == 3, graded
    assert graded["private"].points == pytest.approx(2.4), graded
    assert "hidden case 3 (a wider bandwidth weighs the far point more)" in \
        graded["private"].reason


# --- reading a class ----------------------------------------------------------------------

def test_folders_per_student_saved_outputs_and_skipped_entries(tmp_path):
    plot = {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(b"x" * 30_000_000).decode()}}
    heavy = notebook()
    heavy["cells"][1]["outputs"] = [plot]
    write(tmp_path / "heavy.ipynb", heavy)  # 40 MB on disk, 1 kB of code
    write(tmp_path / "octocat" / "exercises" / "ch1.ipynb", notebook())  # GitHub Classroom
    write(tmp_path / "twins" / "a.ipynb", notebook())
    write(tmp_path / "twins" / "b.ipynb", notebook())
    # Colab's extra copy holds the work, the repository's own notebook is the blank one
    blank_nb = notebook(name="", email="")
    blank_nb["cells"][1]["source"] = "raise NotImplementedError  # your code here"
    write(tmp_path / "colab" / "ch1.ipynb", blank_nb)
    write(tmp_path / "colab" / "Copy of ch1.ipynb", notebook(name="Ada", email="ada@uni.edu"))
    write(tmp_path / "long.ipynb", notebook(extra=["x = 1\n" * 400_000]))
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("hello")
    found, skipped = find_submissions(tmp_path, max_code=1_000_000)
    by_file = {sub.file: sub for sub in found}
    assert sorted(by_file) == ["colab", "heavy.ipynb", "long.ipynb", "octocat", "twins"]
    assert by_file["heavy.ipynb"].error is None
    assert all("outputs" not in cell for cell in by_file["heavy.ipynb"].notebook["cells"])
    assert by_file["octocat"].error is None and by_file["octocat"].notebook is not None
    assert by_file["twins"].error is None  # the first of equals, the other listed
    assert by_file["colab"].email == "ada@uni.edu"  # the notebook filled in is graded
    code = re.fullmatch(r"its code cells hold (\d+) characters \(at most 1000000\)",
                        by_file["long.ipynb"].error)
    assert int(code[1]) > 2_400_000
    assert skipped == [("colab/ch1.ipynb", "another notebook of the folder; Copy of ch1.ipynb "
                                           "was graded"),
                       ("empty/", "a folder without a notebook"),
                       ("notes.txt", "not a notebook (.ipynb)"),
                       ("twins/b.ipynb", "another notebook of the folder; a.ipynb was graded")]


def test_students_are_named_by_the_roster_then_by_their_file(tmp_path):
    (tmp_path / "roster.csv").write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section\n"
        "    Points Possible,,,,\n"
        "Ada Lovelace,101,S1,ada,A\nAlan Turing,102,S2,alan@uni.edu,A\n")
    roster = read_roster(tmp_path / "roster.csv")
    assert [(r["student"], r["name"], r["login"]) for r in roster] == [
        ("S1", "Ada Lovelace", "ada"), ("S2", "Alan Turing", "alan@uni.edu")]
    for file, nb in {"ada.ipynb": notebook(), "x.ipynb": notebook(name="A", email="ADA@x"),
                     "mallory.ipynb": notebook(name="Mallory", email="mallory@x"),
                     "ADA-copy.ipynb": notebook()}.items():
        write(tmp_path / "in" / file, nb)
    found, _ = find_submissions(tmp_path / "in")
    named, dropped = name_students(found, roster)
    assert {sub.file: sub.student for sub in named} == {
        "ADA-copy.ipynb": "ADA-copy", "ada.ipynb": "S1", "mallory.ipynb": "mallory",
        "x.ipynb": "x"}
    assert dropped == [] and {sub.file: sub.flags for sub in named} == {
        "ADA-copy.ipynb": ("no # STUDENT cell",), "ada.ipynb": ("no # STUDENT cell",),
        "mallory.ipynb": (), "x.ipynb": ()}
    assert next(s for s in named if s.file == "mallory.ipynb")[4:6] == ("Mallory", "mallory@x")
    with pytest.raises(ValueError, match=r"roster must have an e-mail, login or id column, "
                                         r"got columns \['name'\]"):
        (tmp_path / "bad.csv").write_text("name\nAda\n")
        read_roster(tmp_path / "bad.csv")


def test_the_assignment_is_the_one_most_notebooks_name(tmp_path):
    def sub(name):
        return Submission(None, "f", notebook(), None, "", "", assignment=name)

    for name in ("ch1", "ch2"):
        (tmp_path / f"{name}.json").write_text("{}")
    assert named_assignment([sub("ch1"), sub("ch1")], tmp_path) == "ch1"
    assert named_assignment([sub("ch2"), sub("ch1"), sub("ch2"), sub("ch9")], tmp_path) == \
        "ch2"  # the others get rows saying so; ch9 is no assignment of the bundle
    assert named_assignment([], tmp_path) is None
    with pytest.raises(ValueError, match=r"the submissions answer several assignments equally "
                                         r"often \(\{'ch1': 1, 'ch2': 1\}\): pass --assign"):
        named_assignment([sub("ch1"), sub("ch2")], tmp_path)


# --- the gradebook and its exports --------------------------------------------------------

def test_gradebook_and_the_canvas_and_moodle_exports(tmp_path):
    (tmp_path / "roster.csv").write_text("Student,ID,SIS User ID,SIS Login ID,Section\n"
                                         "Ada Lovelace,101,S1,ada,A\nAlan Turing,102,S2,alan,B\n")
    roster = read_roster(tmp_path / "roster.csv")
    rows = [Row("S1", "q1", 2, 2, ""), Row("S1", "q2", 1.5, 3, ""),
            Row("eve", "q1", 0, 2, ""), Row("eve", "q2", 3, 3, "")]
    students = [Student("S1", "ada.ipynb", "", ""), Student("eve", "eve.ipynb", "Eve", "e@x")]
    questions = [("q1", 2), ("q2", 3)]
    book = gradebook(rows, students, roster, questions)
    assert [(r["student"], r["name"], r["q1"], r["q2"], r["total"], r["status"])
            for r in book] == [("eve", "Eve", 0, 3, 3, "not on the roster"),
                               ("S1", "Ada Lovelace", 2, 1.5, 3.5, "graded"),
                               ("S2", "Alan Turing", 0, 0, 0, "no submission")]
    write_exports(tmp_path, "ch1_attention", book, questions)
    assert table(tmp_path / "gradebook.csv")[1] == {
        "student": "S1", "name": "Ada Lovelace", "email": "", "q1": "2", "q2": "1.5",
        "total": "3.5", "max": "5", "status": "graded", "note": "", "variant": ""}
    canvas = list(csv.reader(open(tmp_path / "canvas.csv", newline="")))
    assert canvas == [["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                       "ch1_attention"], ["Points Possible", "", "", "", "", "5"],
                      ["Ada Lovelace", "101", "S1", "ada", "A", "3.5"],
                      ["Alan Turing", "102", "S2", "alan", "B", ""]]  # eve: not on the roster
    assert table(tmp_path / "moodle.csv") == [
        {"Email address": "", "Username": "ada", "ID number": "S1", "ch1_attention": "3.5"},
        {"Email address": "", "Username": "alan", "ID number": "S2", "ch1_attention": ""}]
    assert table(tmp_path / "attention.csv") == [
        {"entry": "eve.ipynb", "student": "eve", "status": "not on the roster", "note": ""},
        {"entry": "", "student": "S2", "status": "no submission", "note": ""}]
    write_exports(tmp_path, "ch1_attention", book, questions,
                  exports=Exports("Chapter 1 (4321)", missing_as_zero=True))
    canvas = list(csv.reader(open(tmp_path / "canvas.csv", newline="")))
    assert canvas[0][-1] == "Chapter 1 (4321)" and canvas[-1][-1] == "0"
    assert canvas_column("ch1", Exports("4321")) == "ch1 (4321)"


def test_changes_name_each_student_whose_total_moved():
    old = [Row("a", "q", 1, 2, ""), Row("b", "q", 2, 2, ""), Row("c", "q", 0, 2, "")]
    new = [Row("a", "q", 2, 2, ""), Row("b", "q", 2, 2, ""), Row("d", "q", 1, 2, "")]
    assert changes(old, new) == ["a: 1 -> 2 of 2", "d: new, 1 of 2",
                                 "1 unchanged, 1 kept from earlier runs"]


# --- grading a class ----------------------------------------------------------------------

@needs_sandbox
def test_a_regrade_of_one_student_keeps_every_other_row(tmp_path, bundle):
    for name in ("amy", "bob", "cat"):
        write(tmp_path / "class" / f"{name}.ipynb", blank(bundle))
    write(tmp_path / "class" / "amy.ipynb", notebook(extra=["print('x' * 4000)"]))
    (tmp_path / "class" / "cat.pdf").write_text("not a notebook")
    grade(tmp_path / "class", bundle, tmp_path / "grades", timeout=60, max_output=5000)
    # amy within her limits (4000 characters printed of 5000): no flag but the missing cell
    assert {r["student"]: r["status"] for r in table(tmp_path / "grades" / "students.csv")} \
        == {"amy": "no # STUDENT cell", "bob": "graded", "cat": "graded"}  # the blanks
    first = (tmp_path / "grades" / "grades.csv").read_text()
    assert len(table(tmp_path / "grades" / "grades.csv")) == 9
    write(tmp_path / "late" / "bob.ipynb", notebook())  # bob hands in again, late
    log = []
    rows = grade(tmp_path / "late", bundle, tmp_path / "grades", timeout=60, log=log.append)
    assert {row.student for row in rows} == {"bob"}
    after = table(tmp_path / "grades" / "grades.csv")
    assert len(after) == 9 and {r["student"]: 0 for r in after}.keys() == {"amy", "bob", "cat"}
    kept = [line for line in after if line["student"] != "bob"]
    assert kept == [r for r in table_of(first) if r["student"] != "bob"]
    assert log[-2:] == ["bob: 0 -> 6 of 6", "0 unchanged, 2 kept from earlier runs"]
    book = table(tmp_path / "grades" / "gradebook.csv")
    assert [(r["student"], r["total"]) for r in book] == [("amy", "6"), ("bob", "6"),
                                                         ("cat", "0")]
    assert table(tmp_path / "grades" / "skipped.csv") == [  # still listed after the late run
        {"entry": "cat.pdf", "why": "not a notebook (.ipynb)"}]


def table_of(text):
    return list(csv.DictReader(text.splitlines()))


@needs_sandbox
def test_a_looping_notebook_costs_its_budget_once_and_is_flagged(tmp_path, bundle):
    """The sample's questions run in two groups (q1 forbids an object): a loop in a shared
    cell used to cost the time limit once per group. The points it loses, and a flood of
    printed lines, are flagged for the instructor (they were "graded")."""
    nb = notebook(name="Ann", email="ann@uni.edu")
    nb["cells"][1:1] = notebook(extra=["for _ in range(3000):\n    print('flood')",
                                      "while True:\n    pass"])["cells"][-2:]  # before q1
    write(tmp_path / "in" / "loops.ipynb", nb)
    start = time.monotonic()
    rows = grade(tmp_path / "in", bundle, tmp_path / "out", timeout=8, max_output=5000)
    seconds = time.monotonic() - start
    assert seconds < 8 + 12, seconds  # the budget, the sandbox's start and the cases
    assert all("time limit of 8 s" in row.reason for row in rows), rows
    student, = table(tmp_path / "out" / "students.csv")
    assert student["status"] == "time limit; output flood"
    assert student["note"] == (
        "6 points lost where the time limit stopped it (q1_softmax, q2_nw, q3_weight); if its "
        "code is slow rather than stuck, grade it again with a larger --timeout; its cells "
        "printed over 5000 characters (the feedback keeps the first 5000), which takes time")
    assert table(tmp_path / "out" / "canvas.csv")[1]["sample"] == "0"  # graded, flagged



@needs_sandbox
def test_shards_merged_equal_the_unsharded_grades(tmp_path, bundle, capsys):
    for number in range(6):
        write(tmp_path / "class" / f"s{number}.ipynb", notebook() if number % 2 else
              blank(bundle))
    write(tmp_path / "class" / "gh-user" / "ch.ipynb", notebook())
    (tmp_path / "class" / "notes.txt").write_text("not a notebook")
    whole = tmp_path / "whole"
    main(["grade", str(tmp_path / "class"), "--bundle", str(bundle), "--out", str(whole),
          "--canvas-assignment", "Sample (55)"])
    for index in (1, 2):
        main(["grade", str(tmp_path / "class"), "--bundle", str(bundle), "--out",
              str(tmp_path / f"shard{index}"), "--shard", f"{index}/2",
              "--canvas-assignment", "55"])
    shards = [table(tmp_path / f"shard{i}" / "grades.csv") for i in (1, 2)]
    assert all(shards) and len(shards[0]) + len(shards[1]) == len(table(whole / "grades.csv"))
    capsys.readouterr()
    main(["merge", str(tmp_path / "merged"), str(tmp_path / "shard1"),
          str(tmp_path / "shard2")])  # the shards' Canvas column, as recorded
    assert capsys.readouterr().out == (
        f"exports as recorded in {tmp_path / 'shard1'}/run.json: canvas.csv column "
        f"'sample (55)', a blank for no submission\n"
        f"merged 2 shards: {tmp_path / 'merged'}/grades.csv holds 21 rows of 7 students\n")
    assert list(table(whole / "canvas.csv")[0])[-1] == "Sample (55)"
    for name in ("grades.csv", "gradebook.csv", "moodle.csv", "students.csv", "skipped.csv"):
        assert (tmp_path / "merged" / name).read_text() == (whole / name).read_text(), name
    assert (tmp_path / "merged" / "canvas.csv").read_text() == \
        (whole / "canvas.csv").read_text().replace("Sample (55)", "sample (55)")
    assert sorted(p.name for p in (tmp_path / "merged" / "feedback").iterdir()) == \
        sorted(p.name for p in (whole / "feedback").iterdir())


def test_the_command_line_says_its_defaults_and_errors_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["grade", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "seconds for a notebook's code cells, in each of its sandboxes (default: 300)" in text
    assert "(default: None)" not in text
    (tmp_path / "rel" / "autograder").mkdir(parents=True)
    (tmp_path / "rel" / "autograder" / "sample.json").write_text(json.dumps(
        {"assignment": "sample", "tests": []}))
    bundle = str(tmp_path / "rel" / "autograder")
    for args, error in [
            (["--bundle", bundle, "--roster", str(tmp_path / "missing.csv")],
             f"roster must be a CSV file of the class, got '{tmp_path}/missing.csv': no such "
             "file"),
            (["--bundle", bundle, "--canvas-assignment", "Attention"],
             "canvas_assignment must be Canvas's column header 'Name (123)', copied from a "
             "gradebook export, or the assignment's id 123, got 'Attention' (without its id "
             "Canvas imports a new assignment)"),
            (["--bundle", str(tmp_path / "rel")],
             f"bundle must be the autograder folder written by release, holding one "
             f"<assignment>.json per assignment, got '{tmp_path}/rel', which holds none; its "
             f"autograder/ folder is one: pass --bundle {bundle}")]:
        with pytest.raises(SystemExit) as stop:
            main(["grade", str(tmp_path), "--out", str(tmp_path / "out"), *args])
        assert stop.value.code == 2
        assert capsys.readouterr().err == f"error: {error}\n"


def test_exports_take_a_canvas_column_with_its_id_only():
    assert canvas_column("ch1", Exports(" Chapter 1 (4321) ")) == "Chapter 1 (4321)"
    assert canvas_column("ch1", Exports()) == "ch1"
    for bad in ("Attention", "(12)", "Chapter 1 (x1)", "", 12):
        with pytest.raises(ValueError, match=r"canvas_assignment must be Canvas's column "):
            Exports(bad)
    with pytest.raises(TypeError, match=r"missing_as_zero must be a bool or None, got 'yes'"):
        Exports(missing_as_zero="yes")


def test_an_unresolved_hand_in_is_exported_blank_even_with_missing_as_zero(tmp_path):
    rows = [Row(s, "q1", 0, 2, "why") for s in ("S1", "S2", "S3", "S4")] + \
        [Row("S5", "q1", 2, 2, "")]
    students = [Student("S1", "a.ipynb", "", "", "unreadable", ""),
                Student("S2", "b.ipynb", "", "", "wrong assignment", ""),
                Student("S3", "c.ipynb", "", "", "duplicate; other release", ""),
                Student("S4", "d.ipynb", "", "", "not run", ""),
                Student("S5", "e.ipynb", "", "", "time limit; output flood", "")]
    roster = [{"student": f"S{n}", "name": "", "email": "", "login": "", "id": f"S{n}"}
              for n in range(1, 7)]
    book = gradebook(rows, students, roster, [("q1", 2)])
    write_exports(tmp_path, "ch1", book, [("q1", 2)], exports=Exports(missing_as_zero=True))
    assert [(r["SIS User ID"], r["ch1"]) for r in table(tmp_path / "canvas.csv")[1:]] == [
        ("S1", ""), ("S2", ""), ("S3", ""), ("S4", ""), ("S5", "2"), ("S6", "0")]
    assert [r["ch1"] for r in table(tmp_path / "moodle.csv")] == ["", "", "", "", "2", "0"]
    assert [r["status"] for r in table(tmp_path / "attention.csv")] == [
        "unreadable", "wrong assignment", "duplicate; other release", "not run",
        "time limit; output flood", "no submission"]


def test_a_typed_email_of_another_roster_student_is_flagged_not_taken(tmp_path):
    (tmp_path / "roster.csv").write_text("email,login,name\nada@uni.edu,ada,Ada\n"
                                         "bob@uni.edu,bob,Bob\n")
    roster = read_roster(tmp_path / "roster.csv")
    subs = [Submission(None, "bob.ipynb", {"cells": []}, None, "", "ADA@uni.edu",
                       handin=hand_in("bob.ipynb")),
            Submission(None, "ada.ipynb", {"cells": []}, None, "", "ada@uni.edu",
                       handin=hand_in("ada.ipynb"))]
    named, _ = name_students(subs, roster)
    assert [(s.file, s.student, s.flags, s.note) for s in named] == [
        ("bob.ipynb", "bob", ("e-mail of another student",),
         "its # STUDENT cell says ADA@uni.edu, the e-mail of roster student ada; graded as "
         "bob's, whose hand-in it is"),
        ("ada.ipynb", "ada", (), "")]
