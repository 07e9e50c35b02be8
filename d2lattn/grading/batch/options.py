"""How :func:`d2lattn.grading.grade` grades a class: one :class:`GradeOptions`, each default
defined here once (the limits' own in :mod:`d2lattn.grading.limits`), each checked when made;
the command line builds it by name."""
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..._checks import check_int, check_positive
from ..limits import CASE_SECONDS, MAX_BYTES, MAX_CODE, MAX_OUTPUT, NOTEBOOK_SECONDS
from .gradebook import Exports


@dataclass(frozen=True)
class GradeOptions:
    """What a grading of a class may be told besides its three folders.

    ``assignment``: the bundle's assignment (default: the one most notebooks name, or the
    bundle's only one). ``roster``: a CSV of the class (see
    :func:`d2lattn.grading.roster.read_roster`; default: the copy a run into the same
    out folder recorded). ``exports`` (:class:`.gradebook.Exports`) and ``new_exports``: how
    ``canvas.csv`` and ``moodle.csv`` are written (see :func:`.record.settle`).
    ``identities`` (``{file: student}``): the instructor's word on whose a submission is.
    ``shard=(i, n)``: grade only the i-th of n shares of the class.
    ``timeout``: seconds for a notebook's code cells, in each of its sandboxes;
    ``case_timeout``: seconds per example of a case; ``max_output``: characters of output kept
    per notebook; ``max_bytes``, ``max_code``: larger files, or files with more characters of
    code, are not run. ``jobs``: submissions graded at a time (None: the number of cores).
    ``unsafe``: no sandbox (see :mod:`d2lattn.grading.sandbox`). ``log``: called with one line
    per submission as it finishes, what is reused and a summary of what changed;
    ``progress``: show a bar."""
    assignment: str | None = None
    roster: str | os.PathLike | None = None
    exports: Exports = Exports()
    new_exports: bool = False
    identities: Mapping = field(default_factory=dict)
    shard: tuple | None = None
    timeout: float = NOTEBOOK_SECONDS
    case_timeout: float = CASE_SECONDS
    max_output: int = MAX_OUTPUT
    max_bytes: int = MAX_BYTES
    max_code: int = MAX_CODE
    jobs: int | None = None
    unsafe: bool = False
    log: Callable | None = None
    progress: bool = False

    def __post_init__(self):
        check_positive("timeout", self.timeout)
        check_positive("case_timeout", self.case_timeout)
        for name in ("max_output", "max_bytes", "max_code"):
            check_int(name, getattr(self, name), minimum=1)
        if self.jobs is not None:
            check_int("jobs", self.jobs, minimum=1)
        if self.log is not None and not callable(self.log):
            raise TypeError(f"log must be callable or None, got {self.log!r}")
        if not isinstance(self.exports, Exports):
            raise TypeError(f"exports must be an Exports, got {self.exports!r}")
        if self.identities is None:  # frozen: set once, here
            object.__setattr__(self, "identities", {})
        if not isinstance(self.identities, Mapping):
            raise TypeError(f"identities must be a dict {{file: student}}, got "
                            f"{self.identities!r}")
        shard = self.shard
        if shard is not None and not (isinstance(shard, tuple) and len(shard) == 2 and all(
                type(x) is int for x in shard) and 1 <= shard[0] <= shard[1]):
            raise ValueError(f"shard must be (i, n) with 1 <= i <= n, got {self.shard!r}")

    @property
    def limits(self):
        """The limits of one notebook's sandboxes: ``{"timeout", "case_timeout",
        "max_output"}``."""
        return {"timeout": float(self.timeout), "case_timeout": float(self.case_timeout),
                "max_output": self.max_output}

    def say(self, line):
        """Give ``line`` to ``log``, if there is one."""
        if self.log is not None:
            self.log(line)
