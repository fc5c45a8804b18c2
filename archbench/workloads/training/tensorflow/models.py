"""TensorFlow's networks of the training benchmark's models, built with legacy Keras
(tf_keras): one builder per name of :data:`archbench.workloads.training.models.MODELS` in
:data:`BUILDERS`.

Its training FLOPs per image are counted from the
built network (:func:`forward_flops`): multiply-add = 2 FLOPs in every convolution and
dense layer (batch norm, activations and pooling are not counted, as in the papers'
GFLOPs, which mostly count multiply-adds and call them FLOPs: ResNet-50's "3.8 x 10^9
FLOPs" are 7.7 GFLOPs here), and one training step = 3 x forward (forward, gradients
w.r.t. activations and w.r.t. weights). The count is exact for the input size used, so
it holds for reduced image sizes too.

Each model also *declares* its forward GFLOPs at its native input size
(``ModelSpec.forward_gflops``, the shared contract); tests check the declared numbers
against the ones counted here.

Layouts: NHWC (``channels_last``) is the default; NCHW (``channels_first``) builds the
same network with the channel axis first. TensorFlow's plain CPU kernels do not run
NCHW convolutions; :func:`check_data_format` probes the backend and fails clearly.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Callable

from archbench.workloads.tfenv import use_framework_env
from archbench.workloads.training import models as shared_models
from archbench.workloads.training.models import DATA_FORMATS, VIT, check_image_size, input_shape, spec

use_framework_env()  # before anything imports TensorFlow: tf_keras, not Keras 3



class DataFormatError(RuntimeError):
    """The requested tensor layout is not supported by this TensorFlow backend."""


def keras():
    """The legacy Keras module (tf_keras): Horovod and multi-worker strategies need it."""
    import tf_keras
    return tf_keras


def _bn_axis() -> int:
    return 1 if keras().backend.image_data_format() == "channels_first" else -1


def _small_cnn(input_shape, num_classes):
    """Two convolutions and a classifier: the quick model of tests and smoke runs."""
    k = keras()
    return k.Sequential([
        k.layers.Input(shape=input_shape),
        k.layers.Conv2D(16, 3, activation="relu"),
        k.layers.MaxPooling2D(),
        k.layers.Conv2D(32, 3, activation="relu"),
        k.layers.GlobalAveragePooling2D(),
        k.layers.Dense(num_classes),
    ], name="small_cnn")


def _digits_cnn(input_shape, num_classes):
    """An MNIST-class CNN for 8x8 (or larger) grey digits (docs/experiments.md, experiment 8)."""
    k = keras()
    L = k.layers
    return k.Sequential([
        L.Input(shape=input_shape),
        L.Conv2D(32, 3, padding="same", activation="relu"),
        L.Conv2D(32, 3, padding="same", activation="relu"),
        L.MaxPooling2D(),
        L.Conv2D(64, 3, padding="same", activation="relu"),
        L.Flatten(),
        L.Dense(64, activation="relu"),
        L.Dense(num_classes),
    ], name="digits_cnn")


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
    build.__doc__ = f"keras.applications.{name} (random weights, logits)."
    return build


# ---- Inception-v4 (Szegedy et al. 2016, Figures 3-8); not in keras.applications ----

def _conv_bn(x, filters: int, kernel: tuple[int, int], *, strides: int = 1, padding: str = "same"):
    L = keras().layers
    x = L.Conv2D(filters, kernel, strides=strides, padding=padding, use_bias=False)(x)
    x = L.BatchNormalization(axis=_bn_axis(), scale=False)(x)
    return L.Activation("relu")(x)


def _concat(branches):
    return keras().layers.Concatenate(axis=_bn_axis())(branches)


def _v4_stem(x):
    L = keras().layers
    x = _conv_bn(x, 32, (3, 3), strides=2, padding="valid")
    x = _conv_bn(x, 32, (3, 3), padding="valid")
    x = _conv_bn(x, 64, (3, 3))
    x = _concat([L.MaxPooling2D(3, 2, padding="valid")(x),
                 _conv_bn(x, 96, (3, 3), strides=2, padding="valid")])
    a = _conv_bn(_conv_bn(x, 64, (1, 1)), 96, (3, 3), padding="valid")
    b = _conv_bn(x, 64, (1, 1))
    b = _conv_bn(_conv_bn(b, 64, (7, 1)), 64, (1, 7))
    b = _conv_bn(b, 96, (3, 3), padding="valid")
    x = _concat([a, b])
    return _concat([_conv_bn(x, 192, (3, 3), strides=2, padding="valid"),
                    L.MaxPooling2D(3, 2, padding="valid")(x)])


def _v4_a(x):
    L = keras().layers
    pool = _conv_bn(L.AveragePooling2D(3, 1, padding="same")(x), 96, (1, 1))
    one = _conv_bn(x, 96, (1, 1))
    three = _conv_bn(_conv_bn(x, 64, (1, 1)), 96, (3, 3))
    double = _conv_bn(_conv_bn(_conv_bn(x, 64, (1, 1)), 96, (3, 3)), 96, (3, 3))
    return _concat([pool, one, three, double])


def _v4_reduction_a(x):
    L = keras().layers
    a = _conv_bn(x, 384, (3, 3), strides=2, padding="valid")
    b = _conv_bn(_conv_bn(x, 192, (1, 1)), 224, (3, 3))
    b = _conv_bn(b, 256, (3, 3), strides=2, padding="valid")
    return _concat([L.MaxPooling2D(3, 2, padding="valid")(x), a, b])


def _v4_b(x):
    L = keras().layers
    pool = _conv_bn(L.AveragePooling2D(3, 1, padding="same")(x), 128, (1, 1))
    one = _conv_bn(x, 384, (1, 1))
    seven = _conv_bn(_conv_bn(_conv_bn(x, 192, (1, 1)), 224, (1, 7)), 256, (7, 1))
    d = _conv_bn(_conv_bn(x, 192, (1, 1)), 192, (1, 7))
    d = _conv_bn(_conv_bn(_conv_bn(d, 224, (7, 1)), 224, (1, 7)), 256, (7, 1))
    return _concat([pool, one, seven, d])


def _v4_reduction_b(x):
    L = keras().layers
    a = _conv_bn(_conv_bn(x, 192, (1, 1)), 192, (3, 3), strides=2, padding="valid")
    b = _conv_bn(_conv_bn(_conv_bn(x, 256, (1, 1)), 256, (1, 7)), 320, (7, 1))
    b = _conv_bn(b, 320, (3, 3), strides=2, padding="valid")
    return _concat([L.MaxPooling2D(3, 2, padding="valid")(x), a, b])


def _v4_c(x):
    L = keras().layers
    pool = _conv_bn(L.AveragePooling2D(3, 1, padding="same")(x), 256, (1, 1))
    one = _conv_bn(x, 256, (1, 1))
    s = _conv_bn(x, 384, (1, 1))
    split = _concat([_conv_bn(s, 256, (1, 3)), _conv_bn(s, 256, (3, 1))])
    d = _conv_bn(_conv_bn(_conv_bn(x, 384, (1, 1)), 448, (3, 1)), 512, (1, 3))
    double = _concat([_conv_bn(d, 256, (1, 3)), _conv_bn(d, 256, (3, 1))])
    return _concat([pool, one, split, double])


def _inception_v4(input_shape, num_classes):
    """Inception-v4: stem, 4 x A, reduction A, 7 x B, reduction B, 3 x C, classifier."""
    k = keras()
    inputs = k.layers.Input(shape=input_shape)
    x = _v4_stem(inputs)
    for _ in range(4):
        x = _v4_a(x)
    x = _v4_reduction_a(x)
    for _ in range(7):
        x = _v4_b(x)
    x = _v4_reduction_b(x)
    for _ in range(3):
        x = _v4_c(x)
    x = k.layers.GlobalAveragePooling2D()(x)
    x = k.layers.Dropout(0.2)(x)
    return k.Model(inputs, k.layers.Dense(num_classes)(x), name="inception_v4")


# ---- Vision Transformers, layer for layer as timm's VisionTransformer ----

@lru_cache(maxsize=None)
def transformer_layers():
    """The two layers of a transformer Keras lacks: a ViT's class token with position
    embedding, and multi-head self-attention from one fused q/k/v projection (timm's
    layout; causal for a decoder, :mod:`.gpt`)."""
    import tensorflow as tf
    k = keras()

    class ClassTokenPosition(k.layers.Layer):
        """Prepends the learned class token and adds the learned position embeddings."""

        def build(self, shape):
            tokens, width = shape[1], shape[2]
            self.cls_token = self.add_weight(
                name="cls_token", shape=(1, 1, width),
                initializer=k.initializers.RandomNormal(stddev=1e-6))
            self.pos_embed = self.add_weight(
                name="pos_embed", shape=(1, tokens + 1, width),
                initializer=k.initializers.TruncatedNormal(stddev=0.02))

        def call(self, x):
            cls = tf.broadcast_to(tf.cast(self.cls_token, x.dtype), [tf.shape(x)[0], 1, x.shape[-1]])
            return tf.concat([cls, x], axis=1) + tf.cast(self.pos_embed, x.dtype)

        def compute_output_shape(self, shape):
            return (shape[0], shape[1] + 1, shape[2])

    class SelfAttention(k.layers.Layer):
        """softmax(q k^T / sqrt(d)) v per head, from q/k/v (batch, tokens, 3 x width);
        ``causal``: each token attends to itself and those before it only (a decoder's)."""

        def __init__(self, heads: int, causal: bool = False, **kwargs):
            super().__init__(**kwargs)
            self.heads, self.causal = heads, causal

        def call(self, qkv):
            width = qkv.shape[-1] // 3
            head = width // self.heads
            tokens = tf.shape(qkv)[1]
            qkv = tf.transpose(tf.reshape(qkv, [-1, tokens, 3, self.heads, head]), [2, 0, 3, 1, 4])
            scores = tf.matmul(qkv[0], qkv[1], transpose_b=True) * (head ** -0.5)
            if self.causal:  # masked before the softmax at the dtype's most negative finite scale
                seen = tf.linalg.band_part(tf.ones([tokens, tokens], dtype=tf.bool), -1, 0)
                scores = tf.where(seen, scores, tf.cast(-1e9 if scores.dtype == tf.float32 else -3e4,
                                                        scores.dtype))
            out = tf.matmul(tf.nn.softmax(scores, axis=-1), qkv[2])
            return tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [-1, tokens, width])

        def compute_output_shape(self, shape):
            return (shape[0], shape[1], shape[2] // 3)

        def get_config(self):
            return {**super().get_config(), "heads": self.heads, "causal": self.causal}

    return ClassTokenPosition, SelfAttention


def _vit(name: str) -> Callable:
    def build(input_shape, num_classes):
        k = keras()
        L = k.layers
        shape = VIT[name]
        ClassTokenPosition, SelfAttention = transformer_layers()

        def dense(units: int, **options):  # timm's initialisation: one initializer per layer
            return L.Dense(units, kernel_initializer=k.initializers.TruncatedNormal(stddev=0.02),
                           **options)
        norm = dict(epsilon=1e-6)  # timm's ViT layer norms
        inputs = L.Input(shape=input_shape)
        x = L.Conv2D(shape.width, shape.patch, strides=shape.patch, name="patch_embed")(inputs)
        grid = x.shape[1] * x.shape[2] if _bn_axis() == -1 else x.shape[2] * x.shape[3]
        if _bn_axis() == -1:
            x = L.Reshape((grid, shape.width))(x)
        else:
            x = L.Permute((2, 1))(L.Reshape((shape.width, grid))(x))
        x = ClassTokenPosition(name="cls_pos_embed")(x)
        for i in range(shape.depth):
            y = L.LayerNormalization(**norm, name=f"block{i}_norm1")(x)
            y = dense(3 * shape.width, name=f"block{i}_qkv")(y)
            y = SelfAttention(shape.heads, name=f"block{i}_attn")(y)
            x = L.Add()([x, dense(shape.width, name=f"block{i}_proj")(y)])
            y = L.LayerNormalization(**norm, name=f"block{i}_norm2")(x)
            y = dense(shape.mlp * shape.width, activation="gelu", name=f"block{i}_fc1")(y)
            x = L.Add()([x, dense(shape.width, name=f"block{i}_fc2")(y)])
        x = L.LayerNormalization(**norm, name="norm")(x)
        x = x[:, 0]  # the class token
        return k.Model(inputs, dense(num_classes, name="head")(x), name=name)
    build.__doc__ = (f"{name}: timm's VisionTransformer ({VIT[name].timm}'s layout, "
                     "exact GELU, layer norms with epsilon 1e-6), written in Keras.")
    return build


# the Keras network of each model of archbench.workloads.training.models.MODELS
BUILDERS: dict[str, Callable] = {
    "small_cnn": _small_cnn,
    "digits_cnn": _digits_cnn,
    "alexnet": _alexnet,
    "vgg16": _application("VGG16"),
    "resnet50": _application("ResNet50"),
    "resnet101": _application("ResNet101"),
    "resnet152": _application("ResNet152"),
    "inception_v3": _application("InceptionV3"),
    "inception_v4": _inception_v4,
    "vit_tiny": _vit("vit_tiny"),
    "vit_b16": _vit("vit_b16"),
}


def build_model(name: str, image_size: int, num_classes: int, *, channels: int | None = None,
                data_format: str = "NHWC"):
    """Build ``name`` for square ``image_size`` inputs with ``num_classes`` logits.

    ``channels`` defaults to the model's (3, or 1 for digits_cnn); ``data_format`` is
    NHWC or NCHW (the whole network is built in that layout).
    """
    if data_format not in DATA_FORMATS:
        raise ValueError(f"data_format must be NHWC or NCHW, not '{data_format}'")
    check_image_size(name, image_size)
    backend = keras().backend
    previous = backend.image_data_format()
    backend.set_image_data_format(DATA_FORMATS[data_format])
    try:
        return BUILDERS[name](input_shape(name, image_size, data_format, channels=channels), num_classes)
    finally:
        backend.set_image_data_format(previous)


def _layers(model):
    for layer in model.layers:
        if hasattr(layer, "layers"):  # nested model
            yield from _layers(layer)
        else:
            yield layer


def forward_flops(model) -> float:
    """Forward FLOPs of one image through ``model``: 2 x multiply-adds of its Conv2D and
    Dense layers (the convention of the published GFLOPs)."""
    k = keras()
    total = 0.0
    for layer in _layers(model):
        if isinstance(layer, k.layers.Conv2D):  # includes Conv2DTranspose/Depthwise subclasses
            out = layer.output_shape
            spatial = out[2] * out[3] if layer.data_format == "channels_first" else out[1] * out[2]
            cout = out[1] if layer.data_format == "channels_first" else out[-1]
            kh, kw, cin_per_group, _ = layer.kernel.shape
            if isinstance(layer, k.layers.DepthwiseConv2D):
                cin_per_group = 1
            total += 2.0 * spatial * cout * kh * kw * cin_per_group
        elif isinstance(layer, k.layers.Dense):
            fan_in, units = layer.kernel.shape
            positions = 1
            for d in layer.output_shape[1:-1]:
                positions *= d
            total += 2.0 * positions * fan_in * units
    return total


def training_flops(model) -> float:
    """Training FLOPs per image of a built model: 3 x :func:`forward_flops`."""
    return 3.0 * forward_flops(model)


@lru_cache(maxsize=None)
def training_flops_per_image(name: str, image_size: int, num_classes: int | None = None) -> float:
    """Training FLOPs per image of model ``name`` at ``image_size`` (builds it once, cached)."""
    model = build_model(name, image_size, num_classes or spec(name).num_classes)
    return training_flops(model)


def least_training_flops(name: str, image_size: int) -> float:
    """A lower bound of the training FLOPs per image of the Keras network ``name`` at
    ``image_size``: the shared model's declared count (the Keras one), scaled
    (:func:`archbench.workloads.training.models.least_training_flops`)."""
    return shared_models.least_training_flops(name, image_size)


def check_data_format(tf, data_format: str) -> None:
    """Raise DataFormatError if this backend cannot train convolutions in ``data_format``.

    Runs one tiny convolution, pooling and fused batch norm step (with gradients) in the
    layout; TensorFlow's plain CPU kernels support only NHWC, oneDNN also runs NCHW.
    """
    if data_format == "NHWC":
        return
    if data_format != "NCHW":
        raise DataFormatError(f"unknown data format '{data_format}' (NHWC or NCHW)")
    x = tf.random.uniform((2, 4, 8, 8))
    w = tf.Variable(tf.random.uniform((3, 3, 4, 4)))

    @tf.function
    def probe():
        with tf.GradientTape() as tape:
            y = tf.nn.conv2d(x, w, 1, "SAME", data_format="NCHW")
            y, _, _ = tf.compat.v1.nn.fused_batch_norm(
                y, tf.ones(4), tf.zeros(4), data_format="NCHW", is_training=True)
            y = tf.nn.max_pool2d(y, 2, 2, "VALID", data_format="NCHW")
            y = tf.nn.avg_pool2d(y, 2, 2, "VALID", data_format="NCHW")
            loss = tf.reduce_sum(y)
        return tape.gradient(loss, w)

    try:
        probe()
    except Exception as exc:  # noqa: BLE001 - any kernel error means "not supported"
        lines = [x.strip() for x in str(exc).splitlines() if x.strip()] or [""]
        first = next((x for x in lines if "NHWC" in x or "only supports" in x), lines[-1])
        raise DataFormatError(
            "data format NCHW is not supported by this TensorFlow CPU backend "
            f"(oneDNN {os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'default')}): "
            f"{type(exc).__name__}: {first[:200]}") from exc
