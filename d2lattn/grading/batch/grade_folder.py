"""Grade a folder of submissions: one CSV row per student and question, one feedback file per
student, every submission graded whatever the others do, no earlier row ever lost.

Who holds what: this process reads the bundle (every case, its inputs and its expected
values) and the submissions, and alone decides every score
(:mod:`d2lattn.grading.one_notebook`). Each group of a submission's questions runs in a
sandbox of its own (:mod:`d2lattn.grading.sandbox`), which gets the submission's code cells
and the cases' calls and inputs, never a case's source or expected value, and hands back
plain data. Finding and naming the submissions is
:mod:`.submissions`; the feedback files :mod:`.feedback`; the files of grades, the gradebook
and its exports :mod:`.gradebook`; what a run records for the next one :mod:`.record`.
"""
import json
import os
import sys
import tempfile
import time
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from ..forbid.shadow import Shadows
from ..sandbox.channel import SandboxError, check_sandbox
from ..one_notebook import grade_notebook
from ..sandbox.session import NO_RUN
from .feedback import feedback, total
from ..roster import read_roster
from .gradebook import (Row, Student, changes, gradebook, read_rows,
                        read_skipped, read_students, replaced, write_exports, write_grades,
                        write_table)
from .options import GradeOptions
from .record import read_run, settle, write_run
from .submissions import find_submissions, flagged, in_shard, name_students
from .variants import by_variant


def grade(submissions, bundle, out, options=None, **settings):
    """Grade the submissions in the folder ``submissions`` (``.ipynb`` files, or one folder
    per student holding one notebook) against the autograder ``bundle`` folder, as
    ``options`` (a :class:`.options.GradeOptions`) say, with ``settings`` (its fields, e.g.
    ``timeout=60``) changed; each submission in its own sandboxes, one per group of questions
    that forbid the same objects (``unsafe``: none, see :mod:`d2lattn.grading.sandbox`).

    A notebook that names another assignment in its metadata is not run and its rows say so.
    A notebook's code cells run in each of its sandboxes within ``timeout`` seconds, then its
    public cases, then its hidden ones, each example under ``case_timeout``. A question
    scores its points times the fraction of its scored cases passed (format checks earn
    nothing); 0 if its cell is missing or it uses a name its ``forbid`` list names. Saved
    outputs are dropped unread.

    ``out`` gets ``grades.csv`` (student, question, points, max, reason), ``students.csv``,
    ``feedback/<student>.md``, ``executed/<student>.ipynb``, ``gradebook.csv``,
    ``attention.csv``, ``canvas.csv``, ``moodle.csv``, ``skipped.csv``, ``run.json`` and the
    roster's copy (:mod:`.record`: a later run into ``out`` reuses them); the rows of
    students graded before and not now are kept, and every file is rewritten whole after
    each submission. Returns this run's rows. Raises SandboxError (after writing everything)
    if two or more submissions were run and the sandbox of every one ended before any cell
    ran.
    """
    if options is not None and not isinstance(options, GradeOptions):
        raise TypeError(f"options must be a GradeOptions, got {options!r}")
    options = replace(options or GradeOptions(), **settings)
    subs, skipped = find_submissions(submissions, options.max_bytes, options.max_code)
    bundle = load_bundle(bundle, options.assignment or named_assignment(subs, bundle))
    assignment, tests = bundle.assignment, bundle.tests
    subs = [other_release(other_assignment(sub, assignment), bundle.release) for sub in subs]
    out = Path(out)
    exports, roster = settle(read_run(out), out, assignment, options.exports, options.roster,
                             options.new_exports, options.say)
    listed = read_roster(roster) if roster is not None else []
    students = read_students(out / "students.csv")
    subs, dropped = name_students(subs, listed, {s.student: s.file for s in students},
                                  options.identities)
    skipped = skipped + dropped
    if options.shard is not None:
        subs = [sub for sub in subs if in_shard(sub.student, options.shard)]
    graded_on = [by_variant(sub, bundle) for sub in subs]
    check_sandbox(options.unsafe)
    for folder in ("feedback", "executed"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    before = read_rows(out / "grades.csv")
    say = options.say
    moved = _moved(students, options.identities, say)  # the instructor's word moves rows
    students = [s for s in students if s.student not in moved]
    rows, graded, ran = [row for row in before if row.student not in moved], [], []
    limits, unsafe = options.limits, options.unsafe
    with tempfile.TemporaryDirectory() as tmp, \
            ThreadPoolExecutor(options.jobs or os.cpu_count() or 1) as pool, \
            tqdm(total=len(subs), unit="notebook", disable=not options.progress,
                 file=sys.stderr) as bar:
        packages = Shadows(tmp)
        futures = {pool.submit(_timed, sub, own_tests, limits, packages, unsafe): sub
                   for sub, own_tests in graded_on}
        for future in as_completed(futures):
            sub, (scores, results, executed, seconds) = futures[future], future.result()
            own = [Row(sub.student, *score) for score in scores]
            sub = outcome_flagged(sub, own, executed, options.max_output)
            futures[future] = sub
            graded += own
            rows = replaced(rows, own, lambda row: row.student)
            students = replaced(students, [Student(sub.student, sub.file, sub.name, sub.email,
                                                   "; ".join(sub.flags) or "graded",
                                                   sub.note, sub.variant)], lambda s: s.student)
            write_grades(out, rows, students)
            _write_student(out, assignment, sub.student, own, results, executed)
            say(f"{sub.student}: {total(own)} points in {seconds:.1f} s")
            bar.update()
            if executed is not None:  # its code went to a sandbox
                ran.append(not any(NO_RUN in row.reason for row in own))
    subs = list(futures.values())
    questions = [(test["name"], test["points"]) for test in tests]
    graded_files = {sub.file for sub in subs}  # an entry skipped before may be graded now
    skipped_now = [entry for entry in replaced(read_skipped(out / "skipped.csv"), skipped,
                                               lambda e: e[0]) if entry[0] not in graded_files]
    write_table(out / "skipped.csv", ("entry", "why"), skipped_now)
    write_run(out, assignment, questions, exports, roster)
    write_exports(out, assignment, gradebook(rows, students, listed, questions), questions,
                  skipped_now, exports)
    flags = [f"{sub.file}: {'; '.join(sub.flags)} ({sub.note})" for sub in subs if sub.flags]
    for line in [f"skipped {entry}: {why}" for entry, why in skipped] + flags + \
            changes(before, graded):
        say(line)
    if len(ran) >= 2 and not any(ran):
        raise SandboxError(f"every submission's sandbox ended before its first cell ran; the "
                           f"grades in {out} say so, but the sandbox, not the students, failed")
    return sorted(graded, key=lambda row: row.student.lower())


def outcome_flagged(sub, rows, executed, max_output):
    """``sub`` flagged for what its grading shows needs the instructor's eye: ``not run``
    (the grader or the sandbox failed, not the student: exported blank), ``time limit``
    (points lost where the notebook's time limit stopped its cells or cases) and ``output
    flood`` (its cells printed more than ``max_output`` characters, which also costs time).
    ``rows`` are its :class:`.gradebook.Row`; ``executed`` its executed notebook (None if
    not run)."""
    failed = [row for row in rows if NO_RUN in row.reason
              or row.reason.startswith("grader error")]
    if failed and sub.notebook is not None:
        sub = flagged(sub, "not run", f"{failed[0].reason}: the grader failed, not the "
                                      "student; grade it again")
    timed_out = [row for row in rows if "time limit" in row.reason and row.points < row.max]
    if timed_out:
        lost = sum(row.max - row.points for row in timed_out)
        sub = flagged(sub, "time limit", f"{lost:g} points lost where the time limit stopped "
                      f"it ({', '.join(row.question for row in timed_out)}); if its code is "
                      f"slow rather than stuck, grade it again with a larger --timeout")
    printed = sum(len(output.get("text", "")) for cell in (executed or {}).get("cells", [])
                  for output in cell["outputs"])
    if printed >= max_output:
        sub = flagged(sub, "output flood", f"its cells printed over {max_output} characters "
                      f"(the feedback keeps the first {max_output}), which takes time")
    return sub


def named_assignment(subs, bundle):
    """The bundle's assignment most readable notebooks name in their metadata (None if none
    does); ValueError if two are named equally often."""
    known = {path.stem for path in Path(bundle).glob("*.json")}
    named = {}
    for sub in subs:
        if sub.assignment in known:
            named[sub.assignment] = named.get(sub.assignment, 0) + 1
    most = sorted(named.items(), key=lambda item: -item[1])
    if len(most) > 1 and most[0][1] == most[1][1]:
        raise ValueError(f"the submissions answer several assignments equally often "
                         f"({dict(most)}): pass --assignment (bundle {str(bundle)!r})")
    return most[0][0] if most else None


def _moved(students, identities, say):
    """The ids whose rows a file earned before ``identities`` gave it another; said."""
    moved = {s.student for s in students
             if s.file in identities and identities[s.file] != s.student}
    for s in students:
        if s.student in moved:
            say(f"{s.file}: its rows under {s.student} move to {identities[s.file]} (--identity)")
    return moved


def other_assignment(sub, assignment):
    """``sub``, not to be run (and flagged) if its notebook names another assignment."""
    if sub.notebook is None or sub.assignment in (None, assignment):
        return sub
    why = f"a notebook of assignment {sub.assignment}, not {assignment}: not graded"
    return flagged(sub, "wrong assignment", why)._replace(notebook=None, error=why)


def other_release(sub, release):
    """``sub``, flagged if its notebook records another release than the bundle's (graded
    all the same: a student may have opened an older copy)."""
    if release is None or sub.release is None or sub.release == release:
        return sub
    return flagged(sub, "other release", f"its notebook was released with d2lattn "
                   f"{sub.release.get('version')!s:.20} as bundle {sub.release.get('bundle')!s:.20}"
                   f"; the bundle is d2lattn {release['version']}'s {release['bundle']}")


def _timed(sub, tests, limits, packages, unsafe):
    """``(scores, results, executed or None, seconds)`` of one submission; never raises."""
    start = time.monotonic()
    if sub.notebook is None:
        graded = [(test["name"], 0, test["points"], sub.error) for test in tests], {}, None
    else:
        try:
            graded = grade_notebook(sub.notebook, tests, limits, packages, unsafe)
        except Exception as err:  # a grader failure on one submission must not stop the batch
            graded = [(test["name"], 0, test["points"], f"grader error: {type(err).__name__}")
                      for test in tests], {}, None
    return (*graded, time.monotonic() - start)


def _write_student(out, assignment, student, rows, results, executed):
    (out / "feedback" / f"{student}.md").write_text(
        feedback(assignment, student, rows, results, executed), encoding="utf-8")
    if executed is not None:
        (out / "executed" / f"{student}.ipynb").write_text(
            json.dumps(executed, indent=1, ensure_ascii=False), encoding="utf-8")


Bundle = namedtuple("Bundle", "assignment tests release params variants students")
Bundle.__doc__ = """An assignment's bundle as release wrote it: its name, its tests (OK format,
expected values included), the release it records (``{"version", "bundle"}``; None in a
bundle of an earlier release), the master's own variant (``params``, None without a
variant cell) and, from a per-student release, ``variants`` (``{key: {"params", "cell",
"salt", "tests"}}``) and ``students`` (``{id: {"variant", "digest"}}``), else empty."""


def load_bundle(bundle, assignment=None):
    """A :class:`Bundle` from the bundle folder written by release."""
    if not Path(bundle).is_dir():
        raise ValueError(f"bundle must be the autograder folder written by release, "
                         f"got {str(bundle)!r}")
    names = [path.stem for path in sorted(Path(bundle).glob("*.json"))]
    if not names:
        inside = Path(bundle) / "autograder"
        hint = f"; its autograder/ folder is one: pass --bundle {inside}" \
            if any(inside.glob("*.json")) else ""
        raise ValueError(f"bundle must be the autograder folder written by release, holding "
                         f"one <assignment>.json per assignment, got {str(bundle)!r}, which "
                         f"holds none{hint}")
    if assignment is None and len(names) == 1:
        assignment = names[0]
    if assignment is None and names:
        raise ValueError(f"assignment must be one of the bundle's {names}, got None: the "
                         f"notebooks name none in their metadata, so pass --assignment")
    if assignment not in names:
        raise ValueError(f"assignment must be one of the bundle's {names} (bundle "
                         f"{str(bundle)!r}), got {assignment!r}")
    data = json.loads((Path(bundle) / f"{assignment}.json").read_text(encoding="utf-8"))
    return Bundle(assignment, data["tests"], data.get("release"), data.get("params"),
                  data.get("variants", {}), data.get("students", {}))
