"""The system calls a sandbox may not make: a seccomp filter that bubblewrap loads before it
starts the runner, so that it holds for the runner and every process a submission starts.

Each denied call fails with EPERM (``clone3``: ENOSYS, so that the C library falls back to
``clone``, whose flags the filter can read). What the filter closes:

- **keyrings**: no key can be read, written or created, and no keyring joined (each join
  would count a key against the user's quota, which ``/proc/key-users`` shows to all), so
  nothing passes through the grader's session keyring or a sandbox user's keyrings;
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

System calls of another architecture (32-bit calls on x86_64) kill the process.
"""
import errno
import tempfile

DENIED = (
    "add_key", "request_key", "keyctl", "setsid",
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
CLONE_NEW = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000,
             "CLONE_NEWUTS": 0x04000000, "CLONE_NEWIPC": 0x08000000,
             "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
             "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080}


def filter_program():
    """The filter as a BPF program (bytes), for ``bwrap --seccomp FD``."""
    import pyseccomp as sc

    rules = sc.SyscallFilter(sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        rules.add_rule(deny, name)
    for flag in CLONE_NEW.values():  # clone's flags are its first argument (x86_64, arm64)
        rules.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    with tempfile.TemporaryFile() as file:
        rules.export_bpf(file)  # libseccomp writes to the file descriptor itself
        file.seek(0)
        return file.read()

