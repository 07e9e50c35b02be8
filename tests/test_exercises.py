"""The graded exercises: release itself checks that every master scores full marks, every
student notebook 0 and every trivial answer 0 (graded as submissions, in the sandbox), and that
no scored case expects a verdict or a form; here the committed copies in exercises/student/
must be exactly what release writes, hold no hidden test, no solution, no MyST role and no raw
label, no forbidden body is reachable, the book links to student notebooks only, and the
package's wheel holds no master."""
import ast
import copy
import importlib
import inspect
import json
import re
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import numpy as onp
import pytest

import d2lattn
from d2lattn.grading import grade, release, student
from d2lattn.grading.forbid import shadow
from d2lattn.grading.master import cases
from d2lattn.grading.releasing import stubs
from d2lattn.grading.forbid import names as forbid_module
from d2lattn.grading.forbid.callgraph import call_graph
from d2lattn.grading.master.notebook import (ONE_LINE, cell_source, parse_options,
                                             question_header)
from d2lattn.grading.master.variant import cell_params, parameters, variant_index, with_params
from d2lattn.grading.releasing.split import split_master
from grading_support import require_sandbox

ROOT = Path(__file__).resolve().parents[1]
MASTERS = sorted((ROOT / "exercises").glob("ch*.ipynb"))
STUDENTS = ROOT / "exercises" / "student"
ROLE = re.compile(r"\{[a-z][\w:-]*\}`")


CLASS = "name,email,login\nAda Lovelace,ada@uni.edu,ada\nAlan Turing,alan@uni.edu,alan\n"
VARIED = ("ch1", "ch2", "ch4", "ch6", "ch9", "ch10")  # chapters with per-student variants


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """Every chapter released once, to a class of two, each their own variant: this runs each
    master and its student notebook in the sandbox and raises if a master misses a point or a
    student notebook earns one, or if on either student's variant a master misses a case or
    a trivial answer passes one (.ci/run checks 8 more drawn variants)."""
    if not MASTERS:
        pytest.skip("no masters here (a public copy keeps them private, exercises/README.md)")
    require_sandbox()
    out = tmp_path_factory.mktemp("released")
    (out.parent / "roster.csv").write_text(CLASS)
    (out.parent / "course.secret").write_text("the exercises' test secret, not a real one")
    release(ROOT / "exercises", out, seeds=0, roster=out.parent / "roster.csv",
            secret=out.parent / "course.secret")
    return out


# a name alone or called on names; each name matched one way only: (\w+(, )?)* took seconds
# to reject a line such as type(f(log_probs, tokens)), trying every split of every name
ON_NAMES = re.compile(r"[\w.]+(\((\w+(, \w+)*(, )?)?\))?")


def hidden_lines(bundle_file):
    """The lines of the hidden cases of a bundle that no public case has (prompts removed)."""
    tests = json.loads(bundle_file.read_text())["tests"]
    lines = {True: set(), False: set()}
    for test in tests:
        for suite in test["suites"]:
            for case in suite["cases"]:
                for line in case["code"].splitlines():
                    line = line.strip().removeprefix(">>>").removeprefix("...").strip()
                    # names alone or called on names (answer_q4, f(X, W)) are no secret
                    if len(line) >= 8 and not ON_NAMES.fullmatch(line):
                        lines[case["hidden"]].add(line)
    return lines[True] - lines[False]


def test_there_is_a_master_per_chapter_with_four_questions_or_more(released):
    chapters = {int(p.name.split("_")[0]) for p in (ROOT / "book").glob("[0-9]*.ipynb")}
    assert {int(m.name[2:].split("_")[0]) for m in MASTERS} == chapters, \
        [m.name for m in MASTERS]
    for master in MASTERS:
        tests = json.loads((released / "autograder" / f"{master.stem}.json").read_text())["tests"]
        assert len(tests) >= 4, master.name
        for test in tests:  # every question earns its points from values computed at release
            assert all("expected" in case for case in test["suites"][0]["cases"]), test["name"]


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_committed_student_notebook_is_the_released_one(master, released):
    committed = STUDENTS / master.name
    assert committed.is_file(), f"run release and copy {master.name} to exercises/student/"
    assert json.loads(committed.read_text()) == json.loads((released / master.name).read_text())


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_student_notebook_holds_no_hidden_test_no_solution_no_myst_role(master, released):
    raw = (STUDENTS / master.name).read_text()
    nb = json.loads(raw)
    sources = "\n".join("".join(cell["source"]) for cell in nb["cells"])
    hidden = hidden_lines(released / "autograder" / f"{master.stem}.json")
    assert hidden, "a master without hidden cases"
    leaked = [line for line in hidden if line in raw or line in sources]
    assert not leaked
    assert "BEGIN SOLUTION" not in sources and "# HIDDEN" not in sources
    assert '"expected"' not in raw  # the bundle's expected values stay in the bundle
    roles = [line for cell in nb["cells"] if cell["cell_type"] == "markdown"
             for line in "".join(cell["source"]).splitlines() if ROLE.search(line)]
    assert not roles, roles


def test_the_wheel_holds_the_package_and_no_exercise(tmp_path):
    """What `pip install` gives a student: d2lattn's modules and the data the chapters load,
    no master, no notebook, no bundle (JSON only in d2lattn/data/)."""
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                            "-q", "-w", str(tmp_path)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    wheel, = tmp_path.glob("d2lattn-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "d2lattn/grading/sandbox/runner.py" in names
    assert {"d2lattn/data/small_bert.safetensors", "d2lattn/data/gpt_ladder.json"} <= set(names)
    leaks = [name for name in names if not name.startswith(("d2lattn/", "d2lattn-"))
             or name.endswith(".ipynb") or "exercises" in name or "tests" in name
             or name.endswith(".json") and not name.startswith("d2lattn/data/")]
    assert not leaks, leaks


def test_book_links_to_student_notebooks_only():
    """No chapter or page of the book points at a master (exercises/ch*.ipynb)."""
    pages = list((ROOT / "book").glob("*.ipynb")) + list((ROOT / "book").glob("*.md")) + \
        [ROOT / "_toc.yml", ROOT / "README.md"]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"exercises/ch\d", text), page


# --- cases earn points only by understanding ------------------------------------------------

def bundle_tests(released, master):
    return json.loads((released / "autograder" / f"{master.stem}.json").read_text())["tests"]


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_no_scored_case_expects_a_verdict_or_a_form(master, released):
    """A bool computed in the student's process is a verdict the student controls; a type or
    shape is a form: only format checks may expect them, and they earn nothing."""
    verdicts = [(test["name"], number) for test in bundle_tests(released, master)
                for number, case in enumerate(cases.cases_of(test, True), 1)
                if cases.scores(case) and cases.verdict(case)]
    assert not verdicts
    for test in bundle_tests(released, master):  # and every question earns its points
        assert any(cases.scores(case) for case in cases.cases_of(test, True)), test["name"]


def test_release_refuses_verdicts_forms_and_cases_a_trivial_answer_passes(tmp_path):
    """Release grades trivial answers of every question (here: the constant 2 and the input
    unchanged pass the public case) and refuses bools and forms outside format checks."""
    require_sandbox()
    weak = "# doubles\n>>> double(1)\n2\n\n# HIDDEN\n# a negative number\n>>> double(-3)\n-6"
    strong = "# doubles\n>>> double(1)\n2\n>>> double(5)\n10\n\n# HIDDEN\n" \
             "# a negative number\n>>> double(-3)\n-6"
    for body, error in [
            (weak, r"trivial answers pass scored cases: \['q1, case 1: returns the constant 2'"),
            (strong.replace(">>> double(-3)\n-6", ">>> double(-3) == -6\nTrue"),
             r"scored cases whose expected value is a verdict .*\['q1, case 2'\]"),
            (strong.replace(">>> double(-3)\n-6", ">>> type(double(-3))\nint"),
             r"scored cases whose expected value is a verdict .*\['q1, case 2'\]"),
            (strong.replace("# a negative number\n>>> double(-3)\n-6",
                            "# five again\n>>> double(5)\n10"),
             r"\['q1, case 2: replays the expected value of public example 2'")]:
        master = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
             "source": "# QUESTION q1\ndef double(x):\n    return 2 * x  # SOLUTION"},
            {"cell_type": "raw", "metadata": {}, "source": "# TESTS q1\n" + body}]}
        (tmp_path / "weak.ipynb").write_text(json.dumps(master).replace(
            "return 2 * x  # SOLUTION", "# BEGIN SOLUTION\\n    return 2 * x\\n    "
                                        "# END SOLUTION"))
        with pytest.raises(ValueError, match=error):
            release(tmp_path / "weak.ipynb", tmp_path / "out")
    (tmp_path / "weak.ipynb").write_text((tmp_path / "weak.ipynb").read_text().replace(
        "# five again\\n>>> double(5)\\n10", "# a negative number\\n>>> double(-3)\\n-6"))
    release(tmp_path / "weak.ipynb", tmp_path / "out")  # the strong master passes


def test_trivial_answers_cover_functions_methods_and_one_line_answers():
    source = ("# QUESTION q\nclass A(Base):\n    def score(self, q, k):\n        return q\n\n"
              "def f(x, y=1):\n    return x\n\nanswer = 3  # SOLUTION\nkept = 4\n")
    made = dict(stubs.variants(source, [{"t": "num", "v": 7.5}]))
    assert "return k" in made["returns its input 2 unchanged"]
    assert "return y" in made["returns its input 2 unchanged"]
    assert "answer = None" in made["returns None"] and "kept = 4" in made["returns None"]
    assert "return _stub_like(q, 0)" in made["returns zeros of the shape of its input 1"]
    assert "answer = 7.5" in made["replays the expected value of public example 1"]
    env = {}
    exec(made["returns ones of the shape of its input 1"].replace("(Base)", ""), env)
    assert env["f"](onp.zeros(3)).tolist() == [1.0, 1.0, 1.0] and env["f"]("x") == 1


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_no_forbidden_body_is_reachable(master, tmp_path):
    """The code of each forbidden object, and of the private helpers that do its work, is in
    no file of the d2lattn copy its question runs with: no route can reach it."""
    questions = [question_header(cell) for cell in json.loads(master.read_text())["cells"]]
    forbids = {tuple(parse_options(*header)["forbid"]) for header in questions if header}
    package = Path(d2lattn.__file__).parent
    lines = Counter(line.strip() for path in package.rglob("*.py")
                    for line in path.read_text().splitlines())
    for number, forbid in enumerate(sorted(forbids - {()})):
        copy = shadow.shadow_package(forbid, tmp_path / str(number))
        text = {line.strip() for path in copy.rglob("*.py")
                for line in path.read_text().splitlines()}
        objects = [resolved(name) for name in forbid]
        objects += [helper for obj in objects if inspect.isfunction(obj)  # what it delegates to
                    for helper in delegates(obj)] + \
            [resolved(name) for name in forbid_module.body(forbid)[0]]
        for obj in objects:  # its lines found nowhere else in the package
            own = [line.strip() for line in inspect.getsource(obj).splitlines()[1:]
                   if len(line.strip()) > 20 and lines[line.strip()] == 1]
            leaked = [line for line in own if line in text]
            assert not leaked, (forbid, obj.__name__, leaked[:3])


def resolved(dotted):
    """The object a forbid list's dotted name stands for."""
    module, name = call_graph().resolve(dotted)
    return getattr(importlib.import_module(module), name)


def delegates(function):
    """The private functions of its module (validators aside) that ``function`` calls and
    that are at least as long as it is: it hands its work to them."""
    module = sys.modules[function.__module__]
    names = re.findall(r"\b(_[a-z]\w*)\(", inspect.getsource(function))
    length = len(inspect.getsource(function).splitlines())
    return [helper for name in names if not name.startswith("_check")
            for helper in [getattr(module, name, None)] if inspect.isfunction(helper)
            and len(inspect.getsource(helper).splitlines()) >= length]


def test_forbidding_masked_softmax_stubs_the_helper_that_does_its_work(tmp_path):
    helpers, users = forbid_module.body(["d2lattn.masked_softmax"])
    assert "d2lattn.attention._masked_softmax" in helpers
    assert users["d2lattn.attention._masked_softmax"] == [  # what stops working with it
        "d2lattn.attention.attention_pooling"]
    text = (shadow.shadow_package(["d2lattn.masked_softmax"], tmp_path) / "attention.py") \
        .read_text()
    assert "def _masked_softmax(*args, **kwargs):\n    raise PermissionError(" in text
    # an object the question allows keeps the helper it shares with a forbidden one
    helpers, _ = forbid_module.body(["d2lattn.ScoredAttention", "d2lattn.DotProductAttention"])
    assert "d2lattn.attention._masked_softmax" not in helpers


def test_check_warns_when_the_notebook_uses_a_forbidden_name(monkeypatch, capsys):
    monkeypatch.setattr(student, "_TESTS", {})
    student.register([{"name": "q1", "forbid": ["d2lattn.masked_softmax"], "suites": [
        {"cases": [{"code": "# one\n>>> one()\n1", "hidden": False}]}]}])
    env = {"one": lambda: 1, "In": ["", "import d2lattn as d", "d.masked_softmax"]}
    student.check("q1", env)
    out = capsys.readouterr().out
    assert out.startswith("q1: 1 of 1 public cases passed\n")
    assert "Note: this notebook uses d2lattn.masked_softmax (In [2], line 1), which q1 forbids." \
        in " ".join(out.split())
    env["In"] = ["", "import d2lattn", "x = 1"]
    student.check("q1", env)
    assert "Note:" not in capsys.readouterr().out


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_student_notebook_shows_no_raw_label_and_no_forbidden_hint(master):
    """No raw label such as sec-transformer, and no question's text suggests using (or
    comparing with) an object it forbids."""
    nb = json.loads((STUDENTS / master.name).read_text())
    text = "\n".join("".join(cell["source"]) for cell in nb["cells"]
                     if cell["cell_type"] == "markdown")
    assert not re.search(r"\bsec-[\w-]+", text)
    cells = json.loads(master.read_text())["cells"]
    for index, cell in enumerate(cells):
        header = question_header(cell)
        if not header:
            continue
        prose = next(cell_source(c) for c in reversed(cells[:index])
                     if c["cell_type"] == "markdown")
        for name in parse_options(*header)["forbid"]:
            short = name.split(".")[-1]
            for sentence in re.split(r"(?<=[.!?])\s", prose):
                if re.search(rf"\b{short}\b", sentence) \
                        and re.search(r"\b(use|call|compare|check|may|try)\b", sentence, re.I):
                    assert re.search(r"not allowed|do not|not use|forbid", sentence, re.I), \
                        (header[0], sentence)


FORMAT_ONLY = '''

def _stub_like(a, fill):  # each part of the master's answer: the public feedback's first value
    if isinstance(a, (tuple, list)):  # of its type (a number, a string), whatever the input
        return type(a)(_stub_like(item, fill) for item in a)
    kinds = [kind for kind in (bool, int, float, str) if isinstance(a, kind)][:1]
    seen = [value for value in SHOWN if kinds and type(value) is kinds[0]]
    return seen[0] if seen else a * 0 + fill
'''


def shown_constants(tests):
    """The numbers and strings a student's public feedback shows: the leaves of the public
    cases' expected values and the literals in their code, in order."""
    def leaves(value):
        if value.get("t") in ("list", "tuple", "set"):
            for item in value["v"]:
                yield from leaves(item)
        elif value.get("t") == "array":
            yield from onp.ravel(value["v"]).tolist()
        elif value.get("t") in ("num", "str", "bool"):
            yield value["v"]

    shown = []
    for test in tests:
        for case in cases.cases_of(test, False):
            shown += [v for value in case["expected"] for v in leaves(value)]
            for example in cases.parse_case(case["code"])[1]:
                shown += [node.value for node in ast.walk(ast.parse(example.source))
                          if isinstance(node, ast.Constant)
                          and isinstance(node.value, (int, float, str))]
    return list(dict.fromkeys(shown))


def format_only(source, replays, shown):
    """A question cell answered from the public feedback alone: a function returns the
    expected value of its first public example, whatever the input, or (with no value shown)
    its master's answer with every number and string replaced by the first shown one of its
    type; a one-line answer the same."""
    labels = dict(stubs.variants(source, replays))
    text = labels.get("replays the expected value of public example 1") or \
        labels["returns ones in the form of the master's answer"]
    header = source.splitlines()[0]  # "# QUESTION ...": the stub's source lost it
    return header + "\n" + text.replace(stubs.PRELUDE, stubs.PRELUDE + f"\nSHOWN = {shown!r}"
                                         + FORMAT_ONLY)


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_a_format_only_submission_earns_nothing(master, released, tmp_path):
    """Each chapter answered with constants copied from the public feedback (the expected
    values of the public examples, the literals of their code; the question's own first) in
    the form of the master's answers: every question scores 0, its hidden cases vary the
    inputs that decide it."""
    bundle = released / "autograder"
    tests = json.loads((bundle / f"{master.stem}.json").read_text())["tests"]
    nb = json.loads(master.read_text())
    for cell in nb["cells"]:
        header = question_header(cell)
        if header:
            test = next(t for t in tests if t["name"] == header[0])
            replays = [value for case in cases.cases_of(test, False) if cases.scores(case)
                       for value in case["expected"]]  # values, not a format check's verdict
            shown = list(dict.fromkeys(shown_constants([test]) + shown_constants(tests)))
            cell["source"] = format_only(cell_source(cell), replays, shown)
    own = json.loads((released / "students" / "ada" / master.name).read_text())
    nb["metadata"] = own["metadata"]  # Ada's, graded on her variant where there are some
    nb = with_params(nb, cell_params(own)) if cell_params(own) else nb
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "ada.ipynb").write_text(json.dumps(nb))
    rows = grade(tmp_path / "in", bundle, tmp_path / "out", timeout=300, jobs=1,
                 roster=released.parent / "roster.csv")
    assert rows and all("cases passed" in row.reason for row in rows), rows  # each one ran
    assert all(row.points == 0 for row in rows), \
        [(row.question, row.points, row.reason) for row in rows if row.points]


def test_the_chapters_named_have_variants_that_change_their_questions_text():
    """Each chapter of :data:`VARIED` draws numbers for its questions: a ``# VARIANT`` cell, and
    two drawn variants give two student notebooks that differ in a question's text."""
    varied = {master.stem.split("_")[0]: master for master in MASTERS
              if variant_index(json.loads(master.read_text())) is not None}
    assert set(VARIED) <= set(varied), sorted(varied)
    for prefix in VARIED:
        nb = json.loads(varied[prefix].read_text())
        source = cell_source(nb["cells"][variant_index(nb)])
        texts = [[cell_source(cell) for cell in split_master(nb, prefix, params)[0]["cells"]
                  if cell["cell_type"] == "markdown"]
                 for params in (parameters(source, 1), parameters(source, 2))]
        assert any(a != b for a, b in zip(*texts)), prefix  # numbers in a question's text
    assert {"ch1", "ch2", "ch4"} <= set(NUMERIC)  # the chapters with numbers to copy


def numeric_answers(nb):
    """The names a master's one-line solutions (``answer_q6 = ...  # SOLUTION``) assign."""
    return [name.strip() for cell in nb["cells"] if question_header(cell)
            for line in cell_source(cell).splitlines() if ONE_LINE.match(line)
            for name in ONE_LINE.match(line)["target"].split(",")]


def master_of(prefix):
    return next(m for m in MASTERS if m.stem.split("_")[0] == prefix)


# The varied chapters whose questions include a number to copy (Chapters 6, 9 and 10 vary
# the inputs their function questions are called on in hidden cases instead)
NUMERIC = [prefix for prefix in VARIED if any(m.stem.split("_")[0] == prefix for m in MASTERS)
           and numeric_answers(json.loads(master_of(prefix).read_text()))]


PLAIN = """def plain(value):
    if isinstance(value, (list, tuple)):
        return type(value)(plain(item) for item in value)
    return value.item() if hasattr(value, "item") else value
print("ANSWERS", repr({name: plain(globals()[name]) for name in NAMES}))"""


@pytest.mark.parametrize("prefix", NUMERIC)
def test_a_classmates_numbers_copied_in_earn_nothing(prefix, released, tmp_path):
    """Ada hands in the master's answers on her variant: full marks. Alan hands in the same
    code with Ada's numeric answers copied in as numbers: every question whose answer is a
    number scores 0 for him, every other one full marks."""
    master = master_of(prefix)
    nb, bundle = json.loads(master.read_text()), released / "autograder"
    names = numeric_answers(nb)
    answers, copied = {}, {}
    for student in ("ada", "alan"):
        own = json.loads((released / "students" / student / master.name).read_text())
        sub = dict(copy.deepcopy(with_params(nb, cell_params(own))), metadata=own["metadata"])
        if student == "ada":
            sub["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [],
                                 "execution_count": None,
                                 "source": f"NAMES = {names!r}\n" + PLAIN})
        else:
            for cell in sub["cells"]:
                lines = cell_source(cell).splitlines()
                if question_header(cell) and any(ONE_LINE.match(line) for line in lines):
                    cell["source"] = "\n".join(_copied(line, answers) for line in lines)
                    copied[question_header(cell)[0]] = True
        (tmp_path / student).mkdir()
        (tmp_path / student / f"{student}.ipynb").write_text(json.dumps(sub))
        rows = grade(tmp_path / student, bundle, tmp_path / f"out-{student}", timeout=300,
                     jobs=1, roster=released.parent / "roster.csv")
        if student == "ada":
            assert all(row.points == row.max for row in rows), rows
            executed = json.loads((tmp_path / "out-ada" / "executed" / "ada.ipynb").read_text())
            printed = [out["text"] for cell in executed["cells"] for out in cell["outputs"]
                       if out.get("text", "").startswith("ANSWERS")]
            answers = ast.literal_eval(printed[-1].split("ANSWERS", 1)[1].strip())
    assert copied and all(row.points == (0 if row.question in copied else row.max)
                          for row in rows), [(r.question, r.points, r.reason) for r in rows]


def _copied(line, answers):
    """A one-line solution with the classmate's values written in as literals."""
    match = ONE_LINE.match(line)
    if not match:
        return line
    targets = [name.strip() for name in match["target"].split(",")]
    values = ", ".join(repr(answers[name]) for name in targets)
    return f"{match['target']} = {values}"
