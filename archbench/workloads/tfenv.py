"""The environment every TensorFlow process of archbench runs with, in one place.

Legacy Keras (tf_keras): Horovod's optimizers and MultiWorkerMirrored fail under Keras 3
with two or more ranks. It must be set before TensorFlow is imported.
"""

from __future__ import annotations

import os

FRAMEWORK_ENV = {"TF_USE_LEGACY_KERAS": "1"}


def use_framework_env() -> None:
    """Set :data:`FRAMEWORK_ENV` in this process (before TensorFlow is imported)."""
    os.environ.update(FRAMEWORK_ENV)
