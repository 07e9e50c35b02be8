"""Every limit and default of the grader, in one place. (The runner, which runs alone inside
the sandbox, keeps its own three: the numbers in one value, the characters of one string
and of an error message, in :mod:`d2lattn.grading.master.steps`.)"""
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # d2lattn: copied into each sandbox, read whole

# --- grading a class (python -m d2lattn.grading grade) -------------------------------------
NOTEBOOK_SECONDS = 300  # a notebook's code cells, in each of its sandboxes (one per group)
CASE_SECONDS = 10  # one example of a case
MAX_OUTPUT = 1_000_000  # characters of output kept per notebook
MAX_BYTES = 200 << 20  # a larger submission file is not read (saved plots included)
MAX_CODE = 2 << 20  # characters of code cells a submission may hold (outputs not counted)
MAX_STUDENT_CELL = 10_000  # characters of a # STUDENT cell read for a name and an e-mail

# --- releasing: the masters are the instructor's, and long ----------------------------------
RELEASE = {"timeout": 900, "case_timeout": 120, "max_output": MAX_OUTPUT}

# --- check() in a student's notebook --------------------------------------------------------
CHECK_CASE_SECONDS = 60  # an endless loop in a student's answer ends with a message

# --- one sandbox ----------------------------------------------------------------------------
RLIMITS = {"RLIMIT_AS": 6 << 30, "RLIMIT_FSIZE": 64 << 20, "RLIMIT_CORE": 0,
           "RLIMIT_NPROC": 256}  # set by the runner before any submission code runs
TMP_SIZE = 256 << 20  # bytes of the sandbox's /tmp
SHM_SIZE = 64 << 20  # bytes of its /dev/shm
STARTUP_SECONDS = 30  # for a sandbox to start, beyond the cells' time limit
UIDS = range(0x6D000000, 0x6F000000)  # as root: one per sandbox (accounts use far lower ones)

# --- what the grader keeps of what a sandbox sends ------------------------------------------
MAX_LINE = 8 << 20  # bytes of one message from the runner
MAX_OBJECTS = 4_000_000  # decoded JSON objects kept from one sandbox (numbers, lists, ...)
SHOWN = 300  # characters of a submission's value or error shown in a report

# --- comparing values -----------------------------------------------------------------------
RTOL, ATOL = 1e-5, 1e-8
ATOL_SINGLE = 1e-5  # when either side is a float32 or float16 array: its rounding, not an error
