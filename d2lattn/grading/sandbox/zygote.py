"""The prepared process inside the sandbox: it imports once what every run needs, then forks a
runner for each group of questions into a sandbox of its own.

The grader starts ``python -c <this file's source>`` in bubblewrap (:mod:`bwrap`) with one
end of a socket as its standard input. It reads one JSON line (the runner's source, the
grader's nice value, d2lattn's compatibility shim, the seccomp filter and the sizes of /tmp
and /dev/shm), imports NumPy, MXNet, matplotlib and IPython, answers ``ready`` and then, for
each single byte that arrives with five file descriptors (the runner's input, output, error
output, a lifeline and a deathbed), forks:

- a **keeper**, which enters new mount, PID, IPC, network, UTS and cgroup namespaces (as
  an ordinary user, a user namespace too, in which the kernel counts the group's processes),
  and waits until the grader lets go of the lifeline (then kills the group) or the group ends;
  it holds the deathbed until it has reaped the runner, the last process of the group to end
  (the kernel ends every other process of a PID namespace before its first one), so the
  grader learns when nothing of the group is left;
- the **runner**, PID 1 of the new PID namespace (which ignores the signals its own
  processes send it) and leader of a session of its own, which mounts a fresh ``/proc``
  (keyrings and the host's file locks masked, the kernel's settings read-only), ``/tmp`` and
  ``/dev/shm``, closes every other descriptor and runs :func:`runner.main`. Before any
  submission code runs, the runner becomes its user, drops every capability, forbids new
  privileges and loads the seccomp filter (:func:`confine`).

So no two groups share a writable file, a process, a counter of a namespace (process ids,
inodes of /tmp) or a kernel object, and none can reach the prepared process: it is in a PID
namespace they cannot see, holds nothing of theirs, and runs no submission code. Everything
else bubblewrap mounts is read-only. Standard library only.
"""
import ctypes
import json
import os
import select
import signal
import socket
import sys
import types

NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x20000000 | 0x40000000
"""CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET."""
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NAME, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 1, 15, 22, 38
PR_CAP_AMBIENT = 47
SECCOMP_MODE_FILTER, CAP_VERSION_3 = 2, 0x20080522
OPEN_TREE, MOVE_MOUNT = 428, 429  # system call numbers, the same on every architecture
OPEN_TREE_CLONE, AT_RECURSIVE, AT_FDCWD, MOVE_MOUNT_F_EMPTY_PATH = 1, 0x8000, -100, 4
MASKED = ("keys", "key-users", "locks")  # in /proc: the kernel's keyrings, every user's, and
# every file lock on the host
READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")  # in /proc, as bubblewrap leaves them

libc = ctypes.CDLL(None, use_errno=True)


def _call(result, what):
    """Raise OSError naming ``what`` if a C call returned non-zero."""
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def main():
    """Prepare, then fork a runner for each request until the grader closes the socket."""
    _name(b"d2lattn-zygote")
    control = socket.socket(fileno=0)
    config = json.loads(_line(control))
    runner = types.ModuleType("_d2lattn_runner")
    exec(compile(config["runner"], "runner.py", "exec"), runner.__dict__)
    runner.lower_priority(config["nice"])
    runner.preload(config["compat"])
    import IPython.core.interactiveshell  # noqa: F401 - each runner makes its own shell

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # keepers are reaped by the kernel
    control.sendall(b"ready\n")
    while True:
        message, fds, _, _ = socket.recv_fds(control, 1, 5)
        if not message:
            return
        if len(fds) == 5 and os.fork() == 0:
            control.close()
            _keep(fds, runner, config)
        for fd in fds:
            os.close(fd)


def _name(name):
    """Name this process (``ps`` shows it; its command line is the prepared process's)."""
    _call(libc.prctl(PR_SET_NAME, name, 0, 0, 0), "prctl")


def _line(control):
    """One line from the socket, read a byte at a time (nothing after it is taken)."""
    data = b""
    while not data.endswith(b"\n"):
        byte = control.recv(1)
        if not byte:
            raise SystemExit("the grader closed the socket before the configuration ended")
        data += byte
    return data


def _keep(fds, runner, config):
    """In new namespaces, start the runner as PID 1 and wait until it ends or the grader lets
    go of the lifeline, then kill it (and with it every process of the group)."""
    status = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _name(b"d2lattn-keeper")
        _call(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
        _enter_namespaces(config["own_user_namespace"])
        pid = os.fork()
        if pid == 0:
            _run(fds, runner, config)
        for fd in fds[:3]:
            os.close(fd)  # the runner's output ends with the runner
        ended = os.pidfd_open(pid)
        select.select([fds[3], ended], [], [])
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status = 0
    finally:
        os._exit(status)


def _enter_namespaces(own_user_namespace):
    """New namespaces for the keeper and its runner. As an ordinary user also a user
    namespace, with the same uid: the kernel counts the runner's processes in it."""
    if not own_user_namespace:
        return _call(libc.unshare(NAMESPACES), "unshare")
    uid, gid = os.getuid(), os.getgid()
    _call(libc.unshare(NAMESPACES | CLONE_NEWUSER), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as file:
            file.write(text)


def _run(fds, runner, config):
    """The group's runner: its own /proc, /tmp and /dev/shm, its descriptors only."""
    status = 1
    try:
        _name(b"d2lattn-runner")
        _call(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.setsid()  # a process group of its own: kill(0, ...) reaches no other group
        _mount_private_folders(config)
        runner.main(lambda uid: confine(runner, uid, config["seccomp"]))
        status = 0
    except BaseException as err:  # noqa: B036 - said on the group's error output
        print(f"the sandbox could not start its runner: {type(err).__name__}: {err}",
              file=sys.stderr, flush=True)
    finally:
        os._exit(status)


def _mount(source, target, kind, flags, data=None):
    _call(libc.mount(source and source.encode(), target.encode(), kind and kind.encode(),
                     flags, data and data.encode()), f"mount {target}")


def _mount_private_folders(config):
    """A fresh /proc of this PID namespace, /tmp (with the Python folders bubblewrap put
    there), /dev/shm and /dev/pts; nothing mounted here reaches the prepared process's."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in MASKED:
        _mount("/dev/null", f"/proc/{name}", None, MS_BIND)
    for name in READ_ONLY:
        if os.path.exists(f"/proc/{name}"):
            _mount(f"/proc/{name}", f"/proc/{name}", None, MS_BIND | MS_REC)
            _mount(None, f"/proc/{name}", None,
                   MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    kept = [(path, _detached_copy(path)) for path in config["tmp_binds"]]
    for folder, size in (("/tmp", config["tmp_size"]), ("/dev/shm", config["shm_size"])):
        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    for path, tree in kept:  # a Python installation under /tmp, back where it was
        os.makedirs(path, mode=0o755, exist_ok=True)
        _call(libc.syscall(MOVE_MOUNT, tree, b"", AT_FDCWD, path.encode(),
                           MOVE_MOUNT_F_EMPTY_PATH), f"move_mount {path}")
        os.close(tree)
    for link, target in config["tmp_links"]:
        os.makedirs(os.path.dirname(link), mode=0o755, exist_ok=True)
        os.symlink(target, link)
    _mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
           "newinstance,ptmxmode=0666,mode=0620")  # terminals of this group only


def _detached_copy(path):
    """A descriptor of a copy of the mounts at ``path`` (and below), attached nowhere."""
    tree = libc.syscall(OPEN_TREE, AT_FDCWD, path.encode(), OPEN_TREE_CLONE | AT_RECURSIVE)
    if tree < 0:
        _call(tree, f"open_tree {path}")
    return tree


def confine(runner, uid, seccomp):
    """Before any submission code: become ``uid`` (as root; see :func:`runner.become`), drop
    every capability, forbid new privileges and load the seccomp filter (``seccomp``: the
    BPF program's bytes as hex)."""
    runner.become(uid)
    _call(libc.prctl(PR_CAP_AMBIENT, 4, 0, 0, 0), "prctl")  # PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(CAP_VERSION_3, 0)
    _call(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")
    _call(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")
    program = bytes.fromhex(seccomp)

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    filter_ = Program(len(program) // 8, program)
    _call(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(filter_), 0, 0),
          "seccomp")


if __name__ == "__main__":
    main()
