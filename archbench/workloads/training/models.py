"""The models of the training benchmark, as every framework knows them: one
:class:`ModelSpec` per name in :data:`MODELS` (native image size, classes, channels, real
dataset, learning rate and declared forward GFLOPs). Each framework's package builds the
network of each name (its ``models`` module, :attr:`Framework.models
<archbench.workloads.training.frameworks.Framework.models>`), and counts its FLOPs.

The declared ``forward_gflops`` let a record be checked without building a network
(:func:`least_training_flops`, the physical bound of ``archbench.workloads.ceiling``);
tests check the declared numbers against the counted ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archbench.core import metrics

DATA_FORMATS = {"NHWC": "channels_last", "NCHW": "channels_first"}


@dataclass(frozen=True)
class ModelSpec:
    """A registered model, the same in every framework (each framework's ``models``
    module builds the network by this name).

    ``dataset`` names the real data it trains on (``imagenet``: TFRecords of the system's
    data_dir, ``digits``: scikit-learn's bundled digits); ``learning_rate`` is the default
    SGD learning rate of a run.

    ``forward_gflops`` is the forward GFLOPs (2 per multiply-add) of one image at
    ``native_image_size`` as the Keras network's layers count it, rounded down
    (the published figure where the network is the published one). ``stride`` and
    ``border`` give the side of the last feature grid, ``(image_size - border) // stride``:
    the network's total downsampling and the pixels its unpadded ("valid") layers lose,
    so that :func:`least_training_flops` scales the declared count down to smaller images
    without ever exceeding the counted one. ``patch`` is the side every image side must be
    a multiple of (a Vision Transformer's patch; 1 for the convolutional networks).
    """

    min_image_size: int = 1
    native_image_size: int | None = 224
    num_classes: int = 1000
    channels: int = 3
    dataset: str = "imagenet"
    learning_rate: float = 0.01
    stride: int = 32
    border: int = 0
    patch: int = 1
    forward_gflops: float = field(kw_only=True)
    input: str = field(default="images", kw_only=True)
    context: int | None = field(default=None, kw_only=True)

    @property
    def unit(self) -> str:
        """What its throughput counts per second: img/s, or tokens/s for a language model."""
        return "tokens/s" if self.input == "tokens" else "img/s"


@dataclass(frozen=True)
class ViTShape:
    """The transformer of a Vision Transformer model (Dosovitskiy et al. 2021), built alike
    by every framework: ``patch`` x ``patch`` patches embedded to ``width`` by a strided
    convolution, a class token and learned position embeddings, ``depth`` pre-norm blocks
    (layer norm, ``heads``-head self-attention, layer norm, GELU MLP of ``mlp`` x
    ``width``), a final layer norm and a linear classifier on the class token. ``timm``
    names timm's model it is made from (its options set to these numbers)."""

    timm: str
    patch: int
    width: int
    depth: int
    heads: int
    mlp: int = 4


@dataclass(frozen=True)
class GPTShape:
    """A GPT-2 decoder (Radford et al. 2019), built alike by every framework: a token
    embedding of ``vocabulary`` x ``width`` and learned position embeddings of ``context``
    positions, ``layers`` pre-norm blocks (layer norm, causal ``heads``-head self-attention,
    layer norm, GELU MLP of 4 x ``width``, each projection with its bias), a final layer
    norm and the output projection tied to the token embedding (no bias). No dropout: a
    benchmark's step is deterministic work. The vocabulary is GPT-2's 50,257 padded to a
    multiple of 64 (50,304), as the fast GPT-2 reproductions pad it; the byte-level corpus
    uses its first 256 ids."""

    layers: int
    heads: int
    width: int
    context: int
    vocabulary: int = 50_304

    @property
    def head_width(self) -> int:
        return self.width // self.heads

    def parameters(self, *, position: bool = True) -> int:
        """Trainable parameters, the tied output projection counted once (with
        ``position=False``: without the position embeddings, the N of
        :func:`archbench.core.metrics.model_flops_per_token`)."""
        d = self.width
        block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
        return (self.vocabulary * d + (self.context * d if position else 0)
                + self.layers * block + 2 * d)

    def training_flops_per_token(self, sequence_length: int) -> float:
        """Model FLOPs of one trained token at ``sequence_length`` (PaLM's 6 N + 12 L H Q T)."""
        return metrics.model_flops_per_token(self.parameters(position=False), layers=self.layers,
                                             heads=self.heads, head_width=self.head_width,
                                             sequence_length=sequence_length)


# GPT-2 small exactly (124,475,904 parameters at the padded vocabulary, tied embeddings),
# GPT-2 medium, and a four-layer model of the same vocabulary for the default campaign.
GPT: dict[str, GPTShape] = {
    "gpt_tiny": GPTShape(layers=4, heads=4, width=256, context=256),
    "gpt2_124m": GPTShape(layers=12, heads=12, width=768, context=1024),
    "gpt2_350m": GPTShape(layers=24, heads=16, width=1024, context=1024),
}


# forward_gflops: counted by forward_flops at the native size, rounded down; the
# published multiply-adds x 2 where the network is the paper's (He et al. 2016, Table 1:
# ResNet-50/101/152 3.8/7.6/11.3 G; Simonyan & Zisserman: VGG-16 15.5 G; Inception-v3 5.7 G,
# Inception-v4 12.3 G multiply-adds).
MODELS: dict[str, ModelSpec] = {
    "small_cnn": ModelSpec(8, stride=2, border=6, forward_gflops=0.152),
    "digits_cnn": ModelSpec(8, native_image_size=8, num_classes=10, channels=1,
                            dataset="digits", learning_rate=0.1, stride=2,
                            forward_gflops=0.00193),
    # tf_cnn_benchmarks' AlexNet variant (64-192-384-384-256, "same" padding): 1.68 GFLOPs
    # counted at 224, not the original's published 1.43.
    "alexnet": ModelSpec(64, border=32, forward_gflops=1.68),
    "vgg16": ModelSpec(32, forward_gflops=30.9),
    "resnet50": ModelSpec(32, forward_gflops=7.71),
    "resnet101": ModelSpec(32, forward_gflops=15.1),
    "resnet152": ModelSpec(32, forward_gflops=22.5),
    "inception_v3": ModelSpec(75, native_image_size=299,
                              border=43, forward_gflops=11.4),
    "inception_v4": ModelSpec(75, native_image_size=299, border=43,
                              forward_gflops=24.5),
    # Vision Transformers: ViT-B/16 at 224 px (86.6 M parameters); vit_tiny is ViT-Ti's
    # transformer (192 wide, 12 blocks, 3 heads) on 4-pixel patches at 32 px (64 patches
    # and the class token), small enough for the default campaign. The count is of the
    # weighted layers (patch embedding, q/k/v, projections, MLPs, classifier), as timm's
    # published GMACs; attention's own products are not counted (docs/frameworks.md).
    "vit_tiny": ModelSpec(4, native_image_size=32, stride=4, patch=4, forward_gflops=0.691),
    "vit_b16": ModelSpec(16, stride=16, patch=16, forward_gflops=33.69),
}

VIT: dict[str, ViTShape] = {
    "vit_tiny": ViTShape("vit_tiny_patch16_224", patch=4, width=192, depth=12, heads=3),
    "vit_b16": ViTShape("vit_base_patch16_224", patch=16, width=768, depth=12, heads=12),
}


# The language models as the worker knows them (``input="tokens"``: a sample is a sequence
# of at most ``context`` tokens; ``num_classes`` the vocabulary; ``forward_gflops`` per token
# at the context; AdamW's learning rate, GPT-2's 6e-4). Campaigns do not plan them yet: the
# tables count images (docs/llm.md).
LANGUAGE_MODELS: dict[str, ModelSpec] = {
    name: ModelSpec(native_image_size=None, num_classes=shape.vocabulary, channels=0,
                    dataset="synthetic", learning_rate=6e-4, input="tokens", context=shape.context,
                    forward_gflops=shape.training_flops_per_token(shape.context) / 3e9)
    for name, shape in GPT.items()
}


def spec(name: str) -> ModelSpec:
    """The registered model ``name`` (an image model or a language model); ValueError
    naming the known models otherwise."""
    known = {**MODELS, **LANGUAGE_MODELS}
    if name not in known:
        raise ValueError(f"unknown model '{name}' (known: {', '.join(sorted(known))})")
    return known[name]


def check_image_size(name: str, image_size: int) -> None:
    """ValueError unless model ``name`` can take square ``image_size`` inputs (at least its
    smallest size, and a multiple of its patch)."""
    s = spec(name)
    if image_size < s.min_image_size:
        raise ValueError(f"model '{name}' needs image_size >= {s.min_image_size}")
    if image_size % s.patch:
        raise ValueError(f"model '{name}' needs an image_size that is a multiple of its "
                         f"{s.patch}-pixel patch, not {image_size}")


def input_shape(name: str, image_size: int, data_format: str = "NHWC", *,
                channels: int | None = None) -> tuple[int, int, int]:
    """Shape of one input image of ``name`` in ``data_format`` (no batch axis)."""
    c = channels or spec(name).channels
    return (c, image_size, image_size) if data_format == "NCHW" else (image_size, image_size, c)


def least_training_flops(name: str, image_size: int, forward_gflops: float | None = None) -> float:
    """A lower bound of the training FLOPs per image of model ``name`` at ``image_size``,
    from its declared count alone (no network is built): 3 x ``forward_gflops`` (default:
    the model's declared Keras count) x (g(image_size) / g(native))^2, with g the side of
    the last feature grid (:class:`ModelSpec`), and the ratio at most 1. Every layer's
    map shrinks no faster than the last grid and a classifier behind a global pooling
    does not shrink at all; above the native size the count only grows (0 where the grid
    is empty)."""
    s = spec(name)
    forward = (s.forward_gflops if forward_gflops is None else forward_gflops) * 1e9
    native = (s.native_image_size - s.border) // s.stride
    grid = max(0, (image_size - s.border) // s.stride)
    return 3.0 * forward * min(1.0, (grid / native) ** 2)
