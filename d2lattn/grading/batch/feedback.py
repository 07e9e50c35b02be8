"""A student's feedback file: the score, the cells that raised an error, then each question's
points, reason and cases, everything a submission produced inside code blocks it cannot
close."""
import re

from ..master.cases import format_report
from ..master.values import one_line


def feedback(assignment, student, rows, results, executed):
    """A student's feedback (markdown): the total, the cells that raised an error, then per
    question its points, the reason and its cases: public ones with expected and received
    values, hidden ones by their message only. Everything a submission's code produced is
    shown inside code blocks that it cannot close."""
    lines = [f"# {assignment}: {student}", "", f"Score: {total(rows)} points.", ""]
    ran = [cell["metadata"]["d2lattn"] for cell in (executed["cells"] if executed else [])]
    errors = [f"code cell {meta['cell']}{_answering(meta)}: {one_line(meta['error'], 200)}"
              for meta in ran if meta["error"]]
    if errors:
        lines += ["Cells that raised an error:", ""] + code_block(errors) + [""]
    for row in rows:
        lines += [f"## {row.question}: {row.points:g} of {row.max:g} points", ""]
        lines += code_block([one_line(row.reason, None)]) + [""]
        if row.question in results:
            lines += code_block(format_report(row.question, results[row.question])
                                .splitlines()) + [""]
    return "\n".join(lines)


def code_block(lines):
    """Markdown lines of a fenced code block holding ``lines``: its fence is longer than any
    run of backticks in them, so nothing inside can end it."""
    runs = [len(run) for line in lines for run in re.findall(r"`+", line)]
    fence = "`" * max([3] + [n + 1 for n in runs])
    return [fence + "text"] + list(lines) + [fence]


def _answering(meta):
    """' (the answer to q2_nw)' for a question's cell, else ''."""
    return f" (the answer to {meta['question']})" if meta.get("question") else ""


def total(rows):
    """E.g. '3 of 6': the points of ``rows`` out of their maximum."""
    return f"{sum(row.points for row in rows):g} of {sum(row.max for row in rows):g}"
