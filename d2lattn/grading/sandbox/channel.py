"""The grader's end of one group's runner (see :mod:`d2lattn.grading.sandbox.runner`): the
messages to it and the records from it, within a budget; grading refused where no sandbox
can start."""
import json
import queue
import secrets
import shutil
import sys
import threading
import time

from .. import limits
from ..protocol import cells_message, start_message
from . import bwrap

_checked = False  # the runner started once in this process (see check_sandbox)


class SandboxError(RuntimeError):
    """Grading cannot isolate submissions here; the message says why and what to do."""


def check_sandbox(unsafe=False):
    """Raise SandboxError unless the real runner starts in a sandbox and runs a cell (or
    ``unsafe`` is True); the error carries bubblewrap's or Python's own message."""
    global _checked
    if unsafe:
        print("WARNING: grading WITHOUT a sandbox (--unsafe): each submission runs as you, can "
              "read the bundle and the other submissions and can change the grades",
              file=sys.stderr)
        return
    if shutil.which("bwrap") is None:
        raise SandboxError(
            "bubblewrap (bwrap) is not installed, and grading never runs a submission outside "
            "a sandbox: install it (Debian/Ubuntu: apt-get install bubblewrap) or, only for "
            "submissions you trust, pass --unsafe (see exercises/README.md)")
    if not _checked:
        try:
            said = _start_once()
        except (ImportError, OSError) as err:  # pyseccomp or libseccomp.so.2 missing
            raise SandboxError(f"the grader's seccomp filter cannot be made ({err}): install "
                               "pyseccomp (pip install 'd2lattn[grader]') and libseccomp2") \
                from None
        if said is not None:
            raise SandboxError(f"the grader's sandbox cannot run here: {said or 'no message'} "
                               "(see exercises/README.md, How grading is isolated)")
        _checked = True


def _start_once():
    """Start the runner in a sandbox and run one cell; None if it worked, else what the
    sandbox wrote on its standard error."""
    run = Run(False, max_bytes=1 << 20)
    try:
        run.listen([("cells_done",)])
        ok = run.send(run.start(limits.RLIMITS, None, {})) and run.send(
            cells_message([(1, "1")], 60, 100))
        if ok and run.collect(lambda record: False, "cells_done", 90)[1] == "done":
            return None
    finally:
        run.close()
    return run.errors()


class Run:
    """One group's runner: the messages to it, the records from it.

    Of what the runner writes, only the records of the group listened to (:meth:`listen`)
    are kept: one per expected key (a cell, a case, a marker), within a budget of
    :data:`limits.MAX_OBJECTS` decoded JSON objects (``over_budget`` says it was reached).
    Anything else is dropped as it is read, so nothing a submission writes can grow the
    grader.
    """

    def __init__(self, unsafe, max_bytes):
        self.uid = secrets.choice(limits.UIDS) if bwrap.runs_as_root(unsafe) else None
        self.process = (bwrap.Unsandboxed() if unsafe else bwrap.prepared().fork())
        self.records, self.room, self.ended = queue.Queue(), max_bytes, False
        self.lock, self.keys, self.taken = threading.Lock(), set(), set()
        self.budget = self.objects = limits.MAX_OBJECTS
        self.over_budget = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def start(self, limits, compat, package):
        """The runner's first message: its limits, the user it becomes (as root), the
        grader's nice value (the whole sandbox runs at it), the group's d2lattn, and
        ``compat`` (the shim to preload NumPy and MXNet with, or None) unless its process
        has them already."""
        return start_message(limits, self.uid, bwrap.nice(),
                             None if self.process.preloaded else compat, package,
                             self.process.scratch)

    def listen(self, keys):
        """From now on keep only records with a key of ``keys``, one each: ``("cell", n)``,
        ``("case", id)`` or ``("cells_done",)``."""
        with self.lock:
            self.keys, self.taken = set(keys), set()

    def _read(self):
        try:
            while self.room > 0:
                line = self.process.stdout.readline(limits.MAX_LINE)
                if not line:
                    break
                self.room -= len(line)
                record = self._kept(line)
                if record is not None:
                    self.records.put(record)
        except (OSError, ValueError):
            pass
        self.records.put(None)  # the end: the runner stopped, or its output went over the cap

    def _kept(self, line):
        """The record of ``line`` if it is one to keep, else None."""
        if self.over_budget and len(line) > 200:
            return None  # only short markers still pass
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            return None  # bytes the submission wrote itself: never a result
        key = _key(record)
        with self.lock:
            if key is None or key not in self.keys or key in self.taken:
                return None
            size = _size(record)
            self.taken.add(key)
            if size > self.objects:
                self.over_budget = True
                return dict([key]) if len(key) > 1 else record  # its key alone: no values
            self.objects -= size
        return record

    def send(self, message):
        """Send one message; False if the runner no longer listens."""
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def collect(self, accept, done, seconds):
        """Of the records kept (see :meth:`listen`), what ``accept`` makes of them (None:
        not taken), until one has the key ``done``, the runner ends or ``seconds`` pass.
        Returns ``(taken, how, value)``: how is "done" (value: that record's ``done``
        entry), "ended" or "timeout" (value None)."""
        deadline, taken = time.monotonic() + seconds, []
        while not self.ended:
            try:
                record = self.records.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return taken, "timeout", None
            if record is None:
                self.ended = True
            elif done in record:
                return taken, "done", record[done]
            else:
                taken += [kept for kept in [accept(record)] if kept is not None]
        return taken, "ended", None

    def take(self, seconds):
        """The next record kept (see :meth:`listen`) within ``seconds``: ``(record, "done")``,
        else ``(None, how)``, how "ended" or "timeout"."""
        if self.ended:
            return None, "ended"
        try:
            record = self.records.get(timeout=max(0.0, seconds))
        except queue.Empty:
            return None, "timeout"
        if record is None:
            self.ended = True
            return None, "ended"
        return record, "done"

    def errors(self):
        """What the sandbox wrote on its standard error before any submission code ran
        (bubblewrap's and Python's messages), at most 2000 characters."""
        return self.process.errors()

    def close(self):
        """Kill the runner and every process it started; wait until they have ended."""
        self.process.kill()
        self.reader.join(timeout=limits.STARTUP_SECONDS)
        self.process.close()


def _key(record):
    """A record's key: ``("cell", n)``, ``("case", id)`` or ``("cells_done",)``; None for
    anything else."""
    if not isinstance(record, dict):
        return None
    for name in ("cell", "case"):
        if type(record.get(name)) is int:
            return name, record[name]
    return ("cells_done",) if "cells_done" in record and "case" not in record else None


def _size(value):
    """The number of JSON objects in ``value`` (each key, number, string, list, dict)."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            count += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count
