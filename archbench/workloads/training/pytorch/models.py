"""The PyTorch models, by the names of :mod:`archbench.workloads.training.models` (image
size, classes, channels and real dataset come from the same
:class:`~archbench.workloads.training.models.ModelSpec`).

ImageNet models are torchvision's (``inception_v4`` and the Vision Transformers: timm's,
the transformers shaped by :data:`archbench.workloads.training.models.VIT`), with random weights;
``small_cnn`` and ``digits_cnn`` are written here layer for layer as the Keras ones. Where
a definition differs from the TensorFlow one (torchvision's AlexNet has 256 filters in its
fourth convolution and adaptive pooling; Inception-v3 without its auxiliary head), the
parameter counts of both are listed in docs/frameworks.md.

FLOPs per image count multiply-adds as 2 FLOPs in convolutions and matrix products of one
forward pass (:class:`torch.utils.flop_counter.FlopCounterMode`; the fused attention's
own products are not counted on any device, as Keras's count leaves them out), times 3 for a training
step, as :func:`archbench.workloads.training.models.forward_flops` counts the Keras models.
Where a PyTorch network's count at the native size differs from the Keras one's, it is
declared in :data:`FORWARD_GFLOPS` (tests count both); :func:`least_training_flops` is
the lower bound the record checks use.
"""

from __future__ import annotations

from typing import Callable

from archbench.workloads.training import models as shared_models
from archbench.workloads.training.models import GPT, VIT, check_image_size, spec


def _small_cnn(num_classes: int, channels: int):
    """Two convolutions and a classifier (Keras: Conv 16, max-pool, Conv 32, global pool)."""
    from torch import nn
    return nn.Sequential(
        nn.Conv2d(channels, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(32, num_classes))


def _digits_cnn(num_classes: int, channels: int, image_size: int):
    """The MNIST-class CNN of the Keras model: 32-32 same convolutions, pool, 64, dense 64."""
    from torch import nn
    side = image_size // 2
    return nn.Sequential(
        nn.Conv2d(channels, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.Flatten(),
        nn.Linear(64 * side * side, 64), nn.ReLU(), nn.Linear(64, num_classes))


def _torchvision(name: str, **options) -> Callable:
    def build(num_classes: int, channels: int, image_size: int):
        import torchvision
        if channels != 3:
            raise ValueError(f"torchvision's {name} takes 3 channels, not {channels}")
        return getattr(torchvision.models, name)(weights=None, num_classes=num_classes, **options)
    build.__doc__ = f"torchvision.models.{name} (random weights)."
    return build


def _timm(name: str) -> Callable:
    def build(num_classes: int, channels: int, image_size: int):
        import timm
        return timm.create_model(name, pretrained=False, num_classes=num_classes, in_chans=channels)
    build.__doc__ = f"timm's {name} (random weights)."
    return build


def _vit(name: str) -> Callable:
    def build(num_classes: int, channels: int, image_size: int):
        import timm
        shape = VIT[name]
        return timm.create_model(
            shape.timm, pretrained=False, num_classes=num_classes, in_chans=channels,
            img_size=image_size, patch_size=shape.patch, embed_dim=shape.width,
            depth=shape.depth, num_heads=shape.heads, mlp_ratio=shape.mlp)
    build.__doc__ = f"timm's {VIT[name].timm} shaped as {name} (random weights)."
    return build


def _gpt(name: str) -> Callable:
    def build(num_classes: int, channels: int, image_size: int | None):
        from archbench.workloads.training.pytorch import gpt
        return gpt.build(name)
    build.__doc__ = f"the GPT-2 decoder shaped as {name} (random weights)."
    return build


MODELS: dict[str, Callable] = {
    "small_cnn": lambda num_classes, channels, image_size: _small_cnn(num_classes, channels),
    "digits_cnn": _digits_cnn,
    "alexnet": _torchvision("alexnet"),
    "vgg16": _torchvision("vgg16"),
    "resnet50": _torchvision("resnet50"),
    "resnet101": _torchvision("resnet101"),
    "resnet152": _torchvision("resnet152"),
    "inception_v3": _torchvision("inception_v3", aux_logits=False, init_weights=False),
    "inception_v4": _timm("inception_v4"),
    "vit_tiny": _vit("vit_tiny"),
    "vit_b16": _vit("vit_b16"),
    **{name: _gpt(name) for name in GPT},
}


# forward GFLOPs at the native size where the network differs from the Keras one, counted
# and rounded down: torchvision's AlexNet (0.714 G multiply-adds, its published 1.43 GFLOPs)
# and its ResNets v1.5 (the stride in the 3x3 convolution: 4.09, 7.80, 11.5 G multiply-adds)
FORWARD_GFLOPS: dict[str, float] = {
    "alexnet": 1.42, "resnet50": 8.17, "resnet101": 15.6, "resnet152": 23.0,
}


def least_training_flops(name: str, image_size: int) -> float:
    """A lower bound of the training FLOPs per image of PyTorch's model ``name`` at
    ``image_size`` (:func:`archbench.workloads.training.models.least_training_flops` of
    its declared count)."""
    return shared_models.least_training_flops(name, image_size, FORWARD_GFLOPS.get(name))


def build_model(name: str, image_size: int, num_classes: int):
    """Model ``name`` for square ``image_size`` inputs with ``num_classes`` logits (random
    weights from the current torch seed); ValueError for an unknown model or a too small
    image."""
    s = spec(name)
    if name not in MODELS:
        raise ValueError(f"unknown PyTorch model '{name}' (known: {', '.join(MODELS)})")
    if s.input == "images":
        check_image_size(name, image_size)
    return MODELS[name](num_classes, s.channels, image_size)


def parameter_count(model) -> int:
    """Trainable parameters of ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _uncounted_attention() -> dict:
    """The fused attention kernels the FLOP counter knows, each counted as 0 FLOPs: the
    count is of weighted layers on every device (CPUs run a kernel it does not know)."""
    import torch
    aten = torch.ops.aten
    names = ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu")
    return {getattr(aten, n): (lambda *args, **kwargs: 0) for n in names if hasattr(aten, n)}


def training_flops(model, image_shape: tuple[int, int, int], device: str = "cpu") -> float:
    """FLOPs of one training step per image: 3 x one forward pass's convolution and matrix
    FLOPs (2 per multiply-add), counted on one image of ``image_shape`` (C, H, W); the
    products inside fused attention are not counted (:func:`_uncounted_attention`)."""
    import torch
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:  # PyTorch before 2.1 (Debian's 1.13)
        return 3.0 * _layer_flops(torch, model, image_shape, device=device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False,
                                              custom_mapping=_uncounted_attention()) as counter:
            model(torch.zeros((1, *image_shape), device=device))
    finally:
        model.train(was_training)
    return 3.0 * counter.get_total_flops()


def _layer_flops(torch, model, image_shape: tuple[int, int, int], *, device: str) -> float:
    """One forward pass's FLOPs of one image counted per layer, where PyTorch has no
    FlopCounterMode (before 2.1): 2 per multiply-add of every ``Conv2d`` (output elements x
    input channels per group x kernel area) and ``Linear`` (rows x inputs x outputs), as
    FlopCounterMode counts their convolutions and matrix products; products outside such
    layers (attention's) are not counted, as above."""
    from torch import nn
    total = [0.0]

    def conv(layer, inputs, output):
        kh, kw = layer.kernel_size
        total[0] += 2.0 * output.numel() * (layer.in_channels // layer.groups) * kh * kw

    def linear(layer, inputs, output):
        total[0] += 2.0 * (output.numel() // layer.out_features) * layer.in_features * layer.out_features

    hooks = [m.register_forward_hook(conv) for m in model.modules() if isinstance(m, nn.Conv2d)]
    hooks += [m.register_forward_hook(linear) for m in model.modules() if isinstance(m, nn.Linear)]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(torch.zeros((1, *image_shape), device=device))
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    return total[0]
