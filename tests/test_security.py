"""Config values that can reach a shell or a job script are validated: hostile values are
rejected with one line naming the key, before anything runs."""

import copy

import pytest
import yaml
from conftest import REPO, snakemake

from archbench.plan.campaign import ConfigError, load_campaign

HOSTILE = ["; rm -rf ~", "$(touch /tmp/pwned)", "`id`", "debug\nrm -rf /", "a && b", "x' y"]


@pytest.fixture
def base():
    cfg = yaml.safe_load((REPO / "tests" / "campaigns" / "tiny.yaml").read_text())
    cfg["system_definitions"] = {"local": {"arch": "auto", "cores_per_socket": 2, "partition": "debug"}}
    return cfg


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("where", ["partition", "account", "data_dir", "slurm_extra", "cpu_model",
                                   "constraint", "qos", "reservation", "exclude", "nodelist",
                                   "env", "experiment_env", "campaign", "experiment_name"])
def test_hostile_values_are_rejected(base, where, value):
    cfg = copy.deepcopy(base)
    system = cfg["system_definitions"]["local"]
    expected = {"env": "system_definitions.local.env.X", "experiment_env": "experiments.threads.env.X",
                "campaign": "campaign: ", "experiment_name": "experiments: "}.get(
        where, f"system_definitions.local.{where}")
    if where == "env":
        system["env"] = {"X": value}
    elif where == "experiment_env":
        cfg["experiments"]["threads"]["env"] = {"X": value}
    elif where == "campaign":
        cfg["campaign"] = value
    elif where == "experiment_name":
        cfg["experiments"] = {value: cfg["experiments"]["threads"]}
    else:
        system[where] = value
    with pytest.raises(ConfigError) as info:
        load_campaign(cfg)
    message = str(info.value)
    assert message.startswith(expected) and "\n" not in message


def test_hostile_env_name_is_rejected(base):
    base["system_definitions"]["local"]["env"] = {"PATH;rm": "1"}
    with pytest.raises(ConfigError, match="system_definitions.local.env"):
        load_campaign(base)


def test_benign_values_pass(base):
    system = base["system_definitions"]["local"]
    system.update(account="proj-123", data_dir="/gpfs/data/imagenet_tfrecords",
                  slurm_extra="--hint=nomultithread", constraint="skylake&ib", qos="normal",
                  reservation="maint-1", exclusive=True, exclude=["c1", "c[10-12]"],
                  nodelist="c2", env={
                      "KMP_AFFINITY": "granularity=fine,compact,1,0", "KMP_BLOCKTIME": 0})
    assert load_campaign(base).measurements


@pytest.mark.workflow
def test_hostile_partition_stops_snakemake_before_any_job(workflow_copy, tmp_path):
    marker = tmp_path / "pwned"
    system = workflow_copy / "config" / "systems" / "local.yaml"
    system.write_text(system.read_text() + f"partition: \"x; touch {marker}\"\n")
    proc = snakemake(workflow_copy, "--profile", "profiles/local", "--configfile", "tiny.yaml",
                     check=False, timeout=120)
    assert proc.returncode != 0
    assert "archbench: invalid configuration: config/systems/local.yaml: partition" in proc.stderr
    assert not marker.exists() and not (workflow_copy / "results").exists()
