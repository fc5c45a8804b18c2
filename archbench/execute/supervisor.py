"""Supervisor of one measurement: run its worker, enforce the time limit, and always
leave exactly one valid record behind (the worker's, or a failure record).

    python -m archbench.run --spec SPEC_JSON --output results/raw/.../rep0.json --log LOG
    python -m archbench.run --spec-file results/specs/<campaign>/<digest>.json --output ... --log LOG

SPEC_JSON is ``{"measurement": {...}, "system": {...}}`` as produced by the workflow (the
system's settings that affect a run; a `best` measurement adds ``best_layouts``, the file
in which the workflow chose its layout from the sweep's records, and ``statistic``). The run that plans
a measurement writes its spec to a file named by its digest (:mod:`archbench.execute.specfiles`);
``--spec-file`` runs it only if it still hashes to its name and is the spec of ``--output``.
Exit status 0 whenever a record was written, so one failed benchmark never stops the
campaign; non-zero for a supervisor error (bad spec) or a stopped run.

A full or read-only file system is no failure of the benchmark (:mod:`archbench.core.storage`):
the supervisor probes the record's and the log's directories before anything else, and
again when its worker left no record; a fault ends it with one line naming the path and
the cause, exit status 73 and no record, so the next run reruns it.

The worker runs on a lifeline (:mod:`archbench.execute.lifeline`): its whole process tree dies
with the supervisor, however the supervisor dies. SIGINT, SIGTERM or SIGHUP, or the end of
whoever started the supervisor (Snakemake, through its job shell), stop the run: the worker
tree is killed, its scratch file removed, and no record written, so the next run reruns it.
A benchmark starts only while it holds the host guard (:mod:`archbench.execute.hostguard`): no
two archbench benchmarks share a host; the wait does not count against the time limit.

Before it writes anything of its measurement, the supervisor takes the record's lease
(:mod:`archbench.execute.lease`): while another live supervisor holds it, this one ends with
one line naming the record and the holder, exit status 75, and touches neither the
record, nor the log, nor the holder's worker.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, NoReturn, Sequence

from archbench.core import hostload, provenance, storage
from archbench.core.failures import exit_failure
from archbench.core.files import discard, sweep_temporary
from archbench.core.marks import mark
from archbench.core.record import (
    RecordError,
    make_record,
    raw_path,
    run_id,
    schema,
    scratch_path,
    write_record,
)
from archbench.execute import hostguard, lease, lifeline
from archbench.execute.specfiles import SpecError, read_spec
from archbench.plan import choices
from archbench.plan.containers import IMAGE_DIR, exec_prefix, image_file, runtime_env
from archbench.plan.containers import image_digest as hash_file
from archbench.plan.placeholders import is_placeholder
from archbench.plan.plan_match import mismatch as plan_mismatch
from archbench.workloads.sense import read_counted
from archbench.workloads.tfenv import FRAMEWORK_ENV

# The module whose command_for(measurement, system) gives a measurement's argv, per kind;
# its PLANNED_FIELDS, if any, are record fields its records state as planned.
WORKERS = {"train": "archbench.workloads.training.benchmark", "kernel": "archbench.workloads.kernels"}
# Record fields only the workflow knows, which it writes into the record of every planned
# run: which experiment (and of which type), system (as its file declares it) and
# repetition the run is, its configuration id, and what a scaling series of it counts. A
# worker run by hand writes stand-ins for the first ones (archbench.workloads.training.benchmark.base_fields).
WORKFLOW_FIELDS = ("experiment", "experiment_type", "system", "arch", "config_id", "repetition",
                   "scaling_unit", "trial")
POLL_S = 0.2  # how often the supervisor looks at its worker, its time limit and its parents


class Interrupted(BaseException):
    """The run was stopped: by signal ``signum``, or (SIGHUP) whoever started it is gone."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def worker_module(measurement: dict):
    """The worker module of ``measurement``'s kind (see WORKERS)."""
    return importlib.import_module(WORKERS[measurement["kind"]])


def worker_command(measurement: dict, system: dict) -> list[str]:
    """The worker argv for ``measurement`` (launcher included), inside the system's image."""
    argv = worker_module(measurement).command_for(measurement, system)
    runtime = system.get("container_runtime", "none")
    image = image_file(system, measurement.get("framework"))
    if image is None:
        return argv
    # a relative data_dir lies under the working directory, which every runtime mounts
    binds = [system["data_dir"]] if str(system.get("data_dir", "")).startswith("/") else []
    # the image holds no git checkout: the workflow's commit is passed in
    commit = {"ARCHBENCH_GIT_COMMIT": provenance.git_commit()} if provenance.git_commit() else {}
    env = {"ARCHBENCH_IMAGE": system.get("image_uri") or image,
           "ARCHBENCH_IMAGE_SHA256": image_digest(image), **commit,
           **FRAMEWORK_ENV, **measurement.get("env", {})}
    gpu = measurement.get("device") == "gpu"
    if gpu and os.environ.get("CUDA_VISIBLE_DEVICES"):  # the job's GPUs: --cleanenv drops them
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    # The launcher (srun/mpirun) stays outside; the interpreter runs inside the image.
    at = argv.index(sys.executable)
    # Without --cleanenv: ranks started by srun/mpirun need their per-task environment.
    prefix = exec_prefix(runtime, image, binds=binds, env=env, cleanenv=at == 0, gpu=gpu)
    return argv[:at] + prefix + ["python3"] + argv[at + 1:]


def image_digest(image: str) -> str:
    """The image's sha256: from the digest file the workflow's build or pull wrote beside
    it in results/images (when not older than the image), else hashed now (a prebuilt
    image given by path is always hashed: a digest file beside it is not ours)."""
    digest_file = Path(image).with_suffix(".sha256")
    ours = Path(image).as_posix().startswith(f"{IMAGE_DIR}/")
    if ours and digest_file.exists() and digest_file.stat().st_mtime >= Path(image).stat().st_mtime:
        return digest_file.read_text().strip()
    return hash_file(image)


def memory_limiter(limit_mb: int | None):
    """A pre-exec hook capping the worker's address space (a node's memory, emulated locally)."""
    if not limit_mb:
        return None
    def apply() -> None:
        import resource
        limit = int(limit_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def run_worker(argv: list[str], *, env: dict, timeout_s: float, log_path: Path,
               memory_limit_mb: int | None = None, keep_fds: Sequence[int] = (),
               check: Callable[[], None] = lambda: None) -> tuple[int | None, str]:
    """Run argv on a lifeline; return (returncode, or None when it overran ``timeout_s``,
    log text). ``check`` runs while waiting and may raise to stop the run; however this
    returns, the worker tree is gone. ``keep_fds`` stay open while the tree lives."""
    with open(log_path, "a") as log:
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        ended = "stopped: worker tree killed"  # unless it ends or times out below
        try:
            with lifeline.Tether(argv, stdout=log, env=env, keep_fds=keep_fds,
                                 preexec_fn=memory_limiter(memory_limit_mb)) as tether:
                deadline = time.monotonic() + timeout_s
                code = tether.poll()
                while code is None and time.monotonic() < deadline:
                    check()
                    code = tether.wait(POLL_S)  # returns as the worker tree ends
                if code is None:
                    tether.stop()
                ended = f"exit {code}" if code is not None else "timeout: worker tree killed"
        finally:  # the lifeline marks the end of the tree, unless it was killed before
            text = log_path.read_text(errors="replace")
            if lifeline.last_mark(text) == "start":
                lifeline.mark(log, f"end ({ended})")
    return code, lifeline.without_marks(text)


def evidence_argv(measurement: dict, output: Path, config_hash: str, *, env: dict) -> list[str]:
    """Options that let the worker state the vendor evidence another run's record gathered
    (the worker module's ``evidence_argv``; none for kernels)."""
    own = getattr(worker_module(measurement), "evidence_argv", None)
    return own(measurement, output, config_hash, env=env) if own else []


def remember_evidence(measurement: dict, output: Path, record: dict, *, env: dict) -> None:
    """Let later runs find the evidence record ``output`` gathered (the worker module's
    ``remember_evidence``; nothing for kernels)."""
    own = getattr(worker_module(measurement), "remember_evidence", None)
    if own:
        own(measurement, output, record, env=env)


def workflow_fields(measurement: dict, log_path: Path) -> dict:
    """The fields the supervisor adds to its worker's record: the WORKFLOW_FIELDS the
    measurement has, the run id, the hash of the measurement and the worker's log."""
    fields = {k: measurement[k] for k in WORKFLOW_FIELDS if k in measurement}
    fields["run_id"] = run_id(measurement)
    fields["config_hash"] = provenance.config_hash(
        {k: v for k, v in measurement.items() if k != "repetition"})
    fields["log_path"] = str(log_path)
    return fields


def planned_fields(measurement: dict) -> dict:
    """The record fields of the measurement that its worker's records state as planned
    (the worker module's PLANNED_FIELDS; none for training)."""
    planned = getattr(worker_module(measurement), "PLANNED_FIELDS", ())
    return {k: measurement[k] for k in planned if k in measurement}


def identity_fields(measurement: dict, log_path: Path) -> dict:
    """The fields of a record the supervisor writes itself (a failure record): the
    configuration (every key of the measurement that is a record field) and the
    workflow's fields."""
    known = schema()["properties"]
    configuration = {k: v for k, v in measurement.items() if k in known and k != "env"}
    return {**configuration, **workflow_fields(measurement, log_path)}


def supervise(measurement: dict, system: dict, *, output: Path, log_path: Path,
              check: Callable[[], None] = lambda: None) -> dict:
    """Run the measurement (with its retries) and write its record; return the record.
    An ok attempt flagged ``host_busy`` is rerun up to ``rerun_busy`` times, each such
    attempt kept as its own file (:func:`busy_attempt_path`); the record is the last.
    A worker record that may not count, or that is not what the measurement plans
    (:func:`archbench.plan.plan_match.mismatch`), becomes a failure record with the reason.
    ``check`` runs while waiting for the host guard or the worker, and may raise to stop
    the run (no record then). Raises storage.Unwritable, before the benchmark starts if it
    can, when the record or the log cannot be written (no record then either)."""
    storage.check_writable(output, log_path)
    scratch = scratch_path(output)
    # A TF_CONFIG in the caller's environment would override the cluster the launcher
    # builds (spawn sets one per task; under srun it comes from the job step).
    inherited = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env = {**inherited, **runtime_env(system.get("container_runtime", "none")),
           **{k: str(v) for k, v in measurement.get("env", {}).items()}, **FRAMEWORK_ENV}
    timeout_s = float(measurement.get("timeout_minutes", 30)) * 60
    identity = identity_fields(measurement, log_path)  # of a failure record
    added = {**workflow_fields(measurement, log_path), **planned_fields(measurement)}
    argv = worker_command(measurement, system) + ["--output", str(scratch)] \
        + evidence_argv(measurement, output, added["config_hash"], env=env)
    tuning = measurement.get("tuning") or {}  # a failed run still names its settings
    knobs = {**worker_module(measurement).setting_metrics(measurement), **pinned_cores(tuning)}
    settings_env = measurement.get("env", {})
    cores = hostload.run_cores()
    asked = hostload.cores_asked(measurement, len(cores))
    with hostguard.held(output, check=check) as guard:  # the wait is not the run's time
        start = provenance.now()
        oversubscribe = hostload.slurm_oversubscribe()
        mark("guard-held")
        try:  # an interrupted run (Interrupted) leaves neither scratch file nor record
            attempt, busy = 0, 0  # failed attempts retried, busy ones rerun
            while True:
                scratch.unlink(missing_ok=True)
                mark("worker-start")
                before = hostload.sample(cores)
                code, log_text = run_worker(argv, env=env, timeout_s=timeout_s, log_path=log_path,
                                            memory_limit_mb=measurement.get("memory_limit_mb"),
                                            keep_fds=(guard,), check=check)
                load = host_load(before, hostload.sample(cores), argv, cores=len(cores),
                                 asked=asked, oversubscribe=oversubscribe)
                mark("worker-end")
                refused = ""  # why a record the worker left may not count
                try:
                    worker_record = read_counted(scratch)
                except RecordError as exc:
                    # a record the worker finished (exit 0) but that may not count
                    worker_record, refused = None, str(exc) if code == 0 and scratch.exists() else ""
                if worker_record is not None:  # what the worker measured must be what was planned
                    taken = {**worker_record, **added, **load,
                             "env": {**worker_record.get("env", {}), **settings_env},
                             "metrics": {**knobs, **worker_record.get("metrics", {})}}
                    refused = plan_mismatch(taken, measurement)
                    worker_record = None if refused else worker_record
                if worker_record is None:  # a disk refusing it stops the run, no failure record
                    storage.check_writable(output, log_path)
                    fault = storage.reported_fault(log_text) if code == storage.EXIT_UNWRITABLE else None
                    if fault is not None:
                        raise fault
                if worker_record is not None:
                    record = taken
                elif code is None:
                    record = failure({**identity, **load}, start=start, status="timeout",
                                     metrics=knobs, env=settings_env,
                                     reason=f"exceeded {timeout_s:.0f} s wall time (attempt {attempt + 1})")
                else:
                    status, reason = ("failed", f"its record was refused: {refused}") if refused \
                        else exit_failure(code, log_text)
                    record = failure({**identity, **load}, start=start, status=status,
                                     reason=reason[:500], metrics=knobs, env=settings_env)
                if record["status"] == "ok" and record.get("host_busy") \
                        and busy < int(measurement.get("rerun_busy", 0)):
                    busy += 1
                    write_record(busy_attempt_path(output), record)  # kept, never counted
                    continue
                if record["status"] == "ok" or attempt >= int(measurement.get("retries", 0)):
                    break
                attempt += 1
        finally:  # the worker tree is gone: so are the writers of temporary files here
            discard(scratch)
            sweep_temporary([output.parent])
        write_record(output, record)
        remember_evidence(measurement, output, record, env=env)
        mark("record-written")
    return record


def busy_attempt_path(output: Path) -> Path:
    """Where an ok attempt that shared its cores is kept when ``rerun_busy`` reruns it:
    ``rep<k>.json.busy<n>`` beside the record, the first ``n`` not taken (no reader counts
    or lists these files: they match no ``rep*.json``)."""
    n = 1
    while output.with_name(f"{output.name}.busy{n}").exists():
        n += 1
    return output.with_name(f"{output.name}.busy{n}")


def host_load(before: hostload.Sample, after: hostload.Sample, argv: Sequence[str], *,
              cores: int, asked: int, oversubscribe: str | None) -> dict:
    """The record fields ``host_load`` and ``host_busy`` of one attempt (:mod:`archbench.core.hostload`).
    Ranks that srun starts are no descendants of this process: their CPU time cannot be
    told from other work, so such a run states no ``other_cores`` (and no flag)."""
    load = hostload.figures(before, after, cores=cores, cores_asked=asked,
                            oversubscribe=oversubscribe)
    if argv and Path(argv[0]).name == "srun":
        load = {**load, "other_cores": None}
    return {"host_load": load, "host_busy": hostload.is_busy(load)}


def abandonment_check() -> Callable[[], None]:
    """A check raising Interrupted(SIGHUP) once whoever started this supervisor process is
    gone (being abandoned is a hang-up: under ``nohup``, SIGHUP ignored, the run goes on)."""
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        return lambda: None
    parents = lifeline.Parents()

    def check() -> None:
        if parents.gone():
            interrupt(signal.SIGHUP)
    return check


def interrupt(signum: int) -> NoReturn:
    """Raise Interrupted(signum), once: stop signals are ignored from here on (until
    ``stop_signals`` ends), so that the cleanup runs undisturbed."""
    for s in lifeline.STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def stop_signals() -> Iterator[None]:
    """Within the block SIGINT, SIGTERM and SIGHUP raise Interrupted (see ``interrupt``);
    a signal ignored at start (``nohup``) stays ignored."""
    before = {s: signal.getsignal(s) for s in lifeline.STOP_SIGNALS}
    for s, handler in before.items():
        if handler is not signal.SIG_IGN:
            signal.signal(s, lambda signum, _frame: interrupt(signum))
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def failure(identity: dict, *, start: str, status: str, reason: str,
            metrics: dict | None = None, env: dict | None = None) -> dict:
    """A failure record: the configuration, where it ran, status and reason, no throughput
    (``metrics``: settings the run was given; ``env``: the environment it was given, over
    the supervisor's own, as a worker's record has it)."""
    host = provenance.host_fields()
    return make_record(**{**host, **identity, "env": {**host["env"], **(env or {})}},
                       start_time=start, end_time=provenance.now(), status=status,
                       reason=reason, metrics=metrics or {})


def pinned_cores(tuning: dict) -> dict:
    """The cores a run is pinned to (``tuning.cores``) as a record metric, as the worker
    records it; empty when it is not pinned."""
    return {"cores": {"value": tuning["cores"], "unit": "cores"}} if tuning.get("cores") else {}


class ChoiceRefused(Exception):
    """A choice file's entry that is not what its placeholder's plan lets it run
    (:mod:`archbench.plan.choices`): the run stops with one line, no record."""


def chosen_layout(spec: dict) -> dict:
    """The measurement a `best` spec runs: its entry in the layouts file the workflow wrote
    from the sweep's records (rule choose_best_layouts). ValueError with the reason when
    no layout was chosen for it; ChoiceRefused when the entry is not what the plan lets the
    placeholder run."""
    path = spec.get("best_layouts") or spec.get("tune_round")
    if not path:
        raise ValueError("a placeholder (a `best` measurement, a tuner's trial) needs the file "
                         "its workflow chose its configuration in (best_layouts, tune_round)")
    try:
        layouts = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable layouts ({exc})") from exc
    record = raw_path(spec["measurement"])
    entry = layouts.get(record) if isinstance(layouts, dict) else None
    if entry is None:
        raise ValueError(f"{path}: no layout chosen for {record}")
    if isinstance(entry, dict) and "error" in entry:
        if set(entry) != {"error"} or not isinstance(entry["error"], str) or "\n" in entry["error"]:
            raise ChoiceRefused(f"{path}: {record}: error: not one line of text")
        raise ValueError(entry["error"])
    why = choices.refusal(spec["measurement"], entry)
    if why is not None:
        raise ChoiceRefused(f"{path}: {record}: {why}: not what its plan lets it run (the file "
                            "was changed since archbench wrote it); remove it and rerun to choose again")
    return entry


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    p = argparse.ArgumentParser(prog="python -m archbench.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--spec", help='JSON {"measurement": ..., "system": ...}')
    given.add_argument("--spec-file", type=Path,
                       help="a spec file the workflow planned (results/specs/<campaign>/<digest>.json)")
    p.add_argument("--output", required=True, type=Path)
    p.add_argument("--log", required=True, type=Path, help="worker output is appended here")
    args = p.parse_args(argv)
    mark("supervisor-imported")
    spec = inline_spec(args.spec) if args.spec is not None else spec_from_file(args.spec_file, args.output)
    try:
        with stop_signals():
            return run_spec(spec, output=args.output, log_path=args.log)
    except lease.Held as held:  # another supervisor measures this record: leave it alone
        print(held, file=sys.stderr, flush=True)
        return lease.EXIT_HELD
    except ChoiceRefused as exc:  # nothing of the file reaches a worker; no record
        print(f"archbench.run: {exc}", file=sys.stderr, flush=True)
        return 1
    except Interrupted as stop:
        written = "" if args.output.exists() else "; no record written (the next run reruns it)"
        print(f"{args.output}: stopped by {stop}{written}", flush=True)
        return 128 + stop.signum
    except OSError as exc:  # a full or read-only file system: one line, no traceback
        if not storage.is_fault(exc):
            raise
        storage.tell(storage.fault_line(exc.filename or args.output, exc))
        return storage.EXIT_UNWRITABLE


def inline_spec(text: str) -> dict:
    """The spec given on the command line; exits with one line (no record) unless it is a
    JSON object holding a ``measurement`` and a ``system`` object."""
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        sys.exit(f"archbench.run: --spec is not JSON ({exc})")
    if not (isinstance(spec, dict) and all(isinstance(spec.get(k), dict) for k in ("measurement", "system"))):
        sys.exit('archbench.run: --spec must be a JSON object {"measurement": {...}, "system": {...}}')
    return spec


def spec_from_file(path: Path, output: Path) -> dict:
    """The spec planned for record ``output``; exits with one line (no record) when the
    file is missing, altered or another record's."""
    try:
        return read_spec(path, output)
    except SpecError as exc:
        sys.exit(f"archbench.run: {exc}")


def run_spec(spec: dict, *, output: Path, log_path: Path) -> int:
    """Supervise the measurement of a spec (its `best` placeholder resolved first), holding
    its record's lease (lease.Held, before anything is written, when a live supervisor
    holds it)."""
    with lease.held(output) as own:
        return run_leased(spec, output=output, log_path=log_path, renew=own.renew)


def run_leased(spec: dict, *, output: Path, log_path: Path, renew: Callable[[], None]) -> int:
    """:func:`run_spec` once the lease is held (``renew`` keeps it while the run waits)."""
    measurement = spec["measurement"]
    if is_placeholder(measurement):
        try:
            measurement = chosen_layout(spec)
        except ValueError as exc:  # a tuner's placeholder has no trial number: none in the record
            unchosen = {k: v for k, v in measurement.items() if k != "trial"}
            record = failure(identity_fields(unchosen, log_path), start=provenance.now(),
                             status="failed", reason=str(exc), env=measurement.get("env"))
            write_record(output, record)
            print(f"{output}: failed {exc}")
            return 0
    abandoned = abandonment_check()

    def check() -> None:
        renew()
        abandoned()
    record = supervise(measurement, spec["system"], output=output, log_path=log_path, check=check)
    print(f"{output}: {record['status']} {record['throughput']} {record['throughput_unit']}"
          f" {record['reason']}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
