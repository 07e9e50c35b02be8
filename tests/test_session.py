"""One submission's sandboxes (issue 42): one alive at a time, every public phase before any
hidden one, one case in a runner at a time, a slow start of the prepared process waited for
without killing live sandboxes, and a class's private cases in no output."""
import json
import os
import sysconfig
import threading
import time
from pathlib import Path

import pytest

from d2lattn.grading import grade, limits, release
from d2lattn.grading.forbid import shadow
from d2lattn.grading.sandbox import bwrap
from d2lattn.grading.sandbox.session import run_submission, schedule
from grading_support import SAMPLE, needs_sandbox, processes_with


def test_every_phase_of_every_group_comes_before_the_next_phase_of_any():
    """Four groups: two with public and hidden cases, one hidden only, one public only.
    Group 0 first (its output is the notebook's); the last group of the public phase is one
    with hidden cases, and begins the hidden phase in the same sandbox."""
    order = schedule([[True, True], [True, True], [False, True], [True, False]])
    assert order == [(0, 0), (0, 3), (0, 1), (1, 1), (1, 0), (1, 2)]
    assert schedule([[False, True]]) == [(0, 0), (1, 0)]  # the cells run for the output
    assert schedule([[False, False], [False, True]]) == [(0, 0), (1, 1)]
    assert schedule([[]]) == [(0, 0)] and schedule([]) == []


FINDER = '''import gc, sys, time
born = time.monotonic()


def found(own):
    """The case ids (the n of a call "found(n)") anywhere in this process: the frames up the
    stack and every object the collector tracks."""
    seen, frame = set(), sys._getframe(1)
    spaces = [o for o in gc.get_objects() if isinstance(o, (dict, list))]
    while frame is not None:
        spaces += [frame.f_locals, frame.f_globals]
        frame = frame.f_back
    for space in spaces:
        for value in (space.values() if hasattr(space, "values") else space):
            for text in (value if isinstance(value, (list, tuple)) else [value]):
                if isinstance(text, str) and "found(" in text:
                    seen |= {int(part.split(")")[0]) for part in text.split("found(")[1:]
                             if part.split(")")[0].isdigit()}
    time.sleep(0.2)
    return sorted(seen)'''


def finder_case(number):
    return {"id": number, "question": "q", "scope": None,
            "steps": [{"call": f"found({number})", "inputs": None, "want": True}]}


@needs_sandbox
def test_one_sandbox_at_a_time_and_one_case_in_it(tmp_path):
    """Three groups of two public and two hidden cases: the host never holds two runners of
    the submission at once, and each case finds no other case (its call, from the runner's
    frames or any object) in its process."""
    shadows = shadow.Shadows(tmp_path)
    forbids = [(), ("d2lattn.masked_softmax",), ("d2lattn.DotProductAttention",)]
    groups = [(shadows(forbid), [[finder_case(4 * n), finder_case(4 * n + 1)],
                                 [finder_case(4 * n + 2), finder_case(4 * n + 3)]])
              for n, forbid in enumerate(forbids)]
    counts, running = [], threading.Event()

    def count():
        while not running.is_set():
            counts.append(len(processes_with("d2lattn-runner", "comm", mine=True)))
            time.sleep(0.02)

    watcher = threading.Thread(target=count)
    watcher.start()
    try:
        done = run_submission([(1, FINDER)], groups, 60, 10, 1000)
    finally:
        running.set()
        watcher.join()
    seen = {case: [item["v"] for item in record.values[0]["v"]]
            for group in done for case, record in group.results.items()}
    assert sorted(seen) == list(range(12)), [group.notes for group in done]
    assert all(found == [case] for case, found in seen.items()), seen
    assert max(counts) == 1, counts  # the control: a runner was seen, never two


SLOW = "import time\ntime.sleep(3)\n"  # before the prepared process imports anything


@needs_sandbox
def test_a_slow_start_of_the_prepared_process_kills_no_live_sandbox(tmp_path, monkeypatch):
    """A first start is measured; then the prepared process is restarted (its configuration
    changed) and takes three seconds more than that to start, more than STARTUP_SECONDS
    (here 1 s). A submission whose sandbox waits for it, and another one that asks for a
    sandbox meanwhile, both get their values: the slow start is waited for, not replaced."""
    shadows = shadow.Shadows(tmp_path)
    case = {"id": 0, "question": "q", "scope": None,
            "steps": [{"call": "hold()", "inputs": None, "want": True}]}
    cells = [(1, "import time\n\ndef hold():\n    time.sleep(3)\n    return 42")]
    group, = run_submission(cells, [(shadows(()), [[case]])], 60, 10, 1000)  # measured
    assert group.results[0].values == [{"t": "num", "v": 42}], group.notes
    monkeypatch.setattr(limits, "STARTUP_SECONDS", 1)
    monkeypatch.setattr(bwrap, "ZYGOTE", SLOW + bwrap.ZYGOTE)
    outcome = {}
    first = threading.Thread(target=lambda: outcome.update(first=run_submission(
        cells, [(shadows(()), [[case]])], 60, 10, 1000)))
    first.start()
    time.sleep(2)  # the first submission waits for the slow start
    second, = run_submission([(1, "x = 7")], [(shadows(()), [[dict(
        case, steps=[{"call": "x", "inputs": None, "want": True}])]])], 60, 10, 1000)
    first.join()
    first, = outcome["first"]
    assert first.notes == [] and first.results[0].values == [{"t": "num", "v": 42}]
    assert second.results[0].values == [{"t": "num", "v": 7}], second.notes


# --- a class's private cases --------------------------------------------------------------

SECRET = [1.234567, 7.654321, 3.141593]  # the instructor's private input
PRIVATE = f"""# TESTS sample.q1_softmax
# a private row
>>> softmax(np.array({SECRET}))
np.exp(np.array({SECRET}) - 7.654321) / np.exp(np.array({SECRET}) - 7.654321).sum()
"""
THIEF = '''import ctypes, fcntl, os, struct, time
ROLE, LOCKED, CACHED, LISTEN = {role!r}, {locked!r}, {cached!r}, {listen!r}
PAGE, WIDTH = 4096, 64  # bytes of a message
state = {{"first": True, "fd": None}}


def publish(text):
    """``text`` as lock offsets (live sandboxes) and as pages in the cache (the next one)."""
    data = text.encode()[:WIDTH].ljust(WIDTH, b"\\0")
    if state["fd"] is not None:
        os.close(state["fd"])  # its locks go with it
    state["fd"] = fd = os.open(LOCKED, os.O_RDONLY)
    for index, byte in enumerate(data):
        lock = struct.pack("hhqqi", fcntl.F_RDLCK, 0, index * 256 + byte, 1, 0)
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, lock)
        except OSError:
            break
    cache = os.open(CACHED, os.O_RDONLY)
    try:
        os.posix_fadvise(cache, 0, 0, os.POSIX_FADV_DONTNEED)
        os.posix_fadvise(cache, 0, 0, os.POSIX_FADV_RANDOM)
        for index in range(8 * WIDTH):
            if data[index // 8] >> (index % 8) & 1:
                os.pread(cache, 1, index * PAGE)
    except OSError:
        pass
    os.close(cache)


def from_locks():
    fd, data = os.open(LOCKED, os.O_RDONLY), b""
    for index in range(WIDTH):
        try:
            got = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_OFD_GETLK, struct.pack(
                "hhqqi", fcntl.F_WRLCK, 0, index * 256, 256, 0)))
        except OSError:
            break
        data += bytes([got[2] - index * 256]) if got[0] != fcntl.F_UNLCK else b"\\0"
    os.close(fd)
    return data.rstrip(b"\\0").decode(errors="replace")


def from_cache():
    fd, bits = os.open(CACHED, os.O_RDONLY), []
    for index in range(8 * WIDTH):
        try:
            os.preadv(fd, [bytearray(1)], index * PAGE, os.RWF_NOWAIT)
            bits.append(1)
        except OSError:
            bits.append(0)
    os.close(fd)
    data = bytes(sum(bits[8 * n + k] << k for k in range(8)) for n in range(WIDTH))
    return data.rstrip(b"\\0").decode(errors="replace")


def softmax(X):
    X = np.asarray(X, dtype=float)
    if ROLE == "publisher":
        publish(",".join(f"{{value:.6f}}" for value in X.ravel()))
        time.sleep(0.2)
    elif state.pop("first", False):  # its first public case: read, then tell
        seen, end = [from_cache()], time.monotonic() + LISTEN
        while time.monotonic() < end:  # the publisher, graded beside it, reaches its hidden
            text = from_locks()  # phase meanwhile
            if text and text not in seen:
                seen.append(text)
            time.sleep(0.05)
        raise ValueError("seen: " + " | ".join(reversed(seen)))
    e = np.exp(X - X.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)'''


def _unread_file():
    """A file of the Python installation of at least 2 MB that grading never reads."""
    folder = Path(sysconfig.get_config_var("LIBPL") or "/nonexistent")
    files = [p for p in folder.glob("libpython*.a") if p.stat().st_size >= 2 << 20]
    if not files:
        pytest.skip(f"no static libpython of 2 MB in {folder} to carry the page-cache channel")
    return str(files[0])


@pytest.fixture(scope="module")
def private_release(tmp_path_factory):
    """The sample released with the private case: its folder."""
    folder = tmp_path_factory.mktemp("private")
    (folder / "private.txt").write_text(PRIVATE)
    release(SAMPLE, folder / "rel", hidden=folder / "private.txt")
    return folder / "rel"


@needs_sandbox
@pytest.mark.parametrize("jobs", [1, 2])
def test_a_private_case_reaches_no_output_of_the_class(tmp_path, private_release, jobs):
    """The instructor's private case (release --hidden) on q1_softmax; one student's answer
    publishes every input it gets, on file locks and in the page cache; another's, graded
    beside it (--jobs 2) or after it (--jobs 1), reads the page cache in its first public
    case, then (--jobs 2: the publisher's runner is alive meanwhile) the locks for 8 s, and
    raises what it found. The private input is in no file that grading writes."""
    student = json.loads((private_release / "sample.ipynb").read_text())
    master = json.loads(SAMPLE.read_text())
    (tmp_path / "in").mkdir()
    for role in ("publisher", "reader"):
        nb = json.loads(json.dumps(master))
        nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [],
                            "execution_count": None, "source": THIEF.format(
                                role=role, locked=os.__file__, cached=_unread_file(),
                                listen=8 if jobs == 2 else 0)})
        nb["metadata"] = student["metadata"]
        (tmp_path / "in" / f"{role[0]}_{role}.ipynb").write_text(json.dumps(nb))
    rows = grade(tmp_path / "in", private_release / "autograder", tmp_path / "out",
                 timeout=60, jobs=jobs)
    written = "\n".join(path.read_text(errors="replace")
                        for path in (tmp_path / "out").rglob("*") if path.is_file())
    feedback = (tmp_path / "out" / "feedback" / "r_reader.md").read_text()
    assert "seen: " in feedback, feedback  # the control: the reader's raise is shown
    q1 = {row.student: row.points for row in rows if row.question == "q1_softmax"}
    assert q1["p_publisher"] == 2, rows  # its answer is right: the private case ran
    for value in SECRET:
        assert f"{value:.6f}" not in written, written[written.find(f"{value:.6f}") - 300:][:600]
