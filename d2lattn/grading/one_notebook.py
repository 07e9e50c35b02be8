"""Grade one notebook as a submission: its questions grouped by the objects they forbid, each
group run in a sandbox of its own (:mod:`d2lattn.grading.sandbox.session`), every question
scored (:mod:`.scores`). What both a class's grading (:mod:`.batch`) and release's check
that the master scores full marks and its student notebook 0 (:mod:`.releasing.verify`) run."""
from dataclasses import replace

from .forbid.names import forbidden_uses
from .master.cases import call_request, in_case, is_format, judge, numbered, parse_case
from .master.notebook import runnable_cells
from .sandbox.session import run_submission
from .scores import score


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


