"""Grade a folder of submissions: one CSV row per student and question, one feedback file per
student, every submission graded whatever the others do, no earlier row ever lost.

Who holds what: this process reads the bundle (every case, its inputs and its expected
values) and the submissions, and alone decides every score (:mod:`.scores`). Each group of a
submission's questions runs in a sandbox of its own (:mod:`d2lattn.grading.sandbox`), which
gets the submission's code cells and the cases' calls and inputs, never a case's source or
expected value, and hands back plain data. Finding and naming the submissions is
:mod:`.submissions`; the feedback files :mod:`.feedback`; the files of grades, the gradebook
and its exports :mod:`.gradebook`.
"""
import json
import os
import sys
import tempfile
import time
from collections import namedtuple
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from ..._checks import check_int, check_positive
from ..forbid.names import forbidden_uses
from ..forbid.shadow import Shadows
from ..limits import CASE_SECONDS, MAX_BYTES, MAX_CODE, MAX_OUTPUT, NOTEBOOK_SECONDS
from ..master.cases import call_request, in_case, is_format, judge, numbered, parse_case
from ..master.notebook import runnable_cells
from ..sandbox.channel import SandboxError, check_sandbox
from ..sandbox.session import NO_RUN, run_submission
from .feedback import feedback, total
from .gradebook import (Exports, Row, Student, changes, gradebook, read_roster, read_rows,
                        read_skipped, read_students, replaced, write_exports, write_grades,
                        write_run, write_table)
from .scores import score
from .submissions import find_submissions, flagged, in_shard, name_students


def grade(submissions, bundle, out, assignment=None, timeout=NOTEBOOK_SECONDS,
          case_timeout=CASE_SECONDS, max_output=MAX_OUTPUT, log=None, unsafe=False,
          max_bytes=MAX_BYTES, jobs=None, roster=None, shard=None, max_code=MAX_CODE,
          progress=False, exports=Exports(), identities=None):
    """Grade the submissions in the folder ``submissions`` (``.ipynb`` files, or one folder
    per student holding one notebook) against the autograder ``bundle`` folder, each in its
    own sandbox (``unsafe=True``: without one, see :mod:`d2lattn.grading.sandbox`).

    ``assignment``: the bundle's assignment; by default the one most notebooks name in their
    metadata (release writes it), or the bundle's only one; a notebook that names another is
    not run and its rows say so. A notebook's code cells run in each of its sandboxes (one
    per group of questions) within ``timeout`` seconds, with at most ``max_output``
    characters of output kept, then its public cases, then its hidden ones, each example
    under ``case_timeout``.
    A question scores its points times the fraction of its scored cases passed (format
    checks earn nothing); 0 if its cell is missing or it uses a name its ``forbid`` list
    names. Files over ``max_bytes`` or with over ``max_code`` characters of code are not run;
    saved outputs are dropped unread.

    ``out`` gets ``grades.csv`` (student, question, points, max, reason), ``students.csv``,
    ``feedback/<student>.md``, ``executed/<student>.ipynb``, ``gradebook.csv``,
    ``attention.csv``, ``canvas.csv`` and ``moodle.csv`` (written as ``exports``, a
    :class:`d2lattn.grading.batch.gradebook.Exports`), ``skipped.csv``; the rows of students
    graded before and not now are kept, and every file is rewritten whole after each
    submission. ``roster``: a CSV of the
    class (see :func:`d2lattn.grading.batch.gradebook.read_roster`). ``identities``
    (``{file: student}``): the instructor's word on whose a submission is, above its hand-in
    name and ``# STUDENT`` cell (see :func:`.submissions.name_students`). ``shard=(i, n)``: grade only
    the i-th of n shares of the class (see ``merge``). ``log`` is called with one line per
    submission as it finishes and with a summary of what changed; ``jobs`` submissions run
    at a time (default: the number of cores); ``progress`` shows a bar. Returns this run's
    rows. Raises SandboxError (after writing everything) if two or more submissions were run
    and the sandbox of every one ended before any cell ran.
    """
    if log is not None and not callable(log):
        raise TypeError(f"log must be callable or None, got {log!r}")
    limits = {"timeout": check_positive("timeout", timeout),
              "case_timeout": check_positive("case_timeout", case_timeout),
              "max_output": check_int("max_output", max_output, minimum=1)}
    jobs = (os.cpu_count() or 1) if jobs is None else check_int("jobs", jobs, minimum=1)
    subs, skipped = find_submissions(submissions, check_int("max_bytes", max_bytes, minimum=1),
                                     check_int("max_code", max_code, minimum=1))
    assignment, tests, release = load_bundle(bundle,
                                             assignment or named_assignment(subs, bundle))
    subs = [other_release(other_assignment(sub, assignment), release) for sub in subs]
    listed = read_roster(roster) if roster is not None else []
    out = Path(out)
    students = read_students(out / "students.csv")
    subs, dropped = name_students(subs, listed, {s.student: s.file for s in students},
                                  identities)
    skipped = skipped + dropped
    if shard is not None:
        subs = [sub for sub in subs if in_shard(sub.student, _check_shard(shard))]
    check_sandbox(unsafe)
    for folder in ("feedback", "executed"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    before = read_rows(out / "grades.csv")
    say = log or (lambda line: None)
    moved = _moved(students, identities or {}, say)  # the instructor's word moves their rows
    students = [s for s in students if s.student not in moved]
    rows, graded, ran = [row for row in before if row.student not in moved], [], []
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(jobs) as pool, \
            tqdm(total=len(subs), unit="notebook", disable=not progress, file=sys.stderr) as bar:
        packages = Shadows(tmp)
        futures = {pool.submit(_timed, sub, tests, limits, packages, unsafe): sub
                   for sub in subs}
        for future in as_completed(futures):
            sub, (scores, results, executed, seconds) = futures[future], future.result()
            own = [Row(sub.student, *score) for score in scores]
            graded += own
            rows = replaced(rows, own, lambda row: row.student)
            students = replaced(students, [Student(sub.student, sub.file, sub.name, sub.email,
                                                   "; ".join(sub.flags) or "graded",
                                                   sub.note)], lambda s: s.student)
            write_grades(out, rows, students)
            _write_student(out, assignment, sub.student, own, results, executed)
            say(f"{sub.student}: {total(own)} points in {seconds:.1f} s")
            bar.update()
            if executed is not None:  # its code went to a sandbox
                ran.append(not any(NO_RUN in row.reason for row in own))
    questions = [(test["name"], test["points"]) for test in tests]
    graded_files = {sub.file for sub in subs}  # an entry skipped before may be graded now
    skipped_now = [entry for entry in replaced(read_skipped(out / "skipped.csv"), skipped,
                                               lambda e: e[0]) if entry[0] not in graded_files]
    write_table(out / "skipped.csv", ("entry", "why"), skipped_now)
    write_run(out, assignment, questions, exports)
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


def _check_shard(shard):
    if not (isinstance(shard, tuple) and len(shard) == 2 and all(type(x) is int for x in shard)
            and 1 <= shard[0] <= shard[1]):
        raise ValueError(f"shard must be (i, n) with 1 <= i <= n, got {shard!r}")
    return shard


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


Bundle = namedtuple("Bundle", "assignment tests release")
Bundle.__doc__ = """An assignment's bundle as release wrote it: its name, its tests (OK format,
expected values included) and the release it records (``{"version", "bundle"}``; None in a
bundle of an earlier release)."""


def load_bundle(bundle, assignment=None):
    """A :class:`Bundle` from the bundle folder written by release."""
    if not Path(bundle).is_dir():
        raise ValueError(f"bundle must be the autograder folder written by release, "
                         f"got {str(bundle)!r}")
    names = [path.stem for path in sorted(Path(bundle).glob("*.json"))]
    if assignment is None and len(names) == 1:
        assignment = names[0]
    if assignment is None and names:
        raise ValueError(f"assignment must be one of the bundle's {names}, got None: the "
                         f"notebooks name none in their metadata, so pass --assignment")
    if assignment not in names:
        raise ValueError(f"assignment must be one of the bundle's {names} (bundle "
                         f"{str(bundle)!r}), got {assignment!r}")
    data = json.loads((Path(bundle) / f"{assignment}.json").read_text(encoding="utf-8"))
    return Bundle(assignment, data["tests"], data.get("release"))


def grade_notebook(nb, tests, limits, packages, unsafe=False):
    """``(scores, results, executed notebook or None)`` of one notebook (a dict): run it in
    the sandbox if it answers any question, then score every question of ``tests``.

    The questions that forbid the same objects share one sandbox, whose d2lattn is
    ``packages(forbidden names)`` (:class:`d2lattn.grading.forbid.shadow.Shadows`): a question's
    forbidden objects are absent from its own run only. What a hidden phase gave beyond each
    case's pass or fail (its errors, its notes) reaches no report.
    """
    cells = runnable_cells(nb)
    present = {question for *_, question in cells} & {test["name"] for test in tests}
    records, notes, outputs, executed = {}, {}, None, None
    if present:
        groups = {}
        for test, case_id, case in numbered(tests):
            if test["name"] in present:
                phases = groups.setdefault(tuple(sorted(test["forbid"])), ([], []))
                phases[bool(case.get("hidden"))].append(
                    (test["name"], call_request(case_id, test["name"], case)))
        done = run_submission([(n, text) for n, text, _ in cells],
                              [(packages(forbid), [[r for _, r in phase] for phase in phases])
                               for forbid, phases in groups.items()], **limits, unsafe=unsafe)
        for phases, run in zip(groups.values(), done):
            outputs = run.outputs if outputs is None else outputs
            records.update(run.results)
            public = [text for phase, text in run.notes if phase in (None, 0)]
            notes.update((name, public) for phase in phases for name, _ in phase)
        executed = _executed(cells, outputs)
    scores, results = [], {}
    for test in tests:
        own = {number for number, _, question in cells if question == test["name"]}
        outcome = [replace(judge(case["code"], in_case(case, records.get(case_id)),
                                 case.get("expected", [])),
                           hidden=case.get("hidden", False), format=is_format(_message(case)),
                           raised=None if case.get("hidden") else
                           getattr(records.get(case_id), "raised", None))
                   for owner, case_id, case in numbered(tests) if owner is test]
        if test["name"] in present:
            results[test["name"]] = outcome
        scores.append(score(test, test["name"] in present,
                             forbidden_uses([cell[:2] for cell in cells], test["forbid"], own),
                             outcome, notes.get(test["name"], [])))
    return scores, results, executed


def _message(case):
    return parse_case(case["code"])[0]


def _executed(cells, outputs):
    """The code cells that ran, with their text outputs, as a notebook (dict)."""
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": f"cell-{number}", "execution_count": None, "source": text,
         "metadata": {"d2lattn": {"cell": number, "question": question,
                                  "error": getattr(outputs.get(number), "error", None)}},
         "outputs": [{"output_type": "stream", "name": "stdout",
                      "text": outputs[number].text}] if getattr(outputs.get(number), "text", "")
         else []} for number, text, question in cells]}


