"""Who holds Snakemake's lock on a working directory, and what another invocation may do.

Snakemake locks a working directory with files in ``.snakemake/locks/`` that name the
files a run reads and writes, not the run. Once a run holds the lock (the Snakefile's
``onstart``), archbench adds a holder file beside them (:func:`name_holder`: host, boot,
pid, process start, since when; :class:`~archbench.execute.holders.Holder`). Snakemake
removes the whole folder when the run ends, so the holder file lives as long as its locks.

Another invocation of the same directory (``archbench run``, ``paper``, or ``snakemake``
itself: rules/common.smk asks :func:`refusal` while the Snakefile is parsed, before any
job) is then refused in one line naming the holder and whether it is alive
(:func:`refusal`). ``--unlock`` is refused while the holder is alive, and suggested only
when it is gone (or cannot be told: another host's, or a run that did not name itself). A
run without the lock (``--nolock``) is refused always: nothing would keep a second run
from deleting its jobs' logs and measuring its records again.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Sequence

from archbench.core.files import atomic_write_text
from archbench.core.snakemake_api import invoked_as_snakemake, parsed_arguments
from archbench.execute.holders import ALIVE, GONE, UNKNOWN, Holder, parse, this_process

LOCKS = Path(".snakemake", "locks")
HOLDER_PREFIX = "archbench-holder."  # + <host>.<pid>.json: one per run holding locks here
NOLOCK = "--nolock"
UNLOCK = "--unlock"
# the shortest prefixes Snakemake's parser takes for them (its abbreviations)
SHORTEST = {NOLOCK: "--nol", UNLOCK: "--unl"}


def names(words: list[str], option: str) -> bool:
    """Whether Snakemake command line ``words`` gives ``option`` (or an abbreviation of it
    Snakemake's parser accepts), before any ``--``."""
    for word in words:
        if word == "--":
            return False
        if word.startswith(SHORTEST[option]) and option.startswith(word):
            return True
    return False


def lock_files(workdir: str | os.PathLike = ".") -> list[Path]:
    """Snakemake's lock files in ``workdir`` (``<n>.input.lock``, ``<n>.output.lock``)."""
    locks = Path(workdir, LOCKS)
    try:
        return sorted(p for p in locks.iterdir() if p.name.endswith(".lock"))
    except OSError:
        return []


def holders(workdir: str | os.PathLike = ".") -> list[Holder | None]:
    """The holders named beside ``workdir``'s lock files (None for a holder file that
    names no process)."""
    found = []
    for path in sorted(Path(workdir, LOCKS).glob(f"{HOLDER_PREFIX}*.json")):
        try:
            found.append(parse(path.read_text(errors="replace")[:4096]))
        except OSError:
            continue
    return found


def name_holder(workdir: str | os.PathLike = ".") -> Path:
    """Write this process's holder file beside ``workdir``'s lock files (it holds them)."""
    me = this_process()
    return atomic_write_text(Path(workdir, LOCKS, f"{HOLDER_PREFIX}{me.host}.{me.pid}.json"),
                             me.to_text())


def refusal(workdir: str | os.PathLike = ".", *, unlock: bool = False,
            nolock: bool = False) -> str | None:
    """The one line refusing a run of ``workdir`` (``unlock``: an ``--unlock`` of it;
    ``nolock``: a run without the lock) while Snakemake's lock is held there; None when it
    may go on. A dry run takes no lock and is never refused."""
    where = Path(workdir).absolute()
    if nolock:
        return (f"archbench: {NOLOCK} refused: a run of {where} without Snakemake's lock could "
                "delete a live run's logs and measure its records again")
    if not lock_files(workdir):
        return None
    named = holders(workdir)
    states = [(h.local_state() if h else UNKNOWN, h) for h in named]
    alive = [h for s, h in states if s == ALIVE]
    if alive:
        who = f"{alive[0]}, alive"
        if unlock:
            return (f"archbench: {UNLOCK} refused: {who}, holds Snakemake's lock on {where} "
                    "(unlocking it would let two runs measure the same records)")
        return (f"archbench: another run of {where} holds Snakemake's lock: {who}: wait for "
                "it to end (this run changed nothing)")
    if unlock:
        return None
    again = f"run `archbench run {UNLOCK}` in {where}, then this command again"
    unknown = [h for s, h in states if s == UNKNOWN and h]
    if unknown:
        return (f"archbench: another run of {where} holds Snakemake's lock: {unknown[0]}; "
                f"whether it lives cannot be told from {socket.gethostname()}: once it has "
                f"ended there, {again}")
    gone = [h for s, h in states if s == GONE]
    if gone and len(gone) == len(named):
        return (f"archbench: Snakemake's lock on {where} was left by {gone[0]}, which is gone: "
                f"{again}")
    return (f"archbench: Snakemake's lock on {where} is held by a run that did not name its "
            f"process (one starting now, or an older archbench's): once no Snakemake runs "
            f"there, {again}")


def invocation_refusal(*, dry_run: bool, argv: Sequence[str] | None = None) -> str | None:
    """:func:`refusal` for this Snakemake's command line (default ``sys.argv``): its
    ``--unlock`` and ``--nolock`` as Snakemake's own parser reads them. None for a dry run
    (but an ``--unlock``), and for a program calling Snakemake's API."""
    argv = list(sys.argv if argv is None else argv)
    args = parsed_arguments(argv[1:]) if invoked_as_snakemake(argv) else None
    if args is None:
        return None
    if args.unlock:
        return refusal(unlock=True)
    return None if dry_run else refusal(nolock=bool(args.nolock))
