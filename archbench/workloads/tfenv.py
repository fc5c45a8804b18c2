"""The environment every training process of archbench runs with, in one place: what the
registered frameworks need set before they are imported (each entry's ``environment`` in
:data:`archbench.workloads.training.frameworks.FRAMEWORKS`), together, so that any
process a launcher starts (mpirun's ``-x``, the supervisor's, a container's) has it.
"""

from __future__ import annotations

import os

from archbench.workloads.training.frameworks import environment

FRAMEWORK_ENV = environment()


def use_framework_env() -> None:
    """Set :data:`FRAMEWORK_ENV` in this process (before a framework is imported)."""
    os.environ.update(FRAMEWORK_ENV)
