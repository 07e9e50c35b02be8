"""Release, step 1: a master notebook split, without running anything, into the student
notebook (solutions stubbed, hidden cases removed, public ones registered for ``check()``, a
hand-in section) and its tests in OK format; an instructor's private hidden cases read."""
import pprint
import re
from pathlib import Path

from ..master import cases
from ..master.variant import MARKER as VARIANT
from ..master.variant import fill, parameters, student_source, variant_index
from ..master.notebook import (QUESTION_LIKE, REGISTRATION, TESTS, TESTS_LIKE, cell_source,
                               check_call, first_line, notebook_meta, parse_options,
                               plain_markdown, question_header, read_notebook, split_tests,
                               strip_solutions)

BARE_REF = re.compile(r"\{(?:ref|numref|doc|eq)\}`[^`<>]*`")  # a label with no text

ASSIGNMENT = re.compile(r"[A-Za-z0-9][\w.-]*")

PRIVATE = re.compile(r"#\s*TESTS\s+(?P<assignment>[A-Za-z0-9][\w.-]*)\.(?P<name>[A-Za-z_]\w*)")

RUN_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled")  # when and how it ran

HAND_IN = """## Hand in

1. Fill in the `# STUDENT` cell below: your name and the e-mail address your course knows you
   by, and leave the `# STUDENT` line as it is. The grader knows you by how you hand the file
   in (your Canvas or Moodle account, your GitHub Classroom repository, else the file's name);
   the e-mail only fills in where that names nobody.
2. Save the notebook: in Jupyter, *File > Save*; on Colab, *File > Download > Download .ipynb*.
   Hand in that one `.ipynb` file the way your course says (an upload, or a commit to your
   GitHub Classroom repository), under the name your instructor gives, if any.
3. Keep every `# QUESTION` line and cell: the grader finds your answers by them. Saved outputs
   and plots may stay; they are not read."""

STUDENT_CELL = '# STUDENT: who you are (the grader reads these two lines)\nname = ""\nemail = ""'


def named_masters(masters):
    """``[(path, notebook, assignment)]`` of the master files ``masters``; ValueError if two
    are the same assignment."""
    named = [(master, nb, assignment_of(nb, master.stem))
             for master, nb in ((master, read_notebook(master)) for master in masters)]
    _check_unique([name for _, _, name in named])
    return named


def assignment_of(nb, default):
    """The assignment a master names in its metadata (``d2lattn.assignment``), else
    ``default`` (its file name); ValueError if the name cannot be a bundle's file name."""
    name = notebook_meta(nb).get("assignment", default)
    if not isinstance(name, str) or not ASSIGNMENT.fullmatch(name):
        raise ValueError(f"{default}: metadata d2lattn.assignment must be a name of letters, "
                         f"digits and _.- (a bundle file's name), got {name!r}")
    return name


def _check_unique(names):
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"several masters are the assignment {twice}: each bundle needs "
                         f"its own name (metadata d2lattn.assignment or the file name)")


def private_cases(path, tests):
    """``{(assignment, question): [hidden case dicts]}`` from an instructor's private file
    of extra hidden cases: sections that start with a line ``# TESTS <assignment>.<question>``
    and hold cases as in a master's tests cell (a message line each), all hidden. ``tests``
    maps each assignment being released to its tests; sections of other assignments are left
    out, a question it does not have is an error, and so is a file that adds nothing."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"hidden must be a readable UTF-8 file of extra cases, got "
                         f"{str(path)!r} ({type(err).__name__})") from None
    sections = re.split(r"^(?=[ \t]*#\s*TESTS\b)", text, flags=re.M | re.I)
    if sections[0].strip():
        raise ValueError(f"{path}: text before the first '# TESTS <assignment>.<question>' "
                         f"line: {sections[0].strip()[:60]!r}")
    extra = {}
    for section in sections[1:]:
        header, _, body = section.partition("\n")
        match = PRIVATE.fullmatch(header.strip())
        if not match:
            raise ValueError(f"{path}: {header.strip()[:60]!r} is not "
                             "'# TESTS <assignment>.<question>'")
        key, where = (match["assignment"], match["name"]), f"{path}, {header.strip()[8:]}"
        if key[0] not in tests:
            continue
        if key[1] not in {test["name"] for test in tests[key[0]]}:
            raise ValueError(f"{where}: {key[0]} has no question {key[1]}")
        codes = [code for part in split_tests(body, where) for code in part]
        extra.setdefault(key, []).extend(_checked_cases([(code, True) for code in codes],
                                                        where))
    if not extra:
        raise ValueError(f"{path}: no case for the assignments released ({sorted(tests)})")
    return extra


def split_master(nb, assignment, params=None):
    """``(student notebook, tests)`` of a master notebook (a dict) named ``assignment``; where
    it has a variant cell, the student notebook states ``params`` (default: the master's own
    variant, :func:`master_params`) in that cell and in its markdown's ``{{name}}`` fields."""
    for index, cell in enumerate(nb["cells"]):
        _check_cell(cell, f"{assignment}, cell {index + 1}")
    if params is None:
        params = master_params(nb, assignment)
    questions, bodies = _questions(nb, assignment), _test_bodies(nb, assignment)
    if set(questions) != set(bodies):
        raise ValueError(f"{assignment}: questions without a tests cell: "
                         f"{sorted(set(questions) - set(bodies))}, tests cells without a "
                         f"question: {sorted(set(bodies) - set(questions))}")
    tests = [_ok_test(name, options, *bodies[name], f"{assignment}, tests of {name}")
             for name, (_, options) in questions.items()]
    cells = [_student_cell(cell, index, f"{assignment}, cell {index + 1}", params)
             for index, cell in enumerate(nb["cells"])]
    if tests:  # right after the first code cell, the Colab install cell of a chapter
        first = next(i for i, cell in enumerate(nb["cells"]) if cell.get("cell_type") == "code")
        cells.insert(first + 1, _registration_cell(tests))
        cells += [{"cell_type": "markdown", "id": "grading-hand-in", "metadata": {},
                   "source": HAND_IN},
                  _code_cell(STUDENT_CELL, "grading-student", {"tags": ["grading-student"]})]
    metadata = dict(nb.get("metadata", {}), d2lattn={"assignment": assignment})
    student = dict(nb, cells=cells, metadata=metadata,
                   nbformat_minor=max(5, nb.get("nbformat_minor", 0)))  # 4.5: cells have ids
    return student, tests


def master_params(nb, assignment):
    """``{name: value}`` of the master's own variant (each draw's default), ``{}`` for a
    master without a variant cell; ValueError for a malformed one."""
    index = variant_index(nb, assignment)
    if index is None:
        return {}
    return parameters(cell_source(nb["cells"][index]), None,
                      f"{assignment}, cell {index + 1} (# VARIANT)")


def variant_source(nb, assignment):
    """The source of a master's variant cell, None if it has none."""
    index = variant_index(nb, assignment)
    return None if index is None else cell_source(nb["cells"][index])


def _check_cell(cell, where):
    """Refuse what release would copy blindly: raw cells other than tests, attachments,
    headers that look like a marker but are not one."""
    kind, line = cell.get("cell_type"), first_line(cell)
    if kind not in ("code", "markdown", "raw"):
        raise ValueError(f"{where}: unknown cell type {kind!r}")
    if cell.get("attachments"):
        raise ValueError(f"{where}: attachments are not released (link the file instead)")
    if kind == "raw" and not TESTS.fullmatch(line):
        raise ValueError(f"{where}: a raw cell that is not '# TESTS <question>': "
                         f"{line[:60]!r}")
    if kind == "code" and QUESTION_LIKE.match(line) and not question_header(cell):
        raise ValueError(f"{where}: {line[:60]!r} looks like a question header but is not "
                         "'# QUESTION <name> [points=<p>] [forbid=...]'")
    if kind == "code" and TESTS_LIKE.match(line):
        raise ValueError(f"{where}: a tests header in a code cell (tests are raw cells)")
    label = BARE_REF.search(cell_source(cell)) if kind == "markdown" else None
    if label:
        raise ValueError(f"{where}: {label[0]} would show its raw label in the student "
                         "notebook; write {ref}`the text <label>` or plain text")


def _public_only(test):
    """``test`` without its hidden cases, expected values and calls."""
    return dict(test, suites=[dict(suite, cases=[
        {key: value for key, value in case.items() if key not in ("expected", "call")}
        for case in suite["cases"] if not case["hidden"]]) for suite in test["suites"]])


def _questions(nb, assignment):
    """``{name: (cell index, options)}`` of the question cells, in notebook order."""
    questions = {}
    for index, cell in enumerate(nb["cells"]):
        header = question_header(cell)
        if header:
            name, options = header
            if name in questions:
                raise ValueError(f"{assignment}: question {name} appears twice")
            questions[name] = index, parse_options(name, options)
    return questions


def _test_bodies(nb, assignment):
    """``{name: (public cases, hidden cases)}`` of the tests cells."""
    bodies = {}
    for index, cell in enumerate(nb["cells"]):
        match = TESTS.fullmatch(first_line(cell)) if cell.get("cell_type") == "raw" else None
        if match:
            if match["name"] in bodies:
                raise ValueError(f"{assignment}: two tests cells for {match['name']}")
            body = cell_source(cell).strip().split("\n", 1)[1:]
            bodies[match["name"]] = split_tests(body[0] if body else "",
                                                f"{assignment}, cell {index + 1}")
    return bodies


def _ok_test(name, options, public, hidden, where):
    """The OK-format test of one question, with at least one scored case."""
    checked = _checked_cases([(code, False) for code in public] +
                             [(code, True) for code in hidden], where)
    if all(cases.is_format(cases.parse_case(case["code"])[0]) for case in checked):
        raise ValueError(f"{where}: only format checks; a question needs a scored case")
    return {"name": name, "points": options["points"], "forbid": options["forbid"],
            "suites": [{"type": "doctest", "scored": True, "setup": "", "teardown": "",
                        "cases": checked}]}


def _checked_cases(codes, where):
    """The OK-format cases of ``[(code, hidden)]``; each must parse as doctest examples with
    an expected value, and a hidden one needs a message: all that grading shows of it."""
    hidden_number = 0
    for code, is_hidden in codes:
        try:
            message, examples = cases.parse_case(code)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        if not any(example.want for example in examples):
            raise ValueError(f"{where}: a case without an expected value: {code[:80]!r}")
        hidden_number += is_hidden
        if is_hidden and not message:
            raise ValueError(f"{where}: hidden case {hidden_number} has no '# message' "
                             f"line (the message names it when it fails): {code[:80]!r}")
    return [{"code": code, "hidden": flag, "locked": False} for code, flag in codes]


def _student_cell(cell, index, where, params):
    """A master cell as the student sees it, without the master's run metadata; the variant
    cell and the markdown's fields state ``params`` (none: a master without variants)."""
    cell = dict(cell, id=cell.get("id", f"cell-{index}"), metadata={
        key: value for key, value in cell.get("metadata", {}).items()
        if key not in RUN_METADATA})
    match = TESTS.fullmatch(first_line(cell)) if cell.get("cell_type") == "raw" else None
    if match:
        return _code_cell(check_call(match["name"]), f"check-{match['name']}",
                          {"tags": ["grading-check"]})
    if cell.get("cell_type") == "markdown":
        text = plain_markdown(cell_source(cell))
        return dict(cell, source=fill(text, params, where) if params else text)
    if cell.get("cell_type") != "code":
        return cell
    if params and first_line(cell).startswith(VARIANT):
        return dict(cell, source=student_source(params), outputs=[], execution_count=None)
    metadata = dict(cell.get("metadata", {}))
    header = question_header(cell)
    if header:
        metadata["d2lattn"] = {"question": header[0]}
    return dict(cell, source=strip_solutions(cell_source(cell), where), metadata=metadata,
                outputs=[], execution_count=None)


def _registration_cell(tests):
    """The cell that registers the public tests, its source hidden in Jupyter and on Colab."""
    text = pprint.pformat([_public_only(test) for test in tests], width=100, sort_dicts=False)
    return _code_cell(f"{REGISTRATION}\nfrom d2lattn.grading import check, register\n\n"
                      f"register({text})", "grading-tests",
                      {"tags": ["grading-tests"], "cellView": "form",
                       "jupyter": {"source_hidden": True}})


def _code_cell(text, cell_id, metadata):
    return {"cell_type": "code", "id": cell_id, "metadata": metadata, "source": text,
            "outputs": [], "execution_count": None}
