"""Notebooks as JSON, and the markers of the master format (see exercises/README.md).

A question cell is a code cell whose first line is ``# QUESTION <name> [points=<p>]
[forbid=<pkg.name>,...]``; a released notebook also names the question in the cell's metadata
(``{"d2lattn": {"question": <name>}}``), so either survives the other being lost. Solutions sit
between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` lines, or on one line ending ``# SOLUTION``
(``x = 3  # SOLUTION``). A tests cell is a raw cell whose first line is ``# TESTS <name>``: cases
separated by blank lines, public ones first, hidden ones after a ``# HIDDEN`` line.
"""
import json
import re
from pathlib import Path

QUESTION = re.compile(r"#\s*QUESTION\s+(?P<name>[A-Za-z_]\w*)(?P<options>.*)$")
TESTS = re.compile(r"#\s*TESTS\s+(?P<name>[A-Za-z_]\w*)\s*$")
NAMES = r"[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*"
ONE_LINE = re.compile(rf"^(?P<target>\s*{NAMES})\s*=(?!=).*#\s*SOLUTION\s*$")
BEGIN, END, HIDDEN = "# BEGIN SOLUTION", "# END SOLUTION", "# HIDDEN"
STUB = "raise NotImplementedError  # your code here"
REGISTRATION = "#@title Tests for check(): run this cell once, do not edit it"
CHECK = re.compile(r"check\(\s*[\"'][A-Za-z_]\w*[\"']\s*\)")
STUDENT = re.compile(r"^\s*#\s*STUDENT\b")  # the cell where a student writes who they are
# Comments that look like a marker, in any case or with a typo: only the exact markers pass.
SOLUTION_LIKE = re.compile(r"#.*\bsol[ut]\w*|^\s*#+\s*(begin|end)\b", re.I)
HIDDEN_LIKE = re.compile(r"^\s*#+\s*hid+\w*", re.I)
TESTS_LIKE = re.compile(r"^\s*#+\s*tests?\b", re.I)
QUESTION_LIKE = re.compile(r"^\s*#+\s*quest\w*", re.I)
ROLE = re.compile(r"\{([a-z][\w:-]*)\}`([^`]*)`")


class NotebookError(ValueError):
    """A file that is not a readable notebook; the message says why."""


def read_notebook(path):
    """The notebook at ``path`` as a dict with a list of cell dicts, or NotebookError."""
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        raise NotebookError("a folder, not a notebook file") from None
    except OSError as err:
        raise NotebookError(f"unreadable file ({type(err).__name__}: {err})") from None
    return parse_notebook(data)


def parse_notebook(data):
    """A notebook's bytes as a dict with a list of cell dicts, or NotebookError."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotebookError("not UTF-8 text") from None
    if not text.strip():
        raise NotebookError("empty file")
    try:
        nb = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise NotebookError(f"not valid JSON ({str(err)[:100]})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list) \
            or not all(isinstance(cell, dict) for cell in nb["cells"]):
        raise NotebookError("not a Jupyter notebook (no list of cells)")
    return nb


def cell_source(cell):
    """A cell's source as one string ('' if it has none)."""
    text = cell.get("source", "")
    return "".join(map(str, text)) if isinstance(text, list) else str(text)


def first_line(cell):
    """A cell's first non-blank line, stripped."""
    lines = cell_source(cell).strip().splitlines()
    return lines[0].strip() if lines else ""


def question_header(cell):
    """``(name, options)`` of a master question cell's first line, or None."""
    match = QUESTION.fullmatch(first_line(cell)) if cell.get("cell_type") == "code" else None
    return (match["name"], match["options"]) if match else None


def notebook_meta(nb):
    """The ``d2lattn`` dict of a notebook's (or a cell's) metadata: ``{"assignment": name}``
    in a released notebook, ``{"question": name}`` in its question cells; ``{}`` where it
    is missing or not a dict."""
    meta = nb.get("metadata")
    meta = meta.get("d2lattn") if isinstance(meta, dict) else None
    return meta if isinstance(meta, dict) else {}


def question_of(cell):
    """The question a code cell answers (from its metadata or first line), or None."""
    name = notebook_meta(cell).get("question")
    if isinstance(name, str):
        return name
    header = question_header(cell)
    return header[0] if header else None


def parse_options(name, options):
    """``{"points": float, "forbid": [names]}`` from a header's ``key=value`` words, and
    ``"allow": [names]`` if it names any (package objects that may keep using a forbidden
    object's helpers, see :func:`d2lattn.grading.forbid.names.body`)."""
    parsed = {"points": 1.0, "forbid": []}
    for word in options.split():
        key, _, value = word.partition("=")
        if key == "points":
            parsed["points"] = _points(name, value)
        elif key in ("forbid", "allow") and value:
            parsed[key] = value.split(",")
        else:
            raise ValueError(f"question {name}: unknown option {word!r} (expected "
                             "points=<number>, forbid=<pkg.name>,... or allow=<pkg.name>,...)")
    return parsed


def strip_solutions(text, where):
    """``text`` with each solution region replaced by STUB (indented like its BEGIN line) and
    each one-line ``target = value  # SOLUTION`` by ``target = ...``; ``where`` names the cell
    in errors. Any other comment that mentions SOLUTION is an error, so a mistyped marker
    cannot leak a solution."""
    lines, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        marker, place = line.strip(), f"{where}, line {number}"
        if SOLUTION_LIKE.search(line) and marker not in (BEGIN, END) \
                and (inside or not ONE_LINE.match(line)):
            raise ValueError(f"{place}: unrecognised solution marker in {line.strip()!r} "
                             f"(the markers are exactly {BEGIN!r}, {END!r} and a final "
                             "'# SOLUTION')")
        if marker == BEGIN:
            if inside:
                raise ValueError(f"{place}: {BEGIN} inside a solution region")
            inside = True
            lines.append(line[:len(line) - len(line.lstrip())] + STUB)
        elif marker == END:
            if not inside:
                raise ValueError(f"{place}: {END} without {BEGIN}")
            inside = False
        elif not inside and SOLUTION_LIKE.search(line):
            lines.append(f"{ONE_LINE.match(line)['target']} = ...")
        elif not inside:
            lines.append(line)
    if inside:
        raise ValueError(f"{where}: {BEGIN} without {END}")
    return "\n".join(lines)


def split_tests(text, where):
    """``(public, hidden)``: the case codes of a tests cell's body, split at its ``# HIDDEN``
    line; cases are separated by blank lines."""
    for number, line in enumerate(text.splitlines(), 2):
        if HIDDEN_LIKE.match(line) and line.strip() != HIDDEN:
            raise ValueError(f"{where}, line {number}: {line.strip()!r} looks like the marker "
                             f"{HIDDEN!r} but is not it")
    parts = re.split(r"^[ \t]*# HIDDEN[ \t]*$", text, flags=re.M)
    if len(parts) > 2:
        raise ValueError(f"{where}: more than one {HIDDEN} line")
    public, hidden = [_cases(part, where) for part in (parts + [""])[:2]]
    return public, hidden


def _cases(text, where):
    cases = [case.strip() for case in re.split(r"\n[ \t]*\n", text) if case.strip()]
    for case in cases:
        if not any(line.lstrip().startswith(">>>") for line in case.splitlines()):
            raise ValueError(f"{where}: a case without a >>> example: {case!r}")
    return cases


def _points(name, value):
    try:
        points = float(value)
    except ValueError:
        points = float("nan")
    if not 0 < points < float("inf"):
        raise ValueError(f"question {name}: points must be a positive number, got {value!r}")
    return points



def plain_markdown(text):
    """Markdown without MyST roles, which Colab shows as raw text: ``{cite}`key``` becomes
    ``key``, ``{ref}`the text <label>``` becomes ``the text``, ``{math}`x``` becomes ``$x$``."""
    def plain(match):
        role, content = match[1], match[2]
        labelled = re.fullmatch(r"(.*?)\s*<([^<>]*)>", content, flags=re.S)
        if role == "math":
            return f"${content}$"
        return labelled[1] if labelled and labelled[1] else content

    return ROLE.sub(plain, text)


def check_call(name):
    """The source of a released notebook's check cell for question ``name``."""
    return f'check("{name}")'


def is_grader_cell(cell):
    """True for the cells release adds (test registration, check calls, the ``# STUDENT``
    cell, read by :func:`d2lattn.grading.batch.submissions.student_identity`): grading skips
    them."""
    return first_line(cell) == REGISTRATION or bool(CHECK.fullmatch(cell_source(cell).strip())) \
        or bool(STUDENT.match(cell_source(cell)))


def runnable_cells(nb):
    """``[(number, source, question or None)]``: the code cells a grader runs, numbered as
    Jupyter numbers them in a run from the top (code cells only, grader cells counted)."""
    code = [cell for cell in nb["cells"] if cell.get("cell_type") == "code"]
    return [(number, cell_source(cell), question_of(cell)) for number, cell in enumerate(code, 1)
            if not is_grader_cell(cell)]
