"""A real class (issue 30): the hand-in system's names decide who is who, a typed e-mail only
fills gaps and never takes a classmate's grade, rosters and exports as Canvas and Moodle have
them, one bad file spoils only its own row, and what needs attention is flagged.

The pure parsing is tested without a sandbox; one class folder is graded once (module fixture)
and re-graded once."""
import ast
import csv
import json
import re
import shutil

import pytest

from d2lattn.grading import grade
from d2lattn.grading.limits import MAX_STUDENT_CELL
from d2lattn.grading.roster import read_roster
from d2lattn.grading.batch.gradebook import (Exports, Row, Student, gradebook,
                                             write_exports)
from d2lattn.grading.batch.record import read_run
from d2lattn.grading.batch.identity import HandIn, hand_in, plain_name
from d2lattn.grading.batch.submissions import (Submission, find_submissions, name_students,
                                               safe_id, student_identity)
from grading_support import code_cell, master

CANVAS_ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section,Chapter 1 (777)
    Points Possible,,,,,6
"Lovelace, Ada",1001,S1,ada@uni.edu,A,
"Turing, Alan",1002,S2,alan@uni.edu,A,
"Zoe, Zed",1003,S3,zoe@uni.edu,B,
"Hopper, Grace",1004,S4,grace@uni.edu,B,
"Babbage, Charles",1005,S5,charles@uni.edu,B,
"Hamilton, Margaret",1006,S6,margaret@uni.edu,B,
"Noether, Emmy",1007,S7,emmy@uni.edu,B,
"Student, Test",1099,,,B,
"""
MOODLE_ROSTER = """First name,Last name,ID number,Institution,Department,Email address
Ada,Lovelace,M1,Uni,CS,ada@uni.edu
Alan,Turing,M2,Uni,CS,alan@uni.edu
"""
CRASH = "# STUDENT\nname = " + "-" * 5000 + "1\nemail = 'x@uni.edu'"


def table(path):
    with open(path, newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))


def with_student(nb, email="", name="", source=None):
    """``nb`` with a ``# STUDENT`` cell first (``source``, or one giving ``name`` and ``email``)."""
    nb = json.loads(json.dumps(nb))
    nb["cells"].insert(0, code_cell(source or f"# STUDENT\nname = {name!r}\nemail = {email!r}"))
    return nb


def sub(file, email="", folder=False, time=0.0):
    return Submission(None, file, {"cells": []}, None, "", email, handin=hand_in(file, folder),
                      time=time)


# --- the hand-in system's names --------------------------------------------------------------

def test_canvas_moodle_and_classroom_names_are_read():
    assert hand_in("lovelaceada_1001_5001_ch1.ipynb") == HandIn(
        "canvas", "1001", "lovelaceada_1001", (False, 5001), "ch1.ipynb")
    assert hand_in("lovelaceada_LATE_1001_5002_my_ch1-1.ipynb") == HandIn(
        "canvas", "1001", "lovelaceada_1001", (True, 5002), "my_ch1-1.ipynb")
    assert hand_in("Ada  Lovelace_431_assignsubmission_file_ch1.ipynb") == HandIn(
        "moodle", "ada lovelace", "Ada Lovelace", (), "ch1.ipynb")
    assert hand_in("Ada Lovelace_431_assignsubmission_file_", folder=True).system == "moodle"
    assert hand_in("ch1-ada-l", folder=True) == HandIn("classroom", "ch1-ada-l", "ch1-ada-l",
                                                       (), "ch1-ada-l")
    assert hand_in("ada.ipynb") == HandIn("file", "ada", "ada", (), "ada.ipynb")
    assert hand_in("ch1_2_3_x.ipynb").system == "file"  # no Canvas name starts with a digit
    assert plain_name("Lovelace,  Ada") == plain_name("ADA lovelace") == "ada lovelace"


def test_canvas_and_moodle_roster_exports_are_read_as_they_are(tmp_path):
    (tmp_path / "canvas.csv").write_text(CANVAS_ROSTER)
    canvas = read_roster(tmp_path / "canvas.csv")
    assert [(r["student"], r["canvas"], r["login"], r["section"]) for r in canvas][:2] == [
        ("S1", "1001", "ada@uni.edu", "A"), ("S2", "1002", "alan@uni.edu", "A")]
    assert [r["name"] for r in canvas][2:] == ["Zoe, Zed", "Hopper, Grace", "Babbage, Charles",
                                               "Hamilton, Margaret", "Noether, Emmy"]
    # Points Possible and Canvas's test student skipped: not a student with "no submission"
    (tmp_path / "moodle.csv").write_text(MOODLE_ROSTER)
    moodle = read_roster(tmp_path / "moodle.csv")
    assert [(r["student"], r["name"], r["email"], r["canvas"]) for r in moodle] == [
        ("M1", "Ada Lovelace", "ada@uni.edu", ""), ("M2", "Alan Turing", "alan@uni.edu", "")]


def test_the_hand_in_name_decides_and_a_typed_email_only_fills_gaps(tmp_path):
    (tmp_path / "canvas.csv").write_text(CANVAS_ROSTER)
    roster = read_roster(tmp_path / "canvas.csv")
    named, dropped = name_students([
        sub("mallory.ipynb", email="zoe@uni.edu"),  # claims Zoe, whose own file is here
        sub("zoezed_1003_5003_ch1.ipynb", email="zoe@uni.edu"),
        sub("Submission (8).ipynb", email="ALAN@uni.edu"),  # no name: the e-mail fills in
        sub("lovelaceada_1001_5001_ch1.ipynb", time=9),
        sub("lovelaceada_LATE_1001_5002_ch1.ipynb", time=1),  # later, though older on disk
        sub("stranger_9999_1_ch1.ipynb")], roster)
    students = {s.file: (s.student, s.flags) for s in named}
    assert students == {
        "mallory.ipynb": ("mallory", ("claimed identity",)),
        "zoezed_1003_5003_ch1.ipynb": ("S3", ()),
        "Submission (8).ipynb": ("S2", ()),
        "lovelaceada_LATE_1001_5002_ch1.ipynb": ("S1", ("duplicate",)),
        "stranger_9999_1_ch1.ipynb": ("stranger_9999", ())}
    assert dropped == [("lovelaceada_1001_5001_ch1.ipynb", "duplicate: an earlier hand-in of "
                        "S1, whose lovelaceada_LATE_1001_5002_ch1.ipynb was graded")]
    # a re-grade: Zoe's grades came from her own file, which mallory's e-mail cannot replace
    again, _ = name_students([sub("mallory.ipynb", email="zoe@uni.edu")], roster,
                             {"S3": "zoezed_1003_5003_ch1.ipynb"})
    assert [(s.student, s.flags) for s in again] == [("mallory", ("claimed identity",))]


def test_hand_ins_of_several_people_typing_one_email_take_no_one(tmp_path):
    """Two Classroom folders (or two Canvas user ids the roster does not list) type Zoe's
    e-mail: neither is Zoe's, both are flagged, whichever was handed in later; one folder
    alone is hers, and so are two hand-ins of one Canvas user."""
    (tmp_path / "moodle.csv").write_text(MOODLE_ROSTER + "Zoe,Zed,M3,Uni,CS,zoe@uni.edu\n")
    roster = read_roster(tmp_path / "moodle.csv")
    for thief, victim in ((sub("ch1-m4llory", folder=True, email="zoe@uni.edu", time=9),
                           sub("ch1-zoe-gh", folder=True, email="zoe@uni.edu", time=1)),
                          (sub("mallory_7_9_ch1.ipynb", email="zoe@uni.edu"),
                           sub("zedzoe_3_2_ch1.ipynb", email="zoe@uni.edu"))):
        named, dropped = name_students([victim, thief], roster)
        assert [(s.student, s.flags) for s in named] == [
            (safe_id(victim.handin.name, set()), ("claimed identity",)),
            (safe_id(thief.handin.name, set()), ("claimed identity",))] and dropped == []
        assert "as those of 1 other hand-in(s) do" in named[0].note
    alone, _ = name_students([sub("ch1-zoe-gh", folder=True, email="zoe@uni.edu")], roster)
    assert [(s.student, s.flags) for s in alone] == [("M3", ())]
    twice, dropped = name_students([sub("zedzoe_3_2_ch1.ipynb", email="zoe@uni.edu"),
                                    sub("zedzoe_LATE_3_5_ch1.ipynb", email="zoe@uni.edu")],
                                   roster)
    assert [(s.file, s.student) for s in twice] == [("zedzoe_LATE_3_5_ch1.ipynb", "M3")]
    assert [entry for entry, _ in dropped] == ["zedzoe_3_2_ch1.ipynb"]


def test_moodle_names_classroom_folders_and_file_times_without_a_recorded_time(tmp_path):
    (tmp_path / "moodle.csv").write_text(MOODLE_ROSTER)
    roster = read_roster(tmp_path / "moodle.csv") + [
        {"student": "g1", "login": "ada-l"}, {"student": "g2", "login": "l"}]
    named, dropped = name_students([
        sub("Alan Turing_12_assignsubmission_file_ch1.ipynb"),
        sub("ch1-ada-l", folder=True),
        sub("ada-l.ipynb", time=5), sub("ADA-L.ipynb", time=3)], roster)
    # the folder ch1-<login> and both files are g1's: the newest file on disk counts
    assert {s.file: s.student for s in named} == {
        "Alan Turing_12_assignsubmission_file_ch1.ipynb": "M2", "ada-l.ipynb": "g1"}
    assert [entry for entry, _ in dropped] == ["ch1-ada-l", "ADA-L.ipynb"]


def test_a_student_cell_no_parser_can_read_spoils_nothing(tmp_path):
    for text in (CRASH, "# STUDENT\nname = " + "not " * 10000 + "1\nemail = 'x@uni.edu'",
                 "# STUDENT\nname = 'x'\nemail = 'x@uni.edu'\n" + "#" * 20000):
        # what this Python's own parser makes of the cell (3.11 gives up on the first two,
        # 3.13 reads them), the third too long to parse at all: no error either way
        expected = ("", "x@uni.edu" if readable(text) and len(text) <= MAX_STUDENT_CELL else "")
        assert student_identity(with_student(master(), source=text)) == expected
    path = tmp_path / "crash.ipynb"
    path.write_text(json.dumps(with_student(master(), source=CRASH)))
    (tmp_path / "ok.ipynb").write_text(json.dumps(with_student(master(), "ok@uni.edu")))
    found, _ = find_submissions(tmp_path)
    assert [(s.file, s.error, s.email) for s in found] == [
        ("crash.ipynb", None, "x@uni.edu" if readable(CRASH) else ""),
        ("ok.ipynb", None, "ok@uni.edu")]


def readable(text):
    """True if this Python's parser reads ``text``."""
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


# --- a class graded end to end -------------------------------------------------------------

@pytest.fixture(scope="module")
def graded(tmp_path_factory, sample_release):
    """A Canvas class graded with Canvas's gradebook export as roster and a Canvas column,
    then mallory re-graded without repeating either (a routine late re-grade): ``(out
    folder, log of the first run, log of the re-grade, grades.csv before it, the out folder
    of a re-grade told mallory's file is Zoe's)``."""
    tmp = tmp_path_factory.mktemp("class")
    bundle, blank = sample_release / "autograder", json.loads(
        (sample_release / "sample.ipynb").read_text())
    other = json.loads(json.dumps(blank))
    other["metadata"]["d2lattn"]["assignment"] = "ch9_other"
    older = json.loads(json.dumps(blank))  # a copy of an earlier release of the assignment
    older["metadata"]["d2lattn"]["release"]["bundle"] = "0123456789ab"
    folder = tmp / "class"
    folder.mkdir()
    for name, nb in {
            "lovelaceada_1001_5001_sample.ipynb": blank,  # replaced by her late hand-in
            "lovelaceada_LATE_1001_5007_sample-1.ipynb": with_student(master(), "ada@uni.edu"),
            "turingalan_1002_5002_sample.ipynb": with_student(master(), source=CRASH),
            "zedzoe_1003_5003_sample.ipynb": with_student(master(), "zoe@uni.edu"),
            "hoppergrace_1004_5004_sample.ipynb": other,
            "hamiltonmargaret_1006_5006_sample.ipynb": with_student(master(), "ada@uni.edu"),
            "mallory.ipynb": with_student(blank, "zoe@uni.edu"),
            "oldcopy.ipynb": older}.items():
        (folder / name).write_text(json.dumps(nb))
    (folder / "noetheremmy_1007_5008_sample.ipynb").write_text("{")  # unreadable
    (tmp / "roster.csv").write_text(CANVAS_ROSTER)
    out, first, again = tmp / "grades", [], []
    grade(folder, bundle, out, timeout=60, roster=tmp / "roster.csv", log=first.append,
          exports=Exports("Chapter 1 (777)"))
    before = (out / "grades.csv").read_text()
    (tmp / "regrade").mkdir()
    (tmp / "regrade" / "mallory.ipynb").write_text((folder / "mallory.ipynb").read_text())
    grade(tmp / "regrade", bundle, out, timeout=60, log=again.append)
    told = tmp / "told"  # the instructor says mallory's file is Zoe's after all
    shutil.copytree(out, told)
    grade(tmp / "regrade", bundle, told, timeout=60, identities={"mallory.ipynb": "S3"})
    return out, first, again, before, told


def test_canvas_export_carries_the_rosters_ids_for_every_roster_student(graded):
    out, *_ = graded
    with open(out / "canvas.csv", newline="") as file:
        canvas = list(csv.reader(file))
    assert canvas == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Chapter 1 (777)"],
        ["Points Possible", "", "", "", "", "6"],
        ["Lovelace, Ada", "1001", "S1", "ada@uni.edu", "A", "6"],
        ["Turing, Alan", "1002", "S2", "alan@uni.edu", "A", "6"],  # the crash cell: graded
        ["Zoe, Zed", "1003", "S3", "zoe@uni.edu", "B", "6"],  # not mallory's 0
        ["Hopper, Grace", "1004", "S4", "grace@uni.edu", "B", ""],  # another assignment
        ["Babbage, Charles", "1005", "S5", "charles@uni.edu", "B", ""],  # blank, not 0
        ["Hamilton, Margaret", "1006", "S6", "margaret@uni.edu", "B", "6"],
        ["Noether, Emmy", "1007", "S7", "emmy@uni.edu", "B", ""]]  # unreadable: blank, not 0
    moodle = table(out / "moodle.csv")  # the roster's ids, never a typed e-mail
    assert [(r["Email address"], r["Username"], r["ID number"]) for r in moodle] == [
        ("", f"{name}@uni.edu", f"S{number}") for number, name in enumerate(
            ["ada", "alan", "zoe", "grace", "charles", "margaret", "emmy"], 1)]


def test_the_gradebook_and_attention_list_flag_what_needs_attention(graded):
    out, first, *_ = graded
    status = {r["student"]: r["status"] for r in table(out / "gradebook.csv")}
    assert status == {"mallory": "claimed identity; not on the roster", "S1": "duplicate",
                      "S2": "graded", "S3": "graded", "S4": "wrong assignment",
                      "S5": "no submission", "oldcopy": "other release; not on the roster",
                      "S6": "e-mail of another student", "S7": "unreadable"}
    notes = {r["student"]: r["note"] for r in table(out / "gradebook.csv")}
    assert notes["S6"] == ("its # STUDENT cell says ada@uni.edu, the e-mail of roster student "
                           "S1; graded as S6's, whose hand-in it is")
    attention = {(r["entry"], r["status"]) for r in table(out / "attention.csv")}
    assert attention == {
        ("mallory.ipynb", "claimed identity; not on the roster"),
        ("lovelaceada_LATE_1001_5007_sample-1.ipynb", "duplicate"),
        ("hoppergrace_1004_5004_sample.ipynb", "wrong assignment"), ("", "no submission"),
        ("oldcopy.ipynb", "other release; not on the roster"),
        ("lovelaceada_1001_5001_sample.ipynb", "not graded"),
        ("hamiltonmargaret_1006_5006_sample.ipynb", "e-mail of another student"),
        ("noetheremmy_1007_5008_sample.ipynb", "unreadable")}
    rows = {r["student"]: r["reason"] for r in table(out / "grades.csv")}
    assert rows["S4"] == "a notebook of assignment ch9_other, not sample: not graded"
    assert any("mallory.ipynb: claimed identity" in line for line in first)
    assert any(line.startswith("oldcopy.ipynb: other release (its notebook was released with "
                               "d2lattn ") and "as bundle 0123456789ab; the bundle is " in line
               for line in first), first


def test_a_regrade_of_one_student_keeps_every_other_row_and_no_hijack(graded):
    out, _, again, before, _ = graded
    kept = [line for line in before.splitlines() if not line.startswith("mallory,")]
    assert [line for line in (out / "grades.csv").read_text().splitlines()
            if not line.startswith("mallory,")] == kept
    assert again[-1] == "1 unchanged, 7 kept from earlier runs", again  # mallory: 0 -> 0
    assert any("mallory.ipynb: claimed identity" in line for line in again)


def test_a_regrade_reuses_the_recorded_roster_and_canvas_column_and_says_so(graded):
    """The late re-grade repeated neither --roster nor --canvas-assignment: canvas.csv keeps
    its column (test_canvas_export_... reads it after the re-grade), mallory is still matched
    against the roster, and the log says what was reused."""
    out, _, again, *_ = graded
    assert again[:2] == [
        f"exports as recorded in {out}/run.json: canvas.csv column 'Chapter 1 (777)', a blank "
        "for no submission", f"roster as recorded: {out}/roster.csv (7 students)"]
    assert read_run(out)["exports"] == {"canvas_column": "Chapter 1 (777)",
                                        "missing_as_zero": False}
    assert (out / "roster.csv").read_text() == CANVAS_ROSTER


def test_a_regrade_asking_for_other_exports_is_refused_before_grading(graded, sample_release):
    out, *_ = graded
    for exports, asked in ((Exports("Chapter 2 (778)"), "column 'Chapter 2 (778)', a blank"),
                           (Exports("777"), "column 'sample (777)'"),
                           (Exports(missing_as_zero=True), "column 'Chapter 1 (777)', 0 for")):
        with pytest.raises(ValueError, match=(
                rf"{out} was exported with canvas.csv column 'Chapter 1 \(777\)', a blank for "
                rf"no submission; this run asks for canvas.csv {re.escape(asked)}.* pass "
                r"--new-exports to replace them")):
            grade(out.parent / "regrade", sample_release / "autograder", out,
                  exports=exports)
    assert read_run(out)["exports"]["canvas_column"] == "Chapter 1 (777)"


def test_new_exports_replace_the_recorded_ones_and_say_so(graded, tmp_path, sample_release):
    out, *_ = graded
    shutil.copytree(out, tmp_path / "out")
    log = []
    grade(out.parent / "regrade", sample_release / "autograder", tmp_path / "out",
          timeout=60, exports=Exports(missing_as_zero=True), new_exports=True, log=log.append)
    assert log[0] == (f"exports: canvas.csv column 'sample', 0 for no submission, replacing "
                      f"those recorded in {tmp_path / 'out'}/run.json (canvas.csv column "
                      f"'Chapter 1 (777)', a blank for no submission) as --new-exports asks")
    canvas = table(tmp_path / "out" / "canvas.csv")
    assert {r["SIS User ID"]: r["sample"] for r in canvas[1:]} == {
        "S1": "6", "S2": "6", "S3": "6", "S4": "", "S5": "0", "S6": "6", "S7": ""}


def test_the_instructors_word_replaces_a_students_rows_and_says_so(graded):
    """Re-graded with ``--identity mallory.ipynb=S3``, mallory's file is Zoe's: her rows
    are replaced by its grades, the file's rows under its own id go, and the gradebook says
    who decided."""
    *_, told = graded
    status = {r["student"]: (r["status"], r["note"]) for r in table(told / "gradebook.csv")}
    assert status["S3"] == ("identity set by the instructor",
                            "given as --identity mallory.ipynb=S3"), status
    assert {r["points"] for r in table(told / "grades.csv") if r["student"] == "S3"} == {"0"}
    assert next(r for r in table(told / "canvas.csv") if r["ID"] == "1003")[
        "Chapter 1 (777)"] == "0"
    for name in ("grades.csv", "gradebook.csv", "students.csv"):  # moved, not kept twice
        assert "mallory" not in {r["student"] for r in table(told / name)}, name


def test_an_identity_that_names_no_submission_or_an_unsafe_id_is_refused(graded, tmp_path):
    out, *_ = graded
    folder = out.parent / "regrade"
    with pytest.raises(ValueError, match=r"identity names 'nobody.ipynb', which is not a "):
        name_students(find_submissions(folder)[0], [], None, {"nobody.ipynb": "S3"})
    with pytest.raises(ValueError, match=r"got '../x' for 'mallory.ipynb'"):
        name_students(find_submissions(folder)[0], [], None, {"mallory.ipynb": "../x"})


def test_moodle_export_leaves_username_blank_when_the_roster_has_none(tmp_path):
    """Moodle's participants export has no username column: moodle.csv's Username is blank
    (an ID number there would match nobody, or the wrong user, on import)."""
    (tmp_path / "moodle.csv").write_text(MOODLE_ROSTER)
    roster = read_roster(tmp_path / "moodle.csv")
    book = gradebook([Row("M1", "q1", 2.0, 2.0, "ok")],
                     [Student("M1", "ada.ipynb", "", "", "graded", "")], roster, [("q1", 2)])
    write_exports(tmp_path, "ch1", book, [("q1", 2)])
    assert [(r["Email address"], r["Username"], r["ID number"], r["ch1"])
            for r in table(tmp_path / "moodle.csv")] == [
        ("ada@uni.edu", "", "M1", "2"), ("alan@uni.edu", "", "M2", "")]
