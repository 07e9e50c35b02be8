"""d2lattn.grading.master.calls: a case split into the steps that run beside the master only and the
calls a submission's sandbox receives, with every part that does not touch the answer made
into an input at release."""
import doctest

import pytest

from d2lattn.grading.master import calls

ANSWERS = {"softmax", "nw", "answer_q4"}


def examples(code):
    return [(e.source, e.want or None) for e in doctest.DocTestParser().get_examples(code)]


def test_answer_names_are_what_question_cells_define():
    sources = ["def f(x):\n    y = 1\n    return y\nclass C:\n    pass\nimport numpy as np\n",
               "answer_q4 = 3  # SOLUTION\nanswer_a, (answer_b, answer_c) = 1, (2, 3)\n"]
    assert calls.answer_names(sources) == {"f", "C", "answer_q4", "answer_a", "answer_b",
                                           "answer_c"}  # not y (local), not np (an import)


def test_setup_runs_beside_the_master_and_the_call_gets_inputs_and_scope():
    plan = calls.plan(examples(
        ">>> X = np.random.normal(size=(3, 5))\n"
        ">>> def reference(X):\n...     return X\n"
        ">>> softmax(X * 2, axis=-1)[:, 1]\n"
        "reference(X)\n"
        ">>> softmax(X)\n"
        "reference(X)\n"), ANSWERS)
    setup, helper, first, later = plan.steps
    assert (setup.call, helper.call) == (None, None)  # beside the master only
    assert first.call == "softmax(__in0, axis=-1)[:, 1]" and first.inputs == [("__in0",
                                                                                "X * 2")]
    assert later.call == "softmax(X)" and later.inputs == []  # X may have changed: by name
    assert plan.scope == ["X"]  # its value is sent, never the code that made it
    assert "reference" not in str([(s.call, s.inputs) for s in plan.steps] + plan.scope)


def test_a_setup_value_inside_an_input_of_the_first_call_is_never_sent():
    """``double(logits / 2)`` expecting ``logits``: the sandbox gets ``logits / 2`` only."""
    plan = calls.plan(examples(">>> logits = f(2)\n>>> softmax(logits / 2)\nlogits\n"),
                      ANSWERS)
    assert plan.steps[1].call == "softmax(__in0)" and plan.scope == []


def test_every_part_that_names_no_answer_becomes_an_input():
    plan = calls.plan(examples(
        ">>> [a.ctx for a in nw(np.array([0.0, 1.0], ctx=mx.cpu(1)), xs)], float(answer_q4)\n"
        "[1]\n"), ANSWERS)
    step, = plan.steps
    assert step.call == ("([a.ctx for a in nw(__in0([0.0, 1.0], ctx=__in1(1)), __in2)], "
                         "__in3(answer_q4))")  # in a comprehension: references only
    assert step.inputs == [("__in0", "np.array"), ("__in1", "mx.cpu"), ("__in2", "xs"),
                           ("__in3", "float")]
    assert plan.scope == []


def test_lambdas_loops_and_helpers_that_drive_the_answer_are_sent_with_their_inputs():
    plan = calls.plan(examples(
        ">>> rng = random.Random(2)\n"
        ">>> def counts(n):\n...     seen = [softmax(rng.random()) for _ in range(n)]\n"
        "...     return len(seen)\n"
        ">>> with autograd.record(): y = nw(lambda x: softmax(x + offset), X0)\n"
        ">>> counts(3), f'{y:.2f}'\n"
        "(3, '1.00')\n"), ANSWERS)
    _, helper, record, check = plan.steps
    assert helper.call == ("def counts(n):\n    seen = [softmax(rng.random()) for _ in "
                           "__in0(n)]\n    return __in1(seen)")  # called each time, by name
    assert helper.inputs == [("__in0", "range"), ("__in1", "len")]
    assert record.call == "with __in2():\n    y = nw(lambda x: softmax(x + __in3), __in4)"
    assert record.inputs == [("__in2", "autograd.record"), ("__in3", "offset"),
                             ("__in4", "X0")]
    assert check.call == "(counts(3), f'{y:.2f}')" and plan.scope == ["rng"]


@pytest.mark.parametrize("code, error", [
    (">>> 2 + 2\n4\n>>> softmax(1)\n1\n", "example 1 checks a value before any example calls"),
    (">>> X = 1\n>>> X\n1\n", "checks a value before any example"),
    (">>> X = 1\n", "no example calls the answer"),
    (">>> softmax(1)\n>>> def reference(x):\n...     return x\n>>> reference(2)\n2\n",
     "example 2 defines reference, which does not use the answer"),
    (">>> y = softmax(1)\n>>> (z := y)\n1\n", "example 2 cannot be sent to the sandbox"),
    (">>> softmax(1,\n1\n", "example 1 is not Python"),
])
def test_cases_that_cannot_become_data_are_refused_by_name(code, error):
    with pytest.raises(calls.CaseError, match=error):
        calls.plan(examples(code), ANSWERS)
