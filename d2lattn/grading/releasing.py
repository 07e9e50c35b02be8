"""Release: master notebooks in; student notebooks and the instructor's autograder bundle out."""
import json
import pprint
from pathlib import Path

from . import cases
from .notebook import (REGISTRATION, TESTS, cell_source, check_call, first_line, parse_options,
                       question_header, read_notebook, split_tests, strip_solutions)


def release(source, out="_build/exercises"):
    """Release every master notebook of ``source`` (a folder of .ipynb files, or one file).

    Writes ``out/<name>.ipynb``, the student version (solutions replaced by stubs, outputs
    cleared, tests cells replaced by ``check("<question>")`` cells, one hidden-source cell
    after the first code cell that registers the public tests), and
    ``out/autograder/<name>.json``, the bundle ``{"assignment": <name>, "tests": [...]}`` with
    every test, hidden cases included, in OK format. Returns the student notebooks' paths.
    """
    masters, out = _masters(source), Path(out)
    if any(out.resolve() == master.parent.resolve() for master in masters):
        raise ValueError(f"out must not be the folder of the master notebooks, got {str(out)!r}")
    (out / "autograder").mkdir(parents=True, exist_ok=True)
    written = []
    for master in masters:
        student, tests = split_master(read_notebook(master), master.stem)
        _write_json(out / master.name, student)
        _write_json(out / "autograder" / f"{master.stem}.json",
                    {"assignment": master.stem, "tests": tests})
        written.append(out / master.name)
    return written


def split_master(nb, assignment):
    """``(student notebook, tests)`` of a master notebook (a dict) named ``assignment``."""
    questions, bodies = _questions(nb, assignment), _test_bodies(nb, assignment)
    if set(questions) != set(bodies):
        raise ValueError(f"{assignment}: questions without a tests cell: "
                         f"{sorted(set(questions) - set(bodies))}, tests cells without a "
                         f"question: {sorted(set(bodies) - set(questions))}")
    tests = [_ok_test(name, options, *bodies[name], f"{assignment}, tests of {name}")
             for name, (_, options) in questions.items()]
    cells = [_student_cell(cell, index, f"{assignment}, cell {index + 1}")
             for index, cell in enumerate(nb["cells"])]
    if tests:  # right after the first code cell, the Colab install cell of a chapter
        first = next(i for i, cell in enumerate(nb["cells"]) if cell.get("cell_type") == "code")
        cells.insert(first + 1, _registration_cell(tests))
    metadata = dict(nb.get("metadata", {}), d2lattn={"assignment": assignment})
    student = dict(nb, cells=cells, metadata=metadata,
                   nbformat_minor=max(5, nb.get("nbformat_minor", 0)))  # 4.5: cells have ids
    return student, tests


def _public_only(test):
    """``test`` without its hidden cases."""
    return dict(test, suites=[dict(suite, cases=[case for case in suite["cases"]
                                                 if not case["hidden"]])
                              for suite in test["suites"]])


def _masters(source):
    source = Path(source)
    if source.is_dir():
        masters = sorted(source.glob("*.ipynb"))
    elif source.suffix == ".ipynb" and source.is_file():
        masters = [source]
    else:
        raise ValueError(f"source must be a folder of master notebooks or a .ipynb file, "
                         f"got {str(source)!r}")
    if not masters:
        raise ValueError(f"source holds no .ipynb file: {str(source)!r}")
    return masters


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
    """The OK-format test of one question; every case must parse as doctest examples."""
    for code in public + hidden:
        try:
            cases.parse_case(code)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
    codes = [(code, False) for code in public] + [(code, True) for code in hidden]
    return {"name": name, "points": options["points"], "forbid": options["forbid"],
            "suites": [{"type": "doctest", "scored": True, "setup": "", "teardown": "",
                        "cases": [{"code": code, "hidden": flag, "locked": False}
                                  for code, flag in codes]}]}


def _student_cell(cell, index, where):
    """A master cell as the student sees it."""
    cell = dict(cell, id=cell.get("id", f"cell-{index}"))
    match = TESTS.fullmatch(first_line(cell)) if cell.get("cell_type") == "raw" else None
    if match:
        return _code_cell(check_call(match["name"]), f"check-{match['name']}",
                          {"tags": ["grading-check"]})
    if cell.get("cell_type") != "code":
        return cell
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


def _write_json(path, data):
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
