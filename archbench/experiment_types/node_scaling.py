"""Multi-node scaling (DESIGN.md experiment 4): one configuration on 1, 2, 4, ... nodes.

With ``best: <hybrid experiment>`` the configurations are placeholders marked
``"best_of": <name>``; the supervisor fills each in from that sweep's finished records
with ``archbench.tables.best.resolve_best``, the same choice the ``hybrid_best`` table
publishes.
"""

from __future__ import annotations

from archbench.experiment_types.base import (
    ExperimentType,
    controller_tuning,
    controllers,
    dedupe,
    node_counts,
    on_off,
    product,
    schema_fragment,
    thread_count,
    training_axes,
    training_configuration,
)
from archbench.systems import cores_of
from archbench.validate import ConfigError

SCHEMA = schema_fragment("""
description: >
  Multi-node scaling (experiment 4): one configuration on 1, 2, 4, ... nodes with
  Horovod, MultiWorkerMirrored or parameter servers; either explicit
  (processes_per_node, threads_per_process, batch_sizes) or `best`, the best
  configuration of a hybrid experiment for each system and model, chosen once that
  sweep has finished.
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}, {$ref: "#/$defs/distributed"}]
required: [models]
# without `best` the configuration is explicit (the expander rejects both together)
if: {not: {required: [best]}}
then: {required: [batch_sizes]}
properties:
  nodes:
    description: Node counts (those above the system's nodes are skipped); `all` = 1, 2, 4, ... up to the system's nodes (default).
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
  strategies:
    type: array
    minItems: 1
    uniqueItems: true
    items: {$ref: "#/$defs/multi_process_strategy"}
    description: "Distribution: horovod (allreduce), mirrored (TF MultiWorkerMirroredStrategy), parameter_server (TF ParameterServerStrategy). Default [horovod]."
  parameter_servers:
    $ref: "#/$defs/positive_list"
    description: Parameter-server tasks for strategy parameter_server (an axis). Default [1].
  processes_per_node: {type: integer, minimum: 1, description: Worker processes per node (explicit configuration). Default 1.}
  threads_per_process: {type: integer, minimum: 1, description: Intra-op threads per process (explicit configuration). Default cores / processes_per_node.}
  best:
    type: string
    pattern: "^[A-Za-z0-9][A-Za-z0-9_-]*$"
    description: Name of a hybrid experiment of the campaign; each system x model runs its best processes x threads x batch (highest mean img/s).
unevaluatedProperties: false
""")


def expand(experiment: dict, system: dict) -> list[dict]:
    """Nodes 1, 2, 4, ... with one configuration per node: explicit (processes per node,
    threads, batch sizes) or ``best`` (placeholders resolved from a hybrid sweep);
    Horovod, MultiWorkerMirrored or parameter servers (their number swept)."""
    cores = cores_of(system)
    best = experiment.get("best")
    explicit = [k for k in ("batch_sizes", "processes_per_node", "threads_per_process",
                            "inter_threads") if k in experiment]
    if best and explicit:
        raise ConfigError(f"node_scaling: best takes processes, threads and batch from "
                          f"'{best}'; remove {', '.join(explicit)}")
    ppn = experiment.get("processes_per_node", 1)
    threads = experiment.get("threads_per_process", max(1, cores // ppn))
    out = []
    for nodes in node_counts(experiment, system, default="all"):
        for strategy in experiment.get("strategies", ["horovod"]):
            ps_list = experiment.get("parameter_servers", [1]) if strategy == "parameter_server" else [0]
            names = controllers(experiment, nodes) if strategy == "horovod" else ["mpi"]
            batches = [1] if best else experiment["batch_sizes"]
            inters = [0] if best else experiment.get("inter_threads", [1])
            for a in product(ps=ps_list, controller=names, batch=batches, inter=inters,
                             **training_axes(experiment)):
                tuning = controller_tuning(a["controller"])
                values = dict(model=a["model"], strategy=strategy, nodes=nodes,
                              vendor_library_enabled=on_off(a["vendor"]), data=a["data"],
                              scaling_unit="nodes")
                if strategy == "parameter_server":
                    values["parameter_servers"] = a["ps"]
                if best:  # placeholder: layout and batch come from the hybrid sweep
                    conf = training_configuration(
                        experiment, system, **values, processes_per_node=1, intra_threads=0,
                        inter_threads=0, batch_per_process=1, tuning={**tuning, "best_of": best})
                    conf["best_of"] = best
                else:
                    conf = training_configuration(
                        experiment, system, **values, processes_per_node=ppn,
                        intra_threads=threads, inter_threads=thread_count(a["inter"], threads),
                        batch_per_process=a["batch"], tuning=tuning)
                out.append(conf)
    return dedupe(out)


TYPE = ExperimentType(
    "node_scaling", expand, SCHEMA,
    tables=("summary", "node_scaling", "best_per_size", "efficiency_heatmap", "io_overhead",
            "vendor_speedup"),
    figures=("node_scaling", "scaling_speedup", "efficiency_heatmap", "io_overhead"))
