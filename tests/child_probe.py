"""Run calls that may kill, hang or poison MXNet in child processes (the fuzz tests' probe).

Each case is Python code run with ``exec`` after ``setup``; a ValueError or TypeError is a
clear refusal and counts as fine. After each case an unrelated MXNet "canary" call checks that
MXNet still works. A case that kills its child (segfault, SIGFPE), raises another error or
hangs is recorded, and a new child goes on with the cases after it.
"""
import os
import subprocess
import sys

import d2lattn

PROBE = """
for name, code in CASES.items():
    print("case:", name, flush=True)
    try:
        exec(code)
        npx.waitall()
    except (ValueError, TypeError) as err:  # a clear refusal is fine
        print("  refused:", err, flush=True)
    (np.ones((2, 2)) @ np.ones((2, 2))).asnumpy()  # the canary: MXNet still works
print("all done")
"""


def failing_cases(cases, setup, timeout=300):
    """{case: exit code, or "hung" after ``timeout`` seconds} of the ``cases`` ({name: code})
    that killed their child process, raised an error other than ValueError/TypeError or hung.
    ``setup``: code run first in each child (imports; it must import mxnet's np and npx)."""
    package_root = os.path.dirname(os.path.dirname(d2lattn.__file__))  # the d2lattn under test
    cases, failed = dict(cases), {}
    while cases:
        try:
            child = subprocess.run([sys.executable, "-c", f"{setup}\nCASES = {cases!r}\n{PROBE}"],
                                   capture_output=True, text=True, timeout=timeout,
                                   env={**os.environ, "PYTHONPATH": package_root})
            output, outcome = child.stdout, child.returncode
            if outcome == 0 and "all done" in output:
                break
        except subprocess.TimeoutExpired as err:
            output, outcome = err.stdout or "", "hung"
            output = output.decode() if isinstance(output, bytes) else output
        started = [line[6:] for line in output.splitlines() if line.startswith("case: ")]
        last = started[-1] if started else next(iter(cases))
        failed[last] = outcome
        cases = {name: code for name, code in cases.items()
                 if name not in started and name != last}
    return failed
