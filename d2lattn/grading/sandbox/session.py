"""Drive one submission's sandboxes (see :mod:`d2lattn.grading.sandbox.runner`): a fresh sandbox for
each group of questions, its copy of d2lattn, the cells, then its phases of cases, each under
its own time limit. Phase 0 (the public cases) of every group runs before phase 1 (the hidden
ones) of any group, so nothing of a hidden phase exists anywhere while a value that the
feedback shows is being made. Every record is checked before it is kept; anything else a
sandbox writes is dropped."""
import re
import time
from dataclasses import dataclass, field

from .. import limits
from ..limits import PACKAGE
from .channel import Run

NO_RUN = "the sandbox ended before any cell ran"
IMPORTS = re.compile(r"^\s*(import|from)\s+(d2lattn|mxnet)\b", re.M)  # worth preloading
COMPAT = (PACKAGE / "_compat.py").read_text(encoding="utf-8")


@dataclass
class GroupRun:
    """What one group's sandbox gave: ``outputs`` ``{cell number: {"text", "error"}}``,
    ``results`` ``{case id: record}`` and ``notes`` ``[(phase or None, text)]``: what stopped
    it, during its cells (None) or during a phase."""
    outputs: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


def run_submission(cells, groups, timeout, case_timeout, max_output, unsafe=False):
    """Run ``cells`` (``(cell number, source)`` pairs) in a fresh sandbox per group, then its
    phases of cases, all within ``timeout`` seconds (each example also within
    ``case_timeout``): a group that would start later does not run, and says so.

    ``groups`` is a list of ``(package, phases)``: the d2lattn copy that group's sandbox sees
    (``{relative path: base64}``) and its phases, each a list of case requests (see
    :mod:`d2lattn.grading.sandbox.runner`). Phase i of every group runs before phase i + 1 of any.
    Returns one :class:`GroupRun` per group.
    """
    warm = any(IMPORTS.search(text) for _, text in cells)
    budget, done, live = Budget(timeout), [GroupRun() for _ in groups], {}
    try:
        for number, (package, phases) in enumerate(groups):
            if budget.left() <= 0:
                done[number].notes.append((None, f"the notebook's time limit of {timeout:g} s "
                                                 "was used up before these questions ran"))
                continue
            run = _start(package, cells, phases, timeout, case_timeout, max_output, unsafe,
                         warm)
            if _run_cells(run, cells, budget, max_output, done[number]):
                live[number] = run
            else:
                run.close()
        for phase in range(max((len(p) for _, p in groups), default=0)):
            for number, run in list(live.items()):
                cases = groups[number][1][phase] if phase < len(groups[number][1]) else []
                if cases and not _run_phase(run, phase, cases, budget, case_timeout,
                                            done[number]):
                    live.pop(number).close()
    finally:
        for run in live.values():
            run.close()
    return done


class Budget:
    """The seconds left of a notebook's time limit."""

    def __init__(self, seconds):
        self.seconds, self.end = seconds, time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


def _start(package, cells, phases, timeout, case_timeout, max_output, unsafe, warm):
    """A group's sandbox, started with its package: the runner's first message sent."""
    examples = sum(len(case.get("steps") or case.get("plan") or ()) for phase in phases
                   for case in phase)
    cpu = timeout + limits.STARTUP_SECONDS + case_timeout * examples
    run = Run(unsafe, max_bytes=2 * max_output + (64 << 20))
    run.send(run.start(dict(limits.RLIMITS, RLIMIT_CPU=int(cpu)), COMPAT if warm else None,
                       package))
    return run


def _run_cells(run, cells, budget, max_output, group):
    """Run the cells in ``run``; True if the sandbox is ready for cases."""
    numbers = {number for number, _ in cells}
    run.listen([("cell", n) for n in numbers] + [("cells_done",)])
    run.send({"cells": [list(cell) for cell in cells], "timeout": max(budget.left(), 0.1),
              "max_output": max_output})
    taken, how, stopped = run.collect(lambda r: _is_cell(r, numbers), "cells_done",
                                      budget.left() + limits.STARTUP_SECONDS)
    group.outputs = {r["cell"]: {"text": r["text"][:max_output], "error": r["error"]}
                     for r in taken}
    if how != "done":
        group.notes.append((None, _stopped(how, "while its cells ran", group.outputs)))
        return False
    if stopped is not None:
        last = max(group.outputs, default=0)
        group.notes.append((None, f"time limit of {budget.seconds:g} s reached in code cell "
                                  f"{last}; later cells did not run"))
    return True


def _run_phase(run, phase, cases, budget, case_timeout, group):
    """Send one phase of cases and collect its records; True if the sandbox still serves."""
    ids = {case["id"] for case in cases}
    run.listen([("case", i) for i in ids] + [("phase_done", phase)])
    run.send({"cases": cases, "case_timeout": case_timeout})
    examples = sum(len(case.get("steps") or case.get("plan") or ()) for case in cases)
    taken, how, _ = run.collect(lambda r: _is_case(r, ids), "phase_done",
                                min(case_timeout * examples, max(budget.left(), 0)) + 10)
    group.results.update((r["case"], r) for r in taken)
    if how != "done":
        group.notes.append((phase, _stopped(how, "while the tests ran", group.outputs)))
        return False
    if run.over_budget:
        group.notes.append((phase, f"the sandbox sent more than {run.budget} values; the "
                                   "rest were dropped"))
    return True


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
        and all(isinstance(record.get(key, []), list) for key in ("wants", "inputs")) \
        and (record.get("raised") is None or isinstance(record["raised"], str)) \
        and (record.get("at") is None or type(record["at"]) is int) \
        and (record.get("scope") is None or isinstance(record["scope"], str))
