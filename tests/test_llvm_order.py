"""TensorFlow then Triton in one process: the abort archbench.core.llvm_order avoids."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

TF_THEN_TRITON = "import tensorflow; from torch.utils.flop_counter import FlopCounterMode; print('both')"

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                reason="no Triton installed (a CPU build of torch): no clash")


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_triton_loaded_after_tensorflow_aborts_the_process():
    """The clash itself: when it is gone upstream, llvm_order can go too."""
    done = run(TF_THEN_TRITON)
    assert done.returncode != 0 and "registered more than once" in done.stderr


def test_with_archbench_imported_first_both_load():
    done = run("import archbench; " + TF_THEN_TRITON)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["both"]
