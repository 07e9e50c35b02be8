"""Kernel state that every sandbox could reach through the read-only files they all see
(issue 42): file locks between two live sandboxes, the page cache's residency from one
sandbox to the next. Each channel is tried as a cheater would, with a secret that only the
receiving side's output could reveal; the controls are the cases themselves (each ran to
its end and sent its value)."""
import os
import random
import threading

from d2lattn.grading.forbid import shadow
from d2lattn.grading.sandbox.session import run_submission
from grading_support import needs_sandbox

pytestmark = needs_sandbox
SHARED = os.path.join(os.path.dirname(os.__file__), "pydoc_data", "topics.py")  # 180 pages
OTHER = os.__file__  # both read-only, in every sandbox; nothing grading runs reads the first


def sandbox_value(code, folder, call="result", seconds=30):
    """``(value of call, raised, notes)`` of ``code`` run in a sandbox of its own."""
    case = {"id": 0, "question": "q", "scope": None,
            "steps": [{"call": call, "inputs": None, "want": True}]}
    group, = run_submission([(1, code)], [(shadow.Shadows(folder)(()), [[case]])], 60,
                            seconds, 100_000)
    record = group.results.get(0)
    value = _python(record.values[0]) if record and record.values else None
    return value, record and record.raised, [text for _, text in group.notes]


def _python(value):
    if value["t"] in ("list", "tuple"):
        return [_python(item) for item in value["v"]]
    if value["t"] == "dict":
        return {_python(k): _python(v) for k, v in value["v"]}
    return value["v"]


COMMON = '''import ctypes, fcntl, os, struct, time
libc = ctypes.CDLL(None, use_errno=True)
SHARED, OTHER = {shared!r}, {other!r}


def attempt(call):
    """0 if ``call()`` worked, else minus its errno."""
    try:
        call()
        return 0
    except OSError as err:
        return -err.errno


def lock(kind, start, length=1):
    return struct.pack("hhqqi", kind, os.SEEK_SET, start, length, 0)
'''
HOLDER = COMMON + '''
ofd, posix, whole = (os.open(path, os.O_RDONLY) for path in (SHARED, SHARED, OTHER))
tried = [attempt(lambda: fcntl.fcntl(ofd, fcntl.F_OFD_SETLK, lock(fcntl.F_RDLCK, {ofd_at}))),
         attempt(lambda: fcntl.fcntl(posix, fcntl.F_SETLK, lock(fcntl.F_RDLCK, {posix_at}))),
         attempt(lambda: fcntl.flock(whole, fcntl.LOCK_SH))]


def hold():
    time.sleep({hold})
    return tried
'''
PROBER = COMMON + '''

def seen_lock(fd, command, start):
    """The start of a lock another holds in [start, start + 1000), or minus an errno."""
    try:
        got = struct.unpack("hhqqi", fcntl.fcntl(fd, command, lock(fcntl.F_WRLCK, start, 1000)))
    except OSError as err:
        return -err.errno
    return None if got[0] == fcntl.F_UNLCK else got[2]


def probe():
    shared, other = os.open(SHARED, os.O_RDONLY), os.open(OTHER, os.O_RDONLY)
    found, end = {{}}, time.monotonic() + {wait}
    while time.monotonic() < end and not all(
            isinstance(found.get(key), int) and found[key] > 0 for key in ("ofd", "posix")):
        found["ofd"] = seen_lock(shared, fcntl.F_OFD_GETLK, 0)
        found["posix"] = seen_lock(shared, fcntl.F_GETLK, 1000)
        found["flock"] = attempt(lambda: fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB))
        if found["flock"] == 0:
            fcntl.flock(other, fcntl.LOCK_UN)
        time.sleep(0.1)
    try:
        found["/proc/locks"] = open("/proc/locks").read()
    except OSError as err:
        found["/proc/locks"] = -err.errno
    return found
'''


def test_no_lock_passes_between_two_live_sandboxes(tmp_path):
    """One sandbox takes an open-file-description lock and a process lock at secret offsets
    of a file of the Python installation, and a whole-file lock on another; a second
    sandbox, alive at the same time, tests for them and reads /proc/locks."""
    secret = random.Random()
    ofd_at, posix_at = secret.randrange(1, 1000), secret.randrange(1001, 2000)
    paths = {"shared": SHARED, "other": OTHER}
    holder = HOLDER.format(ofd_at=ofd_at, posix_at=posix_at, hold=14, **paths)
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(
        holder=sandbox_value(holder, tmp_path / "a", "hold()")))
    thread.start()
    found, raised, notes = sandbox_value(PROBER.format(wait=10, **paths), tmp_path / "b",
                                         "probe()")
    thread.join()
    tried, held_raised, held_notes = outcome["holder"]
    assert raised is held_raised is None and notes == held_notes == [], outcome
    assert tried == [-1, -1, -1], tried  # EPERM: no lock taken
    assert found["ofd"] != ofd_at and found["posix"] != posix_at, found
    assert found["ofd"] == found["posix"] == -1, found  # testing for a lock is refused too
    assert found["flock"] in (0, -1), found  # taken, or refused; never "held by another"
    assert found["/proc/locks"] in ("", -1), found  # masked


PAGES = 36  # bits of the secret, one page of the shared file each (every other page)
WRITER = COMMON + '''
fd = os.open(SHARED, os.O_RDONLY)
tried = [attempt(lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)),
         attempt(lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM))]
for index, bit in enumerate({bits}):
    if bit:
        os.pread(fd, 1, (2 * index + 1) * 4096)  # load that page into the cache
result = tried
'''
READER = COMMON + '''
import mmap
fd = os.open(SHARED, os.O_RDONLY)
attempt(lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM))  # no read ahead
pages, size = [2 * index + 1 for index in range({pages})], os.fstat(fd).st_size
libc.mmap.restype = ctypes.c_void_p
address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
resident = (ctypes.c_ubyte * (size // 4096 + 1))()
status = libc.mincore(ctypes.c_void_p(address), size, resident)
by_mincore = [resident[page] & 1 for page in pages] if status == 0 else -ctypes.get_errno()


def cached(page):  # cachestat (Linux 6.5): the pages of a range in the cache
    span, counts = (ctypes.c_uint64 * 2)(page * 4096, 4096), (ctypes.c_uint64 * 5)()
    status = libc.syscall(451, fd, span, counts, 0)
    return counts[0] if status == 0 else -ctypes.get_errno()


def without_waiting(page):  # 1 if the page is in the cache (read), 0 if not (EAGAIN)
    try:
        os.preadv(fd, [bytearray(1)], page * 4096, os.RWF_NOWAIT)
        return 1
    except BlockingIOError:
        return 0
    except OSError as err:
        return -err.errno


by_cachestat = [cached(page) for page in pages]
result = {{"mincore": by_mincore, "cachestat": by_cachestat,
          "nowait": [without_waiting(page) for page in pages]}}
'''


def test_the_page_cache_carries_nothing_from_one_sandbox_to_the_next(tmp_path):
    """A sandbox writes a 36-bit secret as the residency of pages of a read-only file
    (evicting the file, then reading the pages of the 1 bits); the next sandbox, after the
    first has ended, reads residency with mincore, cachestat and reads that do not wait."""
    bits = [random.getrandbits(1) for _ in range(PAGES - 2)] + [0, 1]
    paths = {"shared": SHARED, "other": OTHER}
    tried, raised, notes = sandbox_value(WRITER.format(bits=bits, **paths), tmp_path / "a")
    assert raised is None and notes == [], (raised, notes)
    found, raised, notes = sandbox_value(READER.format(pages=PAGES, **paths), tmp_path / "b")
    assert raised is None and notes == [], (raised, notes)
    assert tried == [-1, -1], tried  # EPERM: nothing evicted, no read-ahead turned off
    for way, readout in found.items():
        assert readout != bits, (way, readout)
    assert found["mincore"] == -1 and set(found["cachestat"]) == {-1}, found  # EPERM
    assert set(found["nowait"]) == {-95}, found  # ENOSYS, then the C library's EOPNOTSUPP
