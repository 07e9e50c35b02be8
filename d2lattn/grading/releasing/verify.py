"""Release, step 2: the master run in the sandbox, beside its cases: their expected values
and calls made; verdicts and forms refused; trivial answers graded and refused if any
passes; then the master graded as a submission (full marks) and the student notebook (0)."""
import copy
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

from .. import limits
from ..forbid.shadow import Shadows
from ..master import calls, cases
from ..master.notebook import cell_source, question_header, runnable_cells
from ..master.variant import with_params
from ..one_notebook import grade_notebook
from ..sandbox.session import run_submission
from . import stubs


def expected_values(nb, tests, unsafe=False, salt=0):
    """``tests`` with each case's ``expected`` plain values and its ``call`` (what a
    submission's sandbox receives of it, see :mod:`d2lattn.grading.master.calls`), from one run of
    the master ``nb`` (nothing stubbed) in which each case's setup runs, its inputs are made
    and pickled, and each expected expression is evaluated after its example; every case
    seeded with the variant's ``salt`` (0 without variants).

    Then grades the trivial answers of :mod:`d2lattn.grading.releasing.stubs` on every case. Raises
    ValueError if a case cannot be turned into data, if the master fails a case, if a scored
    case expects a verdict (a bool: return the values instead) or checks a form (a type, a
    shape, a context) without being marked ``format:``, or if a trivial answer passes a
    scored case.
    """
    cells = [cell[:2] for cell in runnable_cells(nb)]
    answers = calls.answer_names([cell_source(cell) for cell in nb["cells"]
                                  if question_header(cell)])
    plans, phase = {}, []
    for test, case_id, case in cases.numbered(tests):
        examples = [(e.source, e.want or None) for e in cases.parse_case(case["code"])[1]]
        try:
            plans[case_id] = calls.plan(examples, answers)
        except calls.CaseError as err:
            raise ValueError(f"{test['name']}, case {cases.number_in(test, case)}: {err}") \
                from None
        phase.append(cases.plan_request(case_id, test["name"], plans[case_id], salt))
    with tempfile.TemporaryDirectory() as tmp:
        group, = run_submission(cells, [(Shadows(tmp)(()), [phase])], **limits.RELEASE,
                                unsafe=unsafe)
    errors = [f"code cell {n}: {o.error}" for n, o in group.outputs.items() if o.error]
    errors += [text for _, text in group.notes]
    failed = []
    for test, case_id, case in cases.numbered(tests):
        record = group.results.get(case_id)
        result = cases.judge(case["code"], record, record.wants if record else [])
        if record is not None and (record.raised or "").startswith("PicklingError"):
            failed.append(f"{test['name']}, case {cases.number_in(test, case)} cannot be "
                          f"turned into data for the sandbox: {record.raised}")
        elif not result.passed:
            failed.append(f"{test['name']}, case {cases.number_in(test, case)}: "
                          f"{result.received}")
        else:
            case["expected"] = record.wants
            case["call"] = cases.call_of(plans[case_id], record, salt)
    if errors or failed:
        raise ValueError(f"the master does not pass its own tests: {errors + failed}")
    _refuse_verdicts(tests)
    passed = trivial_answers(nb, tests, cells, unsafe)
    if passed:
        raise ValueError("trivial answers pass scored cases: " + str(
            [f"{name}, case {number}: {label}" for name, number, label in passed][:20]))
    return tests


def variant_values(nb, tests, params, salt, unsafe=False):
    """:func:`expected_values` of one variant: the master ``nb`` run with its variant cell
    stating ``params``, its cases seeded with ``salt``; ``tests`` (as split, without expected
    values) are left as they are. Raises ValueError, naming the variant's parameters, where
    the master fails a case or a trivial answer passes one on this variant."""
    try:
        return expected_values(with_params(nb, params), copy.deepcopy(tests), unsafe, salt)
    except ValueError as err:
        raise ValueError(f"the variant {params}: {err}") from None


def _refuse_verdicts(tests):
    """Raise ValueError for scored cases that expect a verdict or a form (see
    :func:`d2lattn.grading.master.cases.verdict`)."""
    verdicts = [f"{test['name']}, case {number}" for test in tests
                for number, case in enumerate(cases.cases_of(test, True), 1)
                if cases.scores(case) and cases.verdict(case)]
    if verdicts:
        raise ValueError(f"scored cases whose expected value is a verdict (a bool) or a form "
                         f"(a type, dtype, context or shape; mark it 'format:' or compare "
                         f"values instead): {verdicts}")


def trivial_answers(nb, tests, cells, unsafe=False):
    """``[(question, case number, trivial answer)]``: the scored cases of ``tests`` (expected
    values and calls made) that a trivial answer of :func:`d2lattn.grading.releasing.stubs.variants`
    passes. Each is graded as a submission's case is, in a fresh copy of the master's
    namespace in which the trivial answer's cell ran first; two sandboxes share them."""
    sources = {header[0]: cell_source(cell) for cell in nb["cells"]
               for header in [question_header(cell)] if header}
    phase, meta = [], {}
    case_id = sum(len(cases.cases_of(test, True)) for test in tests)
    for test in tests:
        replays = [value for case in cases.cases_of(test, False) for value in case["expected"]]
        for label, stub in stubs.variants(sources[test["name"]], replays):
            for case in cases.cases_of(test, True):
                if cases.scores(case):
                    phase.append(dict(cases.call_request(case_id, test["name"], case),
                                      prelude=stub))
                    meta[case_id] = (test, case, label)
                    case_id += 1
    if not phase:
        return []
    jobs = min(2, os.cpu_count() or 1)  # the stubs are many: two sandboxes share them
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(jobs) as pool:
        package = Shadows(tmp)(())
        parts = [phase[start::jobs] for start in range(jobs)]
        runs = list(pool.map(lambda part: run_submission(
            cells, [(package, [part])], **limits.RELEASE, unsafe=unsafe)[0], parts))
    records = {key: value for run in runs for key, value in run.results.items()}
    notes = [text for run in runs for _, text in run.notes]
    passed = []
    for case_id, (test, case, label) in meta.items():
        record = records.get(case_id)
        if record is None:
            raise ValueError(f"{test['name']}: the trivial answer that {label} could not be "
                             f"graded: {notes}")
        if cases.judge(case["code"], cases.in_case(case, record), case["expected"]).passed:
            passed.append((test["name"], cases.number_in(test, case), label))
    return passed


def self_check(assignment, master, student, tests, unsafe=False):
    """Raise ValueError unless ``master`` scores full marks and ``student`` 0, both graded as
    submissions. The student notebook runs once with nothing stubbed (stubs could only lower
    its score); the master runs with every forbidden object of the notebook stubbed at once,
    and only if that costs it a point, once per set of forbidden names, as grading runs it."""
    union = tuple(sorted({name for test in tests for name in test["forbid"]}))
    with tempfile.TemporaryDirectory() as tmp:
        shadows = Shadows(tmp)
        runs = (("student notebook", student, False, lambda forbid: shadows(())),
                ("master", master, True, lambda forbid: shadows(union)),
                ("master", master, True, shadows))
        for name, nb, full, packages in runs:
            scores, *_ = grade_notebook(nb, tests, limits.RELEASE, packages, unsafe)
            wrong = [f"{q}: {p:g} of {m:g} ({reason})" for q, p, m, reason in scores
                     if p != (m if full else 0)]
            if not wrong and full:
                return
            if wrong and (not full or packages is shadows):
                raise ValueError(f"{assignment}: the {name} should score "
                                 f"{'full marks' if full else '0'}, got {wrong}")
