"""Issue 42, physical bounds and short windows: records, imported rows and claims that
imply more compute or memory traffic than their hardware can deliver are refused with one
line naming the field (file, row, column) and both numbers; a measured window too short
to time is flagged beside the spread flag, not refused.

Table-driven: each case is a record, an import row or a claim, and the one line expected
("": accepted). Then the declared FLOPs against the counted ones (small models only).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from archbench.core import metrics
from archbench.core.csvfile import ImportFormatError
from archbench.core.record import DEFAULTS, RecordError
from archbench.results import claims, imports
from archbench.results.collect import collect, records_to_frame
from archbench.results.integrity import quarantine_invalid
from archbench.results.tables import build_table
from archbench.workloads import ceiling, sense
from archbench.workloads.training import models
from archbench.workloads.training.pytorch import models as torch_models
from archbench.workloads.training.tensorflow import models as tf_models

REPO = Path(__file__).resolve().parents[1]


def train(throughput: float, *, steps: int = 10, **fields) -> dict:
    """An ok training record whose step times and window are scaled to ``throughput``, so
    every consistency check of sense.problem holds: global batch x steps images in a
    window of (global batch x steps / throughput) s, steps of equal length."""
    record = {**DEFAULTS, "experiment": "e", "system": "s", "arch": "x86_64", "kind": "train",
              "model": "resnet50", "run_id": "c/rep0", "data": "synthetic", "strategy": "horovod",
              "nodes": 1, "processes_per_node": 2, "workers": 2, "intra_threads": 4,
              "inter_threads": 1, "batch_per_process": 32, "image_size": 224, "config_id": "c",
              "repetition": 0, "start_time": "t0", "end_time": "t1", "warmup_steps": 2,
              "throughput_unit": "img/s", **fields}
    record["global_batch"] = record["batch_per_process"] * record["workers"]
    images = record["global_batch"] * steps
    window = images / throughput
    return {**record, "measured_steps": steps, "step_times_s": [window / steps] * steps,
            "throughput": throughput,
            "metrics": {**record.get("metrics", {}), "window_s": {"value": window, "unit": "s"},
                        "images": {"value": images, "unit": "img"}}}


def kernel(kernel_name: str, unit: str, work: float, seconds: float, *, steps: int = 3, **fields) -> dict:
    """An ok kernel record: ``steps`` steps of ``seconds`` each, doing ``work`` (its spec's
    count of one step, in ``unit`` without /s), throughput = work x steps / time."""
    record = {**DEFAULTS, "experiment": "k", "system": "s", "arch": "x86_64", "kind": "kernel",
              "kernel": kernel_name, "run_id": "m/rep0", "strategy": "workers", "workers": 1,
              "intra_threads": 1, "config_id": "m", "repetition": 0, "start_time": "t0",
              "end_time": "t1", "measured_steps": steps, "step_times_s": [seconds] * steps,
              "throughput_unit": unit, **fields}
    return {**record, "throughput": work * steps / (seconds * steps)}


N = 1024  # matmul's N: 2 N^3 - N^2 FLOPs a step
MATMUL = (2 * N**3 - N**2) / 1e9  # GFLOP
STREAM_N = 2**20  # stream's triad: 3 x 8 bytes x N x workers a step
TRIAD = 3 * 8 * STREAM_N / 1e9  # GB, one worker

RECORDS = [
    # the case: 1e20 img/s, step times scaled to match (every other check passes)
    ("1e20 img/s with matching step times", train(1e20),
     "throughput: 1e+20 img/s x 2.31e+10 training FLOP/img (resnet50 at 224 px, tensorflow) = "
     "2.31e+30 FLOP/s, over 10 x the peak of 8 CPU cores (3.07e+12 FLOP/s) = 3.07e+13 FLOP/s: "
     "physically impossible"),
    ("PyTorch ResNet-50 on one GPU at 2e6 img/s",
     train(2e6, framework="pytorch", device="gpu", gpus=1, gpus_per_node=1, workers=1,
           processes_per_node=1, strategy="single"),
     "throughput: 2e+06 img/s x 2.45e+10 training FLOP/img (resnet50 at 224 px, pytorch) = "
     "4.9e+16 FLOP/s, over 10 x the peak of 1 GPU (2.5e+15 FLOP/s) = 2.5e+16 FLOP/s: "
     "physically impossible"),
    ("Inception-v3 at 75 px: the grid, not (75/299)^2",
     train(1e4, model="inception_v3", image_size=75, workers=1, processes_per_node=1,
           intra_threads=1, strategy="single"),
     "throughput: 1e+04 img/s x 5.34e+08 training FLOP/img (inception_v3 at 75 px, tensorflow) "
     "= 5.34e+12 FLOP/s, over 10 x the peak of 1 CPU core (3.84e+11 FLOP/s) = 3.84e+12 FLOP/s: "
     "physically impossible"),
    ("0 intra-op threads: every core of the node, at most 1024",
     train(2e5, intra_threads=0),
     "throughput: 2e+05 img/s x 2.31e+10 training FLOP/img (resnet50 at 224 px, tensorflow) = "
     "4.63e+15 FLOP/s, over 10 x the peak of 1024 CPU cores (3.93e+14 FLOP/s) = 3.93e+15 FLOP/s: "
     "physically impossible"),
    ("pinned to 1 core each, 8 threads asked",
     train(400, intra_threads=8, metrics={"cores": {"value": 1, "unit": "cores"}}),
     "throughput: 400 img/s x 2.31e+10 training FLOP/img (resnet50 at 224 px, tensorflow) = "
     "9.25e+12 FLOP/s, over 10 x the peak of 2 CPU cores (7.68e+11 FLOP/s) = 7.68e+12 FLOP/s: "
     "physically impossible"),
    ("matmul at 1e5 GFLOP/s on one core", kernel("matmul", "GFLOP/s", MATMUL, MATMUL / 1e5),
     "throughput: 1e+05 GFLOP/s = 1e+14 FLOP/s, over 10 x the peak of 1 CPU core "
     "(3.84e+11 FLOP/s) = 3.84e+12 FLOP/s: physically impossible"),
    ("STREAM at 1e5 GB/s on one core",
     kernel("stream", "GB/s", TRIAD, TRIAD / 1e5, problem_size=STREAM_N),
     "throughput: 1e+05 GB/s = 1e+14 B/s, over 10 x the peak of 1 CPU core (1.15e+12 B/s) = "
     "1.15e+13 B/s: physically impossible"),
    ("stream_comm at 1e8 MiB/s between two one-core tasks",
     kernel("stream_comm", "MiB/s", 64, 64 / 1e8, problem_size=64, workers=2),
     "throughput: 1e+08 MiB/s = 1.05e+14 B/s, over 10 x the peak of 2 CPU cores (2.3e+12 B/s) = "
     "2.3e+13 B/s: physically impossible"),
    ("just over the bound: digits to tell the numbers apart",
     train(10 * 8 * ceiling.FLOPS_PER_CORE / (3 * 7.71e9) * 1.000001),
     "throughput: 1328.147 img/s x 2.31e+10 training FLOP/img (resnet50 at 224 px, tensorflow) = "
     "3.072003e+13 FLOP/s, over 10 x the peak of 8 CPU cores (3.07e+12 FLOP/s) = 3.072e+13 FLOP/s: "
     "physically impossible"),
    # accepted: what real hardware does
    ("a genuine CPU record", train(125.49), ""),
    ("ResNet-50 in PyTorch on an H100: ~3000 img/s",
     train(3000, framework="pytorch", device="gpu", gpus=1, gpus_per_node=1, workers=1,
           processes_per_node=1, strategy="single"), ""),
    ("OSU 2019: ResNet-152 at 5001 img/s on 128 nodes of 48 cores",
     train(5001, model="resnet152", nodes=128, processes_per_node=1, workers=128, intra_threads=48,
           batch_per_process=64), ""),
    ("the small CNN at 8 px, 1e5 img/s on one core",
     train(1e5, model="small_cnn", image_size=8, workers=1, processes_per_node=1, intra_threads=1,
           strategy="single"), ""),
    ("matmul on 4 GPUs at 1e6 GFLOP/s", kernel("matmul", "GFLOP/s", MATMUL, MATMUL / 1e6,
                                                device="gpu", gpus=4, workers=4), ""),
]


@pytest.mark.parametrize("name, record, reason", RECORDS, ids=[c[0] for c in RECORDS])
def test_records_beyond_the_physical_bound_are_refused(name, record, reason):
    assert sense.problem(record) == reason
    if reason:
        with pytest.raises(RecordError) as caught:
            sense.check(record)
        assert str(caught.value) == f"record: {reason}"


def test_every_reader_refuses_an_impossible_record_alike(tmp_path):
    """Collection, the quarantine at workflow start and the supervisor (read_counted)."""
    folder = tmp_path / "results/raw/s/e/c"
    folder.mkdir(parents=True)
    (folder / "rep0.json").write_text(json.dumps(train(125.49)))
    impossible = {**train(1e20), "repetition": 1, "run_id": "c/rep1"}
    (folder / "rep1.json").write_text(json.dumps(impossible))
    reason = sense.problem(impossible)
    with pytest.raises(RecordError, match="rep1.json: throughput: 1e"):
        sense.read_counted(folder / "rep1.json")
    frame, errors = collect(sorted(folder.glob("*.json")))
    assert frame["run_id"].tolist() == ["c/rep0"]
    assert errors == [f"{folder / 'rep1.json'}: {reason}"]
    (message,) = quarantine_invalid(sorted(folder.glob("*.json")), tmp_path / "results")
    assert message.endswith(f"will be rerun: {errors[0]}") and "\n" not in message
    assert [p.name for p in folder.iterdir()] == ["rep0.json"]


# ---------------------------------------------------------------- imports

IMPORTS = [
    ("img/s of a model on one core (image size unknown: the smallest)",
     "system,model,threads,throughput,unit\ns,resnet50,1,1e9,img/s\n",
     "column 'throughput': 1e+09 img/s x 4.72e+08 training FLOP/img (resnet50 at 32 px, "
     "tensorflow) = 4.72e+17 FLOP/s, over 10 x the peak of 1 CPU core (3.84e+11 FLOP/s) = "
     "3.84e+12 FLOP/s: physically impossible"),
    ("GFLOP/s of a kernel on one node",
     "system,kernel,nodes,throughput,unit\ns,matmul,1,5,PFLOP/s\n",
     "column 'throughput': 5 PFLOP/s = 5e+15 FLOP/s, over 10 x the peak of 1024 CPU cores "
     "(3.93e+14 FLOP/s) = 3.93e+15 FLOP/s: physically impossible"),
    ("img/s on 8 GPUs",
     "system,model,gpus,gpus_per_node,throughput,unit\ns,inception_v3,8,8,1e12,img/s\n",
     "column 'throughput': 1e+12 img/s x 5.34e+08 training FLOP/img (inception_v3 at 75 px, "
     "tensorflow) = 5.34e+20 FLOP/s, over 10 x the peak of 8 GPUs (2e+16 FLOP/s) = 2e+17 FLOP/s: "
     "physically impossible"),
    ("a published table row", "system,model,gpus,throughput,unit\npiz-daint,inception_v3,1,138.23,img/s\n", ""),
    # a model archbench does not build is refused unless its file declares its FLOPs
    # (tests/test_hostile_sense.py)
]


@pytest.mark.parametrize("name, text, reason", IMPORTS, ids=[c[0] for c in IMPORTS])
def test_imported_rows_beyond_the_physical_bound_are_refused(tmp_path, capsys, name, text, reason):
    path = tmp_path / "site.csv"
    path.write_text(text)
    raw = tmp_path / "results/raw"
    raw.mkdir(parents=True)
    if not reason:
        assert len(imports.read_import(path)) == 1
        return
    with pytest.raises(ImportFormatError) as caught:
        imports.read_values(path)
    assert str(caught.value) == f"{path}: row 1 (line 2): {reason}"
    with pytest.raises(ImportFormatError, match="physically impossible"):
        claims.check_imports([path])  # the plan-time check says the same
    assert imports.main([str(path)]) == 1
    assert capsys.readouterr().err == f"error: {path}: row 1 (line 2): {reason}\n"
    assert list(raw.iterdir()) == []


# ---------------------------------------------------------------- claims

CLAIMS = [
    # a claim holds for every value of a column it leaves out: any processes per node
    ("img/s on one node", "metric,system,model,nodes,threads,value,unit,source\n"
     "throughput,s,resnet50,1,1,1e9,img/s,paper\n",
     "column 'value': 1e+09 img/s x 4.72e+08 training FLOP/img (resnet50 at 32 px, any framework) "
     "= 4.72e+17 FLOP/s, over 10 x the peak of 1024 CPU cores (3.93e+14 FLOP/s) = 3.93e+15 FLOP/s: "
     "physically impossible"),
    ("a lower bound of GB/s on two nodes", "metric,system,kernel,nodes,low,unit,source\n"
     "bandwidth,s,stream,2,1e9,GB/s,paper\n",
     "column 'low': 1e+09 GB/s = 1e+18 B/s, over 10 x the peak of 2048 CPU cores (2.36e+15 B/s) = "
     "2.36e+16 B/s: physically impossible"),
    ("GFLOP/s of 16 workers", "metric,system,kernel,workers,threads,value,unit,source\n"
     "gflops,s,matmul,16,1,1e6,GFLOP/s,paper\n",
     "column 'value': 1e+06 GFLOP/s = 1e+15 FLOP/s, over 10 x the peak of 16 CPU cores "
     "(6.14e+12 FLOP/s) = 6.14e+13 FLOP/s: physically impossible"),
    ("a shipped claim: 2478 GFLOP/s on 16 K80s", "metric,system,kernel,workers,value,unit,source\n"
     "gflops,kebnekaise-k80,matmul,16,2478,GFLOP/s,paper\n", ""),
    ("no count: a claim for any scale", "metric,system,model,value,unit,source\n"
     "throughput,s,resnet50,1e15,img/s,paper\n", ""),
    ("a speedup is not a rate", "metric,system,model,nodes,value,unit,source\n"
     "speedup,s,resnet50,2,1e9,x,paper\n", ""),
]


@pytest.mark.parametrize("name, text, reason", CLAIMS, ids=[c[0] for c in CLAIMS])
def test_claims_beyond_the_physical_bound_are_refused(tmp_path, capsys, name, text, reason):
    path = tmp_path / "site-claims.csv"
    path.write_text(text)
    if not reason:
        assert len(claims.read_claims(path)) == 1
        return
    with pytest.raises(ImportFormatError) as caught:
        claims.read_claims(path)
    assert str(caught.value) == f"{path}: row 1 (line 2): {reason}"
    assert claims.main([str(path)]) == 1
    assert capsys.readouterr().err == f"error: {path}: row 1 (line 2): {reason}\n"


def test_every_shipped_published_file_is_physically_possible():
    published = sorted((REPO / "data/published").rglob("*.csv"))
    assert len(claims.load_published(published, [])) > 0


# ---------------------------------------------------------------- short windows

WINDOWS = [
    ("2 steps in 5 ms", {"steps": 2, "seconds": 0.005}, True),
    ("10 steps in 5 s", {"steps": 10, "seconds": 5.0}, False),
    ("50 steps in 0.25 s", {"steps": 50, "seconds": 0.25}, True),
    ("1 step of 2 s (a CG solve)", {"steps": 1, "seconds": 2.0}, False),
    ("at the floor", {"steps": 5, "seconds": metrics.MIN_WINDOW_S}, False),
]


@pytest.mark.parametrize("name, window, flagged", WINDOWS, ids=[c[0] for c in WINDOWS])
def test_short_windows_are_flagged_beside_the_spread(name, window, flagged):
    """Two repetitions of one hybrid configuration (the small CNN, 2 processes x 4
    threads), 2% apart, the faster one timed over ``seconds``."""
    images = 64 * window["steps"]
    runs = [{**train(images / window["seconds"] * f, steps=window["steps"], model="small_cnn",
                     image_size=32, experiment_type="hybrid"),
             "repetition": k, "run_id": f"c/rep{k}"} for k, f in enumerate((0.98, 1.0))]
    for run in runs:
        assert sense.problem(run) == ""  # flagged, never refused
    frame = records_to_frame(runs)
    (row,) = build_table("summary", frame).to_dict("records")
    assert row["short_window_flag"] is flagged and row["spread_flag"] is False
    (hybrid,) = build_table("hybrid_configurations", frame).to_dict("records")
    assert hybrid["short_window_flag"] is flagged


def test_a_kernel_window_is_its_step_times_and_an_import_has_none(tmp_path):
    short = kernel("matmul", "GFLOP/s", MATMUL, 0.001, steps=2)
    assert sense.measured_window_s(short) == pytest.approx(0.002)
    path = tmp_path / "site.csv"
    path.write_text("system,model,throughput,unit\ns,resnet50,100,img/s\n")
    frame = pd.concat([records_to_frame([short]), imports.read_import(path)], ignore_index=True)
    flags = build_table("summary", frame).set_index("kind")["short_window_flag"]
    assert bool(flags["kernel"]) is True and pd.isna(flags["train"])
    assert metrics.short_window(None) is None and metrics.short_window(float("nan")) is None


# ---------------------------------------------------------------- declared FLOPs

SMALL = ("small_cnn", "digits_cnn", "alexnet")


@pytest.mark.parametrize("name", SMALL)
def test_declared_flops_are_the_counted_ones_rounded_down(name):
    spec = models.MODELS[name]
    size = spec.native_image_size
    keras_count = tf_models.forward_flops(tf_models.build_model(name, size, spec.num_classes))
    torch_net = torch_models.build_model(name, size, spec.num_classes)
    torch_count = torch_models.training_flops(torch_net, (spec.channels, size, size)) / 3
    for declared, counted in ((models.least_training_flops(name, size), keras_count),
                              (torch_models.least_training_flops(name, size), torch_count)):
        assert declared / 3 <= counted <= 1.01 * declared / 3


@pytest.mark.parametrize("name, sizes", [
    ("small_cnn", (8, 9, 10, 11, 12, 15, 16, 17, 31, 32, 33)), ("digits_cnn", (8, 9, 10, 15, 16, 17)),
    ("alexnet", (64, 95, 96, 127, 128, 159, 188, 189, 220, 221, 223, 224, 256))])
def test_the_declared_flops_never_exceed_the_counted_ones(name, sizes):
    """The lower bound the physical check uses, at sizes around every grid step (both
    frameworks: torchvision's AlexNet loses more border than tf_cnn_benchmarks')."""
    spec = models.MODELS[name]
    torch_net = torch_models.build_model(name, max(sizes), spec.num_classes) if name != "digits_cnn" else None
    for size in sizes:
        net = torch_net or torch_models.build_model(name, size, spec.num_classes)
        counted = torch_models.training_flops(net, (spec.channels, size, size))
        assert torch_models.least_training_flops(name, size) <= counted, size
        if name != "alexnet" or size in (64, 127, 221, 224):
            keras = tf_models.training_flops(tf_models.build_model(name, size, spec.num_classes))
            assert models.least_training_flops(name, size) <= keras, size


def test_every_model_declares_its_flops_for_every_framework():
    from archbench.workloads.training.frameworks import FRAMEWORKS
    assert set(torch_models.FORWARD_GFLOPS) <= set(models.MODELS)
    for name, spec in models.MODELS.items():
        assert spec.forward_gflops > 0, name
        for framework in FRAMEWORKS:
            row = {"model": name, "framework": framework, "image_size": spec.native_image_size}
            assert ceiling.training_flops(row)[0] > 0, (name, framework)
