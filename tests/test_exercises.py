"""The graded exercises: every master notebook scores full marks, every released student notebook
scores 0, hidden tests and solutions stay out of the student notebooks (the committed copies in
exercises/student/ are exactly what release writes), and the book links to student notebooks only."""
import json
import re
import shutil
from pathlib import Path

import pytest

from d2lattn.grading import grade, release

ROOT = Path(__file__).resolve().parents[1]
MASTERS = sorted((ROOT / "exercises").glob("ch*.ipynb"))
STUDENTS = ROOT / "exercises" / "student"


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    out = tmp_path_factory.mktemp("released")
    release(ROOT / "exercises", out)
    return out


def hidden_lines(bundle_file):
    """The lines of the hidden cases of a bundle that no public case has (prompts removed)."""
    tests = json.loads(bundle_file.read_text())["tests"]
    lines = {True: set(), False: set()}
    for test in tests:
        for suite in test["suites"]:
            for case in suite["cases"]:
                for line in case["code"].splitlines():
                    line = line.strip().removeprefix(">>>").removeprefix("...").strip()
                    # names alone, like answer_q4 or float(answer_q4), are no secret
                    if len(line) >= 8 and not re.fullmatch(r"[\w.]+(\([\w.]*\))?", line):
                        lines[case["hidden"]].add(line)
    return lines[True] - lines[False]


def test_there_is_a_master_per_chapter_with_four_questions_or_more(released):
    chapters = {p.name[1] for p in (ROOT / "book").glob("0*.ipynb")} - {"8"}  # 8: in ch7's
    assert {m.name[2] for m in MASTERS} == chapters, [m.name for m in MASTERS]
    for master in MASTERS:
        tests = json.loads((released / "autograder" / f"{master.stem}.json").read_text())["tests"]
        assert len(tests) >= 4, master.name


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_committed_student_notebook_is_the_released_one(master, released):
    committed = STUDENTS / master.name
    assert committed.is_file(), f"run release and copy {master.name} to exercises/student/"
    assert json.loads(committed.read_text()) == json.loads((released / master.name).read_text())


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_master_scores_full_marks_and_student_version_zero(master, released, tmp_path):
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    shutil.copy(master, submissions / "master.ipynb")
    shutil.copy(released / master.name, submissions / "student.ipynb")
    rows = grade(submissions, released / "autograder", tmp_path / "grades",
                 assignment=master.stem, timeout=120)
    by_student = {name: [r for r in rows if r.student == name] for name in ("master", "student")}
    assert by_student["master"] and all(r.points == r.max for r in by_student["master"]), \
        [r for r in by_student["master"] if r.points != r.max]
    assert by_student["student"] and all(r.points == 0 for r in by_student["student"]), \
        [r for r in by_student["student"] if r.points != 0]


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_student_notebook_holds_no_hidden_test(master, released):
    raw = (STUDENTS / master.name).read_text()
    sources = "\n".join("".join(cell["source"]) for cell in json.loads(raw)["cells"])
    hidden = hidden_lines(released / "autograder" / f"{master.stem}.json")
    assert hidden, "a master without hidden cases"
    leaked = [line for line in hidden if line in raw or line in sources]
    assert not leaked
    assert "BEGIN SOLUTION" not in sources and "# HIDDEN" not in sources
