"""Test cases in a doctest-like format: parse them, run them in a namespace, report on them.

A test is an otter-grader OK-format dict, one per question::

    {"name": "q1_softmax", "points": 2, "suites": [{"type": "doctest", "cases": [
        {"code": "# equal scores, equal weights\\n>>> softmax(np.zeros(2))\\n[0.5, 0.5]",
         "hidden": False}]}]}

A case's ``code`` holds ``# message`` lines, then doctest examples: ``>>> source`` (``...`` for
continuation lines) and the expected value on the lines after it. An example without an expected
value is a setup step. An example passes when the repr of its value equals the expected text (as
in doctest), or when the expected text, evaluated in the case's namespace, equals the value:
numbers and arrays up to rtol=1e-5 and atol=1e-8 with the same shape, anything else with ``==``.
A case passes when all its examples pass; the report shows its first failing example with the
expected and the received value.

This module imports only the standard library and numpy: the grader runs its source in each
submission's kernel, which must not need d2lattn (see :mod:`d2lattn.grading.kernel`).
"""
import contextlib
import doctest
import re
import signal
import threading

import numpy

MIME = "application/vnd.d2lattn.grading+json"  # the output type the kernel returns results in
RTOL, ATOL = 1e-5, 1e-8
SHOWN = 300  # characters of a value or an error shown in a report


class CaseTimeout(Exception):
    """A case ran longer than its time limit."""


def cases_of(test, hidden):
    """The case dicts of an OK-format ``test``, hidden ones only if ``hidden``."""
    return [case for suite in test["suites"] for case in suite["cases"]
            if hidden or not case.get("hidden", False)]


def parse_case(code):
    """``(message, examples)`` of a case's code: its comment lines joined, its doctest examples."""
    parts = doctest.DocTestParser().parse(code)
    prose = [line.strip().lstrip("#").strip() for part in parts if isinstance(part, str)
             for line in part.splitlines()]
    return " ".join(line for line in prose if line), [p for p in parts if not isinstance(p, str)]


def run_test(test, env, hidden=False, time_limit=None):
    """Run the cases of ``test`` in the namespace ``env`` (a dict, modified by setup steps).

    Returns one dict per case: hidden, passed, message and, for a failed case, source, expected
    and received (text). ``time_limit`` (seconds) bounds each example where signals allow it.
    """
    return [dict(run_case(case["code"], env, time_limit), hidden=case.get("hidden", False))
            for case in cases_of(test, hidden)]


def run_case(code, env, time_limit=None):
    """Run one case's examples in order; stop at the first one that fails."""
    message, examples = parse_case(code)
    for example in examples:
        try:
            with _time_limit(time_limit):
                received = _evaluate(example.source, env)
        except (Exception, SystemExit) as err:
            return _failure(message, example, _raised(err))
        if example.want and not matches(received, example.want, env):
            return _failure(message, example, _show(received))
    return {"passed": True, "message": message}


def matches(received, want, env):
    """True if ``received`` fits the expected text ``want``: same repr, or equal to its value."""
    if " ".join(_show(received, None).split()) == " ".join(want.split()):
        return True
    try:
        expected = eval(want, env)  # the expected value may be any expression, e.g. 1 / 3
    except Exception:
        return False
    return equal(received, expected)


def equal(received, expected):
    """True if two values are equal: numbers and arrays with a tolerance and the same shape,
    other values with ``==`` if they have the same type (so an object that claims to equal
    everything does not pass)."""
    got, want = _numeric(received), _numeric(expected)
    if got is not None and want is not None:
        return got.shape == want.shape and bool(numpy.allclose(got, want, rtol=RTOL, atol=ATOL))
    try:
        return type(received) is type(expected) and bool(received == expected)
    except Exception:
        return False


def format_report(name, results):
    """A short text report: public cases one by one (failures with expected and received),
    hidden cases as a count."""
    public = [r for r in results if not r["hidden"]]
    hidden = [r for r in results if r["hidden"]]
    lines = [f"{name}: {sum(r['passed'] for r in public)} of {len(public)} public cases passed"]
    for number, result in enumerate(public, 1):
        lines += format_case(number, result)
    if hidden:
        lines.append(f"  hidden cases: {sum(r['passed'] for r in hidden)} of {len(hidden)} passed")
    return "\n".join(lines)


def format_case(number, result):
    """The report lines of one public case."""
    verdict = "passed" if result["passed"] else "FAILED"
    lines = [f"  case {number} {verdict}" + (f": {result['message']}" if result["message"] else "")]
    if not result["passed"]:
        source = result["source"].rstrip("\n").replace("\n", "\n      ... ")
        lines += [f"      >>> {source}", f"      expected: {result['expected']}",
                  f"      received: {result['received']}"]
    return lines


def publish_results(tests, nonce, time_limit):
    """In a grading kernel: run every case of ``tests`` (hidden ones too) on the user's namespace,
    each question on its own copy, and display the results as one output of type ``MIME``."""
    from IPython import get_ipython
    from IPython.display import display

    user_ns = get_ipython().user_ns
    results = {test["name"]: run_test(test, dict(user_ns), True, time_limit) for test in tests}
    display({MIME: {"nonce": nonce, "results": results}}, raw=True)


def _evaluate(source, env):
    """The value of ``source`` if it is an expression, else None after executing it."""
    try:
        code = compile(source, "<test case>", "eval")
    except SyntaxError:
        exec(compile(source, "<test case>", "exec"), env)
        return None
    return eval(code, env)


def _failure(message, example, received):
    return {"passed": False, "message": message, "source": example.source,
            "expected": example.want.strip(), "received": received}


def _raised(err):
    """'raised ValueError: message', the message cut to SHOWN characters."""
    text = str(err)
    text = text if len(text) <= SHOWN else text[:SHOWN] + " ..."
    return f"raised {type(err).__name__}" + (f": {text}" if text else "")


def _show(value, limit=SHOWN):
    """repr(value) on one line, cut to ``limit`` characters; never raises."""
    try:
        text = re.sub(r"\s*\n\s*", " ", repr(value))
    except Exception as err:
        text = f"<repr failed: {type(err).__name__}>"
    return text if limit is None or len(text) <= limit else text[:limit] + " ..."


def _numeric(value):
    """``value`` as a float numpy array if it is a number, an array or a nested sequence of
    numbers (mxnet arrays through their ``asnumpy``), else None."""
    if isinstance(value, (str, bytes, dict)) or value is None:
        return None
    if hasattr(value, "asnumpy"):
        value = value.asnumpy()
    try:
        return numpy.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None


@contextlib.contextmanager
def _time_limit(seconds):
    """Raise CaseTimeout in the block after ``seconds`` (on the main thread of a POSIX system;
    elsewhere, or when ``seconds`` is None, no limit)."""
    if seconds is None or not hasattr(signal, "setitimer") \
            or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise CaseTimeout(f"took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
