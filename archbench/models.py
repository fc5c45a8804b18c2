"""CNN models for the training benchmark, built with legacy Keras (tf_keras).

Every model is registered in MODELS with a builder and its forward FLOPs per image at
224x224 (multiply-add = 2 FLOPs); training FLOPs per image are 3x forward (forward +
backward w.r.t. activations and weights), scaled by (image_size / 224)^2.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def keras():
    """The legacy Keras module (tf_keras): Horovod and multi-worker strategies need it."""
    import tf_keras
    return tf_keras


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: builder(input_shape, num_classes) and forward GFLOPs at 224x224."""

    build: Callable
    forward_gflops_224: float
    min_image_size: int = 32


def _small_cnn(input_shape, num_classes):
    k = keras()
    return k.Sequential([
        k.layers.Input(shape=input_shape),
        k.layers.Conv2D(16, 3, activation="relu"),
        k.layers.MaxPooling2D(),
        k.layers.Conv2D(32, 3, activation="relu"),
        k.layers.GlobalAveragePooling2D(),
        k.layers.Dense(num_classes),
    ], name="small_cnn")


def _alexnet(input_shape, num_classes):
    """AlexNet as in tf_cnn_benchmarks (one tower, no LRN, 4096-wide dense layers)."""
    k = keras()
    L = k.layers
    return k.Sequential([
        L.Input(shape=input_shape),
        L.Conv2D(64, 11, strides=4, padding="same", activation="relu"),
        L.MaxPooling2D(3, 2),
        L.Conv2D(192, 5, padding="same", activation="relu"),
        L.MaxPooling2D(3, 2),
        L.Conv2D(384, 3, padding="same", activation="relu"),
        L.Conv2D(384, 3, padding="same", activation="relu"),
        L.Conv2D(256, 3, padding="same", activation="relu"),
        L.MaxPooling2D(3, 2),
        L.Flatten(),
        L.Dense(4096, activation="relu"),
        L.Dropout(0.5),
        L.Dense(4096, activation="relu"),
        L.Dropout(0.5),
        L.Dense(num_classes),
    ], name="alexnet")


def _application(name):
    def build(input_shape, num_classes):
        app = getattr(keras().applications, name)
        return app(weights=None, input_shape=input_shape, classes=num_classes,
                   classifier_activation=None)
    return build


MODELS: dict[str, ModelSpec] = {
    "small_cnn": ModelSpec(_small_cnn, 0.005, 8),
    "alexnet": ModelSpec(_alexnet, 1.43, 64),
    "resnet50": ModelSpec(_application("ResNet50"), 8.2, 32),
}


def build_model(name: str, image_size: int, num_classes: int, channels: int = 3):
    """Build ``name`` for square ``image_size`` inputs (NHWC) with ``num_classes`` logits."""
    if name not in MODELS:
        raise ValueError(f"unknown model '{name}' (known: {', '.join(sorted(MODELS))})")
    spec = MODELS[name]
    if image_size < spec.min_image_size:
        raise ValueError(f"model '{name}' needs image_size >= {spec.min_image_size}")
    return spec.build((image_size, image_size, channels), num_classes)


def training_flops_per_image(name: str, image_size: int) -> float:
    """Training FLOPs per image: 3 x forward FLOPs at 224, scaled by (image_size/224)^2."""
    return 3 * MODELS[name].forward_gflops_224 * 1e9 * (image_size / 224) ** 2
