"""Which system keys reach a measurement's spec (and so rerun it when edited): every key
but those the system schema lists under ``x-no-rerun``, and the supervisor still builds
the same command from them as from the whole system."""

from __future__ import annotations

import importlib

import pytest
from conftest import REPO

from archbench.core.validate import load_schema
from archbench.execute.supervisor import WORKERS
from archbench.plan.campaign import load_campaign_file
from archbench.plan.placeholders import is_placeholder
from archbench.plan.systems import no_rerun_keys, resolve_system, run_settings

CAMPAIGNS = sorted((REPO / "config" / "campaigns").glob("*.yaml")) + [REPO / "config/config.yaml"]


def test_every_no_rerun_key_is_a_system_key():
    assert no_rerun_keys() <= set(load_schema("system")["properties"])
    # documentation never reruns; what shapes a run always does
    assert {"description", "cpu_model", "interconnect"} <= no_rerun_keys()
    assert not {"name", "arch", "sockets", "cores_per_socket", "threads_per_core",
                "memory_per_node_gb", "partition", "slurm_extra", "container_runtime",
                "image", "launcher", "vendor_library", "env", "data_dir"} & no_rerun_keys()


def test_run_settings_leave_out_documentation_only():
    system = resolve_system("marenostrum4")
    settings = run_settings(system)
    assert "description" not in settings and "cpu_model" not in settings
    assert {k: v for k, v in system.items() if k not in no_rerun_keys()} == settings
    assert settings["cores_per_socket"] == 24 and settings["launcher"] == "srun"


@pytest.mark.parametrize("campaign", CAMPAIGNS, ids=[c.stem for c in CAMPAIGNS])
def test_the_supervisor_builds_the_same_command_from_the_run_settings(campaign):
    """Every measurement of every shipped campaign: the worker command from the spec's
    system equals the one from the whole system (so no key it reads is left out)."""
    loaded = load_campaign_file(campaign)
    checked = 0
    for m in loaded.measurements:
        if is_placeholder(m):  # resolved at run time (a sweep's best, a trial), then built the same way
            continue
        module = importlib.import_module(WORKERS[m["kind"]])
        system = loaded.systems[m["system"]]
        assert module.command_for(m, run_settings(system)) == module.command_for(m, system)
        checked += 1
    assert checked > 0
