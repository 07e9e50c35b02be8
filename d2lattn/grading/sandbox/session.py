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
from .bwrap import COMPAT
from .channel import Run

NO_RUN = "the sandbox ended before any cell ran"
IMPORTS = re.compile(r"^\s*(import|from)\s+(d2lattn|mxnet)\b", re.M)  # worth preloading


@dataclass
class GroupRun:
    """What one group's sandbox gave: ``outputs`` ``{cell number: {"text", "error"}}``,
    ``results`` ``{case id: record}`` and ``notes`` ``[(phase or None, text)]``: what stopped
    it, during its cells (None) or during a phase."""
    outputs: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


def run_submission(cells, groups, timeout, case_timeout, max_output, unsafe=False):
    """Run ``cells`` (``(cell number, source)`` pairs) in a fresh sandbox per group, each
    group's cells within ``timeout`` seconds of their own, then its phases of cases (each
    example within ``case_timeout``).

    Fair time: a group's answers do not depend on the time another group used. Where one
    group's time ran out in cell k, later groups run the cells before k only (cell k would
    take their time too) and say so; so answers that ran before a loop keep their points
    whatever the order of the groups. The text of the cells' outputs comes from the first
    group only; later ones send none (they run the same code).

    ``groups`` is a list of ``(package, phases)``: the d2lattn copy that group's sandbox sees
    (``{relative path: base64}``) and its phases, each a list of case requests (see
    :mod:`d2lattn.grading.sandbox.runner`). Phase i of every group runs before phase i + 1 of any.
    Returns one :class:`GroupRun` per group.
    """
    warm = any(IMPORTS.search(text) for _, text in cells)
    done, live, stop = [GroupRun() for _ in groups], {}, None
    try:
        for number, (package, phases) in enumerate(groups):
            run = _start(package, cells, phases, timeout, case_timeout, max_output, unsafe,
                         warm)
            shown = [cell for cell in cells if stop is None or cell[0] < stop]
            ready, stopped_at = _run_cells(run, shown, Budget(timeout),
                                           max_output if number == 0 else 0, done[number])
            if stop is not None and len(shown) < len(cells) and ready:
                done[number].notes.append((None, _time_note(timeout, stop)))
            stop = stopped_at if stop is None else stop
            if ready:
                live[number] = run
            else:
                run.close()
        for phase in range(max((len(p) for _, p in groups), default=0)):
            for number, run in list(live.items()):
                cases = groups[number][1][phase] if phase < len(groups[number][1]) else []
                if cases and not _run_phase(run, phase, cases, case_timeout, done[number]):
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
    """Run the cells in ``run``, keeping at most ``max_output`` characters of their text.
    ``(ready, stopped)``: whether the sandbox is ready for cases, and the number of the
    cell in which the time ran out (None if it did not)."""
    numbers = {number for number, _ in cells}
    run.listen([("cell", n) for n in numbers] + [("cells_done",)])
    run.send({"cells": [list(cell) for cell in cells], "timeout": budget.seconds,
              "max_output": max_output})
    taken, how, stopped = run.collect(lambda r: _is_cell(r, numbers), "cells_done",
                                      budget.left() + limits.STARTUP_SECONDS)
    group.outputs = {r["cell"]: {"text": r["text"][:max_output], "error": r["error"]}
                     for r in taken}
    last = max(group.outputs, default=None)
    if how != "done":
        group.notes.append((None, _stopped(how, "while its cells ran", group.outputs)))
        running = [number for number, _ in cells if number not in group.outputs]
        return False, running[0] if how == "timeout" and running else None
    if stopped is not None:
        group.notes.append((None, _time_note(budget.seconds, last)))
        return True, last
    return True, None


def _time_note(seconds, cell):
    return f"time limit of {seconds:g} s reached in code cell {cell}; later cells did not run"


def _run_phase(run, phase, cases, case_timeout, group):
    """Send one phase of cases and collect its records; True if the sandbox still serves."""
    ids = {case["id"] for case in cases}
    run.listen([("case", i) for i in ids] + [("phase_done", phase)])
    run.send({"cases": cases, "case_timeout": case_timeout})
    examples = sum(len(case.get("steps") or case.get("plan") or ()) for case in cases)
    taken, how, _ = run.collect(lambda r: _is_case(r, ids), "phase_done",
                                case_timeout * examples + 10)
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
