"""Grade a folder of submissions: one CSV row per student and question, one feedback file per
student, every submission graded whatever the others do."""
import csv
import json
import time
from collections import namedtuple
from pathlib import Path

from .._checks import check_int, check_positive
from .cases import format_report
from .forbid import forbidden_uses
from .notebook import NotebookError, cell_source, is_grader_cell, question_of, read_notebook

Row = namedtuple("Row", "student question points max reason")


def grade(submissions, bundle, out, assignment=None, timeout=300, case_timeout=10,
          max_output=1_000_000, log=None):
    """Grade every file of the folder ``submissions`` against the autograder ``bundle`` folder.

    Each submission runs in its own kernel: its code cells under one ``timeout`` (seconds) with
    at most ``max_output`` characters of output kept, then every public and hidden case of the
    bundle, each under ``case_timeout``. A question scores its points times the fraction of its
    cases passed; 0 if its cell is missing or it uses a name its ``forbid`` list names.
    ``assignment`` picks the bundle's ``<assignment>.json`` (optional if it holds one).

    Writes ``out/grades.csv`` (student, question, points, max, reason; each student's rows as
    soon as they are graded), ``out/feedback/<student>.md`` and ``out/executed/<student>.ipynb``
    (the code cells that ran, with their outputs). ``log`` is called with one line per student.
    Returns the rows.
    """
    if log is not None and not callable(log):
        raise TypeError(f"log must be callable or None, got {log!r}")
    limits = {"timeout": check_positive("timeout", timeout),
              "case_timeout": check_positive("case_timeout", case_timeout),
              "max_output": check_int("max_output", max_output, minimum=1)}
    assignment, tests = load_bundle(bundle, assignment)
    files, out = _submission_files(submissions), Path(out)
    for folder in ("feedback", "executed"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    rows = []
    with open(out / "grades.csv", "w", newline="", encoding="utf-8") as table:
        writer = csv.writer(table)
        writer.writerow(Row._fields)
        for path in files:
            student = path.name[:-len(".ipynb")] if path.name.endswith(".ipynb") else path.name
            start = time.monotonic()
            scores, results, executed = _grade_file(path, tests, limits)
            seconds = time.monotonic() - start
            student_rows = [Row(student, *score) for score in scores]
            writer.writerows((r.student, r.question, f"{r.points:g}", f"{r.max:g}", r.reason)
                             for r in student_rows)
            table.flush()
            rows += student_rows
            (out / "feedback" / f"{student}.md").write_text(
                feedback(assignment, student, student_rows, results, executed, seconds),
                encoding="utf-8")
            if executed is not None:
                (out / "executed" / f"{student}.ipynb").write_text(json.dumps(executed, indent=1),
                                                                   encoding="utf-8")
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


def feedback(assignment, student, rows, results, executed, seconds):
    """A student's feedback (markdown): the total, the cells that raised an error, then per
    question its points, the reason and its cases: public ones with expected and received
    values, hidden ones only counted."""
    lines = [f"# {assignment}: {student}", "",
             f"Score: {_total(rows)} points (graded in {seconds:.1f} s).", ""]
    errors = [f"- cell {cell.metadata['d2lattn']['cell']}: {out['ename']}: {out['evalue']:.200}"
              for cell in (executed.cells if executed else []) for out in cell.outputs
              if out["output_type"] == "error"]
    if errors:
        lines += ["Cells that raised an error:", ""] + errors + [""]
    for row in rows:
        lines += [f"## {row.question}: {row.points:g} of {row.max:g} points", "", row.reason, ""]
        if row.question in results:
            lines += ["```", format_report(row.question, results[row.question]), "```", ""]
    return "\n".join(lines)


def _submission_files(submissions):
    folder = Path(submissions)
    if not folder.is_dir():
        raise ValueError(f"submissions must be a folder, got {str(submissions)!r}")
    return sorted(path for path in folder.iterdir() if not path.name.startswith("."))


def _grade_file(path, tests, limits):
    """``(scores, results, executed notebook or None)`` of one file; never raises."""
    try:
        return _grade_notebook(read_notebook(path), tests, limits)
    except NotebookError as err:
        reason = str(err)
    except Exception as err:  # a grader failure on one submission must not stop the batch
        reason = f"grader error: {type(err).__name__}: {err}"
    return [(test["name"], 0, test["points"], reason) for test in tests], {}, None


def _grade_notebook(nb, tests, limits):
    """Run the notebook if it answers any question, then score every question."""
    cells = [(number, cell_source(cell), question_of(cell))
             for number, cell in enumerate(nb["cells"], 1)
             if cell.get("cell_type") == "code" and not is_grader_cell(cell)]
    present = {question for *_, question in cells} & {test["name"] for test in tests}
    results, notes, executed = {}, [], None
    if present:
        from .kernel import run_submission  # needs nbclient, which taking the course does not
        results, notes, executed = run_submission(
            [(number, text) for number, text, _ in cells],
            [test for test in tests if test["name"] in present], **limits)
    scores = []
    for test in tests:
        own = [(number, text) for number, text, question in cells
               if question in (test["name"], None)]
        scores.append(_score(test, test["name"] in present,
                             forbidden_uses(own, test["forbid"]), results, notes))
    return scores, results or {}, executed


def _score(test, present, uses, results, notes):
    """``(question, points, max, reason)`` of one question."""
    name, points = test["name"], test["points"]
    if not present:
        return name, 0, points, "question cell missing"
    if uses:
        return name, 0, points, f"uses {', '.join(uses)}, which this question forbids"
    if results is None:
        return name, 0, points, "; ".join(notes)
    outcome = results[name]
    passed = sum(case["passed"] for case in outcome)
    reason = "; ".join([_verdict(outcome)] + notes)
    return name, round(points * passed / max(len(outcome), 1), 2), points, reason


def _verdict(outcome):
    """E.g. '2 of 3 cases passed; failed: public case 2 (large scores stay finite)'."""
    failed, counts = [], {False: 0, True: 0}
    for case in outcome:
        counts[case["hidden"]] += 1
        if not case["passed"]:
            kind = "hidden" if case["hidden"] else "public"
            about = f" ({case['message']})" if case["message"] and not case["hidden"] else ""
            failed.append(f"{kind} case {counts[case['hidden']]}{about}")
    verdict = f"{len(outcome) - len(failed)} of {len(outcome)} cases passed"
    return verdict + (f"; failed: {', '.join(failed)}" if failed else "")


def _total(rows):
    return f"{sum(row.points for row in rows):g} of {sum(row.max for row in rows):g}"
