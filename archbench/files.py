"""Atomic file writes: a file is either its old content or its complete new content."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

FILE_MODE = 0o644


@contextmanager
def atomic_path(path: str | os.PathLike, *, fsync: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path``; the block writes it, and it replaces ``path``
    when the block ends without an error (``fsync``: flushed to disk first)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
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
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str, *, fsync: bool = False) -> Path:
    """Write ``text`` (UTF-8, "\\n" line ends) to ``path`` atomically."""
    with atomic_path(path, fsync=fsync) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")
    return Path(path)
