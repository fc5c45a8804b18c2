"""The framework boundary: what every framework shares (the launch helpers, the strategies'
registry) imports no framework, and PyTorch's training package never loads TensorFlow.
Each check imports its modules first, in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO

FRAMEWORK_MODULES = {"tensorflow", "torch"}


def frameworks_loaded_by(*modules: str) -> set[str]:
    """The framework modules in ``sys.modules`` of a fresh interpreter once it has
    imported ``modules``."""
    code = ("import importlib, json, sys\n"
            "for name in sys.argv[1:]:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return FRAMEWORK_MODULES & set(json.loads(proc.stdout.splitlines()[-1]))


@pytest.mark.parametrize("module", ["archbench.workloads.launch",
                                    "archbench.workloads.training.strategies"])
def test_what_the_frameworks_share_loads_neither(module):
    assert frameworks_loaded_by(module) == set()


def test_the_pytorch_loop_loads_no_tensorflow():
    loaded = frameworks_loaded_by("archbench.workloads.training.pytorch.loop",
                                  "archbench.workloads.training.pytorch.backends",
                                  "archbench.workloads.training.strategies")
    assert "tensorflow" not in loaded
