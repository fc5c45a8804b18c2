"""Atomic file writes: a file is either its old content or its complete new content.

A write goes to a temporary file beside its target, named after its writer
(``.<name>@<host>.<pid>.<random>.tmp``), which replaces the target once complete. The
writer removes it on every error; what a killed writer leaves, :func:`sweep_temporary`
removes at the next start.
"""

from __future__ import annotations

import os
import re
import socket
import stat
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

FILE_MODE = 0o644
# A temporary file untouched this long is left over, whoever wrote it: no write through
# atomic_path pauses for a day. Before then, one written by another host (a shared file
# system) may belong to a live writer there.
STALE_AFTER_S = 24 * 3600
TEMP_NAME = re.compile(r"\.(?P<target>.+)@(?P<host>[^@/]+)\.(?P<pid>\d+)\.[a-z0-9_]+\.tmp")
HOST = socket.gethostname()
# The largest record file read (:func:`read_regular`): a million step times and losses
# (the schema's most measured steps) at full precision are about 40 MB.
MAX_RECORD_BYTES = 64 * 2**20


class UnsafeFile(OSError):
    """A file that is not read: no regular file, a link out of its folder, or too large.
    The message is the reason alone; the reader names the path."""


def read_regular(path: str | os.PathLike, limit: int, within: str | os.PathLike | None = None) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes that is, or links
    to, a file inside ``within`` (default: its own folder). A FIFO, device, socket or
    directory is refused before it is opened for reading (a FIFO would block, a device
    never end), and the file read is the one checked (opened without following a FIFO's
    writer, then checked again by its descriptor). Raises :class:`UnsafeFile`, or the
    OSError of a file that cannot be read."""
    path = Path(path)
    folder = Path(within if within is not None else path.parent).resolve()
    if path.is_symlink():
        target = Path(os.path.realpath(path))  # a loop is left for stat to refuse
        if not target.is_relative_to(folder):
            raise UnsafeFile(f"a link to {target}, outside {folder}")
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeFile("is a directory, not a file" if stat.S_ISDIR(info.st_mode)
                         else "not a regular file (a FIFO, device or socket)")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # replaced between the check and the open
            raise UnsafeFile("not a regular file (a FIFO, device or socket)")
        if info.st_size > limit:
            raise UnsafeFile(f"{info.st_size:,} bytes, over the limit of {limit:,}")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFile(f"over the limit of {limit:,} bytes")
    return data


def temp_prefix(name: str) -> str:
    """The start of the name of a temporary file this process writes for ``name``
    (mkstemp adds a random part and ``.tmp``)."""
    return f".{name}@{HOST}.{os.getpid()}."


def writer_of(name: str) -> tuple[str, int] | None:
    """(host, pid) of the process that wrote temporary file ``name``; None for a name
    not written by :func:`atomic_path`'s scheme (e.g. before writers were named)."""
    match = TEMP_NAME.fullmatch(name)
    return (match["host"], int(match["pid"])) if match else None


def discard(path: Path) -> bool:
    """Remove ``path`` if it is there; whether it is gone. A file system that refuses
    (read-only) is left as it is: nothing more can be done now, the next start sweeps it."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        return False
    return True


@contextmanager
def atomic_path(path: str | os.PathLike, *, fsync: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path``; the block writes it, and it replaces ``path``
    when the block ends without an error (``fsync``: flushed to disk first)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if fsync:
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str, *, fsync: bool = False) -> Path:
    """Write ``text`` (UTF-8, "\\n" line ends) to ``path`` atomically."""
    with atomic_path(path, fsync=fsync) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")
    return Path(path)


def is_left_over(path: Path, *, now: float | None = None) -> bool:
    """Whether temporary file ``path`` is a dead writer's: its writer ran on this host and
    is gone, or nothing touched it for STALE_AFTER_S (another host's, an unnamed one)."""
    try:
        age = (now or time.time()) - path.lstat().st_mtime
    except FileNotFoundError:
        return False
    if age > STALE_AFTER_S:
        return True
    writer = writer_of(path.name)
    return writer is not None and writer[0] == HOST and not process_alive(writer[1])


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (another user's counts)."""
    if pid <= 0:
        return True  # not a process of its own: never taken for dead
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_temporary(roots: Iterable[str | os.PathLike]) -> list[Path]:
    """Remove the temporary files (``.*.tmp``) under ``roots`` that dead writers left;
    return those removed. A live writer's stay, and so does what cannot be removed."""
    removed, now = [], time.time()
    for root in roots:
        for folder, _dirs, names in os.walk(root):
            for name in names:
                path = Path(folder, name)
                if (name.startswith(".") and name.endswith(".tmp")
                        and is_left_over(path, now=now) and discard(path)):
                    removed.append(path)
    return removed
