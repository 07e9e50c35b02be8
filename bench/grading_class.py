"""A real class through the instructor's workflow (issue 30), with wall times and the exports.

Run from the repository root:  .venv/bin/python bench/grading_class.py [--students 40]
[--chapter ch1] [--timeout 30] [--keep DIR]
Releases one chapter's master and builds a class of ``--students`` roster students who hand
in (at least 20), plus three who hand in nothing, from its student notebook, as the hand-in
systems name their downloads:

- Canvas (half the class): ``lastfirst[_LATE]_<user id>_<submission id>_<file>.ipynb``;
- Moodle (a quarter): ``First Last_<number>_assignsubmission_file_<file>.ipynb``, one as a
  folder (*download submissions in folders*), one name with accents;
- GitHub Classroom (a quarter): folders ``ch1-attention-pooling-<GitHub login>/``, whose
  students type their e-mail in the ``# STUDENT`` cell (the rosters know no GitHub login).

Answers are correct (the master's), partial (the first half), blank or broken (a syntax
error, a cell that raises); beside them: an early and a ``_LATE`` hand-in of one student
(the early one newer on disk), a notebook that loops forever after its third answer, one that
prints 3 million lines, a ``# STUDENT`` cell of 5000 minus signs (the crash cell), a hijack (a
blank Classroom notebook typing the e-mail of a classmate whom her Moodle name identifies), a
second one handed in a minute after its victim's own Classroom folder (whom only the e-mail
identifies), a notebook of another assignment, a copy of another release, a Classroom folder
with Colab's ``Copy of`` beside the blank notebook, one without an e-mail, and a file that is
not a notebook.

It grades the class once with Canvas's gradebook export as roster and once with Moodle's
participants export (two ``--out`` folders), re-grades four changed submissions into the
Canvas folder, then, in a copy of it, the Classroom folder without an e-mail with
``--identity FILE=STUDENT``. Prints each step's wall time and per-notebook times, the
change summaries, the attention lists and ``canvas.csv`` and ``moodle.csv`` as they would be
imported, then checks them (every graded roster row carries the roster's ids, a hijack
leaves the victim's grade and is listed, the crash cell spoils one row only, the re-grade
keeps every other row, the instructor's word gives the row). Needs bubblewrap; a few minutes
on 2 cores.
"""
import argparse
import csv
import io
import json
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _timing import print_table
from d2lattn.grading import grade, release
from d2lattn.grading.batch.gradebook import Exports
from d2lattn.grading.master.notebook import (BEGIN, END, STUDENT, cell_source, question_header,
                                             question_of, read_notebook)

ROOT = Path(__file__).resolve().parents[1]
KINDS = ["correct"] * 16 + ["partial"] * 10 + ["blank"] * 8 + ["broken"] * 6
FIRST = ["Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "John", "Margaret",
         "Tony", "Radia", "Ken", "Shafi", "Leslie", "Sophie", "Niklaus", "Karen", "Dennis",
         "Hedy", "Claude", "Katherine", "Vint", "Lynn", "Tim", "Jean", "Robin", "Anita",
         "Bjarne", "Mary", "Guido", "Annie", "Linus", "Joan", "Yukihiro", "Ingrid", "Peter",
         "Adele", "Brian", "Evelyn", "Rasmus", "Carol", "Dana", "Fran", "Gene", "Hal", "Ivan"]
LAST = ["Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "McCarthy",
        "Hamilton", "Hoare", "Perlman", "Thompson", "Goldwasser", "Lamport", "Wilson", "Wirth",
        "Sparck-Jones", "Ritchie", "Lamarr", "Shannon", "Johnson", "Cerf", "Conway",
        "Berners-Lee", "Sammet", "Milner", "Borg", "Stroustrup", "Jackson", "van Rossum",
        "Easley", "Torvalds", "Clarke", "Matsumoto", "Daubechies", "Naur", "Goldberg",
        "Kernighan", "Berezin", "Lerdorf", "Shaw", "Scott", "Bilas", "Amdahl", "Abelson",
        "Sutherland"]
ACCENTED = ("José", "Núñez")  # one Moodle student: Moodle keeps the name as written
ASSIGNMENT_COLUMN = "Chapter 1: attention pooling (123456)"  # as Canvas's export heads it
LOOP = "while True:  # a loop that never ends\n    pass"
FLOOD = "for i in range(3_000_000):\n    print('line', i)"
CRASH = "# STUDENT\nname = " + "-" * 5000 + "1\nemail = 'x@uni.edu'"


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


def code(source):
    return {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": source}


def submission(blank, solved, kind, email="", name="", student=None, after=None):
    """The student notebook ``blank`` answered as ``kind`` says, ``name`` and ``email`` in its
    # STUDENT cell (or the cell ``student`` instead), a cell ``after`` (question, source)
    right after that question's cell."""
    nb = json.loads(json.dumps(blank))
    names = list(solved)
    keep = {"correct": names, "partial": names[:len(names) // 2], "blank": [],
            "broken": names}[kind]
    cells = []
    for cell in nb["cells"]:
        question = question_of(cell) if cell["cell_type"] == "code" else None
        if question in keep:
            cell["source"] = solved[question]
            if kind == "broken" and question == names[-1]:
                cell["source"] = "def broken(:\n" + cell["source"]
        if STUDENT.match(cell_source(cell)):
            cell["source"] = student or (f"# STUDENT: who you are\nname = {name!r}\n"
                                         f"email = {email!r}")
        cells.append(cell)
        if after and question == after[0]:
            cells.append(code(after[1]))
    if kind == "broken":
        cells.append(code("raise RuntimeError('oops')"))
    nb["cells"] = cells
    return nb


def write(path, nb, mtime=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))
    if mtime is not None:
        os.utime(path, (mtime, mtime))


class Student:
    """One roster student: names, ids in each system, hand-in system and what they hand in."""

    def __init__(self, number, system, kind):
        self.number, self.system, self.kind = number, system, kind
        self.first, self.last = (ACCENTED if number == ACCENTED_AT else (
            FIRST[(number + number // len(LAST)) % len(FIRST)], LAST[number % len(LAST)]))
        again = number // (len(FIRST) * len(LAST)) or ""  # past 2116 students
        self.email = f"{self.first}.{self.last}{again}@uni.edu".lower().replace(" ", "")
        self.email = self.email.replace("é", "e").replace("ú", "u").replace("ñ", "n")
        self.sis = f"2024{number:04d}"  # the university's student number: both rosters
        self.canvas = str(104200 + number)  # Canvas's user id
        self.moodle = str(5300 + number)  # Moodle's participant number
        self.github = f"{self.first[0]}{self.last.split()[-1]}-gh".lower()
        self.lastfirst = re.sub(r"[^a-z-]", "", f"{self.last}{self.first}".lower())
        self.role = ""

    @property
    def full(self):
        return f"{self.first} {self.last}"

    def entry(self, file="ch1_attention_pooling.ipynb", late=False, sub=None):
        """Where the hand-in system puts this student's ``file``."""
        if self.system == "canvas":
            sub = sub or 880000 + self.number
            return f"{self.lastfirst}{'_LATE' if late else ''}_{self.canvas}_{sub}_{file}"
        if self.system == "moodle":
            return f"{self.full}_{self.moodle}_assignsubmission_file_{file}"
        return f"ch1-attention-pooling-{self.github}/{file}"


ACCENTED_AT = 2  # a Moodle student (number % 4 == 2)
ROLES = {  # number: (system, role); the rest by number % 4
    1: ("canvas", "duplicate"), 4: ("canvas", "loop"), 8: ("canvas", "crash cell"),
    12: ("canvas", "other assignment"), 6: ("moodle", "flood"), 10: ("moodle", "victim"),
    14: ("moodle", "other release"), 18: ("moodle", "moodle folder"),
    3: ("classroom", "copy of"), 7: ("classroom", "no e-mail")}


def plan(count):
    """The ``count`` students who hand in and three who do not."""
    systems = ["canvas", "canvas", "moodle", "classroom"]
    students = []
    for number in range(count + 3):
        kind = KINDS[number * len(KINDS) // count] if number < count else "nothing"
        student = Student(number, systems[number % 4], kind)
        if number in ROLES:
            student.role = ROLES[number][1]
            student.kind = "partial" if student.role == "moodle folder" else "correct"
        students.append(student)
    return students


def build_class(folder, blank, solved, students, assignment):
    """Write the class's hand-ins into ``folder``; ``{role: entry}`` of the special ones."""
    entries, now = {}, time.time()
    for s in students:
        if s.kind == "nothing":
            continue
        typed = s.email if s.system == "classroom" or s.number % 3 else ""
        nb = submission(blank, solved, s.kind, typed, s.full if typed else "")
        file = s.entry(f"{assignment}.ipynb")
        if s.role == "duplicate":  # a partial first try, then the _LATE one (older on disk)
            early = s.entry(f"{assignment}.ipynb")
            write(folder / early, submission(blank, solved, "partial", typed), now)
            file = s.entry(f"{assignment}-1.ipynb", late=True, sub=890000 + s.number)
            nb, entries["duplicate (early)"] = submission(blank, solved, "correct", typed), early
            write(folder / file, nb, now - 3600)
        elif s.role == "loop":
            nb = submission(blank, solved, "correct", typed, after=(list(solved)[2], LOOP))
        elif s.role == "flood":
            nb = submission(blank, solved, "correct", typed, after=(list(solved)[-1], FLOOD))
        elif s.role == "crash cell":
            nb = submission(blank, solved, "correct", student=CRASH)
        elif s.role == "other assignment":
            nb["metadata"]["d2lattn"]["assignment"] = "ch2_attention_scoring"
        elif s.role == "other release":
            nb["metadata"]["d2lattn"]["release"]["bundle"] = "0123456789ab"
        elif s.role == "moodle folder":  # Moodle's "download submissions in folders"
            file = f"{s.full}_{s.moodle}_assignsubmission_file_/{assignment}.ipynb"
        elif s.role == "copy of":  # the repository's blank notebook and Colab's download
            write(folder / s.entry(f"{assignment}.ipynb"), blank)
            file = s.entry(f"Copy of {assignment}.ipynb")
        elif s.role == "no e-mail":
            nb = submission(blank, solved, "correct")
        if s.system == "classroom":
            (folder / file).parent.mkdir(parents=True, exist_ok=True)
            (folder / file).parent.joinpath("README.md").write_text("# Chapter 1\n")
        if not (folder / file).exists():
            write(folder / file, nb)
        entries[s.role or f"{s.number}"] = file.split("/")[0]
    victim = next(s for s in students if s.role == "victim")
    hijack = "ch1-attention-pooling-m4llory"  # a GitHub login no roster knows
    write(folder / hijack / f"{assignment}.ipynb",
          submission(blank, solved, "blank", victim.email, victim.full))
    entries["hijack"] = hijack
    # the same on a Classroom student, whom only the e-mail typed identifies (no roster knows
    # GitHub logins), handed in a minute after the victim's own folder
    prey = next(s for s in students if s.system == "classroom" and not s.role
                and s.kind == "correct")
    prey.role = "its victim"
    write(folder / entries[str(prey.number)] / f"{assignment}.ipynb",
          submission(blank, solved, "correct", prey.email, prey.full), now - 60)
    write(folder / "ch1-attention-pooling-tr0ll" / f"{assignment}.ipynb",
          submission(blank, solved, "blank", prey.email, prey.full), now)
    entries["hijack of an e-mail"], entries["its victim"] = ("ch1-attention-pooling-tr0ll",
                                                             entries[str(prey.number)])
    notes = students[0].entry("notes.txt")
    (folder / notes).write_text("my notes, not a notebook")
    entries["not a notebook"] = notes
    return entries


def canvas_roster(path, students):
    """Canvas's gradebook export, as downloaded: its columns, the Points Possible row."""
    with open(path, "w", newline="", encoding="utf-8-sig") as file:
        table = csv.writer(file)
        table.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                        ASSIGNMENT_COLUMN, "Current Points", "Final Points",
                        "Current Score", "Final Score"])
        table.writerow(["    Points Possible", "", "", "", "", "10", "(read only)",
                        "(read only)", "(read only)", "(read only)"])
        for s in students:
            table.writerow([f"{s.last}, {s.first}", s.canvas, s.sis, s.email,
                            f"ATTN-101 {'AB'[s.number % 2]}", "", "0", "0", "", ""])


def moodle_roster(path, students):
    """Moodle's participants export (Download table data as CSV), identity fields shown."""
    with open(path, "w", newline="", encoding="utf-8-sig") as file:
        table = csv.writer(file)
        table.writerow(["First name", "Last name", "ID number", "Institution", "Department",
                        "Email address", "Roles", "Groups", "Last access to course"])
        for s in students:
            table.writerow([s.first, s.last, s.sis, "Uni", "CS", s.email, "Student",
                            f"Group {'AB'[s.number % 2]}", "2 days 4 hours"])


def read(path):
    with open(path, newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))


def head(path, rows=None):
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    shown = lines if rows is None else lines[:rows]
    more = len(lines) - len(shown)
    return "\n".join(["    " + line for line in shown] +
                     ([f"    ... {more} more rows"] if more else []))


def timed(step, times, count, call):
    """Run ``call``, note its wall time and seconds per notebook in ``times``."""
    log = []
    start = time.monotonic()
    call(log.append)
    wall = time.monotonic() - start
    each = [(float(m[2]), m[1]) for m in map(re.compile(r"(.*): \S+ of \S+ points in (\S+) s")
                                             .fullmatch, log) if m]
    seconds = [t for t, _ in each]
    log.append("slowest: " + ", ".join(f"{who} {t:.1f} s" for t, who in sorted(each)[-3:]))
    times.append([step, str(count), f"{wall:.1f}",
                  f"{wall / count:.1f}" if count else "",
                  f"{statistics.median(seconds):.1f}" if seconds else "",
                  f"{max(seconds):.1f}" if seconds else ""])
    return log


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--students", type=int, default=40, help="roster students who hand in")
    parser.add_argument("--chapter", default="ch1", help="the master's prefix, e.g. ch4")
    parser.add_argument("--timeout", type=float, default=30, help="grade --timeout")
    parser.add_argument("--keep", help="a folder to keep the class and its grades in")
    args = parser.parse_args()
    if args.students < 20:
        parser.error("--students: at least 20 (the special hand-ins take 20)")
    master, = (ROOT / "exercises").glob(f"{args.chapter}_*.ipynb")
    with tempfile.TemporaryDirectory() as tmp:
        work, times = Path(args.keep or tmp), []
        rel = work / "rel"
        timed(f"release {master.stem}", times, 0, lambda log: release(master, rel))
        bundle, solved = rel / "autograder", answers(master)
        blank = read_notebook(rel / master.name)
        assignment = blank["metadata"]["d2lattn"]["assignment"]
        students = plan(args.students)
        entries = build_class(work / "class", blank, solved, students, assignment)
        canvas_roster(work / "canvas-roster.csv", students)
        moodle_roster(work / "moodle-roster.csv", students)
        graded = args.students + 2  # the hijacks too; the early duplicate is not run
        options = {"timeout": args.timeout, "exports": Exports(ASSIGNMENT_COLUMN)}
        logs = {}
        for lms in ("canvas", "moodle"):
            logs[lms] = timed(f"grade, {lms} roster", times, graded, lambda log, lms=lms: grade(
                work / "class", bundle, work / f"grades-{lms}",
                roster=work / f"{lms}-roster.csv", log=log, **options))
        firsts = {lms: (read(work / f"grades-{lms}" / "students.csv"),
                        read(work / f"grades-{lms}" / "skipped.csv"))
                  for lms in ("canvas", "moodle")}  # before the re-grade replaces some
        out = work / "grades-canvas"
        before = (out / "grades.csv").read_text()
        changed = build_regrade(work / "late", blank, solved, students, entries, assignment)
        logs["re-grade"] = timed(f"re-grade {len(changed)} into grades-canvas", times,
                                 len(changed), lambda log: grade(
                                     work / "late", bundle, out,
                                     roster=work / "canvas-roster.csv", log=log, **options))
        after = (out / "grades.csv").read_text()
        told = work / "grades-told"
        shutil.copytree(out, told)
        forgot = next(s for s in students if s.role == "no e-mail")
        (work / "told").mkdir()
        shutil.copytree(work / "class" / entries["no e-mail"],
                        work / "told" / entries["no e-mail"])
        identity = {entries["no e-mail"]: forgot.sis}
        logs["override"] = timed(f"--identity {entries['no e-mail']}={forgot.sis}", times, 1,
                                 lambda log: grade(work / "told", bundle, told,
                                                   roster=work / "canvas-roster.csv",
                                                   log=log, identities=identity, **options))
        report(args, master, times, logs, work, students, entries, firsts, before, after,
               changed, forgot)


def build_regrade(folder, blank, solved, students, entries, assignment):
    """Four changed hand-ins in ``folder``: a Canvas student's later upload, a Moodle
    student's and a Classroom student's changed notebooks, the hijack again."""
    plain = [s for s in students if not s.role and s.kind != "nothing"]
    canvas = next(s for s in plain if s.system == "canvas" and s.kind == "partial")
    moodle = next(s for s in plain if s.system == "moodle" and s.kind == "blank")
    classroom = next(s for s in plain if s.system == "classroom" and s.kind == "broken")
    typed = {s: s.email if s.system == "classroom" or s.number % 3 else ""
             for s in (canvas, moodle, classroom)}
    changed = {canvas.entry(f"{assignment}-2.ipynb", late=True, sub=899000 + canvas.number):
               submission(blank, solved, "correct", typed[canvas]),
               moodle.entry(f"{assignment}.ipynb"): submission(blank, solved, "partial",
                                                               typed[moodle]),
               classroom.entry(f"{assignment}.ipynb"): submission(blank, solved, "correct",
                                                                  typed[classroom])}
    for entry, nb in changed.items():
        write(folder / entry, nb)
    shutil.copytree(Path(folder).parent / "class" / entries["hijack"],
                    folder / entries["hijack"])
    return list(changed) + [entries["hijack"]]


def report(args, master, times, logs, work, students, entries, firsts, before, after,
           changed, forgot):
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; "
          f"{master.stem}: {args.students} roster students hand in, 3 do not; "
          f"--timeout {args.timeout:g}\n")
    print_table(["step", "notebooks", "wall (s)", "wall per notebook (s)",
                 "median per notebook (s)", "slowest (s)"], times)
    print("\nwho is who (entry in the class folder: role):")
    for role, entry in entries.items():
        if not role.isdigit():
            print(f"  {entry}: {role}")
    for step, log in logs.items():
        flagged = [line for line in log if ": " in line and " points in " not in line
                   and not line.startswith("skipped ")]
        print(f"\n{step}: log past the per-notebook lines")
        print("  " + "\n  ".join(flagged))
    for lms in ("canvas", "moodle"):
        book = read(work / f"grades-{lms}" / "gradebook.csv")
        statuses = {}
        for row in book:
            statuses[row["status"]] = statuses.get(row["status"], 0) + 1
        print(f"\ngrades-{lms}/gradebook.csv: {len(book)} rows; statuses {statuses}")
    print(f"\ngrades-canvas/canvas.csv (after the re-grade; {ASSIGNMENT_COLUMN!r} maps it to "
          f"the existing column), first 12 rows:")
    print(head(work / "grades-canvas" / "canvas.csv", 12))
    print("\ngrades-moodle/moodle.csv, first 12 rows:")
    print(head(work / "grades-moodle" / "moodle.csv", 12))
    for folder in ("grades-canvas", "grades-moodle", "grades-told"):
        print(f"\n{folder}/attention.csv:")
        print(head(work / folder / "attention.csv"))
    print("\nchecks:")
    for ok, what in checks(work, students, entries, firsts, before, after, changed, forgot):
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")


def checks(work, students, entries, firsts, before, after, changed, forgot):
    """``[(passed, what)]``: the issue's "done when" on this class; ``firsts``: ``{lms:
    (students.csv, skipped.csv)}`` as each first run left them."""
    by_sis = {s.sis: s for s in students}
    results = []
    canvas = list(csv.reader(io.StringIO(
        (work / "grades-canvas" / "canvas.csv").read_text(encoding="utf-8"))))[2:]
    wrong = [r for r in canvas if r[2] not in by_sis
             or r[1:4] != [by_sis[r[2]].canvas, r[2], by_sis[r[2]].email]]
    results.append((not wrong and len(canvas) == len(students),
                    (f"canvas.csv: {len(canvas)} rows, one per roster student, each with the "
                    f"roster's ID, SIS User ID and SIS Login ID ({len(wrong)} not)")))
    blanks = sorted(r[2] for r in canvas if r[5] == "")
    prey_sis = next(s.sis for s in students if s.role == "its victim")
    expected = sorted([s.sis for s in students if s.kind == "nothing"] + [forgot.sis, prey_sis])
    results.append((blanks == expected, (f"canvas.csv blank for {blanks}: those who handed "
                                        f"nothing in, {forgot.sis} (no e-mail, Classroom) and "
                                        f"{prey_sis}, whose e-mail another hand-in typed too "
                                        f"(until --identity says whose)")))
    moodle = read(work / "grades-moodle" / "moodle.csv")
    results.append((sorted(r["ID number"] for r in moodle) == sorted(by_sis),
                    f"moodle.csv: {len(moodle)} rows, one per roster student, by ID number"))
    victim = next(s for s in students if s.role == "victim")
    entries_in = {p.name for p in (work / "class").iterdir()}
    for lms in ("canvas", "moodle"):
        out = work / f"grades-{lms}"
        book = {r["student"]: r for r in read(out / "gradebook.csv")}
        hijack = [r for r in read(out / "attention.csv") if r["entry"] == entries["hijack"]]
        row = book[victim.sis]
        results.append((row["total"] == row["max"] and bool(hijack)
                        and "claimed identity" in hijack[0]["status"],
                        (f"{lms}: the victim {victim.sis} keeps {row['total']} of {row['max']}; "
                        f"the hijack is in attention.csv: "
                        f"{hijack[0]['status'] if hijack else 'no'}")))
        graded, skipped = firsts[lms]
        crash = [r for r in graded if r["file"] == entries["crash cell"]]
        total = book[crash[0]["student"]]["total"] if len(crash) == 1 else "?"
        seen = {r["file"] for r in graded} | {r["entry"].split("/")[0]
                                              for r in skipped}
        results.append((len(crash) == 1 and seen == entries_in,
                        (f"{lms}: the crash cell's file is one row "
                        f"({crash[0]['student'] if crash else '-'}, {total} points, "
                        f"{crash[0]['status'] if crash else '-'}); {len(graded)} submissions "
                        f"graded, every other entry listed in skipped.csv "
                        f"({len(entries_in - seen)} neither)")))
        prey = [r for r in graded if r["file"] == entries["its victim"]]
        thief = [r for r in graded if r["file"] == entries["hijack of an e-mail"]]
        said = [f"{r['student']} ({r['status']}, {book[r['student']]['total']} points)"
                for r in thief]
        results.append((len(prey) == 1 and book[prey[0]["student"]]["total"] == "10"
                        and len(thief) == 1 and "claimed identity" in thief[0]["status"],
                        (f"{lms}: the hijack of an e-mail: the victim's own folder "
                        f"{'graded as ' + prey[0]['student'] if prey else 'not graded'}, "
                        f"the hijack's graded as {said[0] if said else '-'}")))
    lines = {text: text.splitlines()[1:] for text in (before, after)}
    regraded = {line.split(",")[0] for line in set(lines[before]) ^ set(lines[after])}
    kept = [[line for line in lines[text] if line.split(",")[0] not in regraded]
            for text in (before, after)]
    results.append((kept[0] == kept[1] and len(regraded) <= len(changed),
                    (f"re-grade: the rows of {len(regraded)} students changed "
                    f"({', '.join(sorted(regraded))}), the other {len(kept[1])} rows kept "
                    f"as they were")))
    told = {r["student"]: r for r in read(work / "grades-told" / "gradebook.csv")}
    row = told[forgot.sis]
    results.append((row["status"] == "identity set by the instructor"
                    and row["total"] == row["max"],
                    (f"--identity: {forgot.sis} {row['total']} of {row['max']}, "
                    f"{row['status']!r}")))
    return results


if __name__ == "__main__":
    main()
