"""The command line of one training benchmark (``python -m archbench.train --help``):
:mod:`archbench.workloads.training.benchmark`."""

import sys

from archbench.core import storage
from archbench.workloads.training.benchmark import main

if __name__ == "__main__":  # a record the disk refuses: one line, exit 73
    sys.exit(storage.exit_status(lambda: main(exit_at_once=True)))
