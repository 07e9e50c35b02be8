"""Grade a folder of submissions: one CSV row per student and question, one feedback file per
student, every submission graded whatever the others do.

Who holds what: this process reads the bundle (every case and its expected values) and the
submissions, and alone decides every score. Each submission's code runs in its own sandbox
(:mod:`d2lattn.grading.sandbox`), which gets the submission's code cells and the cases'
example sources, never an expected value, and hands back plain data.
"""
import csv
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .._checks import check_int, check_positive
from .cases import cases_of, format_report, is_format, judge, parse_case, request
from .forbid import forbidden_uses
from .notebook import NotebookError, cell_source, is_grader_cell, parse_notebook, question_of
from .sandbox import check_sandbox
from .shadow import Shadows

Row = namedtuple("Row", "student question points max reason")
MAX_BYTES = 20 << 20  # a submission larger than this is not read
FORBIDDEN = re.compile(r"PermissionError: (d2lattn(?:\.\w+)+) is forbidden in this question")


def grade(submissions, bundle, out, assignment=None, timeout=300, case_timeout=10,
          max_output=1_000_000, log=None, unsafe=False, max_bytes=MAX_BYTES, jobs=None):
    """Grade every ``.ipynb`` file of the folder ``submissions`` against the autograder
    ``bundle`` folder, each in its own sandbox (``unsafe=True``: without one, see
    :mod:`d2lattn.grading.sandbox`; grading refuses to start if no sandbox can be made).

    Each submission's code cells run under one ``timeout`` (seconds) with at most
    ``max_output`` characters of output kept, then its public cases, then its hidden ones,
    each example under ``case_timeout``. A question scores its points times the fraction of
    its scored cases passed (format checks earn nothing); 0 if its cell is missing or it
    uses a name its ``forbid`` list names. Only regular files (no symbolic links) named
    ``*.ipynb`` of at most ``max_bytes`` bytes are graded; other entries get a row saying why.

    Writes ``out/grades.csv`` (student, question, points, max, reason; each student's rows
    as soon as they are graded), ``out/feedback/<student>.md`` and
    ``out/executed/<student>.ipynb`` (the code cells that ran, with their text outputs).
    Students are file names made safe (letters, digits, ``._-``; a hash of the name if it
    had to change). ``log`` is called with one line per student. ``jobs`` submissions are
    graded at a time (default: the number of cores). Returns the rows.
    """
    if log is not None and not callable(log):
        raise TypeError(f"log must be callable or None, got {log!r}")
    limits = {"timeout": check_positive("timeout", timeout),
              "case_timeout": check_positive("case_timeout", case_timeout),
              "max_output": check_int("max_output", max_output, minimum=1)}
    max_bytes = check_int("max_bytes", max_bytes, minimum=1)
    jobs = (os.cpu_count() or 1) if jobs is None else check_int("jobs", jobs, minimum=1)
    assignment, tests = load_bundle(bundle, assignment)
    entries, out = _submission_entries(submissions), Path(out)
    check_sandbox(unsafe)
    for folder in ("feedback", "executed"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(jobs) as pool, \
            open(out / "grades.csv", "w", newline="", encoding="utf-8") as table:
        packages = Shadows(tmp)
        writer = csv.writer(table, lineterminator="\n")
        writer.writerow(Row._fields)

        def timed(entry):
            start = time.monotonic()
            graded = _grade_entry(entry, tests, limits, packages, unsafe, max_bytes)
            return graded, time.monotonic() - start

        for (student, _), ((scores, results, executed), seconds) in zip(
                entries, pool.map(timed, [entry for _, entry in entries])):
            student_rows = [Row(student, *score) for score in scores]
            writer.writerows([_safe_field(field) for field in
                              (r.student, r.question, f"{r.points:g}", f"{r.max:g}", r.reason)]
                             for r in student_rows)
            table.flush()
            rows += student_rows
            (out / "feedback" / f"{student}.md").write_text(
                feedback(assignment, student, student_rows, results, executed, seconds),
                encoding="utf-8")
            if executed is not None:
                (out / "executed" / f"{student}.ipynb").write_text(
                    json.dumps(executed, indent=1, ensure_ascii=False), encoding="utf-8")
            if log:
                log(f"{student}: {_total(student_rows)} points in {seconds:.1f} s")
    return rows


def load_bundle(bundle, assignment=None):
    """``(assignment, tests)`` from the bundle folder written by release."""
    if not Path(bundle).is_dir():
        raise ValueError(f"bundle must be the autograder folder written by release, "
                         f"got {str(bundle)!r}")
    names = [path.stem for path in sorted(Path(bundle).glob("*.json"))]
    if assignment is None and len(names) == 1:
        assignment = names[0]
    if assignment not in names:
        raise ValueError(f"assignment must be one of the bundle's {names} (bundle "
                         f"{str(bundle)!r}), got {assignment!r}")
    data = json.loads((Path(bundle) / f"{assignment}.json").read_text(encoding="utf-8"))
    return assignment, data["tests"]


def grade_notebook(nb, tests, limits, packages, unsafe=False):
    """``(scores, results, executed notebook or None)`` of one notebook (a dict): run it in
    the sandbox if it answers any question, then score every question of ``tests``.

    The questions that forbid the same objects share one run, in a sandbox whose d2lattn is
    ``packages(forbidden names)`` (:class:`d2lattn.grading.shadow.Shadows`): a question's
    forbidden objects are absent from its own run only.
    """
    cells = [(number, cell_source(cell), question_of(cell))
             for number, cell in enumerate(nb["cells"], 1)
             if cell.get("cell_type") == "code" and not is_grader_cell(cell)]
    present = {question for *_, question in cells} & {test["name"] for test in tests}
    outputs, records, notes, executed = None, {}, {}, None
    if present:
        from .execute import run_submission

        groups = {}
        for test, first in zip(tests, _first_ids(tests)):
            if test["name"] in present:
                groups.setdefault(tuple(sorted(test["forbid"])), []).append((test, first))
        done = run_submission([(n, text) for n, text, _ in cells],
                              [(packages(forbid), _phases(members))
                               for forbid, members in groups.items()], **limits, unsafe=unsafe)
        for members, (ran, got, said) in zip(groups.values(), done):
            outputs = ran if outputs is None else outputs
            records.update(got)
            notes.update((test["name"], said) for test, _ in members)
        executed = _executed(cells, outputs)
    scores, results = [], {}
    for test, first in zip(tests, _first_ids(tests)):
        own = {number for number, _, question in cells if question == test["name"]}
        outcome = [dict(judge(case["code"], records.get(case_id), case.get("expected", [])),
                        hidden=case.get("hidden", False), format=is_format(_message(case)))
                   for case_id, case in enumerate(cases_of(test, True), first)]
        if test["name"] in present:
            results[test["name"]] = outcome
        scores.append(_score(test, test["name"] in present,
                             forbidden_uses([cell[:2] for cell in cells], test["forbid"], own),
                             outcome, records,
                             notes.get(test["name"], []), first))
    return scores, results, executed


def _phases(members):
    """The runner's case requests for ``members`` (``(test, first case id)`` pairs): the
    public cases, then the hidden ones, leaving out an empty phase."""
    phases = [[request(case_id, test["name"], case["code"]) for test, first in members
               for case_id, case in enumerate(cases_of(test, True), first)
               if case.get("hidden", False) is hidden] for hidden in (False, True)]
    return [phase for phase in phases if phase]


def feedback(assignment, student, rows, results, executed, seconds):
    """A student's feedback (markdown): the total, the cells that raised an error, then per
    question its points, the reason and its cases: public ones with expected and received
    values, hidden ones by their message only."""
    lines = [f"# {assignment}: {student}", "",
             f"Score: {_total(rows)} points (graded in {seconds:.1f} s).", ""]
    ran = [cell["metadata"]["d2lattn"] for cell in (executed["cells"] if executed else [])]
    errors = [f"- cell {meta['cell']}: {meta['error']:.200}" for meta in ran if meta["error"]]
    if errors:
        lines += ["Cells that raised an error:", ""] + errors + [""]
    for row in rows:
        lines += [f"## {row.question}: {row.points:g} of {row.max:g} points", "", row.reason, ""]
        if row.question in results:
            lines += ["```", format_report(row.question, results[row.question]), "```", ""]
    return "\n".join(lines)


def _first_ids(tests):
    """The id of each test's first case: cases are numbered across the bundle, in order."""
    firsts, total = [], 0
    for test in tests:
        firsts.append(total)
        total += len(cases_of(test, True))
    return firsts


def _message(case):
    return parse_case(case["code"])[0]


def _submission_entries(submissions):
    """``[(student id, os.DirEntry)]`` of the folder's visible entries, ids unique and safe."""
    folder = Path(submissions)
    if not folder.is_dir():
        raise ValueError(f"submissions must be a folder, got {str(submissions)!r}")
    with os.scandir(folder) as listing:
        entries = sorted((e for e in listing if not e.name.startswith(".")),
                         key=lambda e: (not e.name.endswith(".ipynb"), os.fsencode(e.name)))
    taken, named = set(), []
    for entry in entries:
        student = _student_id(entry.name, taken)
        taken.add(student.lower())
        named.append((student, entry))
    return named


def _student_id(name, taken):
    """A file name as a safe, unique student id: ``alice`` for ``alice.ipynb``."""
    raw = os.fsencode(name)
    stem = name[:-len(".ipynb")] if name.endswith(".ipynb") else name
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", stem)[:64]
    if not safe[:1].isalnum():
        safe = "s" + safe
    if safe != stem or safe.lower() in taken:
        safe = f"{safe}_{hashlib.sha256(raw).hexdigest()[:8]}"
    return safe


def _grade_entry(entry, tests, limits, package, unsafe, max_bytes):
    """``(scores, results, executed or None)`` of one folder entry; never raises."""
    try:
        nb = parse_notebook(_read_entry(entry, max_bytes))
        return grade_notebook(nb, tests, limits, package, unsafe)
    except NotebookError as err:
        reason = str(err)
    except Exception as err:  # a grader failure on one submission must not stop the batch
        reason = f"grader error: {type(err).__name__}"
    return [(test["name"], 0, test["points"], reason) for test in tests], {}, None


def _read_entry(entry, max_bytes):
    """The bytes of a regular ``.ipynb`` file, read without following a link or blocking."""
    if entry.is_symlink():
        raise NotebookError("a symbolic link, not graded")
    if entry.is_dir(follow_symlinks=False):
        raise NotebookError("a folder, not a notebook file")
    if not entry.name.endswith(".ipynb"):
        raise NotebookError("not a .ipynb file")
    try:
        fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        raise NotebookError(f"unreadable file ({type(err).__name__})") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotebookError("not a regular file")
        if info.st_size > max_bytes:
            raise NotebookError(f"larger than {max_bytes} bytes")
        return file.read(max_bytes + 1)[:max_bytes]


def _executed(cells, outputs):
    """The code cells that ran, with their text outputs, as a notebook (dict)."""
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": f"cell-{number}", "execution_count": None, "source": text,
         "metadata": {"d2lattn": {"cell": number,
                                  "error": outputs.get(number, {}).get("error")}},
         "outputs": [{"output_type": "stream", "name": "stdout",
                      "text": outputs[number]["text"]}] if outputs.get(number, {}).get("text")
         else []} for number, text, _ in cells]}


def _score(test, present, uses, outcome, records, notes, first):
    """``(question, points, max, reason)`` of one question."""
    name, points = test["name"], test["points"]
    if not present:
        return name, 0, points, "question cell missing"
    if uses:
        return name, 0, points, f"uses {', '.join(uses)}, which this question forbids"
    scored = [case for case in outcome if not case["format"]]
    passed = sum(case["passed"] for case in scored)
    called = sorted({match[1] for case_id in range(first, first + len(outcome))
                     for match in [FORBIDDEN.match((records.get(case_id) or {}).get("raised")
                                                   or "")] if match})
    extra = [f"called {', '.join(called)}, which this question forbids"] if called else []
    reason = "; ".join([_verdict(outcome)] + extra + notes)
    return name, round(points * passed / max(len(scored), 1), 2), points, reason


def _verdict(outcome):
    """E.g. '2 of 4 cases passed; failed: public case 2 (rows sum to 1), hidden case 1 (large
    scores do not overflow)': cases are named by their message, never by their code."""
    failed, counts = [], {False: 0, True: 0}
    scored = [case for case in outcome if not case["format"]]
    for case in outcome:
        counts[case["hidden"]] += 1
        if not case["passed"]:
            kind = ("hidden" if case["hidden"] else "public") + \
                (" format check" if case["format"] else " case")
            about = f" ({case['message']})" if case["message"] else ""
            failed.append(f"{kind} {counts[case['hidden']]}{about}")
    verdict = f"{sum(c['passed'] for c in scored)} of {len(scored)} cases passed"
    return verdict + (f"; failed: {', '.join(failed)}" if failed else "")


def _safe_field(text):
    """A CSV field no spreadsheet runs as a formula and no line-based reader splits."""
    text = " ".join(str(text).split())
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _total(rows):
    return f"{sum(row.points for row in rows):g} of {sum(row.max for row in rows):g}"
