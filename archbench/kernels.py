"""The command line of one HPC kernel benchmark (``python -m archbench.kernels --help``): :mod:`archbench.workloads.kernels.cli`."""

import sys

from archbench.workloads.kernels.cli import main

if __name__ == "__main__":
    sys.exit(main())
