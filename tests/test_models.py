"""Models: registry, building in both layouts, FLOP counts against published values."""

from __future__ import annotations

import numpy as np
import pytest

from archbench.workloads.training.models import MODELS
from archbench.workloads.training.tensorflow import models as tf_models
from archbench.workloads.training.tensorflow.models import build_model, forward_flops, training_flops

STUDY_MODELS = ("alexnet", "vgg16", "resnet50", "resnet101", "resnet152", "inception_v3",
                "inception_v4", "small_cnn", "digits_cnn")


def test_every_model_of_the_studies_is_registered():
    assert set(STUDY_MODELS) <= set(MODELS)
    for name, spec in MODELS.items():
        assert spec.min_image_size <= spec.native_image_size, name
        assert spec.dataset in ("imagenet", "digits")


def test_schema_lists_exactly_the_registered_models():
    from archbench.plan.campaign import experiment_schema
    defs = experiment_schema()["$defs"]
    assert defs["training"]["properties"]["models"]["items"] == {"$ref": "#/$defs/model_name"}
    assert set(defs["model_name"]["enum"]) == set(MODELS)


# the published forward multiply-adds x 2 (He et al. 2016 Table 1; Szegedy et al.)
PUBLISHED_GFLOPS = {"resnet50": 7.7, "inception_v3": 11.5, "inception_v4": 24.6}


@pytest.mark.parametrize("name", ["resnet50", "inception_v3", "inception_v4"])
def test_counted_flops_match_published_and_declared_values(name):
    spec = MODELS[name]
    model = build_model(name, spec.native_image_size, 1000)
    gflops = forward_flops(model) / 1e9
    assert gflops == pytest.approx(PUBLISHED_GFLOPS[name], rel=0.03)
    assert spec.forward_gflops <= gflops <= 1.01 * spec.forward_gflops  # declared: rounded down
    assert training_flops(model) == pytest.approx(3 * forward_flops(model))


def test_inception_v4_has_the_published_size():
    model = build_model("inception_v4", 75, 1000)
    assert model.output_shape == (None, 1000)
    assert model.count_params() == pytest.approx(42.7e6, rel=0.01)


def test_small_models_train_one_step_and_give_logits():
    import tensorflow as tf
    for name, size, classes in (("small_cnn", 32, 10), ("digits_cnn", 8, 10), ("alexnet", 64, 7)):
        model = build_model(name, size, classes)
        x = np.random.default_rng(0).random((2, *model.input_shape[1:]), dtype=np.float32)
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            loss = tf.reduce_mean(out ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        assert out.shape == (2, classes)
        assert all(g is not None for g in grads)


def test_digits_cnn_takes_one_grey_channel():
    assert build_model("digits_cnn", 8, 10).input_shape == (None, 8, 8, 1)
    assert build_model("digits_cnn", 16, 10).input_shape == (None, 16, 16, 1)


def test_nchw_builds_channels_first_with_the_same_flops():
    nhwc = build_model("resnet50", 32, 10)
    nchw = build_model("resnet50", 32, 10, data_format="NCHW")
    assert nchw.input_shape == (None, 3, 32, 32)
    assert forward_flops(nchw) == forward_flops(nhwc)
    from archbench.workloads.training.tensorflow.models import keras
    assert keras().backend.image_data_format() == "channels_last"  # restored


def test_flops_scale_with_image_size_and_are_cached():
    small = tf_models.training_flops_per_image("small_cnn", 32)
    assert tf_models.training_flops_per_image("small_cnn", 64) > 3.5 * small
    assert tf_models.training_flops_per_image("small_cnn", 32) == small


def test_flops_of_a_tiny_network_by_hand():
    k = tf_models.keras()
    net = k.Sequential([k.layers.Input((4, 4, 2)), k.layers.Conv2D(3, 3, padding="same"),
                        k.layers.Flatten(), k.layers.Dense(5)])
    conv = 2 * 4 * 4 * 3 * 3 * 3 * 2
    dense = 2 * 48 * 5
    assert forward_flops(net) == conv + dense


@pytest.mark.parametrize("name,size,message", [
    ("nonesuch", 32, "unknown model"), ("alexnet", 32, "image_size >= 64"),
    ("inception_v4", 64, "image_size >= 75")])
def test_bad_requests_fail_clearly(name, size, message):
    with pytest.raises(ValueError, match=message):
        build_model(name, size, 10)


def test_data_format_probe():
    import tensorflow as tf
    tf_models.check_data_format(tf, "NHWC")
    with pytest.raises(tf_models.DataFormatError, match="unknown data format"):
        tf_models.check_data_format(tf, "HWCN")
