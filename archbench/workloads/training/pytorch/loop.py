"""The PyTorch training loop (framework ``pytorch`` of
:mod:`archbench.workloads.training.frameworks`): what Horovod's
``pytorch_synthetic_benchmark.py`` does -- a torchvision model, SGD, cross-entropy, one
fixed synthetic batch (or the real data the TensorFlow loop reads) -- timed over the same
measured window, into the same record.

Settings as PyTorch has them: intra-op threads ``torch.set_num_threads``, inter-op
``torch.set_num_interop_threads`` (0 leaves PyTorch's default), the vendor library
``torch.backends.mkldnn.enabled`` (oneDNN on x86, with ACL on aarch64), cuDNN's autotuner
on (fixed shapes, as Horovod's benchmark sets it), data format NHWC
as input batches in the ``channels_last`` memory format and NCHW as contiguous ones, the device bound by
local rank before torch loads (:func:`archbench.workloads.gpu.bind_gpu`). The numerics:
precision bf16/fp16 as ``torch.autocast`` around the forward pass (fp16 with a
``GradScaler``: :meth:`~archbench.workloads.training.pytorch.backends.TorchBackend.make_step`),
the fp32 math mode as the backends' ``fp32_precision`` (:func:`set_math_mode`), graph
compiled as ``torch.compile`` (:func:`compiled`), its first step timed apart.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from typing import Callable

from archbench.core import provenance
from archbench.core.marks import mark
from archbench.workloads import gpu
from archbench.workloads.launch import local_rank
from archbench.workloads.training import outcome
from archbench.workloads.training.models import GPT, spec
from archbench.workloads.training.pinning import pin_cores
from archbench.workloads.training.pytorch import backends, data, models
from archbench.workloads.training.settings import TrainRun


def configure_torch(config: TrainRun):
    """Bind the device, then import torch and set its thread pools, oneDNN flag, fp32 math
    mode (:func:`set_math_mode`) and seed."""
    gpu.bind_gpu(config.device)
    if config.math_mode == "bf16":  # for the primitives ideep makes without the attribute
        os.environ["ONEDNN_DEFAULT_FPMATH_MODE"] = "BF16"
    import torch
    set_math_mode(torch, config)
    if config.intra_threads > 0:
        torch.set_num_threads(config.intra_threads)
    if config.inter_threads > 0 and torch.get_num_interop_threads() != config.inter_threads:
        torch.set_num_interop_threads(config.inter_threads)
    torch.backends.mkldnn.enabled = config.onednn == "on"
    torch.backends.cudnn.benchmark = True  # as Horovod's PyTorch benchmark: fixed shapes
    torch.manual_seed(config.seed)
    return torch


def set_math_mode(torch, config: TrainRun) -> None:
    """The fp32 math mode through the per-backend ``fp32_precision`` properties only (mixing
    them with the legacy ``allow_tf32`` / ``set_float32_matmul_precision`` is an error in
    PyTorch 2.9+): bf16 routes oneDNN's fp32 matrix products and convolutions to bf16
    compute where the CPU has it (mkldnn matmul, conv, rnn); tf32 does so for cuBLAS and
    cuDNN. Strict leaves the CPU's defaults (full fp32) and sets ``ieee`` on a GPU, where
    cuDNN's convolutions default to tf32. A PyTorch without the properties (before 2.9:
    Debian's 1.13) runs strict only (its legacy ``allow_tf32`` flags off on a GPU); another
    mode there is a RuntimeError naming the version (plan time refuses it first:
    :func:`archbench.plan.containers.image_lacks`)."""
    if not hasattr(torch.backends.mkldnn, "matmul"):  # no fp32_precision (PyTorch < 2.9)
        if config.math_mode != "strict":
            raise RuntimeError(f"math_mode {config.math_mode}: PyTorch {torch.__version__} has no "
                               "fp32_precision (it needs PyTorch 2.9 or later)")
        if config.device == "gpu":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        return
    if config.math_mode == "bf16":
        for backend in (torch.backends.mkldnn.matmul, torch.backends.mkldnn.conv,
                        torch.backends.mkldnn.rnn):
            backend.fp32_precision = "bf16"
    if config.device == "gpu":
        mode = "tf32" if config.math_mode == "tf32" else "ieee"
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode


def compiled(torch, config: TrainRun, model):
    """``model`` as the run's graph setting runs it: itself (eager), or ``torch.compile``'d,
    after checking that inductor finds a working C++ compiler (a RuntimeError naming it
    otherwise: the run's failure record says so)."""
    if config.graph != "compiled":
        return model
    if not hasattr(torch, "compile"):  # PyTorch 1.x (plan time refuses it first)
        raise RuntimeError(f"graph compiled: PyTorch {torch.__version__} has no torch.compile "
                           "(it needs PyTorch 2)")
    if config.device == "cpu":
        try:
            from torch._inductor.cpp_builder import get_cpp_compiler
            get_cpp_compiler()
        except Exception as exc:  # noqa: BLE001 - InvalidCxxCompiler and what leads to it
            first = (str(exc).strip().splitlines() or [""])[0]
            raise RuntimeError(f"graph compiled: no working C++ compiler for torch.compile "
                               f"({type(exc).__name__}: {first})") from exc
    return torch.compile(model)


def compile_metrics(torch, seconds: float | None) -> dict:
    """The record metrics of a compiled run: inductor's FX-graph cache hits and misses
    of this process (a warm cache compiles in a fraction of the time; compile_s is the
    window's)."""
    if seconds is None:
        return {}
    counters = torch._dynamo.utils.counters["inductor"]
    return {"compile_cache_hits": {"value": int(counters["fxgraph_cache_hit"]), "unit": "graphs"},
            "compile_cache_misses": {"value": int(counters["fxgraph_cache_miss"]), "unit": "graphs"}}


def probe_step(config: TrainRun):
    """The run's step in one process on the CPU and its synthetic batch (vendor probe)."""
    torch = configure_torch(config)
    device = torch.device("cpu")
    model = models.build_model(config.model, config.image_size, config.num_classes)
    model = model.to(device)  # weights keep PyTorch's layout: see memory_format
    step = backends.TorchBackend(torch, config, device).make_step(
        compiled(torch, config, model), optimizer_of(torch, config, model), loss_of(torch, config))
    return step, synthetic_batch(torch, config, device)


def optimizer_of(torch, config: TrainRun, model):
    """SGD for an image model (as Horovod's benchmark); AdamW for a language model, as LLM
    pretraining runs it (:data:`ADAMW`)."""
    if spec(config.model).input == "tokens":
        return torch.optim.AdamW(model.parameters(), lr=config.learning_rate, **ADAMW)
    return torch.optim.SGD(model.parameters(), lr=config.learning_rate)


ADAMW = {"betas": (0.9, 0.95), "weight_decay": 0.1}  # GPT-2/3 pretraining's (the record states it)


def loss_of(torch, config: TrainRun):
    """Cross-entropy of the logits: per image, or per next token of every position."""
    if spec(config.model).input == "tokens":
        from archbench.workloads.training.pytorch import gpt
        return gpt.language_model_loss
    return torch.nn.functional.cross_entropy


def probe_here(torch, config: TrainRun, *, step, device) -> Callable[[], dict] | None:
    """The vendor probe of a one-process run: ONE more ``step`` on the run's synthetic
    batch with oneDNN's verbose mode switched on around it
    (:func:`~archbench.workloads.training.vendor_evidence.probing.probe_in_process`). None for a
    multi-process run: one more step would need every rank (its probe is a child)."""
    if config.strategy != "single" or device.type != "cpu":
        return None
    from archbench.workloads.training.vendor_evidence.probing import probe_in_process

    def verbose():
        """oneDNN's verbose mode around the step; a torch built without oneDNN (Debian's
        ppc64el build) has none to switch on, and its evidence says library none, with
        the math runtimes it loaded."""
        if not torch.backends.mkldnn.is_available() or not hasattr(torch.backends.mkldnn, "verbose"):
            return contextlib.nullcontext()
        return torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON)

    def probe() -> dict:
        batch = synthetic_batch(torch, config, device)
        return probe_in_process(lambda: float(step(*batch)), verbose)
    return probe


def memory_format(torch, config: TrainRun):
    """The layout of the input batches: NHWC ``channels_last``, NCHW contiguous. The
    convolutions follow their input's layout; the weights (and so their gradients, which
    Horovod's allreduce and broadcast need contiguous) keep PyTorch's default one."""
    return torch.channels_last if config.data_format == "NHWC" else torch.contiguous_format


def synthetic_batch(torch, config: TrainRun, device, *, shard: int = 0):
    """A fixed batch of random images and labels made on ``device`` (nothing is copied
    from the host per step), seeded by the run's seed and the worker's shard; for a
    language model, random token sequences of the vocabulary and the same sequences
    shifted by one, the next token of every position."""
    generator = torch.Generator().manual_seed(config.seed * 1000 + shard)
    if spec(config.model).input == "tokens":
        ids = torch.randint(0, config.num_classes, (config.batch_per_process, config.sequence_length + 1),
                            generator=generator)
        return ids[:, :-1].contiguous().to(device), ids[:, 1:].contiguous().to(device)
    channels = spec(config.model).channels
    images = torch.rand((config.batch_per_process, channels, config.image_size, config.image_size),
                        generator=generator)
    labels = torch.randint(0, config.num_classes, (config.batch_per_process,), generator=generator)
    return (images.to(device).contiguous(memory_format=memory_format(torch, config)),
            labels.to(device))


def batches_of(torch, config: TrainRun, backend: backends.TorchBackend):
    """This worker's batches on its device: one synthetic batch repeated, or the real data
    through a DataLoader (``--loader-workers``, default the intra-op threads, at least 1)."""
    if config.data == "synthetic":
        return itertools.repeat(synthetic_batch(torch, config, backend.device, shard=backend.rank))
    workers = config.loader_workers if config.loader_workers is not None else max(1, config.intra_threads)
    source = data.loader(config, shard=backend.rank, shards=backend.size, workers=workers)
    fmt = memory_format(torch, config)
    return ((images.to(backend.device, non_blocking=True).contiguous(memory_format=fmt),
             labels.to(backend.device, non_blocking=True)) for images, labels in source)


def run(config: TrainRun) -> dict | None:
    """Train ``config.model`` in PyTorch; the complete record on the writing worker, None
    on every other worker."""
    start = provenance.now()
    if config.target_accuracy is not None:
        outcome.check_quality(config, spec(config.model).dataset)
    if config.cores:
        pin_cores(config.cores, local_rank())
    torch = configure_torch(config)
    mark("framework-imported")
    if config.device == "gpu":
        if not torch.cuda.is_available():
            raise gpu.no_gpu("PyTorch")  # a CPU never stands in for a GPU
        device = torch.device("cuda", 0)  # the one GPU bind_gpu left this rank
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    backend = backends.make_backend(torch, config, device)
    model = models.build_model(config.model, config.image_size, config.num_classes)
    model = model.to(device)  # weights keep PyTorch's layout: see memory_format
    optimizer = optimizer_of(torch, config, model)
    backend.start(model)
    model, optimizer = backend.wrap(model, optimizer)
    step = backend.make_step(compiled(torch, config, model), optimizer, loss_of(torch, config))
    batches = batches_of(torch, config, backend)
    mark("model-built")
    if config.weights_out:  # the weights every worker starts from
        outcome.save_weights(config.weights_out, f"init-rank{backend.rank}", backend.weights(model))
    quality = {}
    tokens = spec(config.model).input == "tokens"
    if config.target_accuracy is None:  # images, or tokens: what a step's batch counts
        per_step = config.batch_per_process * (config.sequence_length if tokens else 1)
        times, losses, wall, images = backend.window(step, batches, warmup=config.warmup_steps,
                                                     steps=config.steps, batch_size=per_step,
                                                     compiles=config.graph == "compiled")
    else:  # the quality gate: time to the validation accuracy
        from archbench.workloads.training.datasets import accuracy
        _, _, x_test, y_test = data.digits_tensors(config.image_size)
        x_test, y_test = x_test.numpy(), y_test.numpy()
        times = []  # a clock, not a window of steps (outcome.to_accuracy)
        losses, wall, images, backend.compile_seconds, quality = outcome.to_accuracy(
            step, batches, lambda: accuracy(backend.predictor(model), x_test, y_test), config=config,
            batch_size=config.batch_per_process, compiles=config.graph == "compiled")
    devices, spread, (nodes, ppn), hosts, extra = outcome.after_window(config, backend, model)
    extra.update(quality)
    extra.update(compile_metrics(torch, backend.compile_seconds))
    if backend.scaler is not None:  # fp16: the loss scale the window ended with
        extra["loss_scale"] = {"value": float(backend.scaler.get_scale()), "unit": ""}
    if config.data == "real" and spec(config.model).dataset == "digits" and backend.is_writer:
        from archbench.workloads.training.datasets import accuracy
        _, _, x_test, y_test = data.digits_tensors(config.image_size)
        extra["accuracy"] = {"value": accuracy(backend.predictor(model), x_test.numpy(), y_test.numpy()),
                             "unit": "fraction"}
    if tokens:  # model FLOPs per token (PaLM's), not a count of what the kernels did
        flops = GPT[config.model].training_flops_per_token(config.sequence_length)
        extra["optimizer"] = {"value": f"AdamW betas {ADAMW['betas']} weight_decay {ADAMW['weight_decay']}",
                              "unit": ""}
    else:
        shape = (spec(config.model).channels, config.image_size, config.image_size)
        flops = models.training_flops(getattr(model, "module", model), shape, device=str(device))
    if hasattr(backend, "close"):
        backend.close()
    if not backend.is_writer:
        return None
    mismatch = gpu.device_mismatch(config.device, devices)
    if mismatch:
        raise gpu.DevicePlacementError(mismatch, devices)
    record_metrics = outcome.window_metrics(config, flops_per_sample=flops, wall=wall, samples=images,
                                            spread=spread, extra=extra,
                                            compile_seconds=backend.compile_seconds)
    fields = outcome.base_fields(config, framework_version=torch.__version__, nodes=nodes,
                                 processes_per_node=ppn, workers=backend.workers)
    fields["hosts"] = hosts
    fields["devices"] = devices
    fields["energy"] = backend.energy  # the window's (strategies/base.py Backend.window)
    mark("record-fields")
    outcome.add_vendor_evidence(fields, config, probe_here=probe_here(torch, config, step=step, device=device))
    mark("vendor-probe")
    return outcome.measured_record(fields, start=start, times=times, losses=losses, wall=wall,
                                   samples=images, record_metrics=record_metrics)


