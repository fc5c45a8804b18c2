"""A measurement's lease: one supervisor at a time measures a record, whoever started it.

Before it writes anything of its measurement (the worker log, the record), a supervisor
takes the lease ``<record>.lease`` beside the record (``rep0.json.lease``): a file naming
its holder (host, boot, pid, process start, since when;
:class:`~archbench.execute.holders.Holder`). Taking it is atomic on any POSIX file system
that hosts jobs sharing results, NFS included: the holder is written to a temporary file,
which is then hard-linked to the lease's name, a step that fails when the name exists.

- A live holder's lease is respected: the supervisor refuses (:class:`Held`, one line naming
  the record and the holder) and exits without touching the record, the log or the
  holder's worker.
- A lease is released (removed) when its supervisor ends, however it ends short of being
  killed. A killed holder's lease is stale and taken over at once on its own host (its
  pid is gone, or is another process now). From another host (or after a reboot: another
  machine may bear the same name) nothing can be checked: a
  live holder renews its lease's modification time every RENEW_S, and a lease untouched
  for STALE_AFTER_S is taken for a dead host's (clocks of the hosts sharing the file
  system must agree within minutes). A lease that names no process (not written by
  archbench) is stale too.
- Two supervisors taking over one stale lease cannot both win: the stale file is moved
  aside under a name of the taker's own, and put back if it turns out to be a fresh one.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from archbench.core import storage
from archbench.core.files import FILE_MODE, discard, temp_prefix
from archbench.execute.holders import ALIVE, GONE, UNKNOWN, Holder, parse, this_process

SUFFIX = ".lease"
RENEW_S = 60.0  # a holder renews its lease this often (its modification time)
STALE_AFTER_S = 600.0  # another host's lease untouched this long is a dead holder's
TRIES = 3  # attempts at taking a lease whose stale holders other supervisors also take over
EXIT_HELD = 75  # sysexits' EX_TEMPFAIL: the record is being measured; try again later


class Held(Exception):
    """Record ``record`` is being measured by a live ``holder`` (None: a holder that could
    not be told); its str is the one line telling the user."""

    def __init__(self, record: Path, holder: Holder | None, how: str):
        super().__init__(str(record))
        self.record, self.holder, self.how = record, holder, how

    def __str__(self) -> str:
        alone = "this run leaves its record, log and worker alone"
        if self.holder is None:
            return f"archbench: {self.record}: its lease {lease_path(self.record)} {self.how}: {alone}"
        return (f"archbench: {self.record}: being measured by {self.holder} ({self.how}): "
                f"{alone} (lease {lease_path(self.record)})")


def lease_path(record: str | os.PathLike) -> Path:
    """The lease of ``record``: ``<record>.lease`` beside it."""
    record = Path(record)
    return record.with_name(record.name + SUFFIX)


def state(holder: Holder | None, age_s: float) -> str:
    """ALIVE or GONE: whether the holder of a lease last renewed ``age_s`` seconds ago
    still lives (another host's: while it renews)."""
    if holder is None:
        return GONE
    here = holder.local_state()
    if here != UNKNOWN:
        return here
    return GONE if abs(age_s) > STALE_AFTER_S else ALIVE  # far in the future: not a renewal


def read(path: Path, record: Path) -> tuple[str, float] | None:
    """(text, age in seconds) of lease ``path`` (of ``record``); None when there is none;
    Held when it cannot be read (a directory, say)."""
    try:
        with open(path, "rb") as handle:
            age = time.time() - os.fstat(handle.fileno()).st_mtime
            return handle.read(4096).decode(errors="replace"), age
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Held(record, None, f"cannot be read ({exc.strerror.lower()}): remove it") from exc


class Lease:
    """A lease this process holds (see :func:`held`)."""

    def __init__(self, record: Path, text: str):
        self.record, self.path, self.text = record, lease_path(record), text
        self.renewed = time.monotonic()

    def renew(self) -> None:
        """Touch the lease if RENEW_S passed since the last time (cheap to call often)."""
        if time.monotonic() - self.renewed >= RENEW_S:
            self.renewed = time.monotonic()
            try:
                os.utime(self.path)
            except OSError:
                pass  # gone or unwritable now: what the record's writing meets is told then

    def release(self) -> None:
        """Remove the lease, if it is still this one."""
        try:
            got = read(self.path, self.record)
        except Held:
            return
        if got is not None and got[0] == self.text:
            discard(self.path)


def take(record: str | os.PathLike) -> Lease:
    """Take the lease of ``record``, taking over a stale one; Held when a live holder has
    it; storage.Unwritable (naming the record) when its folder cannot be written."""
    record = Path(record)
    path = lease_path(record)
    text = this_process().to_text()
    mine = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=".tmp", dir=path.parent)
        mine = Path(name)
        with open(fd, "w") as handle:
            handle.write(text)
        os.chmod(mine, FILE_MODE)  # other users read who holds it
        for _ in range(TRIES):
            if link(mine, path):
                return Lease(record, text)
            got = read(path, record)
            if got is None:  # released meanwhile
                continue
            holder = parse(got[0])
            if state(holder, got[1]) == ALIVE:
                how = "alive" if holder.local_state() == ALIVE else \
                    f"on another host or boot; lease renewed {max(got[1], 0):.0f} s ago"
                raise Held(record, holder, how)
            take_over(record, got[0], holder)
        raise Held(record, None, "is being taken over by other supervisors at the same time")
    except OSError as exc:  # the record's folder cannot be written: neither can the record
        raise storage.Unwritable(record, exc) from exc
    finally:
        if mine is not None:
            discard(mine)


def link(source: Path, path: Path) -> bool:
    """Hard-link ``source`` as ``path``; whether it now is (NFS may report a link it made
    as failed: the link count tells)."""
    try:
        os.link(source, path)
        return True
    except FileExistsError:
        return False
    except OSError:
        if os.stat(source).st_nlink == 2:
            return True
        raise


def take_over(record: Path, stale: str, holder: Holder | None) -> None:
    """Remove the lease of ``record`` if it still is ``stale`` (moved aside first, under a
    name of this process, so that only one taker removes it); one line to stderr saying so."""
    path = lease_path(record)
    fd, name = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=".tmp", dir=path.parent)
    os.close(fd)
    aside = Path(name)
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        discard(aside)
        return  # another taker moved it
    got = read(aside, record)
    if got is not None and got[0] != stale:  # a fresh lease, taken after the stale one
        link(aside, path)
    else:
        who = str(holder) if holder else "no process"
        print(f"archbench: {path}: stale lease of {who} taken over", file=sys.stderr, flush=True)
    discard(aside)


@contextmanager
def held(record: str | os.PathLike) -> Iterator[Lease]:
    """Hold the lease of ``record`` for the block (see :func:`take`); released after it."""
    lease = take(record)
    try:
        yield lease
    finally:
        lease.release()
