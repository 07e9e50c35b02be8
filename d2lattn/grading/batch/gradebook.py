"""A class's grades on disk: ``grades.csv`` (one row per student and question), kept across
runs (a re-graded student's rows replace theirs, every other row stays) and across shards
(:func:`merge`), and the tables made from it: ``gradebook.csv`` (one row per student, with the
roster's students who handed nothing in), ``canvas.csv`` and ``moodle.csv`` (the forms their
grade import reads). Every file is written whole or not at all."""
import csv
import json
import os
import shutil
import tempfile
from collections import namedtuple
from pathlib import Path

Row = namedtuple("Row", "student question points max reason")
Student = namedtuple("Student", "student file name email")
ROSTER_COLUMNS = {  # our field: the column names it may have in a roster (any case)
    "name": ("name", "student", "full name"), "email": ("email", "email address"),
    "login": ("login", "username", "github", "github username", "sis login id"),
    "id": ("student id", "id number", "sis user id", "id")}
CANVAS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


def read_rows(path):
    """The rows of a ``grades.csv`` (none if it does not exist)."""
    if not Path(path).exists():
        return []
    with open(path, newline="", encoding="utf-8") as table:
        return [Row(r["student"], r["question"], float(r["points"]), float(r["max"]),
                    r["reason"]) for r in csv.DictReader(table)]


def read_students(path):
    """The students of a ``students.csv`` (none if it does not exist)."""
    if not Path(path).exists():
        return []
    with open(path, newline="", encoding="utf-8") as table:
        return [Student(*(r[field] for field in Student._fields))
                for r in csv.DictReader(table)]


def read_skipped(path):
    """The ``(entry, why)`` rows of a ``skipped.csv`` (none if it does not exist)."""
    if not Path(path).exists():
        return []
    with open(path, newline="", encoding="utf-8") as table:
        return [(r["entry"], r["why"]) for r in csv.DictReader(table)]


def replaced(old, new, key):
    """``old`` with every item whose ``key`` is among ``new``'s replaced by ``new``'s."""
    renewed = {key(item) for item in new}
    return [item for item in old if key(item) not in renewed] + list(new)


def write_grades(out, rows, students):
    """Write ``grades.csv`` and ``students.csv`` in ``out``, sorted by student."""
    rows = sorted(rows, key=lambda r: r.student.lower())  # stable: questions keep their order
    write_table(Path(out) / "grades.csv", Row._fields,
                [(r.student, r.question, f"{r.points:g}", f"{r.max:g}", r.reason)
                 for r in rows])
    write_table(Path(out) / "students.csv", Student._fields,
                sorted(students, key=lambda s: s.student.lower()))


def write_table(path, header, rows):
    """A CSV file, replaced atomically; no field is read as a formula or split a line."""
    fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=".", suffix=".csv")
    with os.fdopen(fd, "w", newline="", encoding="utf-8") as table:
        writer = csv.writer(table, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([safe_field(field) for field in row] for row in rows)
    os.replace(tmp, path)


def safe_field(text):
    """A CSV field no spreadsheet runs as a formula and no line-based reader splits (and a
    file name that is not UTF-8 written with escapes)."""
    text = " ".join(str(text).encode("utf-8", "backslashreplace").decode("utf-8").split())
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def changes(old, new):
    """Lines saying how the total of each student of ``new`` (the rows of a run) changed
    from ``old`` (the rows before it), and how many of ``old``'s students were kept."""
    before, after = totals(old), totals(new)
    lines = []
    for student, (points, most) in sorted(after.items(), key=lambda s: s[0].lower()):
        if student not in before:
            lines.append(f"{student}: new, {points:g} of {most:g}")
        elif before[student][0] != points:
            lines.append(f"{student}: {before[student][0]:g} -> {points:g} of {most:g}")
    same = sum(1 for s in after if s in before and before[s][0] == after[s][0])
    return lines + [f"{same} unchanged, {len(set(before) - set(after))} kept from earlier runs"]


def totals(rows):
    """``{student: (points, max)}``."""
    sums = {}
    for row in rows:
        points, most = sums.get(row.student, (0, 0))
        sums[row.student] = (points + row.points, most + row.max)
    return sums


def read_roster(path):
    """A roster CSV as rows ``{"student", "name", "email", "login", "id", "columns"}``: its
    columns named as in :data:`ROSTER_COLUMNS`, in any case (a Canvas or Moodle export
    works); the student is the id column, else the login, else the e-mail. ``columns`` keeps the
    row as read, for the exports."""
    with open(path, newline="", encoding="utf-8-sig") as table:
        reader = csv.DictReader(table)
        names = {name.strip().lower(): name for name in reader.fieldnames or []}
        found = {field: next((names[c] for c in choices if c in names), None)
                 for field, choices in ROSTER_COLUMNS.items()}
        if not (found["email"] or found["login"] or found["id"]):
            raise ValueError(f"roster must have an e-mail, login or id column, got columns "
                             f"{reader.fieldnames} (see exercises/README.md, Rosters)")
        roster = []
        for row in reader:
            get = {field: (row.get(column) or "").strip() if column else ""
                   for field, column in found.items()}
            student = get["id"] or get["login"] or get["email"]
            if student and student != "Points Possible" and get["name"] != "Points Possible":
                roster.append(dict(get, student=student, columns=row))
    return roster


def gradebook(rows, students, roster, questions):
    """One dict per student: id, name, e-mail, points per question, total, max and status
    (graded; not on the roster; no submission, for a roster student who handed nothing in).
    ``questions`` is ``[(name, points)]``."""
    by_student = {}
    for row in rows:
        by_student.setdefault(row.student, {})[row.question] = row.points
    known = {s.student: s for s in students}
    listed = {r["student"]: r for r in roster}
    table = []
    for student in sorted(set(by_student) | set(listed), key=str.lower):
        own, entry = known.get(student), listed.get(student, {})
        points = by_student.get(student, {})
        table.append({
            "student": student, "name": entry.get("name") or (own.name if own else ""),
            "email": entry.get("email") or (own.email if own else ""),
            **{q: points.get(q, 0) for q, _ in questions},
            "total": sum(points.values()), "max": sum(p for _, p in questions),
            "status": "no submission" if student not in by_student else
            "graded" if not roster or student in listed else "not on the roster",
            "columns": entry.get("columns", {})})
    return table


def write_exports(out, assignment, table, questions):
    """``gradebook.csv``, ``canvas.csv`` and ``moodle.csv`` in ``out``."""
    names = [q for q, _ in questions]
    write_table(Path(out) / "gradebook.csv",
                ["student", "name", "email", *names, "total", "max", "status"],
                [[r["student"], r["name"], r["email"], *(f"{r[q]:g}" for q in names),
                  f"{r['total']:g}", f"{r['max']:g}", r["status"]] for r in table])
    most = sum(p for _, p in questions)
    write_table(Path(out) / "canvas.csv", [*CANVAS, assignment],
                [["Points Possible", "", "", "", "", f"{most:g}"]] + [
                    [r["columns"].get("Student") or r["name"] or r["student"],
                     *(r["columns"].get(c, "") for c in CANVAS[1:]), f"{r['total']:g}"]
                    for r in table])
    write_table(Path(out) / "moodle.csv", ["Email address", "Username", "ID number",
                                            assignment],
                [[r["email"], r["columns"].get("Username", r["student"]),
                  r["columns"].get("ID number", ""), f"{r['total']:g}"] for r in table])


def write_run(out, assignment, questions):
    """``run.json``: what :func:`merge` needs to know of a run."""
    (Path(out) / "run.json").write_text(json.dumps(
        {"assignment": assignment, "questions": questions}), encoding="utf-8")


def merge(out, shards, roster=()):
    """Join the outputs of ``shards`` (folders written by ``grade --shard``) into ``out``:
    their rows, students, skipped entries, feedback and executed notebooks, then the
    gradebook and exports.
    Returns the merged rows."""
    runs = [json.loads((Path(s) / "run.json").read_text(encoding="utf-8")) for s in shards]
    if len({(r["assignment"], json.dumps(r["questions"])) for r in runs}) != 1:
        raise ValueError(f"shards must grade the same assignment, got "
                         f"{sorted({r['assignment'] for r in runs})}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = read_rows(out / "grades.csv")
    students = read_students(out / "students.csv")
    skipped = read_skipped(out / "skipped.csv")
    for shard in map(Path, shards):
        rows = replaced(rows, read_rows(shard / "grades.csv"), lambda r: r.student)
        students = replaced(students, read_students(shard / "students.csv"),
                            lambda s: s.student)
        skipped = replaced(skipped, read_skipped(shard / "skipped.csv"), lambda s: s[0])
        for folder in ("feedback", "executed"):
            if (shard / folder).is_dir():
                shutil.copytree(shard / folder, out / folder, dirs_exist_ok=True)
    write_grades(out, rows, students)
    write_table(out / "skipped.csv", ("entry", "why"), skipped)
    questions = [tuple(q) for q in runs[0]["questions"]]
    write_run(out, runs[0]["assignment"], questions)
    write_exports(out, runs[0]["assignment"], gradebook(rows, students, roster, questions),
                  questions)
    return rows
