"""The graded exercises: release itself checks that every master scores full marks and every
student notebook 0 (graded as submissions, in the sandbox); here the committed copies in
exercises/student/ must be exactly what release writes, hold no hidden test, no solution and no
MyST role, the book links to student notebooks only, and the package's wheel holds no master."""
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from d2lattn.grading import release

ROOT = Path(__file__).resolve().parents[1]
MASTERS = sorted((ROOT / "exercises").glob("ch*.ipynb"))
STUDENTS = ROOT / "exercises" / "student"
ROLE = re.compile(r"\{[a-z][\w:-]*\}`")


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """Every chapter released once: this runs each master and its student notebook in the
    sandbox and raises if a master misses a point or a student notebook earns one."""
    if not MASTERS:
        pytest.skip("no masters here (a public copy keeps them private, exercises/README.md)")
    if shutil.which("bwrap") is None:
        pytest.skip("release runs the masters in bubblewrap (bwrap)")
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
                    # names alone or called on names (answer_q4, f(X, W)) are no secret
                    if len(line) >= 8 and not re.fullmatch(r"[\w.]+(\((\w+(, )?)*\))?", line):
                        lines[case["hidden"]].add(line)
    return lines[True] - lines[False]


def test_there_is_a_master_per_chapter_with_four_questions_or_more(released):
    chapters = {p.name[1] for p in (ROOT / "book").glob("0*.ipynb")} - {"8"}  # 8: in ch7's
    assert {m.name[2] for m in MASTERS} == chapters, [m.name for m in MASTERS]
    for master in MASTERS:
        tests = json.loads((released / "autograder" / f"{master.stem}.json").read_text())["tests"]
        assert len(tests) >= 4, master.name
        for test in tests:  # every question earns its points from values computed at release
            assert all("expected" in case for case in test["suites"][0]["cases"]), test["name"]


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_committed_student_notebook_is_the_released_one(master, released):
    committed = STUDENTS / master.name
    assert committed.is_file(), f"run release and copy {master.name} to exercises/student/"
    assert json.loads(committed.read_text()) == json.loads((released / master.name).read_text())


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_student_notebook_holds_no_hidden_test_no_solution_no_myst_role(master, released):
    raw = (STUDENTS / master.name).read_text()
    nb = json.loads(raw)
    sources = "\n".join("".join(cell["source"]) for cell in nb["cells"])
    hidden = hidden_lines(released / "autograder" / f"{master.stem}.json")
    assert hidden, "a master without hidden cases"
    leaked = [line for line in hidden if line in raw or line in sources]
    assert not leaked
    assert "BEGIN SOLUTION" not in sources and "# HIDDEN" not in sources
    assert '"expected"' not in raw  # the bundle's expected values stay in the bundle
    roles = [line for cell in nb["cells"] if cell["cell_type"] == "markdown"
             for line in "".join(cell["source"]).splitlines() if ROLE.search(line)]
    assert not roles, roles


def test_the_wheel_holds_the_package_and_no_exercise(tmp_path):
    """What `pip install` gives a student: d2lattn's modules, no master, no notebook."""
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                            "-q", "-w", str(tmp_path)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    wheel, = tmp_path.glob("d2lattn-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "d2lattn/grading/runner.py" in names
    leaks = [name for name in names if not name.startswith(("d2lattn/", "d2lattn-"))
             or name.endswith((".ipynb", ".json")) or "exercises" in name or "tests" in name]
    assert not leaks, leaks


def test_book_links_to_student_notebooks_only():
    """No chapter or page of the book points at a master (exercises/ch*.ipynb)."""
    pages = list((ROOT / "book").glob("*.ipynb")) + list((ROOT / "book").glob("*.md")) + \
        [ROOT / "_toc.yml", ROOT / "README.md"]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"exercises/ch\d", text), page
