"""Who holds something (a measurement's lease, Snakemake's lock), and whether it still lives.

A holder is a process named so that another process can tell, later and perhaps from
another host sharing the file system, whether it is still the same live process:

- on the same host (same host name and boot), it is alive while its pid exists and was
  started at the recorded time (``/proc/<pid>/stat``'s start time: a reused pid is not it);
- on another host (or another boot of a host of this name) nothing can be checked from here: a holder that renews its file
  (a lease, :mod:`archbench.execute.lease`) is taken for alive while the file's
  modification time is recent, for gone once it is older than its owner's bound; a holder
  that does not renew (Snakemake's lock) is of unknown state.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from archbench.core import provenance
from archbench.core.files import process_alive

ALIVE, GONE, UNKNOWN = "alive", "gone", "unknown"


def boot_id() -> str:
    """This boot of this host (Linux: ``/proc/sys/kernel/random/boot_id``; empty elsewhere)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks after boot; None when it is gone (or
    there is no /proc)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rindex(")") + 2:].split()[19])


@dataclass(frozen=True)
class Holder:
    """A process that holds something: its host, boot, pid, start (ticks after boot) and
    since when it holds it (UTC, ISO 8601)."""

    host: str
    pid: int
    since: str
    boot: str = ""
    started: int | None = None

    def to_text(self) -> str:
        """The holder as one line of JSON (what a holder file holds)."""
        return json.dumps(asdict(self), sort_keys=True) + "\n"

    def local_state(self) -> str:
        """ALIVE or GONE for a holder of this host; UNKNOWN for another host's, and for one
        of this host's name but another boot (this host before a reboot, or another machine
        of the same name: nothing tells them apart)."""
        if self.host != socket.gethostname() or self.boot != boot_id():
            return UNKNOWN
        if not process_alive(self.pid):
            return GONE
        return ALIVE if self.started is None or start_ticks(self.pid) in (None, self.started) else GONE

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host} since {self.since}"


def this_process(since: str | None = None) -> Holder:
    """This process as a holder, holding since ``since`` (default now)."""
    return Holder(host=socket.gethostname(), pid=os.getpid(), since=since or provenance.now(),
                  boot=boot_id(), started=start_ticks(os.getpid()))


def parse(text: str) -> Holder | None:
    """The holder a holder file's text names; None when it names none (empty, not JSON,
    keys missing or of the wrong type, no pid of a process, text that is not one line)."""
    try:
        data = json.loads(text)
        holder = Holder(host=data["host"], pid=data["pid"], since=data["since"],
                        boot=data.get("boot", ""), started=data.get("started"))
    except (ValueError, TypeError, KeyError):
        return None
    fields_ok = (all(isinstance(text, str) and text.isprintable()
                     for text in (holder.host, holder.since, holder.boot))
                 and type(holder.pid) is int and 0 < holder.pid < 2**31
                 and (holder.started is None or type(holder.started) is int))
    return holder if fields_ok else None
