"""The identity fields of a configuration, each declared once in :data:`FIELDS`.

A :class:`Field` is at once a record field (``record_default``: what a record that does not
state it holds), a column of the tidy table and of every summary (``kind``: its dtype), a
part of a configuration's identity (runs differing in it never share a summary row), the
value a record, plan or import without it stands for (``read_as``: those written before
the field existed ran so; filled once where they are loaded, left out where an id is made),
a token of the configuration id (``token``) and a table header (``header``).

A field kept outside this module (a workload's own, or a test's) is declared the same way in
a tuple named by :data:`PLUGINS` ("module:attribute", comma-separated; every process of a
run reads it, as the frameworks' plugins): it joins :data:`FIELDS` and every list read from
it, its token the id's tail, its ``setting`` a training setting, ``every_table`` a column
of every table.

The configuration id is :data:`TRAINING_ID` or :data:`KERNEL_ID` (the tokens of a run's
kind, in a fixed order: ids are directory names of records already written), then
:data:`ID_TAIL` (tokens left out at their ``read_as``, so older ids stay as they were),
then a hash of the configuration's tuning and environment (:func:`config_id`).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping

MISSING = object()  # a field the configuration does not state
JSON_TYPES = {str: "string", int: "integer", bool: "boolean"}


@dataclass(frozen=True, kw_only=True)
class Field:
    """One identity field. ``kind``: str, int or bool. ``config``: part of the record's
    configuration (:data:`CONFIG_FIELDS`); otherwise a series field, an identity column the
    studies of GPUs, parameter servers and scaling add to tables. ``token``: its part of the
    configuration id, a format of the value (``"b{}"``) or a function of the value (or
    :data:`MISSING`) and the configuration giving the part, or None to leave it out.
    ``numerics``: one of the numerics settings (:data:`NUMERICS`). ``required``: every
    record states it (it has no ``record_default``). ``choices``, ``minimum``, ``maximum``,
    ``description``: its record schema property (:meth:`schema`). ``header``: its table header (else its
    name); ``legend``: how a figure's series label names a value (``"batch {}"``; counts as
    whole numbers), where a function of the figures does not (archbench.results.figures.labels)."""

    name: str
    kind: type = str
    config: bool = True
    required: bool = False
    record_default: Any = None
    read_as: Any = None
    token: str | Callable[[Any, Mapping], str | None] | None = None
    numerics: bool = False
    header: str | None = None
    legend: str | None = None
    choices: tuple[str, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    description: str | None = None
    every_table: bool = False
    setting: Mapping[str, Any] | None = None

    @property
    def nullable(self) -> bool:
        """Whether a record may state it as null (an unset value: not required, no default)."""
        return not self.required and self.record_default is None

    def schema(self) -> dict:
        """Its property in the record schema: its ``choices`` (an enum) or its JSON type,
        null where :attr:`nullable`, its bounds and ``description``."""
        if self.choices is not None:
            prop: dict[str, Any] = {"enum": [*self.choices, *([None] if self.nullable else [])]}
        else:
            kind = JSON_TYPES[self.kind]
            prop = {"type": [kind, "null"] if self.nullable else kind}
        bounds = {"minimum": self.minimum, "maximum": self.maximum, "description": self.description}
        return {**prop, **{k: v for k, v in bounds.items() if v is not None}}

    def id_part(self, configuration: Mapping) -> str | None:
        """This field's token of ``configuration``'s id (None: left out)."""
        if isinstance(self.token, str):
            return self.token.format(configuration[self.name])
        return self.token(configuration.get(self.name, MISSING), configuration)


def unless_read_as(default: Any, text: str = "{}") -> Callable[[Any, Mapping], str | None]:
    """A token left out where the value is unset or the field's ``read_as``."""
    return lambda value, _: None if value in (MISSING, None, default) else text.format(value)


def _when_set(text: str = "{}") -> Callable[[Any, Mapping], str | None]:
    """A token only where the value is set (ids planned before the field keep their form)."""
    return lambda value, _: text.format(value) if value not in (MISSING, None, 0, "") else None


PLUGINS = "ARCHBENCH_FIELDS"  # "module:attribute" of tuples of more fields, comma-separated
VENDOR_TOKENS = {True: "vlon", False: "vloff", None: "vlna", MISSING: "vlna"}
DEFAULT_FRAMEWORK = "tensorflow"  # what a record or configuration naming none ran

COUNT = 10**6  # the bound of every count (as in imports)

FIELDS: tuple[Field, ...] = (
    Field(name="experiment", required=True, legend="{}"),
    Field(name="experiment_type", header="type"),
    Field(name="system", required=True, legend="{}"),
    Field(name="arch", required=True),
    Field(name="kind", required=True, choices=("train", "kernel")),
    Field(name="model", token="{}", legend="{}",
          description="a registered model (archbench/workloads/training/models.py); the name is "
                      "checked where records are counted (archbench/workloads/names.py), not here"),
    Field(name="kernel", token="{}", legend="{}",
          description="a registered kernel (archbench/workloads/kernels/__init__.py), checked as model"),
    Field(name="data", choices=("synthetic", "real"), token="{}", legend="{} data"),
    Field(name="strategy", token="{}",
          description="a registered training strategy (archbench/workloads/training/strategies/"
                      "__init__.py), or workers (a kernel), checked as model"),
    Field(name="nodes", kind=int, record_default=1, minimum=1, maximum=COUNT, token="N{}",
          description="nodes of the run; like every count here, at most 1,000,000 (as in imports)"),
    Field(name="processes_per_node", kind=int, record_default=1, minimum=1, maximum=COUNT,
          token="p{}", header="proc/node", legend="{} ppn"),
    Field(name="workers", kind=int, record_default=1, minimum=1, maximum=COUNT, token="w{}",
          description="training workers (processes that compute gradients), or a kernel's worker tasks"),
    Field(name="intra_threads", kind=int, record_default=0, minimum=0, maximum=COUNT, token="t{}",
          header="intra", legend="intra {}",
          description="intra-op threads per process (0: the framework's default)"),
    Field(name="inter_threads", kind=int, record_default=0, minimum=0, maximum=COUNT, token="i{}",
          header="inter", legend="inter {}"),
    Field(name="batch_per_process", kind=int, minimum=1, maximum=2**20, token="b{}",
          header="batch per process", legend="batch {}",
          description="images per step of one worker, at most 2**20"),
    Field(name="global_batch", kind=int, minimum=1, maximum=2**40, header="global batch",
          legend="global batch {}",
          description="images per step of all workers: batch_per_process x workers, at most 2**40"),
    Field(name="image_size", kind=int, minimum=1, maximum=2**16,
          description="edge of the square input images in pixels, at most 2**16"),
    # a language model's: its token counts per sequence (left out of the id of an image model)
    Field(name="sequence_length", kind=int, minimum=1, maximum=2**20, token=_when_set("T{}"),
          header="sequence", legend="T={}",
          description="tokens per sequence of a language model, at most 2**20 (null: an image model)",
          # not planned yet: campaigns plan image models only (docs/llm.md)
          setting={"type": int, "minimum": 1, "from_model": "context", "probe": True, "planned": None,
                   "help": "tokens per sequence of a language model (default: its context)"}),
    Field(name="problem_size", kind=int, minimum=1, maximum=2**50,
          token=lambda value, _: f"n{None if value is MISSING else value}", header="size", legend="N={}",
          description="a kernel's problem size (N, elements, MiB), at most 2**50"),
    Field(name="tile_size", kind=int, minimum=1, maximum=2**50,
          token=lambda value, _: f"t{(None if value is MISSING else value) or 0}", header="tile",
          legend="tile {}", description="a tiled kernel's tile size, at most 2**50"),
    Field(name="vendor_library", header="vendor lib",
          description="the vendor library the system DECLARES (config/systems: onednn | onednn-acl | "
                      "mkl | armpl); what really ran is vendor_evidence.library"),
    Field(name="vendor_library_enabled", kind=bool, token=lambda value, _: VENDOR_TOKENS[value],
          header="vendor"),
    # a GPU run's token counts its GPUs per node; CPU runs (and records before the field) keep theirs
    Field(name="device", choices=("cpu", "gpu"), read_as="cpu",
          token=lambda value, c: f"gpu{c.get('gpus_per_node') or ''}" if value == "gpu" else None,
          description="the device the measurement asked for (null: records before the field, CPU runs)"),
    # a registered framework; the default's runs keep their ids (a stated None is named)
    Field(name="framework", record_default=DEFAULT_FRAMEWORK, read_as=DEFAULT_FRAMEWORK,
          token=lambda value, _: None if value in (MISSING, DEFAULT_FRAMEWORK) else str(value),
          description="the training framework that ran (a registered one: tensorflow, pytorch); "
                      "kernels run TensorFlow"),
    # numerics: runs in fp32, strict, eager (and records before the fields) keep their ids
    Field(name="precision", choices=("fp32", "bf16", "fp16"), read_as="fp32",
          token=unless_read_as("fp32"), numerics=True, legend="{}",
          description="the precision the run asked for: fp32, or bf16/fp16 mixed precision (fp32 "
                      "weights); null: records before the field (fp32)"),
    Field(name="math_mode", choices=("strict", "bf16", "tf32"), read_as="strict",
          token=unless_read_as("strict", "math{}"), numerics=True, header="math mode",
          legend="math {}",
          description="the fp32 math mode the run asked for: strict, bf16 (oneDNN fpmath, CPUs), "
                      "tf32 (GPUs); null: records before the field (strict). What executed is the "
                      "vendor evidence's"),
    Field(name="graph", choices=("eager", "compiled"), read_as="eager",
          token=unless_read_as("eager"), numerics=True, legend="{}",
          description="how the step ran as asked: eager (the framework's default: PyTorch eager, "
                      "TensorFlow tf.function) or compiled (torch.compile, XLA; metric compile_s "
                      "times the first step apart); null: records before the field (eager)"),
    # series fields: identity columns of tables, not of the configuration id
    Field(name="gpus", kind=int, config=False, minimum=1, maximum=COUNT,
          description="GPUs used in total (null: a CPU run)"),
    Field(name="gpus_per_node", kind=int, config=False, minimum=1, maximum=COUNT),
    Field(name="parameter_servers", kind=int, config=False, minimum=0, maximum=COUNT,
          token=_when_set("ps{}"), legend="{} PS",
          description="parameter-server tasks (strategy parameter_server)"),
    Field(name="variable_update", config=False, token=_when_set(), legend="{} update",
          description="how variables are updated: a variable update of a registered strategy (its "
                      "variable_updates), checked as model"),
    Field(name="scaling_unit", config=False, choices=("nodes", "workers", "gpus"), legend="over {}",
          description="what a scaling series of this measurement counts (null: not a scaling "
                      "measurement)"),
)


def plugin_fields(value: str | None) -> tuple[Field, ...]:
    """The fields of each "module:attribute" of ``value`` (:data:`PLUGINS`'s form); a name
    already declared is refused (ValueError naming the plugin)."""
    out: list[Field] = []
    for where in filter(None, (part.strip() for part in (value or "").split(","))):
        module, _, name = where.partition(":")
        for field in getattr(importlib.import_module(module), name):
            if field.name in {f.name for f in (*FIELDS, *out)}:
                raise ValueError(f"{PLUGINS}: field '{field.name}' of {where} is already declared")
            out.append(field)
    return tuple(out)


FIELDS += plugin_fields(os.environ.get(PLUGINS))  # a plugin may import Field from here

BY_NAME: Mapping[str, Field] = MappingProxyType({f.name: f for f in FIELDS})
CONFIG_FIELDS = tuple(f.name for f in FIELDS if f.config)  # a record's configuration
SERIES_FIELDS = tuple(f.name for f in FIELDS if not f.config)
NUMERICS = tuple(f.name for f in FIELDS if f.numerics)  # precision, math_mode, graph
# the columns every table shows beside the framework: the numerics, then any field declaring so
EVERY_TABLE = (*NUMERICS, *(f.name for f in FIELDS if f.every_table and not f.numerics))
READ_AS: Mapping[str, Any] = MappingProxyType({f.name: f.read_as for f in FIELDS if f.read_as is not None})
NUMERICS_DEFAULTS: Mapping[str, str] = MappingProxyType({n: READ_AS[n] for n in NUMERICS})
HEADERS: Mapping[str, str] = MappingProxyType({f.name: f.header for f in FIELDS if f.header})
RECORD_DEFAULTS: Mapping[str, Any] = MappingProxyType({f.name: f.record_default for f in FIELDS
                                                      if not f.required})


def of_kind(kind: type) -> tuple[str, ...]:
    """The identity fields whose values are of ``kind`` (str, int or bool)."""
    return tuple(f.name for f in FIELDS if f.kind is kind)


TRAINING_ID = ("model", "batch_per_process", "nodes", "processes_per_node", "intra_threads",
               "inter_threads", "vendor_library_enabled", "data", "strategy", "parameter_servers",
               "variable_update")
KERNEL_ID = ("kernel", "problem_size", "tile_size", "workers", "nodes")
# then every other field with a token (a plugin's), in declaration order
ID_TAIL = (*NUMERICS, "framework", "device")
ID_TAIL += tuple(f.name for f in FIELDS if f.token and f.name not in {*TRAINING_ID, *KERNEL_ID, *ID_TAIL})


def filled(configuration: Mapping) -> dict:
    """``configuration`` with every identity field it leaves unset (absent or None) at its
    ``read_as``: what a record, plan or import written before the field stands for."""
    out = dict(configuration)
    for name, value in READ_AS.items():
        if out.get(name) is None:
            out[name] = value
    return out


def config_id(configuration: Mapping) -> str:
    """A readable, unique directory name for a configuration (repetition excluded): its
    tokens (:data:`TRAINING_ID` or :data:`KERNEL_ID`, then :data:`ID_TAIL`), plus a hash of
    its ``tuning`` and ``env`` settings when it has any."""
    c = configuration
    names = (KERNEL_ID if c["kind"] == "kernel" else TRAINING_ID) + ID_TAIL
    parts = [part for part in (BY_NAME[n].id_part(c) for n in names) if part is not None]
    extra = dict(sorted(c.get("tuning", {}).items()))
    if c.get("env"):
        extra["env"] = c["env"]
    if extra:
        parts.append(hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8])
    return "_".join(parts)
