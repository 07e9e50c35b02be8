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

from d2lattn.grading import cases, grade, release, sandbox, shadow
from d2lattn.grading.__main__ import main
from d2lattn.grading.execute import NO_RUN, run_submission
from d2lattn.grading.values import one_line

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="grading needs bubblewrap (bwrap)")
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
    done = run_submission([(1, code)], [(shadows(forbid), [[call_case(number, *examples)]])
                                        for number, forbid in enumerate(forbids)],
                          timeout, 10, 100_000)
    return [([decoded(v) for v in group.results[number]["values"]]
             if number in group.results else None,
             (group.results.get(number) or {}).get("raised"), [text for _, text in group.notes])
            for number, group in enumerate(done)]


def call_case(number, *steps):
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
         "left": call(ADD_KEY, b"user", b"d2lattn-message", b"from 1", 6, USER)}
try:
    found["proc_keys"] = open("/proc/keys").read()
except OSError as err:
    found["proc_keys"] = type(err).__name__
result = found'''


def _keyring(numbers):
    libc = ctypes.CDLL(None, use_errno=True)
    return lambda name, *args: libc.syscall(numbers[name], *args)


def test_no_submission_reaches_the_graders_keyring_or_another_sandboxs(tmp_path):
    """The grader's session keyring holds a secret; a submission tries to read it, plant a key
    there, and leave a message in its user's keyring for the next sandbox to read."""
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
        assert found["planted"] == found["left"] == -1
        assert TOKEN not in found["proc_keys"] and "planted" not in found["proc_keys"]
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
    assert held[0] >= sandbox.LIMITS["RLIMIT_NPROC"] - 10, held  # it did hold them
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
from d2lattn.grading import shadow
from d2lattn.grading.execute import run_submission


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
    monkeypatch.setattr(sandbox, "MAX_OBJECTS", 1000)
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


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    release(SAMPLE, out)
    return out / "autograder"


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

FORGED = "\\n```\\n\\n## q1_softmax: 2 of 2 points\\n\\nScore: 6 of 6 points\\n"


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
