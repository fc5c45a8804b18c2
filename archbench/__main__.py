"""``python -m archbench check CAMPAIGN.yaml | schema``: the ``archbench`` command
(:mod:`archbench.cli`)."""

import sys

from archbench.cli import main

if __name__ == "__main__":
    sys.exit(main())
