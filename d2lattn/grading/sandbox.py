"""Run a notebook's code in a sandbox and collect the values its test examples return.

The sandbox is bubblewrap (``bwrap``): new PID, network, IPC, UTS and cgroup namespaces (and a
user namespace, unless the grader is root: then the runner becomes ``nobody`` before any
submission code runs, since the kernel never limits root's processes), killed with the grader
(``--die-with-parent``) and, with its PID 1, every process it started. It sees the Python
installation and its packages read-only (an installed d2lattn hidden), an empty private
``/tmp`` (also its home) of limited size, and nothing else: no submission file, no bundle, no
master, no network. Each group of questions gets its copy of ``d2lattn`` as data, with the
group's forbidden objects replaced by stubs that raise (their code is nowhere in the sandbox).
Resource limits (memory, file size, processes, CPU time) are set by the runner before any
submission code runs; the grader enforces the wall-clock limits.

Where bubblewrap is missing or cannot create namespaces, :func:`check_sandbox` refuses, unless
the caller passes ``unsafe=True``: then the runner is a plain child process (same protocol,
same verdict in the grader, but the submission can read and change anything the grader's user
can).
"""
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import runner

RUNNER = Path(runner.__file__).read_text(encoding="utf-8")
LIMITS = {"RLIMIT_AS": 6 << 30, "RLIMIT_FSIZE": 64 << 20, "RLIMIT_CORE": 0,
          "RLIMIT_NPROC": 256}
TMP_SIZE = 256 << 20  # bytes of the sandbox's /tmp
MAX_LINE = 8 << 20  # bytes of one message from the runner
ETC = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "passwd",
       "group", "nsswitch.conf", "hosts"]


class SandboxError(RuntimeError):
    """Grading cannot isolate submissions here; the message says why and what to do."""


def check_sandbox(unsafe=False):
    """Raise SandboxError unless bubblewrap can start a sandbox (or ``unsafe`` is True)."""
    if unsafe:
        print("WARNING: grading WITHOUT a sandbox (--unsafe): each submission runs as you, can "
              "read the bundle and the other submissions and can change the grades",
              file=sys.stderr)
        return
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxError(
            "bubblewrap (bwrap) is not installed, and grading never runs a submission outside "
            "a sandbox: install it (Debian/Ubuntu: apt-get install bubblewrap) or, only for "
            "submissions you trust, pass --unsafe (see exercises/README.md)")
    probe = subprocess.run(_bwrap_args(python=False) + ["true"], capture_output=True,
                           text=True, timeout=60)
    if probe.returncode != 0:
        raise SandboxError(f"bubblewrap cannot create a sandbox here ({probe.stderr.strip()}); "
                           "user namespaces may be disabled (see exercises/README.md)")


def _binds():
    """Read-only paths of the Python installation and its packages: the prefixes and the
    ``site-packages`` folders of ``sys.path``, never the current folder or the d2lattn tree."""
    prefixes = {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)}
    paths = prefixes | {p for p in sys.path if p and Path(p).name in ("site-packages",
                                                                      "dist-packages")}
    return sorted({str(Path(p).resolve()) for p in paths if Path(p).is_dir()}, key=len)


def _isolation():
    """bwrap's namespace and capability options. As an ordinary user: every namespace, no
    capability, and the kernel counts the sandbox's processes in its user namespace. As root,
    whose processes the kernel never counts: no user namespace, and only the capabilities the
    runner needs to become ``nobody`` (:data:`runner.NOBODY`) before any submission code runs."""
    if os.geteuid() != 0:
        return ["--unshare-all", "--cap-drop", "ALL"]
    return ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--cap-drop", "ALL", "--cap-add", "CAP_SETUID",
            "--cap-add", "CAP_SETGID"]


def _bwrap_args(python=True):
    args = ["bwrap"] + _isolation() + [
        "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr", "--proc", "/proc",
        "--dev", "/dev", "--perms", "1777", "--size", str(TMP_SIZE), "--tmpfs", "/tmp",
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
    if python:
        import d2lattn

        binds = [path for path in _binds()
                 if path.split("/")[1] not in ("usr", "tmp", "proc", "dev", "")]
        for path in binds:
            for parent in _new_parents(path, binds):  # bwrap would make them private (0700)
                args += ["--perms", "0755", "--dir", parent]
            args += ["--ro-bind", path, path]
        package = str(Path(d2lattn.__file__).resolve().parent)
        if any(Path(package).is_relative_to(path) for path in binds + ["/usr"]):
            args += ["--tmpfs", package]  # an installed d2lattn: hidden, its copy comes as data
    return args


def _new_parents(path, binds):
    """The folders above ``path`` that the sandbox must create: not inside another bind."""
    parents = [str(parent) for parent in reversed(Path(path).parents) if str(parent) != "/"]
    return [parent for parent in parents if parent.split("/")[1] not in ("usr", "tmp")
            and not any(Path(parent).is_relative_to(bind) for bind in binds)]


def _command(unsafe):
    """``(argv, env, scratch)`` of the runner, sandboxed unless ``unsafe``; scratch is its
    private folder (d2lattn goes to scratch/pkg, home and work beside it)."""
    scratch = tempfile.mkdtemp(prefix="d2lattn-unsafe-") if unsafe else "/tmp"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": f"{scratch}/home",
           "LANG": "C.UTF-8", "PYTHONPATH": f"{scratch}/pkg", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONNOUSERSITE": "1", "PYTHONHASHSEED": "0", "MPLBACKEND": "Agg",
           "IPYTHONDIR": f"{scratch}/home/.ipython", "MPLCONFIGDIR": f"{scratch}/home/.mpl",
           "OMP_NUM_THREADS": "1", "MXNET_ENGINE_TYPE": "NaiveEngine"}
    # normalised, not resolved: "bench/../.venv/bin/python" would not exist in the sandbox,
    # and a resolved link would lose the virtual environment
    python = [os.path.normpath(sys.executable), "-X", "utf8", "-c", RUNNER]
    if unsafe:
        for folder in ("home", "work"):
            os.makedirs(f"{scratch}/{folder}")
        return python, env, scratch
    args = _bwrap_args()
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args + ["--"] + python, None, scratch


class Run:
    """One submission's sandbox: the runner, the messages to it, the records from it."""

    def __init__(self, unsafe, max_bytes):
        argv, env, self.scratch = _command(unsafe)
        self.unsafe = unsafe
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd=f"{self.scratch}/work" if unsafe else None, start_new_session=True)
        self.records, self.room, self.ended = queue.Queue(), max_bytes, False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            while self.room > 0:
                line = self.process.stdout.readline(MAX_LINE)
                if not line:
                    break
                self.room -= len(line)
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # bytes the submission wrote itself: never a result
                if isinstance(record, dict):
                    self.records.put(record)
        except (OSError, ValueError):
            pass
        self.records.put(None)  # the end: the runner stopped, or its output went over the cap

    def send(self, message):
        """Send one message; False if the runner no longer listens."""
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def collect(self, accept, done, seconds, tag, ended="child_ended"):
        """Of the records tagged ``tag`` (all others are dropped), those ``accept`` takes, until
        one has the key ``done``, one has the key ``ended`` (the group's process ended), the
        runner ends or ``seconds`` pass. Returns ``(records, how, value)``: how is "done"
        (value: that record's ``done`` entry), "ended" or "timeout" (value None)."""
        deadline, taken = time.monotonic() + seconds, []
        while not self.ended:
            try:
                record = self.records.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return taken, "timeout", None
            if record is None:
                self.ended = True
            elif record.get("tag") != tag:
                continue  # from an earlier group's processes, or forged
            elif done in record:
                return taken, "done", record[done]
            elif ended in record:
                return taken, "ended", None
            elif accept(record):
                taken.append(record)
        return taken, "ended", None

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
