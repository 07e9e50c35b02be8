"""Grading time per notebook beside the notebook's own run time, for each chapter's exercises.

Run from the repository root:  python bench/grading.py [--students 20] [ch2 ch6 ...]
For each master in exercises/: its own run time (a fresh Python running its code cells in
IPython, as "Run all" does, median of 3), the time to grade it alone (one submission, one job)
and the time per notebook to grade a class of ``--students`` submissions (half the master,
half the released student notebook) with one job per core. Both grading times are whole
commands, ``python -m d2lattn.grading grade``, as an instructor runs them (Python's start and
the sandbox's included). ``--reference DIR``: the same two times with the grader, the release
and the master of another checkout (e.g. ``git worktree add /tmp/ref main``), measured right
after this one's, chapter by chapter. Needs bubblewrap.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import print_table
from d2lattn.grading.master.notebook import parse_options, question_header, read_notebook

ROOT = Path(__file__).resolve().parents[1]
RUN_CELLS = """import json, sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
for cell in json.load(open(sys.argv[1]))["cells"]:
    if cell["cell_type"] == "code":
        shell.run_cell("".join(cell["source"]), silent=True)
"""


def own_run_seconds(master, repeat=3):
    """Median wall time of a fresh Python running the master's code cells in IPython."""
    times = []
    for _ in range(repeat):
        start = time.monotonic()
        subprocess.run([sys.executable, "-c", RUN_CELLS, str(master)], check=True,
                       capture_output=True, cwd=tempfile.gettempdir())
        times.append(time.monotonic() - start)
    return statistics.median(times)


def grading_seconds(checkout, notebooks, bundle, jobs):
    """Wall time of ``python -m d2lattn.grading grade`` with the d2lattn of ``checkout`` on
    ``notebooks`` (paths, one per student), ``jobs`` at a time."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "submissions"
        folder.mkdir()
        for number, notebook in enumerate(notebooks):
            shutil.copy(notebook, folder / f"student{number:03d}.ipynb")
        start = time.monotonic()
        grader(checkout, "grade", str(folder), "--bundle", str(bundle), "--out",
               str(Path(tmp) / "grades"), "--jobs", str(jobs))
        return time.monotonic() - start


def grader(checkout, *args):
    """Run the grader's command line with the d2lattn of ``checkout``."""
    subprocess.run([sys.executable, "-m", "d2lattn.grading", *args], check=True,
                   capture_output=True, cwd=checkout, env=dict(os.environ, PYTHONPATH=checkout))


def groups(master):
    """The number of sets of forbidden names among the master's questions."""
    forbids = {tuple(sorted(parse_options(*header)["forbid"]))
               for header in map(question_header, read_notebook(master)["cells"]) if header}
    return len(forbids)


def grading_times(checkout, master, students):
    """``(alone, per notebook in a class)`` seconds to grade the release of ``checkout``'s
    copy of ``master`` with ``checkout``'s grader."""
    own = Path(checkout) / "exercises" / Path(master).name
    with tempfile.TemporaryDirectory() as tmp:
        grader(checkout, "release", str(own), "--out", str(Path(tmp) / "release"))
        student = Path(tmp) / "release" / own.name
        bundle = Path(tmp) / "release" / "autograder"
        alone = grading_seconds(checkout, [own], bundle, jobs=1)
        half = students // 2
        klass = grading_seconds(checkout, [own] * (students - half) + [student] * half, bundle,
                                jobs=os.cpu_count() or 1) / students
    return alone, klass


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("chapters", nargs="*", help="e.g. ch2 (default: every master)")
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--reference", help="another checkout, whose grader is timed too")
    args = parser.parse_args()
    masters = sorted(p for p in (ROOT / "exercises").glob("ch*.ipynb")
                     if not args.chapters or p.name.split("_")[0] in args.chapters)
    cores, rows = os.cpu_count() or 1, []
    for master in masters:
        own = own_run_seconds(master)
        alone, klass = grading_times(str(ROOT), master, args.students)
        row = [master.stem, str(groups(master)), f"{own:.2f}", f"{alone:.2f}",
               f"{alone - own:+.2f}", f"{klass:.2f}"]
        if args.reference:
            ref_alone, ref_klass = grading_times(args.reference, master, args.students)
            row += [f"{ref_alone:.2f}", f"{ref_klass:.2f}",
                    f"{alone / ref_alone:.2f}", f"{klass / ref_klass:.2f}"]
        rows.append(row)
    print(f"{cores} cores, class of {args.students} submissions, {cores} jobs\n")
    print_table(["master", "groups", "own run (s)", "graded alone (s)", "alone - own (s)",
                 "class: s per notebook"] + (["reference: alone (s)", "reference: class (s)",
                                              "ratio alone", "ratio class"]
                                             if args.reference else []), rows)


if __name__ == "__main__":
    main()
