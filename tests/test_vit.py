"""Vision Transformers (vit_tiny, vit_b16): one network in both frameworks (timm's in
PyTorch, written in Keras), by parameter count, by FLOP count against the declared one, and
by output on the same weights; the documented parameter counts are what the code builds;
a real bf16 run and a real compiled run train."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from archbench.core.record import read_record
from archbench.workloads.training.models import MODELS, VIT, least_training_flops
from archbench.workloads.training.pytorch import models as torch_models
from archbench.workloads.training.tensorflow import models as tf_models

VITS = ("vit_tiny", "vit_b16")


def keras_parameters(model) -> int:
    return sum(v.shape.num_elements() for v in model.trainable_variables)


def by_formula(name: str, image_size: int, classes: int) -> int:
    """ViT parameters: patch embedding, class token, positions, blocks, final norm, head."""
    s = VIT[name]
    d, tokens = s.width, (image_size // s.patch) ** 2
    block = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 2 * d + 2 * s.mlp * d * d + s.mlp * d + d
    return 3 * s.patch ** 2 * d + d + d + (tokens + 1) * d + s.depth * block + 2 * d + d * classes + classes


@pytest.mark.parametrize("name", VITS)
def test_both_frameworks_build_the_documented_network_with_the_declared_flops(name):
    spec = MODELS[name]
    size, classes = spec.native_image_size, spec.num_classes
    keras_model = tf_models.build_model(name, size, classes)
    torch_model = torch_models.build_model(name, size, classes)
    parameters = by_formula(name, size, classes)
    assert keras_parameters(keras_model) == torch_models.parameter_count(torch_model) == parameters
    text = (Path(__file__).resolve().parents[1] / "docs/frameworks.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith(f"| {name} |"))
    assert [int(c.strip().replace(",", "")) for c in row.split("|")[2:4]] == [parameters] * 2
    keras_gflops = tf_models.forward_flops(keras_model) / 1e9
    torch_gflops = torch_models.training_flops(torch_model, (3, size, size)) / 3e9
    assert keras_gflops == pytest.approx(torch_gflops, rel=1e-9)
    assert spec.forward_gflops <= keras_gflops <= 1.01 * spec.forward_gflops  # declared: rounded down


def test_vit_b16_is_the_published_size():
    """ViT-B/16: 86 M parameters (Dosovitskiy et al. 2021, Table 1), timm's 86.6 M."""
    assert by_formula("vit_b16", 224, 1000) == 86_567_656


@pytest.mark.parametrize("size", [4, 8, 16, 28, 64])
def test_the_declared_bound_never_exceeds_the_counted_flops(size):
    model = tf_models.build_model("vit_tiny", size, 1000)
    assert 0 < least_training_flops("vit_tiny", size) <= tf_models.training_flops(model)


def test_keras_and_timm_compute_the_same_function_on_the_same_weights():
    """timm's parameters copied into the Keras network in order give the same logits."""
    import torch
    torch.manual_seed(0)
    torch_model = torch_models.build_model("vit_tiny", 8, 10).eval()
    keras_model = tf_models.build_model("vit_tiny", 8, 10)
    params = dict(torch_model.named_parameters())
    ordered = [params.pop("patch_embed.proj.weight").permute(2, 3, 1, 0), params.pop("patch_embed.proj.bias"),
               params.pop("cls_token"), params.pop("pos_embed")]
    ordered += [p.t() if p.dim() == 2 else p for p in params.values()]  # Linear: (out, in)
    assert len(ordered) == len(keras_model.trainable_variables)
    for variable, value in zip(keras_model.trainable_variables, ordered):
        variable.assign(value.detach().numpy())
    images = np.random.default_rng(1).standard_normal((3, 8, 8, 3)).astype(np.float32)
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(images).permute(0, 3, 1, 2)).numpy()
    got = keras_model(images, training=False).numpy()
    assert np.abs(expected).max() > 1e-3  # not trivially zero
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_channels_first_builds_the_same_network():
    nchw = tf_models.build_model("vit_tiny", 16, 10, data_format="NCHW")
    nhwc = tf_models.build_model("vit_tiny", 16, 10)
    assert nchw.input_shape == (None, 3, 16, 16) and nchw.output_shape == (None, 10)
    assert keras_parameters(nchw) == keras_parameters(nhwc)
    assert tf_models.forward_flops(nchw) == tf_models.forward_flops(nhwc)


@pytest.mark.parametrize("build", [tf_models.build_model, torch_models.build_model],
                         ids=["tensorflow", "pytorch"])
def test_an_image_size_off_the_patch_grid_fails_clearly(build):
    with pytest.raises(ValueError, match="multiple of its 16-pixel patch, not 200"):
        build("vit_b16", 200, 10)
    with pytest.raises(ValueError, match="image_size >= 4"):
        build("vit_tiny", 2, 10)


# a real run per framework: bf16 in PyTorch (the eager step under autocast), and bf16 and
# XLA together in TensorFlow (the Keras layers written here under mixed_bfloat16, compiled)
RUNS = {"pytorch": ["--precision", "bf16"], "tensorflow": ["--precision", "bf16", "--graph", "compiled"]}


@pytest.mark.parametrize("framework", sorted(RUNS))
def test_vit_tiny_trains_for_real_in_bf16(tmp_path, framework):
    argv = [sys.executable, "-m", "archbench.train", "--framework", framework, "--model", "vit_tiny",
            "--batch-per-process", "4", "--image-size", "8", "--num-classes", "10",
            "--warmup-steps", "1", "--steps", "2", "--intra-threads", "1", "--vendor-probe", "off",
            *RUNS[framework], "--output", str(tmp_path / "r.json")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    r = read_record(tmp_path / "r.json")
    assert (r["status"], r["model"], r["precision"]) == ("ok", "vit_tiny", "bf16")
    assert r["graph"] == ("compiled" if "compiled" in RUNS[framework] else "eager")
    assert len(r["losses"]) == 2 and all(np.isfinite(r["losses"]))
    assert r["metrics"]["flops_per_image"]["value"] >= least_training_flops("vit_tiny", 8)
