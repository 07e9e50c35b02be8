"""Run a notebook's code in a sandbox and collect the values its test examples return.

The sandbox is bubblewrap (``bwrap``): new PID, network, IPC, UTS and cgroup namespaces, killed
with the grader (``--die-with-parent``) and, with its PID 1, every process it started. As an
ordinary user it also gets a user namespace, in which the kernel counts its processes. As root,
whose processes the kernel never counts, the runner instead becomes a user of its own before
any submission code runs: a random uid of a range no account uses (:data:`limits.UIDS`), one per
sandbox, so no two sandboxes share a process count or a per-user kernel object. A seccomp
filter (:mod:`d2lattn.grading.sandbox.syscalls`) denies keyrings, System V and POSIX IPC, new
sessions and namespaces, mounts, tracing and the kernel's other interfaces (``/proc/keys``
and ``/proc/key-users`` are masked), so nothing is shared through the kernel with the grader,
another sandbox or another group: each group of questions gets a sandbox of its own.

It sees the Python installation and its packages read-only (an installed d2lattn hidden;
installations under ``/tmp`` or reached through a symbolic link included), a private
``/tmp`` (also its home) and ``/dev/shm``, both of limited size, and nothing else: no
submission file, no bundle, no master, no network. Each group of questions gets its copy of
``d2lattn`` as data (:mod:`d2lattn.grading.forbid.shadow`), written by the runner into its
/tmp. Resource limits (memory, file size, processes, CPU time) are set by the runner before
any submission code runs; the grader
enforces the wall-clock limits.

Where bubblewrap is missing or cannot start the runner, :func:`check_sandbox` refuses with
bwrap's own message, unless the caller passes ``unsafe=True``: then the runner is a plain
child process (same protocol, same verdict in the grader, but the submission can read and
change anything the grader's user can).
"""
import functools
import json
import os
import queue
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .. import limits
from ..limits import PACKAGE
from . import runner, syscalls

RUNNER = Path(runner.__file__).read_text(encoding="utf-8")
ETC = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "passwd",
       "group", "nsswitch.conf", "hosts"]
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
            {"cells": [[1, "1"]], "timeout": 60, "max_output": 100})
        if ok and run.collect(lambda record: False, "cells_done", 90)[1] == "done":
            return None
    finally:
        run.close()
    return run.errors()


def _python_paths():
    """The folders of the Python installation and its packages as this process names them
    (normalised, links kept): the prefixes and the ``site-packages`` folders of ``sys.path``,
    never the current folder or the d2lattn tree."""
    paths = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(_python()))}
    paths |= {p for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages")}
    return {os.path.normpath(os.path.abspath(p)) for p in paths if os.path.isdir(p)}


def _binds():
    """The real folders behind :func:`_python_paths`, shortest first: bound read-only."""
    return sorted({str(Path(p).resolve()) for p in _python_paths()}, key=len)


def _links(binds):
    """``[(link, target)]``: the symbolic links on the way to the Python folders that lie
    outside every bind, so that the sandbox names those folders as this process does."""
    links = {}
    for path in map(Path, _python_paths()):
        for prefix in list(reversed(path.parents))[1:] + [path]:
            if prefix.is_symlink() and not _inside(prefix, binds):
                links[str(prefix)] = os.readlink(prefix)
    return sorted(links.items())


def _inside(path, folders):
    return any(Path(path).is_relative_to(folder) for folder in folders)


def _python():
    # normalised, not resolved: "bench/../.venv/bin/python" would not exist in the sandbox,
    # and a resolved link would lose the virtual environment
    return os.path.normpath(os.path.abspath(sys.executable))


def _isolation():
    """bwrap's namespace and capability options. As an ordinary user: every namespace, no
    capability, and the kernel counts the sandbox's processes in its user namespace. As root,
    whose processes the kernel never counts: no user namespace, and only the capabilities the
    runner needs to become its own user (:data:`limits.UIDS`) before any submission code runs."""
    if os.geteuid() != 0:
        return ["--unshare-all", "--cap-drop", "ALL"]
    return ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--cap-drop", "ALL", "--cap-add", "CAP_SETUID",
            "--cap-add", "CAP_SETGID"]


def _bwrap_args(seccomp_fd):
    """bwrap's arguments up to the command: the namespaces, the filter read from
    ``seccomp_fd``, the system's folders, private /tmp and /dev/shm, the Python folders."""
    args = ["bwrap"] + _isolation() + [
        "--die-with-parent", "--new-session", "--seccomp", str(seccomp_fd),
        "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--ro-bind", "/dev/null", "/proc/keys",
        "--ro-bind", "/dev/null", "/proc/key-users",
        "--dev", "/dev", "--perms", "1777", "--size", str(limits.SHM_SIZE), "--tmpfs", "/dev/shm",
        "--perms", "1777", "--size", str(limits.TMP_SIZE), "--tmpfs", "/tmp",
        "--perms", "0777", "--dir", "/tmp/home", "--perms", "0777", "--dir", "/tmp/work",
        "--chdir", "/tmp/work", "--clearenv"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    binds = [path for path in _binds() if not _inside(path, ["/usr"])]
    for path in binds:  # after the private /tmp, so that an installation in /tmp is there
        args += _new_parents(path, binds) + ["--ro-bind", path, path]
    for link, target in _links(binds):
        args += _new_parents(link, binds) + ["--symlink", target, link]
    package = str(PACKAGE)
    if _inside(package, binds + ["/usr"]):
        args += ["--tmpfs", package]  # an installed d2lattn: hidden, its copy comes as data
    return args


def _new_parents(path, binds):
    """bwrap's options that make the folders above ``path`` which are not inside a bind,
    /usr or /tmp, readable by all (bwrap would make them private: 0700)."""
    parents = [str(parent) for parent in reversed(Path(path).parents)
               if str(parent) not in ("/", "/tmp")]
    return [option for parent in parents if not _inside(parent, binds + ["/usr"])
            for option in ("--perms", "0755", "--dir", parent)]


def _command(unsafe, seccomp_fd):
    """``(argv, env, scratch)`` of the runner, sandboxed unless ``unsafe``; scratch is its
    private folder (d2lattn goes to scratch/pkg, home and work beside it)."""
    scratch = tempfile.mkdtemp(prefix="d2lattn-unsafe-") if unsafe else "/tmp"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": f"{scratch}/home",
           "USER": "student", "LOGNAME": "student",
           "LANG": "C.UTF-8", "PYTHONPATH": f"{scratch}/pkg", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONNOUSERSITE": "1", "PYTHONHASHSEED": "0", "MPLBACKEND": "Agg",
           "IPYTHONDIR": f"{scratch}/home/.ipython", "MPLCONFIGDIR": f"{scratch}/home/.mpl",
           "OMP_NUM_THREADS": "1", "MXNET_ENGINE_TYPE": "NaiveEngine"}
    python = [_python(), "-X", "utf8", "-c", RUNNER]
    if unsafe:
        for folder in ("home", "work"):
            os.makedirs(f"{scratch}/{folder}")
        return python, env, scratch
    args = _bwrap_args(seccomp_fd)
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args + ["--"] + python, None, scratch


class Run:
    """One submission's sandbox: the runner, the messages to it, the records from it.

    Of what the runner writes, only the records of the group listened to (:meth:`listen`)
    are kept: one per expected key (a cell, a case, a marker), within a budget of
    :data:`limits.MAX_OBJECTS` decoded JSON objects (``over_budget`` says it was reached). Anything
    else is dropped as it is read, so nothing a submission writes can grow the grader.
    """

    def __init__(self, unsafe, max_bytes):
        self.unsafe, self.errors_file = unsafe, tempfile.TemporaryFile()
        self.uid = None if unsafe or os.geteuid() != 0 else secrets.choice(limits.UIDS)
        fd = None if unsafe else _filter_fd()
        try:
            argv, env, self.scratch = _command(unsafe, fd)
            self.process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors_file,
                env=env, cwd=f"{self.scratch}/work" if unsafe else None,
                start_new_session=True, pass_fds=() if fd is None else (fd,))
        finally:
            if fd is not None:
                os.close(fd)
        self.records, self.room, self.ended = queue.Queue(), max_bytes, False
        self.lock, self.keys, self.taken = threading.Lock(), set(), set()
        self.budget = self.objects = limits.MAX_OBJECTS
        self.over_budget = False
        threading.Thread(target=self._read, daemon=True).start()

    def start(self, limits, compat, package):
        """The runner's first message: its limits, the user it becomes (as root), the
        grader's nice value (the whole sandbox runs at it), the group's d2lattn."""
        return {"limits": limits, "compat": compat, "scratch": self.scratch, "uid": self.uid,
                "nice": os.getpriority(os.PRIO_PROCESS, 0), "package": package}

    def listen(self, keys):
        """From now on keep only records with a key of ``keys``, one each: ``("cell", n)``,
        ``("case", id)``, ``("phase_done", i)`` or ``("cells_done",)``."""
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
            if size > self.objects:
                self.over_budget = True
                if len(key) > 1 and key[0] != "phase_done":
                    return None
            self.objects -= min(size, self.objects)
            self.taken.add(key)
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
        """Of the records kept (see :meth:`listen`), those ``accept`` takes, until one has
        the key ``done``, the runner ends or ``seconds`` pass. Returns ``(records, how,
        value)``: how is "done" (value: that record's ``done`` entry), "ended" or "timeout"
        (value None)."""
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
            elif accept(record):
                taken.append(record)
        return taken, "ended", None

    def errors(self):
        """What the sandbox wrote on its standard error before any submission code ran
        (bubblewrap's and Python's messages), at most 2000 characters."""
        self.errors_file.seek(0)
        return self.errors_file.read(2000).decode("utf-8", "replace").strip()

    def close(self):
        """Kill the runner (and with it the sandbox and every process in it)."""
        try:
            os.killpg(self.process.pid, 9)
        except OSError:
            pass
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if self.unsafe:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _key(record):
    """A record's key: ``("cell", n)``, ``("case", id)``, ``("phase_done", i)`` or
    ``("cells_done",)``; None for anything else."""
    if not isinstance(record, dict):
        return None
    for name in ("cell", "case", "phase_done"):
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


def _filter_fd():
    """A file descriptor, at its start, of the seccomp filter (see :mod:`syscalls`)."""
    fd = os.memfd_create("d2lattn-seccomp")
    os.write(fd, _program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


_program = functools.lru_cache(maxsize=1)(syscalls.filter_program)
