"""``python -m archbench.kernels KERNEL ...``: see :mod:`archbench.kernels.cli`."""

import sys

from archbench.kernels.cli import main

if __name__ == "__main__":
    sys.exit(main())
