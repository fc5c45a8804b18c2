"""The command line of import published or other sites' results (``python -m archbench.importer --help``): :mod:`archbench.results.imports`."""

import sys

from archbench.results.imports import main

if __name__ == "__main__":
    sys.exit(main())
