"""One step of a case, as the sandbox's runner and ``check()`` both run it: seeded, under a
time limit, its value encoded as plain JSON data and an error as one line. Standard library
only (NumPy and MXNet are read only if loaded): the grader sends this file's source to each
sandbox ahead of the runner's (:mod:`d2lattn.grading.sandbox.runner`)."""
import json
import random
import signal
import sys
import threading

MAX_ITEMS = 200_000  # numbers in one value
MAX_TEXT = 10_000  # characters of one string or repr
SHOWN = 300  # characters of an error message


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


def raised_text(err):
    """'ValueError: the message' of an exception, its message cut to SHOWN characters."""
    text = str(err)
    text = text if len(text) <= SHOWN else text[:SHOWN] + " ..."
    return f"{type(err).__name__}" + (f": {text}" if text else "")


def seed(case, step, salt=0):
    """Seed ``random``, NumPy and MXNet for one step of a case, the same in the master's run
    and in every submission's (``step`` None: the case's setup); ``salt``: the variant's, so
    that each variant's random inputs differ (0 without variants)."""
    number = (salt + case * 1009 + (0 if step is None else step + 1)) % (1 << 32)
    random.seed(number)
    for name in ("numpy", "mxnet"):
        module = sys.modules.get(name)
        if module is not None:
            module.random.seed(number)


def evaluate(source, env):
    """The value of an expression ``source`` in ``env``; a statement is run (None)."""
    try:
        code = compile(source, "<test case>", "eval")
    except SyntaxError:
        exec(compile(source, "<test case>", "exec"), env)
        return None
    return eval(code, env)


class time_limit:
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
