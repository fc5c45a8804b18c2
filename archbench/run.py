"""The command line of the supervisor of one measurement (``python -m archbench.run --help``): :mod:`archbench.execute.supervisor`."""

import sys

from archbench.execute.supervisor import main

if __name__ == "__main__":
    sys.exit(main())
