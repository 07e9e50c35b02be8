"""A class roster: a CSV of the class as Canvas's gradebook export, Moodle's participants
export or a plain ``name,email,login`` table gives it. Read by grading (who a submission
is, the exports) and by a per-student release (one notebook per student)."""
import csv
from pathlib import Path

# What Canvas's gradebook export calls its test student (Student View), in any case
CANVAS_TEST_STUDENT = {"student, test", "test student"}
ROSTER_COLUMNS = {  # our field: the column names it may have in a roster (any case)
    "name": ("name", "student", "full name"), "first": ("first name",),
    "last": ("last name", "surname"), "email": ("email", "email address"),
    "login": ("login", "username", "github", "github username", "sis login id"),
    "id": ("student id", "id number", "sis user id", "id"), "section": ("section",)}
CANVAS_EXPORT = ("sis user id", "sis login id")  # a roster with one of these is Canvas's


def read_roster(path):
    """A roster CSV as rows ``{"student", "name", "email", "login", "id", "canvas", "section",
    "columns"}``: its columns named as in :data:`ROSTER_COLUMNS`, in any case, so Canvas's
    gradebook export (``Student, ID, SIS User ID, SIS Login ID, Section``; its ``Points
    Possible`` row skipped; ``canvas`` is its ``ID``) and Moodle's participants export
    (``First name, Last name, ID number, Email address``) are read as they are. The student
    is the id column, else the login, else the e-mail, else Canvas's ``ID``. ``columns``
    keeps the row as read, for the exports. Canvas's test student (``Student, Test``, whom
    Student View makes) is left out. ValueError naming the file if there is none."""
    if not Path(path).is_file():
        raise ValueError(f"roster must be a CSV file of the class, got {str(path)!r}: no such "
                         f"file")
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
            test_student = found["canvas"] and get["name"].casefold() in CANVAS_TEST_STUDENT
            if student and "Points Possible" not in (student, get["name"]) \
                    and not test_student:
                roster.append(dict(get, student=student, columns=row))
    return roster
