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
# The lines that say why a worker ended, whatever followed them: the first line naming a
# Python exception ("RuntimeError: Connection reset by peer") and srun's word on the task that ended
# first ("srun: error: n1: task 0: Exited with exit code 1"), which kill-on-bad-exit
# follows with the other tasks' "Terminated" lines.
CAUSE_PATTERNS = (
    re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)\b:.*"),
    re.compile(r"^srun: error: \S+: tasks? [\d,-]+: Exited with exit code [1-9]\d*"),
)


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


def _first(pattern: re.Pattern, lines: list[str]) -> str:
    """The first of ``lines`` that ``pattern`` matches, or ""."""
    return next((line for line in lines if pattern.match(line)), "")


def exit_failure(returncode: int, log_text: str) -> tuple[str, str]:
    """(status, reason) of a worker that exited with ``returncode`` and left no record: the
    cause (:data:`CAUSE_PATTERNS`) where the log states one before its last lines, then the
    last three lines."""
    lines = [line.strip() for line in log_text.strip().splitlines() if line.strip()]
    tail = lines[-3:]
    causes = [_first(pattern, lines) for pattern in CAUSE_PATTERNS]
    causes = [c[:200] for c in causes if c and c not in tail]  # kept whatever the tail's length
    last = " | ".join([*causes, *(["..."] if causes else []), " | ".join(tail)[-400:]])
    if WALLTIME_MARKER in log_text:
        return "timeout", f"exit {returncode}, Slurm time limit: {last}"
    if any(m in log_text for m in OOM_MARKERS):
        return "oom", f"exit {returncode}, out of memory: {last}"
    if any(m in log_text for m in LAUNCH_MARKERS):
        return "failed", f"exit {returncode}, launch failed: {last}"
    if returncode in (-signal.SIGKILL, 128 + signal.SIGKILL):
        return "oom", f"exit {returncode}, killed, likely out of memory: {last}"
    return "failed", f"exit {returncode}: {last}"
