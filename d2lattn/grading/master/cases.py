"""Test cases in a doctest-like format: parse them, turn them into requests for the runner,
judge the plain values it returns, report on them.

A test is an otter-grader OK-format dict, one per question::

    {"name": "q1_softmax", "points": 2, "suites": [{"type": "doctest", "cases": [
        {"code": "# equal scores, equal weights\\n>>> softmax(np.zeros(2))\\n[0.5, 0.5]",
         "hidden": False, "expected": [<plain value>]}]}]}

A case's ``code`` holds ``# message`` lines, then doctest examples: ``>>> source`` (``...`` for
continuation lines) and the expected value on the lines after it, a Python expression. An
example without an expected value is a setup step. A case whose message starts with
``format:`` checks the form of an answer (a type, a context): it is reported but earns nothing.
A hidden case's message is all that grading shows of it: never its code or its values.
Release evaluates every expected expression once, in the master's namespace, and stores its
plain value (:func:`d2lattn.grading.master.steps.encode`) in the bundle as ``expected``,
beside the case's ``call`` (:mod:`d2lattn.grading.master.calls`): the only part of it a
submission's sandbox receives. Grading compares the submission's plain values with the expected ones
(:func:`d2lattn.grading.master.values.same`).
"""
import ast
import doctest
from dataclasses import replace

from ..protocol import CaseRecord, CaseResult
from . import steps, values


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


def is_format(message):
    """True for a format check (its message starts with ``format:``): it earns no points."""
    return message.lower().startswith("format:")


def scores(case):
    """True for a case that earns points: any case of a bundle but a format check."""
    return not is_format(parse_case(case["code"])[0])


FORMS = {"bool", "type", "dtype", "context"}  # kinds of a verdict or of a form
FORM_CALLS = {"type", "isinstance", "len", "issubclass", "callable", "hasattr"}
FORM_ATTRIBUTES = {"shape", "ctx", "context", "dtype", "ndim", "size", "device"}


def verdict(case):
    """True if a case's expected values hold a bool, a type, a dtype or a context, or one of
    its checked examples only reads a form (``type(x)``, ``x.shape``, ``len(x)``, ...)."""
    def kinds(value):
        yield value.get("t")
        if value.get("t") in ("list", "tuple", "set"):
            for item in value["v"]:
                yield from kinds(item)
        elif value.get("t") == "dict":
            for pair in value["v"]:
                for item in pair:
                    yield from kinds(item)

    if any(FORMS & set(kinds(value)) for value in case.get("expected", [])):
        return True
    return any(_is_form(example.source) for example in parse_case(case["code"])[1]
               if example.want)


def _is_form(source):
    try:
        node = ast.parse(source.strip(), mode="eval").body
    except SyntaxError:
        return False
    parts = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
    return all(isinstance(part, ast.Attribute) and part.attr in FORM_ATTRIBUTES
               or isinstance(part, ast.Call) and isinstance(part.func, ast.Name)
               and part.func.id in FORM_CALLS for part in parts)


def numbered(tests):
    """``(test, case id, case)`` for every case of ``tests``, hidden ones included: cases are
    numbered across the bundle, in order, and the sandbox knows them by that id."""
    case_id = 0
    for test in tests:
        for case in cases_of(test, True):
            yield test, case_id, case
            case_id += 1


def number_in(test, case):
    """The case's number in its question (from 1), as release's errors name it."""
    return next(n for n, c in enumerate(cases_of(test, True), 1) if c is case)


def plan_request(case_id, question, plan, salt=0):
    """The runner's request for one case of the master at release (see
    :func:`d2lattn.grading.sandbox.runner.plan_case`): every step, the inputs to make, the
    scope, the variant's ``salt`` of its seeds."""
    return {"id": case_id, "question": question, "scope": plan.scope, "salt": salt, "plan": [
        {"source": s.source, "want": s.want, "call": s.call, "inputs": s.inputs}
        for s in plan.steps]}


def call_of(plan, record, salt=0):
    """What the bundle keeps of a case for grading: the number of setup steps (``skip``),
    then the pickled ``scope``, the variant's ``salt`` and, per step sent to the sandbox, its
    ``call``, its pickled ``inputs`` and whether its value is checked (``want``)."""
    skip = sum(step.call is None for step in plan.steps)
    return {"skip": skip, "scope": record.scope, "salt": salt, "steps": [
        {"call": step.call, "inputs": inputs, "want": step.want is not None}
        for step, inputs in zip(plan.steps[skip:], record.inputs[skip:])]}


def call_request(case_id, question, case):
    """The runner's request for one case of a submission: its scope and calls (data), never
    its source, its message or its expected values."""
    call = case["call"]
    return {"id": case_id, "question": question, "scope": call["scope"],
            "salt": call.get("salt", 0), "steps": call["steps"]}


def in_case(case, record):
    """A submission's :class:`~d2lattn.grading.protocol.CaseRecord` with ``at`` counted over
    all of the case's examples (the sandbox counts the steps it received), as :func:`judge`
    reads it; None stays None."""
    return None if record is None else record.after(case["call"]["skip"])


def judge(code, record, expected):
    """One case's :class:`~d2lattn.grading.protocol.CaseResult` from the runner's ``record``
    (a :class:`~d2lattn.grading.protocol.CaseRecord`, None if it sent none) and the
    ``expected`` plain values."""
    message, examples = parse_case(code)
    if record is None:
        return _failure(message, examples[0] if examples else None, "no result (the run "
                        "stopped before this case)")
    wanted = 0
    for index, example in enumerate(examples):
        if record.at == index:
            return _failure(message, example, f"raised {values.one_line(record.raised)}")
        if example.want:
            if wanted >= min(len(record.values), len(expected)):
                return _failure(message, example, "no value")
            got = record.values[wanted]
            if not values.same(got, expected[wanted]):
                return _failure(message, example, values.show(got))
            wanted += 1
    return CaseResult(True, message)


def run_test(test, env, hidden=False, time_limit=None):
    """Run the cases of ``test`` as written, each in a fresh copy of the namespace ``env``,
    each expected expression evaluated there too: what ``check()`` does in a student's own
    notebook, where the public cases are there to read."""
    results = []
    for number, case in enumerate(cases_of(test, hidden)):
        record = _run_examples(number, case["code"], dict(env), time_limit)
        results.append(replace(judge(case["code"], record, record.wants),
                               hidden=case.get("hidden", False)))
    return results


def _run_examples(number, code, env, seconds):
    """The :class:`~d2lattn.grading.protocol.CaseRecord` of a case's examples run in ``env``."""
    steps.seed(number, None)
    values, wants = [], []
    for index, example in enumerate(parse_case(code)[1]):
        try:
            with steps.time_limit(seconds):
                value = steps.evaluate(example.source, env)
                if example.want:
                    values.append(steps.encode(value))
                    wants.append(steps.encode(eval(example.want, env)))
        except KeyboardInterrupt:
            raise  # the notebook's Stop button: check() ends now, not at the next case
        except BaseException as err:  # noqa: B036 - a case must not end check()
            return CaseRecord(values, steps.raised_text(err), index, wants)
    return CaseRecord(values, None, None, wants)


def format_report(name, results):
    """A short text report: public cases one by one (failures with expected and received),
    then hidden cases one by one by their message only, never their code or values. Counts
    leave format checks out (they earn nothing), as the grade's reason does, and give them
    apart."""
    public = [r for r in results if not r.hidden]
    hidden = [r for r in results if r.hidden]
    if any(not r.format for r in public):
        lines = [f"{name}: {tally(public)} public cases passed{format_tally(public)}"]
    else:  # its public cases only check the form of the answer; the hidden ones score
        lines = [f"{name}: no public case earns points here{format_tally(public)}"]
    for number, result in enumerate(public, 1):
        lines += format_case(number, result)
    if hidden:
        lines.append(f"  hidden cases: {tally(hidden)} passed{format_tally(hidden)}")
        lines += [_headline(case_label(result, number), result)
                  for number, result in enumerate(hidden, 1)]
    return "\n".join(lines)


def tally(results, form=False):
    """E.g. '1 of 2': the cases of ``results`` passed, format checks only if ``form``."""
    chosen = [r for r in results if r.format is form]
    return f"{sum(r.passed for r in chosen)} of {len(chosen)}"


def format_tally(results):
    """E.g. ' (format checks: 1 of 1)', or '' when ``results`` hold no format check."""
    return f" (format checks: {tally(results, True)})" \
        if any(r.format for r in results) else ""


def case_label(result, number):
    """How every report names a case: 'hidden case 2', 'public format check 1', ..."""
    return ("hidden" if result.hidden else "public") + \
        (" format check " if result.format else " case ") + str(number)


def format_case(number, result):
    """The report lines of one public case."""
    lines = [_headline(case_label(result, number).removeprefix("public "), result)]
    if not result.passed:
        source = result.source.rstrip("\n").replace("\n", "\n      ... ")
        lines += [f"      >>> {source}", f"      expected: {result.expected}",
                  f"      received: {result.received}"]
    return lines


def _headline(label, result):
    """E.g. '  case 2 FAILED: each row is normalised on its own'."""
    verdict = "passed" if result.passed else "FAILED"
    return f"  {label} {verdict}" + (f": {result.message}" if result.message else "")


def _failure(message, example, received):
    return CaseResult(False, message, source=example.source if example else "",
                      expected=example.want.strip() if example and example.want else "",
                      received=received)
