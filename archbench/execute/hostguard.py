"""Host guard: at most one archbench benchmark runs on a host at a time, whoever started it
(two campaigns, a campaign restarted after a kill, ``snakemake --unlock`` on a live run).

The guard is an exclusive ``flock`` on a host-wide lock file:

- ``ARCHBENCH_HOST_LOCK`` names the file; default ``/tmp/archbench-benchmark.lock``,
  created readable by every user (``flock`` works on a read-only descriptor, so other
  users share the guard).
- A flock dies with the last process holding it: a lock file left by a killed run guards
  nothing and is taken over at once. Waiting is only ever for a live benchmark.
- The supervisor takes it before its first attempt and passes the locked descriptor to
  its lifeline (:mod:`archbench.execute.lifeline`): the lock belongs to the open file description,
  so the guard stays held while the worker tree lives, even after the supervisor died.
- The holder writes its pid, time and record path into the file; a supervisor that has
  to wait names it in its log, once.
- One guard per measurement, taken by its supervisor only (never by the ranks of its
  srun/mpirun steps): multi-rank runs cannot deadlock on it. On a multi-node job it guards
  the host the supervisor runs on.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from archbench.core import provenance

ENV = "ARCHBENCH_HOST_LOCK"
DEFAULT_PATH = "/tmp/archbench-benchmark.lock"
POLL_S = 0.5


def lock_path() -> Path:
    """The host-wide lock file (``ARCHBENCH_HOST_LOCK``, else DEFAULT_PATH)."""
    return Path(os.environ.get(ENV) or DEFAULT_PATH)


def open_lock(path: Path) -> tuple[int, bool]:
    """A descriptor of the lock file, created if missing, and whether it is writable (a file
    another user created is opened read-only). Symbolic links are refused."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except PermissionError:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW), False
    if os.fstat(fd).st_uid == os.geteuid():
        os.fchmod(fd, 0o644)  # readable by other users whatever the umask
    return fd, True


def holder(fd: int) -> str:
    """Who holds the guard, as its holder wrote it."""
    return os.pread(fd, 1024, 0).decode(errors="replace").strip() or "a process not yet named"


@contextmanager
def held(record: str | os.PathLike, *, check: Callable[[], None] = lambda: None,
         poll_s: float = POLL_S) -> Iterator[int]:
    """Hold the host guard for the run that writes ``record``; yield the locked descriptor
    (pass it to processes that must keep the guard while they live).

    While another benchmark holds it, log one line naming the holder and try again every
    ``poll_s``, calling ``check`` in between (it may raise to give up waiting).
    """
    path = lock_path()
    fd, writable = open_lock(path)
    try:
        began, told = time.monotonic(), False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            if not told:
                print(f"archbench: waiting for the host guard {path}, held by {holder(fd)}",
                      file=sys.stderr, flush=True)
                told = True
            check()
            time.sleep(poll_s)
        if told:
            print(f"archbench: host guard taken after {time.monotonic() - began:.1f} s",
                  file=sys.stderr, flush=True)
        if writable:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} since {provenance.now()}: {record}\n".encode(), 0)
        yield fd
    finally:
        os.close(fd)
