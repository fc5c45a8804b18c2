"""Storage faults: a full or read-only file system stops a run in one line.

A record that cannot be written is no failure of its benchmark (a failure record could
not be written either): the run stops with one line naming the path and the cause,

    archbench: results/raw/local/e/c/rep0.json: no space left on device (errno 28): free space and rerun

and the next invocation reruns what has no record. Probes find such a fault before any
work is done: the workflow's when it starts (results/, logs/ and Snakemake's .snakemake/),
the supervisor's before its benchmark starts, so that every job left refuses at once.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Callable

from archbench.core.files import discard, sweep_temporary, temp_prefix

EXIT_UNWRITABLE = 73  # sysexits' EX_CANTCREAT: an output file cannot be created
# A probe writes this much, flushed to disk: room for a record, its worker's copy and a
# log, many times over. Random bytes: a compressing file system stores zeros in nothing.
PROBE_BYTES = 1 << 20
# The file system refuses writes whatever the file: no benchmark of this run can succeed.
FULL_OR_READ_ONLY = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
ADVICE = {errno.ENOSPC: "free space and rerun", errno.EDQUOT: "free space and rerun",
          errno.EROFS: "make it writable and rerun", errno.EACCES: "make it writable and rerun",
          errno.EPERM: "make it writable and rerun"}
# A fault line a worker printed: its path and errno.
REPORTED = re.compile(r"^archbench: (?P<path>.+): [^:]+ \(errno (?P<errno>\d+)\): [^:]+$", re.MULTILINE)


class Unwritable(OSError):
    """``path`` could not be written (errno and cause of the error met); its str is the
    one line telling the user."""

    def __init__(self, path: str | os.PathLike, error: OSError):
        code = error.errno or errno.EIO
        super().__init__(code, os.strerror(code), str(path))

    def __str__(self) -> str:
        return fault_line(self.filename, self)


def fault_line(path: str | os.PathLike, error: OSError) -> str:
    """'archbench: PATH: CAUSE (errno N): WHAT TO DO', the line a fault is told in."""
    code = error.errno or errno.EIO
    cause = os.strerror(code)
    return (f"archbench: {path}: {cause[:1].lower()}{cause[1:]} (errno {code}): "
            f"{ADVICE.get(code, 'check the file system and rerun')}")


def is_fault(error: BaseException) -> bool:
    """Whether ``error`` is a storage fault: an Unwritable, or a file system refusing any
    write (full, over quota, read-only)."""
    return isinstance(error, Unwritable) or (isinstance(error, OSError)
                                             and error.errno in FULL_OR_READ_ONLY)


def probe(directory: str | os.PathLike) -> None:
    """Create ``directory`` if needed and write PROBE_BYTES beside what goes there, flushed
    to disk, then remove them; raises the OSError met (a full disk often surfaces only at
    the flush). The probe file is named as atomic_path names its temporary files."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=temp_prefix("archbench-probe"), suffix=".tmp",
                                dir=directory)
    try:
        with open(fd, "wb") as handle:
            handle.write(os.urandom(PROBE_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        discard(Path(name))


def check_writable(*paths: str | os.PathLike) -> None:
    """Raise Unwritable naming the first of ``paths`` whose directory cannot take a write
    (see :func:`probe`)."""
    for path in paths:
        try:
            probe(Path(path).parent)
        except OSError as exc:
            raise Unwritable(path, exc) from None


def reported_fault(text: str) -> Unwritable | None:
    """The last fault told in ``text`` (a worker's output) by its fault line, if any."""
    found = list(REPORTED.finditer(text))
    if not found:
        return None
    code = int(found[-1]["errno"])
    return Unwritable(found[-1]["path"], OSError(code, os.strerror(code)))


def exit_status(main: Callable[[], int]) -> int:
    """``main()``'s exit status; a storage fault it raises is told in one line on stderr
    instead of a traceback, and its status is EXIT_UNWRITABLE."""
    try:
        return main()
    except OSError as exc:
        if not is_fault(exc):
            raise
        tell(fault_line(exc.filename or "?", exc))
        return EXIT_UNWRITABLE


def tell(line: str) -> None:
    """Print ``line`` on stderr, as far as the stream can still be written (a log on the
    full disk cannot)."""
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr, flush=True)


def prepare_workdir(*, dry_run: bool, outputs: tuple[str, ...] = ("results", "logs"),
                    metadata: str = ".snakemake") -> list[str]:
    """At the start of a workflow run, before anything is built: remove the temporary
    files dead writers left under ``outputs`` and probe each, and Snakemake's ``metadata``
    directory (a dry run writes no output: then that one only, which Snakemake writes even
    then). Return what to tell (the files removed); raise Unwritable naming the first
    directory that cannot take a write."""
    swept = [] if dry_run else sweep_temporary(outputs)
    for directory in (metadata,) if dry_run else (*outputs, metadata):
        try:
            probe(directory)
        except OSError as exc:
            raise Unwritable(directory, exc) from None
    if not swept:
        return []
    shown = ", ".join(str(p) for p in swept[:3]) + (" ..." if len(swept) > 3 else "")
    return [f"removed {len(swept)} temporary file(s) of interrupted writes: {shown}"]
