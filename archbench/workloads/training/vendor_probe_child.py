"""The vendor-library probe child (see :mod:`archbench.workloads.training.vendor_evidence`): builds the run's
model in its framework with its batch, threads, data format and vendor flag, runs one
warm-up step, then ONE probe step between markers, with oneDNN's verbose mode set by the
parent (PyTorch's CPU path runs oneDNN too, with ACL on aarch64)."""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import sys
from typing import Sequence

from archbench.workloads.training import frameworks
from archbench.workloads.training.settings import TrainRun, add_arguments
from archbench.workloads.training.vendor_evidence import LIBRARIES_LINE, PROBE_BEGIN, PROBE_END

_RUNTIMES = re.compile(r"^lib(armpl|mkl|iomp5|gomp|omp|arm_compute|dnnl|mkldnn)[^/]*\.so")

def loaded_runtimes(maps_path: str = "/proc/self/maps") -> list[str]:
    """Math runtimes mapped into this process (libarmpl, libmkl, libiomp5, libgomp, ...)."""
    try:
        with open(maps_path) as maps:
            names = {line.split()[-1].rsplit("/", 1)[-1] for line in maps if ".so" in line}
    except OSError:
        return []
    return sorted(n for n in names if _RUNTIMES.match(n))


def _mark(text: str) -> None:
    """Flush C stdio (where oneDNN prints) and write ``text`` as one stdout line."""
    ctypes.CDLL(None).fflush(None)
    sys.stdout.flush()
    os.write(1, f"{text}\n".encode())


def parse_probe_args(argv: Sequence[str] | None = None) -> TrainRun:
    """The run to probe: the options of the settings the probe child takes
    (``Setting.probe``), one process writing no record and running no probe of its own."""
    p = argparse.ArgumentParser(prog="python -m archbench.workloads.training.vendor_probe_child",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p, probe=True)
    try:
        return TrainRun(**vars(p.parse_args(argv)), output=os.devnull, vendor_probe="off")
    except ValueError as exc:
        p.error(str(exc))


def run_probe(argv: Sequence[str] | None = None) -> None:
    """The probe child: one warm-up step, then the probe step between markers."""
    config = parse_probe_args(argv)
    step, (images, labels) = frameworks.framework(config.framework).probe_step(config)
    float(step(images, labels))  # traces the step and creates its primitives
    _mark(PROBE_BEGIN)
    float(step(images, labels))
    _mark(PROBE_END)
    _mark(f"{LIBRARIES_LINE} {' '.join(loaded_runtimes())}")


if __name__ == "__main__":
    run_probe()
