"""The settings of a training run, each declared once in :data:`SETTINGS`.

A :class:`Setting` is at once a command-line option of ``python -m archbench.train``, a
field of :class:`TrainRun` (the frozen, validated run built once from the command line),
the flag a planned measurement's value becomes (:func:`planned_argv`), the record field
the worker writes it to (:func:`record_fields`) and, where the vendor probe needs it, an
option of the probe child (:func:`command_line`) and, when it declares an ``axis``, an
experiment key every training experiment type sweeps (archbench.plan.experiment_types.base
reads :func:`axes`; the experiment schema's key is made from the declaration). Adding a
setting, swept or not, is one entry here (and its use in the worker), or, for an identity
field declared elsewhere, the field's own ``setting``.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

from archbench.core.fields import BY_NAME, FIELDS
from archbench.workloads import gpu
from archbench.workloads.training.models import LANGUAGE_MODELS, MODELS, spec

TUNING = "tuning."  # a planned key under the measurement's ``tuning``
ABSENT = object()  # a setting the measurement does not plan


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One training setting: TrainRun field ``name``, command-line option ``--name``
    (underscores as dashes).

    ``type``, ``default``, ``choices``, ``required`` and ``help`` make the option;
    ``minimum`` refuses smaller values (None passes: the setting is unset); ``from_model``
    names the :class:`~archbench.workloads.training.models.ModelSpec` attribute an unset
    value takes.
    ``planned``: the measurement key the workflow plans it as (``tuning.<key>`` for a key
    under the configuration's ``tuning``; None: only given by hand); a planned value
    becomes ``--name value``, an absent or None one leaves the default. ``recorded``: the
    worker writes it to the record field of that name (of its own name where not planned). ``words``: planned (and recorded)
    values whose command-line word differs, e.g. True -> "on". ``probe``: the vendor-probe
    child takes it. ``identity``: it is part of the configuration id
    (:func:`archbench.core.fields.config_id` names it, or hashes it with the ``tuning``):
    runs differing in it are different configurations.
    ``omit_default``: a planned configuration leaves it out at its default (as a value
    under ``tuning``), so its id, hash and probe settings stay those of configurations
    planned before the setting existed; the record states it all the same.
    ``axis``: the experiment key of its list of values (a sweep): every training experiment
    type runs the product over the axes (default: ``[default]``; a required setting's key is
    required), the schema's key takes the values the option takes (``choices``, or words of
    ``words``; numbers from ``minimum`` to ``maximum``), described by ``axis_help`` (else
    ``help``). A value planned under ``tuning`` is left out at the default, so the ids of
    configurations that do not sweep it stay as they were.
    """

    name: str
    help: str
    type: Callable[[Any], Any] = str
    default: Any = None
    choices: tuple[str, ...] | Callable[[], list[str]] | None = None  # a callable: a registry's names
    required: bool = False
    minimum: int | None = None
    maximum: int | None = None
    from_model: str | None = None
    planned: str | None = None
    recorded: bool = False
    words: Mapping[Any, str] = field(default_factory=dict)
    probe: bool = False
    identity: bool = False
    axis: str | None = None
    axis_help: str | None = None
    omit_default: bool = False

    @property
    def flag(self) -> str:
        """The command-line option, e.g. ``--batch-per-process``."""
        return "--" + self.name.replace("_", "-")

    def add_argument(self, parser: argparse.ArgumentParser, **registered: Any) -> None:
        """Add ``--name`` to ``parser`` (``registered``: options a registry supplies, e.g.
        the strategies' names as choices)."""
        choices = self.choices() if callable(self.choices) else self.choices
        options = dict(type=self.type, default=self.default, choices=choices,
                       required=self.required, help=self.help)
        parser.add_argument(self.flag, **{**options, **registered})

    def word(self, value: Any) -> str:
        """The command-line word of a planned value or a TrainRun value."""
        if self.words and value in self.words:
            return self.words[value]
        value = self.type(value)
        if isinstance(value, float):  # 20.0 as 20, others exactly
            return str(int(value)) if value.is_integer() else repr(value)
        return str(value)

    def recorded_value(self, value: Any) -> Any:
        """The record's value of a TrainRun value (a word back to what it stands for)."""
        return {word: meaning for meaning, word in self.words.items()}.get(value, value)

    def planned_value(self, measurement: Mapping[str, Any]) -> Any:
        """The measurement's value of the setting; :data:`ABSENT` where it plans none."""
        if self.planned is None:
            return ABSENT
        if self.planned.startswith(TUNING):
            return (measurement.get("tuning") or {}).get(self.planned[len(TUNING):], ABSENT)
        return measurement.get(self.planned, ABSENT)


def field_setting(name: str, *, swept: bool = False, **options: Any) -> Setting:
    """The setting of identity field ``name`` (:data:`archbench.core.fields.FIELDS`): planned
    and recorded under its name, part of the configuration id, defaulting to what an unstated
    value reads as (the field's ``read_as``, where it declares one), taking the field's
    ``choices``, and, ``swept``, an axis of the same name."""
    field = BY_NAME[name]
    declared = {"planned": name, "recorded": True, "identity": True, "axis": name if swept else None}
    if field.read_as is not None:
        declared["default"] = field.read_as
    if field.choices is not None:
        declared["choices"] = field.choices
    return Setting(name=name, **{**declared, **options})


ON_OFF = ("on", "off")
ENABLED = {True: "on", False: "off"}

SETTINGS: tuple[Setting, ...] = (
    # choices: the frameworks registry (benchmark.parser)
    field_setting("framework", help="training framework (archbench/workloads/training/frameworks.py)",
                  probe=True),
    field_setting("model", required=True, choices=lambda: sorted({**MODELS, **LANGUAGE_MODELS}),
                  help="model to train",
                  probe=True),
    field_setting("batch_per_process", swept=True, type=int, required=True, minimum=1, maximum=2**20,
                  help="images per step of one process", probe=True,
                  axis_help="Images per step of one process (at most 2^20), an axis."),
    field_setting("intra_threads", type=int, default=0, minimum=0,
                  help="intra-op threads (0 = the framework's default)", probe=True),
    field_setting("inter_threads", type=int, default=1, minimum=0,
                  help="inter-op threads (0 = the framework's default)", probe=True),
    Setting(name="onednn", default="on", choices=ON_OFF,
            help="vendor library: TF_ENABLE_ONEDNN_OPTS before TensorFlow loads; torch.backends.mkldnn in PyTorch",
            planned="vendor_library_enabled", words=ENABLED, recorded=True, probe=True,
            identity=True, axis="vendor_library",
            axis_help="Vendor math library (oneDNN on x86; in PyTorch its oneDNN, "
                      "torch.backends.mkldnn) on and/or off, an axis."),
    field_setting("data", swept=True, default="synthetic",
                  help="real = TFRecords of --data-dir (ImageNet models) or scikit-learn's digits "
                       "(digits_cnn)",
                  axis_help="Input data, an axis: synthetic and/or real."),
    # numerics: each framework declares the values it runs on each device (its registry
    # entry's ``runs``); a planned configuration leaves them out at their defaults
    field_setting("precision", swept=True,
                  help="arithmetic of the forward pass and the loss: fp32; bf16 or fp16 mixed "
                       "precision (fp32 weights, torch.autocast / Keras mixed_bfloat16, "
                       "mixed_float16; fp16 with loss scaling, GPUs only)",
                  probe=True, omit_default=True,
                  axis_help="Precision of the forward pass, an axis: fp32, bf16 and/or fp16 "
                            "(mixed: fp32 weights; fp16 with loss scaling, GPUs only)."),
    field_setting("math_mode", swept=True,
                  help="how fp32 tensors are computed: strict fp32; bf16 inside the vendor "
                       "library (oneDNN's fpmath mode, CPUs); tf32 (GPUs)",
                  probe=True, omit_default=True,
                  axis_help="fp32 math mode, an axis: strict, bf16 (fp32 tensors computed in bf16 "
                            "by oneDNN, CPUs) and/or tf32 (GPUs); only with precision fp32."),
    field_setting("graph", swept=True,
                  help="the step as the framework runs it by default (PyTorch eager, TensorFlow "
                       "tf.function) or compiled (torch.compile, XLA jit_compile); the first "
                       "step, which compiles, is timed apart (metric compile_s)",
                  probe=True, omit_default=True,
                  axis_help="How the step runs, an axis: eager (the framework's default) and/or "
                            "compiled (torch.compile, XLA)."),
    # the quality gate (experiment type quality): train until a validation accuracy
    Setting(name="target_accuracy", type=float, maximum=1,
            help="train until the validation accuracy reaches this fraction (real digits, "
                 "evaluated every --eval-every steps, at most --steps steps), timing it "
                 "(metrics steps_to_accuracy, time_to_accuracy_s) instead of a throughput "
                 "window; the run is recorded whether or not it reaches it",
            planned="tuning.target_accuracy", identity=True),
    Setting(name="eval_every", type=int, default=25, minimum=1,
            help="with --target-accuracy: steps between two evaluations of the validation "
                 "accuracy (the evaluations are on the clock)",
            planned="tuning.eval_every", identity=True),
    Setting(name="reshard_after_forward", choices=ON_OFF, default="on",
            help="strategy fsdp2: free each block's gathered parameters after its forward pass "
                 "(on: less memory, gathered again for the backward pass; off: kept until then)"),
    Setting(name="loader_workers", type=int, minimum=0,
            help="PyTorch DataLoader worker processes feeding real data (0 = in the training "
                 "process; default: its intra-op threads, at least 1)",
            planned="tuning.loader_workers", identity=True),
    # the system's, not the measurement's: benchmark.worker_argv passes it for real data
    Setting(name="data_dir", help="TFRecord directory for --data real"),
    # recorded as the metric data_format when not NHWC
    Setting(name="data_format", default="NHWC", choices=("NHWC", "NCHW"),
            help="tensor layout (NCHW fails clearly where the backend lacks it)",
            planned="data_format", probe=True),
    field_setting("device",
                  help="gpu: each process trains on the GPU of its local rank and fails with "
                       f"'{gpu.NO_GPU}' when it has none; cpu hides every GPU"),
    Setting(name="warmup_steps", type=int, default=10, minimum=0,
            help="untimed steps before the measured window (per worker)",
            planned="warmup_steps", recorded=True),
    Setting(name="steps", type=int, default=100, minimum=1, help="measured steps (per worker)",
            planned="measured_steps", recorded=True),
    Setting(name="image_size", type=int, minimum=1, from_model="native_image_size",
            help="input height and width (default: the model's, 224 for ImageNet models)",
            planned="image_size", recorded=True, probe=True),
    Setting(name="num_classes", type=int, minimum=1, from_model="num_classes",
            help="output classes (default: the model's, 1000 for ImageNet models)",
            planned="num_classes", probe=True),
    Setting(name="learning_rate", type=float, from_model="learning_rate",
            help="SGD learning rate (default: the model's, 0.01 for ImageNet models)"),
    Setting(name="seed", type=int, default=1234, help="random seed of the weights and the data",
            probe=True),
    # choices and help: the strategies registry (benchmark.parser)
    field_setting("strategy", default="single", help="the training strategy"),
    # the record's nodes and processes per node are the layout the run found: these when given
    Setting(name="nodes", type=int, minimum=1,
            help="nodes of the run as planned (default: counted from the workers' hosts)",
            planned="nodes", identity=True),
    Setting(name="processes_per_node", type=int, minimum=1,
            help="worker processes per node as planned (default: workers / nodes)",
            planned="processes_per_node", identity=True),
    # recorded for the strategies that take them (benchmark.base_fields)
    Setting(name="parameter_servers", type=int, default=1, minimum=0,
            help="parameter-server tasks (strategies with parameter servers)",
            planned="parameter_servers", identity=True),
    Setting(name="variable_update",  # help: the strategies registry (benchmark.parser)
            help="how strategy parameter_server updates variables (default: the first)",
            planned="variable_update", identity=True),
    Setting(name="ps_variable_placement", default="round_robin", choices=("round_robin", "greedy"),
            help="variables over the parameter servers: round robin, or greedily by size "
                 "(the server with the fewest bytes so far)",
            planned="tuning.ps_variable_placement", identity=True),
    Setting(name="horovod_cycle_time", type=float,
            help="HOROVOD_CYCLE_TIME in ms, set on every rank before hvd.init",
            planned="tuning.horovod_cycle_time_ms", identity=True),
    Setting(name="horovod_fusion_threshold", type=int,
            help="HOROVOD_FUSION_THRESHOLD in bytes, set on every rank",
            planned="tuning.horovod_fusion_threshold_bytes", identity=True),
    # recorded as the metric cores
    Setting(name="cores", type=int, minimum=1,
            help="pin each process to this many cores (block per local rank)",
            planned="tuning.cores", identity=True),
    Setting(name="weights_out",
            help="directory where every worker saves its trained weights (rank<r>.npz)"),
    # none: the system declares no vendor library (the record says null)
    Setting(name="vendor_library", default="onednn",
            help="the vendor library the system declares (checked against the probe)",
            planned="vendor_library", words={None: "none"}, recorded=True),
    Setting(name="vendor_probe", default="on", choices=ON_OFF,
            help="after the measured window, one probe step in a child process with "
                 "ONEDNN_VERBOSE=1 records which implementations ran "
                 "(archbench.workloads.training.vendor_evidence)"),
    # the supervisor passes it: another repetition's record (vendor_evidence.reuse.earlier_record)
    # or another configuration's that probed alike (vendor_evidence.reuse.indexed_record)
    Setting(name="vendor_evidence_from",
            help="a record whose own probe gave evidence, probing as this run would: this "
                 "run states that evidence, naming the record (its source), instead of "
                 "probing, when it ran on the same CPU model, image, framework version and "
                 "code with the same probe settings; otherwise it probes"),
    Setting(name="output", required=True, help="where to write the JSON record"),
    # the fields that declare their setting themselves (archbench.core.fields: a plugin's)
    *(field_setting(f.name, **f.setting) for f in FIELDS if f.setting is not None),
)


class _Checked:
    """What every TrainRun does beside holding its fields: fill the model's defaults and
    refuse values below a setting's minimum."""

    SETTINGS: tuple[Setting, ...] = ()  # those of the class (run_class)

    def __post_init__(self):
        model = spec(self.model)
        for s in self.SETTINGS:
            value = getattr(self, s.name)
            if value is None and s.from_model:
                value = getattr(model, s.from_model)
                object.__setattr__(self, s.name, value)
            if s.minimum is not None and value is not None and value < s.minimum:
                raise ValueError(f"{s.flag} must be >= {s.minimum}")
            if s.maximum is not None and value is not None and value > s.maximum:
                raise ValueError(f"{s.flag} must be <= {s.maximum}")
        length = getattr(self, "sequence_length", None)
        if length is not None and model.context is None:
            raise ValueError(f"--sequence-length: model '{self.model}' takes images, not token sequences")
        if length is not None and length > model.context:
            raise ValueError(f"--sequence-length {length} is above the context of model "
                             f"'{self.model}' ({model.context} tokens)")

    @classmethod
    def from_args(cls, args: argparse.Namespace):
        """The run of parsed command-line options (their dest names are the fields)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})


RUN_DOC = """A training run: one keyword field per setting of :data:`SETTINGS`, frozen.

``image_size``, ``num_classes`` and ``learning_rate`` left None are the model's
(:class:`archbench.workloads.training.models.ModelSpec`). ``nodes`` and
``processes_per_node`` are the layout as planned (None: counted from the workers). Invalid
values raise ValueError naming the command-line flag.
"""


def run_class(settings: Iterable[Setting]) -> type:
    """The TrainRun class of ``settings``: a frozen dataclass with one keyword field per
    setting, required or with the setting's default."""
    def run_field(s: Setting) -> tuple:
        if s.required:
            return s.name, s.type
        kind = s.type if s.default is not None else s.type | None
        return s.name, kind, field(default=s.default)
    return dataclasses.make_dataclass("TrainRun", [run_field(s) for s in settings], bases=(_Checked,),
                                      frozen=True, kw_only=True,
                                      namespace={"__module__": __name__, "__doc__": RUN_DOC,
                                                 "SETTINGS": tuple(settings)})


TrainRun = run_class(SETTINGS)


def add_arguments(parser: argparse.ArgumentParser, *, probe: bool = False,
                  registered: Mapping[str, Mapping[str, Any]] = MappingProxyType({})) -> None:
    """One option per setting (``probe``: only those the probe child takes);
    ``registered[name]``: options of setting ``name`` that a registry supplies."""
    for s in SETTINGS:
        if s.probe or not probe:
            s.add_argument(parser, **registered.get(s.name, {}))


def planned_argv(measurement: Mapping[str, Any], *, probe: bool = False) -> list[str]:
    """``--name value`` for every setting ``measurement`` plans (a None value: the
    setting's default, unless None has a word of its own); ``probe``: only the settings
    the probe child takes."""
    argv = []
    for s in SETTINGS:
        value = s.planned_value(measurement)
        if (s.probe or not probe) and value is not ABSENT and (value is not None or None in s.words):
            argv += [s.flag, s.word(value)]
    return argv


def command_line(run, *, probe: bool = False) -> list[str]:
    """``--name value`` for every set value of ``run`` (a TrainRun; a setting that is
    ``omit_default`` not at its default); ``probe``: only the settings the probe child takes."""
    argv = []
    for s in SETTINGS:
        value = getattr(run, s.name)
        if s.omit_default and value == s.default:
            continue
        if (s.probe or not probe) and value is not None:
            argv += [s.flag, s.word(value)]
    return argv


def axes() -> tuple[Setting, ...]:
    """The settings a training experiment sweeps (those declaring an ``axis``), in
    :data:`SETTINGS` order."""
    return tuple(s for s in SETTINGS if s.axis)


def record_fields(run) -> dict[str, Any]:
    """The record fields of ``run``'s recorded settings (a TrainRun)."""
    return {s.planned or s.name: s.recorded_value(getattr(run, s.name)) for s in SETTINGS if s.recorded}

