"""Drive one submission's sandbox (see :mod:`d2lattn.grading.runner`): for each group of
questions, its copy of d2lattn, the cells, then one phase of cases after another, each under
its own time limit. Every record is checked before it is kept; anything else the sandbox
writes is dropped. Each group gets a fresh random tag, sent once its predecessors' processes
are dead, and only records with that tag count, so no group can speak for a later one; the
runner confirms a group's end with another tag that no group's process ever sees."""
import re
import secrets
import time
from pathlib import Path

from .sandbox import LIMITS, Run

STARTUP = 30  # seconds for a group's child to start, beyond the cells' time limit
NO_RUN = "the sandbox ended before any cell ran"
IMPORTS = re.compile(r"^\s*(import|from)\s+(d2lattn|mxnet)\b", re.M)  # worth preloading
COMPAT = (Path(__file__).parents[1] / "_compat.py").read_text(encoding="utf-8")


def run_submission(cells, groups, timeout, case_timeout, max_output, unsafe=False):
    """Run ``cells`` (``(cell number, source)`` pairs) once per group, then its case phases,
    all within ``timeout`` seconds (each example also within ``case_timeout``): a group that
    would start later does not run, and says so.

    ``groups`` is a list of ``(package, phases)``: the d2lattn copy that group's run sees
    (``{relative path: source}``) and its phases, each a list of case requests ``{"id",
    "question", "examples": [[source, want]]}`` (``want``: None for a setup step, True for an
    example whose value is wanted, or the expected text when releasing a master). A phase is
    sent only once every result of the previous one is in, so a later phase's inputs cannot
    reach an earlier phase's results. Returns one ``(cells, results, notes)`` per group:
    ``{number: {"text", "error"}}``, ``{case id: record}`` and the grader's notes.
    """
    examples = sum(len(case["examples"]) for _, phases in groups for phase in phases
                   for case in phase)
    cpu = timeout + len(groups) * STARTUP + case_timeout * examples
    run = Run(unsafe, max_bytes=len(groups) * 2 * max_output + (64 << 20))
    budget, done = Budget(timeout), []
    try:
        warm = any(IMPORTS.search(text) for _, text in cells)
        run.send(run.start(dict(LIMITS, RLIMIT_CPU=int(cpu)), COMPAT if warm else None))
        for package, phases in groups:
            if budget.left() <= 0:
                said = [f"the notebook's time limit of {timeout:g} s was used up before "
                        "these questions ran"]
                done += [({}, {}, said)] * (len(groups) - len(done))
                break
            *result, ready = _run_group(run, package, cells, phases, budget, case_timeout,
                                        max_output)
            done.append(tuple(result))
            if not ready:  # a stopped or dead runner: the later groups share its fate
                said = result[2][-1:] or ["the sandbox ended"]
                done += [({}, {}, said)] * (len(groups) - len(done))
                break
    finally:
        run.close()
    if run.over_budget:
        done[-1][2].append(f"the sandbox sent more than {run.budget} values; the rest "
                           "were dropped")
    return done


class Budget:
    """The seconds left of a notebook's time limit."""

    def __init__(self, seconds):
        self.seconds, self.end = seconds, time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


def _run_group(run, package, cells, phases, budget, case_timeout, max_output):
    numbers = {number for number, _ in cells}
    outputs, results, notes, tag = {}, {}, [], secrets.token_hex(16)
    run.listen(tag, [("cell", n) for n in numbers] + [
        ("case", case["id"]) for phase in phases for case in phase] + [
        ("phase_done", i) for i in range(len(phases))] + [("cells_done",), ("child_ended",)])
    if not run.send({"package": package, "tag": tag}):
        return outputs, results, [NO_RUN], False
    run.send({"cells": [list(cell) for cell in cells], "timeout": max(budget.left(), 0.1),
              "max_output": max_output})
    taken, how, stopped = run.collect(
        lambda r: _is_cell(r, numbers) and r["cell"] not in outputs, "cells_done",
        budget.left() + STARTUP)
    outputs = {r["cell"]: {"text": r["text"][:max_output], "error": r["error"]} for r in taken}
    if how != "done":
        notes.append(_stopped(how, "while its cells ran", outputs))
    else:
        if stopped is not None:
            last = max(outputs, default=0)
            notes.append(f"time limit of {budget.seconds:g} s reached in code cell {last}; "
                         "later cells did not run")
        for phase in phases:
            ids = {case["id"] for case in phase}
            run.send({"cases": phase, "case_timeout": case_timeout})
            taken, how, _ = run.collect(lambda r: _is_case(r, ids) and r["case"] not in results,
                                        "phase_done", min(case_timeout * _examples(phase),
                                                          max(budget.left(), 0)) + 10)
            results.update((r["case"], r) for r in taken)
            if how != "done":
                notes.append(_stopped(how, "while the tests ran", outputs))
                break
    end = secrets.token_hex(16)  # sent to the runner only: the group's processes never see it
    run.listen(end, [("group_done",)])
    run.send({"end": end})
    _, how, _ = run.collect(lambda r: False, "group_done", 10, ended=None)
    return outputs, results, notes, how == "done"


def _examples(phase):
    return sum(len(case["examples"]) for case in phase)


def _stopped(how, when, outputs):
    if how == "timeout":
        return f"the sandbox was stopped at its time limit {when}"
    if outputs:
        return f"the sandbox ended {when} (after cell {max(outputs)})"
    return NO_RUN if when == "while its cells ran" else f"the sandbox ended {when}"


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
