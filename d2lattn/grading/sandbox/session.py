"""Drive one submission's sandboxes (see :mod:`d2lattn.grading.sandbox.runner`): a fresh sandbox for
each group of questions and phase of its cases, one at a time, never two of one submission
alive together. Each sandbox gets its group's copy of d2lattn and the cells, then the cases of
one phase, one case at a time, each under its own time limit. Phase 0 (the public cases) of
every group runs before phase 1 (the hidden ones) of any group, so nothing of a hidden phase
has existed anywhere while a value that the feedback shows was being made; the sandbox that
ends a phase serves its group's next phase too (nothing of the phase before runs after it).
Every record is checked before it is kept; anything else a sandbox writes is dropped."""
import re
import time

from .. import limits
from ..protocol import SandboxRecord, case_message, case_record, cell_output, cells_message
from .bwrap import COMPAT, start_allowance
from .channel import Run

NO_RUN = "the sandbox ended before any cell ran"
IMPORTS = re.compile(r"^\s*(import|from)\s+(d2lattn|mxnet)\b", re.M)  # worth preloading


def run_submission(cells, groups, timeout, case_timeout, max_output, unsafe=False):
    """Run ``cells`` (``(cell number, source)`` pairs) in a fresh sandbox per group and phase
    (:func:`schedule`), one sandbox at a time, each within ``timeout`` seconds of its own for
    the cells, then the phase's cases (each example within ``case_timeout``).

    Fair time: a group's answers do not depend on the time another run used. Where one run's
    time ran out in cell k, later runs run the cells before k only (cell k would take their
    time too) and say so; so answers that ran before a loop keep their points whatever the
    order of the groups. The text of the cells' outputs comes from the first run only; later
    ones send none (they run the same code).

    ``groups`` is a list of ``(package, phases)``: the d2lattn copy that group's sandboxes see
    (``{relative path: base64}``) and its phases, each a list of case requests (see
    :mod:`d2lattn.grading.sandbox.runner`). Returns one
    :class:`~d2lattn.grading.protocol.SandboxRecord` per group.
    """
    warm = any(IMPORTS.search(text) for _, text in cells)
    done, stop, run, first = [SandboxRecord() for _ in groups], None, None, True
    order = schedule([[bool(cases) for cases in phases] for _, phases in groups])
    try:
        for step, (phase, number) in enumerate(order):
            package, phases = groups[number]
            if run is None:
                run = _start(package, phases, timeout, case_timeout, max_output, unsafe, warm)
                shown = [cell for cell in cells if stop is None or cell[0] < stop]
                tag = None if phase == 0 else phase  # notes while serving a hidden phase: its own
                ready, stopped_at = _run_cells(run, shown, Budget(timeout),
                                               max_output if first else 0, done[number], tag)
                if stop is not None and len(shown) < len(cells) and ready:
                    done[number].notes.append((tag, _time_note(timeout, stop)))
                first, stop = False, stopped_at if stop is None else stop
                if not ready:
                    run = _ended(run)
                    continue
            cases = phases[phase] if phase < len(phases) else []
            served = not cases or _run_phase(run, phase, cases, case_timeout, done[number])
            if not served or order[step + 1:step + 2] != [(phase + 1, number)]:
                run = _ended(run)  # before the next sandbox starts
    finally:
        if run is not None:
            run.close()
    return done


def _ended(run):
    """None, once ``run``'s sandbox and every process it started have ended."""
    run.close()


def schedule(phases):
    """``[(phase, group)]``: the order in which the sandboxes of groups serve their phases,
    given ``phases[group][phase]``, True where that phase holds cases. Every phase of every
    group before the next phase of any; group 0's phase 0 always, first (its cells' output
    is the notebook's); within a phase, the groups with cases in the next phase last, so that
    the last of them goes on into the next phase in the same sandbox, first there."""
    count = max([len(p) for p in phases] + [1 if phases else 0])

    def has(number, phase):
        return phase < len(phases[number]) and phases[number][phase]

    order = []
    for phase in range(count):
        numbers = [n for n in range(len(phases)) if has(n, phase) or phase == n == 0]
        first = order[-1][1] if order and order[-1][1] in numbers else 0 if phase == 0 else None
        rest = sorted((n for n in numbers if n != first), key=lambda n: has(n, phase + 1))
        order += [(phase, n) for n in ([first] if first in numbers else []) + rest]
    return order


class Budget:
    """The seconds left of a notebook's time limit."""

    def __init__(self, seconds):
        self.seconds, self.end = seconds, time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


def _start(package, phases, timeout, case_timeout, max_output, unsafe, warm):
    """A group's sandbox, started with its package: the runner's first message sent."""
    examples = sum(len(case.get("steps") or case.get("plan") or ()) for phase in phases
                   for case in phase)
    cpu = timeout + limits.STARTUP_SECONDS + case_timeout * examples  # seconds of CPU
    run = Run(unsafe, max_bytes=2 * max_output + (64 << 20))
    run.send(run.start(dict(limits.RLIMITS, RLIMIT_CPU=int(cpu)), COMPAT if warm else None,
                       package))
    return run


def _run_cells(run, cells, budget, max_output, group, tag):
    """Run the cells in ``run``, keeping at most ``max_output`` characters of their text (in
    ``group.outputs`` if it holds none yet) and noting what stopped them as ``tag``.
    ``(ready, stopped)``: whether the sandbox is ready for cases, and the number of the
    cell in which the time ran out (None if it did not)."""
    numbers = {number for number, _ in cells}
    run.listen([("cell", n) for n in numbers] + [("cells_done",)])
    run.send(cells_message(cells, budget.seconds, max_output))
    taken, how, stopped = run.collect(lambda r: cell_output(r, numbers), "cells_done",
                                      budget.left() + start_allowance())
    outputs = {number: type(output)(output.text[:max_output], output.error)
               for number, output in taken}
    group.outputs = group.outputs or outputs
    last = max(outputs, default=None)
    if how != "done":
        group.notes.append((tag, _stopped(how, "while its cells ran", outputs)))
        running = [number for number, _ in cells if number not in outputs]
        return False, running[0] if how == "timeout" and running else None
    if stopped is not None:
        group.notes.append((tag, _time_note(budget.seconds, last)))
        return True, last
    return True, None


def _time_note(seconds, cell):
    return f"time limit of {seconds:g} s reached in code cell {cell}; later cells did not run"


def _run_phase(run, phase, cases, case_timeout, group):
    """Send the cases of one phase, each once the record of the one before is in, and keep
    their records; True if the sandbox still serves."""
    for case in cases:
        run.listen([("case", case["id"])])
        run.send(case_message(case, case_timeout))
        examples = len(case.get("steps") or case.get("plan") or ())
        record, how = run.take(case_timeout * max(examples, 1) + 10)
        if how != "done":
            group.notes.append((phase, _stopped(how, "while the tests ran", group.outputs)))
            return False
        if run.over_budget:
            group.notes.append((phase, f"the sandbox sent more than {run.budget} values; "
                                       "the rest were dropped"))
            return False
        kept = case_record(record, case["id"])
        if kept is not None:
            group.results[case["id"]] = kept
    return True


def _stopped(how, when, outputs):
    if how == "timeout":
        return f"the sandbox was stopped at its time limit {when}"
    if outputs:
        return f"the sandbox ended {when} (after cell {max(outputs)})"
    return NO_RUN if when == "while its cells ran" else f"the sandbox ended {when}"
