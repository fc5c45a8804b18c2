"""config/campaigns/numerics.yaml plans every precision, fp32 math mode and graph each
system kind can run, each beside its fp32-strict-eager twin (the precision_speedup table's
pairs), for ResNet-50 and ViT-B/16 in both frameworks. The Slurm-profile dry run of every
shipped campaign is tests/test_workflow.py's; the matrix expected here is written out as
plain data, not derived from the frameworks' registry."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml
from conftest import REPO

from archbench.core.fields import NUMERICS_DEFAULTS
from archbench.plan.campaign import load_campaign
from archbench.workloads.training.models import MODELS

CAMPAIGN = REPO / "config" / "campaigns" / "numerics.yaml"
CPU = {("fp32", "strict"), ("fp32", "bf16"), ("bf16", "strict")}  # math mode bf16 is fp32's
NO_VENDOR = {("fp32", "strict"), ("bf16", "strict")}  # math mode bf16 is oneDNN's
GPU = {("fp32", "strict"), ("fp32", "tf32"), ("bf16", "strict"), ("fp16", "strict")}
MODES = {"marenostrum4": CPU, "dibona": CPU, "power9": NO_VENDOR, "kebnekaise-v100": GPU}
ARCH = {"marenostrum4": "x86_64", "dibona": "aarch64", "power9": "ppc64le",
        "kebnekaise-v100": "x86_64"}
FRAMEWORKS = ("tensorflow", "pytorch")
GRAPHS = ("eager", "compiled")
# Power9's PyTorch is Debian's 1.13.1 (containers/ppc64le-debian.def): fp32 strict eager only
ONLY = {("power9", "pytorch"): ({("fp32", "strict")}, ("eager",))}
REPS = 3


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load(CAMPAIGN.read_text())


@pytest.fixture(scope="module")
def measurements(config) -> list[dict]:
    """The campaign's measurements; before the ViT models are registered, those of the
    models that are (the file names vit_b16 all the same: see the first test)."""
    planned = {**config, "defaults": {**config["defaults"], "models": [
        m for m in config["defaults"]["models"] if m in MODELS]}}
    return load_campaign(planned).measurements


def setting(m: dict, name: str) -> str:
    return m.get(name) or NUMERICS_DEFAULTS[name]


def test_resnet50_and_vit_b16_one_node_of_each_system_kind(config):
    assert config["defaults"]["models"] == ["resnet50", "vit_b16"]
    assert config["defaults"]["image_size"] == 224
    assert sorted(config["systems"]) == sorted(MODES)
    assert {ARCH[s] for s in MODES} == {"x86_64", "aarch64", "ppc64le"}


def test_every_mode_a_system_kind_runs_in_both_frameworks(measurements):
    planned = Counter((m["system"], m["model"], m["framework"], setting(m, "precision"),
                       setting(m, "math_mode"), setting(m, "graph")) for m in measurements)
    models = sorted({m["model"] for m in measurements})
    assert "resnet50" in models and set(models) <= {"resnet50", "vit_b16"}
    runs = {(system, framework): ONLY.get((system, framework), (modes, GRAPHS))
            for system, modes in MODES.items() for framework in FRAMEWORKS}
    expected = Counter({(system, model, framework, precision, math_mode, graph): REPS
                        for (system, framework), (modes, graphs) in runs.items()
                        for model in models for precision, math_mode in modes
                        for graph in graphs})
    assert planned == expected
    for m in measurements:
        assert (m["nodes"], m["processes_per_node"], m["strategy"]) == (1, 1, "single")
        assert (m.get("device") == "gpu") == (m["system"] == "kebnekaise-v100")


def test_every_configuration_has_its_fp32_strict_eager_twin(measurements):
    def identity(m: dict) -> tuple:
        return tuple(sorted((k, str(v)) for k, v in m.items()
                            if k not in (*NUMERICS_DEFAULTS, "config_id", "repetition")))
    twins = {identity(m) for m in measurements
             if all(setting(m, k) == v for k, v in NUMERICS_DEFAULTS.items())}
    assert all(identity(m) in twins for m in measurements)
