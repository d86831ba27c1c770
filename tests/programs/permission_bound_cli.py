"""Runs `albert-tf` commands one after another in this process as a user whom file permissions bind: run as root,
it first drops the capabilities that let root write and read past the permission bits (CAP_DAC_OVERRIDE,
CAP_DAC_READ_SEARCH; capset(2), before any thread exists, so every thread started later lacks them too), so that a
folder of mode 0o555 refuses a write with EACCES as it does to any other user. Prints `exit CODE` on stdout after
each command.

    python tests/programs/permission_bound_cli.py COMMAND ARG... [--then COMMAND ARG...]...
"""
import ctypes
import os
import sys

CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_file_capabilities():
    """Removes CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from this thread's capability sets (a user without them
    loses nothing)."""
    libc = ctypes.CDLL(None, use_errno=True)
    header, data = _Header(_LINUX_CAPABILITY_VERSION_3, 0), (_Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    keep = ~((1 << CAP_DAC_OVERRIDE) | (1 << CAP_DAC_READ_SEARCH)) & 0xFFFFFFFF
    for field in ("effective", "permitted", "inheritable"):
        setattr(data[0], field, getattr(data[0], field) & keep)
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


if __name__ == "__main__":
    if os.geteuid() == 0:
        drop_file_capabilities()
    from albert_tf import cli  # pylint: disable=wrong-import-position  (after the capabilities are gone)

    commands, current = [], []
    for arg in sys.argv[1:]:
        if arg == "--then":
            commands.append(current)
            current = []
        else:
            current.append(arg)
    commands.append(current)
    for argv in commands:
        code = cli.main(argv)
        print(f"exit {code}", flush=True)
