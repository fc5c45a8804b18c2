"""What runs on the measured machine: the training frameworks, the kernels, and the launch
of their processes.

Importing it tells :mod:`archbench.core.provenance` where a process's CUDA stack is read
from: the registered training frameworks (:mod:`archbench.workloads.training.frameworks`),
imported only when a record asks for it.
"""

from archbench.core import provenance


def _framework_accelerators():
    from archbench.workloads.training import frameworks
    return frameworks.accelerator_fields()


provenance.ACCELERATOR_SOURCES.append(_framework_accelerators)
