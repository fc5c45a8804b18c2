"""TensorFlow and Triton in one process, in the one order that works.

TensorFlow 2.21 and Triton (which the index's CUDA builds of torch install and torch
imports lazily: its FLOP counter, inductor) each carry LLVM. Loaded after TensorFlow,
Triton's LLVM registers a command-line option TensorFlow's already holds and the process
aborts ("Option 'bitcode-mdindex-threshold' registered more than once!"); loaded before,
both work. :func:`install` arms a finder that, the first time ``tensorflow`` is imported,
imports Triton first where it is installed. A worker runs one framework and never meets
the clash; a process that runs both (a test session, a script) must not abort on it.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys


class _TritonFirst(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow":
            sys.meta_path.remove(self)
            if "triton" not in sys.modules and importlib.util.find_spec("triton") is not None:
                import triton  # noqa: F401
        return None  # the usual finders import tensorflow itself


def install() -> None:
    """Arm the finder once, unless TensorFlow is already in (too late then)."""
    if "tensorflow" not in sys.modules and not any(isinstance(f, _TritonFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, _TritonFirst())
