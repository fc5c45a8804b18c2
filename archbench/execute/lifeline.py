"""Lifeline: a benchmark's process tree never outlives the supervisor that started it.

The supervisor (:mod:`archbench.run`) starts ``python -m archbench.execute.lifeline FD ARGV...`` as
the leader of a new session, with FD the read end of a pipe whose only write end the
supervisor holds (a :class:`Tether`). The lifeline runs ARGV, the worker, as its child
(in the lifeline's process group and session), then waits:

- the worker ends: the lifeline kills what is left of the tree and exits as the worker
  did (same exit code, or killed by the same signal), so the supervisor classifies the
  run from the status as before;
- the pipe reads EOF, whatever killed the supervisor (SIGKILL included): the lifeline
  kills the whole tree, notes it in the worker log, and exits;
- SIGTERM (the supervisor's timeout or stop), SIGINT or SIGHUP: it kills the tree and exits.

It writes ``archbench <time> worker start`` to the worker log before it starts the worker
and ``archbench <time> worker end (<how>)`` once the tree is gone: the span of every
worker tree, however it ended (the supervisor adds the end when the lifeline could not).

The tree is every descendant of the lifeline. It is a child subreaper, so processes
orphaned by a dying launcher (mpirun ranks, each in its own process group; Horovod's
setsid middlemen) come back to it rather than to init, and are killed with the rest.
Second lines of defence (Linux ``prctl``): the lifeline gets SIGHUP when its parent dies,
the worker SIGKILL when the lifeline dies. A supervisor whose lifeline is gone kills what
is left of the lifeline's session itself.

Both sides live here: :func:`main` is the lifeline, :class:`Tether` the supervisor's end,
:class:`Parents` tells whether whoever started the supervisor is gone.
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import os
import re
import resource
import select
import signal
import subprocess
import sys
import time
from typing import IO, Callable, Iterable, NoReturn, Sequence

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)
SHELLS = frozenset({"sh", "bash", "dash", "ksh", "zsh"})
STOP_GRACE_S = 5.0  # the lifeline's time to kill its tree when told to, before the supervisor does
KILL_BOUND_S = 30.0  # give up waiting for killed processes (stuck in the kernel) after this

MARK = re.compile(r"^archbench (\S+) worker (start|end)\b.*$", re.MULTILINE)  # groups: time, event

_libc: ctypes.CDLL | None = None


def prctl(option: int, value: int) -> bool:
    """Linux ``prctl(option, value)``; False where it is unavailable or refused."""
    global _libc
    try:
        _libc = _libc or ctypes.CDLL(None, use_errno=True)
        return _libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def mark(stream: IO[str], event: str) -> None:
    """Append ``archbench <UTC time> worker <event>`` to the worker log."""
    when = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
    stream.write(f"archbench {when} worker {event}\n")
    stream.flush()


def without_marks(text: str) -> str:
    """A worker log's text without the lines :func:`mark` wrote."""
    return MARK.sub("", text)


def last_mark(text: str) -> str | None:
    """The event of the last mark in a worker log's text (start | end), None if none."""
    events = [m[2] for m in MARK.finditer(text)]
    return events[-1] if events else None


def stat(pid: int) -> tuple[str, int, int, str] | None:
    """(command name, parent pid, session id, state) of ``pid`` from /proc; None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the name may hold spaces and parentheses
    return text[text.index("(") + 1:text.rindex(")")], int(fields[1]), int(fields[3]), fields[0]


def processes() -> dict[int, tuple[str, int, int, str]]:
    """:func:`stat` of every process in /proc, by pid."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (info := stat(int(entry))) is not None:
            table[int(entry)] = info
    return table


def descendants(table: dict, root: int) -> list[int]:
    """Every descendant of ``root`` in a :func:`processes` table."""
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info[1], []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_until_gone(pick: Callable[[dict], Iterable[int]], bound_s: float = KILL_BOUND_S) -> None:
    """SIGKILL the processes ``pick`` chooses from the process table, again and again, until
    none of them is alive (a zombie is dead; this process is never chosen)."""
    me, end = os.getpid(), time.monotonic() + bound_s
    while True:
        table = processes()
        alive = [p for p in pick(table) if p != me and p in table and table[p][3] != "Z"]
        if not alive or time.monotonic() > end:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def kill_session(sid: int) -> None:
    """Kill every process of session ``sid`` and wait until they are gone."""
    kill_until_gone(lambda table: [p for p, info in table.items() if info[2] == sid])


class Stop(BaseException):
    """The lifeline must stop: ``signum`` received, or its supervisor is gone (None)."""

    def __init__(self, signum: int | None):
        super().__init__(signum)
        self.signum = signum


def run(cord: int, argv: Sequence[str]) -> int:
    """The lifeline: run ``argv`` while the pipe ``cord`` is open; return the worker's
    returncode (negative: killed by that signal), or 128 + signal when stopped. The worker
    log gets a start mark and, once the tree is gone, an end mark."""
    ended = "stopped before the worker started"
    try:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        prctl(PR_SET_PDEATHSIG, signal.SIGHUP)
        for s in STOP_SIGNALS:
            signal.signal(s, lambda signum, _frame: stop(signum))
        wake, wake_w = os.pipe()  # a child's exit (SIGCHLD) wakes select() through this pipe
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        mark(sys.stdout, "start")
        try:
            worker = subprocess.Popen(argv, preexec_fn=_die_with_parent)
        except OSError as exc:
            print(f"archbench.execute.lifeline: cannot run {argv[0]}: {exc}", file=sys.stderr, flush=True)
            ended = "exit 127"
            return 127
        while worker.poll() is None:
            ready = select.select([cord, wake], [], [])[0]
            if cord in ready and not os.read(cord, 1):
                stop(None)
            if wake in ready:
                os.read(wake, 4096)
                _reap_adopted(worker.pid)
        kill_until_gone(lambda table: descendants(table, os.getpid()))
        ended = f"exit {worker.returncode}"
        return worker.returncode
    except Stop as stopped:
        kill_until_gone(lambda table: descendants(table, os.getpid()))
        signum = stopped.signum or signal.SIGHUP
        ended = ("supervisor gone" if signum == signal.SIGHUP else
                 f"stopped by {signal.Signals(signum).name}") + ": worker tree killed"
        return 128 + signum
    finally:
        mark(sys.stdout, f"end ({ended})")


def stop(signum: int | None) -> NoReturn:
    """Raise Stop(signum), once: stop signals are ignored from here on, so that the
    cleanup (PR_SET_PDEATHSIG's SIGHUP may follow the pipe's EOF) runs undisturbed."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    raise Stop(signum)


def _die_with_parent() -> None:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _reap_adopted(worker: int) -> None:
    """Reap orphans that died after being re-parented to this subreaper (not the worker:
    its status is the worker's ``Popen``'s)."""
    for pid, info in processes().items():
        if info[1] == os.getpid() and info[3] == "Z" and pid != worker:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def exit_as(returncode: int) -> int:
    """Exit as a process with ``returncode`` did: a code is returned, a signal re-raised."""
    if returncode >= 0:
        return returncode
    signum = -returncode
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the worker's core, not ours
    if signum not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    os.kill(os.getpid(), signum)
    return 128 + signum  # not reached for a fatal signal


class Tether:
    """The supervisor's end of a lifeline running ``argv``: while this process lives, the
    worker may; once it ends, however it ends, the whole worker tree is killed.

    ``keep_fds`` stay open in the lifeline (the host guard's lock). Use as a context
    manager: leaving the block, by an exception too, stops a worker still running.
    """

    def __init__(self, argv: Sequence[str], *, stdout: IO[str], env: dict,
                 keep_fds: Sequence[int] = (), preexec_fn: Callable[[], None] | None = None):
        cord, self._cord = os.pipe()  # both ends close on exec: the lifeline gets only ``cord``
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "archbench.execute.lifeline", str(cord), *argv], stdout=stdout,
                stderr=subprocess.STDOUT, env=env, pass_fds=(cord, *keep_fds),
                start_new_session=True, preexec_fn=preexec_fn)
        except BaseException:
            os.close(self._cord)
            raise
        finally:
            os.close(cord)
        try:  # readable once the lifeline ends (Linux 5.3+): wait() wakes at its end
            self._ended: int | None = os.pidfd_open(self.proc.pid)
        except (AttributeError, OSError):
            self._ended = None

    def wait(self, timeout: float) -> int | None:
        """:meth:`poll` after waiting up to ``timeout`` s for the lifeline to end (woken
        as it ends where the system gives a process descriptor, else after ``timeout``)."""
        if self.proc.returncode is None:
            if self._ended is not None:
                select.select([self._ended], [], [], timeout)
            else:
                time.sleep(timeout)
        return self.poll()

    def poll(self) -> int | None:
        """The lifeline's returncode once it has ended and its session is empty, else None."""
        if self.proc.returncode is None:
            if os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                return None
            self._reap()
        return self.proc.returncode

    def stop(self) -> None:
        """Kill the worker tree (the lifeline does it; if it has not within STOP_GRACE_S,
        the supervisor kills its whole session) and wait until it is gone."""
        if self.proc.returncode is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)  # an unreaped lifeline's pid is still its own
        end = time.monotonic() + STOP_GRACE_S
        while self.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        if self.proc.returncode is None:
            self._reap()

    def _reap(self) -> None:
        # Until the lifeline is reaped its pid names only its session: kill what is left.
        kill_session(self.proc.pid)
        self.proc.wait()
        os.close(self._cord)
        if self._ended is not None:
            os.close(self._ended)
            self._ended = None

    def __enter__(self) -> Tether:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class Parents:
    """Whether whoever started this process is gone: its parent, or, when the parent is a
    shell, the shell's parent too (Snakemake runs a job as ``bash -c '...'``, and the shell
    lives on when Snakemake alone is killed)."""

    def __init__(self) -> None:
        self.parent = os.getppid()
        info = stat(self.parent)
        self.grandparent = info[1] if info and info[0] in SHELLS else None

    def gone(self) -> bool:
        """True once the parent or the watched grandparent has died."""
        if os.getppid() != self.parent:
            return True
        if self.grandparent is None:
            return False
        info = stat(self.parent)
        return info is None or info[1] != self.grandparent


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m archbench.execute.lifeline FD ARGV...`` (started by :class:`Tether`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or not args[0].isdigit():
        print(__doc__.split("\n\n")[0] + "\nusage: python -m archbench.execute.lifeline FD ARGV...",
              file=sys.stderr)
        return 2
    return exit_as(run(int(args[0]), args[1:]))


if __name__ == "__main__":
    sys.exit(main())
