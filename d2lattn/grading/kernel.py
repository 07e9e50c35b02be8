"""Run one submission in a fresh kernel (nbclient): its code cells under one time limit and an
output cap, then the tests, whose source reaches the kernel only after the student's code ran.

The tests run in a cell the grader appends: it executes the source of
:mod:`d2lattn.grading.cases` in a private namespace (so a submission that redefines ``check``
or any grading name changes nothing), runs every case on a copy of the student's namespace and
displays the results as one output of type ``cases.MIME`` carrying a random nonce, which the
grader requires. This keeps honest mistakes and casual tampering out of the grades; it is not a
sandbox against code written to attack the kernel it runs in.
"""
import logging
import math
import secrets
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

from . import cases

RUNNER = Path(cases.__file__).read_text(encoding="utf-8")
QUIET = logging.getLogger(__name__)  # nbclient's own messages repeat what the notes say
QUIET.setLevel(logging.CRITICAL)
TIMEOUT_REPLY = {"ename": "TimeoutError", "evalue": "time limit reached", "traceback": []}


class CappedClient(NotebookClient):
    """A NotebookClient that keeps the first ``max_output`` characters of the cells' outputs
    (the grader's results never count and are always kept)."""

    def __init__(self, nb, max_output, **kwargs):
        super().__init__(nb, **kwargs)
        self.room, self.cut = max_output, False

    def output(self, outs, msg, display_id, cell_index):
        if cases.MIME not in msg["content"].get("data", {}):
            self.room -= len(str(msg["content"]))
            if self.room < 0:
                self.cut = True
                return None
        return super().output(outs, msg, display_id, cell_index)


def run_submission(cells, tests, timeout, case_timeout, max_output):
    """Execute ``cells`` (``(cell number, source)`` pairs) in order, then ``tests``.

    ``timeout`` (seconds) bounds all the cells together; after it, the running cell is
    interrupted and later cells are skipped. ``case_timeout`` bounds each test example.
    Returns ``(results, notes, executed)``: ``{question: case results}`` or None if the tests
    could not run, notes on what went wrong, and the executed code cells as a notebook (each
    cell's number in the submission in its metadata, ``{"d2lattn": {"cell": number}}``).
    """
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(text, metadata={"d2lattn": {"cell": number}})
        for number, text in cells])
    notes = []
    with tempfile.TemporaryDirectory() as workdir:
        client = CappedClient(nb, max_output, kernel_name="python3", allow_errors=True,
                              interrupt_on_timeout=True, error_on_timeout=TIMEOUT_REPLY,
                              shutdown_kernel="immediate",
                              record_timing=False, log=QUIET,
                              extra_arguments=["--IPKernelApp.log_level=ERROR"],
                              resources={"metadata": {"path": workdir}})
        with client.setup_kernel():
            alive = _run_cells(client, [number for number, _ in cells], timeout, notes)
            results = _run_tests(client, tests, case_timeout, notes) if alive else None
    if client.cut:
        notes.append(f"outputs beyond {max_output} characters were dropped")
    return results, notes, nbformat.v4.new_notebook(cells=nb.cells[:len(cells)])


def _run_cells(client, numbers, timeout, notes):
    """Run the notebook's cells until the time limit; False if the kernel died."""
    deadline = time.monotonic() + timeout
    for index, number in enumerate(numbers):
        client.timeout = max(1, math.ceil(deadline - time.monotonic()))
        try:
            client.execute_cell(client.nb.cells[index], index)
        except DeadKernelError:
            notes.append(f"the kernel died in cell {number}")
            return False
        if time.monotonic() >= deadline:
            notes.append(f"time limit of {timeout:g} s reached in cell {number}; "
                         "later cells did not run")
            break
    return True


def _run_tests(client, tests, case_timeout, notes):
    """Append and run the tests cell; the results, or None with a note."""
    nonce = secrets.token_hex(16)
    code = f"{RUNNER}\npublish_results({tests!r}, {nonce!r}, {case_timeout!r})\n"
    cell = nbformat.v4.new_code_cell(
        f"exec(compile({code!r}, 'd2lattn-grading', 'exec'), {{'__name__': 'd2lattn_grading'}})")
    client.nb.cells.append(cell)
    cases_count = sum(len(cases.cases_of(test, True)) for test in tests)
    client.timeout = math.ceil(case_timeout * (cases_count + 1)) + 10
    try:
        client.execute_cell(cell, len(client.nb.cells) - 1)
    except DeadKernelError:
        notes.append("the kernel died while the tests ran")
        return None
    for output in cell.outputs:
        payload = output.get("data", {}).get(cases.MIME)
        if isinstance(payload, dict) and payload.get("nonce") == nonce:
            return payload["results"]
    errors = [f"{out['ename']}: {out['evalue']}" for out in cell.outputs
              if out.get("output_type") == "error"]
    notes.append("the tests could not run" + (f" ({errors[0]})" if errors else ""))
    return None
