"""What a student calls: ``register`` (run by a released notebook's hidden tests cell) and
``check``, which runs a question's public cases in the notebook itself and prints a report."""
import sys
import textwrap
from dataclasses import replace

from .forbid.names import forbidden_uses
from .limits import CHECK_CASE_SECONDS
from .master.cases import cases_of, format_report, judge, run_test, scores

TIMED_OUT = "TimeoutError: took longer than"  # how a result says its case ran out of time

_TESTS = {}


def register(tests):
    """Make the OK-format ``tests`` (a list of dicts with "name" and "suites") checkable."""
    if not isinstance(tests, list) or not all(
            isinstance(test, dict) and isinstance(test.get("name"), str)
            and isinstance(test.get("suites"), list) for test in tests):
        raise TypeError("tests must be a list of OK-format dicts with 'name' and 'suites', "
                        f"got {tests!r:.200}")
    _TESTS.update((test["name"], test) for test in tests)


def check(question, env=None):
    """Run the public cases of ``question`` in ``env`` (default: the caller's globals, i.e. the
    notebook) and print a verdict per case, with expected and received values on failures;
    each example has ``CHECK_CASE_SECONDS`` (60 s), and the first case out of time ends the
    question's check (:func:`public_results`)."""
    if not isinstance(question, str):
        raise TypeError(f"question must be a str such as 'q1_softmax', got {question!r}")
    if question not in _TESTS:
        raise ValueError(f"question must be one of {sorted(_TESTS)} (run the notebook's tests "
                         f"cell first), got {question!r}")
    if env is None:
        env = sys._getframe(1).f_globals
    elif not isinstance(env, dict):
        raise TypeError(f"env must be a dict of names, got {type(env).__name__}")
    test = _TESTS[question]
    try:
        results = public_results(test, env, CHECK_CASE_SECONDS)
    except KeyboardInterrupt:
        print(f"{question}: check stopped (interrupted); run the cell again to check")
        return
    print(format_report(question, results) + "\n(hidden cases, if any, run when grading)"
          + forbidden_note(question, test.get("forbid") or [], env))


def public_results(test, env, seconds):
    """The results of ``test``'s public cases, each run in a fresh copy of ``env`` with each
    example under ``seconds``; after the first case that runs out of time the others are
    not run (an endless loop in an answer would take their time too) and say so."""
    results, stopped = [], False
    for case in cases_of(test, False):
        if stopped:
            result = replace(judge(case["code"], None, []), received=f"not run: an earlier "
                             f"case took longer than {seconds:g} s")
        else:
            result, = run_test(dict(test, suites=[{"cases": [case]}]), env, False, seconds)
            stopped = TIMED_OUT in result.received
        results.append(replace(result, hidden=False, format=not scores(case)))
    return results


def forbidden_note(question, forbid, env):
    """A warning if the cells run so far (IPython's ``In`` list in ``env``) name an object
    that ``question`` forbids, saying how grading treats it; '' otherwise."""
    inputs = env.get("In")
    if not forbid or not isinstance(inputs, list):
        return ""
    uses = forbidden_uses([(number, text) for number, text in enumerate(inputs)
                           if isinstance(text, str) and text], forbid)
    if not uses:
        return ""
    where = ", ".join(use.replace("(code cell ", "(In [").replace(", line", "], line")
                      for use in uses[:5])
    return "\n" + textwrap.fill(
        f"Note: this notebook uses {where}, which {question} forbids. When graded, "
            f"{question} scores 0 if its own cell names a forbidden object, and in "
            f"{question}'s tests every forbidden object (and the package code built on it) "
            "raises PermissionError wherever it is called from. Other cells may use it for "
            "your own checks, but your answer must not depend on it.", width=92)
