"""A class of synthetic submissions through the instructor's workflow, with wall times.

Run from the repository root:  .venv/bin/python bench/grading_class.py [--students 40]
[--chapter ch1] [--keep DIR]
Releases one chapter's master and builds a class from its student notebook: a mix of correct
(the master's answers), partial (the first half of the answers), blank and broken (one answer
with a syntax error, one cell that raises) submissions, a third named by login (`s07.ipynb`), a
third by the e-mail in their `# STUDENT` cell (`Submission (8).ipynb`), a third in GitHub
Classroom folders, plus a roster with two students who hand in nothing. It grades the class as
two shards one after the other, merges them (which writes the gradebook and the Canvas and
Moodle exports), then changes three submissions and grades those three again into the merged
folder. Prints each step's wall time and the change summary. Needs bubblewrap.
"""
import argparse
import csv
import json
import os
import re
import tempfile
import time
from pathlib import Path

from _timing import print_table
from d2lattn.grading import grade, release
from d2lattn.grading.batch.gradebook import merge, read_roster
from d2lattn.grading.master.notebook import (BEGIN, END, STUDENT, cell_source, question_header,
                                      question_of, read_notebook)

ROOT = Path(__file__).resolve().parents[1]
KINDS = ["correct"] * 16 + ["partial"] * 10 + ["blank"] * 8 + ["broken"] * 6


def answers(master):
    """``{question: source}``: the master's question cells without their solution markers."""
    found = {}
    for cell in read_notebook(master)["cells"]:
        header = question_header(cell)
        if header:
            lines = [re.sub(r"\s*# SOLUTION$", "", line)
                     for line in cell_source(cell).splitlines()
                     if line.strip() not in (BEGIN, END)]
            found[header[0]] = "\n".join(lines)
    return found


def submission(blank, solved, kind, email):
    """The student notebook ``blank`` answered as ``kind`` says, ``email`` in its # STUDENT cell."""
    nb = json.loads(json.dumps(blank))
    names = list(solved)
    keep = {"correct": names, "partial": names[:len(names) // 2], "blank": [],
            "broken": names}[kind]
    for cell in nb["cells"]:
        question = question_of(cell) if cell["cell_type"] == "code" else None
        if question in keep:
            cell["source"] = solved[question]
            if kind == "broken" and question == names[-1]:
                cell["source"] = "def broken(:\n" + cell["source"]
        if STUDENT.match(cell_source(cell)):
            cell["source"] = cell_source(cell).replace('email = ""', f'email = "{email}"')
    if kind == "broken":
        nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [],
                            "execution_count": None, "source": "raise RuntimeError('oops')"})
    return nb


def write(path, nb):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))


def email(number):
    """What student ``number`` writes in the # STUDENT cell: a third write nothing."""
    return "" if number % 3 == 0 else f"s{number:02d}@uni.edu"


def build_class(folder, roster, blank, solved, students):
    """Write ``students`` submissions into ``folder`` and the roster; ``{login: path}``."""
    paths = {}
    with open(roster, "w", newline="") as file:
        table = csv.writer(file)
        table.writerow(["name", "email", "login"])
        for number in range(students + 2):  # the last two hand in nothing
            login = f"s{number:02d}"
            table.writerow([f"Student {number}", f"{login}@uni.edu", login])
            if number >= students:
                continue
            kind = KINDS[number * len(KINDS) // students]
            name = [f"{login}.ipynb", f"Submission ({number}).ipynb",
                    f"ch-{login}/exercises/notebook.ipynb"][number % 3]
            paths[login] = folder / name
            write(paths[login], submission(blank, solved, kind, email(number)))
    (folder / "notes.txt").write_text("not a notebook")
    return paths


def timed(step, times, call):
    start = time.monotonic()
    result = call()
    times.append([step, f"{time.monotonic() - start:.1f}"])
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--chapter", default="ch1", help="the master's prefix, e.g. ch4")
    parser.add_argument("--keep", help="a folder to keep the class and its grades in")
    args = parser.parse_args()
    master, = (ROOT / "exercises").glob(f"{args.chapter}_*.ipynb")
    with tempfile.TemporaryDirectory() as tmp:
        work, times, log = Path(args.keep or tmp), [], []
        timed(f"release {master.stem}", times, lambda: release(master, work / "rel"))
        bundle, solved = work / "rel" / "autograder", answers(master)
        blank = read_notebook(work / "rel" / master.name)
        roster = work / "roster.csv"
        paths = build_class(work / "class", roster, blank, solved, args.students)
        for index in (1, 2):
            timed(f"grade --shard {index}/2", times, lambda: grade(
                work / "class", bundle, work / f"shard{index}", roster=roster,
                shard=(index, 2), jobs=os.cpu_count()))
        rows = timed("merge + exports", times, lambda: merge(
            work / "grades", [work / "shard1", work / "shard2"], read_roster(roster)))
        changed = {0: "blank", 20: "correct", 39: "correct"}  # were correct, partial, broken
        for number, kind in changed.items():
            late = work / "late" / paths[f"s{number:02d}"].relative_to(work / "class")
            write(late, submission(blank, solved, kind, email(number)))
        timed("re-grade 3 changed", times, lambda: grade(
            work / "late", bundle, work / "grades", roster=roster, log=log.append))
        with open(work / "grades" / "gradebook.csv", newline="") as file:
            book = list(csv.DictReader(file))
    print(f"{os.cpu_count()} cores, {args.students} submissions of {master.stem}, "
          f"{len(rows)} rows merged\n")
    print_table(["step", "wall time (s)"], times)
    statuses = sorted({row["status"] for row in book})
    print(f"\ngradebook: {len(book)} rows, statuses "
          f"{ {s: sum(r['status'] == s for r in book) for s in statuses} }")
    print("re-grade log:\n  " + "\n  ".join(log))


if __name__ == "__main__":
    main()
