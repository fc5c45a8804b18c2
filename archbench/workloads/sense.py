"""Records checked for sense: the names a record gives (model, kernel, strategy, variable
update) against the registries (:func:`archbench.workloads.names.unregistered`), and an ok
measurement's values against each other, which the record schema's bounds cannot state.
:func:`problem` names the first field that disagrees; every reader that counts a record
(collection, the quarantine at workflow start, the supervisor taking its worker's record)
reads it with :func:`read_counted`.

Training (``archbench.train``): the measured window holds ``measured_steps`` steps of
``global_batch = batch_per_process x workers`` images, and

    images     = global_batch x measured_steps            (metric ``images``)
    throughput = images / window                          (metric ``window_s``)
    sum(step_times_s) <= window <= (1 + WINDOW_SLACK) x sum(step_times_s) + WINDOW_SLACK_S

with window = global_batch x len(step_times_s) / throughput. A language model's record
counts tokens instead (metric ``tokens``, throughput in tokens/s): every ``global_batch``
above is then ``global_batch x sequence_length``. The step times are the
writing worker's own steps, inside the window; the window is the longest worker's wall
time between two barriers, so it also holds the loop between steps (microseconds), the
closing barrier and a straggler's finish (a synchronous step already waits for the
slowest worker). Asynchronous parameter-server runs record no step times.

Kernels (``archbench.kernels``): throughput = work x len(step_times_s) / sum(step_times_s),
the work of one step as its spec counts it (``KernelSpec.work``).

A record checks only what it holds: one without step times or window metrics (an
imported or fabricated value) is held to the schema's bounds alone.

Every ok record, consistent or not, is then held to the physical bound of
:mod:`archbench.workloads.ceiling`: its throughput may not imply more FLOP/s (img/s x
the model's declared training FLOPs per image) or bytes/s than :data:`~archbench.
workloads.ceiling.FACTOR` x the peak of the cores or GPUs it ran on. Imports and claims
are held to the same bound.

:func:`measured_window_s` is the measured window of a record (training: ``metrics.window_s``;
a kernel: the sum of its step times); a window too short to time
(:func:`archbench.core.metrics.short_window`) is flagged in the summary, not refused.
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping

from archbench.core import hostload, metrics
from archbench.core.record import RecordError, read_record, validate
from archbench.workloads import energy
from archbench.workloads.ceiling import beyond_peak
from archbench.workloads.names import unregistered
from archbench.workloads.training.models import LANGUAGE_MODELS

ROUNDING = 1e-6  # relative: one value computed in two orders of floating-point operations
# How far a window may outlast the writer's step times: a share for the time between steps
# (a worker descheduled on an oversubscribed node: up to 6% measured on 2 cores) plus
# seconds for the barriers and a straggler's finish (up to 9 ms measured on one node,
# 40% of a 23 ms window). Beyond, the throughput is more than ~20% below its steps' rate.
WINDOW_SLACK = 0.20
WINDOW_SLACK_S = 1.0


def metric_value(record: Mapping[str, Any], name: str) -> float | None:
    """The number a record's metric ``name`` holds, or None when it holds none."""
    value = (record.get("metrics") or {}).get(name, {}).get("value")
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def problem(record: Mapping[str, Any]) -> str:
    """"" when ``record`` (schema-valid) makes sense, else one line: "<field>: <problem>".

    Every record names only registered models, kernels, strategies and variable updates;
    failure records (status not ok) carry no measurement and pass the rest.
    """
    nameless = unregistered(record) or _host_load_problem(record)
    if nameless or record.get("status") != "ok":
        return nameless
    throughput, times = record.get("throughput"), record.get("step_times_s") or []
    if throughput is None:
        return "throughput: missing from an ok record"
    if math.isnan(throughput):
        return "throughput: NaN is not a measurement"
    for i, seconds in enumerate(times):
        if math.isnan(seconds):
            return f"step_times_s/{i}: NaN is not a step time"
    steps = record.get("measured_steps")
    if steps == 0:
        return "measured_steps: 0 in an ok record (nothing was measured)"
    if times and steps is not None and len(times) != steps:
        return f"step_times_s: {len(times)} step times for measured_steps {steps}"
    check = _train_problem if record.get("kind") == "train" else _kernel_problem
    return (check(record, throughput, times) or _quality_problem(record)
            or energy.record_problem(record, measured_window_s(record)) or _impossible(record))


def _host_load_problem(record: Mapping[str, Any]) -> str:
    """"host_load: ..." or "host_busy: ..." when a record's figures of the machine's other
    load (:mod:`archbench.core.hostload`) are impossible, or its flag is not what they say."""
    load, stated = record.get("host_load"), record.get("host_busy")
    if load is None:
        return "" if stated is None else f"host_busy: {stated} stated without host_load figures"
    window, cores = load["window_s"], load["cores"]
    if load["cores_asked"] > cores:
        return f"host_load: cores_asked {load['cores_asked']} of {cores} cores"
    capacity = cores * window * (1 + hostload.CLOCK_SLACK) + hostload.CLOCK_SLACK_S
    for name in ("own_cpu_s", "cores_busy_s", "steal_s", "niced_s"):
        if load.get(name) is not None and load[name] > capacity:
            return (f"host_load: {name} {load[name]:g} s in {window:g} s on {cores} cores "
                    f"(at most {capacity:.3g} s)")
    busy, steal = load.get("cores_busy_s"), load.get("steal_s")
    if busy is not None and steal is not None and steal > busy:
        return f"host_load: steal_s {steal:g} above cores_busy_s {busy:g}"
    other = load["other_cores"]
    if other is not None and busy is not None and window > 0:
        derived = max(busy - load["own_cpu_s"], 0.0) / window
        low, high = hostload.other_cores_bounds(load)
        if not low <= other <= high:
            return (f"host_load: other_cores {other:g}, its figures say {derived:.3f} "
                    f"((cores_busy_s - own_cpu_s) / window_s)")
    derived = hostload.is_busy(load)
    if stated != derived:
        return f"host_busy: record says {stated}, its host_load figures say {derived}"
    return ""


def _impossible(record: Mapping[str, Any]) -> str:
    """"throughput: <why>" when the record's throughput is beyond the physical bound."""
    beyond = beyond_peak(record)
    return f"throughput: {beyond}" if beyond else ""


def _train_problem(record: Mapping[str, Any], throughput: float, times: list[float]) -> str:
    """The first inconsistency of an ok training record (see the module docstring)."""
    batch, workers = record.get("batch_per_process"), record.get("workers")
    global_batch, steps = record.get("global_batch"), record.get("measured_steps")
    unit = record.get("throughput_unit", "")
    expected = None if None in (batch, workers) else metrics.global_batch(batch, workers)
    if None not in (global_batch, expected) and global_batch != expected:
        return (f"global_batch: {global_batch} is not batch_per_process {batch} x workers "
                f"{workers} = {expected}")
    if global_batch is None:
        global_batch = expected
    language = record.get("model") in LANGUAGE_MODELS  # it counts tokens: T per sequence
    count, length = ("tokens", record.get("sequence_length")) if language else ("images", 1)
    if language and unit != "tokens/s":
        return f"throughput_unit: '{unit}' is not a language model's 'tokens/s'"
    if language and length is None:
        return "sequence_length: a language model's record states it"
    per_step = None if global_batch is None else global_batch * length
    counted, window = metric_value(record, count), metric_value(record, "window_s")
    for name, value in ((count, counted), ("window_s", window)):
        if name in (record.get("metrics") or {}) and not (value is not None and 0 < value < math.inf):
            return f"metrics.{name}: {record['metrics'][name].get('value')!r} is not a positive number"
    of_step = f"global_batch {global_batch}" + (f" x sequence_length {length}" if language else "")
    if counted is not None and per_step is not None and steps is not None \
            and counted != per_step * steps:
        return (f"metrics.{count}: {counted:g} is not {of_step} x "
                f"measured_steps {steps} = {per_step * steps}")
    if counted is not None and window is not None and \
            not math.isclose(throughput, counted / window, rel_tol=ROUNDING):
        return (f"throughput: {throughput:g} {unit} is not metrics.{count} / metrics.window_s = "
                f"{counted:g} / {window:g} s = {counted / window:g} {unit}")
    if not times or per_step is None:
        return ""
    total = math.fsum(times)
    stepped = per_step * len(times) / total  # the rate of the steps alone
    implied = per_step * len(times) / throughput  # the window the throughput implies
    timing = (f"{of_step} x {len(times)} steps in {total:g} s of step "
              f"times = {stepped:g} {unit}")
    if total > implied * (1 + ROUNDING):
        return (f"throughput: {throughput:g} {unit} is above its step times' rate ({timing}): "
                "the window cannot be shorter than its steps")
    allowed = total * (1 + WINDOW_SLACK) + WINDOW_SLACK_S
    if implied > allowed:
        return (f"throughput: {throughput:g} {unit} is below its step times' rate ({timing}): "
                f"a window of {implied:g} s, over the {allowed:g} s its steps allow")
    return ""


def _kernel_problem(record: Mapping[str, Any], throughput: float, times: list[float]) -> str:
    """The first inconsistency of an ok kernel record: throughput = work x steps / time."""
    from archbench.workloads.kernels import KERNELS  # the registry costs a training worker 0.1 s
    spec = KERNELS.get(record.get("kernel") or "")
    if spec is None or not times:
        return ""
    unit = record.get("throughput_unit", "")
    if unit != spec.unit:
        return f"throughput_unit: '{unit}' is not {spec.name}'s unit '{spec.unit}'"
    work = spec.work(record)
    if work is None:
        return ""
    total = math.fsum(times)
    expected = work * len(times) / total
    if not math.isclose(throughput, expected, rel_tol=ROUNDING):
        return (f"throughput: {throughput:g} {unit} is not {spec.name}'s work over its step "
                f"times: {work:g} {unit.removesuffix('/s')} x {len(times)} steps / {total:g} s "
                f"= {expected:g} {unit}")
    return ""


EVALUATION_DIGITS = 5e-5  # an evaluation is recorded to 4 decimals ("step:0.9000")


def _quality_problem(record: Mapping[str, Any]) -> str:
    """The first inconsistency of a time-to-accuracy record (its metrics, as
    :func:`archbench.workloads.training.outcome.to_accuracy` writes them; each checked
    where the record holds it): ``accuracy_reached`` 1 or 0 and the target a fraction in
    (0, 1]; the steps run from 1 to the cap (``measured_steps``); the clock positive;
    every evaluation a fraction in [0, 1], in increasing steps, the last at the last step
    run; ``accuracy_reached`` 1 exactly when the last evaluation reached the target and
    none before it did; the steps and time to accuracy those of the run, and none given
    for a run that did not reach its target."""
    found = record.get("metrics") or {}
    if "accuracy_reached" not in found:
        return ""
    values = {name: metric_value(record, name) for name in
              ("target_accuracy", "accuracy_reached", "quality_steps", "quality_s",
               "steps_to_accuracy", "time_to_accuracy_s")}
    given = {name: found.get(name, {}).get("value") for name in (*values, "evaluations")}
    target, reached, steps = (values[k] for k in ("target_accuracy", "accuracy_reached", "quality_steps"))
    if reached not in (0, 1):
        return f"metrics.accuracy_reached: {given['accuracy_reached']!r} is not 1 (yes) or 0 (no)"
    if target is None or not 0 < target <= 1:
        return f"metrics.target_accuracy: {given['target_accuracy']!r} is not a fraction in (0, 1]"
    cap = record.get("measured_steps")
    for name in ("quality_steps", "steps_to_accuracy"):
        count = values[name]
        if name in found and (count is None or count != int(count) or count < 1
                              or (cap is not None and count > cap)):
            return (f"metrics.{name}: {given[name]!r} is not a step count from 1 to the cap, "
                    f"measured_steps {cap}")
    for name in ("quality_s", "time_to_accuracy_s"):
        if name in found and not (values[name] is not None and 0 < values[name] < math.inf):
            return f"metrics.{name}: {given[name]!r} is not a positive number of seconds"
    if reached == 0 and ("steps_to_accuracy" in found or "time_to_accuracy_s" in found):
        return "metrics.steps_to_accuracy: given for a run that did not reach its target"
    if reached == 1 and (("quality_steps" in found and values["steps_to_accuracy"] != steps)
                         or ("quality_s" in found and values["time_to_accuracy_s"] != values["quality_s"])):
        return (f"metrics.steps_to_accuracy: {values['steps_to_accuracy']!r} steps in "
                f"{values['time_to_accuracy_s']!r} s, not the run's quality_steps {given['quality_steps']!r} "
                f"in quality_s {given['quality_s']!r} s")
    if "evaluations" not in found:
        return ""
    evaluations = _evaluations(given["evaluations"])
    if isinstance(evaluations, str):
        return f"metrics.evaluations: {evaluations}"
    if not evaluations or (steps is not None and evaluations[-1][0] != steps):
        return (f"metrics.evaluations: the last evaluation is not at the last step run "
                f"(quality_steps {given['quality_steps']!r})")
    scores = [score for _, score in evaluations]
    early = [f"{n}:{a:.4f}" for n, a in evaluations[:-1] if a >= target + EVALUATION_DIGITS]
    if reached == 1 and (scores[-1] < target - EVALUATION_DIGITS or early):
        why = f"step {early[0]} reached it earlier" if early else f"the last evaluation is {scores[-1]:.4f}"
        return f"metrics.accuracy_reached: 1, but {why} (target {target:g})"
    if reached == 0 and max(scores) >= target + EVALUATION_DIGITS:
        return f"metrics.accuracy_reached: 0, but an evaluation reached the target {target:g} ({max(scores):.4f})"
    return ""


def _evaluations(text: object) -> list[tuple[int, float]] | str:
    """The (step, accuracy) pairs of a record's ``evaluations`` ("step:fraction ..."),
    or why they are none: a step not increasing, an accuracy not in [0, 1]."""
    if not isinstance(text, str):
        return f"{text!r} is not 'step:accuracy' pairs"
    pairs: list[tuple[int, float]] = []
    for token in text.split():
        step, _, score = token.partition(":")
        try:
            n, accuracy = int(step), float(score)
        except ValueError:
            return f"{token[:40]!r} is not step:accuracy"
        if not 0 <= accuracy <= 1:
            return f"{token[:40]}: accuracy {accuracy:g} is not a fraction in [0, 1]"
        if n < 1 or (pairs and n <= pairs[-1][0]):
            return f"{token[:40]}: step {n} does not follow step {pairs[-1][0] if pairs else 0}"
        pairs.append((n, accuracy))
    return pairs


def measured_window_s(record: Mapping[str, Any]) -> float | None:
    """The seconds a record's measurement was timed over: a training record's
    ``metrics.window_s``, else the sum of its step times; None when it holds neither."""
    window = metric_value(record, "window_s")
    times = record.get("step_times_s") or []
    return window if window is not None else (math.fsum(times) if times else None)


def check(record: dict, source: str = "record") -> None:
    """RecordError naming ``source`` and the first field when ``record`` breaks the schema
    (:func:`archbench.core.record.validate`) or makes no sense (:func:`problem`)."""
    validate(record, source)
    nonsense = problem(record)
    if nonsense:
        raise RecordError(f"{source}: {nonsense}")


def read_counted(path: str | os.PathLike) -> dict:
    """A record that may count: :func:`archbench.core.record.read_record`'s checks, then
    :func:`problem`; RecordError naming the path and the first problem otherwise."""
    record = read_record(path)
    nonsense = problem(record)
    if nonsense:
        raise RecordError(f"{path}: {nonsense}")
    return record
