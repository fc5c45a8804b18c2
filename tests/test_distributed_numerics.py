"""Precision and fp32 math mode under the multi-process strategies, for real: 2 ranks of
Horovod (TensorFlow and PyTorch, under mpirun) and of DDP (PyTorch, gloo) with precision
bf16 (mixed: fp32 weights, so the allreduce stays fp32) and with math mode bf16 (oneDNN's
fpmath mode, set by every rank before its framework loads). Each record states what it
asked for, keeps every measured step's loss, its replicas end identical, and its vendor
evidence (the probe child, one process with the run's settings) says what ran on this
CPU: bf16 kernels where it has bf16 instructions, and for math mode bf16 fp32 kernels
unless it has AMX ("bf16 requested, fp32 executed").

Horovod runs are marked ``horovod``; without Horovod (or mpirun) they skip, except under CI.
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
from test_distributed import TINY, horovod_ready, launch, require

from archbench.workloads.training.vendor_evidence import precision


def expected_execution(record: dict) -> str | None:
    """What this x86_64 CPU (the record's ``cpu_isa``) runs a bf16 request in: precision
    bf16 on bf16 instructions (AVX512_BF16, AMX) "bf16", on AVX-512 without them "bf16
    emulated"; math mode bf16 (fp32 tensors, the fpmath hint) "bf16 fast math" on AMX
    only, else "fp32". None where the test does not know (another architecture, or no
    AVX-512: what ran there is ATen's own, unrecorded)."""
    isa = set(record.get("cpu_isa") or ())
    if record["arch"] != "x86_64" or "avx512f" not in isa:
        return None
    if record["math_mode"] == "bf16":
        return "bf16 fast math" if "amx_bf16" in isa else "fp32"
    return "bf16" if {"avx512_bf16", "amx_bf16"} & isa else "bf16 emulated"


CASES = [  # framework, strategy, numerics
    ("tensorflow", "horovod", {"precision": "bf16"}),
    ("tensorflow", "horovod", {"math_mode": "bf16"}),
    ("pytorch", "horovod", {"precision": "bf16"}),
    ("pytorch", "horovod", {"math_mode": "bf16"}),
    ("pytorch", "ddp", {"precision": "bf16"}),
    ("pytorch", "ddp", {"math_mode": "bf16"}),
]


@pytest.mark.parametrize("framework, strategy, numerics", [
    pytest.param(*case, marks=[pytest.mark.horovod] if case[1] == "horovod" else [],
                 id=f"{case[0]}-{case[1]}-" + "-".join(f"{k}={v}" for k, v in case[2].items()))
    for case in CASES])
def test_two_ranks_run_and_record_a_bf16_request(tmp_path, framework, strategy, numerics):
    if strategy == "horovod":
        horovod_ready()
    require(shutil.which("mpirun") is not None, "mpirun")
    measurement = {**TINY, "framework": framework, "strategy": strategy, **numerics}
    r = launch(measurement, tmp_path)
    assert r["status"] == "ok", r["reason"]
    assert (r["framework"], r["strategy"], r["workers"]) == (framework, strategy, 2)
    asked = {"precision": "fp32", "math_mode": "strict", "graph": "eager", **numerics}
    assert {k: r[k] for k in asked} == asked
    # every measured step's loss, finite, of a step that trained
    assert len(r["losses"]) == TINY["measured_steps"]
    assert all(math.isfinite(loss) and loss > 0 for loss in r["losses"])
    # the allreduce kept the replicas identical
    assert r["metrics"]["replica_weight_spread"]["value"] == 0.0
    after = [np.load(tmp_path / "weights" / f"rank{k}.npz") for k in (0, 1)]
    assert all(np.array_equal(after[0][k], after[1][k]) for k in after[0].files)
    # the probe child ran the run's numerics, and the label compares them with what ran
    evidence = r["vendor_evidence"]
    assert evidence["error"] == "", evidence
    if evidence["library"] == "none":
        # bf16 tensors on a CPU without AVX-512 (an AVX2-only EPYC): no oneDNN primitive
        # ran, the framework's own kernels did, unseen by the probe, and the record says so
        assert expected_execution(r) is None and "precision" in numerics, evidence
        assert precision.record_precision_label(r) == "bf16 requested, not recorded"
        return
    assert evidence["library"] == "onednn", evidence
    for name in numerics:  # the probe's command line, e.g. "... --precision bf16 ..."
        assert f"--{name.replace('_', '-')} bf16" in evidence["settings"], evidence["settings"]
    if "math_mode" in numerics:
        assert "bf16" in evidence["fpmath"], evidence  # the hint reached oneDNN's primitives
    ran = precision.executed_precision(evidence)
    label = precision.record_precision_label(r)
    expected = expected_execution(r)
    if expected is not None:
        assert ran == expected, evidence
        assert label == {"bf16": "", "bf16 fast math": "", "fp32": "bf16 requested, fp32 executed",
                         "bf16 emulated": "bf16 requested, bf16 emulated"}[expected]


# Horovod's AMP recipe in HorovodTorchBackend.scaled_update, by 2 real ranks: each rank's
# own data, a loss scaler, and one step whose gradients overflow on rank 1 only
SCALED_UPDATE = """\
import sys, torch, horovod.torch as hvd
from archbench.workloads.training.pytorch.backends import HorovodTorchBackend
hvd.init()
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                               named_parameters=model.named_parameters())
backend = HorovodTorchBackend.__new__(HorovodTorchBackend)  # its update alone, no run
backend.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
x = torch.randn(8, 4, generator=torch.Generator().manual_seed(hvd.rank()))
scales = []
for step in range(3):
    opt.zero_grad()
    batch = x * 1e30 if (step == 1 and hvd.rank() == 1) else x  # overflows on rank 1 only
    backend.scaler.scale(model(batch).square().mean()).backward()
    before = [p.detach().clone() for p in model.parameters()]
    backend.scaled_update(opt)
    moved = any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
    scales.append((backend.scaler.get_scale(), moved))
w = torch.cat([p.detach().flatten() for p in model.parameters()]).unsqueeze(0)
identical = bool(torch.equal(*hvd.allgather(w)))
with open(f"{sys.argv[1]}/rank{hvd.rank()}.txt", "w") as out:  # not stdout: mpirun interleaves
    out.write(f"{scales} {identical}")
"""


@pytest.mark.horovod
def test_horovod_pytorch_loss_scaling_steps_on_the_averaged_gradients(tmp_path):
    """fp16's update under Horovod (GPUs only in a run, so checked here by itself on CPU
    tensors): the scaler reads the allreduced gradients, so an overflow on one rank skips
    the step and lowers the scale on every rank alike, and the replicas stay identical."""
    horovod_ready()
    import os
    import subprocess
    import sys
    root = ("--allow-run-as-root",) if os.geteuid() == 0 else ()
    script = tmp_path / "scaled_update.py"
    script.write_text(SCALED_UPDATE)
    done = subprocess.run(["mpirun", *root, "-np", "2", "--oversubscribe", "--bind-to", "none",
                           "-x", "PATH", "-x", "PYTHONPATH", sys.executable, str(script), str(tmp_path)],
                          capture_output=True, text=True, timeout=240,
                          env={**os.environ, "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [(tmp_path / f"rank{k}.txt").read_text() for k in (0, 1)]
    assert ranks[0] == ranks[1]  # the same scales, skips and weights on both ranks
    scales_and_moves, identical = ranks[0].rsplit(" ", 1)
    assert identical == "True"
    # step 0 trains at 1024; step 1 overflows (on rank 1 only) and is skipped by BOTH
    # ranks, the scale halved; step 2 trains again
    assert scales_and_moves == "[(1024.0, True), (512.0, False), (512.0, True)]"
