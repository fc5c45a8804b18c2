"""Phase marks: where a measurement's seconds go, written only when asked for.

With ``ARCHBENCH_MARKS=1`` in the environment the supervisor, the worker and its ranks
each write ``archbench-mark <phase> <time> <pid> <cpu>`` lines to stderr (the worker's
reach its log) at the ends of their phases; without it :func:`mark` does nothing.
``scripts/bench_measurement_overhead.py`` reads them. ``<time>`` is ``time.time()`` in
seconds, comparable between the processes of one host; ``<cpu>`` the CPU seconds the
process has used so far (all its threads).
"""

from __future__ import annotations

import os
import re
import sys
import time

ENV = "ARCHBENCH_MARKS"
LINE = re.compile(r"^archbench-mark (\S+) (\d+(?:\.\d+)?) (\d+) (\d+(?:\.\d+)?)$", re.MULTILINE)


def enabled() -> bool:
    """Whether this process writes marks."""
    return os.environ.get(ENV, "") not in ("", "0")


def mark(phase: str) -> None:
    """Write the mark of ``phase`` ending now (nothing unless :func:`enabled`)."""
    if enabled():
        sys.stderr.write(f"archbench-mark {phase} {time.time():.6f} {os.getpid()} "
                         f"{time.process_time():.6f}\n")
        sys.stderr.flush()


def read_marks(text: str) -> list[tuple[str, float, int, float]]:
    """The (phase, time, pid, cpu) marks in ``text``, in the order written."""
    return [(m[1], float(m[2]), int(m[3]), float(m[4])) for m in LINE.finditer(text)]
