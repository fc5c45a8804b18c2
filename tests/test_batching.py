"""Batching (campaign key measurements_per_job): which measurements share a Slurm job, what the plan
counts, and the job groups Snakemake forms from them (a dry run against the Slurm profile;
the real submission is tests/test_slurm.py)."""

from __future__ import annotations

import copy
import re

import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

from archbench.plan.batching import chunks, group_names
from archbench.plan.campaign import ConfigError, load_campaign, load_campaign_file, raw_path
from archbench.plan.submission import job_resources, plan_markdown, plan_table

BATCH_CAMPAIGN = REPO / "tests/campaigns/batch_slurm.yaml"


@pytest.fixture(scope="module")
def campaign():
    return load_campaign_file(BATCH_CAMPAIGN)


def resources_of(campaign):
    return lambda m: job_resources(m, campaign.systems[m["system"]])


def test_single_node_measurements_are_cut_in_campaign_order(campaign):
    cut = chunks(campaign.measurements, resources_of(campaign), size=3)
    assert [len(c) for c in cut] == [3, 2]
    assert [m for c in cut for m in c] == campaign.measurements
    # the too-short run shares the second job with an ordinary one
    assert [m["experiment"] for m in cut[1]] == ["threads", "too_short"]


def test_size_one_is_one_job_per_measurement(campaign):
    assert [len(c) for c in chunks(campaign.measurements, resources_of(campaign), size=1)] == [1] * 5
    assert group_names(campaign.measurements, resources_of(campaign), raw_path, size=1) == {}


def test_a_batch_closes_before_its_summed_time_limit_passes_the_bound(campaign):
    res = resources_of(campaign)
    # runtimes: 8, 8, 8, 8 (3 min + 5 margin), 5 (0.05 min + 5)
    cut = chunks(campaign.measurements, res, size=8, max_minutes=17)
    assert [len(c) for c in cut] == [2, 2, 1]
    assert all(sum(res(m)["runtime"] for m in c) <= 17 for c in cut)


def test_multi_node_best_and_differently_sized_runs_are_never_batched_together(campaign):
    ms = campaign.measurements[:4]
    base = resources_of(campaign)

    def res(m):  # resources as job_resources gives them, nodes and CPUs from the measurement
        return {**base({**m, "system": "testcluster"}), "nodes": m["nodes"],
                "cpus_per_task": m.get("cpus", 2)}

    multi = [{**ms[0], "nodes": 2}, {**ms[1], "nodes": 2}]
    best = [{**ms[2], "best_of": "sweep"}, {**ms[3], "best_of": "sweep"}]
    assert [len(c) for c in chunks(multi + best, res, size=8)] == [1, 1, 1, 1]
    odd_one = [ms[0], {**ms[1], "cpus": 1}, ms[2], ms[3]]
    assert [len(c) for c in chunks(odd_one, res, size=8)] == [3, 1]
    two_systems = ms[:2] + [{**m, "system": "other"} for m in ms[2:]]
    assert [{m["system"] for m in c} for c in chunks(two_systems, res, size=8)] == [
        {"testcluster"}, {"other"}]


def test_a_system_keeping_repetitions_on_the_same_nodes_is_never_batched(campaign):
    systems = {name: {**system, "same_nodes": True} for name, system in campaign.systems.items()}
    cut = chunks(campaign.measurements, resources_of(campaign), size=3, systems=systems)
    assert [len(c) for c in cut] == [1] * 5
    assert [len(c) for c in chunks(campaign.measurements, resources_of(campaign), size=3,
                                   systems=campaign.systems)] == [3, 2]


def test_group_names_cover_exactly_the_batches_of_two_or_more(campaign):
    names = group_names(campaign.measurements, resources_of(campaign), raw_path, size=4)
    paths = [raw_path(m) for m in campaign.measurements]
    assert len(set(names.values())) == 1 and set(names) == set(paths[:4])  # the fifth is alone


def test_plan_counts_slurm_jobs_after_batching_and_every_measurement(campaign):
    table = plan_table(campaign.measurements, campaign.systems, measurements_per_job=3)
    rows = {r.experiment: r for r in table.itertuples()}
    assert (rows["threads"].measurements, rows["threads"].jobs) == (4, 2)
    assert (rows["too_short"].measurements, rows["too_short"].jobs) == (1, 0)
    unbatched = plan_table(campaign.measurements, campaign.systems)
    assert list(unbatched["jobs"]) == list(unbatched["measurements"]) == [4, 1]
    # batching changes the job count, not the node-hours charged
    assert table["node_hours"].sum() == pytest.approx(unbatched["node_hours"].sum())
    assert "5 measurements in 2 Slurm jobs" in plan_markdown("batch-slurm", table)

    assert table["gpu_hours"].sum() == 0  # a CPU campaign charges no GPU


def test_plan_charges_gpu_hours_beside_node_hours():
    """GPU-hours = nodes x GPUs per node x hours at the time limit (the run's timeout plus
    the margin): 1 GPU; Horovod on 1 GPU, 2 GPUs on one node and 2 x 2 GPUs; none for the
    CPU run."""
    gpu = load_campaign_file(REPO / "tests/campaigns/gpu_slurm.yaml")
    table = plan_table(gpu.measurements, gpu.systems)
    hours = job_resources(gpu.measurements[0], gpu.systems["gpucluster"])["runtime"] / 60
    rows = {r.experiment: r for r in table.itertuples()}
    assert rows["one_gpu"].gpu_hours == pytest.approx(1 * hours)
    assert rows["gpus"].gpu_hours == pytest.approx((1 * 1 + 1 * 2 + 2 * 2) * hours)
    assert rows["gpus"].node_hours == pytest.approx((1 + 1 + 2) * hours)
    assert rows["cpu"].gpu_hours == 0
    assert f"{8 * hours:.2f} GPU-hours" in plan_markdown("gpu-slurm", table)


@pytest.mark.parametrize("key, value", [("measurements_per_job", 0), ("measurements_per_job", "8"),
                                        ("batch_max_minutes", 0)])
def test_a_bad_batch_key_is_one_line_naming_it(key, value):
    config = copy.deepcopy(yaml.safe_load(BATCH_CAMPAIGN.read_text()))
    config[key] = value
    with pytest.raises(ConfigError, match=key):
        load_campaign(config)


def test_the_old_key_batch_size_is_refused_naming_the_new_one():
    """The campaign's measurements per Slurm job were once ``batch_size``: one line."""
    config = copy.deepcopy(yaml.safe_load(BATCH_CAMPAIGN.read_text()))
    config["batch_size"] = config.pop("measurements_per_job")
    with pytest.raises(ConfigError, match=r"^batch_size: renamed measurements_per_job$"):
        load_campaign(config)
    with pytest.raises(ConfigError, match=r"^b\.yaml: batch_size: renamed measurements_per_job$"):
        load_campaign(config, source="b.yaml")


def test_dry_run_forms_one_group_job_per_batch(tmp_path):
    """Snakemake itself (not only our chunking) joins each batch's members into one group
    job (a group of independent jobs needs --group-components, which the workflow sets)."""
    work = copy_workflow(tmp_path)
    (work / "batch.yaml").write_text(BATCH_CAMPAIGN.read_text())
    proc = snakemake(work, "-n", "--profile", "profiles/slurm-test", "--configfile", "batch.yaml",
                     timeout=300)
    out = proc.stdout + proc.stderr
    assert sorted(re.findall(r"Group job (batch-testcluster-\d+)", out)) == [
        "batch-testcluster-0", "batch-testcluster-1"], out[-3000:]
    # the members of each group job, as Snakemake lists them under its header
    members = [block.count("rule run_measurement:")
               for block in re.split(r"Group job batch-testcluster-\d+", out)[1:]]
    assert sorted(members) == [2, 3], out[-3000:]
