"""The vendor-library probe child (see :mod:`archbench.workloads.training.vendor_evidence.probing`): builds the run's
model in its framework with its batch, threads, data format and vendor flag, runs one
warm-up step, then ONE probe step between markers, with oneDNN's verbose mode set by the
parent (any framework's CPU path that runs oneDNN, with ACL on aarch64)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from archbench.workloads.training import frameworks
from archbench.workloads.training.settings import TrainRun, add_arguments
from archbench.workloads.training.vendor_evidence.onednn_verbose import PROBE_BEGIN, PROBE_END
from archbench.workloads.training.vendor_evidence.probing import LIBRARIES_LINE, loaded_runtimes, write_line


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
    write_line(PROBE_BEGIN)
    float(step(images, labels))
    write_line(PROBE_END)
    write_line(f"{LIBRARIES_LINE} {' '.join(loaded_runtimes())}")


if __name__ == "__main__":
    run_probe()
    sys.stderr.flush()  # stdout is written and flushed: nothing is left to say
    os._exit(0)  # the framework's teardown (1-2 s) is not worth waiting for
