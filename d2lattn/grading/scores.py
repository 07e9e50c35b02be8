"""A question's score and reason from its cases' results: points times the share of scored
cases passed (format checks earn nothing), 0 for a missing cell or a forbidden name; the
reason names failed cases by their message, never their code."""
from .forbid.names import forbidden_message
from .master.cases import case_label, format_tally, tally


def score(test, present, uses, outcome, notes):
    """``(question, points, max, reason)`` of one question."""
    name, points = test["name"], test["points"]
    if not present:
        return name, 0, points, "question cell missing"
    if uses:
        return name, 0, points, f"uses {', '.join(uses)}, which this question forbids"
    scored = [case for case in outcome if not case.format]
    passed = sum(case.passed for case in scored)
    raised = [case.raised or "" for case in outcome]  # public cases only
    called = [name for name in sorted(test["forbid"])  # named by the bundle, not the sandbox
              if f"PermissionError: {forbidden_message(name)}" in raised]
    extra = [f"called {', '.join(called)}, which this question forbids"] if called else []
    reason = "; ".join([_verdict(outcome)] + extra + notes)
    return name, round(points * passed / max(len(scored), 1), 2), points, reason


def _verdict(outcome):
    """E.g. '2 of 4 cases passed; failed: public case 2 (rows sum to 1), hidden case 1 (large
    scores do not overflow)': cases are named by their message, never by their code, and
    counted as the feedback counts them (format checks apart)."""
    failed, counts = [], {False: 0, True: 0}
    for case in outcome:
        counts[case.hidden] += 1
        if not case.passed:
            about = f" ({case.message})" if case.message else ""
            failed.append(f"{case_label(case, counts[case.hidden])}{about}")
    verdict = f"{tally(outcome)} cases passed{format_tally(outcome)}"
    return verdict + (f"; failed: {', '.join(failed)}" if failed else "")
