"""Training experiment types (DESIGN.md experiments 1-6, 8): each expands one experiment
on one system into configurations. Registered with ``campaign.experiment_type``; the keys
of each type are described in ``config/schemas/experiment.schema.yaml``.

Every type takes the ``data`` axis (synthetic and/or real: the pairs feed the I/O
overhead table) and the ``vendor_library`` axis. Settings that are not record fields go
under ``tuning`` (they become part of the configuration id): ``cores`` (CPU pinning),
``parameter_servers``, ``horovod_controller``, ``horovod_cycle_time_ms``,
``horovod_fusion_threshold_bytes`` and ``best_of``.

``node_scaling`` with ``best: <hybrid experiment>`` expands to placeholders marked
``"best_of": <name>``; :func:`resolve_best` fills them in from that sweep's results once
it has finished.
"""

from __future__ import annotations

from typing import Any, Iterable

from archbench.campaign import (
    ConfigError, config_id, cores_of, experiment_type, on_off, product, training_configuration,
)

MKL_ENV = {"KMP_BLOCKTIME": "0", "KMP_AFFINITY": "granularity=fine,compact,1,0"}
HYBRID_FIELDS = ("processes_per_node", "intra_threads", "inter_threads", "batch_per_process")


# ---------------------------------------------------------------- helpers

def _threads(value: Any, cores: int) -> int:
    """A thread count, with the token ``cores`` meaning all cores of the node (or pin)."""
    return cores if value == "cores" else int(value)


def _powers_of_two(limit: int) -> list[int]:
    out, n = [], 1
    while n <= limit:
        out.append(n)
        n *= 2
    return out


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _nodes(experiment: dict, system: dict, default: list[int] | str = (1,)) -> list[int]:
    """The experiment's node counts that fit the system (``all`` = 1, 2, 4, ... nodes)."""
    nodes = experiment.get("nodes", default)
    if nodes == "all":
        return _powers_of_two(system["nodes"])
    return [n for n in nodes if n <= system["nodes"]]


def _common_axes(experiment: dict) -> dict[str, list]:
    return dict(model=experiment["models"],
                vendor=experiment.get("vendor_library", ["on"]),
                data=experiment.get("data", ["synthetic"]))


def _dedupe(configurations: list[dict]) -> list[dict]:
    """Drop configurations identical to an earlier one (e.g. intra 'cores' == 2 on 2 cores)."""
    seen, out = set(), []
    for conf in configurations:
        key = config_id(conf)
        if key not in seen:
            seen.add(key)
            out.append(conf)
    return out


def _controllers(experiment: dict, nodes: int) -> list[str]:
    controllers = experiment.get("horovod_controller", ["mpi"])
    if "gloo" in controllers and nodes > 1:
        raise ConfigError(f"{experiment['type']}.horovod_controller: gloo is launched with "
                          f"horovodrun on one node; {nodes} nodes need mpi")
    return controllers


def _controller_tuning(controller: str) -> dict:
    return {"horovod_controller": controller} if controller != "mpi" else {}


# ---------------------------------------------------------------- experiment 1

@experiment_type("thread_scaling")
def expand_thread_scaling(experiment: dict, system: dict) -> list[dict]:
    """One process; threads x batch sizes x vendor library on/off x data x inter threads."""
    cores = cores_of(system)
    threads = experiment.get("threads", "all")
    if threads == "all":
        threads = list(range(1, cores + 1))
    axes = product(model=experiment["models"], batch=experiment["batch_sizes"],
                   threads=threads, inter=experiment.get("inter_threads", [1]),
                   vendor=experiment.get("vendor_library", ["on"]),
                   data=experiment.get("data", ["synthetic"]))
    return _dedupe([training_configuration(
        experiment, system, model=a["model"], batch_per_process=a["batch"],
        intra_threads=a["threads"], inter_threads=_threads(a["inter"], cores),
        vendor_library_enabled=on_off(a["vendor"]), data=a["data"]) for a in axes])


@experiment_type("batch_sweep")
def expand_batch_sweep(experiment: dict, system: dict) -> list[dict]:
    """One process; batch sizes at fixed threads (default: all cores of the node)."""
    cores = cores_of(system)
    threads = experiment.get("threads", [cores])
    if threads == "all":
        threads = list(range(1, cores + 1))
    axes = product(batch=experiment["batch_sizes"], threads=threads,
                   inter=experiment.get("inter_threads", [1]), **_common_axes(experiment))
    return _dedupe([training_configuration(
        experiment, system, model=a["model"], batch_per_process=a["batch"],
        intra_threads=a["threads"], inter_threads=_threads(a["inter"], cores),
        vendor_library_enabled=on_off(a["vendor"]), data=a["data"]) for a in axes])


# ---------------------------------------------------------------- experiment 2

def hybrid_layouts(cores: int, processes: Iterable[int] | str = "all") -> list[tuple[int, int]]:
    """(processes, threads) pairs filling ``cores``: every p dividing the cores with
    t = cores / p (``all``), or the given process counts with t = cores // p."""
    if processes == "all":
        return [(p, cores // p) for p in _divisors(cores)]
    return [(p, cores // p) for p in processes if p <= cores]


@experiment_type("hybrid")
def expand_hybrid(experiment: dict, system: dict) -> list[dict]:
    """Processes x threads filling one node (1 x cores ... cores x 1) with Horovod, per
    process batch sizes (or per node: divided among the processes), inter-op threads."""
    cores = cores_of(system)
    per_node = experiment.get("batch_mode", "per_process") == "per_node"
    out = []
    for p, t in hybrid_layouts(cores, experiment.get("processes", "all")):
        for a in product(batch=experiment["batch_sizes"], inter=experiment.get("inter_threads", [1]),
                         controller=_controllers(experiment, 1), **_common_axes(experiment)):
            batch = a["batch"] // p if per_node else a["batch"]
            if batch < 1:
                continue
            out.append(training_configuration(
                experiment, system, model=a["model"], batch_per_process=batch,
                strategy="horovod", processes_per_node=p, intra_threads=t,
                inter_threads=_threads(a["inter"], t), vendor_library_enabled=on_off(a["vendor"]),
                data=a["data"], tuning=_controller_tuning(a["controller"])))
    return _dedupe(out)


# ---------------------------------------------------------------- experiment 3

@experiment_type("inter_intra")
def expand_inter_intra(experiment: dict, system: dict) -> list[dict]:
    """One process pinned to ``cores`` CPUs (1..node); inter x intra thread counts (``cores``
    = the pinned count, 0 = TensorFlow decides); MKL/OpenMP settings on and off."""
    node = cores_of(system)
    cores = experiment.get("cores", [node])
    cores = list(range(1, node + 1)) if cores == "all" else [c for c in cores if c <= node]
    mkl_env = {k: str(v) for k, v in experiment.get("mkl_env", MKL_ENV).items()}
    out = []
    for a in product(batch=experiment["batch_sizes"], cores=cores,
                     inter=experiment.get("inter_threads", [0, 1, 2, "cores"]),
                     intra=experiment.get("intra_threads", [0, 1, "cores"]),
                     mkl=experiment.get("mkl_settings", ["off", "on"]), **_common_axes(experiment)):
        out.append(training_configuration(
            experiment, system, model=a["model"], batch_per_process=a["batch"],
            intra_threads=_threads(a["intra"], a["cores"]),
            inter_threads=_threads(a["inter"], a["cores"]),
            vendor_library_enabled=on_off(a["vendor"]), data=a["data"],
            tuning={"cores": a["cores"]}, env=dict(mkl_env) if on_off(a["mkl"]) else {}))
    return _dedupe(out)


# ---------------------------------------------------------------- experiment 5

def ppn_intra(cores: int, ppn: int) -> int:
    """Intra-op threads of a process when ``ppn`` share a node: cores/ppn - 1, at least 1
    (one core per process left to Horovod's background thread)."""
    return max(1, cores // ppn - 1)


@experiment_type("ppn_sweep")
def expand_ppn_sweep(experiment: dict, system: dict) -> list[dict]:
    """Single vs multi process per node: processes per node (default 1, 2, 4, ... cores)
    with intra = cores/ppn - 1, on each node count."""
    cores = cores_of(system)
    ppns = experiment.get("processes_per_node", "all")
    ppns = _powers_of_two(cores) if ppns == "all" else [p for p in ppns if p <= cores]
    out = []
    for nodes in _nodes(experiment, system):
        for a in product(ppn=ppns, batch=experiment["batch_sizes"],
                         inter=experiment.get("inter_threads", [1]),
                         controller=_controllers(experiment, nodes), **_common_axes(experiment)):
            intra = ppn_intra(cores, a["ppn"])
            out.append(training_configuration(
                experiment, system, model=a["model"], batch_per_process=a["batch"],
                strategy="horovod", nodes=nodes, processes_per_node=a["ppn"],
                intra_threads=intra, inter_threads=_threads(a["inter"], intra),
                vendor_library_enabled=on_off(a["vendor"]), data=a["data"],
                tuning=_controller_tuning(a["controller"])))
    return _dedupe(out)


# ---------------------------------------------------------------- experiment 4

@experiment_type("node_scaling")
def expand_node_scaling(experiment: dict, system: dict) -> list[dict]:
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
    for nodes in _nodes(experiment, system, default="all"):
        for strategy in experiment.get("strategies", ["horovod"]):
            ps_list = experiment.get("parameter_servers", [1]) if strategy == "parameter_server" else [0]
            controllers = _controllers(experiment, nodes) if strategy == "horovod" else ["mpi"]
            batches = [1] if best else experiment["batch_sizes"]
            inters = [0] if best else experiment.get("inter_threads", [1])
            for a in product(ps=ps_list, controller=controllers, batch=batches, inter=inters,
                             **_common_axes(experiment)):
                tuning = _controller_tuning(a["controller"])
                if strategy == "parameter_server":
                    tuning["parameter_servers"] = a["ps"]
                values = dict(model=a["model"], strategy=strategy, nodes=nodes,
                              vendor_library_enabled=on_off(a["vendor"]), data=a["data"])
                if best:  # placeholder: layout and batch come from the hybrid sweep
                    conf = training_configuration(
                        experiment, system, **values, processes_per_node=1, intra_threads=0,
                        inter_threads=0, batch_per_process=1, tuning={**tuning, "best_of": best})
                    conf["best_of"] = best
                else:
                    conf = training_configuration(
                        experiment, system, **values, processes_per_node=ppn,
                        intra_threads=threads, inter_threads=_threads(a["inter"], threads),
                        batch_per_process=a["batch"], tuning=tuning)
                out.append(conf)
    return _dedupe(out)


def _summary(frame):
    """Mean img/s per configuration from a summary (``mean``) or a tidy table (``throughput``)."""
    import pandas as pd
    df = frame.copy()
    if "mean" in df:
        if "status" in df:
            df = df[df["status"].isin(["ok", "partial"])]
        return df[df["mean"].notna()]
    if "throughput" not in df:
        raise ValueError("resolve_best needs a summary (column mean) or measurements (throughput)")
    if "status" in df:
        df = df[df["status"] == "ok"]
    keys = [k for k in ("experiment", "system", "model", "data", "vendor_library_enabled",
                        "config_id", *HYBRID_FIELDS) if k in df]
    df = df[df["throughput"].notna()]
    if df.empty:
        return pd.DataFrame(columns=keys + ["mean"])
    return df.groupby(keys, dropna=False, sort=True)["throughput"].mean().rename("mean").reset_index()


def best_hybrid(summary_df, experiment: str, system: str, model: str,
                data: str | None = None, vendor_library_enabled: bool | None = None) -> dict | None:
    """The configuration of hybrid sweep ``experiment`` with the highest mean img/s for
    ``system`` and ``model`` (the same data and vendor setting preferred when present);
    None when it has no successful run. Ties go to fewer processes."""
    s = _summary(summary_df)
    s = s[(s["experiment"] == experiment) & (s["system"] == system) & (s["model"] == model)]
    for column, value in (("data", data), ("vendor_library_enabled", vendor_library_enabled)):
        if value is not None and column in s and (s[column] == value).any():
            s = s[s[column] == value]
    if s.empty:
        return None
    s = s.sort_values(["processes_per_node", "intra_threads"], kind="mergesort")
    row = s.loc[s["mean"].astype(float).idxmax()]
    return {k: int(row[k]) for k in HYBRID_FIELDS} | {"mean": float(row["mean"])}


def resolve_best(measurements: list[dict], summary_df, on_missing: str = "raise") -> list[dict]:
    """Replace every ``best_of`` placeholder of ``measurements`` with the best configuration
    (processes per node, intra/inter threads, batch per process) of the named hybrid sweep
    for its system and model, taken from ``summary_df`` (the tidy measurements table or its
    summary; highest mean img/s). Other measurements pass unchanged.

    The resolved measurement keeps ``tuning.best_of`` (so its id shows where the layout came
    from), loses the top-level marker, and gets workers, global batch and config_id anew.
    ``on_missing``: ``raise`` (ValueError) or ``drop`` when the sweep has no successful run.
    """
    out = []
    for m in measurements:
        name = m.get("best_of")
        if not name:
            out.append(m)
            continue
        best = best_hybrid(summary_df, name, m["system"], m["model"], m.get("data"),
                           m.get("vendor_library_enabled"))
        if best is None:
            if on_missing == "drop":
                continue
            raise ValueError(f"{m['experiment']}: no successful run of '{name}' for system "
                             f"{m['system']} and model {m['model']} to take the best configuration from")
        resolved = {k: v for k, v in m.items() if k != "best_of"}
        resolved.update({k: best[k] for k in HYBRID_FIELDS})
        resolved["tuning"] = {**(m.get("tuning") or {}), "best_of": name}
        resolved["workers"] = resolved["nodes"] * resolved["processes_per_node"]
        resolved["global_batch"] = resolved["batch_per_process"] * resolved["workers"]
        resolved["config_id"] = config_id(resolved)
        out.append(resolved)
    return out


# ---------------------------------------------------------------- experiment 6

@experiment_type("horovod_tuning")
def expand_horovod_tuning(experiment: dict, system: dict) -> list[dict]:
    """Horovod knobs on a multi-process configuration: HOROVOD_CYCLE_TIME (ms) x
    HOROVOD_FUSION_THRESHOLD (MiB, 0 = no fusion), set on every rank."""
    cores = cores_of(system)
    ppn = experiment.get("processes_per_node", cores)
    threads = experiment.get("threads_per_process", max(1, cores // ppn))
    out = []
    for nodes in _nodes(experiment, system):
        for a in product(cycle=experiment["cycle_time_ms"],
                         fusion=experiment["fusion_threshold_mb"], batch=experiment["batch_sizes"],
                         inter=experiment.get("inter_threads", [1]),
                         controller=_controllers(experiment, nodes), **_common_axes(experiment)):
            out.append(training_configuration(
                experiment, system, model=a["model"], batch_per_process=a["batch"],
                strategy="horovod", nodes=nodes, processes_per_node=ppn, intra_threads=threads,
                inter_threads=_threads(a["inter"], threads),
                vendor_library_enabled=on_off(a["vendor"]), data=a["data"],
                tuning={**_controller_tuning(a["controller"]),
                        "horovod_cycle_time_ms": a["cycle"],
                        "horovod_fusion_threshold_bytes": int(round(a["fusion"] * 2**20))}))
    return _dedupe(out)
