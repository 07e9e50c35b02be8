"""Release: master notebooks in; student notebooks and the instructor's autograder bundle out.

Two steps: the pure split of each master (:mod:`.split`), then its verification runs in the
sandbox (:mod:`.verify`): expected values, calls and inputs made beside the master, trivial
answers refused, the master scoring full marks and its student notebook 0.
"""
import hashlib
import json
from pathlib import Path

from ...version import __version__
from ..master.notebook import notebook_meta, read_notebook
from ..sandbox.channel import check_sandbox
from .split import named_masters, private_cases, split_master
from .verify import expected_values, self_check


def release(source, out="_build/exercises", unsafe=False, hidden=None):
    """Release every master notebook of ``source`` (a folder of .ipynb files, or one file).

    Writes ``out/<name>.ipynb``, the student version (solutions replaced by stubs, outputs and
    execution metadata cleared, MyST roles turned into plain text, tests cells replaced by
    ``check("<question>")`` cells, one hidden-source cell after the first code cell that
    registers the public tests, a hand-in section and ``# STUDENT`` cell at the end), and
    ``out/autograder/<assignment>.json``, the bundle ``{"assignment": ..., "release": ...,
    "tests": [...]}`` with every test, hidden cases and expected values included, in OK
    format; both record the release (:func:`stamp`), so that ``grade`` can warn about a
    notebook of another release. The assignment
    is the master's ``metadata.d2lattn.assignment``, or else its file name; the student
    notebook carries it. ``hidden``: an instructor's private file of extra hidden cases (see
    :func:`private_cases`), added to the bundle only. Runs each master in the sandbox
    (``unsafe``: see :func:`d2lattn.grading.grade`) and raises ValueError, writing nothing
    for it, if the master misses a point or its student notebook earns one. Returns the
    student notebooks' paths.
    """
    masters, out = _masters(source), Path(out)
    if any(out.resolve() == master.parent.resolve() for master in masters):
        raise ValueError(f"out must not be the folder of the master notebooks, got {str(out)!r}")
    named = named_masters(masters)
    split = [(master, name, *split_master(nb, name)) for master, nb, name in named]
    made = {name: stamp(name, tests) for _, name, _, tests in split}  # before private cases
    if hidden is not None:
        extra = private_cases(hidden, {name: tests for _, name, _, tests in split})
        for _, name, _, tests in split:
            for test in tests:
                test["suites"][0]["cases"] += extra.get((name, test["name"]), [])
    check_sandbox(unsafe)
    (out / "autograder").mkdir(parents=True, exist_ok=True)
    written = []
    for master, name, student, tests in split:
        student = dict(student, metadata=dict(student["metadata"], d2lattn=dict(
            notebook_meta(student), release=made[name])))
        tests = expected_values(read_notebook(master), tests, unsafe)
        self_check(name, read_notebook(master), student, tests, unsafe)
        _write_json(out / master.name, student)
        _write_json(out / "autograder" / f"{name}.json",
                    {"assignment": name, "release": made[name], "tests": tests})
        written.append(out / master.name)
    return written


def stamp(name, tests):
    """What a release records in the student notebook and the bundle: d2lattn's version and
    the bundle's id, a digest of the master's questions and cases as split: not the expected
    values, which may differ in their last digits from one machine to another, nor an
    instructor's private cases, so that the student notebook is the same with or without
    them."""
    digest = hashlib.sha256(json.dumps([name, tests], sort_keys=True).encode()).hexdigest()
    return {"version": __version__, "bundle": digest[:12]}


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


def _write_json(path, data):
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
