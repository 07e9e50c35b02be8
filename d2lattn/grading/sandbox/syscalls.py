"""The system calls a sandbox may not make: a seccomp filter that each runner loads before any
submission code runs (the prepared process's :func:`zygote.confine`, after the runner has
become its user and dropped every capability), so that it holds for the runner and every
process a submission starts. The prepared process itself runs no submission code and is not
filtered.

Each denied call fails with EPERM (``clone3``, ``preadv2`` and ``pwritev2``: ENOSYS, so that
the C library falls back to ``clone``, whose flags the filter can read, or to ``preadv`` and
``pwritev``). What the filter closes:

- **keyrings**: no key can be read, written or created, and no keyring joined (each join
  would count a key against the user's quota, which ``/proc/key-users`` shows to all), so
  nothing passes through the grader's session keyring or a sandbox user's keyrings;
- **kernel state attached to the files every sandbox sees** (the read-only Python
  installation): locks and leases (``flock``; ``fcntl``'s record, open-file-description and
  lease commands and directory notices), which another sandbox could set or test; the page
  cache's residency, which another sandbox could write by evicting or loading pages and read
  without timing (``fadvise64``, ``readahead``, ``madvise`` to page out or cool, ``mincore``,
  ``cachestat``, reads that fail rather than wait: ``preadv2``/``pwritev2``); and watches of
  another sandbox's reads (``inotify``, ``fanotify``). ``/proc/locks``, which lists every
  lock on the host, is masked by the prepared process;
- **new sessions** (``setsid``, after bubblewrap's own): every process of a sandbox stays in
  its one scheduler autogroup, which the runner sets to the grader's nice value, so a
  submission cannot take more of the CPU by starting sessions;
- **System V and POSIX IPC** (shared memory, semaphores, message queues): objects that would
  outlive a group of questions and lie outside the address-space limit;
- **new namespaces** (``unshare``, ``setns``, ``clone`` with a ``CLONE_NEW*`` flag), so no
  new user namespace either, and **mounts**;
- **other processes and the kernel's own interfaces**: ``ptrace``, reading or writing another
  process's memory, ``bpf``, ``perf_event_open``, ``userfaultfd``, io_uring (whose requests a
  seccomp filter cannot see), modules, ``kexec``, ``reboot``, swap, quotas, the kernel log.

What remains is timing: a submission can still load pages into a shared cache and another
measure how long a read takes (see exercises/README.md, *What the sandboxes still share*).

System calls of another architecture (32-bit calls on x86_64) kill the process.
"""
import errno
import tempfile

DENIED = (
    "add_key", "request_key", "keyctl", "setsid",
    "flock", "fadvise64", "fadvise64_64", "readahead", "mincore", "cachestat",
    "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
    "fanotify_init", "fanotify_mark",
    "shmget", "shmat", "shmctl", "semget", "semop", "semtimedop", "semctl",
    "msgget", "msgsnd", "msgrcv", "msgctl",
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    "unshare", "setns",
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "name_to_handle_at",
    "open_by_handle_at",
    "ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open",
    "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog")
FALLBACK = ("clone3", "preadv2", "pwritev2")  # ENOSYS: the C library uses the older call
FCNTL_DENIED = {"F_GETLK": 5, "F_SETLK": 6, "F_SETLKW": 7, "F_OFD_GETLK": 36,
                "F_OFD_SETLK": 37, "F_OFD_SETLKW": 38, "F_SETLEASE": 1024,
                "F_GETLEASE": 1025, "F_NOTIFY": 1026}  # fcntl's commands (its second argument)
MADVISE_DENIED = {"MADV_COLD": 20, "MADV_PAGEOUT": 21}  # madvise's advice (its third)
CLONE_NEW = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000,
             "CLONE_NEWUTS": 0x04000000, "CLONE_NEWIPC": 0x08000000,
             "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
             "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080}


def filter_program():
    """The filter as a BPF program (bytes), which :func:`zygote.confine` loads."""
    import pyseccomp as sc

    rules = sc.SyscallFilter(sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        rules.add_rule(deny, name)
    for flag in CLONE_NEW.values():  # clone's flags are its first argument (x86_64, arm64)
        rules.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    low = 0xFFFFFFFF  # the kernel reads both as 32-bit numbers and ignores the upper half
    for command in FCNTL_DENIED.values():
        rules.add_rule(deny, "fcntl", sc.Arg(1, sc.MASKED_EQ, low, command))
    for advice in MADVISE_DENIED.values():
        rules.add_rule(deny, "madvise", sc.Arg(2, sc.MASKED_EQ, low, advice))
    for name in FALLBACK:
        rules.add_rule(sc.ERRNO(errno.ENOSYS), name)
    with tempfile.TemporaryFile() as file:
        rules.export_bpf(file)  # libseccomp writes to the file descriptor itself
        file.seek(0)
        return file.read()

