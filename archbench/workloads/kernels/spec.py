"""What describes a kernel: one :class:`KernelSpec` per kernel, in the kernel's own module.

The CLI (subcommand, options, help), the worker command line (``command_for``), the
``kernel`` experiment type (axes, defaults, per-kernel keys, schema) and the kernel
tables (flop rate or bandwidth) all read the spec; no other module branches on a kernel's
name.
This module stays free of TensorFlow imports: the campaign loader imports the specs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    from archbench.workloads.kernels.cluster import Cluster
    from archbench.workloads.kernels.common import KernelResult, KernelRun

FLOP_RATE = "flop rate"  # GFLOP/s tables, fraction of peak
BANDWIDTH = "bandwidth"  # bandwidth tables (GB/s)
# the ``strategy`` of every kernel configuration and record: its workers are TensorFlow servers
KERNEL_STRATEGY = "workers"


@dataclass(frozen=True, kw_only=True)
class Setting:
    """A kernel parameter a campaign may set: experiment key ``name``, command-line
    option ``--name`` (underscores as dashes).

    ``choices`` makes it a word setting (``type`` str) taking one of those values;
    ``gpu_only`` lists the values only a GPU run takes (a CPU configuration with one is
    skipped, a CPU command line refused).
    ``in_tuning``: True puts the value under the configuration's ``tuning`` (part of the
    configuration id) only when the experiment sets it; False makes it a top-level key of
    every configuration of the kernel, the default filled in. ``adjust(value, workers)``
    gives the value a configuration with ``workers`` workers uses (default: unchanged).
    """

    name: str
    type: type  # int, float, or str (with ``choices``)
    default: int | float | str
    help: str
    choices: tuple[str, ...] | None = None
    gpu_only: tuple[Any, ...] = ()
    minimum: int | float | None = None
    maximum: int | float | None = None
    in_tuning: bool = True
    adjust: Callable[[Any, int], Any] | None = None

    @property
    def flag(self) -> str:
        """The command-line option, e.g. ``--iterations``."""
        return option_flag(self.name)

    def add_argument(self, parser: argparse.ArgumentParser) -> None:
        """Add ``--name`` to a kernel's subcommand."""
        parser.add_argument(self.flag, type=self.type, default=self.default, choices=self.choices,
                            help=f"{self.help} (default {self.default})")

    def schema(self, kernel: str) -> dict:
        """JSON schema of the experiment key."""
        if self.choices:
            return {"enum": list(self.choices),
                    "description": f"{kernel}: {self.help} (default {self.default})."}
        schema: dict = {"type": "integer" if self.type is int else "number"}
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        schema["description"] = f"{kernel}: {self.help} (default {self.default})."
        return schema

    def value(self, given: Any, workers: int) -> Any:
        """The value a configuration with ``workers`` workers runs with."""
        return self.adjust(given, workers) if self.adjust else given


@dataclass(frozen=True, kw_only=True)
class KernelSpec:
    """A registered kernel (see ``archbench.workloads.kernels.KERNELS``).

    ``run(cluster, job)`` runs it once (importing TensorFlow itself) and returns a
    KernelResult; ``work(record)`` is what one measured step of a record does in the
    throughput unit times seconds (GFLOP, GB, MiB), as ``run`` counts it, or None when the
    record does not say (``archbench.workloads.sense`` checks throughput = work x steps / their
    time with it); ``steps`` = default (warmup, measured) repetitions per run; ``measures``
    = FLOP_RATE or BANDWIDTH; ``tile_help`` (tiled kernels only) says what ``--tile-size``
    means; ``workers`` fixes the worker count (None: the experiment's ``workers``);
    ``settings`` are its experiment keys, which reach the run as command-line options;
    ``add_arguments(parser)`` adds its command-line-only options. Every option ends up in
    ``KernelRun.options`` under its argparse name.
    """

    name: str
    help: str
    unit: str
    measures: str
    size_help: str
    run: Callable[[Cluster, KernelRun], KernelResult]
    work: Callable[[Mapping[str, Any]], float | None]
    steps: tuple[int, int] = (1, 1)
    tile_help: str | None = None
    power_of_two: bool = False
    workers: int | None = None
    settings: tuple[Setting, ...] = ()
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None

    @property
    def tiled(self) -> bool:
        """Whether the kernel takes a tile size (``--tile-size``, the ``tile_sizes`` axis)."""
        return self.tile_help is not None

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        """The kernel's own options on its subcommand: size, tile size, settings, extras."""
        parser.add_argument("--size", type=int, required=True, help=self.size_help)
        if self.tiled:
            parser.add_argument("--tile-size", type=int, default=None, help=self.tile_help)
        for setting in self.settings:
            setting.add_argument(parser)
        if self.add_arguments:
            self.add_arguments(parser)


def option_flag(name: str) -> str:
    """The command-line option of setting ``name``: ``--name`` with dashes."""
    return "--" + name.replace("_", "-")


def add_verify_option(parser: argparse.ArgumentParser) -> None:
    """``--verify``: check the result against numpy (kernels with a numpy reference)."""
    parser.add_argument("--verify", action="store_true",
                        help="compare with numpy and record max_relative_error (small N only)")
