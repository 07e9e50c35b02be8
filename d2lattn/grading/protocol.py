"""What crosses the sandbox's boundary, typed: the messages the grader sends a runner (see
:mod:`d2lattn.grading.sandbox.runner` for its side, which sends plain JSON), the records the
grader keeps of the runner's answers (each checked before it becomes one), what one
submission's sandboxes gave, and the result of judging a case. Standard library only: every
part of the grader may import it, and it imports none."""
from dataclasses import dataclass, field, replace


# --- messages to a runner, one JSON line each ---------------------------------------------

def start_message(limits, uid, nice, compat, package, scratch):
    """The first: the runner's resource ``limits``, the user it becomes (``uid``, as root),
    the grader's ``nice`` value, the shim to preload MXNet with (``compat``, or None), the
    group's copy of d2lattn (``package``, ``{relative path: base64}``) and its folder."""
    return {"limits": limits, "uid": uid, "nice": nice, "compat": compat,
            "package": package, "scratch": scratch}


def cells_message(cells, timeout, max_output):
    """The code cells (``(number, source)`` pairs) to run within ``timeout`` seconds,
    sending at most ``max_output`` characters of their text."""
    return {"cells": [list(cell) for cell in cells], "timeout": timeout,
            "max_output": max_output}


def case_message(case, case_timeout):
    """One case request (its id, calls and pickled inputs, or at release its plan), each
    example within ``case_timeout`` seconds."""
    return {"case": case, "case_timeout": case_timeout}


# --- records from a runner ------------------------------------------------------------------

@dataclass(frozen=True)
class CellOutput:
    """A code cell's text output and its error line (None if it raised nothing)."""
    text: str
    error: str | None = None


@dataclass(frozen=True)
class CaseRecord:
    """What a runner sent for one case: the plain values of its checked steps, the error
    line of the step that raised (``raised``) and that step's index (``at``, counted over
    the steps it received), or None. At release also the master's expected values
    (``wants``), the pickled inputs of each step (None for a setup step) and the pickled
    scope."""
    values: list
    raised: str | None = None
    at: int | None = None
    wants: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    scope: str | None = None

    def after(self, skip):
        """The record with ``at`` counted over a case's examples, ``skip`` setup steps
        before the ones the sandbox received."""
        return self if self.at is None else replace(self, at=self.at + skip)


def cell_output(record, numbers):
    """``(number, CellOutput)`` of a runner's cell record, or None unless it is one for a
    cell of ``numbers``, well formed."""
    number, text, error = (record.get(key) for key in ("cell", "text", "error"))
    if type(number) is int and number in numbers and isinstance(text, str) \
            and (error is None or isinstance(error, str)):
        return number, CellOutput(text, error)
    return None


def case_record(record, case_id):
    """The :class:`CaseRecord` of a runner's record of case ``case_id``, or None unless it
    is one, well formed."""
    values, wants, inputs = (record.get(key, []) for key in ("values", "wants", "inputs"))
    raised, at, scope = (record.get(key) for key in ("raised", "at", "scope"))
    if type(record.get("case")) is int and record["case"] == case_id \
            and isinstance(record.get("values"), list) \
            and isinstance(wants, list) and isinstance(inputs, list) \
            and (raised is None or isinstance(raised, str)) \
            and (at is None or type(at) is int) and (scope is None or isinstance(scope, str)):
        return CaseRecord(values, raised, at, wants, inputs, scope)
    return None


@dataclass
class SandboxRecord:
    """What one group's sandboxes gave: ``outputs`` ``{cell number: CellOutput}`` (of its
    first run), ``results`` ``{case id: CaseRecord}`` and ``notes`` ``[(phase or None,
    text)]``: what stopped it, during the cells of its first run (None) or while it served
    a phase (that phase)."""
    outputs: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


# --- a case judged ---------------------------------------------------------------------------

@dataclass(frozen=True)
class CaseResult:
    """One case judged: whether it ``passed``, its ``message``; for a failure the
    ``source``, ``expected`` (the master's text) and ``received`` of its first failing
    example; whether it is ``hidden`` or a ``format`` check; what the submission raised
    (``raised``, a public case's only)."""
    passed: bool
    message: str
    source: str = ""
    expected: str = ""
    received: str = ""
    hidden: bool = False
    format: bool = False
    raised: str | None = None
