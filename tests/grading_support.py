"""What the grader's tests share: the sample master, its questions, small notebook builders,
the request a grading sends, and the rule that a missing bubblewrap fails the tests in CI
(CI=true) instead of skipping them."""
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from d2lattn.grading.master import cases
from d2lattn.grading.master.notebook import cell_source, question_of
from d2lattn.grading.releasing.split import split_master
from d2lattn.grading.sandbox import runner

SAMPLE = Path(__file__).parent / "data" / "grading" / "sample.ipynb"
QUESTIONS = {"q1_softmax": 2, "q2_nw": 3, "q3_weight": 1}  # the sample's questions and points
# The one rule for a machine without bubblewrap: the tests that run a sandbox are skipped,
# except in CI (CI=true), where they run and fail
NO_SANDBOX = shutil.which("bwrap") is None and os.environ.get("CI") != "true"
WHY = "grading runs notebooks in bubblewrap (bwrap), which this machine lacks"
needs_sandbox = pytest.mark.skipif(NO_SANDBOX, reason=WHY)  # a test's or a file's mark


def require_sandbox():
    """Skip the calling test or fixture where :data:`NO_SANDBOX` says so."""
    if NO_SANDBOX:
        pytest.skip(WHY)


def master():
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def split():
    """The sample's student notebook (dict) and tests, without running anything."""
    return split_master(master(), "sample")


def cell_index(nb, question):
    return next(i for i, cell in enumerate(nb["cells"]) if question_of(cell) == question)


def code_cell(text, question=None):
    meta = {"d2lattn": {"question": question}} if question else {}
    return {"cell_type": "code", "metadata": meta, "source": text, "outputs": [],
            "execution_count": None}


def hidden_lines(tests, messages=False):
    """The example sources and expected values of the hidden cases of ``tests``, and their
    messages if ``messages`` (but short lines such as ``>>> X`` or ``0.75``, which any notebook
    may contain)."""
    lines = [line.lstrip("#>.").strip() for test in tests
             for case in cases.cases_of(test, True) if case["hidden"]
             for line in case["code"].splitlines() if messages or not line.startswith("#")]
    return [line for line in lines if len(line) > 8
            and not re.fullmatch(r"[\w.]+(\((\w+(, )?)*\))?", line)]  # softmax(X), answer_q3


def run_cells(nb):
    """Execute a notebook's code cells (no magics) in one fresh namespace, as a kernel would."""
    env = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec(cell_source(cell), env)
    return env


def plain(value):
    return runner.encode(value)


def call_case(number, *calls):
    """A case request as grading sends it: calls on the namespace, each checked, no inputs."""
    return {"id": number, "question": f"q{number}", "scope": None,
            "steps": [{"call": call, "inputs": None, "want": True} for call in calls]}


def processes_gone(token, seconds=10, part="cmdline"):
    """True once no process started by this one (through any number of others) has ``token``
    in its command line (or ``part``, e.g. "comm": its name): a killed sandbox's processes
    are ended by the kernel, a moment after its first process."""
    deadline = time.monotonic() + seconds
    while processes_with(token, part, mine=True) and time.monotonic() < deadline:
        time.sleep(0.1)
    return processes_with(token, part, mine=True) == []


def processes_with(token, part="cmdline", mine=False):
    """The pids of the processes with ``token`` in ``part`` of /proc/<pid>; ``mine``: only
    those this process started (another test run's sandboxes may be running beside)."""
    found = []
    for path in Path("/proc").glob(f"[0-9]*/{part}"):
        try:
            if token.encode() in path.read_bytes() and (not mine or _descends(path.parent)):
                found.append(path.parent.name)
        except OSError:
            pass
    return found


def _descends(proc):
    """Whether the process of ``proc`` (/proc/<pid>) descends from this one."""
    pid = int(proc.name)
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the parent's pid
        if pid == os.getpid():
            return True
    return False
