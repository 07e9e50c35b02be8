"""Release: master notebooks in; student notebooks and the instructor's autograder bundle out.

Two steps: the pure split of each master (:mod:`.split`), then its verification runs in the
sandbox (:mod:`.verify`): expected values, calls and inputs made beside the master, trivial
answers refused, the master scoring full marks and its student notebook 0.
"""
import copy
import hashlib
import json
from pathlib import Path

from ...version import __version__
from ..master.notebook import notebook_meta, read_notebook
from ..sandbox.channel import check_sandbox
from ..master.variant import parameters
from .per_student import ClassRelease, folder_of, release_class, write_index
from .split import master_params, named_masters, private_cases, split_master, variant_source
from .verify import expected_values, self_check, variant_values

CHECKED_SEEDS = 8  # drawn variants a master with a # VARIANT cell is checked on


def release(source, out="_build/exercises", unsafe=False, hidden=None, seeds=CHECKED_SEEDS,
            roster=None, secret=None, variants=None):
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
    for it, if the master misses a point or its student notebook earns one.

    A master with a ``# VARIANT`` cell is also run on ``seeds`` variants drawn from the seeds
    1, 2, ...: on each, it must pass its cases and no trivial answer may pass one. Its
    bundle records the master's own variant (``params``). With ``roster`` (a class CSV) and
    ``secret`` (the course's secret file), each roster student also gets their own notebook,
    ``out/students/<student>/<master file>`` (listed in ``out/students/index.csv``), with
    their variant (one each, or one of ``variants``) and its keyed record, and the bundle
    each variant's expected values (:mod:`.per_student`). Returns the student notebooks'
    paths (the plain ones first).
    """
    masters, out = _masters(source), Path(out)
    if any(out.resolve() == master.parent.resolve() for master in masters):
        raise ValueError(f"out must not be the folder of the master notebooks, got {str(out)!r}")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 0:
        raise ValueError(f"seeds must be an int >= 0, got {seeds!r}")
    given = ClassRelease.read(roster, secret, variants) \
        if (roster, secret, variants) != (None, None, None) else None
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
    written, index = [], []
    for master, name, student, tests in split:
        nb, split_tests = read_notebook(master), copy.deepcopy(tests)
        student = _stamped(student, made[name])
        tests = expected_values(nb, tests, unsafe)
        self_check(name, nb, student, tests, unsafe)
        bundle = {"assignment": name, "release": made[name], "tests": tests}
        source = variant_source(nb, name)
        if source is not None:
            bundle["params"] = master_params(nb, name)
            for seed in range(1, seeds + 1):
                variant_values(nb, split_tests, parameters(source, seed, name), seed, unsafe)
        if given is not None and source is not None:
            classwide, rows = release_class(nb, name, split_tests, source, made[name], given,
                                            unsafe, _writer(out, master.name, nb, name,
                                                            made[name]))
            bundle.update(classwide)
            index += rows
        elif given is not None:  # no variants: everyone gets the same notebook
            index += [(row["student"], row["name"], row["email"], row["login"], "",
                       str(_write_student(out, master.name, row, student)))
                      for row in given.roster]
        _write_json(out / master.name, student)
        _write_json(out / "autograder" / f"{name}.json", bundle)
        written.append(out / master.name)
    if given is not None:
        write_index(out / "students" / "index.csv", index)
    return written + [Path(row[-1]) for row in index]


def _stamped(student, made):
    """A student notebook whose metadata records the release ``made``."""
    return dict(student, metadata=dict(student["metadata"], d2lattn=dict(
        notebook_meta(student), release=made)))


def _writer(out, file_name, nb, assignment, made):
    """What writes one roster student's own notebook of the master ``nb``."""
    def write(row, variant, signed):
        student, _ = split_master(nb, assignment, variant.params)
        student = _stamped(student, made)
        student["metadata"]["d2lattn"]["variant"] = {
            "student": row["student"], "variant": variant.key, "params": variant.params,
            "digest": signed}
        return _write_student(out, file_name, row, student)
    return write


def _write_student(out, file_name, row, notebook):
    """``out/students/<student>/<file_name>``, written."""
    folder = out / "students" / folder_of(row["student"])
    folder.mkdir(parents=True, exist_ok=True)
    _write_json(folder / file_name, notebook)
    return folder / file_name


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
