"""One training run as ``python -m archbench.train`` was asked for it: a frozen, validated
value built once from the command line, with the model's defaults filled in."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

from archbench.workloads.training.models import spec

AT_LEAST_ONE = ("batch_size", "steps", "image_size", "num_classes")
NOT_NEGATIVE = ("intra_threads", "inter_threads", "warmup_steps", "parameter_servers")
UNSET_OR_AT_LEAST_ONE = ("nodes", "processes_per_node", "cores")


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


@dataclass(frozen=True, kw_only=True)
class TrainRun:
    """A training run: model, batch, threads, data, window, strategy and layout.

    ``image_size``, ``num_classes`` and ``learning_rate`` left None are the model's
    (:class:`archbench.workloads.training.models.ModelSpec`). ``nodes`` and ``processes_per_node`` are the
    layout as planned (None: counted from the workers). Invalid values raise ValueError
    naming the command-line flag.
    """

    model: str
    batch_size: int  # per process
    output: str  # where the JSON record goes
    intra_threads: int = 0  # 0 = TensorFlow's default
    inter_threads: int = 1
    onednn: str = "on"  # on | off: TF_ENABLE_ONEDNN_OPTS
    data: str = "synthetic"  # synthetic | real
    data_dir: str | None = None
    data_format: str = "NHWC"  # NHWC | NCHW
    device: str = "cpu"  # cpu | gpu: one GPU per process, bound by local rank (archbench.workloads.gpu)
    warmup_steps: int = 10
    steps: int = 100  # measured steps per worker
    image_size: int | None = None
    num_classes: int | None = None
    learning_rate: float | None = None
    seed: int = 1234
    strategy: str = "single"
    nodes: int | None = None
    processes_per_node: int | None = None
    parameter_servers: int = 1
    variable_update: str | None = None  # strategy parameter_server: how variables update
    ps_variable_placement: str = "round_robin"  # round_robin | greedy (by size) over the PSs
    horovod_cycle_time: float | None = None  # ms
    horovod_fusion_threshold: int | None = None  # bytes
    cores: int | None = None  # pin each process to this many cores
    weights_out: str | None = None  # directory for every worker's trained weights
    vendor_library: str = "onednn"  # as the system declares it (config/systems/*.yaml)
    vendor_probe: str = "on"  # on | off: one verbose probe step after the window

    def __post_init__(self):
        model = spec(self.model)
        for name, default in (("image_size", model.native_image_size),
                              ("num_classes", model.num_classes),
                              ("learning_rate", model.learning_rate)):
            if getattr(self, name) is None:
                object.__setattr__(self, name, default)
        for name in AT_LEAST_ONE:
            if getattr(self, name) < 1:
                raise ValueError(f"{_flag(name)} must be >= 1")
        for name in NOT_NEGATIVE:
            if getattr(self, name) < 0:
                raise ValueError(f"{_flag(name)} must be >= 0")
        for name in UNSET_OR_AT_LEAST_ONE:
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{_flag(name)} must be >= 1")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TrainRun:
        """The run of parsed command-line options (their dest names are the fields)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})
