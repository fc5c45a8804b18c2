"""Multi-node scaling (docs/experiments.md, experiment 4): one configuration on 1, 2, 4,
... nodes.

With ``best: <hybrid experiment>`` (or a list of them) the configurations are placeholders
marked ``"best_of": <name or list>``; the supervisor fills each in from that sweep's finished records
with ``archbench.results.tables.best.resolve_best``, the same choice the ``hybrid_best`` table
publishes.
"""

from __future__ import annotations

from archbench.core.hardware import cores_of
from archbench.core.validate import ConfigError
from archbench.plan.experiment_types.base import (
    ExperimentType,
    controller_tuning,
    controllers,
    dedupe,
    devices,
    gpu_fields,
    gpus_fit,
    node_counts,
    powers_of_two,
    process_threads,
    product,
    schema_fragment,
    skip,
    swept,
    system_gpus,
    thread_count,
    training_axes,
    training_configuration,
)
from archbench.workloads.training.strategies import STRATEGIES, update_strategies

SCHEMA = schema_fragment("""
description: >
  Multi-node scaling (experiment 4): one configuration on 1, 2, 4, ... nodes with
  Horovod, MultiWorkerMirrored or parameter servers; either explicit
  (processes_per_node, threads_per_process, batch_per_process) or `best`, the best
  configuration of a hybrid experiment for each system and model, chosen once that
  sweep has finished.
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}, {$ref: "#/$defs/distributed"}]
required: [models]
# without `best` the configuration is explicit (the expander rejects both together)
if: {not: {required: [best]}}
then: {$ref: "#/$defs/training_required"}
properties:
  nodes:
    description: Node counts (those above the system's nodes are skipped); `all` = 1, 2, 4, ... up to the system's nodes (default).
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
  strategies:
    type: array
    minItems: 1
    uniqueItems: true
    items: {$ref: "#/$defs/multi_process_strategy"}
    description: "Distribution: registered multi-process strategies (each described under $defs/multi_process_strategy); one with variable updates runs its first (parameter_server: the synchronous parameter_server). Default [horovod]. Give this or variable_update."
  variable_update:
    type: array
    minItems: 1
    uniqueItems: true
    items: {$ref: "#/$defs/variable_update_name"}
    description: >
      The strategy axis in tf_cnn_benchmarks' words (its --variable_update), instead of
      `strategies`: parameter_server (synchronous, variables on the parameter servers, the
      mean gradient of all workers applied once per step), distributed_replicated
      (synchronous, a replica per worker, gradients aggregated on the parameter servers
      and copied back), ps_async (TF2's asynchronous ParameterServerStrategy with a
      coordinator task), horovod, mirrored (MultiWorkerMirrored). A variable update runs
      the strategy that registers it (the first three: parameter_server) and is recorded.
  parameter_servers:
    description: >
      Parameter-server tasks of the parameter-server updates (an axis). Default [1]. At
      each size the counts above its workers are skipped (as node counts beyond the
      system's are); a count above the workers of every size is an error. `all` = 1, 2,
      4, ... up to the size's workers, and the workers themselves (CSCS 2017 Sec. 5.1
      tried PS counts from 1 to the number of workers at each size).
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
  ps_placement:
    enum: [colocated, separate]
    description: >
      Where the parameter servers run: colocated (default) = beside the workers on their
      nodes, sharing their cores (CSCS 2017 Sec. 5.3); separate = each on a node of its
      own, which the plan counts (CESGA 2018's PS node). `nodes` counts the workers'
      nodes either way; on Slurm each node runs processes_per_node workers.
  ps_variable_placement:
    enum: [round_robin, greedy]
    description: >
      How variables are spread over the parameter servers: round_robin (default, the
      order they are created) or greedy = each on the server with the fewest bytes so far
      (tf_cnn_benchmarks' greedy load balancing, CSCS 2017 Fig. 4).
  processes_per_node: {type: integer, minimum: 1, description: Worker processes per node (explicit configuration). Default 1.}
  threads_per_process:
    $ref: "#/$defs/process_threads"
    description: "Intra-op threads per process (explicit configuration): a number (0 = TensorFlow decides), `cores` = cores / processes_per_node (default) or `cores_minus_one` = cores / processes_per_node - 1 (a core per process left to Horovod, OSU 2019 Sec. IX)."
  best:
    description: >
      Name of a hybrid experiment of the campaign, or a list of them (e.g. one sweep per
      system or model, each with its own batch sizes); each system x model runs its best
      processes x threads x batch (highest mean img/s) over the named sweeps.
    oneOf:
      - {type: string, pattern: "^[A-Za-z0-9][A-Za-z0-9_-]*$"}
      - type: array
        minItems: 1
        uniqueItems: true
        items: {type: string, pattern: "^[A-Za-z0-9][A-Za-z0-9_-]*$"}
  scaling_unit:
    enum: [nodes, workers]
    description: >
      What the series counts (speedup and efficiency are over it) on CPUs: nodes (default)
      or workers, as CESGA 2018 Table 3 does where its parameter server takes no worker.
      GPU configurations always count GPUs.
  device:
    $ref: "#/$defs/device"
    description: "cpu and/or gpu (default [cpu]); GPU configurations run one process per GPU (gpus_per_node or gpus) and count GPUs (scaling_unit gpus)."
  gpus_per_node:
    $ref: "#/$defs/positive_list"
    description: >
      GPU configurations (device gpu): GPUs used per node, an axis; one worker process
      per GPU (processes_per_node = GPUs per node), gpus = nodes x GPUs per node. Default:
      all the system's GPUs per node. A count above the system's is skipped.
  gpus:
    description: >
      GPU configurations: total GPU counts instead of `nodes` and `gpus_per_node`, each
      packed on as few nodes as hold it (1, 2, 4, 8 GPUs on one 8-GPU node, then 16 on two,
      as CSCS 2017 Fig. 10 and Table 3); `all` = 1, 2, 4, ... up to the system's GPUs. A
      count that does not fill whole nodes past the first, or needs more nodes than the
      system has, is skipped.
    oneOf: [{$ref: "#/$defs/positive_list"}, {const: all}]
unevaluatedProperties: false
""")


def best_sources(best_of: str | list[str] | None) -> list[str]:
    """The hybrid experiments a ``best_of`` marker names: one name or a list of them."""
    if not best_of:
        return []
    return [best_of] if isinstance(best_of, str) else list(best_of)


def check_ps_counts(experiment: dict, workers: list[int]) -> None:
    """ConfigError naming ``parameter_servers`` when a count exceeds the workers of every
    size the experiment runs (a parameter server without a worker to serve)."""
    counts = experiment.get("parameter_servers", [1])
    if counts == "all" or not workers:
        return
    over = [c for c in counts if c > max(workers)]
    if over:
        raise ConfigError(f"parameter_servers: {', '.join(map(str, over))} above the "
                          f"{max(workers)} workers of the largest size")


def parameter_server_counts(experiment: dict, workers: int) -> list[int]:
    """The parameter-server counts tried with ``workers`` workers: the experiment's list up
    to the workers, or for ``all`` 1, 2, 4, ... up to the workers plus the workers count."""
    counts = experiment.get("parameter_servers", [1])
    if counts != "all":
        fitting = [c for c in counts if c <= workers]
        if not fitting:  # that size would silently drop out of the series
            raise ConfigError(f"parameter_servers: none of {counts} fits the {workers} workers "
                              "of a size the experiment runs (add a count at most that)")
        return fitting
    return sorted({*powers_of_two(workers), workers})


def strategy_runs(experiment: dict) -> list[tuple[str, str | None]]:
    """(strategy, variable update or None) of each value of the strategy axis: the
    ``variable_update`` list (an update runs the strategy that registers it, any other
    value is a strategy of its own), or ``strategies`` (each with its first variable
    update: parameter_server's synchronous parameter_server)."""
    if "variable_update" in experiment and "strategies" in experiment:
        raise ConfigError("variable_update: give it or strategies, not both")
    if "variable_update" in experiment:
        owners = update_strategies()
        return [(owners[v], v) if v in owners else (v, None) for v in experiment["variable_update"]]
    return [(s, next(iter(STRATEGIES[s].variable_updates), None))
            for s in experiment.get("strategies", ["horovod"])]


def has_parameter_servers(strategy: str) -> bool:
    """Whether registered ``strategy`` runs parameter-server tasks (an axis of their count)."""
    return STRATEGIES[strategy].parameter_servers


def check_ps_placement(experiment: dict, system: dict, runs: list[tuple[str, str | None]]) -> None:
    """ConfigError naming the key when the parameter servers cannot be placed as asked on
    ``system``: the largest PS count above the workers of every size, or nodes of their
    own beyond the system's nodes or without srun."""
    if not any(has_parameter_servers(s) for s, _ in runs):
        for key in ("parameter_servers", "ps_placement", "ps_variable_placement"):
            if key in experiment:
                updates = [u for u, s in update_strategies().items() if has_parameter_servers(s)]
                raise ConfigError(f"{key}: only the parameter-server updates take it "
                                  f"(variable_update {', '.join(updates)})")
        return
    if experiment.get("ps_placement") != "separate":
        return
    if any(v == "ps_async" for _, v in runs):
        raise ConfigError("ps_placement: separate is for the synchronous updates; ps_async "
                          "places its coordinator and servers beside the workers")
    if system.get("launcher") != "srun":
        raise ConfigError(f"ps_placement: separate needs nodes of their own, system "
                          f"'{system['name']}' has launcher {system.get('launcher', 'local')} (needs srun)")
    if experiment.get("processes_per_node", 1) != 1:
        raise ConfigError("ps_placement: separate runs one worker process per node "
                          "(processes_per_node 1)")


def ps_layouts(experiment: dict, system: dict, *, nodes: int, workers: int) -> list[int]:
    """The parameter-server counts of one size whose placement fits ``system``: with
    ``ps_placement: separate`` the workers' nodes plus one per server must exist."""
    counts = parameter_server_counts(experiment, workers)
    if experiment.get("ps_placement") != "separate":
        return counts
    fitting = [c for c in counts if nodes + c <= system["nodes"]]
    for c in counts:
        if c not in fitting:
            skip(f"nodes {nodes} + {c} parameter-server nodes > the system's {system['nodes']}")
    return fitting


def gpu_layouts(experiment: dict, system: dict) -> list[tuple[int, int]]:
    """(nodes, GPUs per node) of the GPU configurations: ``gpus`` packed on as few nodes as
    hold each count, or ``nodes`` x ``gpus_per_node`` (default: the system's GPUs per
    node). Layouts the system cannot hold are skipped with the reason."""
    have = system_gpus(system)
    if "gpus" in experiment:
        for key in ("nodes", "gpus_per_node"):
            if key in experiment:
                raise ConfigError(f"gpus: give it or {key}, not both (gpus packs each count "
                                  "on as few nodes as hold it)")
        if not gpus_fit(1, system):
            return []
        counts = experiment["gpus"]
        if counts == "all":
            counts = powers_of_two(have * system["nodes"])
        out = []
        for count in counts:
            per_node = min(count, have)
            nodes = -(-count // per_node)
            if nodes * per_node != count:
                skip(f"gpus {count} do not fill whole nodes of {have} GPUs")
            elif nodes > system["nodes"]:
                skip(f"gpus {count} need {nodes} nodes > the system's {system['nodes']}")
            else:
                out.append((nodes, per_node))
        return out
    per_node = experiment.get("gpus_per_node", [have] if have else [1])
    sizes = node_counts(experiment, system, default="all")
    return [(n, g) for g in per_node if gpus_fit(g, system) for n in sizes]


def layouts(experiment: dict, system: dict) -> list[tuple[str, int, int]]:
    """(device, nodes, processes per node) of every size the experiment runs: the CPU
    sizes (``nodes`` x ``processes_per_node``), then the GPU ones (one process per GPU)."""
    out = []
    kinds = devices(experiment)
    if "cpu" in kinds:
        ppn = experiment.get("processes_per_node", 1)
        out += [("cpu", n, ppn) for n in node_counts(experiment, system, default="all")]
    if "gpu" in kinds:
        out += [("gpu", n, g) for n, g in gpu_layouts(experiment, system)]
    return out


def check_gpu_keys(experiment: dict) -> None:
    """ConfigError for GPU keys without GPU runs, or a GPU run archbench cannot place."""
    kinds = devices(experiment)
    if "gpu" not in kinds:
        for key in ("gpus_per_node", "gpus"):
            if key in experiment:
                raise ConfigError(f"{key}: only GPU configurations take it (add device: [gpu])")
        return
    if experiment.get("best"):
        raise ConfigError("best: picks a CPU layout of a hybrid sweep; GPU runs take "
                          "batch_per_process and one process per GPU")
    if "ps_async" in experiment.get("variable_update", []):
        raise ConfigError("variable_update: ps_async does not run on GPUs here (its steps "
                          "run on remote workers whose placement is not recorded)")
    if "cpu" not in kinds and "processes_per_node" in experiment:
        raise ConfigError("processes_per_node: GPU runs start one process per GPU "
                          "(gpus_per_node); remove it or add device cpu")


def expand(experiment: dict, system: dict) -> list[dict]:
    """Nodes 1, 2, 4, ... with one configuration per node: explicit (processes per node,
    threads, batch sizes) or ``best`` (placeholders resolved from a hybrid sweep);
    Horovod, MultiWorkerMirrored or parameter servers (their number swept). On GPUs
    (``device: [gpu]``) each node runs one process per GPU it uses, and the series counts
    GPUs."""
    cores = cores_of(system)
    best = experiment.get("best")
    explicit = [k for k in ("batch_per_process", "processes_per_node", "threads_per_process",
                            "inter_threads") if k in experiment]
    if best and explicit:
        raise ConfigError(f"best: takes processes, threads and batch from "
                          f"'{best}'; remove {', '.join(explicit)}")
    check_gpu_keys(experiment)
    runs = strategy_runs(experiment)
    check_ps_placement(experiment, system, runs)
    sizes = layouts(experiment, system)
    check_ps_counts(experiment, [n * ppn for _, n, ppn in sizes])
    tuning_ps = {k: experiment[k] for k in ("ps_placement", "ps_variable_placement")
                 if experiment.get(k) not in (None, "colocated", "round_robin")}
    out = []
    for device, nodes, ppn in sizes:
        # GPU runs: the host threads feeding each GPU, cores / processes per node unless set
        threads = process_threads(experiment.get("threads_per_process", "cores"), cores=cores,
                                  processes_per_node=ppn)
        on_gpus = gpu_fields(nodes=nodes, gpus_per_node=ppn) if device == "gpu" else {}
        unit = "gpus" if on_gpus else experiment.get("scaling_unit", "nodes")
        for strategy, update in runs:
            ps_list = (ps_layouts(experiment, system, nodes=nodes, workers=nodes * ppn)
                       if has_parameter_servers(strategy) else [0])
            names = controllers(experiment, nodes) if strategy == "horovod" else ["mpi"]
            placeholder = {"batch_per_process": [1]} if best else {}
            inters = [0] if best else experiment.get("inter_threads", [1])
            for a in product(ps=ps_list, controller=names, inter=inters,
                             **training_axes(experiment, **placeholder)):
                tuning = controller_tuning(a["controller"])
                values = {**swept(a), "strategy": strategy, "nodes": nodes,
                          "scaling_unit": unit, **on_gpus}
                if has_parameter_servers(strategy):
                    values["parameter_servers"] = a["ps"]
                    tuning = {**tuning, **tuning_ps}
                if update is not None:
                    values["variable_update"] = update
                if best:  # placeholder: layout and batch come from the hybrid sweep
                    conf = training_configuration(
                        experiment, system, **values, processes_per_node=1, intra_threads=0,
                        inter_threads=0, tuning={**tuning, "best_of": best})
                    conf["best_of"] = best
                else:
                    values.setdefault("processes_per_node", ppn)
                    conf = training_configuration(
                        experiment, system, **values,
                        intra_threads=threads, inter_threads=thread_count(a["inter"], threads),
                        tuning=tuning)
                out.append(conf)
    return dedupe(out)


TYPE = ExperimentType(
    "node_scaling", expand, SCHEMA,
    tables=("summary", "node_scaling", "best_per_size", "efficiency_heatmap", "io_overhead",
            "vendor_speedup", "framework_comparison", "precision_speedup"),
    figures=("node_scaling", "scaling_speedup", "efficiency_heatmap", "io_overhead",
             "framework_comparison", "precision_speedup"))
