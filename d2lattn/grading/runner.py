"""The only grader code that runs inside the sandbox, next to a submission's code.

The grader starts ``python -c <this file's source>`` in the sandbox and talks to it in JSON
lines. The runner imports what the notebook needs (NumPy, MXNet, IPython), then serves one
group of questions after another (the questions that forbid the same objects): for each, a
forked child receives the group's copy of d2lattn, runs the submission's code cells, then the
public cases' example sources, then the hidden ones (only after every public result is in),
and sends back each cell's text output and, for each case, the values its examples returned,
as plain data (:func:`encode`). Between groups the runner kills every other process of the
sandbox and empties ``/tmp`` and ``/dev/shm``, so a group starts as the first one did (the
seccomp filter leaves no other place: no IPC, no keyring, see
:mod:`d2lattn.grading.syscalls`). It never sees an
expected value and decides nothing: anything it sends is, at worst, a value the submission
chose to return. Standard library only, so it needs neither d2lattn nor numpy.
"""
import base64
import functools
import importlib
import json
import os
import random
import resource
import shutil
import signal
import sys
import threading
import time

MAX_ITEMS = 200_000  # numbers in one value
MAX_TEXT = 10_000  # characters of one string or repr
SHOWN = 300  # characters of an error message
KEYCTL_JOIN_SESSION_KEYRING = 1


def encode(value, depth=0):
    """``value`` as plain JSON data: ``{"t": kind, "v": ...}``. Numbers, strings, None, lists,
    tuples, dicts, sets, NumPy and MXNet arrays (``dtype``, ``shape``, nested lists), MXNet
    contexts, dtypes and types; any other object as its type name and repr."""
    if depth > 20:
        raise ValueError("a value nested more than 20 levels deep")
    kind = type(value)
    if value is None or kind in (bool, str):
        text = value[:MAX_TEXT] if kind is str else value
        return {"t": "none" if value is None else kind.__name__, "v": text}
    if kind in (int, float):
        return {"t": "num", "v": value}
    module, np = getattr(kind, "__module__", "") or "", sys.modules.get("numpy")
    if np is not None and isinstance(value, np.dtype):
        return {"t": "dtype", "v": str(value)}
    if np is not None and isinstance(value, np.generic):
        return encode(value.item(), depth + 1)  # a NumPy scalar
    if module.startswith("mxnet") and hasattr(value, "asnumpy"):
        value = value.asnumpy()
    if np is not None and type(value) is np.ndarray:
        if value.size > MAX_ITEMS:
            raise ValueError(f"an array of {value.size} numbers (at most {MAX_ITEMS})")
        return {"t": "array", "dtype": str(value.dtype), "shape": list(value.shape),
                "v": value.tolist()}
    if module.startswith("mxnet") and kind.__name__ in ("Context", "Device"):
        return {"t": "context", "v": str(value)}
    if kind in (list, tuple, set, frozenset, dict):
        if len(value) > MAX_ITEMS:
            raise ValueError(f"a {kind.__name__} of {len(value)} items (at most {MAX_ITEMS})")
        if kind is dict:
            return {"t": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)]
                                       for k, v in dict.items(value)]}
        items = [encode(item, depth + 1) for item in (list.__iter__(value) if kind is list
                                                       else iter(value))]
        if kind in (set, frozenset):
            return {"t": "set", "v": sorted(items, key=lambda item: json.dumps(item))}
        return {"t": kind.__name__, "v": items}
    if isinstance(value, type):
        return {"t": "type", "v": f"{value.__module__}.{value.__qualname__}"}
    return {"t": "object", "type": f"{module}.{kind.__qualname__}",
            "v": repr(value)[:MAX_TEXT]}


def main():
    """Serve one submission on stdin/stdout: preload, then one forked child per group of
    questions (see the module docstring)."""
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    inbox = os.fdopen(os.dup(0), "r", encoding="utf-8")
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the submission reads nothing and writes nowhere but its outputs
        os.dup2(quiet, fd)

    def send(record):
        channel.write(json.dumps(record) + "\n")
        channel.flush()

    start = json.loads(inbox.readline())
    scratch, sandboxed, keep = start["scratch"], start["sandboxed"], start["keep"]
    _become(start["uid"])
    _new_session_keyring(start["keyctl"])
    _limit_resources(start["limits"])
    _preload(start.get("compat"))
    shell = _shell()
    _not_dumpable()
    for line in inbox:  # one group: its d2lattn and tag, its cells and cases, then "end"
        group, message = json.loads(line), {}
        tagged = functools.partial(_send_tagged, send, group["tag"])
        pid, pipe = _fork_group(group["package"], shell, inbox, tagged, scratch)
        watcher = _Watcher(pid, tagged)
        for line in inbox:
            message = json.loads(line)
            if "end" in message:
                break
            try:
                os.write(pipe, line.encode())
            except OSError:
                pass  # the child has ended: the watcher has said so
        watcher.end(pipe, scratch, sandboxed, keep)
        send({"group_done": True, "tag": message.get("end")})  # a tag the child never saw


def _send_tagged(send, tag, record):
    """Send a group's record with the group's tag: the grader takes no record of another."""
    send(dict(record, tag=tag))


def _not_dumpable():
    """No other process of the sandbox may trace this one or read its memory."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def _preload(compat):
    """Import what every run needs before any submission code runs, so that each group's
    child starts warm: NumPy, MXNet (after d2lattn's compatibility shim), matplotlib."""
    if compat is None:
        return
    try:
        module = type(sys)("_d2lattn_compat_preload")
        exec(compile(compat, "_compat.py", "exec"), module.__dict__)
        module.apply()
        import matplotlib
        import mxnet  # noqa: F401

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except Exception:  # noqa: BLE001 - the child imports them again and reports errors
        pass


def _fork_group(package, shell, inbox, send, scratch):
    """Fork a child that writes ``package`` (``{relative path: base64 of the file}``) to
    scratch/pkg, then runs the cells and the case phases it reads from a pipe; ``(pid, pipe)``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(read)
        return pid, write
    os.close(write)
    inbox.close()
    try:
        os.setpgid(0, 0)
        root = os.path.join(scratch, "pkg")
        for path, data in package.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "wb") as file:
                file.write(base64.b64decode(data))
        sys.path.insert(0, root)
        sys.path_importer_cache.pop(root, None)
        importlib.invalidate_caches()
        messages = os.fdopen(read, "r", encoding="utf-8")
        request = json.loads(messages.readline())
        send({"cells_done": _run_cells(shell, request, send)})
        for index, line in enumerate(messages):
            _run_cases(shell.user_ns, json.loads(line), send)
            send({"phase_done": index})
    finally:
        os._exit(0)


class _Watcher:
    """Wait for a group's child; send ``{"child_ended": True}`` if it ends by itself."""

    def __init__(self, pid, send):
        self.pid, self.ending = pid, threading.Event()
        self.thread = threading.Thread(target=self._wait, args=(send,), daemon=True)
        self.thread.start()

    def _wait(self, send):
        os.waitpid(self.pid, 0)
        if not self.ending.is_set():
            send({"child_ended": True})

    def end(self, pipe, scratch, sandboxed, keep):
        """Kill the child and everything it started; empty the sandbox's private folders
        but the folders ``keep`` (the Python installation, where it lies under /tmp)."""
        self.ending.set()
        os.close(pipe)
        for target in (-self.pid, self.pid):
            try:
                os.kill(target, signal.SIGKILL)
            except OSError:
                pass
        self.thread.join()
        if sandboxed:
            try:
                os.kill(-1, signal.SIGKILL)  # every other process of the sandbox but this one
            except OSError:
                pass
            _wait_alone()
        _empty(scratch, sandboxed, keep)


def _wait_alone(seconds=10):
    """Wait until the sandbox holds no process but its init (PID 1) and this one: killed
    processes end a moment later and count against the process limit until then."""
    deadline, alone = time.monotonic() + seconds, {"1", str(os.getpid())}
    while time.monotonic() < deadline and set(filter(str.isdigit, os.listdir("/proc"))) - alone:
        time.sleep(0.01)


def _empty(scratch, sandboxed, keep):
    """Remove every file the group wrote (in the sandbox: all of /tmp and /dev/shm), so that
    nothing of it reaches the next group; recreate home and work."""
    for folder in [scratch] + (["/dev/shm"] if sandboxed else []):
        _wipe(folder, keep)
    for folder in ("home", "work"):
        os.makedirs(os.path.join(scratch, folder), exist_ok=True)
    os.chdir(os.path.join(scratch, "work"))


def _wipe(folder, keep):
    """Remove everything in ``folder`` but the paths ``keep`` and the folders above them."""
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        path = os.path.join(folder, name)
        if any(kept == path or kept.startswith(path + "/") for kept in keep):
            if path not in keep:
                _wipe(path, keep)
        elif os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def _become(uid):
    """In a sandbox started by root, become ``uid`` (and its group), a user of this sandbox
    alone, whose processes the kernel counts (it never counts root's); every capability goes
    with root. Nothing to do elsewhere."""
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def _new_session_keyring(keyctl):
    """Join a new anonymous session keyring (system call number ``keyctl``), leaving the
    grader's; the seccomp filter denies every other keyring call. Raises OSError if the
    kernel refuses: then no submission runs."""
    if keyctl is None:
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(keyctl, KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot join a new session keyring: {os.strerror(err)}")


def _limit_resources(limits):
    """Set the limits (not the process count of root, which the kernel ignores: only with
    --unsafe, where the grader kills the session at the end)."""
    for name, value in limits.items():
        if name == "RLIMIT_NPROC" and os.getuid() == 0:
            continue
        resource.setrlimit(getattr(resource, name), (value, value))


def _shell():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance(colors="NoColor", history_length=0)
    shell.history_manager.enabled = False
    return shell


class _Stop(Exception):
    """The time of the cells is up."""


def _alarm(signum, frame):
    raise _Stop("time limit reached")


def _run_cells(shell, request, send):
    """Run the cells until the time limit; the note on what stopped them, or None."""
    from IPython.utils.capture import capture_output

    room = request["max_output"]
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, request["timeout"], 0.5)  # and again until it stops
    try:
        for number, source in request["cells"]:
            with capture_output() as captured:
                result = shell.run_cell(source, store_history=False, silent=False)
            texts = [captured.stdout, captured.stderr] + [
                output.data.get("text/plain", "") for output in captured.outputs]
            text = "".join(str(part) for part in texts)
            send({"cell": number, "text": text[:max(room, 0)], "error": _error(result)})
            room -= len(text)
            if isinstance(result.error_in_exec, _Stop):
                return f"time limit of {request['timeout']:g} s reached in cell {number}; " \
                       "later cells did not run"
    except _Stop:
        return "time limit reached between cells"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return None


def _error(result):
    err = result.error_before_exec or result.error_in_exec
    return None if err is None else _raised(err)


def _raised(err):
    text = str(err)
    text = text if len(text) <= SHOWN else text[:SHOWN] + " ..."
    return f"{type(err).__name__}" + (f": {text}" if text else "")


def _run_cases(user_ns, phase, send):
    """Run each case's examples on the question's own copy of the namespace."""
    namespaces = {}
    for case in phase["cases"]:
        env = namespaces.setdefault(case["question"], dict(user_ns))
        send(dict(_run_case(case, env, phase["case_timeout"]), case=case["id"]))


def _run_case(case, env, seconds):
    _seed(case["id"])
    values, wants = [], []
    for index, (source, want) in enumerate(case["examples"]):
        try:
            with _time_limit(seconds):
                value = _evaluate(source, env)
                if want is not None:
                    values.append(encode(value))
                    if isinstance(want, str):  # releasing a master: its expected value too
                        wants.append(encode(eval(want, env)))
        except BaseException as err:  # noqa: B036 - a case must not end the run
            return {"values": values, "wants": wants, "raised": _raised(err), "at": index}
    return {"values": values, "wants": wants, "raised": None, "at": None}


def _seed(number):
    """The same random inputs in the master's run and in every submission's."""
    random.seed(number)
    for name in ("numpy", "mxnet"):
        module = sys.modules.get(name)
        if module is not None:
            module.random.seed(number)


def _evaluate(source, env):
    try:
        code = compile(source, "<test case>", "eval")
    except SyntaxError:
        exec(compile(source, "<test case>", "exec"), env)
        return None
    return eval(code, env)


class _time_limit:
    """Raise TimeoutError in the block after ``seconds``."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        if self.seconds is None or not hasattr(signal, "setitimer") \
                or threading.current_thread() is not threading.main_thread():
            self.seconds = None  # no limit: Windows, or check() called from a thread
            return
        signal.signal(signal.SIGALRM, self._stop)
        signal.setitimer(signal.ITIMER_REAL, self.seconds, 0.5)

    def __exit__(self, *exc):
        if self.seconds is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _stop(self, signum, frame):
        raise TimeoutError(f"took longer than {self.seconds:g} s")


if __name__ == "__main__":
    main()
