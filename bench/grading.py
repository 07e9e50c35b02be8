"""Grading time per notebook beside the notebook's own run time, for each chapter's exercises.

Run from the repository root:  python bench/grading.py [--students 20] [ch2 ch6 ...]
For each master in exercises/: its own run time (a fresh Python running its code cells in
IPython, as "Run all" does, median of 3), the time to grade it alone (one submission, one job),
and the time per notebook to grade a class of ``--students`` submissions (half the master,
half the released student notebook) with one job per core. ``--reference DIR``: the same two
grading times with the grader of another checkout (e.g. ``git worktree add /tmp/ref main``),
measured right after this one's, chapter by chapter. Needs bubblewrap.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import print_table
from d2lattn.grading import grade, release
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


def grading_seconds(notebooks, bundle, jobs):
    """Wall time to grade ``notebooks`` (paths, one per student) with ``jobs`` at a time."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "submissions"
        folder.mkdir()
        for number, notebook in enumerate(notebooks):
            shutil.copy(notebook, folder / f"student{number:03d}.ipynb")
        start = time.monotonic()
        grade(folder, bundle, Path(tmp) / "grades", jobs=jobs)
        return time.monotonic() - start


def groups(master):
    """The number of sets of forbidden names among the master's questions."""
    forbids = {tuple(sorted(parse_options(*header)["forbid"]))
               for header in map(question_header, read_notebook(master)["cells"]) if header}
    return len(forbids)


def grading_times(master, students):
    """``(alone, per notebook in a class)`` seconds to grade ``master``'s release."""
    with tempfile.TemporaryDirectory() as tmp:
        student, = release(master, Path(tmp) / master.stem)
        bundle = Path(tmp) / master.stem / "autograder"
        alone = grading_seconds([master], bundle, jobs=1)
        half = students // 2
        klass = grading_seconds([master] * (students - half) + [student] * half, bundle,
                                jobs=os.cpu_count() or 1) / students
    return alone, klass


def reference_times(reference, master, students):
    """:func:`grading_times` with the d2lattn of the checkout ``reference``, its own bench script
    and its own copy of the master (a master may use what only its checkout has)."""
    env = dict(os.environ, PYTHONPATH=str(reference))
    script, own = (Path(reference) / folder / name for folder, name in
                   (("bench", "grading.py"), ("exercises", Path(master).name)))
    out = subprocess.run([sys.executable, str(script), "--times", str(own), "--students",
                          str(students)], env=env, cwd=reference, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("chapters", nargs="*", help="e.g. ch2 (default: every master)")
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--reference", help="another checkout, whose grader is timed too")
    parser.add_argument("--times", help=argparse.SUPPRESS)  # one master, for --reference
    args = parser.parse_args()
    if args.times:
        print(json.dumps(grading_times(Path(args.times), args.students)))
        return
    masters = sorted(p for p in (ROOT / "exercises").glob("ch*.ipynb")
                     if not args.chapters or p.name.split("_")[0] in args.chapters)
    cores, rows = os.cpu_count() or 1, []
    for master in masters:
        own = own_run_seconds(master)
        alone, klass = grading_times(master, args.students)
        row = [master.stem, str(groups(master)), f"{own:.2f}", f"{alone:.2f}",
               f"{alone - own:+.2f}", f"{klass:.2f}"]
        if args.reference:
            ref_alone, ref_klass = reference_times(args.reference, master, args.students)
            row += [f"{ref_alone:.2f}", f"{ref_klass:.2f}"]
        rows.append(row)
    print(f"{cores} cores, class of {args.students} submissions, {cores} jobs\n")
    print_table(["master", "groups", "own run (s)", "graded alone (s)", "alone - own (s)",
                 "class: s per notebook"] + (["reference: alone (s)", "reference: class (s)"]
                                             if args.reference else []), rows)


if __name__ == "__main__":
    main()
