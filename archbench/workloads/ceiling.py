"""The physical bound of a measurement: no record, imported row or claim may imply more
compute or memory traffic than the hardware it ran on can deliver, by more than
:data:`FACTOR` (docs/metrics.md, "Sense checks on records", argues every number).

What a value implies, per second:

- img/s (training): img/s x the model's training FLOPs per image, the lower bound its
  framework's registry declares (``least_training_flops`` of
  ``archbench.workloads.training.models`` and of each framework's ``models`` module; the framework
  named, else the smaller of them) at the row's image size (the model's smallest where
  it states none or a smaller one);
- tokens/s (a language model's training): tokens/s x 6 N, N its parameters without the
  position embeddings (PaLM's model FLOPs per token without the attention term, which a
  causal kernel may halve: a lower bound whatever the kernel);
- FLOP/s and B/s in any prefix (kernels): the value itself.

The hardware: ``gpus`` GPUs for a GPU row (``device`` gpu, else ``workers``), else CPU
cores: each process keeps at most ``intra_threads`` x ``inter_threads`` cores busy
(every core of a node with 0 intra-op threads, the framework's default), at most the
cores it was pinned to (metric ``cores``), and a node holds at most
:data:`CORES_PER_NODE`. A system file declares no peak, and a record does not say
which CPU or GPU model it ran on in a form one could look up, so each unit counts at
the peak of the fastest one shipping (:data:`FLOPS_PER_CORE`, ...).

A row whose hardware cannot be counted (no nodes, workers or GPUs: a claim that holds
for any scale), whose model has no declared FLOPs (an imported model archbench does not
build) or whose unit is neither is not bounded.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

# fp32 FLOP/s of one CPU core: 2 FMA pipes x 16 fp32 lanes (512 bit) x 2 FLOPs at 6 GHz,
# above every shipping core (Zen 5 at 5.7 GHz: 365 GFLOP/s; Sapphire Rapids' AMX bf16 at
# 3.5 GHz, 3.6 TFLOP/s, stays below FACTOR x this)
FLOPS_PER_CORE = 2 * 16 * 2 * 6.0e9
# bytes/s of one CPU core: its L1 cache's 2 loads and 1 store of 64 bytes a cycle at 6 GHz
BYTES_PER_CORE = 3 * 64 * 6.0e9
# FLOP/s of one GPU: dense bf16 tensor cores of the fastest shipping GPU (B200: 2.25
# PFLOP/s; fp32 training runs on TF32 at half of that)
FLOPS_PER_GPU = 2.5e15
# bytes/s of one GPU: its SMs' shared memory and L1 (B200: 148 SMs x 128 B x 1.97 GHz =
# 37 TB/s), above its HBM3e (8 TB/s)
BYTES_PER_GPU = 4.0e13
# cores of one shared-memory node: above 2 x 288 (Xeon 6900E), 8 x 86 (Xeon 6700P) and
# 32 x 28 (HPE Superdome Flex) cores
CORES_PER_NODE = 1024
# how far a value may exceed the peak: Winograd and FFT convolutions do up to 4x fewer
# multiplications than the direct count, the first layer needs no input gradient, and
# reduced-precision units (AMX) outrun the fp32 peak; the rest is margin
FACTOR = 10.0

# unit prefixes of the FLOP/s and B/s units a kernel, import or claim may use
_PREFIXES = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
             "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30}


def _count(row: Mapping[str, Any], name: str) -> int | None:
    """``row[name]`` as a positive count, None where it is missing, 0 or not a count."""
    value = row.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if math.isfinite(value) and value >= 1 else None


def _pinned(row: Mapping[str, Any]) -> int | None:
    """The cores a process was pinned to: a record's metric ``cores``, a row's column."""
    metric = (row.get("metrics") or {}).get("cores")
    return _count(metric, "value") if isinstance(metric, Mapping) else _count(row, "cores")


def hardware(row: Mapping[str, Any]) -> tuple[float, float, str] | None:
    """(FLOP/s, bytes/s, what) at the peak of the hardware ``row`` ran on, e.g.
    (7.68e11, 2.3e12, "2 CPU cores"); None where it cannot be counted."""
    gpus = _count(row, "gpus")
    if row.get("device") == "gpu" or gpus:
        gpus = gpus or _count(row, "workers")
        if gpus is None:
            return None
        return gpus * FLOPS_PER_GPU, gpus * BYTES_PER_GPU, f"{gpus} GPU{'s' * (gpus > 1)}"
    nodes, threads = _count(row, "nodes"), _count(row, "intra_threads")
    processes = _count(row, "workers")
    if processes is None and nodes and _count(row, "processes_per_node"):
        processes = nodes * _count(row, "processes_per_node")
    if processes is None and nodes is None:
        return None
    per_process = CORES_PER_NODE if not threads else threads * (_count(row, "inter_threads") or 1)
    per_process = min(per_process, CORES_PER_NODE, _pinned(row) or CORES_PER_NODE)
    cores = min(processes * per_process if processes else math.inf,
                nodes * CORES_PER_NODE if nodes else math.inf)
    cores = int(cores)
    return cores * FLOPS_PER_CORE, cores * BYTES_PER_CORE, f"{cores} CPU core{'s' * (cores > 1)}"


def training_flops(row: Mapping[str, Any]) -> tuple[float, str] | None:
    """(training FLOPs per image, what they are of) for a training row, None where its
    model declares none."""
    from archbench.workloads.training.frameworks import FRAMEWORKS
    from archbench.workloads.training.models import MODELS
    model = row.get("model")
    if model not in MODELS:
        return None
    size = max(_count(row, "image_size") or 0, MODELS[model].min_image_size)  # none smaller runs
    named = row.get("framework")
    chosen = [named] if named in FRAMEWORKS else list(FRAMEWORKS)
    flops = min(FRAMEWORKS[name].least_training_flops(model, size) for name in chosen)
    return flops, f"{model} at {size} px, {named if named in FRAMEWORKS else 'any framework'}"


def implied(row: Mapping[str, Any], value: float, unit: str, *,
            flops_per_image: float | None = None) -> tuple[float, str, str] | None:
    """(rate, "FLOP/s" or "B/s", the FLOPs per image it multiplies img/s by, as text: ""
    for a FLOP/s or B/s unit) of ``value`` ``unit``; None where ``unit`` is neither img/s
    of a model with declared FLOPs (``flops_per_image``: those an import file declares for
    a model archbench does not build) nor a FLOP/s or B/s unit."""
    if unit == "img/s":
        flops = training_flops(row) if flops_per_image is None else (
            flops_per_image, f"{row.get('model')}, as its file declares")
        if flops is None:
            return None
        return value * flops[0], "FLOP/s", f" x {flops[0]:.3g} training FLOP/img ({flops[1]})"
    if unit == "tokens/s":
        from archbench.workloads.training.models import GPT
        model = row.get("model")
        if model not in GPT:
            return None
        least = 6.0 * GPT[model].parameters(position=False)
        return value * least, "FLOP/s", f" x {least:.3g} training FLOP/token ({model}, 6 N)"
    for base in ("FLOP/s", "B/s"):
        if unit.endswith(base) and unit[:-len(base)] in _PREFIXES:
            scale = _PREFIXES[unit[:-len(base)]]
            return value * scale, base, ""
    return None


def beyond_peak(row: Mapping[str, Any], value: float | None = None, unit: str | None = None, *,
                flops_per_image: float | None = None) -> str:
    """"" when ``value`` ``unit`` (default: the row's ``throughput`` and
    ``throughput_unit``) is physically possible on the hardware ``row`` ran on, else one
    line naming both numbers, e.g. "1e+20 img/s x 2.31e+10 training FLOP/img (resnet50
    at 224 px, tensorflow) = 2.31e+30 FLOP/s, over 10 x the peak of 1 CPU core
    (3.84e+11 FLOP/s) = 3.84e+12 FLOP/s: physically impossible", with as many digits as
    tell the two apart. ``flops_per_image``: the training FLOPs per image declared for a
    model that declares none (:func:`implied`)."""
    value = row.get("throughput") if value is None else value
    unit = row.get("throughput_unit") if unit is None else unit
    if not isinstance(value, (int, float)) or not isinstance(unit, str) or not value > 0:
        return ""
    rate, peak = implied(row, float(value), unit, flops_per_image=flops_per_image), hardware(row)
    if rate is None or peak is None:
        return ""
    amount, base, how = rate
    ceiling = peak[0] if base == "FLOP/s" else peak[1]
    if amount <= FACTOR * ceiling:
        return ""
    digits = next((d for d in range(3, 17) if f"{amount:.{d}g}" != f"{FACTOR * ceiling:.{d}g}"), 17)
    shown = f"{value:.{digits}g} {unit}{how}"
    if unit != base:
        shown += f" = {amount:.{digits}g} {base}"
    return (f"{shown}, over {FACTOR:g} x the peak of {peak[2]} ({ceiling:.3g} {base}) "
            f"= {FACTOR * ceiling:.{digits}g} {base}: physically impossible")
