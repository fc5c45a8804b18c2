"""A language model trained by the worker (python -m archbench.train --model gpt_tiny): real
PyTorch steps of the GPT decoder, counted in tokens (tokens/s, metric tokens, model FLOPs
per token by PaLM's formula), AdamW stated, in one process and in two DDP ranks; the
sense and physical-bound checks in tokens; the bad settings refused in one line."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from archbench.core import metrics
from archbench.core.record import read_record
from archbench.workloads import sense
from archbench.workloads.training.models import GPT, LANGUAGE_MODELS, spec
from archbench.workloads.training.settings import TrainRun

TINY = ("--framework", "pytorch", "--model", "gpt_tiny", "--batch-per-process", "2",
        "--sequence-length", "32", "--warmup-steps", "1", "--steps", "3", "--intra-threads", "1")


def train(out, *extra: str, launcher: tuple[str, ...] = (), env: dict | None = None):
    argv = [*launcher, sys.executable, "-m", "archbench.train", *TINY, *extra, "--output", str(out)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def test_one_process_trains_gpt_tiny_in_tokens_per_second(tmp_path):
    done = train(tmp_path / "r.json", "--vendor-probe", "off")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "tokens/s" in done.stdout
    r = read_record(tmp_path / "r.json")
    assert (r["status"], r["model"], r["throughput_unit"]) == ("ok", "gpt_tiny", "tokens/s")
    assert (r["sequence_length"], r["image_size"]) == (32, None)
    assert r["config_id"].endswith("_pytorch_T32")
    m = r["metrics"]
    assert m["tokens"]["value"] == 2 * 32 * 3  # sequences x tokens x measured steps
    assert r["throughput"] == pytest.approx(m["tokens"]["value"] / m["window_s"]["value"])
    assert m["flops_per_token"]["value"] == GPT["gpt_tiny"].training_flops_per_token(32) == \
        metrics.model_flops_per_token(GPT["gpt_tiny"].parameters(position=False), layers=4, heads=4,
                                      head_width=64, sequence_length=32)
    assert m["optimizer"]["value"].startswith("AdamW betas (0.9, 0.95) weight_decay 0.1")
    assert r["loss_first"] > 9.0  # ln(50,304) = 10.8 at random weights
    assert m["peak_memory_per_rank"]["value"] > 100 * 2**20
    sense.check(r)
    # the same record claiming images, or twice its tokens, is refused with its reason
    assert "is not a language model's 'tokens/s'" in sense.problem({**r, "throughput_unit": "img/s"})
    assert "metrics.tokens / metrics.window_s" in sense.problem({**r, "throughput": 2 * r["throughput"]})
    bare = {**r, "metrics": {}, "step_times_s": [], "throughput": 1e9}
    assert "training FLOP/token (gpt_tiny, 6 N)" in sense.problem(bare)
    assert "physically impossible" in sense.problem(bare)


def test_bf16_states_what_executed(tmp_path):
    done = train(tmp_path / "r.json", "--precision", "bf16")
    assert done.returncode == 0, done.stderr[-2000:]
    r = read_record(tmp_path / "r.json")
    assert (r["status"], r["precision"]) == ("ok", "bf16")
    assert r["vendor_evidence"]["executed_precision"] in ("bf16", "bf16 emulated")
    sense.check(r)


def two_ranks(tmp_path, strategy: str, *extra: str) -> dict:
    """A two-rank run of ``strategy`` under mpirun, its record checked for sense, and the
    final weights of both ranks (``--weights-out``), which must agree and have trained."""
    import numpy as np

    from archbench.workloads.training.strategies.ddp import ADDRESS, free_port
    root = ("--allow-run-as-root",) if os.geteuid() == 0 else ()
    launcher = ("mpirun", *root, "-np", "2", "--oversubscribe", "--bind-to", "none",
                "-x", "PATH", "-x", "PYTHONPATH", "-x", ADDRESS)
    done = train(tmp_path / "r.json", "--strategy", strategy, "--processes-per-node", "2",
                 "--vendor-probe", "off", "--weights-out", str(tmp_path / "w"), *extra,
                 launcher=launcher, env={ADDRESS: f"127.0.0.1:{free_port()}"})
    assert done.returncode == 0, done.stderr[-3000:]
    r = read_record(tmp_path / "r.json")
    assert (r["status"], r["strategy"], r["workers"], r["global_batch"]) == ("ok", strategy, 2, 4)
    assert r["metrics"]["tokens"]["value"] == 2 * 2 * 32 * 3  # both ranks' tokens, one window
    after = [np.load(tmp_path / "w" / f"rank{k}.npz") for k in (0, 1)]
    before = np.load(tmp_path / "w" / "init-rank0.npz")
    assert all(np.array_equal(after[0][k], after[1][k]) for k in after[0].files)
    assert any(not np.array_equal(after[0][k], before[k]) for k in before.files)  # it trained
    assert r["metrics"]["peak_memory_per_rank"]["value"] > 100 * 2**20  # torch alone is more
    sense.check(r)
    return r


needs_mpirun = pytest.mark.skipif(not shutil.which("mpirun"), reason="needs OpenMPI (scripts/setup_env.sh)")


@needs_mpirun
def test_two_ddp_ranks_count_the_tokens_of_both(tmp_path):
    r = two_ranks(tmp_path, "ddp")
    assert r["metrics"]["replica_weight_spread"]["value"] == 0.0
    assert r["metrics"]["ddp_backend"]["value"] == "gloo"


@needs_mpirun
@pytest.mark.parametrize("reshard", ["on", "off"])
def test_two_fsdp2_ranks_shard_the_parameters(tmp_path, reshard):
    r = two_ranks(tmp_path, "fsdp2", "--reshard-after-forward", reshard)
    m = r["metrics"]
    assert (m["fsdp_backend"]["value"], m["reshard_after_forward"]["value"]) == ("gloo", reshard)
    # each rank holds half of every parameter (the tied embedding once), in fp32
    assert m["parameter_shard_bytes"]["value"] == pytest.approx(GPT["gpt_tiny"].parameters() * 4 / 2, rel=1e-3)
    assert "replica_weight_spread" not in m  # no replicas: each parameter lives once


def test_tensorflow_has_no_fsdp2(tmp_path):
    done = subprocess.run([sys.executable, "-m", "archbench.train", "--framework", "tensorflow",
                           "--model", "small_cnn", "--batch-per-process", "2", "--strategy", "fsdp2",
                           "--output", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "framework tensorflow has no strategy 'fsdp2'" in done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(("settings", "message"), [
    (dict(model="gpt_tiny", sequence_length=257), "--sequence-length 257 is above the context of model "
                                                  "'gpt_tiny' (256 tokens)"),
    (dict(model="resnet50", sequence_length=64), "--sequence-length: model 'resnet50' takes images, not "
                                                 "token sequences"),
    (dict(model="gpt_tiny", sequence_length=0), "--sequence-length must be >= 1"),
])
def test_a_sequence_length_the_model_cannot_take_is_refused(settings, message):
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        TrainRun(batch_per_process=2, output="r.json", **settings)


def test_tensorflow_refuses_a_language_model_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "archbench.train", "--framework", "tensorflow",
                           "--model", "gpt_tiny", "--batch-per-process", "2", "--output",
                           str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        "framework tensorflow has no model 'gpt_tiny' (it has: " + ", ".join(
            n for n in __import__("archbench.workloads.training.models", fromlist=["MODELS"]).MODELS) + ")")


def test_language_models_default_to_their_context_and_count_tokens():
    for name, model in LANGUAGE_MODELS.items():
        run = TrainRun(model=name, batch_per_process=1, output="r.json")
        assert (run.sequence_length, run.image_size, run.num_classes) == (GPT[name].context, None, 50_304)
        assert spec(name).unit == "tokens/s" and model.input == "tokens"
    assert spec("resnet50").unit == "img/s"
    assert TrainRun(model="resnet50", batch_per_process=1, output="r.json").sequence_length is None
