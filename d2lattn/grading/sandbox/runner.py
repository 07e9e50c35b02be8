"""The grader code that runs next to a submission's code.

The prepared process (:mod:`d2lattn.grading.sandbox.zygote`) forks a runner into a fresh
sandbox for each group of questions (the questions that forbid the same objects); with
``--unsafe`` it is ``python -c <this file's source>``. The grader talks to it in JSON lines:

1. ``{"limits", "uid", "nice", "compat", "package", "scratch"}``: the runner takes its user
   and limits, writes the group's copy of d2lattn (``{relative path: base64}``) and imports
   what the notebook needs before any submission code runs;
2. ``{"cells", "timeout", "max_output"}``: it runs the code cells in IPython and sends each
   cell's text output and error line, then ``{"cells_done": note}``;
3. one line per case, ``{"case", "case_timeout"}``, the next only once the record of the
   one before is in: it sends the plain values (:func:`encode`) the case's checked steps
   returned. So no other case (its calls, inputs or scope) is in the sandbox while one runs:
   not the rest of its phase, not the cases of a phase to come.

A case it receives is data (see :mod:`d2lattn.grading.master.calls`): the call of each step (the
answer's names applied to inputs), the inputs as values and the case's scope, both pickled by
the master's run at release. It never receives a case's source, a helper, an expected value
or another group's anything, and it decides nothing. At release the same runner, running the
*master*, receives the case's whole plan, runs the setup steps, and sends back the inputs
and scope it made (:func:`plan_case`) with the master's values and expected values.
Standard library only, so it needs neither d2lattn nor numpy. How a step is seeded, timed,
evaluated and its value encoded is :mod:`d2lattn.grading.master.steps`, whose source the
grader sends ahead of this one's (:data:`d2lattn.grading.sandbox.bwrap.RUNNER`).
"""
import base64
import contextlib
import importlib
import io
import json
import os
import pickle
import resource
import signal
import sys
import types

if __package__:  # in the grader; in a sandbox, the source of steps.py comes before this one
    from ..master.steps import encode, evaluate, raised_text, seed, time_limit

INPUTS = "_d2lattn_inputs"  # the module that rebuilds pickled MXNet arrays in both runners


# --- inputs: pickled by the master's run, unpickled only inside a sandbox -----------------

def _rebuild_array(data, context, legacy, grad):
    """An MXNet array of the NumPy ``data`` on the context named ``context`` ('cpu(1)'), with
    a gradient buffer attached if ``grad``."""
    import mxnet

    kind, number = context.rstrip(")").split("(")
    ctx = mxnet.Context(kind, int(number))
    array = (mxnet.nd if legacy else mxnet.np).array(data, ctx=ctx, dtype=data.dtype)
    if grad:
        array.attach_grad()
    return array


class _Pickler(pickle.Pickler):
    """Pickle inputs as values: an MXNet array as its data, context and whether it records a
    gradient; a module, function or class only by its importable name, never one a notebook
    or a case defined."""

    def reducer_override(self, obj):
        module = getattr(type(obj), "__module__", "") or ""
        if module.startswith("mxnet") and hasattr(obj, "asnumpy") and hasattr(obj, "ctx"):
            return _rebuild_array, (obj.asnumpy(), str(obj.ctx),
                                    not module.startswith("mxnet.numpy"),
                                    getattr(obj, "grad", None) is not None)
        if isinstance(obj, types.ModuleType) and sys.modules.get(obj.__name__) is obj \
                and obj.__name__ != "__main__":
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, (type, types.FunctionType)) and \
                getattr(obj, "__module__", "__main__") == "__main__":
            raise pickle.PicklingError(f"{getattr(obj, '__qualname__', obj)!r} is defined in "
                                       "the notebook or the case, not importable: it is code, "
                                       "not data")
        return NotImplemented


def dumps(value):
    """``value`` pickled as text (base64), or PicklingError saying what is not data."""
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, protocol=4).dump(value)
    except pickle.PicklingError:
        raise
    except Exception as err:  # noqa: BLE001 - an object pickle cannot take
        raise pickle.PicklingError(f"{type(err).__name__}: {err}") from None
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def loads(text):
    """The value of :func:`dumps`' text."""
    return pickle.loads(base64.b64decode(text))


def _register_inputs_module():
    """Make :func:`_rebuild_array` importable by one name in every runner, whatever
    ``__main__`` becomes once IPython starts."""
    module = sys.modules.setdefault(INPUTS, types.ModuleType(INPUTS))
    _rebuild_array.__module__ = INPUTS
    module._rebuild_array = _rebuild_array


# --- the protocol ---------------------------------------------------------------------------

def main(confine=None):
    """Serve one group of one submission on stdin/stdout (see the module docstring).
    ``confine(uid)``, called before any submission code runs, becomes the user ``uid`` and
    takes away what the sandbox forbids (the prepared process's :func:`zygote.confine`);
    by default only :func:`become`."""
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    inbox = os.fdopen(os.dup(0), "r", encoding="utf-8")
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the submission reads nothing and writes nowhere but its outputs
        os.dup2(quiet, fd)

    def send(record):
        channel.write(json.dumps(record) + "\n")
        channel.flush()

    start = json.loads(inbox.readline())
    lower_priority(start["nice"])
    (confine or become)(start["uid"])
    _limit_resources(start["limits"])
    _install(start["package"], start["scratch"])
    _register_inputs_module()
    preload(start.get("compat"))
    shell = _shell()
    _not_dumpable()
    request = json.loads(inbox.readline())
    send({"cells_done": _run_cells(shell, request, send)})
    del request
    for line in inbox:  # one case a message, sent once the previous one's record is in
        _run_case(shell.user_ns, json.loads(line), send)


def _install(package, scratch):
    """Write the group's d2lattn (``{relative path: base64 of the file}``) to scratch/pkg,
    which is on PYTHONPATH; make home and work, and work in work."""
    root = os.path.join(scratch, "pkg")
    for path, data in package.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "wb") as file:
            file.write(base64.b64decode(data))
    for folder in ("home", "work"):
        os.makedirs(os.path.join(scratch, folder), exist_ok=True)
    os.chdir(os.path.join(scratch, "work"))
    importlib.invalidate_caches()


def _not_dumpable():
    """No other process of the sandbox may trace this one or read its memory."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def preload(compat):
    """Import what every run needs before any submission code runs: NumPy, MXNet (after
    d2lattn's compatibility shim), matplotlib."""
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
    except Exception:  # noqa: BLE001 - the cells import them again and report errors
        pass


def become(uid):
    """In a sandbox started by root, become ``uid`` (and its group), a user of this sandbox
    alone, whose processes the kernel counts (it never counts root's); every capability goes
    with root. Nothing to do elsewhere."""
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def lower_priority(nice):
    """Run at the grader's ``nice``, the whole sandbox too: its processes share one session
    (the filter denies ``setsid``), so one scheduler autogroup, set to that nice value."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, max(nice, os.getpriority(os.PRIO_PROCESS, 0)))
        with open("/proc/self/autogroup", "w") as group:
            group.write(str(nice))
    except OSError:
        pass  # no autogroups in this kernel: the sandbox is one process group at that nice


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
    """Run the cells until the time limit; the note on what stopped them, or None. Their
    output is captured only while there is room to send it (none from a group whose output
    another group sends)."""
    from IPython.utils.capture import capture_output

    room = request["max_output"]
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, request["timeout"], 0.5)  # and again until it stops
    try:
        for number, source in request["cells"]:
            with capture_output() if room > 0 else contextlib.nullcontext() as captured:
                result = shell.run_cell(source, store_history=False, silent=False)
            texts = [] if captured is None else [captured.stdout, captured.stderr] + [
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
    if isinstance(err, _Stop):
        return "stopped: the notebook's time limit was reached"
    return None if err is None else raised_text(err)


def _run_case(user_ns, request, send):
    """Run one case on a fresh copy of the notebook's namespace: its calls (grading) or, for a
    master at release, its whole plan. No other case is in this process meanwhile: the grader
    sends the next one only once this one's record is in."""
    case = request["case"]
    run = plan_case if "plan" in case else run_call
    send(dict(run(case, dict(user_ns), request["case_timeout"]), case=case["id"]))


def run_call(case, env, seconds):
    """The values of one case's checked steps: ``{"values", "raised", "at"}``, ``at`` the
    index (among the steps received) of the step that raised. ``case``: ``{"id", "scope",
    "steps": [{"call", "inputs", "want"}]}`` and, at release only, ``"prelude"``: the source
    of a trivial answer run first."""
    values = []
    if case.get("prelude"):
        exec(compile(case["prelude"], "<trivial answer>", "exec"), env)
    if case.get("scope"):
        env.update(loads(case["scope"]))
    for index, step in enumerate(case["steps"]):
        try:
            env.update(loads(step["inputs"]) if step["inputs"] else {})
            seed(case["id"], index, case.get("salt", 0))
            with time_limit(seconds):
                value = evaluate(step["call"], env)
                if step["want"]:
                    values.append(encode(value))
        except BaseException as err:  # noqa: B036 - a case must not end the run
            return {"values": values, "raised": raised_text(err), "at": index}
    return {"values": values, "raised": None, "at": None}


def plan_case(case, env, seconds):
    """Run a case of the master at release: its setup steps, then each step that is sent to
    a sandbox, whose inputs and scope it pickles first. ``{"values", "wants", "raised", "at",
    "scope", "inputs"}``: the master's values, the expected ones, the pickled scope and the
    pickled inputs of each step (None for a setup step); ``at`` as in :func:`run_call`,
    counted over all steps."""
    values, wants, inputs, scope, sent = [], [], [], None, 0
    seed(case["id"], None, case.get("salt", 0))
    for index, step in enumerate(case["plan"]):
        try:
            with time_limit(seconds):
                if step["call"] is None:
                    evaluate(step["source"], env)
                    inputs.append(None)
                    continue
                if scope is None:
                    scope = dumps({name: env[name] for name in case["scope"]})
                made = {name: eval(text, env) for name, text in step["inputs"]}
                inputs.append(dumps(made) if made else None)
                env.update(made)
                seed(case["id"], sent, case.get("salt", 0))
                sent += 1
                value = evaluate(step["call"], env)
                if step["want"] is not None:
                    values.append(encode(value))
                    wants.append(encode(eval(step["want"], env)))
        except BaseException as err:  # noqa: B036 - a case must not end the run
            return {"values": values, "wants": wants, "raised": raised_text(err), "at": index,
                    "scope": scope, "inputs": inputs}
    return {"values": values, "wants": wants, "raised": None, "at": None, "scope": scope,
            "inputs": inputs}


if __name__ == "__main__":
    main()
