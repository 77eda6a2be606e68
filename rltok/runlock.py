"""One writer per run directory: an advisory lock that the operating system drops when its holder dies."""

from __future__ import annotations

import fcntl
import os
import socket
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rltok.errors import UserError

LOCK = ".lock"


def _holder(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, 256).decode("utf-8", "replace").strip()


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold run_dir/.lock while the body runs: refuse if a live process holds it, take over one
    whose holder died (the file still names it, but the kernel lock is gone)."""
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd) or "another process"
        os.close(fd)
        raise UserError(
            f"{run_dir} is in use by another rltok run ({holder}); wait for it to finish "
            "or choose another --out"
        ) from None
    stale = _holder(fd)
    if stale:
        warnings.warn(
            f"{run_dir} had a stale lock from {stale}, which is no longer running; taking it over"
        )
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
    try:
        yield
    finally:
        os.ftruncate(fd, 0)  # an empty lock file means nobody holds it
        os.close(fd)
