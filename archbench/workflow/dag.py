"""The campaign as the workflow's DAG sees it: each measurement by its record path, and what
each job needs (inputs, spec, threads, resources, batch group), derived once while the
Snakefile is parsed. rules/common.smk's input functions look their answers up here.

Per-job look-ups run for every job of a 10,000-job DAG (some several times): each is
computed once per record path and cached.
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from archbench.core.metrics import DEFAULT_STATISTIC
from archbench.core.record import raw_path
from archbench.core.snakemake_api import per_job
from archbench.execute.specfiles import digest, spec_dir, spec_text
from archbench.plan import submission
from archbench.plan.batching import group_names
from archbench.plan.campaign import Campaign, experiments_of
from archbench.plan.containers import (
    build_command,
    image_file,
    pull_commands,
    shell_join,
    system_images,
    uri_scheme,
)
from archbench.plan.experiment_types.node_scaling import best_sources
from archbench.plan.placeholders import choice_file
from archbench.plan.plan_match import plans_of
from archbench.plan.slurm_requests import pinned_nodes
from archbench.plan.systems import run_settings
from archbench.results.collect import unplanned
from archbench.workloads.training.models import spec as model_spec

# The small JPEG TFRecord set rule make_tfrecords writes (a system's data_dir may name it).
GENERATED_TFRECORDS = "results/data/tfrecords"
RECORD_FIELDS = {"system": "{system}", "experiment": "{experiment}", "config_id": "{config_id}",
                 "repetition": "{rep}"}
# run_measurement's output: the record path (archbench.core.record.raw_path) as a pattern
RECORD_PATTERN = os.path.join("results", raw_path(RECORD_FIELDS))


def record_path(wildcards: Any) -> str:
    """The record path of a run_measurement job (from its wildcards)."""
    return os.path.join("results", raw_path({"system": wildcards.system, "experiment": wildcards.experiment,
                                             "config_id": wildcards.config_id, "repetition": wildcards.rep}))


def best_layouts(measurement: Mapping) -> str:
    """Where rule choose_best_layouts writes the layout of a `best` measurement."""
    return f"results/best/{measurement['system']}/{measurement['experiment']}.json"


class CampaignDag:
    """The jobs of ``campaign`` (its ``config`` as Snakemake merged it)."""

    def __init__(self, campaign: Campaign, config: Mapping):
        self.campaign, self.config, self.name = campaign, config, campaign.name
        self.systems = campaign.systems
        self.statistic = config.get("statistic", DEFAULT_STATISTIC)
        self.measurements = {f"results/{raw_path(m)}": m for m in campaign.measurements}
        self._inputs: dict[str, tuple] = {}
        self._specs: dict[str, str] = {}
        self._resources: dict[str, dict] = {}
        # Batching (campaign key measurements_per_job; archbench/plan/batching.py): each chunk of
        # measurements is one job group, i.e. one Slurm job.
        self.measurements_per_job = int(config.get("measurements_per_job", 1))
        self.batch_max_minutes = config.get("batch_max_minutes")
        self.batch_groups = group_names(
            campaign.measurements, lambda m: self.resources(f"results/{raw_path(m)}"),
            lambda m: f"results/{raw_path(m)}", size=self.measurements_per_job,
            max_minutes=self.batch_max_minutes, systems=self.systems)
        self.group_names = tuple(dict.fromkeys(self.batch_groups.values()))
        # The supervisor reads its spec from spec_dir/<digest>.json (execute/specfiles.py).
        self.spec_dir = spec_dir(campaign.name)
        self._index_sweeps()

    def _index_sweeps(self) -> None:
        """The records of each sweep (system, experiment); for each layouts file, the
        records of every sweep its experiment's `best` names on its system, and the `best`
        measurements it resolves."""
        sweeps: dict[tuple, list[str]] = {}
        for path, m in self.measurements.items():
            sweeps.setdefault((m["system"], m["experiment"]), []).append(path)
        self.best_sources: dict[str, set[str]] = {}
        self.best_measurements: dict[str, list[dict]] = {}
        self.tune_rounds: dict[str, list[dict]] = {}  # round file -> its placeholders
        for m in self.measurements.values():
            if "tune_round" in m:
                self.tune_rounds.setdefault(str(choice_file("results", m)), []).append(m)
            for source in best_sources(m.get("best_of")):
                self.best_sources.setdefault(best_layouts(m), set()).update(
                    sweeps.get((m["system"], source), ()))
            if m.get("best_of"):
                self.best_measurements.setdefault(best_layouts(m), []).append(m)

    # ------------------------------------------------------------ records

    def planned_records(self, paths: Iterable[str]) -> dict:
        """What the campaign planned for each record path of ``paths`` (a `best`
        measurement: the layout chosen for it, archbench/plan/plan_match.py)."""
        return plans_of("results", ((p, self.measurements[p]) for p in paths))

    def record_paths(self, *, on_disk: bool = False) -> list[str]:
        """Every record of the campaign, or (``on_disk``) those present."""
        return [p for p in sorted(self.measurements) if not on_disk or Path(p).exists()]

    def unplanned_records(self) -> list[str]:
        """The record files under results/raw the campaign does not plan, each with its
        reason (another campaign's, or left from an edited one): listed and excluded by
        collection, never moved."""
        return unplanned("results/raw", self.measurements, self.name)

    def sweep_records(self, system: str, experiment: str) -> list[str]:
        """The records rule choose_best_layouts chooses from."""
        return sorted(self.best_sources[f"results/best/{system}/{experiment}.json"])

    # ------------------------------------------------------------ run_measurement jobs

    def inputs(self, path: str) -> dict:
        """The named inputs of a run_measurement job, those it has: its image, best
        listing, data and same-node anchor."""
        if path not in self._inputs:
            m = self.measurements[path]
            self._inputs[path] = (("image", self.image_input(m)), ("best", self.best_input(m)),
                                  ("round", self.round_input(m)),
                                  ("data", self.data_input(m)), ("anchor", self.anchor_input(m)))
        return {k: list(v) if isinstance(v, list) else v for k, v in self._inputs[path] if v}

    def image_input(self, m: Mapping) -> str | list:
        """The image a measurement runs in ([] for runtime none): built, pulled or prebuilt."""
        return image_file(self.systems[m["system"]], m.get("framework")) or []

    def best_input(self, m: Mapping) -> list[str]:
        """For a `best` node-scaling measurement, the layouts rule choose_best_layouts chose
        from the hybrid sweep's records (one file per system and experiment, so the DAG has
        one edge per record, not one per record and best measurement)."""
        return [best_layouts(m)] if m.get("best_of") else []

    def round_input(self, m: Mapping) -> list[str]:
        """For a tuner's trial, the file of its round (rule tune_round), which says what it runs."""
        return [str(choice_file("results", m))] if "tune_round" in m else []

    def round_inputs(self, round_file: str) -> dict:
        """Rule tune_round's inputs: the records and the file of the round before (none
        for a study's first round)."""
        first = self.tune_rounds[round_file][0]
        if first["tune_round"] == 0:
            return {}
        previous = str(choice_file("results", {**first, "tune_round": first["tune_round"] - 1}))
        return {"previous": previous,
                "records": sorted(f"results/{raw_path(m)}" for m in self.tune_rounds[previous])}

    def tune_best_files(self) -> list[str]:
        """Where rule tune_best writes what each study found (one per study folder)."""
        return sorted({str(Path(f).parent / "best.json") for f in self.tune_rounds})

    def last_round(self, best_file: str) -> str:
        """The file of the last round of the study whose best.json is ``best_file``."""
        rounds = [f for f in self.tune_rounds if str(Path(f).parent / "best.json") == best_file]
        return max(rounds, key=lambda f: self.tune_rounds[f][0]["tune_round"])

    def best_inputs(self, best_file: str) -> dict:
        """Rule tune_best's inputs: the last round's file and records."""
        last = self.last_round(best_file)
        return {"previous": last, "records": sorted(f"results/{raw_path(m)}" for m in self.tune_rounds[last])}

    def tune_experiment(self, round_file: str) -> tuple[dict, dict]:
        """The tune experiment (defaults filled in) and system of a round file."""
        first = self.tune_rounds[round_file][0]
        return experiments_of(self.config)[first["experiment"]], self.systems[first["system"]]

    def data_input(self, m: Mapping) -> list[str]:
        """The generated TFRecord set, for real-data runs of a model that reads the system's
        data_dir when that is the workflow's own TFRecord set."""
        data_dir = self.systems[m["system"]].get("data_dir", "")
        reads_data_dir = m["kind"] == "train" and model_spec(m["model"]).dataset == "imagenet"
        if m.get("data") == "real" and reads_data_dir and data_dir == GENERATED_TFRECORDS:
            return [data_dir]
        return []

    def anchor_input(self, m: Mapping) -> str | list:
        """Repetition 0's record, for a later repetition on a system keeping a
        configuration's repetitions on the same nodes (``same_nodes``); else none."""
        if m["repetition"] == 0 or not self.systems[m["system"]].get("same_nodes"):
            return []
        return f"results/{raw_path({**m, 'repetition': 0})}"

    def spec(self, path: str) -> str:
        """The text of a measurement's spec: the measurement, the settings of its system
        that affect it (``x-no-rerun`` of the system schema left out: editing a system's
        description reruns nothing), and where a `best` one finds its layout (chosen by the
        statistic the tables report)."""
        if path not in self._specs:
            m = self.measurements[path]
            spec = {"measurement": m, "system": run_settings(self.systems[m["system"]])}
            if m.get("best_of"):
                spec["best_layouts"] = best_layouts(m)
                spec["statistic"] = self.statistic
            if "tune_round" in m:
                spec["tune_round"] = str(choice_file("results", m))
            self._specs[path] = spec_text(spec)
        return self._specs[path]

    def spec_digest(self, path: str) -> str:
        """The digest of the supervisor's spec (the name of its file in spec_dir): a changed
        spec reruns the measurement."""
        return digest(self.spec(path))

    def threads(self, path: str) -> int:
        """Cores a measurement occupies on one node."""
        m = self.measurements[path]
        return m.get("processes_per_node", 1) * max(m.get("intra_threads") or 0, 1)

    def resources(self, path: str, anchor: str | None = None) -> dict:
        """Portable resources of a measurement (the Slurm executor maps them to sbatch);
        with ``anchor``, pinned to the nodes that record (repetition 0's) names."""
        m = self.measurements[path]
        if anchor:
            with open(anchor) as f:  # missing in a dry run: Snakemake defers the value
                pinned = pinned_nodes(json.load(f))
            return submission.job_resources(m, self.systems[m["system"]], pinned)
        if path not in self._resources:
            self._resources[path] = submission.job_resources(m, self.systems[m["system"]])
        return self._resources[path]

    def measurement_resources(self, path_of: Callable[[Any], str]) -> dict:
        """run_measurement's resources: every key archbench.plan.submission.job_resources gives,
        as a constant when all the campaign's measurements have the same value, else as a
        function of the job (``path_of`` its wildcards give its record path; Snakemake
        calls each function of each job: constants spare a 10,000-job dry run most of those
        calls). slurm_extra is pinned to repetition 0's nodes, read from the anchor input,
        when the campaign keeps repetitions on the same nodes."""
        jobs = [{**submission.RESOURCE_DEFAULTS, **self.resources(path)} for path in self.measurements]
        pinned = any(self.anchor_input(m) for m in self.measurements.values())
        resources = {}
        for key in sorted(set().union(*jobs)):
            first = jobs[0].get(key)
            if key == "slurm_extra" and pinned:
                resources[key] = per_job(lambda wildcards, input: self.resources(
                    path_of(wildcards), input.get("anchor")).get("slurm_extra", ""))
            elif any(job.get(key) != first for job in jobs):
                resources[key] = self._job_resource(key, path_of)
            elif first is not None:
                resources[key] = first
        return resources

    def _job_resource(self, key: str, path_of: Callable[[Any], str]) -> Callable:
        """The function giving resource ``key`` of a run_measurement job (None: not set)."""
        default = submission.RESOURCE_DEFAULTS.get(key)
        return per_job(lambda wildcards: self.resources(path_of(wildcards)).get(key, default))

    # ------------------------------------------------------------ images

    @cached_property
    def built_images(self) -> dict[str, dict]:
        """image file -> the first system that runs it, for images built from containers/*.def."""
        return {image_file({**s, "image": name}): s for s in reversed(list(self.systems.values()))
                if image_file(s) and not s.get("image_uri") for name in system_images(s)}

    @cached_property
    def pulled_images(self) -> dict[str, dict]:
        """image file -> the first system that pulls it from its image_uri (a URI, not a path)."""
        return {image_file(s): s for s in reversed(list(self.systems.values()))
                if s["container_runtime"] != "none" and uri_scheme(s.get("image_uri") or "")}

    def build_command(self, name: str, image: str) -> str:
        """The shell command building image file ``image`` from containers/<name>.def."""
        system = self.built_images[image]
        return shell_join(build_command(system["container_runtime"], f"containers/{name}.def", image))

    def pull_command(self, image: str) -> str:
        """The shell command pulling image file ``image`` from its system's image_uri."""
        system = self.pulled_images[image]
        return " && ".join(shell_join(argv) for argv in
                           pull_commands(system["container_runtime"], system["image_uri"], image))

    def image_partition(self, image: str) -> str:
        """The partition of the system an image is built or pulled for (its architecture)."""
        return {**self.built_images, **self.pulled_images}.get(image, {}).get("partition", "")
