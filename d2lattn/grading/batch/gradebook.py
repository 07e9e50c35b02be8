"""A class's grades on disk: ``grades.csv`` (one row per student and question), kept across
runs (a re-graded student's rows replace theirs, every other row stays) and across shards
(:func:`merge`), and the tables made from it: ``gradebook.csv`` (one row per student, with the
roster's students who handed nothing in, and a status saying what needs attention),
``attention.csv`` (every flagged entry), ``canvas.csv`` and ``moodle.csv`` (the forms their
grade import reads: roster students only). Every file is written whole or not at all."""
import csv
import json
import os
import shutil
import tempfile
from collections import namedtuple
from pathlib import Path

Row = namedtuple("Row", "student question points max reason")
Student = namedtuple("Student", "student file name email status note",
                     defaults=("graded", ""))
Student.__doc__ = """A graded student: the ``file`` behind the id, what its ``# STUDENT`` cell
says, its ``status`` (``graded``, or the flags that need attention, ``; ``-joined) and a
``note`` saying why."""
Exports = namedtuple("Exports", "canvas_column missing_as_zero", defaults=(None, False))
Exports.__doc__ = """How the exports are written: ``canvas_column``, the header of the
assignment's column in ``canvas.csv`` (``Name (123)`` to map it to Canvas's assignment 123;
digits alone give ``<assignment> (<digits>)``; default the assignment's name), and
``missing_as_zero`` (0, not a blank, for a roster student with no submission)."""
ROSTER_COLUMNS = {  # our field: the column names it may have in a roster (any case)
    "name": ("name", "student", "full name"), "first": ("first name",),
    "last": ("last name", "surname"), "email": ("email", "email address"),
    "login": ("login", "username", "github", "github username", "sis login id"),
    "id": ("student id", "id number", "sis user id", "id"), "section": ("section",)}
CANVAS_EXPORT = ("sis user id", "sis login id")  # a roster with one of these is Canvas's
CANVAS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
ATTENTION = ("entry", "student", "status", "note")


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
        return [Student(*(r.get(field) or default for field, default in
                          zip(Student._fields, ("", "", "", "", "graded", ""))))
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
    """A roster CSV as rows ``{"student", "name", "email", "login", "id", "canvas", "section",
    "columns"}``: its columns named as in :data:`ROSTER_COLUMNS`, in any case, so Canvas's
    gradebook export (``Student, ID, SIS User ID, SIS Login ID, Section``; its ``Points
    Possible`` row skipped; ``canvas`` is its ``ID``) and Moodle's participants export
    (``First name, Last name, ID number, Email address``) are read as they are. The student
    is the id column, else the login, else the e-mail, else Canvas's ``ID``. ``columns``
    keeps the row as read, for the exports."""
    with open(path, newline="", encoding="utf-8-sig") as table:
        reader = csv.DictReader(table)
        names = {name.strip().lower(): name for name in reader.fieldnames or []}
        found = {field: next((names[c] for c in choices if c in names), None)
                 for field, choices in ROSTER_COLUMNS.items()}
        found["canvas"] = names.get("id") if any(c in names for c in CANVAS_EXPORT) else None
        if not (found["email"] or found["login"] or found["id"]):
            raise ValueError(f"roster must have an e-mail, login or id column, got columns "
                             f"{reader.fieldnames} (see exercises/README.md, Rosters)")
        roster = []
        for row in reader:
            get = {field: (row.get(column) or "").strip() if column else ""
                   for field, column in found.items()}
            first, last = get.pop("first"), get.pop("last")
            get["name"] = get["name"] or " ".join(filter(None, (first, last)))
            student = get["id"] or get["login"] or get["email"] or get["canvas"]
            if student and "Points Possible" not in (student, get["name"]):
                roster.append(dict(get, student=student, columns=row))
    return roster


def gradebook(rows, students, roster, questions):
    """One dict per student: id, name, e-mail, points per question, total, max, ``status``
    (``graded``; the flags of its submission; ``not on the roster``; ``no submission``, for a
    roster student who handed nothing in), ``note``, ``file``, ``listed`` (on the roster) and
    ``handed_in``. ``questions`` is ``[(name, points)]``."""
    by_student = {}
    for row in rows:
        by_student.setdefault(row.student, {})[row.question] = row.points
    known = {s.student: s for s in students}
    listed = {r["student"]: r for r in roster}
    table = []
    for student in sorted(set(by_student) | set(listed), key=str.lower):
        own, entry = known.get(student), listed.get(student, {})
        points = by_student.get(student, {})
        flags = [f for f in (own.status if own else "graded").split("; ") if f != "graded"]
        if student not in by_student:
            flags = ["no submission"]
        elif roster and student not in listed:
            flags.append("not on the roster")
        table.append({
            "student": student, "name": entry.get("name") or (own.name if own else ""),
            "email": entry.get("email") or (own.email if own else ""),
            **{q: points.get(q, 0) for q, _ in questions},
            "total": sum(points.values()), "max": sum(p for _, p in questions),
            "status": "; ".join(flags) or "graded", "note": own.note if own else "",
            "file": own.file if own else "", "listed": bool(entry),
            "handed_in": student in by_student, "entry": entry})
    return table


def write_exports(out, assignment, table, questions, skipped=(), exports=Exports()):
    """``gradebook.csv``, ``attention.csv`` (every flagged student and the ``skipped``
    entries), ``canvas.csv`` and ``moodle.csv`` (:class:`Exports`) in ``out``. With a
    roster, the exports hold its students only."""
    names = [q for q, _ in questions]
    write_table(Path(out) / "gradebook.csv",
                ["student", "name", "email", *names, "total", "max", "status", "note"],
                [[r["student"], r["name"], r["email"], *(f"{r[q]:g}" for q in names),
                  f"{r['total']:g}", f"{r['max']:g}", r["status"], r["note"]] for r in table])
    write_table(Path(out) / "attention.csv", ATTENTION,
                [[r["file"], r["student"], r["status"], r["note"]] for r in table
                 if r["status"] != "graded"] +
                [[entry, "", "not graded", why] for entry, why in skipped])
    rostered = any(r["listed"] for r in table)
    kept = [r for r in table if r["listed"] or not rostered]
    most = sum(p for _, p in questions)
    write_table(Path(out) / "canvas.csv", [*CANVAS, canvas_column(assignment, exports)],
                [["Points Possible", "", "", "", "", f"{most:g}"]] +
                [[*canvas_ids(r), _score(r, exports)] for r in kept])
    write_table(Path(out) / "moodle.csv", ["Email address", "Username", "ID number",
                                            assignment],
                [[r["email"], r["entry"].get("login", "") if rostered else r["student"],
                  r["entry"].get("id", ""), _score(r, exports)] for r in kept])


def canvas_column(assignment, exports):
    """The header of ``canvas.csv``'s grade column (see :class:`Exports`)."""
    column = exports.canvas_column
    if not column:
        return assignment
    return f"{assignment} ({column})" if column.isdigit() else column


def canvas_ids(row):
    """``Student, ID, SIS User ID, SIS Login ID, Section`` of a gradebook row: a Canvas
    roster's own, else what another roster has of them."""
    entry, columns = row["entry"], row["entry"].get("columns", {})
    ours = {"Student": row["name"] or row["student"], "ID": entry.get("canvas", ""),
            "SIS User ID": entry.get("id", ""), "SIS Login ID": entry.get("login", ""),
            "Section": entry.get("section", "")}
    return [columns.get(c) or ours[c] for c in CANVAS]


def _score(row, exports):
    """The total to import: blank for no submission, unless ``missing_as_zero``."""
    return f"{row['total']:g}" if row["handed_in"] or exports.missing_as_zero else ""


def write_run(out, assignment, questions, exports=Exports()):
    """``run.json``: what :func:`merge` needs to know of a run."""
    (Path(out) / "run.json").write_text(json.dumps(
        {"assignment": assignment, "questions": questions, "exports": exports._asdict()}),
        encoding="utf-8")


def merge(out, shards, roster=(), exports=None):
    """Join the outputs of ``shards`` (folders written by ``grade --shard``) into ``out``:
    their rows, students, skipped entries, feedback and executed notebooks, then the
    gradebook and exports (written as ``exports``, by default as the first shard's were).
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
    exports = exports or Exports(**runs[0].get("exports", {}))
    write_run(out, runs[0]["assignment"], questions, exports)
    write_exports(out, runs[0]["assignment"], gradebook(rows, students, roster, questions),
                  questions, skipped, exports)
    return rows
