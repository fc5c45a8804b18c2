"""``python -m archbench.kernels KERNEL ...``: see :mod:`archbench.workloads.kernels.cli`."""

import sys

from archbench.workloads.kernels.cli import main

if __name__ == "__main__":
    sys.exit(main())
