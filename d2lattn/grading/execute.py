"""Drive one run of the runner (see :mod:`d2lattn.grading.runner`): the cells, then one phase
of cases after another, each under its own time limit. Every record is checked before it is
kept; anything else the sandbox writes is dropped."""
from .sandbox import LIMITS, Run

STARTUP = 30  # seconds for the sandbox and IPython to start, beyond the cells' time limit


def run_submission(cells, phases, package, timeout, case_timeout, max_output, unsafe=False):
    """Run ``cells`` (``(cell number, source)`` pairs) in the sandbox, then the case phases.

    ``phases`` is a list of lists of case requests ``{"id", "question", "examples": [[source,
    want]]}`` (``want``: None for a setup step, True for an example whose value is wanted, or
    the expected text when releasing a master). A phase is sent only once every result of the
    previous one is in, so a later phase's inputs cannot reach an earlier phase's results.
    Returns ``(cells, results, notes)``: ``{number: {"text", "error"}}``, ``{case id: record}``
    and the grader's notes on what went wrong.
    """
    numbers = {number for number, _ in cells}
    limits = dict(LIMITS, RLIMIT_CPU=int(timeout + case_timeout * _examples(phases)) + STARTUP)
    run = Run(package, unsafe, max_bytes=2 * max_output + (64 << 20))
    outputs, results, notes = {}, {}, []
    try:
        run.send({"cells": [list(cell) for cell in cells], "timeout": timeout,
                  "max_output": max_output, "limits": limits})
        taken, how, stopped = run.collect(
            lambda r: _is_cell(r, numbers) and r["cell"] not in outputs, "cells_done",
            timeout + STARTUP)
        outputs = {r["cell"]: {"text": r["text"][:max_output], "error": r["error"]}
                   for r in taken}
        if how != "done":
            return outputs, results, notes + [_stopped(how, "while its cells ran", outputs)]
        if stopped is not None:
            last = max(outputs, default=0)
            notes.append(f"time limit of {timeout:g} s reached in cell {last}; "
                         "later cells did not run")
        for phase in phases:
            ids = {case["id"] for case in phase}
            run.send({"cases": phase, "case_timeout": case_timeout})
            taken, how, _ = run.collect(lambda r: _is_case(r, ids) and r["case"] not in results,
                                        "phase_done", case_timeout * _examples([phase]) + 10)
            results.update((r["case"], r) for r in taken)
            if how != "done":
                notes.append(_stopped(how, "while the tests ran", outputs))
                break
    finally:
        run.close()
    return outputs, results, notes


def _examples(phases):
    return sum(len(case["examples"]) for phase in phases for case in phase)


def _stopped(how, when, outputs):
    if how == "timeout":
        return f"the sandbox was stopped at its time limit {when}"
    return f"the sandbox ended {when}" + (f" (after cell {max(outputs)})" if outputs else "")


def _is_cell(record, numbers):
    return type(record.get("cell")) is int and record["cell"] in numbers \
        and isinstance(record.get("text"), str) \
        and (record.get("error") is None or isinstance(record["error"], str))


def _is_case(record, ids):
    return type(record.get("case")) is int and record["case"] in ids \
        and isinstance(record.get("values"), list) \
        and isinstance(record.get("wants"), list) \
        and (record.get("raised") is None or isinstance(record["raised"], str)) \
        and (record.get("at") is None or type(record["at"]) is int)
