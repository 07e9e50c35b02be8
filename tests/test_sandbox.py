"""The grader's sandbox as an operating-system boundary (issue 19): each hole measured by its
effect (a key read, a stash found, an honest neighbour's score, the grader's memory, a hidden
case or a forged line in a report), beside an honest control in the same run."""
import csv
import ctypes
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from d2lattn.grading import grade, limits, release
from d2lattn.grading.forbid import shadow
from d2lattn.grading.master import cases
from d2lattn.grading.sandbox import channel as sandbox
from d2lattn.grading.__main__ import main
from d2lattn.grading.sandbox.session import NO_RUN, run_submission
from d2lattn.grading.master.values import one_line
from d2lattn.grading.sandbox import runner
from grading_support import call_case, needs_sandbox, processes_gone

pytestmark = needs_sandbox
SAMPLE = Path(__file__).parent / "data" / "grading" / "sample.ipynb"
TOKEN = f"d2lattn-{os.getpid()}-{int(time.time())}"


def syscall_numbers(*names):
    import pyseccomp

    return {name: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) for name in names}


def run(code, tmp_path, groups=1, examples=(("result", True),), timeout=30):
    """Run ``code`` in one sandbox, once per group (each forbidding something else); the
    per-group ``(values, raised, notes)`` of one case evaluating ``examples``."""
    shadows = shadow.Shadows(tmp_path / "shadows")
    forbids = [(), ("d2lattn.masked_softmax",), ("d2lattn.DotProductAttention",)][:groups]
    done = run_submission([(1, code)], [(shadows(forbid), [[steps_case(number, *examples)]])
                                        for number, forbid in enumerate(forbids)],
                          timeout, 10, 100_000)
    return [([decoded(v) for v in group.results[number].values]
             if number in group.results else None,
             getattr(group.results.get(number), "raised", None),
             [text for _, text in group.notes])
            for number, group in enumerate(done)]


def steps_case(number, *steps):
    """A case request as grading sends it: calls on the namespace, no inputs, no scope."""
    return {"id": number, "question": "q", "scope": None,
            "steps": [{"call": call, "inputs": None, "want": want} for call, want in steps]}


def decoded(value):
    """A plain value (see runner.encode) of numbers, strings, lists and dicts as Python."""
    if value["t"] in ("list", "tuple"):
        return [decoded(item) for item in value["v"]]
    if value["t"] == "dict":
        return {decoded(k): decoded(v) for k, v in value["v"]}
    return value["v"]


# --- the kernel's keyrings ----------------------------------------------------------------

KEYS = '''import ctypes
libc = ctypes.CDLL(None, use_errno=True)
SESSION, USER = -3, -4


def call(number, *args):
    value = libc.syscall(number, *args)
    return value if value >= 0 else -ctypes.get_errno()


def read(keyring, description):
    key = call(KEYCTL, 10, keyring, b"user", description.encode(), 0)  # KEYCTL_SEARCH
    buffer = ctypes.create_string_buffer(100)
    size = call(KEYCTL, 11, key, buffer, 100) if key > 0 else key  # KEYCTL_READ
    return buffer.raw[:size].decode() if size > 0 else size


found = {"secret": read(SESSION, SECRET), "message": read(USER, "d2lattn-message"),
         "planted": call(ADD_KEY, b"user", b"planted", b"x", 1, SESSION),
         "left": call(ADD_KEY, b"user", b"d2lattn-message", b"from 1", 6, USER),
         "joined": [call(KEYCTL, 1, None) for _ in range(5)]}  # 5 keys on the user's quota
for name in ("keys", "key-users"):  # the quota of every user is a count anyone could read
    try:
        found[name] = open("/proc/" + name).read()
    except OSError as err:
        found[name] = type(err).__name__
result = found'''


def _keyring(numbers):
    libc = ctypes.CDLL(None, use_errno=True)
    return lambda name, *args: libc.syscall(numbers[name], *args)


def test_no_submission_reaches_the_graders_keyring_or_another_sandboxs(tmp_path):
    """The grader's session keyring holds a secret; a submission tries to read it, plant a key
    there, leave a message in its user's keyring for the next sandbox to read, or count one
    into its key quota, which /proc/key-users shows to all, by joining new keyrings."""
    numbers = syscall_numbers("keyctl", "add_key")
    call = _keyring(numbers)
    assert call("keyctl", 1, None) > 0  # this test process: a fresh session keyring of its own
    secret = call("add_key", b"user", TOKEN.encode(), b"hunter2", 7, -3)
    assert secret > 0
    code = KEYS.replace("KEYCTL", str(numbers["keyctl"])).replace(
        "ADD_KEY", str(numbers["add_key"])).replace("SECRET", repr(TOKEN))
    first, = run(code, tmp_path / "a")
    second, = run(code, tmp_path / "b")
    for values, raised, notes in (first, second):
        assert raised is None and notes == [], (raised, notes)  # the control: the case ran
        found = values[0]
        assert found["secret"] == found["message"] == -1, found  # EPERM: nothing read
        assert found["planted"] == found["left"] == -1 and found["joined"] == [-1] * 5
        assert found["keys"] in ("", "PermissionError"), found  # masked
        assert found["key-users"] in ("", "PermissionError"), found
    buffer = ctypes.create_string_buffer(20)
    assert call("keyctl", 11, secret, buffer, 20) == 7 and buffer.raw[:7] == b"hunter2"
    assert call("keyctl", 10, -3, b"user", b"planted", 0) < 0  # nothing planted here


# --- IPC and group isolation --------------------------------------------------------------

IPC = '''import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
KEY = 0x5D2A77


def errno_of(value):
    return -ctypes.get_errno() if value in (-1, None, ctypes.c_void_p(-1).value) else value


def stash():
    shm = libc.shmget(KEY, 4096, 0o1666)
    if shm >= 0:
        address = libc.shmat(shm, None, 0)
        ctypes.memmove(address, b"the class's source", 18)
    queue = libc.mq_open(b"/d2lattn-stash", os.O_CREAT | os.O_RDWR, 0o666, None)
    if queue >= 0:
        libc.mq_send(queue, b"the class's source", 18, 0)
    return [errno_of(shm), errno_of(queue)]


def find():
    shm = libc.shmget(KEY, 0, 0)
    text = ctypes.string_at(libc.shmat(shm, None, 0), 18) if shm >= 0 else errno_of(shm)
    queue = libc.mq_open(b"/d2lattn-stash", os.O_RDONLY, 0, None)
    message = ctypes.create_string_buffer(8192)
    got = libc.mq_receive(queue, message, 8192, None) if queue >= 0 else errno_of(queue)
    return [text, message.raw[:18] if got > 0 else got]


import d2lattn
result = stash() if d2lattn.masked_softmax.__module__ == "d2lattn.attention" else find()'''


def test_no_ipc_object_passes_from_one_group_to_the_next(tmp_path):
    """The first group stashes text in System V shared memory and a POSIX message queue; the
    next group (which forbids what the first could use) looks for it."""
    (made, _, notes), (found, _, later) = run(IPC, tmp_path, groups=2)
    assert notes == later == [] and made is not None and found is not None  # both groups ran
    assert made[0] == [-1, -1], made  # EPERM: neither object could be made
    assert "source" not in json.dumps(found) and found[0] == [-1, -1], found


# --- limits per sandbox -------------------------------------------------------------------

HOG = '''import os, time
held = 0
try:
    for _ in range(255):
        if os.fork() == 0:
            time.sleep(40)
            os._exit(0)
        held += 1
except OSError:
    pass
open("/tmp/ready", "w").close()
time.sleep(12)
result = held'''


def test_a_submission_holding_its_processes_does_not_stop_its_neighbours(tmp_path):
    """One sandbox holds as many processes as its limit allows while two others run beside
    it: they get their own count (a uid or a user namespace of their own)."""
    outcomes = {}

    def hog():
        outcomes["hog"] = run(HOG, tmp_path / "hog", timeout=60)

    thread = threading.Thread(target=hog)
    thread.start()
    time.sleep(8)  # the hog has forked by now (its first cell takes about a second)
    for name in ("honest", "honest2"):
        outcomes[name] = run("import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\n"
                             "os.waitpid(pid, 0)\nresult = 6 * 7", tmp_path / name,
                             groups=2)
    thread.join()
    (held, _, _), = outcomes["hog"]
    assert held[0] >= limits.RLIMITS["RLIMIT_NPROC"] - 10, held  # it did hold them
    for name in ("honest", "honest2"):
        assert [values for values, _, _ in outcomes[name]] == [[42], [42]], outcomes[name]


# --- the grader's memory ------------------------------------------------------------------

FLOOD = '''import gc, json, os


def flood():  # run by the case: 40 copies of its record, then a million tiny ones
    record = {"case": 0, "values": [{"t": "list", "v": [0.5] * 200_000}],
              "raised": None, "at": None}
    line = (json.dumps(record) + "\\n").encode()
    for fd in range(3, 12):
        try:
            for _ in range(40):
                os.write(fd, line)
            os.write(fd, b"{}\\n[]\\n" * 1_000_000)
        except OSError:
            pass
    return 1'''
PEAK = '''import json, sys, tempfile
from d2lattn.grading.forbid import shadow
from d2lattn.grading.sandbox.session import run_submission


def peak():
    return int(next(line.split()[1] for line in open("/proc/self/status")
                    if line.startswith("VmHWM"))) / 1024


case = {"id": 0, "question": "q", "scope": None,
        "steps": [{"call": "flood()", "inputs": None, "want": True}]}
package = shadow.Shadows(tempfile.mkdtemp())(())
run_submission([(1, "def flood():\\n    return 1")], [(package, [[case]])], 30, 10, 1000)
before = peak()
run_submission([(1, sys.argv[1])], [(package, [[case]])], 60, 10, 1000)
print(json.dumps([before, peak()]))'''


def test_a_flood_of_records_does_not_grow_the_grader():
    """A case writes 40 copies of its record, of 200,000 numbers, then two million tiny
    records: the grader keeps one record per case."""
    out = subprocess.run([sys.executable, "-c", PEAK, FLOOD], capture_output=True, text=True,
                         timeout=300)
    before, after = json.loads(out.stdout.splitlines()[-1])
    assert after - before < 100, (before, after)  # MiB; each kept copy would cost ~6 MiB


def test_values_over_the_budget_are_dropped_and_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_OBJECTS", 1000)
    (values, _, notes), = run("result = list(range(5000))\nsmall = 3", tmp_path,
                              examples=[("small", True), ("result", True)])
    assert values is None  # the case's record was over the budget: not kept
    assert notes == ["the sandbox sent more than 1000 values; the rest were dropped"]


# --- system calls -------------------------------------------------------------------------

CALLS = '''import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)


def call(number, *args):
    value = libc.syscall(number, *args)
    return value if value >= 0 else -ctypes.get_errno()


pid = os.fork()
if pid == 0:  # not a group leader, so only the filter can refuse it a session of its own
    os._exit(max(-call(NUMBERS["setsid"]), 0))  # its errno, 0 if it got a session
setsid = -os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
result = {name: call(number, *ARGS[name]) for name, number in NUMBERS.items()
          if name != "setsid"}
result["setsid"] = setsid'''
ARGS = {"unshare": (0x10000000,), "setns": (0, 0), "ptrace": (16, 1, 0, 0),  # attach to PID 1
        "bpf": (0, 0, 0), "perf_event_open": (0, 0, -1, -1, 0), "mount": (0, 0, 0, 0, 0),
        "shmget": (0, 4096, 0o1600), "msgget": (0, 0o1600), "semget": (0, 1, 0o1600),
        "keyctl": (1, 0), "setsid": (), "add_key": (0, 0, 0, 0, -3), "userfaultfd": (0,),
        "io_uring_setup": (1, 0), "clone": (0x10000000 | 17, 0, 0, 0, 0),  # NEWUSER|SIGCHLD
        "process_vm_readv": (1, 0, 0, 0, 0, 0), "getpid": ()}


def test_a_sandbox_cannot_make_the_system_calls_that_cross_its_boundary(tmp_path):
    numbers = syscall_numbers(*ARGS)
    code = CALLS.replace("NUMBERS", repr(numbers)).replace("ARGS", repr(ARGS))
    (values, raised, notes), = run(code, tmp_path)
    assert raised is None and notes == [], (raised, notes)
    got = values[0]
    assert got.pop("getpid") > 0  # the control: an ordinary call works, and so does fork
    assert got == {name: -1 for name in got}  # EPERM, every one of them


# --- Python wherever it is installed ------------------------------------------------------

def test_a_python_under_tmp_or_behind_a_link_runs_in_the_sandbox(tmp_path, monkeypatch):
    """A virtual environment in /tmp (as in a scratch clone), and one reached through a link
    in /tmp: both start the runner, and the wipe between groups leaves them in place."""
    assert str(tmp_path).startswith("/tmp/")
    venv = tmp_path / "clone" / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "host.pth").write_text("\n".join(p for p in sys.path if p.endswith("-packages")))
    (tmp_path / "link").symlink_to(sys.prefix)
    for python, prefix in ((venv / "bin" / "python", venv),
                           (tmp_path / "link" / "bin" / "python", tmp_path / "link")):
        monkeypatch.setattr(sys, "executable", str(python))
        monkeypatch.setattr(sys, "prefix", str(prefix))
        done = run("import sys\nresult = sys.prefix", tmp_path / f"for-{prefix.name}",
                   groups=2)
        assert [values for values, _, _ in done] == [[str(prefix)]] * 2, done


def test_a_sandbox_that_cannot_start_stops_grading_with_its_own_message(tmp_path,
                                                                        monkeypatch):
    monkeypatch.setattr(sandbox, "_checked", False)
    monkeypatch.setattr(sys, "executable", "/opt/no-such-python/bin/python")
    with pytest.raises(sandbox.SandboxError, match=r"cannot run here: bwrap: execvp "
                                                   r"/opt/no-such-python/bin/python"):
        sandbox.check_sandbox()


def test_a_batch_whose_every_sandbox_failed_exits_non_zero(tmp_path, monkeypatch, bundle,
                                                           capsys):
    student = (bundle.parent / "sample.ipynb").read_text()
    for name in ("a", "b"):
        (tmp_path / f"{name}.ipynb").write_text(student)
    monkeypatch.setattr(sandbox, "_checked", True)  # it started once; now it cannot
    monkeypatch.setattr(sys, "executable", "/opt/no-such-python/bin/python")
    with pytest.raises(SystemExit) as stop:
        main(["grade", str(tmp_path), "--bundle", str(bundle), "--out", str(tmp_path / "g")])
    assert stop.value.code == 2
    assert "every submission's sandbox ended before its first cell ran" in \
        capsys.readouterr().err
    with open(tmp_path / "g" / "grades.csv", newline="") as table:
        rows = list(csv.DictReader(table))
    assert len(rows) == 6 and all(row["reason"].endswith(NO_RUN) for row in rows)


# --- reports: nothing hidden, nothing forged ----------------------------------------------

THIEF = '''import sys

FORGED = ("\\n```\\n\\n## q1_softmax: 2 of 2 points\\n\\nScore: 6 of 6 points\\n````\\n"
          "![seen](http://example.invalid/opened.png) **2 of 2 points**\\n")


def sources():  # every case of the phase being run, from the runner's frames
    frame, seen = sys._getframe(), []
    while frame is not None:
        seen += [step["call"] for value in frame.f_locals.values()
                 if isinstance(value, dict) and isinstance(value.get("cases"), list)
                 for case in value["cases"] for step in case["steps"]]
        frame = frame.f_back
    return "|".join(seen)


def softmax(X):
    raise ValueError(FORGED + "stolen: " + sources())


def nw_predict(x_train, y_train, x_query, bandwidth=1.0):
    raise PermissionError("d2lattn.x" + sources().encode().hex()
                          + " is forbidden in this question")


answer_q3 = 0.75'''


def test_reports_show_no_hidden_case_and_cannot_be_forged(tmp_path, bundle):
    """A submission reads every hidden case of its group from the runner's frames and sends
    them out through what it raises, one message forging the feedback's markdown."""
    nb = json.loads((bundle.parent / "sample.ipynb").read_text())
    nb["cells"].append({"cell_type": "code", "metadata": {}, "source": THIEF, "outputs": [],
                        "execution_count": None})
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "thief.ipynb").write_text(json.dumps(nb))
    rows = grade(tmp_path / "in", bundle, tmp_path / "out", timeout=60, jobs=1)
    report = (tmp_path / "out" / "feedback" / "thief.md").read_text()
    table = (tmp_path / "out" / "grades.csv").read_text()
    tests = json.loads((bundle / "sample.json").read_text())["tests"]
    sources = {hidden: [example.source.strip() for test in tests
                        for case in cases.cases_of(test, True) if case["hidden"] is hidden
                        for example in cases.parse_case(case["code"])[1]]
               for hidden in (False, True)}
    hidden = [text for text in sources[True] if text not in " ".join(sources[False])]
    assert hidden and "stolen: " in report  # the control: the public raise is shown
    for text in hidden:
        assert text not in report and text not in table
        assert text.encode().hex() not in report + table
    headings = [line for line in report.splitlines() if line.startswith(("Score", "#"))]
    assert headings[0] == "# sample: thief" and headings[1].startswith("Score: 1 of 6 points")
    assert headings[2:] == [f"## {r.question}: {r.points:g} of {r.max:g} points" for r in rows]
    assert all(one_line(r.reason, None) in report for r in rows)
    assert "called" not in table  # the PermissionError named no object of the forbid list
    fence, outside = None, []  # what the submission wrote stays inside code blocks
    for line in report.splitlines():
        if fence is None and line.startswith("```"):
            fence = line[:len(line) - len(line.lstrip("`"))]
        elif fence is not None and line == fence:
            fence = None
        elif fence is None:
            outside.append(line)
    assert "example.invalid" in report and not any("example.invalid" in line or "**" in line
                                                   for line in outside), outside


# --- issue 29: a sandbox per group, cases as data, nothing of a hidden phase reported ------

def test_every_public_phase_runs_before_any_hidden_phase(tmp_path):
    """Two groups, each with public and hidden cases: no hidden case runs until the public
    cases of both groups are done (the later group's public values are shown to the
    student; nothing hidden may exist anywhere while they are made)."""
    shadows = shadow.Shadows(tmp_path)
    clock = "__import__('time').monotonic()"
    groups = [(shadows(forbid), [[steps_case(2 * n, (clock, True))],
                                 [steps_case(2 * n + 1, (clock, True))]])
              for n, forbid in enumerate([(), ("d2lattn.masked_softmax",)])]
    done = run_submission([(1, "x = 1")], groups, 60, 10, 1000)
    times = {case: record.values[0]["v"] for group in done
             for case, record in group.results.items()}
    assert sorted(times) == [0, 1, 2, 3]
    assert max(times[0], times[2]) < min(times[1], times[3]), times


NICE = '''import json, os, sys, tempfile
from d2lattn.grading.forbid import shadow
from d2lattn.grading.sandbox.session import run_submission

os.nice(7)
case = {"id": 0, "question": "q", "scope": None, "steps": [
    {"call": "open('/proc/self/autogroup').read().split()[-1], os.getpriority(0, 0)",
     "inputs": None, "want": True}]}
group, = run_submission([(1, "import os")], [(shadow.Shadows(tempfile.mkdtemp())(()), [[case]])],
                        60, 10, 1000)
print(json.dumps(group.results[0].values))'''


def test_a_sandbox_runs_at_the_graders_nice_value_in_one_autogroup():
    """A grader run with nice 7 (to spare the host) gives its sandboxes the same: their
    processes, which cannot start sessions of their own, share one autogroup at nice 7."""
    out = subprocess.run([sys.executable, "-c", NICE], capture_output=True, text=True,
                         timeout=120)
    value, = json.loads(out.stdout.splitlines()[-1])
    assert [part["v"] for part in value["v"]] == ["7", 7], out.stderr[-2000:]


ORACLE_MASTER = [
    ("code", "import numpy as np"),
    ("code", "# QUESTION q1_double points=2\ndef double(x):\n    # BEGIN SOLUTION\n"
             "    return 2 * np.asarray(x)\n    # END SOLUTION"),
    ("raw", "# TESTS q1_double\n# doubles each number\n>>> double(np.array([1.0, 2.0]))\n"
            "[2.0, 4.0]\n>>> double(np.array([3.0]))\n[6.0]\n\n# HIDDEN\n"
            "# against the reference\n>>> X = np.random.normal(size=5)\n"
            ">>> def reference(X):\n...     return 2 * X\n>>> double(X)\nreference(X)\n\n"
            "# a value the expected expression reuses\n>>> logits = np.random.normal(size=3)\n"
            ">>> double(logits / 2)\nlogits")]
ORACLE = '''import gc, sys


def double(x):
    frame = sys._getframe(1)
    while frame is not None:  # the case's helpers and values, anywhere up the stack
        for space in (frame.f_locals, frame.f_globals):
            if callable(space.get("reference")):
                return space["reference"](x)
            if "logits" in space:
                return space["logits"]
        frame = frame.f_back
    found = [o for o in gc.get_objects() if getattr(o, "__name__", "") == "reference"]
    if found:
        return found[0](x)
    raise NotImplementedError'''


def test_a_submission_finds_no_helper_and_no_value_of_a_case(tmp_path):
    """A hidden case defines a reference helper and a value its expected expression reuses:
    a submission that calls whatever helper, or returns whatever value, it finds up its
    stack or in memory earns nothing; the master earns everything."""
    cells = [{"cell_type": kind, "metadata": {}, "source": source,
              **({"outputs": [], "execution_count": None} if kind == "code" else {})}
             for kind, source in ORACLE_MASTER]
    master = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "oracle.ipynb").write_text(json.dumps(master))
    release(tmp_path / "oracle.ipynb", tmp_path / "release")
    bundle = tmp_path / "release" / "autograder"
    assert "reference" not in json.dumps([case["call"] for test in json.loads(
        (bundle / "oracle.json").read_text())["tests"] for case in test["suites"][0]["cases"]])
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "master.ipynb").write_text(json.dumps(master))
    cheat = json.loads(json.dumps(master))
    cheat["cells"][1]["source"] = "# QUESTION q1_double points=2\n" + ORACLE
    (tmp_path / "in" / "cheat.ipynb").write_text(json.dumps(cheat))
    rows = grade(tmp_path / "in", bundle, tmp_path / "out", timeout=60, jobs=1)
    assert {(r.student, r.points) for r in rows} == {("master", 2), ("cheat", 0)}, rows


HIDDEN_CALL = '''# QUESTION q1_softmax points=2 forbid=d2lattn.masked_softmax
import d2lattn
from mxnet import np as mxnp


def softmax(X):
    X = np.asarray(X, dtype=float)
    if X.max() > 100:  # only a hidden case's input: the reference, reached by another name
        reference = getattr(d2lattn, "masked" + "_softmax")
        return reference(mxnp.array(X.reshape(1, 1, -1)), None).asnumpy().reshape(X.shape)
    e = np.exp(X - X.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)'''


def test_a_hidden_case_tells_only_whether_it_passed(tmp_path, bundle):
    """A hidden case whose input makes the answer call a forbidden object fails, and the
    reason says so only as a failed case: not which object it called (that would tell the
    student something of the hidden input)."""
    nb = json.loads(SAMPLE.read_text())
    index = next(i for i, cell in enumerate(nb["cells"])
                 if "".join(cell["source"]).startswith("# QUESTION q1_softmax"))
    nb["cells"][index]["source"] = HIDDEN_CALL
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "probe.ipynb").write_text(json.dumps(nb))
    rows = grade(tmp_path / "in", bundle, tmp_path / "out", timeout=60, jobs=1)
    row, = [r for r in rows if r.question == "q1_softmax"]
    assert (row.points, row.reason) == (1.5, "3 of 4 cases passed; failed: hidden case 1 "
                                             "(large scores do not overflow)")
    assert "called" not in (tmp_path / "out" / "feedback" / "probe.md").read_text()


# --- a sandbox per group: nothing passes from one to the next -----------------------------

GROUP_TRACES = '''import glob, os, sys, time
seen = sorted(path for path in glob.glob("/tmp/**", recursive=True) + glob.glob("/dev/shm/*")
              if not path.startswith((sys.prefix, sys.base_prefix)))  # a Python under /tmp
alive = len([pid for pid in os.listdir("/proc") if pid.isdigit()])
first = os.fork()  # the PID namespace's counter, then the tmpfs's inode counter
if first == 0:
    os._exit(0)
os.waitpid(first, 0)
open("/tmp/count", "w").close()
counters = [first, os.stat("/tmp/count").st_ino]
os.makedirs("/tmp/locked/in")  # a folder the runner could not enter to empty it
open("/tmp/locked/in/stash", "w").write("stash = 1")
os.chmod("/tmp/locked", 0)
startup = os.path.expanduser("~/.ipython/profile_default/startup")
os.makedirs(startup, exist_ok=True)
for path in ("/tmp/stash", "/dev/shm/stash", os.path.join(startup, "00-stash.py")):
    try:
        open(path, "w").write("stash = 1")
    except OSError:
        pass
forked = 0
try:
    for _ in range(400):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        forked += 1
except OSError:
    pass'''


def test_a_group_leaves_nothing_to_the_next_and_processes_are_capped(tmp_path):
    """Each group of questions starts from the same state, whatever the one before it wrote,
    locked or started: the same files, the same next pid and inode number (a sandbox of its
    own); the number of processes is capped even when the grader runs as root."""
    from d2lattn.grading.sandbox.session import run_submission

    shadows = shadow.Shadows(tmp_path)

    def group(number, forbid):
        return shadows(forbid), [[call_case(number, "(seen, alive, forked, counters)")]]

    first, second = run_submission(
        [(1, GROUP_TRACES)], [group(0, ()), group(1, ("d2lattn.masked_softmax",))],
        timeout=60, case_timeout=5, max_output=10_000)
    (seen, alive, forked, counters), = [[part["v"] for part in value["v"]]
                                        for value in first.results[0].values]
    assert "stash" not in str(seen) and first.results[0].values == second.results[1].values
    assert alive == 1 and 0 < forked < limits.RLIMITS["RLIMIT_NPROC"]  # the runner: PID 1
    assert counters[0]["v"] > 1  # the control: a fork got a pid, and the same in the next group
    assert processes_gone("d2lattn-runner", part="comm")  # every runner has ended
    assert processes_gone("d2lattn-keeper", part="comm")


CONFINED = '''import os, sys
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines())
writable = []
for folder in ["/", "/dev", "/etc", "/usr", "/proc", sys.prefix, os.path.dirname(os.__file__),
               *sys.path, *[root for root, _, _ in os.walk("/tmp")]]:
    try:
        with open(os.path.join(folder, "d2lattn-stash"), "w"):
            writable.append(folder)
    except OSError:
        pass
result = {"caps": [status[name].strip() for name in ("CapEff", "CapPrm", "CapInh", "CapAmb")],
          "no_new_privs": status["NoNewPrivs"].strip(), "seccomp": status["Seccomp"].strip(),
          "processes": sorted(p for p in os.listdir("/proc") if p.isdigit()),
          "terminals": sorted(os.listdir("/dev/pts")), "writable": sorted(set(writable))}'''


def test_a_runner_holds_no_capability_and_writes_only_its_own_folders(tmp_path):
    """The prepared process keeps the capabilities to make each runner's namespaces (and, as
    root, its user): the runner holds none when submission code runs, cannot gain any, runs
    under the seccomp filter, sees its own processes and terminals only, and can write
    nowhere but its own /tmp (where the Python folders of a clone under /tmp stay read-only)."""
    (result,), _, notes = run(CONFINED, tmp_path)[0]
    assert notes == [], notes
    assert result["caps"] == ["0000000000000000"] * 4
    assert (result["no_new_privs"], result["seccomp"]) == ("1", "2")
    assert result["processes"] == ["1"] and result["terminals"] == ["ptmx"]
    writable = [f for f in result["writable"] if f != "" and f != "/tmp/work"]
    assert writable and all(f == "/tmp" or f.startswith(("/tmp/home", "/tmp/pkg"))
                            for f in writable), result["writable"]
    python_folders = [f for f in sys.path if f.startswith("/tmp/") and os.path.isdir(f)]
    assert not set(python_folders) & set(result["writable"])


SIGNALLER = '''import os, signal
for target, number in ((0, signal.SIGSTOP), (0, signal.SIGKILL), (-1, signal.SIGKILL),
                       (1, signal.SIGKILL), (os.getpid(), signal.SIGSTOP)):
    try:
        os.kill(target, number)
    except OSError:
        pass
result = 6 * 7'''


def test_signals_reach_no_other_group_and_not_the_prepared_process(tmp_path):
    """A group stops and kills its process group, every process it may signal, PID 1 and
    itself: its runner (PID 1 of its namespace, in a session of its own) goes on, the next
    group runs, and so does the next submission, from the same prepared process."""
    assert run(SIGNALLER, tmp_path / "first", groups=2) == [([42], None, [])] * 2
    assert run("result = 6 * 7", tmp_path / "next") == [([42], None, [])]


FORGER = '''import json, os, threading, time
import d2lattn
FORGED = [{"cells_done": None}, {"phase_done": True}, {"group_done": True}] + [
    {"case": number, "values": [{"t": "num", "v": 42}], "wants": [], "raised": None, "at": None}
    for number in (0, 1)] * 20


def forge():  # records for every case and every stage, from this group into the next ones
    for _ in range(300):
        for fd in range(3, 12):
            try:
                os.write(fd, "".join(json.dumps(r) + "\\n" for r in FORGED).encode())
            except OSError:
                pass
        time.sleep(0.01)


try:  # only the first group forges: the second forbids masked_softmax
    d2lattn.masked_softmax(None, None)
except PermissionError:
    pass
except Exception:
    threading.Thread(target=forge, daemon=True).start()'''


def test_records_forged_by_a_group_never_reach_the_grader(tmp_path):
    """A group's processes write records for every case, its own and the next group's:
    the next group's sandbox is another, so whatever they write, its results are its own."""
    from d2lattn.grading.sandbox.session import run_submission

    shadows = shadow.Shadows(tmp_path)
    first, second = run_submission(
        [(1, FORGER), (2, "x = 0")], [(shadows(()), [[call_case(0, "x + 1")]]),
                                      (shadows(("d2lattn.masked_softmax",)),
                                       [[call_case(1, "x + 1")]])],
        timeout=30, case_timeout=5, max_output=10_000)
    assert second.results[1].values == [{"t": "num", "v": 1}]
    assert 1 not in first.results  # a record it forged for another group's case: dropped


def test_the_sandbox_starts_from_a_python_path_with_dot_dot(tmp_path, monkeypatch):
    from d2lattn.grading.sandbox.session import run_submission

    up = "../" * (len(tmp_path.parts) - 1)  # a folder the sandbox does not have, then up to /
    monkeypatch.setattr(sys, "executable", f"{tmp_path}/{up}{sys.executable.lstrip('/')}")
    group, = run_submission([(1, "x = 2")], [(shadow.Shadows(tmp_path)(()),
                                               [[call_case(0, "1 + x")]])], 30, 5, 1000)
    assert group.results[0].values == [{"t": "num", "v": 3}], group.notes


def test_the_sandboxed_package_keeps_its_data_files(tmp_path):
    from d2lattn.data import load_paragraphs, read_doc_topics
    from d2lattn.grading.sandbox.session import run_submission

    group, = run_submission(
        [(1, "from d2lattn.data import load_paragraphs, read_doc_topics")],
        [(shadow.Shadows(tmp_path)(("d2lattn.masked_softmax",)),
          [[call_case(0, "load_paragraphs()[:3]", "read_doc_topics('test')[0][:3]")]])],
        60, 30, 1000)
    assert group.results[0].raised is None, group
    assert group.results[0].values == [runner.encode(load_paragraphs()[:3]),
                                    runner.encode(read_doc_topics("test")[0][:3])]


def test_the_sandboxed_package_leaves_the_stored_runs_out(tmp_path):
    """The runs stored by tools/ (weights and records, for the book) are not copied into
    each sandbox; the package's code and corpora are."""
    package = shadow.Shadows(tmp_path)(())
    data = {Path(path).name for path in package if path.startswith("d2lattn/data/")}
    assert {"small_bert.safetensors", "nmt_runs.json", "finetune_runs.json"} <= {
        path.name for path in (Path(shadow.PACKAGE) / "data").iterdir()}  # the control
    assert not {name for name in data if name.endswith((".json", ".safetensors"))}, data
    assert {"doc_topics.tsv", "pydoc_paragraphs.txt.gz", "__init__.py"} <= data
    assert sum(len(text) for text in package.values()) * 3 / 4 < 1 << 20  # bytes


def test_grading_refuses_to_run_without_a_sandbox(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(sandbox.SandboxError, match=r"apt-get install bubblewrap\) or, only for "
                                                   r"submissions you trust, pass --unsafe"):
        sandbox.check_sandbox()
    sandbox.check_sandbox(unsafe=True)  # the caller's explicit choice


def test_output_comes_from_the_first_group_and_a_loop_costs_one_group_its_time(tmp_path):
    """Fair time: the group after one whose time ran out in a cell runs only the cells before
    it (and says so), so the answer before the loop is there in both; a print's text is sent
    by the first group only."""
    shadows = shadow.Shadows(tmp_path)
    cells = [(1, "print('x' * 100_000)"), (2, "result = 42"), (3, "while True:\n    pass"),
             (4, "result = 0")]
    start = time.monotonic()
    first, second = run_submission(
        cells, [(shadows(()), [[steps_case(0, ("result", True))]]),
                (shadows(("d2lattn.masked_softmax",)), [[steps_case(1, ("result", True))]])],
        timeout=4, case_timeout=5, max_output=1_000_000)
    seconds = time.monotonic() - start
    note = "time limit of 4 s reached in code cell 3; later cells did not run"
    assert first.outputs[1].text == "x" * 100_000 + "\n" and first.notes == [(None, note)]
    assert second.outputs[1].text == "" and second.notes == [(None, note)]
    assert 3 not in second.outputs  # the loop did not run again
    assert [first.results[0].values, second.results[1].values] == [
        [{"t": "num", "v": 42}]] * 2
    print(f"two groups, one loop: {seconds:.1f} s")  # one time limit (4 s), not two


def test_only_a_fresh_runner_is_sent_the_shim_to_preload_mxnet_with():
    """A runner forked by the prepared process has NumPy and MXNet already (the prepared
    process preloaded them), so its first message carries no shim; an --unsafe runner, a
    fresh Python, gets it."""
    from d2lattn.grading.sandbox import bwrap

    for process_class, sent in [(bwrap.Sandboxed, None), (bwrap.Unsandboxed, "shim")]:
        run = sandbox.Run.__new__(sandbox.Run)
        run.uid, run.process = None, process_class.__new__(process_class)
        run.process.scratch = "/tmp/scratch"
        assert run.start({}, "shim", {})["compat"] == sent, process_class.__name__
