"""The engine process's own seccomp filter: after the engine is loaded, no new socket,
no new program, no kernel interface that could stand in for one.

The namespaces bubblewrap (or gVisor) gives an engine process already leave it no
network to reach and no file of the operator's to write. The filter closes what a
namespace does not: it could still make a Unix socket pair or a netlink socket, start
a program from the read-only view, or use io_uring, whose requests are not system
calls a filter sees. Code that escaped QuickJS and wasmtime now gets EPERM for each,
so what it can do is bounded by the system calls the engine itself needs.

The filter is installed with libseccomp (through the `pyseccomp` binding, which loads
Debian's libseccomp2) for every thread of the process (TSYNC), before the engine
process reads its first frame. An engine process that cannot install it does not start:
the tier is refused in one line, never run without its wall.
"""

from __future__ import annotations

import errno

#: The system calls refused (EPERM) once the engine is loaded.
DENIED = (
    # sockets of any family: no network namespace is needed for AF_UNIX or netlink
    "socket",
    "socketpair",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    # another program, from anything the view holds
    "execve",
    "execveat",
    # interfaces whose work a filter never sees, or that reach past the process
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "mount",
    "umount2",
    "pivot_root",
    "unshare",
    "setns",
)


class FilterError(RuntimeError):
    """The filter could not be installed (no libseccomp, or the kernel refused it)."""


def install() -> None:
    """Refuse `DENIED` for every thread of this process from now on."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError) as exc:
        # pyseccomp raises RuntimeError when it finds no libseccomp to load
        raise FilterError(
            f"libseccomp is not available ({type(exc).__name__}; apt-get install libseccomp2)"
        ) from None
    try:
        syscalls = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
        syscalls.set_attr(seccomp.Attr.CTL_TSYNC, 1)
        for name in DENIED:
            syscalls.add_rule(seccomp.ERRNO(errno.EPERM), name)
        syscalls.load()
    except OSError as exc:
        raise FilterError(f"seccomp filter refused: {exc.strerror or exc}") from None


__all__ = ["DENIED", "FilterError", "install"]
