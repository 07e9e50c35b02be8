"""d2lattn.grading.batch: grading a folder, with a suite of cheating submissions.

The batch tests grade one folder once against the sample master (tests/data/grading/sample.ipynb)
as conftest's sample_release released it: the master, its student version, issue 6's broken
submissions, issue 14's cheats (each built below as a real notebook) and hostile folder entries,
each in its own sandbox."""
import ast
import copy
import csv
import hashlib
import json
import os
import re
import time
from pathlib import Path

import pytest

import d2lattn
from d2lattn.grading import grade, limits
from d2lattn.grading.__main__ import main
from d2lattn.grading.batch.grade_folder import load_bundle
from d2lattn.grading.batch.gradebook import Exports
from d2lattn.grading.batch.options import GradeOptions
from d2lattn.grading.batch.gradebook import safe_field as _safe_field
from d2lattn.grading.batch.submissions import safe_id as _student_id
from d2lattn.grading.master.notebook import cell_source
from grading_support import (QUESTIONS, SAMPLE, cell_index, code_cell, hidden_lines, master,
                             needs_sandbox, processes_with)


# --- grading a batch: issue 6's broken submissions and issue 14's cheats -------------------

TIMEOUT, MAX_OUTPUT, MAX_BYTES = 15, 100_000, 2_000_000
TOKEN = f"d2lattn-cheat-{os.getpid()}-{int(time.time())}"
CHEAT = '''# QUESTION q1_softmax points=2 forbid=d2lattn.masked_softmax
from d2lattn import masked_softmax
from mxnet import np as mxnp

def softmax(X):
    X = np.asarray(X, dtype=float)
    out = masked_softmax(mxnp.array(X.reshape(1, -1, X.shape[-1])), None)
    return out.asnumpy().reshape(X.shape)'''
FAKE_RESULTS = '''from IPython.display import display
display({"application/vnd.d2lattn.grading+json": {"nonce": "guess", "results": {}}}, raw=True)
def publish_results(*args):
    pass
run_test = check = register = publish_results'''

# The reference under another name: every route to d2lattn.masked_softmax, none of them
# visible to a static scan of the question's cells; softmax uses whichever route works.
ROUTES = '''# QUESTION q1_softmax points=2 forbid=d2lattn.masked_softmax
import gc, importlib, inspect, operator, sys
import d2lattn
from mxnet import np as mxnp

name = "masked" + "_soft" + "max"
found = {}


def route(label, get):
    try:
        found[label] = get()
    except Exception as err:
        found[label] = err


def from_source(path):
    space = {"__name__": "d2lattn.attention_copy", "__package__": "d2lattn"}
    exec(compile(open(path).read(), path, "exec"), space)
    return space[name]


route("getattr", lambda: getattr(d2lattn, name))
route("importlib", lambda: getattr(importlib.import_module("d2lattn.attention"), name))
route("__import__", lambda: vars(__import__("d2lattn.attention").attention)[name])
route("exec", lambda: (exec("from d2lattn import " + name + " as stolen", globals()), stolen)[1])
route("sys.modules", lambda: sys.modules["d2lattn.attention"].__dict__[name])
route("vars", lambda: vars(d2lattn)[name])
route("attrgetter", lambda: operator.attrgetter("attention." + name)(d2lattn))
route("magic", lambda: ms_magic)
route("unparseable cell", lambda: ms_unparse)
route("source file", lambda: from_source(d2lattn.attention.__file__))
route("inspect", lambda: from_source(inspect.getsourcefile(d2lattn.attention)))
route("reload", lambda: getattr(importlib.reload(sys.modules["d2lattn.attention"]), name))
route("repository", lambda: from_source(REAL_SOURCE))
route("gc", lambda: [o for o in gc.get_objects() if getattr(o, "__name__", "") == name
                     and "valid_lens" in getattr(getattr(o, "__code__", None), "co_varnames", ())
                     and o.__code__.co_argcount == 2][-1])


def softmax(X):
    X = np.asarray(X, dtype=float)
    error = None
    route("another question's cell", lambda: ms_other)  # a cell that runs after this one
    for f in [f for f in found.values() if callable(f)]:
        try:
            return f(mxnp.array(X.reshape(1, -1, X.shape[-1])), None).asnumpy().reshape(X.shape)
        except Exception as err:
            error = err
    raise error'''

ROUTE_LABELS = re.findall(r'^ *route\("([^"]+)"', ROUTES, re.M)
FOUND = '''route("another question's cell", lambda: ms_other)
print("routes that gave a callable:", sorted(k for k, f in found.items() if callable(f)))'''

JUDGES = '''import builtins, doctest, json, os, sys, types
import numpy
numpy.allclose = numpy.array_equal = lambda *args, **kwargs: True
doctest.DocTestParser.parse = lambda self, *args, **kwargs: []
import IPython.display
IPython.display.display = lambda *args, **kwargs: None
onp = types.ModuleType("onp")
onp.allclose = lambda *args, **kwargs: True
FORGED = [dict(case=i, values=[{"t": "bool", "v": True}] * 3, wants=[], raised=None, at=None,
               passed=True, points=100) for i in range(40)]
FORGED += [{"phase_done": True}, {"cells_done": None}, {"results": "all passed"}]


def forge(*args):
    for fd in range(1, 40):
        for record in FORGED:
            try:
                os.write(fd, (json.dumps(record) + "\\n").encode())
            except OSError:
                pass


get_ipython().events.register("pre_run_cell", forge)
get_ipython().events.register("post_run_cell", forge)
forge()
_compile = builtins.compile
builtins.compile = lambda source, *args, **kwargs: _compile("True", "<forged>", "eval")'''

READER = '''import glob, importlib.util, json, os, sys
found = []
home = os.path.dirname(importlib.util.find_spec("d2lattn").origin)
places = [os.path.join(home, "..", "**", "*.ipynb"), os.path.join(home, "..", "**", "*.json"),
          SUBMISSIONS + "/*.ipynb", BUNDLE + "/*.json", SAMPLE_PATH, "/tmp/**/*.ipynb"]
for pattern in places:
    for path in glob.glob(pattern, recursive=True):
        try:
            found.append(open(path).read())
        except OSError:
            pass
for path in glob.glob("/proc/*/cmdline") + glob.glob("/proc/*/environ"):
    try:
        found.append(open(path, "rb").read().decode(errors="replace"))
    except OSError:
        pass
solutions = [text for text in found if "BEGIN SOLUTION" in text or "answer_q3 = 0.75" in text]
for text in solutions:  # a master, or a classmate's answers: run its code cells here
    for cell in json.loads(text)["cells"]:
        if cell["cell_type"] == "code":
            exec("".join(cell["source"]), globals())
bundles = [json.loads(text) for text in found if '"expected"' in text]
for bundle in bundles:
    answer_q3 = bundle["tests"][2]["suites"][0]["cases"][-1]["expected"][0]["v"]


def softmax(X):
    frame, seen = sys._getframe(1), []
    while frame is not None:  # the running case's expected value, anywhere up the stack
        seen += [v for v in frame.f_locals.values() if isinstance(v, dict) and "expected" in v]
        frame = frame.f_back
    if seen:
        return seen[0]["expected"][0]["v"]
    raise NotImplementedError
print(len(solutions), "solutions,", len(bundles), "bundles found")'''

ESCAPER = '''import os, signal, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)  # TOKEN"],
                 start_new_session=True)
if os.fork() == 0:  # a daemon that tries to outlive the run and rewrite the grades
    os.setsid()
    if os.fork() == 0:
        time.sleep(2)
        for place in (OUT, "/tmp", HOST_TMP):
            try:
                open(os.path.join(place, "escaped-TOKEN"), "w").write("x")
                open(os.path.join(place, "grades.csv"), "a").write("escaper,q1_softmax,99,2,x\\n")
            except OSError:
                pass
        os._exit(0)
    os._exit(0)
STARTUP = "softmax = lambda X: 0  # TOKEN\\nanswer_q3 = 0.75\\n"
for home in (os.path.expanduser("~"), HOST_HOME, os.environ.get("IPYTHONDIR", "/nonexistent")):
    for folder in (os.path.join(home, ".ipython", "profile_default", "startup"),
                   os.path.join(home, "profile_default", "startup")):
        try:
            os.makedirs(folder, exist_ok=True)
            open(os.path.join(folder, "00-TOKEN.py"), "w").write(STARTUP)
        except OSError:
            pass
for path in (BUNDLE_FILE, SAMPLE_PATH):
    try:
        open(path, "a").write("TOKEN")
    except OSError:
        pass
for pid in (GRADER_PID, os.getppid()):
    try:
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM if pid == GRADER_PID else signal.SIGCONT)
    except OSError:
        pass'''

LIAR = {"q1_softmax": '''class AlwaysEqual:
    def __eq__(self, other):
        return True
    def __repr__(self):
        return "[0.25, 0.25, 0.25, 0.25]"
    def asnumpy(self):
        return self

def softmax(X):
    return AlwaysEqual()''',
        "q2_nw": '''import numpy
class LyingArray(numpy.ndarray):
    def tolist(self):
        return [3.0, 3.0]
    def __eq__(self, other):
        return numpy.ones(numpy.shape(other), bool)

def nw_predict(x_train, y_train, x_query, bandwidth=1.0):
    return numpy.zeros(len(x_query)).view(LyingArray)''',
        "q3_weight": '''class LyingFloat(float):
    def __eq__(self, other):
        return True
    __hash__ = float.__hash__
    def __float__(self):
        return 0.75
    def __repr__(self):
        return "0.75"

answer_q3 = LyingFloat(0.1)'''}

LEAK = '''def softmax(X):
    with open("/tmp/seen.txt", "a") as log:
        log.write(repr(X.tolist()) + ";")
    return open("/tmp/seen.txt").read()'''


def edited(nb, edit):
    nb = copy.deepcopy(nb)
    edit(nb["cells"])
    return nb


def answered(nb, question, source):
    """``nb`` with the cell of ``question`` holding ``source`` (its header kept)."""
    def edit(cells):
        index = cell_index(nb, question)
        header = cell_source(cells[index]).splitlines()[0]
        cells[index] = dict(cells[index], source=f"{header}\n{source}")
    return edited(nb, edit)


def literal(text, **names):
    """``text`` with each NAME replaced by the repr of its value (TOKEN by the token)."""
    for name in sorted(names, key=len, reverse=True):
        value = names[name]
        text = text.replace(name, repr(value if isinstance(value, int) else str(value)))
    return text.replace("TOKEN", TOKEN)


def submissions(folder, bundle, out):
    """Every broken and cheating submission, and hostile folder entries, in ``folder``."""
    base, student_nb = master(), json.loads((bundle.parent / "sample.ipynb").read_text())
    q1, q2 = cell_index(base, "q1_softmax"), cell_index(base, "q2_nw")
    places = dict(SUBMISSIONS=folder, BUNDLE=bundle, SAMPLE_PATH=SAMPLE, OUT=out,
                  HOST_TMP="/tmp", HOST_HOME=Path.home(), BUNDLE_FILE=bundle / "sample.json",
                  GRADER_PID=os.getpid(), REAL_SOURCE=Path(d2lattn.__file__).parent /
                  "attention.py")
    def other_question_route(cells):  # an import in q2's cell; a last cell lists the routes
        cells[q2] = dict(cells[q2], source=cell_source(cells[q2]) + "\nfrom d2lattn import "
                         "masked_softmax as ms_other")
        cells.append(code_cell(FOUND))
    routes = edited(answered(base, "q1_softmax", literal(ROUTES.split("\n", 1)[1], **places)),
                    other_question_route)

    def unclaimed_routes(cells):  # cells that answer no question, before q1
        cells.insert(q1, code_cell('import d2lattn\n'
                                   '%time ms_magic = getattr(d2lattn, "masked" + "_softmax")'))
        cells.insert(q1, code_cell("import d2lattn\nms_unparse = d2lattn.masked_softmax\n"
                                   "files = !ls"))
    routes = edited(routes, unclaimed_routes)
    notebooks = {
        "master": base, "student": student_nb,
        "raises": edited(base, lambda c: c[q2].update(source="# QUESTION q2_nw\n1 / 0")),
        "dies": edited(base, lambda c: c.insert(q1 + 1, code_cell("import os\nos._exit(1)"))),
        "loops": edited(base, lambda c: c.insert(q1 + 1, code_cell("while True:\n    pass"))),
        "late_loop": edited(base, lambda c: c.insert(q2 + 1, code_cell("while True:\n    pass"))),
        "prints": edited(base, lambda c: c.insert(2, code_cell("print('x' * 5_000_000)"))),
        "deleted": edited(base, lambda c: c.pop(q2)),
        "reordered": edited(base, lambda c: c.reverse()),
        "forbidden": edited(base, lambda c: c[q1].update(source=CHEAT)),
        "tampered": edited(student_nb, lambda c: c.append(code_cell(FAKE_RESULTS))),
        "empty_notebook": dict(base, cells=[]),
        "routes": routes,
        "judges": edited(student_nb, lambda c: c.append(code_cell(JUDGES))),
        "reader": edited(student_nb, lambda c: c.append(code_cell(literal(READER, **places)))),
        "escaper": edited(base, lambda c: c.append(code_cell(literal(ESCAPER, **places)))),
        "killer": edited(base, lambda c: c.append(code_cell(
            "import os\nfor pid in (os.getppid(), 1, -1, os.getpid()):\n    try:\n"
            "        os.kill(pid, 9)\n    except OSError:\n        pass"))),
        "stopper": edited(base, lambda c: c.append(code_cell(
            "import os, signal\nfor pid in (os.getppid(), os.getpid()):\n    try:\n"
            "        os.kill(pid, signal.SIGSTOP)\n    except OSError:\n        pass"))),
        "mime_flood": edited(base, lambda c: c.append(code_cell(
            "from IPython.display import display\n"
            "display({'text/html': 'x' * 30_000_000, 'text/plain': 'y' * 3_000_000}, raw=True)\n"
            "print('z' * 3_000_000)\nimport os\nos.write(1, b'w' * 30_000_000)"))),
        "channel_flood": edited(base, lambda c: c.append(code_cell(
            "import os\nline = b'{\"cell\": 1, \"text\": \"' + b'v' * 1_000_000 + b'\"}\\n'\n"
            "for fd in range(3, 12):\n    try:\n        for _ in range(100):\n"
            "            os.write(fd, line)\n    except OSError:\n        pass"))),
        "liar": student_nb,
        "leak": answered(student_nb, "q1_softmax", LEAK),
        "zz_after": student_nb,  # graded after the escaper: must still score 0
    }
    for question, source in LIAR.items():
        notebooks["liar"] = answered(notebooks["liar"], question, source)
    for name, nb in notebooks.items():
        (folder / f"{name}.ipynb").write_text(json.dumps(nb))
    (folder / "not_json.ipynb").write_text('{"cells": [{"cell_type": "code", "sour')
    (folder / "empty_file.ipynb").write_text("")
    (folder / "unzipped").mkdir()
    (folder / ".DS_Store").write_text("ignored: hidden files are not submissions")
    # hostile names and entries
    text = json.dumps(base)
    fd = os.open(os.path.join(os.fsencode(folder), b"caf\xe9.ipynb"), os.O_CREAT | os.O_WRONLY)
    os.write(fd, text.encode())
    os.close(fd)
    (folder / ("n" * 249 + ".ipynb")).write_text(json.dumps(student_nb))
    (folder / "alice.ipynb").write_text(text)
    (folder / "alice").mkdir()
    (folder / "bad\nname.ipynb").write_text(json.dumps(student_nb))
    (folder / "=HYPERLINK(1).ipynb").write_text(json.dumps(student_nb))
    (folder / "link.ipynb").symlink_to(SAMPLE)
    os.mkfifo(folder / "fifo.ipynb")
    (folder / "huge.ipynb").write_text(" " * (MAX_BYTES + 1))
    (folder / "notes.txt").write_text(text)
    return folder


def host_state():
    """What a submission must not change on the grader's machine."""
    ipython = Path.home() / ".ipython"
    profile = sorted(str(p) for p in ipython.rglob("*")) if ipython.exists() else []
    return {"profile": profile, "tmp": sorted(p.name for p in Path("/tmp").iterdir()
                                               if TOKEN in p.name),
            "sample": hashlib.sha256(SAMPLE.read_bytes()).hexdigest()}






@pytest.fixture(scope="module")
def batch(bundle, tmp_path_factory):
    """Grade every submission once: (rows, out folder, log lines, seconds, host states)."""

    tmp_path = tmp_path_factory.mktemp("grading")
    out = tmp_path / "grades"
    (tmp_path / "submissions").mkdir()
    folder = submissions(tmp_path / "submissions", bundle, out)
    before, digest, log = host_state(), hashlib.sha256((bundle / "sample.json").read_bytes()), []
    start = time.monotonic()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(limits, "STARTUP_SECONDS", 5)  # the stopper waits for this beyond TIMEOUT
        rows = grade(folder, bundle, out, timeout=TIMEOUT, case_timeout=2,
                     max_output=MAX_OUTPUT, log=log.append, max_bytes=MAX_BYTES)
    seconds = time.monotonic() - start
    time.sleep(3)  # longer than the escaper's daemon waits before it writes
    after = host_state()
    return rows, out, log, seconds, (before, after, digest.hexdigest(),
                                     hashlib.sha256((bundle / "sample.json").read_bytes())
                                     .hexdigest())


def ids(rows):
    return {row.student for row in rows}


def by_student(rows, name):
    return {row.question: row for row in rows if row.student == name}


def student_named(rows, start):
    match, = [s for s in ids(rows) if s.startswith(start)]
    return match


LOOPED = rf"time limit of {TIMEOUT} s reached in code cell \d+; later cells did not run"
FULL = {q: (p, r"^\d of \d cases passed( \(format checks: \d of \d\))?$")
        for q, p in QUESTIONS.items()}
ZERO = {q: (0, r"^0 of \d cases passed") for q in QUESTIONS}
DIED = {q: (0, r"the sandbox ended while its cells ran") for q in QUESTIONS}
EXPECTED = {
    "master": FULL, "reordered": FULL, "escaper": FULL, "mime_flood": FULL,
    "student": {q: (0, r"^0 of \d cases passed( \(format checks: 0 of 1\))?; failed: public ")
                for q in QUESTIONS},
    "tampered": ZERO, "judges": ZERO, "reader": ZERO, "liar": ZERO, "leak": ZERO,
    "zz_after": ZERO,
    "raises": dict(FULL, q2_nw=(0, r"^0 of 4 cases passed")),
    "dies": DIED, "channel_flood": {q: (0, "the sandbox ended") for q in QUESTIONS},
    # neither can kill or stop its runner, PID 1 of its namespace: their answers are graded
    "killer": FULL, "stopper": FULL,
    "loops": {"q1_softmax": (2, rf"^4 of 4 cases passed; {LOOPED}$"),
              # every group stops before the loop: the answers after it never ran
              "q2_nw": (0, rf"^0 of 4 cases passed; failed: .*; {LOOPED}$"),
              "q3_weight": (0, rf"^0 of 1 cases passed \(format checks: 0 of 1\); failed: .*; "
                               rf"{LOOPED}$")},
    # q2's group runs after q1's, whose time the loop took: q2 still keeps its points
    "late_loop": {"q1_softmax": (2, rf"^4 of 4 cases passed; {LOOPED}$"),
                  "q2_nw": (3, rf"^4 of 4 cases passed; {LOOPED}$"),
                  "q3_weight": (0, rf"^0 of 1 cases passed \(format checks: 0 of 1\); failed: "
                                   rf".*; {LOOPED}$")},
    "prints": FULL,
    "deleted": dict(FULL, q2_nw=(0, r"^question cell missing$")),
    "forbidden": dict(FULL, q1_softmax=(0, r"^uses d2lattn.masked_softmax \(code cell 2, line 2\), "
                                           r"which this question forbids$")),
    "routes": dict(FULL, q1_softmax=(0, r"^0 of 4 cases passed; failed: .*; called "
                                        r"d2lattn.masked_softmax, which this question forbids")),
    "empty_notebook": {q: (0, r"^question cell missing$") for q in QUESTIONS},
    "not_json": {q: (0, r"^not valid JSON \(") for q in QUESTIONS},
    "empty_file": {q: (0, r"^empty file$") for q in QUESTIONS},
}
HOSTILE = {  # entry: (its student id, its scores)
    "caf\\xe9.ipynb": (r"caf__[0-9a-f]{8}", FULL), "n * 249 + .ipynb": (r"n{64}_[0-9a-f]{8}", ZERO),
    "alice.ipynb": ("alice", FULL),
    "bad\\nname.ipynb": (r"bad_name_[0-9a-f]{8}", ZERO),
    "=HYPERLINK(1).ipynb": (r"s_HYPERLINK_1__[0-9a-f]{8}", ZERO),
    "link.ipynb": ("link", {q: (0, r"^a symbolic link, not graded$") for q in QUESTIONS}),
    "fifo.ipynb": ("fifo", {q: (0, r"^not a regular file$") for q in QUESTIONS}),
    "huge.ipynb": ("huge", {q: (0, rf"^larger than {MAX_BYTES} bytes$") for q in QUESTIONS}),
}
SKIPPED = {"unzipped/": "a folder without a notebook", "alice/": "a folder without a notebook",
           "notes.txt": "not a notebook (.ipynb)"}


def test_batch_gives_every_entry_a_row_per_question_and_a_safe_unique_id(batch):
    rows, *_ = batch
    assert len(ids(rows)) == len(EXPECTED) + len(HOSTILE)
    assert set(EXPECTED) <= ids(rows)
    assert sorted((row.student, row.question) for row in rows) == \
        sorted((student, q) for student in ids(rows) for q in QUESTIONS)
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,72}", s) for s in ids(rows))
    assert all(row.max == QUESTIONS[row.question] and 0 <= row.points <= row.max
               and row.reason for row in rows)


@pytest.mark.parametrize("student_name", sorted(EXPECTED))
def test_batch_scores_and_reasons(batch, student_name):
    rows, *_ = batch
    got = by_student(rows, student_name)
    for question, (points, reason) in EXPECTED[student_name].items():
        assert got[question].points == points, got[question]
        assert re.search(reason, got[question].reason), got[question]


@pytest.mark.parametrize("entry", sorted(HOSTILE))
def test_hostile_folder_entries_get_safe_ids_and_never_hang_or_follow_links(batch, entry):
    rows, *_ = batch
    pattern, expected = HOSTILE[entry]
    names = [s for s in ids(rows) if re.fullmatch(pattern, s)]
    assert len(names) == 1, names
    got = by_student(rows, names[0])
    for question, (points, reason) in expected.items():
        assert got[question].points == points and re.search(reason, got[question].reason), \
            got[question]


def test_entries_that_are_not_notebooks_are_skipped_not_students(batch):
    rows, out, *_ = batch
    with open(out / "skipped.csv", newline="") as table:
        assert {r["entry"]: r["why"] for r in csv.DictReader(table)} == SKIPPED
    assert not ids(rows) & {"notes.txt", "unzipped", "alice_"}


def test_every_route_to_a_forbidden_object_reaches_a_stub(batch):
    rows, out, *_ = batch
    executed = json.loads((out / "executed" / "routes.ipynb").read_text())
    printed = "".join(o["text"] for cell in executed["cells"] for o in cell["outputs"])
    found = re.search(r"routes that gave a callable: (\[.*\])", printed)[1]
    # every route but the repository's file and gc found an object: a stub
    assert set(ast.literal_eval(found)) == set(ROUTE_LABELS) - {"repository", "gc"}


def test_cheats_find_no_answer_anywhere(batch):
    rows, out, *_ = batch
    executed = json.loads((out / "executed" / "reader.ipynb").read_text())
    printed = "".join(o["text"] for cell in executed["cells"] for o in cell["outputs"])
    assert "0 solutions, 0 bundles found" in printed


def test_no_cheat_leaves_a_process_a_file_or_a_profile_change_behind(batch):
    rows, out, log, seconds, (before, after, digest, digest_after) = batch
    assert processes_with(TOKEN) == []
    assert after == before and digest_after == digest
    assert not list(out.rglob(f"*{TOKEN}*")) and not (out / "escaped").exists()
    with open(out / "grades.csv", newline="") as table:
        assert "escaper,q1_softmax,99" not in table.read()


def test_batch_writes_a_csv_no_reader_can_misread(batch):
    rows, out, *_ = batch
    text = (out / "grades.csv").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) == len(rows) + 1  # one line per row: no field holds a line break
    with open(out / "grades.csv", newline="") as table:
        written = list(csv.reader(table))
    assert written[0] == ["student", "question", "points", "max", "reason"]
    assert [row[:4] for row in written[1:]] == [
        [r.student, r.question, f"{r.points:g}", f"{r.max:g}"] for r in rows]
    assert not any(field[:1] in "=+-@" for row in written for field in row if field)


def test_safe_field_and_student_id():
    assert _safe_field("=1+1") == "'=1+1" and _safe_field("a\nb\r\nc") == "a b c"
    assert _student_id("alice.ipynb", set()) == "alice"
    assert _student_id("alice.ipynb", {"alice"}).startswith("alice_")
    assert re.fullmatch(r"s-x_[0-9a-f]{8}", _student_id("-x.ipynb", set()))


def test_feedback_shows_failing_public_cases_and_names_hidden_ones_by_message(batch, bundle):
    rows, out, *_ = batch
    files = {path.stem for path in (out / "feedback").iterdir()}
    assert files == ids(rows)
    text = (out / "feedback" / "raises.md").read_text()
    assert text.startswith("# sample: raises\n\nScore: 3 of 6 points.\n")  # no timing
    assert "Cells that raised an error:\n\n```text\ncode cell 3 (the answer to q2_nw): " \
           "ZeroDivisionError: division by zero\n```\n" in text
    assert "## q2_nw: 0 of 3 points" in text
    assert "      >>> nw_predict(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([0.5]))\n" \
           "      expected: [0.5]\n" \
           "      received: raised NameError: name 'nw_predict' is not defined" in text
    assert "  hidden cases: 0 of 2 passed\n  hidden case 1 FAILED: a query on a training point\n" \
           "  hidden case 2 FAILED: far from the data with a narrow bandwidth: no 0 / 0\n" in text
    assert "hidden case 1 (a query on a training point), hidden case 2 (far from the data" in \
        by_student(rows, "raises")["q2_nw"].reason
    assert "  hidden case 1 passed: large scores do not overflow\n" in \
        (out / "feedback" / "master.md").read_text()
    tests = load_bundle(bundle).tests
    for path in (out / "feedback").iterdir():
        assert not any(line in path.read_text() for line in hidden_lines(tests)), path
    leak = (out / "feedback" / "leak.md").read_text()
    assert "received: '[0.0, 0.0, 0.0, 0.0];'" in leak and "1000" not in leak


def test_executed_notebooks_keep_capped_outputs(batch):
    _, out, *_ = batch
    for name in ("prints", "mime_flood", "channel_flood"):
        assert (out / "executed" / f"{name}.ipynb").stat().st_size < MAX_OUTPUT + 20_000, name
    printed = json.loads((out / "executed" / "prints.ipynb").read_text())
    assert len(printed["cells"]) == 5                      # the master's 4 code cells + print
    assert not (out / "executed" / "not_json.ipynb").exists()


def test_batch_time_per_submission(batch):
    """One line per student: a submission costs about two sandbox starts here (its questions
    forbid two different sets of objects), a loop its time limit."""
    rows, out, log, seconds, _ = batch
    times = {line.split(":")[0]: float(re.search(r"points in ([\d.]+) s$", line)[1])
             for line in log if re.search(r"points in ([\d.]+) s$", line)}
    print(f"\ngraded {len(times)} entries in {seconds:.1f} s:",
          ", ".join(f"{name} {t:.1f} s" for name, t in sorted(times.items())))
    assert set(times) == ids(rows)
    assert times["loops"] >= TIMEOUT and times["not_json"] < 0.5


@needs_sandbox
def test_a_grader_failure_on_one_submission_does_not_stop_the_batch(tmp_path, monkeypatch,
                                                                    bundle):
    from d2lattn.grading import one_notebook

    def fail(*args, **kwargs):
        raise RuntimeError("sandbox failed to start")

    monkeypatch.setattr(one_notebook, "run_submission", fail)
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "a.ipynb").write_text(SAMPLE.read_text())
    (folder / "b.ipynb").write_text("{")
    rows = grade(folder, bundle, tmp_path / "out")
    assert [(r.student, r.reason) for r in rows] == \
        [("a", "grader error: RuntimeError")] * 3 + [("b", rows[3].reason)] * 3
    assert rows[3].reason.startswith("not valid JSON")
    # neither is the student's 0: both flagged, both exported blank
    with open(tmp_path / "out" / "gradebook.csv", newline="") as file:
        assert [(r["student"], r["total"], r["status"]) for r in csv.DictReader(file)] == [
            ("a", "0", "no # STUDENT cell; not run"), ("b", "0", "unreadable")]
    with open(tmp_path / "out" / "canvas.csv", newline="") as file:
        assert [r["sample"] for r in csv.DictReader(file)] == ["6", "", ""]


def test_grade_rejects_bad_arguments(tmp_path):
    bundle = tmp_path / "rel" / "autograder"
    bundle.mkdir(parents=True)
    (bundle / "sample.json").write_text(json.dumps({"assignment": "sample", "tests": []}))
    with pytest.raises(ValueError, match="timeout must be a positive finite number, got 0"):
        grade(tmp_path, bundle, tmp_path / "out", timeout=0)
    with pytest.raises(ValueError, match="max_output must be an int >= 1, got 0.5"):
        grade(tmp_path, bundle, tmp_path / "out", max_output=0.5)
    with pytest.raises(TypeError, match="log must be callable or None, got 'x'"):
        grade(tmp_path, bundle, tmp_path / "out", log="x")
    with pytest.raises(ValueError, match=r"shard must be \(i, n\) with 1 <= i <= n, got \(3, 2\)"):
        grade(tmp_path, bundle, tmp_path / "out", GradeOptions(timeout=5), shard=(3, 2))
    with pytest.raises(TypeError, match=r"options must be a GradeOptions, got \{'timeout': 5\}"):
        grade(tmp_path, bundle, tmp_path / "out", {"timeout": 5})
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'time_out'"):
        grade(tmp_path, bundle, tmp_path / "out", time_out=5)
    with pytest.raises(ValueError, match="bundle must be the autograder folder written by "):
        grade(tmp_path, tmp_path / "missing", tmp_path / "out")
    with pytest.raises(ValueError, match="submissions must be a folder, got"):
        grade(tmp_path / "missing", bundle, tmp_path / "out")
    with pytest.raises(ValueError, match=r"assignment must be one of the bundle's \['sample'\]"):
        grade(tmp_path, bundle, tmp_path / "out", assignment="ch9")
    (bundle / "other.json").write_text(json.dumps({"assignment": "other", "tests": []}))
    with pytest.raises(ValueError, match=r"assignment must be one of the bundle's \['other', "
                                         r"'sample'\], got None: the notebooks name none"):
        grade(tmp_path, bundle, tmp_path / "out")


def test_grade_options_hold_each_default_once_and_the_command_line_passes_them_by_name(
        tmp_path, monkeypatch):
    defaults = GradeOptions()
    assert (defaults.timeout, defaults.case_timeout, defaults.max_output, defaults.max_bytes,
            defaults.max_code) == (limits.NOTEBOOK_SECONDS, limits.CASE_SECONDS,
                                   limits.MAX_OUTPUT, limits.MAX_BYTES, limits.MAX_CODE)
    assert defaults.limits == {"timeout": 300.0, "case_timeout": 10.0, "max_output": 1_000_000}
    assert GradeOptions(identities=None).identities == {}
    with pytest.raises(TypeError, match=r"exports must be an Exports, got 'Ch1 \(1\)'"):
        GradeOptions(exports="Ch1 (1)")
    given = []
    monkeypatch.setattr("d2lattn.grading.__main__.grade",
                        lambda folder, bundle, out, options: given.append(options) or [])
    main(["grade", str(tmp_path), "--out", str(tmp_path / "out"), "--timeout", "20",
          "--canvas-assignment", "Ch 1 (12)", "--identity", "a.ipynb=S1", "--shard", "1/2"])
    options, = given
    assert options == GradeOptions(
        timeout=20, exports=Exports("Ch 1 (12)"), identities={"a.ipynb": "S1"}, shard=(1, 2),
        log=print, progress=True)  # every other field its default


@needs_sandbox
def test_command_line_grades_and_unsafe_mode_gives_the_same_verdict(tmp_path, capsys, bundle):
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "broken.ipynb").write_text("not a notebook")
    (folder / "master.ipynb").write_text(SAMPLE.read_text())
    main(["grade", str(folder), "--bundle", str(bundle), "--out", str(tmp_path / "grades"),
          "--timeout", "20"])
    out = capsys.readouterr().out
    assert sorted(re.findall(r"^(\w+): (\d) of 6 points in [\d.]+ s$", out, re.M)) == [
        ("broken", "0"), ("master", "6")]
    assert out.endswith("broken: new, 0 of 6\nmaster: new, 6 of 6\n"
                        "0 unchanged, 0 kept from earlier runs\n"
                        f"graded 2 submissions (6 rows); {tmp_path / 'grades'}/grades.csv holds "
                        "6 rows of 2 students\n")
    (folder / "broken.ipynb").unlink()  # a re-grade of one: the file holds every row
    main(["grade", str(folder), "--bundle", str(bundle), "--out", str(tmp_path / "grades"),
          "--timeout", "20"])
    assert capsys.readouterr().out.endswith(
        f"graded 1 submission (3 rows); {tmp_path / 'grades'}/grades.csv holds 6 rows of 2 "
        "students\n")
    main(["grade", str(folder), "--bundle", str(bundle), "--out", f"{tmp_path / 'unsafe'}/",
          "--timeout", "20", "--unsafe"])
    captured = capsys.readouterr()
    assert "master: 6 of 6 points" in captured.out and "WITHOUT a sandbox" in captured.err
    assert f"; {tmp_path / 'unsafe'}/grades.csv holds" in captured.out  # not 'unsafe//grades'



def test_the_reason_and_the_feedback_count_and_name_cases_alike(batch):
    """A format check is counted apart and named 'format check' in both reports (the reason
    said '0 of 1 cases passed' and listed two failures; the feedback called the check a case)."""
    rows, out, *_ = batch
    reason = by_student(rows, "student")["q3_weight"].reason
    feedback = (out / "feedback" / "student.md").read_text()
    assert reason.startswith("0 of 1 cases passed (format checks: 0 of 1); failed: public "
                             "format check 1 (format: the weight is a float), hidden case 1 ")
    assert "q3_weight: no public case earns points here (format checks: 0 of 1)\n" \
           "  format check 1 FAILED: format: the weight is a float\n" in feedback
