"""A throwaway training framework, registered by tests/test_framework_plugin.py only: numpy
softmax regression on the flattened synthetic images of a model's input shape, trained by
plain SGD in one process (strategy ``single``).

It is the whole of a framework plugin in one module, each part where a framework package
keeps it (``loop.py``, ``models.py``, ``backends.py``): ``run``/``probe_step`` (the loop),
``MODELS``/``least_training_flops`` (the builders of the shared model names), ``Single``
(the backend of the one strategy it runs) and :data:`FRAMEWORKS`, its registry entry,
which ``ARCHBENCH_FRAMEWORKS=toy_framework:FRAMEWORKS`` adds to every process of a run.
"""

from __future__ import annotations

import contextlib
import itertools

import numpy as np

from archbench.core import provenance
from archbench.workloads.training import outcome
from archbench.workloads.training.frameworks import Framework
from archbench.workloads.training.models import input_shape, spec
from archbench.workloads.training.strategies.base import Backend

NAME = "toy"


# ---------------------------------------------------------------- models

class Softmax:
    """A linear classifier: logits = x W + b."""

    def __init__(self, features: int, classes: int, seed: int):
        self.w = np.random.default_rng(seed).normal(0, 0.01, (features, classes))
        self.b = np.zeros(classes)

    def __call__(self, images: np.ndarray) -> np.ndarray:
        return images.reshape(len(images), -1) @ self.w + self.b


def _softmax(name: str, image_size: int, num_classes: int, seed: int = 0) -> Softmax:
    return Softmax(int(np.prod(input_shape(name, image_size))), num_classes, seed)


MODELS = {name: _softmax for name in ("small_cnn", "digits_cnn")}


def training_flops(name: str, image_size: int, num_classes: int) -> float:
    """3 x forward: one multiply-add (2 FLOPs) per weight."""
    return 3.0 * 2 * int(np.prod(input_shape(name, image_size))) * num_classes


def least_training_flops(name: str, image_size: int) -> float:
    """The count itself at the model's own number of classes (nothing smaller runs)."""
    return training_flops(name, image_size, spec(name).num_classes)


# ---------------------------------------------------------------- backends

class Single(Backend):
    """One process: SGD on the cross-entropy of the softmax, computed by hand."""

    def make_step(self, model, optimizer, loss_fn):
        learning_rate = optimizer

        def step(images, labels):
            x = images.reshape(len(images), -1)
            logits = model(images)
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            loss = -np.mean(np.log(p[np.arange(len(labels)), labels]))
            p[np.arange(len(labels)), labels] -= 1
            model.w -= learning_rate * x.T @ p / len(labels)
            model.b -= learning_rate * p.mean(axis=0)
            return loss
        return step

    def step_devices(self, model) -> list[str]:
        return ["CPU:0"]

    def predictor(self, model):
        return model

    def weights(self, model) -> list:
        return [model.w, model.b]


# ---------------------------------------------------------------- loop

def synthetic_batch(config):
    rng = np.random.default_rng(config.seed)
    images = rng.random((config.batch_per_process, *input_shape(config.model, config.image_size)))
    return images, rng.integers(0, config.num_classes, config.batch_per_process)


def probe_step(config):
    model = MODELS[config.model](config.model, config.image_size, config.num_classes, config.seed)
    return Single(np, config).make_step(model, config.learning_rate, None), synthetic_batch(config)


def run(config) -> dict | None:
    from archbench.workloads.training.vendor_evidence import probing
    start = provenance.now()
    backend = FRAMEWORKS[NAME].backend(config.strategy)(np, config)
    model = MODELS[config.model](config.model, config.image_size, config.num_classes, config.seed)
    step = backend.make_step(model, config.learning_rate, None)
    batch = synthetic_batch(config)
    times, losses, wall, images = backend.window(step, itertools.repeat(batch),
                                                 warmup=config.warmup_steps, steps=config.steps,
                                                 batch_size=config.batch_per_process)
    devices, spread, (nodes, ppn), hosts, extra = outcome.after_window(config, backend, model)
    record_metrics = outcome.window_metrics(
        config, flops_per_sample=training_flops(config.model, config.image_size, config.num_classes),
        wall=wall, samples=images, spread=spread, extra=extra)
    fields = outcome.base_fields(config, framework_version=np.__version__, nodes=nodes,
                                 processes_per_node=ppn, workers=backend.workers)
    fields.update(hosts=hosts, devices=devices)
    outcome.add_vendor_evidence(fields, config, probe_here=lambda: probing.probe_in_process(
        lambda: float(step(*batch)), contextlib.nullcontext))  # numpy has no verbose switch
    return outcome.measured_record(fields, start=start, times=times, losses=losses, wall=wall,
                                   samples=images, record_metrics=record_metrics)


FRAMEWORKS = {NAME: Framework(
    label="Toy", short_label="TOY", loop=__name__, models=f"{__name__}:MODELS", module="numpy",
    distributions=("numpy",), backends={"single": f"{__name__}:Single"}, pins=("numpy",),
    variable_updates=(), help="a throwaway numpy framework (tests only)")}
