"""A class's grades on disk: ``grades.csv`` (one row per student and question), kept across
runs (a re-graded student's rows replace theirs, every other row stays) and across shards
(:func:`d2lattn.grading.batch.record.merge`), and the tables made from it: ``gradebook.csv``
(one row per student, with the roster's students who handed nothing in, and a status saying
what needs attention), ``attention.csv`` (every flagged entry), ``canvas.csv`` and
``moodle.csv`` (the forms their grade import reads: roster students only, a blank where a
hand-in is not resolved). Every file is written whole or not at all."""
import csv
import os
import re
import tempfile
from collections import namedtuple
from dataclasses import asdict, dataclass
from pathlib import Path



Row = namedtuple("Row", "student question points max reason")
Student = namedtuple("Student", "student file name email status note variant",
                     defaults=("graded", "", ""))
Student.__doc__ = """A graded student: the ``file`` behind the id, what its ``# STUDENT`` cell
says, its ``status`` (``graded``, or the flags that need attention, ``; ``-joined), a
``note`` saying why and the ``variant`` it was graded on ('' without variants)."""


@dataclass(frozen=True)
class Exports:
    """How ``canvas.csv`` and ``moodle.csv`` are written. ``canvas_column``: the header of the
    assignment's column in ``canvas.csv``, ``Name (123)`` as in a Canvas gradebook export
    (Canvas's assignment 123), or its id alone (``123`` gives ``<assignment> (123)``); None:
    the assignment's name (Canvas imports it as a new assignment). ``missing_as_zero``: 0, not
    a blank, for a roster student with no submission. None in either: not said, so a
    re-grade takes the value recorded in its out folder (:mod:`.record`), else the
    default (the assignment's name; a blank). ValueError for a column without an id."""
    canvas_column: str | None = None
    missing_as_zero: bool | None = None

    def __post_init__(self):
        column = self.canvas_column
        if column is not None and not (isinstance(column, str) and CANVAS_COLUMN.fullmatch(
                column.strip())):
            raise ValueError(f"canvas_assignment must be Canvas's column header 'Name (123)', "
                             f"copied from a gradebook export, or the assignment's id 123, got "
                             f"{column!r} (without its id Canvas imports a new assignment)")
        if self.missing_as_zero not in (None, True, False):
            raise TypeError(f"missing_as_zero must be a bool or None, got "
                            f"{self.missing_as_zero!r}")

    def said(self):
        """``{field: value}`` of the settings given (not None)."""
        return {key: value for key, value in asdict(self).items() if value is not None}


CANVAS_COLUMN = re.compile(r"\d+|.*\S.*\(\d+\)")  # 123, or Name (123)
# Flags of a hand-in whose grade is not the student's work graded against this release: its
# points are exported blank, never 0, and the instructor decides
UNRESOLVED = ("unreadable", "wrong assignment", "other release", "not run", "no variant",
              "other variant", "edited variant")
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
                          zip(Student._fields, ("", "", "", "", "graded", "", ""))))
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


def gradebook(rows, students, roster, questions):
    """One dict per student: id, name, e-mail, points per question, total, max, ``status``
    (``graded``; the flags of its submission; ``not on the roster``; ``no submission``, for a
    roster student who handed nothing in), ``note``, ``file``, ``listed`` (on the roster),
    ``handed_in`` and ``resolved`` (handed in, and none of its flags :data:`UNRESOLVED`).
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
            "variant": own.variant if own else "",
            "file": own.file if own else "", "listed": bool(entry),
            "handed_in": student in by_student, "entry": entry,
            "resolved": student in by_student and not set(flags) & set(UNRESOLVED)})
    return table


def write_exports(out, assignment, table, questions, skipped=(), exports=Exports()):
    """``gradebook.csv``, ``attention.csv`` (every flagged student and the ``skipped``
    entries), ``canvas.csv`` and ``moodle.csv`` (:class:`Exports`) in ``out``. With a
    roster, the exports hold its students only."""
    names = [q for q, _ in questions]
    write_table(Path(out) / "gradebook.csv",
                ["student", "name", "email", *names, "total", "max", "status", "note",
                 "variant"],
                [[r["student"], r["name"], r["email"], *(f"{r[q]:g}" for q in names),
                  f"{r['total']:g}", f"{r['max']:g}", r["status"], r["note"], r["variant"]]
                 for r in table])
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
                [[*moodle_ids(r, rostered), _score(r, exports)] for r in kept])


def moodle_ids(row, rostered):
    """``Email address, Username, ID number`` of a gradebook row: the roster's only, never
    what a student typed (a typed e-mail would send the grade to whoever owns it); without a
    roster, the student's id (from the hand-in's name) as the username."""
    entry = row["entry"]
    if not rostered:
        return ["", row["student"], ""]
    return [entry.get("email", ""), entry.get("login", ""), entry.get("id", "")]


def canvas_column(assignment, exports):
    """The header of ``canvas.csv``'s grade column (see :class:`Exports`)."""
    column = (exports.canvas_column or "").strip()
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
    """The total to import: blank for a hand-in not resolved (:data:`UNRESOLVED`), and for no
    submission unless ``missing_as_zero``."""
    if row["resolved"]:
        return f"{row['total']:g}"
    return "0" if not row["handed_in"] and exports.missing_as_zero else ""
