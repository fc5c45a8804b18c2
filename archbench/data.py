"""The command line of write the small real-data sets (``python -m archbench.data --help``): :mod:`archbench.workloads.training.tensorflow.data`."""

import sys

from archbench.workloads.training.tensorflow.data import main

if __name__ == "__main__":
    sys.exit(main())
