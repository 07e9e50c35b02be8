"""What a grading records in its out folder beside the grades, and how a later run into that
folder reuses it: ``run.json`` (the assignment, its ``[question, points]``, the export
settings) and ``roster.csv`` (a copy of the roster). A re-grade that leaves out ``--roster``,
``--canvas-assignment`` or ``--missing-as-zero`` gets the recorded ones and says so; one that
asks for other export settings is refused unless it asks for new exports (``--new-exports``),
since Canvas would import a renamed column as a new assignment. :func:`merge` joins the
outputs of shards with their settings."""
import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from ..roster import read_roster
from .gradebook import (Exports, canvas_column, gradebook, read_rows,
                        read_skipped, read_students, replaced, write_exports, write_grades,
                        write_table)

RUN, ROSTER = "run.json", "roster.csv"


def read_run(out):
    """The ``run.json`` of the folder ``out`` as a dict, None if it has none."""
    path = Path(out) / RUN
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def write_run(out, assignment, questions, exports, roster=None):
    """``run.json`` in ``out``, and ``roster.csv``, a copy of the file ``roster`` (None: no
    roster), both replaced atomically."""
    out = Path(out)
    if roster is not None and Path(roster).resolve() != (out / ROSTER).resolve():
        fd, tmp = tempfile.mkstemp(dir=out, prefix=".", suffix=".csv")
        os.close(fd)
        shutil.copyfile(roster, tmp)
        os.replace(tmp, out / ROSTER)
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump({"assignment": assignment, "questions": questions, "exports": asdict(exports),
                   "roster": ROSTER if roster is not None else None}, file)
    os.replace(tmp, out / RUN)


def settle(recorded, where, assignment, exports, roster, new_exports, say):
    """``(exports, roster)`` of a run into a folder that holds ``recorded`` (its ``run.json``
    as a dict, None for a new folder) in ``where``: the :class:`.gradebook.Exports` settings
    given (``exports``) completed with the recorded ones, and the roster file given, else the
    recorded copy (None: no roster). ``say`` is told what is reused. ValueError if the folder
    holds another assignment, or if ``exports`` asks for other settings than the recorded ones
    and ``new_exports`` is False; with ``new_exports``, the settings given (their defaults
    where not given) replace the recorded ones."""
    if recorded is None:
        return Exports(exports.canvas_column, bool(exports.missing_as_zero)), roster
    if recorded["assignment"] != assignment:
        raise ValueError(f"{where} holds the grades of assignment {recorded['assignment']}, "
                         f"not {assignment}: grade {assignment} into another --out folder")
    return (_settled_exports(recorded, where, assignment, exports, new_exports, say),
            _settled_roster(recorded, where, roster, say))


def _settled_exports(recorded, where, assignment, exports, new_exports, say):
    try:
        before = Exports(**dict(recorded.get("exports") or {}))
    except ValueError as err:
        raise ValueError(f"{where}/{RUN} records a setting that is no longer accepted ({err}): "
                         f"pass --new-exports with the settings you want") from None
    before = Exports(before.canvas_column, bool(before.missing_as_zero))
    if new_exports:
        now = Exports(exports.canvas_column, bool(exports.missing_as_zero))
        if now != before:
            say(f"exports: {describe(now, assignment)}, replacing those recorded in "
                f"{where}/{RUN} ({describe(before, assignment)}) as --new-exports asks")
        return now
    asked = Exports(**{**asdict(before), **exports.said()})
    if asked != before:
        raise ValueError(f"{where} was exported with {describe(before, assignment)}; this run "
                         f"asks for {describe(asked, assignment)}. Leave the options out (the "
                         f"recorded ones are reused), grade into another --out, or pass "
                         f"--new-exports to replace them (a new Canvas column is imported as a "
                         f"new assignment)")
    say(f"exports as recorded in {where}/{RUN}: {describe(before, assignment)}")
    return before


def _settled_roster(recorded, where, roster, say):
    copy = Path(where) / ROSTER
    kept = copy if recorded.get("roster") and copy.is_file() else None
    if roster is None:
        if kept is not None:
            say(f"roster as recorded: {copy} ({len(read_roster(copy))} students)")
        return kept
    if kept is None:
        say(f"{where} was graded without a roster: the gradebook and the exports now follow "
            f"{roster}")
    elif Path(roster).is_file() and Path(roster).read_bytes() != kept.read_bytes():
        say(f"the roster {roster} is not the one {where} was graded with ({copy}): the "
            f"gradebook and the exports now follow {roster}")
    return roster


def describe(exports, assignment):
    """E.g. "canvas.csv column 'Chapter 1 (123)', a blank for no submission"."""
    return (f"canvas.csv column {canvas_column(assignment, exports)!r}, "
            f"{'0' if exports.missing_as_zero else 'a blank'} for no submission")


def merge(out, shards, roster=None, exports=Exports(), new_exports=False, say=None):
    """Join the outputs of ``shards`` (folders written by ``grade --shard``) into ``out``:
    their rows, students, skipped entries, feedback and executed notebooks, then the
    gradebook and exports. The settings (``roster``, ``exports``) are settled as a re-grade's
    are (:func:`settle`) against ``out``'s record, or the first shard's if ``out`` has none;
    ``say`` (if given) is told what is reused. Returns the merged rows."""
    runs = [read_run(shard) for shard in shards]
    missing = [str(shard) for shard, run in zip(shards, runs) if run is None]
    if missing:
        raise ValueError(f"shards must be --out folders of grade --shard runs, got {missing} "
                         f"(no {RUN})")
    if len({(r["assignment"], json.dumps(r["questions"])) for r in runs}) != 1:
        raise ValueError(f"shards must grade the same assignment, got "
                         f"{sorted({r['assignment'] for r in runs})}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    assignment, questions = runs[0]["assignment"], [tuple(q) for q in runs[0]["questions"]]
    recorded, where = (read_run(out), out) if read_run(out) else (runs[0], Path(shards[0]))
    exports, roster = settle(recorded, where, assignment, exports, roster, new_exports,
                             say or (lambda line: None))
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
    listed = read_roster(roster) if roster is not None else []
    write_run(out, assignment, questions, exports, roster)
    write_exports(out, assignment, gradebook(rows, students, listed, questions), questions,
                  skipped, exports)
    return rows
