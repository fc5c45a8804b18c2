"""Test data: fabricated result records of every experiment kind, with known values.

Not used by the workflow. The tests import it, and so do the benchmark scripts
``scripts/bench_aggregate.py`` and ``scripts/bench_tuner.py``, with ``tests/`` on their
``sys.path`` as pytest puts it on the tests'. Every record is a
valid record (``archbench.core.record.make_record``), and its throughput follows
:func:`true_throughput` times a repetition factor from ``NOISE`` whose mean is exactly 1,
so the mean of a configuration is known in closed form. A few configurations fail on
purpose (all repetitions, or some), see :func:`planned_failure`.
"""

from __future__ import annotations

import math
from typing import Iterator

from archbench.core.fields import DEFAULT_FRAMEWORK, config_id
from archbench.core.metrics import layout_counts
from archbench.core.record import make_record
from archbench.workloads.kernels import KERNELS
from archbench.workloads.training.frameworks import FRAMEWORKS, strategies_of

# Repetition factors: the mean of NOISE[:reps] is 1 for reps 1..5, the spread 4% of the mean.
NOISE = {1: (1.0,), 2: (0.98, 1.02), 3: (0.98, 1.0, 1.02), 4: (0.98, 0.99, 1.01, 1.02),
         5: (0.98, 0.99, 1.0, 1.01, 1.02)}
WIDE_NOISE = {n: tuple(1 + 5 * (f - 1) for f in fs) for n, fs in NOISE.items()}  # 20% spread

BASE_IMG_S = {"alexnet": 20.0, "resnet50": 3.0, "digits_cnn": 2000.0}
MODEL_FLOPS_PER_IMAGE = {"alexnet": 2.1e9, "resnet50": 12.3e9, "digits_cnn": 5.8e6}
# time to accuracy (quality experiments): steps to the target per precision; a bf16 PyTorch
# run on sysb never reaches it (a run that says so, status ok)
STEPS_TO_ACCURACY = {"fp32": 200, "bf16": 225}
TARGET_ACCURACY = 0.95
SYSTEMS = {"sysa": ("x86_64", "onednn", 1.0), "sysb": ("aarch64", "onednn-acl", 0.7)}
GRADIENT_TENSORS = {"alexnet": 16, "resnet50": 161}
# the CPU packages' and DRAM's power of a fabricated system's training runs (RAPL), in W:
# J/img = W / (img/s)
PACKAGE_WATTS = {"sysa": 150.0, "sysb": 90.0}
DRAM_WATTS = {"sysa": 30.0, "sysb": 20.0}
WINDOW_IMAGES = 1000  # images of a fabricated window (metric images)
# img/s relative to the default framework's; a registered framework not named here: 1.0
FRAMEWORK_SPEED = {"tensorflow": 1.0, "pytorch": 0.8}
# img/s relative to fp32 eager: bf16 mixed precision and a compiled graph
NUMERICS_SPEED = {"bf16": 1.6, "compiled": 1.15}


def framework_speed(name: str) -> float:
    """The fabricated img/s of framework ``name`` relative to the default framework's."""
    return FRAMEWORK_SPEED.get(name, 1.0)


def system_traits(name: str) -> tuple[str, str, float]:
    """(arch, vendor library, relative speed) of a fabricated system; other names copy sysa."""
    return SYSTEMS.get(name, SYSTEMS["sysa"])


def true_throughput(conf: dict) -> float:
    """The mean value the fabricated runs of ``conf`` are built around."""
    speed = system_traits(conf["system"])[2]
    if conf["kind"] == "kernel":
        if conf["kernel"] == "stream":
            return 10.0 * speed * (1 + math.log2(conf["problem_size"]) / 30)  # GB/s
        return 8.0 * speed * conf["workers"] ** 0.9 * (conf["problem_size"] / 1024) ** 0.1
    p = BASE_IMG_S[conf["model"]] * speed * framework_speed(conf.get("framework", DEFAULT_FRAMEWORK))
    p *= conf["intra_threads"] ** 0.85 * conf["processes_per_node"] ** 0.9
    p *= 1.0 + conf["batch_per_process"] / 256
    p *= 1.3 if conf["vendor_library_enabled"] else 1.0
    p *= conf["inter_threads"] ** 0.05 if conf["inter_threads"] else 0.95
    p *= conf["nodes"] ** 0.92
    if conf["data"] == "real":
        p *= 0.85 + 0.01 * math.log2(conf["nodes"])
    if "tuning" in conf:
        p /= 1 + allreduces_per_step(conf) / 200
    p *= NUMERICS_SPEED.get(conf.get("precision"), 1.0) * NUMERICS_SPEED.get(conf.get("graph"), 1.0)
    return p


def fabricated_losses(conf: dict, steps: int = 6) -> list[float]:
    """The losses of the measured steps of a fabricated training run: falling from 2.3;
    bf16 compiled ends 25 % higher (a configuration the precision table flags)."""
    end = 1.0 * (1.25 if conf.get("precision") == "bf16" and conf.get("graph") == "compiled" else 1.0)
    return [2.3 - (2.3 - end) * k / (steps - 1) for k in range(steps)]


def allreduces_per_step(conf: dict) -> float:
    """Allreduce operations per step of a Horovod tuning configuration: one per gradient
    tensor without fusion, fewer the longer the cycle."""
    tensors = GRADIENT_TENSORS[conf["model"]]
    if conf["tuning"]["horovod_fusion_threshold_bytes"] == 0:
        return float(tensors)
    return float(math.ceil(tensors / (4 * conf["tuning"]["horovod_cycle_time_ms"])))


def planned_failure(conf: dict, rep: int) -> str | None:
    """The status a fabricated run fails with, or None for a successful run.

    - sysb resnet50 batch 64, 4 threads, vendor library off: oom in every repetition;
    - sysa alexnet batch 16, 2 threads, vendor library on: timeout in repetition 0 only;
    - sysb real-data node scaling at 4 nodes: failed in every repetition.
    """
    if conf["kind"] != "train":
        return None
    if (conf["system"], conf["model"], conf["batch_per_process"], conf["intra_threads"],
            conf["vendor_library_enabled"], conf["experiment"]) == (
            "sysb", "resnet50", 64, 4, False, "threads"):
        return "oom"
    if (conf["system"], conf["model"], conf["batch_per_process"], conf["intra_threads"],
            conf["vendor_library_enabled"], conf["experiment"]) == (
            "sysa", "alexnet", 16, 2, True, "threads") and rep == 0:
        return "timeout"
    if conf["experiment"] == "scaling" and conf["system"] == "sysb" and \
            conf["data"] == "real" and conf["nodes"] == 4:
        return "failed"
    return None


def is_wide(conf: dict) -> bool:
    """Configurations whose repetitions spread by 20% (over the 10% flag)."""
    return conf["kind"] == "train" and conf["experiment"] == "hybrid" and \
        conf["processes_per_node"] == 4


def _train(experiment: str, etype: str, system: str, **values) -> dict:
    arch, vendor, _ = system_traits(system)
    conf = {"experiment": experiment, "experiment_type": etype, "system": system,
            "arch": arch, "kind": "train", "model": "resnet50", "data": "synthetic",
            "strategy": "single", "nodes": 1, "processes_per_node": 1, "intra_threads": 1,
            "inter_threads": 1, "batch_per_process": 16, "vendor_library": vendor,
            "vendor_library_enabled": True, "image_size": 224}
    conf.update(values)
    conf.update(layout_counts(conf))
    return conf


def _quality(system: str, experiment: str = "quality", **values) -> dict:
    """A time-to-accuracy configuration: digits_cnn on the real digits, batch 32."""
    return _train(experiment, "quality", system, **{
        "model": "digits_cnn", "data": "real", "batch_per_process": 32, "image_size": 8,
        **values})


def reaches(conf: dict) -> bool:
    """Whether a fabricated quality run reaches its target (all but bf16 PyTorch on sysb)."""
    return (conf["system"], conf.get("framework"), conf.get("precision")) != ("sysb", "pytorch", "bf16")


def quality_metrics(conf: dict, throughput: float | None) -> dict:
    """The metrics of a fabricated quality run (outcome.to_accuracy): the steps of its
    precision in the seconds its throughput gives, or the step cap without reaching it."""
    steps = STEPS_TO_ACCURACY[conf.get("precision", "fp32")] if reaches(conf) else 1000
    seconds = steps * conf["global_batch"] / throughput if throughput else None
    out = {"target_accuracy": {"value": TARGET_ACCURACY, "unit": "fraction"},
           "accuracy_reached": {"value": int(reaches(conf)), "unit": "1 = yes, 0 = no"}}
    if reaches(conf) and seconds is not None:
        out.update(steps_to_accuracy={"value": steps, "unit": "steps"},
                   time_to_accuracy_s={"value": seconds, "unit": "s"})
    return out


def _kernel(experiment: str, system: str, *, kernel: str, size: int, workers: int) -> dict:
    return {"experiment": experiment, "experiment_type": "kernel", "system": system,
            "arch": system_traits(system)[0], "kind": "kernel", "kernel": kernel,
            "problem_size": size, "tile_size": None if kernel == "stream" else size // 4,
            "workers": workers, "nodes": 1, "strategy": "workers"}


def configurations(systems: tuple[str, ...] = ("sysa", "sysb"), threads: tuple[int, ...] = (1, 2, 4),
                   batches: tuple[int, ...] = (16, 64)) -> list[dict]:
    """Configurations of every experiment type on ``systems``."""
    confs: list[dict] = []
    for system in systems:
        for model in ("alexnet", "resnet50"):
            for batch in batches:
                for n in threads:
                    for vendor in (True, False):
                        confs.append(_train("threads", "thread_scaling", system, model=model,
                                            batch_per_process=batch, intra_threads=n,
                                            vendor_library_enabled=vendor))
            for ppn, n in ((1, 4), (2, 2), (4, 1)):
                confs.append(_train("hybrid", "hybrid", system, model=model,
                                    processes_per_node=ppn, intra_threads=n,
                                    batch_per_process=32))
            for inter in (1, 2):
                for n in (1, 2, 4):
                    confs.append(_train("interintra", "inter_intra", system, model=model,
                                        inter_threads=inter, intra_threads=n))
            for cycle in (1, 10):
                for fusion in (0, 64 << 20):
                    confs.append(_train("tuning", "horovod_tuning", system, model=model,
                                        strategy="horovod", processes_per_node=4,
                                        batch_per_process=32, tuning={
                                            "horovod_cycle_time_ms": cycle,
                                            "horovod_fusion_threshold_bytes": fusion}))
            for nodes in (1, 2, 4):
                for data in ("synthetic", "real"):
                    confs.append(_train("scaling", "node_scaling", system, model=model,
                                        nodes=nodes, data=data, strategy="horovod",
                                        intra_threads=4, batch_per_process=64))
        for model in ("alexnet", "resnet50"):  # every configuration in every framework
            for n in threads:
                for framework in FRAMEWORKS:
                    confs.append(_train("frameworks", "batch_sweep", system, model=model,
                                        intra_threads=n, batch_per_process=batches[0],
                                        framework=framework))
        for framework in FRAMEWORKS:  # precision x graph beside the fp32-strict-eager twin
            for precision, graph in (("fp32", "eager"), ("bf16", "eager"), ("fp32", "compiled"),
                                     ("bf16", "compiled")):
                confs.append(_train("numerics", "batch_sweep", system, model="resnet50",
                                    intra_threads=threads[-1], batch_per_process=batches[0],
                                    framework=framework, precision=precision, graph=graph))
        for framework in FRAMEWORKS:
            for precision in STEPS_TO_ACCURACY:
                confs.append(_quality(system, framework=framework, precision=precision))
        for size in (1024, 2048):
            for workers in (1, 2, 4):
                confs.append(_kernel("kernels", system, kernel="matmul", size=size, workers=workers))
        for size in (2**21, 2**23, 2**25):
            confs.append(_kernel("stream", system, kernel="stream", size=size, workers=1))
    return confs


def fabricate_records(repetitions: int = 3, **kwargs) -> Iterator[dict]:
    """Valid records of every experiment type: ``repetitions`` runs per configuration, and
    a tuner's trials on each system (:func:`fabricate_tune_records`)."""
    yield from _fabricate_configurations(repetitions, **kwargs)
    yield from fabricate_tune_records(kwargs.get("systems", ("sysa", "sysb")))


def _fabricate_configurations(repetitions: int = 3, **kwargs) -> Iterator[dict]:
    for conf in configurations(**kwargs):
        conf["config_id"] = config_id(conf)
        noise = (WIDE_NOISE if is_wide(conf) else NOISE)[repetitions]
        value = true_throughput(conf)
        tuning = conf.pop("tuning", None)  # part of the config id, not a record field
        for rep in range(repetitions):
            failure = planned_failure(conf, rep)
            record = dict(conf, repetition=rep, start_time="2024-01-01T00:00:00Z",
                          end_time="2024-01-01T00:01:00Z", status=failure or "ok",
                          reason=f"fabricated {failure}" if failure else "")
            if conf["kind"] == "train":
                record["throughput_unit"] = "img/s"
                record["losses"] = [] if failure else fabricated_losses(conf)
                record["metrics"] = {"flops_per_image": {
                    "value": MODEL_FLOPS_PER_IMAGE[conf["model"]], "unit": "flop"}}
                if tuning:
                    record["metrics"].update({
                        "horovod_cycle_time": {"value": tuning["horovod_cycle_time_ms"], "unit": "ms"},
                        "horovod_fusion_threshold": {
                            "value": tuning["horovod_fusion_threshold_bytes"], "unit": "B"},
                        "allreduces_per_step": {"value": allreduces_per_step({**conf, "tuning": tuning}),
                                                "unit": "allreduces/step"}})
            else:
                record["throughput_unit"] = KERNELS[conf["kernel"]].unit
            record["throughput"] = None if failure else value * noise[rep]
            if conf.get("experiment_type") == "quality" and not failure:
                record["metrics"].update(quality_metrics(conf, record["throughput"]))
            if failure:
                record["throughput_unit"] = ""
            elif conf["kind"] == "train":
                record.update(fabricated_energy(conf["system"], record["throughput"]))
                record["metrics"]["images"] = {"value": WINDOW_IMAGES, "unit": "img"}
            yield make_record(**record)


# ------------------------------------------------------------------- a tuner's trials
# A tune experiment over the space of the hybrid sweep of :func:`configurations` (ResNet-50,
# batch 32, processes x threads filling 4 cores), which its trials name as their sweep.
TUNE_EXPERIMENT, TUNE_SWEEP, TUNE_MODEL, TUNE_BATCH = "tune", "hybrid", "resnet50", 32
TUNE_SPACE = ((1, 4), (2, 2), (4, 1))  # (processes per node, intra-op threads)
# (trial, round, rung, point index, repetitions, measured steps, seconds per run):
# round 1 measures every point briefly, and the point (4, 1) fails there (so it is never
# promoted); round 2 measures the two others at the top rung, twice each
TUNE_SCHEDULE = ((0, 1, 0, 0, 1, 10, 20), (1, 1, 0, 1, 1, 10, 20), (2, 1, 0, 2, 1, 10, 20),
                 (0, 2, 1, 0, 2, 30, 60), (1, 2, 1, 1, 2, 30, 60))
TUNE_TOP_RUNG = 1
TUNE_FAILED_TRIALS = (2,)
TUNE_PLAN = {"exhaustive_node_hours": 0.1, "budget_node_hours": 0.08}  # planned estimates
LOW_RUNG_BIAS = 1.05  # a run below the top rung reads 5 % high (a short window's edges)


def tune_configuration(system: str, point: int) -> dict:
    """The configuration of :data:`TUNE_SPACE` point ``point`` as the tuner runs it on
    ``system`` (the hybrid sweep's configuration but for the experiment)."""
    ppn, threads = TUNE_SPACE[point]
    return _train(TUNE_EXPERIMENT, "tune", system, model=TUNE_MODEL, processes_per_node=ppn,
                  intra_threads=threads, batch_per_process=TUNE_BATCH)


def fabricate_tune_records(systems: tuple[str, ...] = ("sysa", "sysb")) -> Iterator[dict]:
    """Valid records of a tuner's trials on each of ``systems`` (:data:`TUNE_SCHEDULE`),
    one minute apart from 2024-01-02 00:00 UTC in schedule order; an ok run's img/s is
    :func:`true_throughput` of its configuration times ``NOISE``, and below the top rung
    times :data:`LOW_RUNG_BIAS`, so the mean of a configuration's top-rung runs is its true
    value; the trials of :data:`TUNE_FAILED_TRIALS` fail."""
    import datetime as dt
    start = dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc)
    for system in systems:
        for number, round_, rung, point, repetitions, steps, seconds in TUNE_SCHEDULE:
            conf = tune_configuration(system, point)
            conf["config_id"] = config_id(conf)
            failed = number in TUNE_FAILED_TRIALS
            for rep in range(repetitions):
                begin, start = start, start + dt.timedelta(minutes=1)
                bias = 1.0 if rung == TUNE_TOP_RUNG else LOW_RUNG_BIAS
                throughput = None if failed else true_throughput(conf) * NOISE[repetitions][rep] * bias
                measured = {} if failed else {
                    **fabricated_energy(system, throughput),
                    "losses": fabricated_losses(conf),
                    "metrics": {"flops_per_image": {"value": MODEL_FLOPS_PER_IMAGE[TUNE_MODEL],
                                                    "unit": "flop"},
                                "images": {"value": WINDOW_IMAGES, "unit": "img"}}}
                yield make_record(
                    **conf, **measured, repetition=rep,
                    run_id=f"{conf['config_id']}_t{number}_r{round_}_rep{rep}",
                    start_time=begin.isoformat().replace("+00:00", "Z"),
                    end_time=(begin + dt.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z"),
                    status="failed" if failed else "ok",
                    reason="fabricated failed trial" if failed else "",
                    throughput=throughput, throughput_unit="" if failed else "img/s",
                    measured_steps=steps, trial={
                        "number": number, "round": round_, "rung": rung,
                        "top_rung": rung == TUNE_TOP_RUNG, "sweep": TUNE_SWEEP, **TUNE_PLAN})


def fabricated_energy(system: str, throughput: float) -> dict:
    """The ``energy`` of a fabricated ok training run: its CPU packages and DRAM drew
    ``PACKAGE_WATTS[system]`` and ``DRAM_WATTS[system]`` (sysa's for other names) over a
    window of :data:`WINDOW_IMAGES` images, so J/img = W / (img/s); Slurm measured nothing."""
    seconds = WINDOW_IMAGES / throughput
    watts = {covers: table.get(system, table["sysa"])
             for covers, table in (("cpu package", PACKAGE_WATTS), ("dram", DRAM_WATTS))}
    return {"energy": [
        *({"source": "rapl", "covers": covers, "joules": w * seconds, "status": "measured",
           "reason": "", "limits": "fabricated", "interval_s": seconds} for covers, w in watts.items()),
        {"source": "slurm", "covers": "node", "joules": None, "status": "not measured",
         "reason": "not a Slurm job", "limits": "fabricated"}]}


# ------------------------------------------------------------- two values on every axis
AXIS_MKL_ENV = {"KMP_BLOCKTIME": "0", "KMP_AFFINITY": "granularity=fine,compact,1,0"}
AXIS_SYSTEMS = ("sysa", "sysb")
AXIS_MODELS = ("alexnet", "resnet50")


def _grid(*axes: tuple) -> list[tuple]:
    """The cartesian product of ``axes`` as a list of tuples."""
    out: list[tuple] = [()]
    for axis in axes:
        out = [(*head, value) for head in out for value in axis]
    return out


def _training_axes(system: str, model: str, *, vendor: bool, data: str) -> list[dict]:
    """Configurations of every training experiment type for one system, model, vendor
    setting and input, two values on each of their own axes."""
    common = dict(model=model, vendor_library_enabled=vendor, data=data)
    confs = []
    for experiment, batch, threads, inter in _grid(("threads", "threads2"), (16, 64), (1, 2), (1, 2)):
        confs.append(_train(experiment, "thread_scaling", system, batch_per_process=batch,
                            intra_threads=threads, inter_threads=inter, **common))
    for batch, threads in _grid((16, 64), (2, 4)):
        confs.append(_train("batches", "batch_sweep", system, batch_per_process=batch,
                            intra_threads=threads, **common))
    for (ppn, threads), batch, inter in _grid(((1, 4), (2, 2)), (16, 64), (1, 2)):
        confs.append(_train("hybrid", "hybrid", system, strategy="horovod", processes_per_node=ppn,
                            intra_threads=threads, batch_per_process=batch, inter_threads=inter,
                            **common))
    for cores, inter, intra, mkl, batch in _grid((2, 4), (1, "cores"), (1, "cores"), (False, True),
                                                 (16, 64)):
        confs.append(_train("sweep", "inter_intra", system, batch_per_process=batch,
                            inter_threads=cores if inter == "cores" else inter,
                            intra_threads=cores if intra == "cores" else intra,
                            tuning={"cores": cores}, env=dict(AXIS_MKL_ENV) if mkl else {},
                            **common))
    for (experiment, nodes_list, unit), ppn, batch, inter in _grid(
            (("ppn", (1,), "workers"), ("ppn-nodes", (1, 2), "nodes")), (1, 2, 4), (16, 64), (1, 2)):
        for nodes in nodes_list:
            confs.append(_train(experiment, "ppn_sweep", system, strategy="horovod", nodes=nodes,
                                processes_per_node=ppn, intra_threads=max(1, 4 // ppn - 1),
                                batch_per_process=batch, inter_threads=inter, scaling_unit=unit,
                                **common))
    for nodes, (strategy, ps), ppn, batch in _grid(
            (1, 2, 4), (("horovod", None), ("parameter_server", 1), ("parameter_server", 2)), (1, 2),
            (16, 64)):
        extra = {"parameter_servers": ps} if ps else {}
        confs.append(_train("scaling", "node_scaling", system, strategy=strategy, nodes=nodes,
                            processes_per_node=ppn, intra_threads=4 // ppn, batch_per_process=batch,
                            scaling_unit="nodes", **extra, **common))
    for nodes, cycle, fusion, batch in _grid((1, 2), (1, 10), (0, 64 << 20), (16, 64)):
        confs.append(_train("tuning", "horovod_tuning", system, strategy="horovod", nodes=nodes,
                            processes_per_node=4, batch_per_process=batch, tuning={
                                "horovod_cycle_time_ms": cycle,
                                "horovod_fusion_threshold_bytes": fusion}, **common))
    return confs


def axis_configurations() -> list[dict]:
    """Configurations of every experiment type with two values on every axis their tables
    vary: system, model, input data, vendor library on/off, batch size, intra-op and inter-op
    threads, processes per node, nodes, strategy and parameter-server count, MKL settings on/
    off and pinned cores (inter/intra sweep), Horovod cycle time and fusion threshold, two
    experiments of one type, kernel problem and tile sizes, workers and nodes; and the
    framework: of ResNet-50 on sysa and AlexNet on sysb (vendor library on) every
    configuration another registered framework (PyTorch) can run also runs in it; and
    precision, fp32 math mode and graph: bf16, math mode bf16 and compiled beside fp32
    strict eager, in every framework, on both systems."""
    confs: list[dict] = []
    for system, model, vendor, data in _grid(AXIS_SYSTEMS, AXIS_MODELS, (True, False),
                                             ("synthetic", "real")):
        confs += _training_axes(system, model, vendor=vendor, data=data)
    for (system, model), data in _grid((("sysa", "resnet50"), ("sysb", "alexnet")),
                                       ("synthetic", "real")):
        confs += [{**conf, "framework": other}
                  for other in FRAMEWORKS if other != DEFAULT_FRAMEWORK
                  for conf in _training_axes(system, model, vendor=True, data=data)
                  if conf["strategy"] in strategies_of(other)]
    for system, framework, (precision, math_mode, graph) in _grid(AXIS_SYSTEMS, tuple(FRAMEWORKS), (
            ("fp32", "strict", "eager"), ("bf16", "strict", "eager"), ("fp32", "bf16", "eager"),
            ("fp32", "strict", "compiled"), ("bf16", "strict", "compiled"))):
        confs.append(_train("numerics", "batch_sweep", system, model="resnet50", intra_threads=2,
                            batch_per_process=16, framework=framework, precision=precision,
                            math_mode=math_mode, graph=graph))
    for system, framework, precision, graph, batch, threads in _grid(
            AXIS_SYSTEMS, ("tensorflow", "pytorch"), tuple(STEPS_TO_ACCURACY), ("eager", "compiled"),
            (32, 64), (1, 2)):
        confs.append(_quality(system, framework=framework, precision=precision, graph=graph,
                              batch_per_process=batch, intra_threads=threads))
    for system in AXIS_SYSTEMS:
        for nodes, size, tiles, workers in _grid((1, 2), (1024, 2048), (4, 2), (1, 2)):
            conf = _kernel("kernels", system, kernel="matmul", size=size, workers=workers)
            confs.append({**conf, "nodes": nodes, "tile_size": size // tiles})
        for size, workers in _grid((2**21, 2**23), (1, 2)):
            confs.append(_kernel("stream", system, kernel="stream", size=size, workers=workers))
    return confs


def _axis_value(conf: dict, tuning: dict, env: dict) -> float:
    """The mean of a configuration of :func:`axis_configurations`: :func:`true_throughput`
    with intra-op 0 as all pinned cores, a little faster with the MKL settings."""
    if conf["kind"] == "kernel":
        return true_throughput(conf)
    plain = dict(conf, intra_threads=conf["intra_threads"] or tuning.get("cores", 1))
    if "horovod_cycle_time_ms" in tuning:
        plain["tuning"] = tuning
    value = true_throughput(plain) * (1.1 if env else 1.0)
    if conf.get("parameter_servers"):
        value *= 1 - 0.05 * conf["parameter_servers"] / conf["nodes"]
    return value


def fabricate_axis_records(repetitions: int = 2) -> Iterator[dict]:
    """Valid records of :func:`axis_configurations`, ``repetitions`` runs each (values from
    ``NOISE`` around :func:`_axis_value`; the failures of :func:`planned_failure`)."""
    for conf in axis_configurations():
        tuning, env = conf.pop("tuning", {}), conf.pop("env", {})
        conf["config_id"] = config_id({**conf, "tuning": tuning, "env": env})
        value = _axis_value(conf, tuning, env)
        metrics: dict = {}
        if conf["kind"] == "train":
            metrics["flops_per_image"] = {"value": MODEL_FLOPS_PER_IMAGE[conf["model"]], "unit": "flop"}
        if "cores" in tuning:
            metrics["cores"] = {"value": tuning["cores"], "unit": "cores"}
        if "horovod_cycle_time_ms" in tuning:
            metrics.update({
                "horovod_cycle_time": {"value": tuning["horovod_cycle_time_ms"], "unit": "ms"},
                "horovod_fusion_threshold": {"value": tuning["horovod_fusion_threshold_bytes"],
                                             "unit": "B"},
                "allreduces_per_step": {"value": allreduces_per_step({**conf, "tuning": tuning}),
                                        "unit": "allreduces/step"}})
        unit = "img/s" if conf["kind"] == "train" else KERNELS[conf["kernel"]].unit
        for rep in range(repetitions):
            failure = planned_failure(conf, rep)
            throughput = None if failure else value * NOISE[repetitions][rep]
            quality = quality_metrics(conf, throughput) if conf.get("experiment_type") == "quality" else {}
            measured = {}
            if throughput is not None and conf["kind"] == "train" and not quality:
                measured = fabricated_energy(conf["system"], throughput)
                measured["metrics"] = {**metrics, "images": {"value": WINDOW_IMAGES, "unit": "img"}}
            yield make_record(**{**conf, "metrics": {**metrics, **quality}, **measured}, repetition=rep,
                              start_time="2024-01-01T00:00:00Z",
                              end_time="2024-01-01T00:01:00Z", status=failure or "ok",
                              reason=f"fabricated {failure}" if failure else "", env=env,
                              throughput=throughput, throughput_unit="" if failure else unit)
