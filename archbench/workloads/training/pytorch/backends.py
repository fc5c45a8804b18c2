"""How the PyTorch loop's processes train together: one backend per strategy the
framework runs (``single``, ``horovod``, ``ddp``, ``fsdp2``: the ``backends`` of its registry entry),
each a :class:`~archbench.workloads.training.strategies.base.Backend` (so the measured
window, its barriers, the layout and the replicas' weight spread are every framework's
own), holding ``torch``."""

from __future__ import annotations

import datetime
import inspect
import os
import socket

from archbench.workloads.launch import local_rank, process_count, process_rank
from archbench.workloads.training.settings import TrainRun
from archbench.workloads.training.strategies import ddp
from archbench.workloads.training.strategies.base import Backend, unique
from archbench.workloads.training.strategies.horovod import horovod_knobs

INIT_TIMEOUT = datetime.timedelta(minutes=10)  # ranks of a job step start within this

def device_name(device) -> str:
    """A torch device as the records name devices: ``cuda:0`` -> ``GPU:0``, ``cpu`` -> ``CPU:0``."""
    kind = "GPU" if device.type == "cuda" else device.type.upper()
    return f"{kind}:{device.index or 0}"

def grad_scaler(torch, device_type: str):
    """fp16's loss scaler: ``torch.amp.GradScaler`` (PyTorch 2.3+), else the CUDA one of
    older versions (``torch.cuda.amp.GradScaler``; they have no CPU scaler)."""
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device_type)
    if device_type != "cuda":
        raise RuntimeError(f"precision fp16: PyTorch {torch.__version__} has no GradScaler for "
                           f"{device_type}")
    return torch.cuda.amp.GradScaler()

class TorchBackend(Backend):
    """One process (strategy ``single``)."""

    scaler = None  # precision fp16: the step's torch.amp.GradScaler

    def __init__(self, torch, config: TrainRun, device):
        super().__init__(torch, config)
        self.torch, self.device = torch, device

    def wrap(self, model, optimizer):
        """(model, optimizer) as the strategy trains them."""
        return model, optimizer

    def make_step(self, model, optimizer, loss_fn):
        """step(images, labels) -> loss (detached): forward, backward, update. Precision
        bf16/fp16: the forward pass under ``torch.autocast`` (the weights stay fp32), the
        loss of the logits in fp32; fp16 scales the loss (``torch.amp.GradScaler``)."""
        torch = self.torch
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.config.precision)
        if dtype is None:
            def step(images, labels):
                optimizer.zero_grad()  # gradients to None (PyTorch 2 default; Horovod takes no argument)
                loss = loss_fn(model(images), labels)
                loss.backward()
                optimizer.step()
                return loss.detach()
            return step
        # fp16's loss scale (the record's metric loss_scale); None otherwise
        self.scaler = grad_scaler(torch, self.device.type) if self.config.precision == "fp16" else None

        def mixed_step(images, labels):
            optimizer.zero_grad()
            with torch.autocast(self.device.type, dtype=dtype):
                logits = model(images)
            loss = loss_fn(logits.float(), labels)
            if self.scaler is None:
                loss.backward()
                optimizer.step()
            else:
                self.scaler.scale(loss).backward()
                self.scaled_update(optimizer)
            return loss.detach()
        return mixed_step

    def scaled_update(self, optimizer) -> None:
        """Precision fp16: the update from the scaled gradients (unscaled, skipped where
        one is not finite) and the next loss scale."""
        self.scaler.step(optimizer)
        self.scaler.update()

    def step_devices(self, model) -> list[str]:
        """Where the last measured loss and the parameters lived (never the configuration)."""
        tensors = [getattr(self, "last_loss", None), *model.parameters()]
        return sorted({device_name(t.device) for t in tensors if t is not None})

    def weights(self, model) -> list:
        return [p.detach().cpu().numpy() for p in model.parameters()]

    def predictor(self, model):
        torch = self.torch

        def predict(images):
            model.eval()
            with torch.no_grad():
                out = model(torch.as_tensor(images, device=self.device))
            model.train()
            return out.cpu().numpy()
        return predict

    def peak_memory(self) -> int | None:
        """The CPU's peak resident set, or on a GPU its caching allocator's peak."""
        if self.device.type == "cuda":
            return int(self.torch.cuda.max_memory_allocated(self.device))
        return super().peak_memory()

    def gather_tensor(self, values):
        return self.torch.tensor([list(map(float, values))], dtype=self.torch.float64)

    def bytes_per_step(self, model) -> int:
        """Gradient bytes a step averages: every trainable parameter once."""
        return int(sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad))

class HorovodTorchBackend(TorchBackend):
    """Horovod's PyTorch binding: DistributedOptimizer allreduces the gradients."""

    def __init__(self, torch, config: TrainRun, device):
        super().__init__(torch, config, device)
        if config.horovod_cycle_time is not None:
            os.environ["HOROVOD_CYCLE_TIME"] = f"{config.horovod_cycle_time:g}"
        if config.horovod_fusion_threshold is not None:
            os.environ["HOROVOD_FUSION_THRESHOLD"] = str(config.horovod_fusion_threshold)
        import horovod.torch as hvd
        hvd.init()
        self.hvd = hvd
        self.rank, self.size = hvd.rank(), hvd.size()
        self._hosts = unique(hvd.allgather_object(socket.gethostname()))

    def wrap(self, model, optimizer):
        return model, self.hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    def scaled_update(self, optimizer) -> None:
        """Precision fp16 with Horovod's DistributedOptimizer (Horovod's AMP recipe): the
        allreduce of the scaled gradients finishes first, so the scaler unscales and checks
        the averaged gradients (every rank skips or steps alike), then the step without a
        second synchronisation. Precision bf16 scales nothing: the plain step."""
        optimizer.synchronize()
        self.scaler.unscale_(optimizer)
        with optimizer.skip_synchronize():
            self.scaler.step(optimizer)
        self.scaler.update()

    def start(self, model) -> None:
        self.hvd.broadcast_parameters(model.state_dict(), root_rank=0)

    def layout(self) -> tuple[int, int]:
        if self.config.nodes is None and self.config.processes_per_node is None:
            return self.hvd.cross_size(), self.hvd.local_size()
        return super().layout()

    def barrier(self) -> None:
        self.hvd.allreduce(self.torch.zeros(1), name="archbench_barrier")

    def gather(self, values):
        return self.hvd.allgather(self.gather_tensor(values)).tolist()

    def hosts(self) -> list[str]:
        return self._hosts

    def metrics(self, model) -> dict:
        out = {
            "horovod_controller": {"value": "gloo" if self.hvd.gloo_enabled() else "mpi", "unit": ""},
            "allreduce_tensors": {"value": sum(1 for p in model.parameters() if p.requires_grad),
                                  "unit": "tensors/step"},
            "allreduce_bytes": {"value": self.bytes_per_step(model), "unit": "B/step"},
        }
        if self.config.device == "gpu":
            out["horovod_nccl"] = {"value": "built" if self.hvd.nccl_built() else "not built", "unit": ""}
        out.update(horovod_knobs(self.config.horovod_cycle_time, self.config.horovod_fusion_threshold))
        return out

class DDPBackend(TorchBackend):
    """DistributedDataParallel over gloo (CPUs) or NCCL (GPUs); ranks meet at
    :func:`archbench.workloads.training.strategies.ddp.rendezvous`."""

    def __init__(self, torch, config: TrainRun, device):
        super().__init__(torch, config, device)
        import torch.distributed as dist
        host, port = ddp.rendezvous()
        self.rank, self.size = process_rank(), process_count()
        self.local = local_rank()
        self.kind = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(self.kind, init_method=f"tcp://{host}:{port}", rank=self.rank,
                                world_size=self.size, timeout=INIT_TIMEOUT)
        self.dist = dist
        self._hosts = unique(self._objects(socket.gethostname()))

    def _objects(self, value) -> list:
        out = [None] * self.size
        self.dist.all_gather_object(out, value)
        return out

    def wrap(self, model, optimizer):
        from torch.nn.parallel import DistributedDataParallel
        ids = [self.device.index or 0] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids), optimizer

    def barrier(self) -> None:
        self.dist.all_reduce(self.torch.zeros(1, device=self.device))

    def gather(self, values):
        return [row for rows in self._objects([list(map(float, values))]) for row in rows]

    def hosts(self) -> list[str]:
        return self._hosts

    def metrics(self, model) -> dict:
        return {"ddp_backend": {"value": self.kind, "unit": ""},
                "allreduce_bytes": {"value": self.bytes_per_step(model), "unit": "B/step"}}

    def close(self) -> None:
        self.dist.destroy_process_group()

class FSDP2Backend(DDPBackend):
    """FSDP2 (``fully_shard``) over the process group DDP's ranks form: a GPT decoder's
    blocks sharded one by one, then the model (the tied embedding with it); the optimizer
    made again, alike, over the sharded parameters (DTensors replace the module's own)."""

    def wrap(self, model, optimizer):
        from torch.distributed.fsdp import fully_shard
        reshard = self.config.reshard_after_forward == "on"
        for block in getattr(model, "blocks", ()):
            fully_shard(block, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        kind = type(optimizer)  # its options, as its constructor takes them
        options = {k: v for k, v in optimizer.defaults.items() if k in inspect.signature(kind).parameters}
        return model, kind(model.parameters(), **options)

    def weight_spread(self, model) -> None:
        """None: no replicas to compare, every parameter lives once, sharded."""
        return None

    def weights(self, model) -> list:
        """The full parameters (every rank gathers each one: a collective)."""
        return [p.full_tensor().detach().cpu().numpy() for p in model.parameters()]

    def metrics(self, model) -> dict:
        shard = sum(p.to_local().numel() * p.element_size() for p in model.parameters())
        return {"fsdp_backend": {"value": self.kind, "unit": ""},
                "reshard_after_forward": {"value": self.config.reshard_after_forward, "unit": ""},
                "parameter_shard_bytes": {"value": int(shard), "unit": "B"}}


def make_backend(torch, config: TrainRun, device) -> TorchBackend:
    """The backend of ``config.strategy`` (initialises Horovod or the process group)."""
    from archbench.workloads.training import frameworks
    return frameworks.framework("pytorch").backend(config.strategy)(torch, config, device)

__all__ = ["DDPBackend", "FSDP2Backend", "HorovodTorchBackend", "TorchBackend", "device_name", "make_backend"]
