"""How a failed run is named: its status (oom | timeout | failed) and a one-line reason.

One place for what counts as out of memory, whether it surfaced as a Python exception in
the worker or only as an exit status and log lines seen by the supervisor.
"""

from __future__ import annotations

import re
import signal

OOM_EXCEPTIONS = ("ResourceExhaustedError", "MemoryError")
OOM_MARKERS = (*OOM_EXCEPTIONS, "Out of memory", "out of memory", "std::bad_alloc", "OOM")
# A step Slurm could not launch ends in SIGKILL too, without any memory pressure.
LAUNCH_MARKERS = ("launch failed", "aborted before step completely launched")
WALLTIME_MARKER = "DUE TO TIME LIMIT"
REASON_LIMIT = 500


def error_summary(exc: BaseException) -> str:
    """'<Type>: <message>' in one line; for TensorFlow's multi-line errors ("in user
    code: ...traceback... ValueError: ...") the first line and the last meaningful one."""
    lines = [x.strip() for x in str(exc).strip().splitlines() if x.strip()] or [""]
    text = lines[0]
    if len(lines) > 1 and len(lines[0]) < 40:
        errors = [x for x in lines[1:] if re.match(r"^[A-Za-z_.]*(Error|Exception)\b.*:", x)]
        text = f"{lines[0]} ... {(errors or lines)[-1]}"
    return f"{type(exc).__name__}: {text}"[:REASON_LIMIT]


def exception_failure(exc: BaseException) -> tuple[str, str]:
    """(status, reason) of a benchmark that raised ``exc``."""
    status = "oom" if type(exc).__name__ in OOM_EXCEPTIONS else "failed"
    return status, error_summary(exc)


def exit_failure(returncode: int, log_text: str) -> tuple[str, str]:
    """(status, reason) of a worker that exited with ``returncode`` and left no record."""
    tail = [line for line in log_text.strip().splitlines() if line.strip()][-3:]
    last = " | ".join(tail)[-400:]
    if WALLTIME_MARKER in log_text:
        return "timeout", f"exit {returncode}, Slurm time limit: {last}"
    if any(m in log_text for m in OOM_MARKERS):
        return "oom", f"exit {returncode}, out of memory: {last}"
    if any(m in log_text for m in LAUNCH_MARKERS):
        return "failed", f"exit {returncode}, launch failed: {last}"
    if returncode in (-signal.SIGKILL, 128 + signal.SIGKILL):
        return "oom", f"exit {returncode}, killed, likely out of memory: {last}"
    return "failed", f"exit {returncode}: {last}"
