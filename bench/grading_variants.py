"""A class graded with per-student variants against the same class without them (issue 44).

Run from the repository root:  .venv/bin/python bench/grading_variants.py [--students 40]
[--master exercises/ch1_attention_pooling.ipynb] [--rounds 2] [--variants N] [--keep DIR]

Releases the master twice, plainly and to a roster of ``--students`` with a secret (one
variant each, or ``--variants``), then builds two classes of the same size whose every
notebook holds the master's answers: one of plain notebooks, graded against the plain
bundle, and one of each student's own notebook, graded against the per-student bundle. The
two gradings take turns, ``--rounds`` times each (A B B A ...), so that the machine's other
load slows them alike. Prints the release times, each grading's wall time and seconds per
notebook, the median ratio variants / plain, and checks that every notebook of both classes
earned full marks. Needs bubblewrap; about ten minutes on 2 cores for Chapter 1.
"""
import argparse
import copy
import csv
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _timing import print_table
from d2lattn.grading import grade, release
from d2lattn.grading.master.notebook import read_notebook
from d2lattn.grading.master.variant import cell_params, with_params

ROOT = Path(__file__).resolve().parents[1]


def answered(master, released, email):
    """The master's answers (``master``, a notebook dict) in the form of the ``released``
    student notebook: its variant and its metadata, a filled ``# STUDENT`` cell."""
    params = cell_params(released)
    nb = copy.deepcopy(with_params(master, params) if params else master)
    nb["metadata"] = copy.deepcopy(released["metadata"])
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [],
                        "execution_count": None,
                        "source": f'# STUDENT\nname = ""\nemail = "{email}"'})
    return nb


def build(work, master_path, students, count):
    """Release plainly and per student; write both classes. ``(plain, variants, releases)``:
    the two class folders and the release times."""
    roster, secret = work / "roster.csv", work / "course.secret"
    with open(roster, "w", newline="", encoding="utf-8") as table:
        writer = csv.writer(table)
        writer.writerow(["name", "email", "login"])
        writer.writerows([f"Student {i}", f"s{i:03d}@uni.edu", f"s{i:03d}"]
                         for i in range(students))
    secret.write_text("a course secret for the bench, not a real one\n")
    times = {}
    start = time.perf_counter()
    release(master_path, work / "plain", seeds=0)
    times["plain release"] = time.perf_counter() - start
    start = time.perf_counter()
    release(master_path, work / "class", seeds=0, roster=roster, secret=secret,
            variants=count)
    times["per-student release"] = time.perf_counter() - start
    master = read_notebook(master_path)
    plain_nb = read_notebook(work / "plain" / master_path.name)
    classes = {"plain": work / "plain-class", "variants": work / "variant-class"}
    for folder in classes.values():
        folder.mkdir()
    for i in range(students):
        login = f"s{i:03d}"
        own = read_notebook(work / "class" / "students" / login / master_path.name)
        for name, nb in (("plain", plain_nb), ("variants", own)):
            (classes[name] / f"{login}.ipynb").write_text(
                json.dumps(answered(master, nb, f"{login}@uni.edu")), encoding="utf-8")
    return classes, times


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--master", default="exercises/ch1_attention_pooling.ipynb")
    parser.add_argument("--rounds", type=int, default=2, help="gradings of each class")
    parser.add_argument("--variants", type=int, help="variants the class shares (default: "
                                                     "one per student)")
    parser.add_argument("--keep", help="a folder to keep the classes and grades in")
    args = parser.parse_args()
    master = (ROOT / args.master).resolve()
    work = Path(args.keep or tempfile.mkdtemp(prefix="grading-variants-"))
    work.mkdir(parents=True, exist_ok=True)
    classes, times = build(work, master, args.students, args.variants)
    bundles = {"plain": work / "plain" / "autograder", "variants": work / "class" / "autograder"}
    roster = work / "roster.csv"
    order = [name for r in range(args.rounds)
             for name in (("plain", "variants") if r % 2 == 0 else ("variants", "plain"))]
    walls, failed = {"plain": [], "variants": []}, []
    for turn, name in enumerate(order):
        out = work / f"grades-{name}-{turn}"
        start = time.perf_counter()
        rows = grade(classes[name], bundles[name], out, roster=roster, progress=False)
        walls[name].append(time.perf_counter() - start)
        failed += [f"{name}: {row.student} {row.question} {row.points:g}/{row.max:g}"
                   for row in rows if row.points != row.max]
        if not args.keep:
            shutil.rmtree(out)
    print(f"{args.students} students, {master.name}, "
          f"{'one variant each' if args.variants is None else f'{args.variants} variants'}")
    print_table(["release", "seconds"], [[step, f"{t:.1f}"] for step, t in times.items()])
    print()
    per = {name: [wall / args.students for wall in walls[name]] for name in walls}
    print_table(["class", "grading walls (s)", "s per notebook (median)"],
                [[name, ", ".join(f"{w:.1f}" for w in walls[name]),
                  f"{statistics.median(per[name]):.2f}"] for name in walls])
    ratios = [v / p for v, p in zip(walls["variants"], walls["plain"])]
    print(f"\nvariants / plain per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
          f"median {statistics.median(ratios):.2f} (goal <= 1.5)")
    print("every notebook earned full marks" if not failed else f"NOT FULL MARKS: {failed[:10]}")
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
