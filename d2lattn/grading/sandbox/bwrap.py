"""The sandbox: bubblewrap (``bwrap``) around a prepared process (:mod:`zygote`) that forks one
runner per group of questions, and the grader's handles on them.

The prepared process runs in new PID, network, IPC, UTS and cgroup namespaces, killed with
the grader (``--die-with-parent``). As an ordinary user it also gets a user namespace, in
which the kernel counts its processes; as root, whose processes the kernel never counts,
each runner instead becomes a user of its own before any submission code runs: a random
uid of a range no account uses (:data:`limits.UIDS`), one per group. The prepared process
keeps only the capabilities it needs to give each runner its own namespaces and folders
(and, as root, its user); each runner drops them all and loads a seccomp filter
(:mod:`d2lattn.grading.sandbox.syscalls`) that denies keyrings, file locks and leases,
page-cache probes and hints, file watches, System V and POSIX IPC, new sessions and
namespaces, mounts, tracing and the kernel's other interfaces (``/proc/keys``,
``/proc/key-users`` and ``/proc/locks`` are masked), so nothing is shared through the kernel
with the grader, another sandbox or another group but timing (see exercises/README.md).

Everything bubblewrap mounts is read-only: the Python installation and its packages (an
installed d2lattn hidden; installations under ``/tmp`` or reached through a symbolic link
included) and the system's folders. Each runner gets a private ``/proc``, ``/tmp`` (also
its home) and ``/dev/shm``, both of limited size, and nothing else: no submission file, no
bundle, no master, no network. Each group of questions gets its copy of ``d2lattn`` as data
(:mod:`d2lattn.grading.forbid.shadow`), written by the runner into its /tmp. Resource limits
(memory, file size, processes, CPU time) are set by the runner before any submission code
runs; the grader enforces the wall-clock limits.

Where bubblewrap is missing or cannot start the prepared process, :func:`check_sandbox`
refuses with bwrap's own message, unless the caller passes ``unsafe=True``: then each runner
is a plain child process (same protocol, same verdict in the grader, but the submission can
read and change anything the grader's user can).
"""
import functools
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .. import limits
from ..limits import PACKAGE
from ..master import steps
from . import runner, syscalls, zygote

RUNNER = "\n\n".join(Path(module.__file__).read_text(encoding="utf-8")
                     for module in (steps, runner))  # the runner's source, whole
ZYGOTE = Path(zygote.__file__).read_text(encoding="utf-8")
COMPAT = (PACKAGE / "_compat.py").read_text(encoding="utf-8")
ETC = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "passwd",
       "group", "nsswitch.conf", "hosts"]
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
    """bwrap's namespace and capability options. As an ordinary user: every namespace, and
    in its user namespace the capability to make each runner's namespaces and mounts. As
    root, whose processes the kernel never counts: no user namespace, and the capabilities to
    make them, to become each runner's own user (:data:`limits.UIDS`) and to kill it. Each runner drops
    them all before any submission code runs (:func:`zygote.confine`)."""
    if os.geteuid() != 0:
        return ["--unshare-all", "--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN"]
    return ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--cap-drop", "ALL", "--cap-add", "CAP_SETUID",
            "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_KILL"]


def runs_as_root(unsafe):
    """Whether each runner becomes a user of its own (a sandbox started by root)."""
    return not unsafe and os.geteuid() == 0


def nice():
    """The grader's nice value: every sandbox runs at it."""
    return os.getpriority(os.PRIO_PROCESS, 0)


def _bwrap_args():
    """bwrap's arguments up to the command: the namespaces, the system's folders, the
    prepared process's /tmp and /dev/shm, the Python folders, all else read-only."""
    args = ["bwrap"] + _isolation() + [
        "--die-with-parent", "--new-session",
        "--ro-bind", "/usr", "/usr", "--proc", "/proc",  # each runner masks its own keys
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
    binds = _outside_usr(_binds())
    for path in binds:  # after the private /tmp, so that an installation in /tmp is there
        args += _new_parents(path, binds) + ["--ro-bind", path, path]
    for link, target in _links(binds):
        args += _new_parents(link, binds) + ["--symlink", target, link]
    package = str(PACKAGE)
    if _inside(package, binds + ["/usr"]):  # an installed d2lattn: hidden, its copy comes as data
        args += ["--tmpfs", package, "--remount-ro", package]
    return args + ["--remount-ro", "/", "--remount-ro", "/dev"]


def _outside_usr(paths):
    return [path for path in paths if not _inside(path, ["/usr"])]


def _new_parents(path, binds):
    """bwrap's options that make the folders above ``path`` which are not inside a bind,
    /usr or /tmp, readable by all (bwrap would make them private: 0700)."""
    parents = [str(parent) for parent in reversed(Path(path).parents)
               if str(parent) not in ("/", "/tmp")]
    return [option for parent in parents if not _inside(parent, binds + ["/usr"])
            for option in ("--perms", "0755", "--dir", parent)]


def _environment(scratch):
    """The environment of every runner, whose private folder is ``scratch`` (d2lattn goes
    to scratch/pkg, home and work beside it)."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": f"{scratch}/home",
            "USER": "student", "LOGNAME": "student",
            "LANG": "C.UTF-8", "PYTHONPATH": f"{scratch}/pkg", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1", "PYTHONHASHSEED": "0", "MPLBACKEND": "Agg",
            "IPYTHONDIR": f"{scratch}/home/.ipython", "MPLCONFIGDIR": f"{scratch}/home/.mpl",
            "OMP_NUM_THREADS": "1", "MXNET_ENGINE_TYPE": "NaiveEngine"}


class Unsandboxed:
    """With ``--unsafe``: a runner as a plain child process, in a folder of its own."""
    preloaded = False  # a fresh Python: the runner imports NumPy and MXNet itself

    def __init__(self):
        self.scratch = tempfile.mkdtemp(prefix="d2lattn-unsafe-")
        for folder in ("home", "work"):
            os.makedirs(f"{self.scratch}/{folder}")
        self.errors_file = tempfile.TemporaryFile()
        self.child = subprocess.Popen(
            [_python(), "-X", "utf8", "-c", RUNNER], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.errors_file, env=_environment(self.scratch),
            cwd=f"{self.scratch}/work", start_new_session=True)
        self.stdin, self.stdout = self.child.stdin, self.child.stdout

    def errors(self):
        return _head(self.errors_file)

    def kill(self):
        try:
            os.killpg(self.child.pid, 9)
        except OSError:
            pass
        self.child.wait()

    def close(self):
        _close(self.stdin, self.stdout)
        shutil.rmtree(self.scratch, ignore_errors=True)


class Sandboxed:
    """A runner forked by the prepared process: its input, output, error output (a file),
    the lifeline the grader lets go of to kill it and the deathbed, which ends once nothing
    of its sandbox is left."""
    scratch = "/tmp"
    preloaded = True  # the prepared process imported NumPy and MXNet before the fork

    def __init__(self, prepared):
        self.prepared, self.errors_file = prepared, tempfile.TemporaryFile()
        theirs_in, stdin = os.pipe()
        stdout, theirs_out = os.pipe()
        theirs_life, self.lifeline = os.pipe()
        self.deathbed, theirs_bed = os.pipe()
        try:
            prepared.send_fds([theirs_in, theirs_out, self.errors_file.fileno(), theirs_life,
                               theirs_bed])
        finally:
            for fd in (theirs_in, theirs_out, theirs_life, theirs_bed):
                os.close(fd)  # the runner's ends: if the request failed, these end it at once
        self.stdin, self.stdout = os.fdopen(stdin, "wb"), os.fdopen(stdout, "rb")

    def errors(self):
        """The runner's error output, or else the prepared process's (bwrap's own)."""
        return _head(self.errors_file) or self.prepared.errors()

    def kill(self):
        if self.lifeline is not None:
            os.close(self.lifeline)  # its keeper kills it, and every process of its namespace
            self.lifeline = None

    def close(self):
        """Once killed: wait until every process of the sandbox has ended."""
        _close(self.stdin, self.stdout)
        if self.deathbed is not None:
            with os.fdopen(self.deathbed, "rb") as bed:
                select.select([bed], [], [], start_allowance())
            self.deathbed = None
            self.prepared.release()


class Prepared:
    """The prepared process of one configuration (:mod:`zygote`): its bubblewrap and the
    socket to it. It is closed only once it is retired (:func:`prepared` started another)
    and none of its runners is alive, so a replacement never kills a live sandbox."""

    def __init__(self, key, argv, config):
        self.key, self.lock, self.errors_file = key, threading.Lock(), tempfile.TemporaryFile()
        self.live, self.retired, self.ready = 0, False, False
        self.answered = threading.Event()
        self.socket, theirs = socket.socketpair()
        started = threading.Event()
        threading.Thread(target=self._keep, args=(argv, theirs, started), daemon=True).start()
        started.wait()
        theirs.close()
        if self.process is None:
            self.answered.set()
        else:
            threading.Thread(target=self._configure, args=(config,), daemon=True).start()

    def _keep(self, argv, theirs, started):
        """Start bubblewrap and wait for it: bwrap dies with the thread that started it
        (``--die-with-parent``), so that thread must live as long as it."""
        try:
            self.process = subprocess.Popen(argv, stdin=theirs, stdout=subprocess.DEVNULL,
                                            stderr=self.errors_file, start_new_session=True)
        except OSError as err:
            self.process = None
            self.errors_file.write(f"bwrap: {err}".encode())
        finally:
            started.set()
        if self.process is not None:
            self.process.wait()

    def _configure(self, config):
        """Send the configuration and wait, however long it takes, until the prepared process
        says it is ready (then its start is measured) or ends."""
        begin = time.monotonic()
        try:
            self.socket.sendall((json.dumps(config) + "\n").encode())
            answer = b""
            while not answer.endswith(b"\n"):
                byte = self.socket.recv(1)
                if not byte:
                    break
                answer += byte
            self.ready = answer == b"ready\n"
        except OSError:
            self.ready = False
        if self.ready:
            _started(time.monotonic() - begin)
        self.answered.set()

    def alive(self):
        """False once it failed to start or ended; True while it starts, however slowly."""
        return self.process is not None and self.process.poll() is None \
            and (self.ready or not self.answered.is_set())

    def send_fds(self, fds):
        """Ask for a runner on ``fds`` once the prepared process is ready (waiting at most
        :func:`start_allowance` seconds); nothing happens if it is not."""
        if not self.answered.wait(start_allowance()):
            with self.lock:
                self.errors_file.write(f"the sandbox's prepared process did not start within "
                                       f"{start_allowance():.0f} s\n".encode())
        if not self.ready:
            return
        with self.lock:
            try:
                socket.send_fds(self.socket, [b"g"], fds)
            except OSError:
                pass

    def fork(self):
        with self.lock:
            self.live += 1
        return Sandboxed(self)

    def release(self):
        """One of its runners has ended: close it if it is retired and that was the last."""
        with self.lock:
            self.live -= 1
            last = self.retired and self.live == 0
        if last:
            self.close()

    def retire(self):
        """Another prepared process replaces this one: close it now, or once its last live
        runner has ended."""
        with self.lock:
            self.retired = True
            idle = self.live == 0
        if idle:
            self.close()

    def errors(self):
        with self.lock:
            return _head(self.errors_file)

    def close(self):
        self.socket.close()  # the prepared process ends when the socket does
        if self.process is not None:
            try:
                self.process.wait(timeout=start_allowance())
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)


_prepared, _lock = None, threading.Lock()
_slowest = [0.0]  # seconds: the slowest start of a prepared process measured in this process


def _started(seconds):
    _slowest[0] = max(_slowest[0], seconds)


def start_allowance():
    """Seconds allowed for a sandbox to start: :data:`limits.STARTUP_SECONDS`, or five times
    the slowest start measured so far if that is longer, times the load per core (at least
    1), so that a loaded machine gets the time it needs."""
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return max(limits.STARTUP_SECONDS, 5 * _slowest[0]) * max(1.0, load)


def prepared():
    """The prepared process for this grader's configuration (its Python, its nice value),
    started on first use and again whenever it ended, failed to start or the configuration
    changed; the one it replaces is retired (see :class:`Prepared`), never killed with live
    sandboxes. A slow start is waited for (see :meth:`Prepared.send_fds`), never replaced."""
    global _prepared
    binds = _outside_usr(_binds())
    under_tmp = [path for path in binds if _inside(path, ["/tmp"])]
    config = {"runner": RUNNER, "compat": COMPAT, "nice": nice(), "seccomp": _program().hex(),
              "tmp_size": limits.TMP_SIZE, "shm_size": limits.SHM_SIZE,
              "own_user_namespace": not runs_as_root(False),
              "tmp_binds": [path for path in under_tmp
                            if not _inside(path, [p for p in under_tmp if p != path])],
              "tmp_links": [pair for pair in _links(binds) if _inside(pair[0], ["/tmp"])]}
    argv = _bwrap_args()
    for key, value in _environment("/tmp").items():
        argv += ["--setenv", key, value]
    argv += ["--", _python(), "-X", "utf8", "-c", ZYGOTE]
    key = json.dumps([argv, config])
    with _lock:
        if _prepared is None or _prepared.key != key or not _prepared.alive():
            if _prepared is not None:
                _prepared.retire()
            _prepared = Prepared(key, argv, config)
        return _prepared


def _head(file):
    """At most 2000 characters from the start of ``file``, stripped."""
    file.seek(0)
    return file.read(2000).decode("utf-8", "replace").strip()


def _close(*streams):
    for stream in streams:
        try:
            stream.close()
        except OSError:
            pass


_program = functools.lru_cache(maxsize=1)(syscalls.filter_program)
