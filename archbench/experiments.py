"""Training experiment types (DESIGN.md experiments 1-6, 8): each expands one experiment
on one system into configurations. Registered with ``campaign.experiment_type``."""

from __future__ import annotations

from archbench.campaign import cores_of, experiment_type, on_off, product, training_configuration


@experiment_type("thread_scaling")
def expand_thread_scaling(experiment: dict, system: dict) -> list[dict]:
    """One process; threads x batch sizes x vendor library on/off x data x inter threads."""
    threads = experiment.get("threads", "all")
    if threads == "all":
        threads = list(range(1, cores_of(system) + 1))
    axes = product(model=experiment["models"], batch=experiment["batch_sizes"],
                   threads=threads, inter=experiment.get("inter_threads", [1]),
                   vendor=experiment.get("vendor_library", ["on"]),
                   data=experiment.get("data", ["synthetic"]))
    return [training_configuration(
        experiment, system, model=a["model"], batch_per_process=a["batch"],
        intra_threads=a["threads"], inter_threads=a["inter"],
        vendor_library_enabled=on_off(a["vendor"]), data=a["data"]) for a in axes]
