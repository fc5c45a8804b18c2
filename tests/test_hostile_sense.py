"""Issue 53's hostile numbers, one table: every number sense-checked where it enters, and
records read safely.

Each case writes its files in a scratch directory (a record under ``results/raw``, an
import file, a baseline table; a FIFO, a device or a link where the case says so), runs
one command in this process (``archbench`` as :func:`archbench.cli.main`), and asserts
the exit code, the one line it prints and that nothing under ``results/`` changed. A
results folder holding the hostile record is compared with one holding a sound record
of the same configuration: collection (the reader every surface shares) names the record
it leaves out, and why. The precision table's quality flag and the energy table's
repetitions are checked on tables built from records.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import pytest
import yaml
from conftest import count_input
from test_hostile_inputs import campaign, no_slurm, run, started
from test_sense import train_record

from archbench import cli
from archbench.core.files import MAX_RECORD_BYTES
from archbench.results.collect import records_to_frame
from archbench.results.tables.energy import energy as energy_table
from archbench.results.tables.precision import precision_speedup

RECORD = "results/raw/s/e/c/rep0.json"
SOUND = ("results/raw/s/e/c/rep1.json", "new/raw/s/e/c/rep0.json")  # the record's twins
COMPARE = ("compare", "results", "new")
EXCLUDED = f"archbench compare: base: excluded invalid record: {RECORD}: "
KNOWN_MODELS = ("small_cnn, digits_cnn, alexnet, vgg16, resnet50, resnet101, resnet152, "
                "inception_v3, inception_v4, vit_tiny, vit_b16, gpt_tiny, gpt2_124m, gpt2_350m")


class Fifo:
    """A FIFO in the case's files: a reader that opens it waits for a writer forever."""


class Link:
    """A symbolic link to ``target`` ("{root}" stands for the scratch directory)."""

    def __init__(self, target: str):
        self.target = target


class Sparse:
    """A file of ``size`` zero bytes that takes no disk space."""

    def __init__(self, size: int):
        self.size = size


def text(record: dict) -> str:
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


def repetition(record: dict, k: int) -> dict:
    return {**record, "repetition": k, "run_id": f"c/rep{k}"}


def twins(record: dict) -> dict:
    """The sound records beside a hostile one: rep1 of the base, rep0 of the new side."""
    return {SOUND[0]: text(repetition(record, 1)), SOUND[1]: text(record)}


def hostile(edit: dict, base: dict | None = None) -> dict:
    """The files of a compare case: ``base`` (a sound training record) with ``edit``
    as rep0 of results/, beside its sound twins."""
    base = base or train_record()
    return {**twins(base), RECORD: text({**base, **edit})}


# ---------------------------------------------------------------- time-to-accuracy records
def quality_metrics(**edits) -> dict:
    """The metrics of a run that reached 0.9 at its second evaluation, step 40 of a cap of
    200, in 2.0 s on the clock; ``edits`` replace values (None removes a metric)."""
    values = {"target_accuracy": (0.9, "fraction"), "accuracy_reached": (1, "1 = yes, 0 = no"),
              "quality_steps": (40, "steps"), "quality_s": (2.0, "s"),
              "evaluations": ("20:0.5000 40:0.9100", "step:fraction"),
              "steps_to_accuracy": (40, "steps"), "time_to_accuracy_s": (2.0, "s")}
    out = {name: {"value": value, "unit": unit} for name, (value, unit) in values.items()}
    for name, value in edits.items():
        if value is None:
            out.pop(name)
        else:
            out[name] = {"value": value, "unit": out.get(name, {"unit": ""})["unit"]}
    return out


QUALITY = train_record(
    model="digits_cnn", image_size=8, data="real", strategy="single", workers=1,
    processes_per_node=1, batch_per_process=32, global_batch=32, warmup_steps=0,
    measured_steps=200, step_times_s=[], throughput=40 * 32 / 2.0, metrics=quality_metrics())
NOT_REACHED = quality_metrics(accuracy_reached=0, quality_steps=200, evaluations="100:0.5000 200:0.8000",
                              steps_to_accuracy=None, time_to_accuracy_s=None)


def quality(**edits) -> dict:
    return hostile({"metrics": quality_metrics(**edits)}, QUALITY)


# ---------------------------------------------------------------------------- energy
def reading(source="rapl", covers="cpu package", joules=300.0, status="measured",
            interval_s=5.2, **extra) -> dict:
    return {"source": source, "covers": covers, "joules": joules, "status": status,
            "reason": extra.pop("reason", ""), "limits": "RAPL", "interval_s": interval_s, **extra}


def energy(*entries: dict) -> dict:
    return hostile({"energy": list(entries)})


# ---------------------------------------------------------------------- tables, imports
def table(**edits) -> str:
    """A measurements table of the sound training record, one row, with ``edits``."""
    frame = records_to_frame([train_record()])
    for column, value in edits.items():
        frame[column] = value
    return frame.to_csv(index=False)


KERNEL_TABLE = records_to_frame([{**train_record(), "kind": "kernel", "model": None, "kernel": "matmul",
                                  "strategy": "workers", "throughput_unit": "GFLOP/s",
                                  "throughput": 1e20, "problem_size": 1024}]).to_csv(index=False)
HEADER = "system,model,throughput,unit"
CHECK = ("check", "c.yaml")
IMPORTED = campaign(imports=["a.csv"])
TOO_FAST = "over 10 x the peak of"  # the physical bound's words


def sidecar(flops) -> str:
    return yaml.safe_dump({"training_flops": flops})


IMPORT_ERROR = "archbench: invalid configuration: c.yaml: imports.0: a.csv: row 1 (line 2): "
UNREGISTERED = (f"{IMPORT_ERROR}column 'model': 'googlenet' is not a registered model, so its "
                "img/s cannot be held to the physical bound: declare its training FLOPs per image "
                "in the file's mapping (training_flops: {googlenet: <FLOPs>}) to import it")

# id, files (name -> text, Fifo, Link or Sparse), command, exit code, the line (err: starts
# with; out: equals; "" when the command prints nothing to stderr and only its report out)
CASES = [
    # records read through one reader: a regular file inside raw/, of at most 64 MiB
    ("fifo-record", {**twins(train_record()), RECORD: Fifo()}, COMPARE, 0,
     f"{EXCLUDED}not read as a record: not a regular file (a FIFO, device or socket)"),
    ("link-to-dev-zero", {**twins(train_record()), RECORD: Link("/dev/zero")}, COMPARE, 0,
     f"{EXCLUDED}not read as a record: a link to /dev/zero, outside {{root}}/results/raw"),
    ("link-to-dev-null", {**twins(train_record()), RECORD: Link("/dev/null")}, COMPARE, 0,
     f"{EXCLUDED}not read as a record: a link to /dev/null, outside {{root}}/results/raw"),
    ("link-to-a-file-outside", {**twins(train_record()), "secret.json": text(train_record()),
                                RECORD: Link("{root}/secret.json")}, COMPARE, 0,
     f"{EXCLUDED}not read as a record: a link to {{root}}/secret.json, outside {{root}}/results/raw"),
    ("link-to-etc-passwd", {**twins(train_record()), RECORD: Link("/etc/passwd")}, COMPARE, 0,
     f"{EXCLUDED}not read as a record: a link to /etc/passwd, outside {{root}}/results/raw"),
    ("link-up-and-out", {**twins(train_record()), "results/r.json": text(train_record()),
                         RECORD: Link("../../../../r.json")}, COMPARE, 0,
     f"{EXCLUDED}not read as a record: a link to {{root}}/results/r.json, outside {{root}}/results/raw"),
    ("link-to-a-fifo-inside", {**twins(train_record()), "results/raw/keep/f": Fifo(),
                               RECORD: Link("../../../keep/f")}, COMPARE, 0,
     f"{EXCLUDED}not read as a record: not a regular file (a FIFO, device or socket)"),
    ("link-inside-raw-is-read", {**twins(train_record()), "results/raw/keep/r.json": text(train_record()),
                                 RECORD: Link("../../../keep/r.json")}, COMPARE, 0, ""),
    ("directory-named-rep0", {**twins(train_record()), f"{RECORD}/x": "{}"}, COMPARE, 0,
     f"{EXCLUDED}not read as a record: is a directory, not a file"),
    ("record-over-the-cap", {**twins(train_record()), RECORD: Sparse(MAX_RECORD_BYTES + 1)}, COMPARE, 0,
     f"{EXCLUDED}not read as a record: {MAX_RECORD_BYTES + 1:,} bytes, over the limit of "
     f"{MAX_RECORD_BYTES:,}"),

    # time-to-accuracy records: accuracy in [0, 1], reached as evaluated, steps within the cap
    ("reached-with-every-evaluation-low", quality(evaluations="20:0.1200 40:0.1200"), COMPARE, 0,
     f"{EXCLUDED}metrics.accuracy_reached: 1, but the last evaluation is 0.1200 (target 0.9)"),
    ("reached-after-an-earlier-hit", quality(evaluations="20:0.9500 40:0.9100"), COMPARE, 0,
     f"{EXCLUDED}metrics.accuracy_reached: 1, but step 20:0.9500 reached it earlier (target 0.9)"),
    ("not-reached-though-evaluated-above", hostile({"metrics": {
        **NOT_REACHED, "evaluations": {"value": "100:0.5000 200:0.9500", "unit": "step:fraction"}}}, QUALITY),
     COMPARE, 0, f"{EXCLUDED}metrics.accuracy_reached: 0, but an evaluation reached the target 0.9 (0.9500)"),
    ("reached-two", quality(accuracy_reached=2), COMPARE, 0,
     f"{EXCLUDED}metrics.accuracy_reached: 2 is not 1 (yes) or 0 (no)"),
    ("reached-true-text", quality(accuracy_reached="yes"), COMPARE, 0,
     f"{EXCLUDED}metrics.accuracy_reached: 'yes' is not 1 (yes) or 0 (no)"),
    ("target-above-one", quality(target_accuracy=1.5), COMPARE, 0,
     f"{EXCLUDED}metrics.target_accuracy: 1.5 is not a fraction in (0, 1]"),
    ("target-zero", quality(target_accuracy=0), COMPARE, 0,
     f"{EXCLUDED}metrics.target_accuracy: 0 is not a fraction in (0, 1]"),
    ("target-missing", quality(target_accuracy=None), COMPARE, 0,
     f"{EXCLUDED}metrics.target_accuracy: None is not a fraction in (0, 1]"),
    ("steps-above-the-cap", quality(quality_steps=500, steps_to_accuracy=500,
                                    evaluations="20:0.5000 500:0.9100"), COMPARE, 0,
     f"{EXCLUDED}metrics.quality_steps: 500 is not a step count from 1 to the cap, measured_steps 200"),
    ("steps-zero", quality(quality_steps=0), COMPARE, 0,
     f"{EXCLUDED}metrics.quality_steps: 0 is not a step count from 1 to the cap, measured_steps 200"),
    ("steps-fractional", quality(quality_steps=40.5), COMPARE, 0,
     f"{EXCLUDED}metrics.quality_steps: 40.5 is not a step count from 1 to the cap, measured_steps 200"),
    ("negative-clock", quality(quality_s=-2.0), COMPARE, 0,
     f"{EXCLUDED}metrics.quality_s: -2.0 is not a positive number of seconds"),
    ("zero-clock", quality(quality_s=0), COMPARE, 0,
     f"{EXCLUDED}metrics.quality_s: 0 is not a positive number of seconds"),
    ("negative-time-to-accuracy", quality(time_to_accuracy_s=-2.0), COMPARE, 0,
     f"{EXCLUDED}metrics.time_to_accuracy_s: -2.0 is not a positive number of seconds"),
    ("clock-as-text", quality(quality_s="fast"), COMPARE, 0,
     f"{EXCLUDED}metrics.quality_s: 'fast' is not a positive number of seconds"),
    ("accuracy-above-one", quality(evaluations="20:0.5000 40:1.2000"), COMPARE, 0,
     f"{EXCLUDED}metrics.evaluations: 40:1.2000: accuracy 1.2 is not a fraction in [0, 1]"),
    ("accuracy-negative", quality(evaluations="20:-0.5000 40:0.9100"), COMPARE, 0,
     f"{EXCLUDED}metrics.evaluations: 20:-0.5000: accuracy -0.5 is not a fraction in [0, 1]"),
    ("evaluations-out-of-order", quality(evaluations="40:0.5000 20:0.9100"), COMPARE, 0,
     f"{EXCLUDED}metrics.evaluations: 20:0.9100: step 20 does not follow step 40"),
    ("evaluations-not-pairs", quality(evaluations="twenty:0.5"), COMPARE, 0,
     f"{EXCLUDED}metrics.evaluations: 'twenty:0.5' is not step:accuracy"),
    ("evaluations-a-number", quality(evaluations=0.91), COMPARE, 0,
     f"{EXCLUDED}metrics.evaluations: 0.91 is not 'step:accuracy' pairs"),
    ("last-evaluation-not-the-last-step", quality(evaluations="20:0.5000 30:0.9100"), COMPARE, 0,
     f"{EXCLUDED}metrics.evaluations: the last evaluation is not at the last step run (quality_steps 40)"),
    ("steps-to-accuracy-not-the-run", quality(steps_to_accuracy=10), COMPARE, 0,
     f"{EXCLUDED}metrics.steps_to_accuracy: 10 steps in 2.0 s, not the run's quality_steps 40 in "
     "quality_s 2.0 s"),
    ("time-to-accuracy-missing", quality(time_to_accuracy_s=None), COMPARE, 0,
     f"{EXCLUDED}metrics.steps_to_accuracy: 40 steps in None s, not the run's quality_steps 40 in "
     "quality_s 2.0 s"),
    ("not-reached-with-a-time-to-it", hostile({"metrics": {
        **NOT_REACHED, "time_to_accuracy_s": {"value": 9.0, "unit": "s"}}}, QUALITY), COMPARE, 0,
     f"{EXCLUDED}metrics.steps_to_accuracy: given for a run that did not reach its target"),
    ("reached-record-is-sound", quality(), COMPARE, 0, ""),
    ("reached-record-without-its-clock-is-sound", quality(quality_steps=None, quality_s=None,
                                                          evaluations=None), COMPARE, 0, ""),
    ("steps-to-accuracy-above-the-cap", quality(quality_steps=None, steps_to_accuracy=900,
                                                evaluations=None), COMPARE, 0,
     f"{EXCLUDED}metrics.steps_to_accuracy: 900 is not a step count from 1 to the cap, measured_steps 200"),
    ("not-reached-record-is-sound", hostile({"metrics": NOT_REACHED}, QUALITY), COMPARE, 0, ""),

    # energy: positive, within a sensor's power x the interval, one reading per source and scope
    ("energy-negative", energy(reading(joules=-500.0)), COMPARE, 0,
     f"{EXCLUDED}energy.0.joules: -500.0 J measured: a measured energy is above 0 J"),
    ("energy-zero", energy(reading(joules=0)), COMPARE, 0,
     f"{EXCLUDED}energy.0.joules: 0 J measured: a measured energy is above 0 J"),
    ("energy-null-measured", energy(reading(joules=None)), COMPARE, 0,
     f"{EXCLUDED}energy.0.joules: None J measured: a measured energy is above 0 J"),
    ("energy-terajoules-in-a-second", energy(reading(joules=1e12, interval_s=5.2)), COMPARE, 0,
     f"{EXCLUDED}energy.0.joules: 1e+12 J over 5.2 s is 1.92e+11 W, above 1 node x 20,000 W"),
    ("energy-dram-above-a-node", energy(reading(covers="dram", joules=25_000 * 5.2)), COMPARE, 0,
     f"{EXCLUDED}energy.0.joules: 130000 J over 5.2 s is 2.5e+04 W, above 1 node x 20,000 W"),
    ("energy-slurm-megawatts", energy(reading(source="slurm", covers="node", joules=1e9)), COMPARE, 0,
     f"{EXCLUDED}energy.0.joules: 1e+09 J over 5.2 s is 1.92e+08 W, above 1 node x 20,000 W"),
    ("energy-nvml-on-a-cpu-run", energy(reading(source="nvml", covers="gpu board")), COMPARE, 0,
     f"{EXCLUDED}energy.0: an NVML GPU board reading in a cpu run"),
    ("energy-nvml-not-measured-on-a-cpu-run",
     energy(reading(source="nvml", covers="gpu board", joules=None, status="not measured")), COMPARE, 0,
     f"{EXCLUDED}energy.0: an NVML GPU board reading in a cpu run"),
    ("energy-two-rapl-packages", energy(reading(joules=100.0), reading(joules=900.0)), COMPARE, 0,
     f"{EXCLUDED}energy.1: a second rapl cpu package reading (entry 0 is the first): one reading "
     "per source and scope"),
    ("energy-two-slurm-nodes", energy(reading(source="slurm", covers="node", joules=None, status="not measured"),
                                      reading(source="slurm", covers="node")), COMPARE, 0,
     f"{EXCLUDED}energy.1: a second slurm node reading (entry 0 is the first): one reading per "
     "source and scope"),
    ("energy-rapl-of-a-gpu-board", energy(reading(covers="gpu board")), COMPARE, 0,
     f"{EXCLUDED}energy.0: rapl does not measure a gpu board"),
    ("energy-nvml-of-a-node", energy(reading(source="nvml", covers="node")), COMPARE, 0,
     f"{EXCLUDED}energy.0: nvml does not measure a node"),
    ("energy-interval-shorter-than-the-window", energy(reading(interval_s=1.0)), COMPARE, 0,
     f"{EXCLUDED}energy.0.interval_s: 1 s does not cover the measured window of 5.1 s"),
    ("energy-sound-readings", energy(reading(), reading(covers="dram", joules=40.0),
                                     reading(source="slurm", covers="node", joules=None,
                                             status="not measured", reason="not a Slurm job")), COMPARE, 0, ""),
    ("energy-implausible-kept-as-flagged", energy(reading(joules=-3.0, status="implausible",
                                                          reason="the counter went back")), COMPARE, 0, ""),

    # imports: an unregistered model only with its FLOPs declared, and then bounded
    ("import-unregistered-model-too-fast", {"c.yaml": IMPORTED, "a.csv": f"{HEADER}\nlocal,googlenet,1e20,img/s\n"},
     CHECK, 1, UNREGISTERED),
    ("import-unregistered-model", {"c.yaml": IMPORTED, "a.csv": f"{HEADER}\nlocal,googlenet,100,img/s\n"},
     CHECK, 1, UNREGISTERED),
    ("import-declared-flops-too-fast", {"c.yaml": IMPORTED, "a.csv": f"{HEADER}\nlocal,googlenet,1e20,img/s\n",
                                        "a.yaml": sidecar({"googlenet": 3.0e9})}, CHECK, 1,
     f"{IMPORT_ERROR}column 'throughput': 1e+20 img/s x 3e+09 training FLOP/img (googlenet, as its "
     "file declares) = 3e+29 FLOP/s, over 10 x the peak of 1024 CPU cores"),
    ("import-declared-flops-another-model", {"c.yaml": IMPORTED, "a.csv": f"{HEADER}\nlocal,googlenet,100,img/s\n",
                                             "a.yaml": sidecar({"lenet": 3.0e9})}, CHECK, 1, UNREGISTERED),
    ("import-flops-negative", {"c.yaml": IMPORTED, "a.csv": f"{HEADER}\nlocal,googlenet,100,img/s\n",
                               "a.yaml": sidecar({"googlenet": -1})}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: a.yaml: training_flops.googlenet: -1 is "
     "not a positive number of FLOPs per image"),
    ("import-flops-text", {"c.yaml": IMPORTED, "a.csv": f"{HEADER}\nlocal,googlenet,100,img/s\n",
                           "a.yaml": sidecar({"googlenet": "many"})}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: a.yaml: training_flops.googlenet: many is "
     "not a positive number of FLOPs per image"),
    ("import-flops-boolean", {"c.yaml": IMPORTED, "a.csv": f"{HEADER}\nlocal,googlenet,100,img/s\n",
                              "a.yaml": sidecar({"googlenet": True})}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: a.yaml: training_flops.googlenet: True is "
     "not a positive number of FLOPs per image"),
    ("import-flops-a-list", {"c.yaml": IMPORTED, "a.csv": f"{HEADER}\nlocal,googlenet,100,img/s\n",
                             "a.yaml": sidecar([3.0e9])}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: a.yaml: training_flops: expected a "
     "mapping of model to FLOPs per image"),
    ("import-registered-model-too-fast", {"c.yaml": IMPORTED, "a.csv": f"{HEADER}\nlocal,resnet50,1e20,img/s\n"},
     CHECK, 1, f"{IMPORT_ERROR}column 'throughput': 1e+20 img/s x "),

    # compare baselines given as tables: the physical bound and registered names per row
    ("baseline-table-too-fast", {"base.csv": table(throughput=1e20), **twins(train_record())},
     ("compare", "base.csv", "new"), 2,
     "archbench compare: base (base.csv): line 2: throughput: 1e+20 img/s x "),
    ("baseline-table-unregistered-model", {"base.csv": table(model="googlenet"), **twins(train_record())},
     ("compare", "base.csv", "new"), 2,
     f"archbench compare: base (base.csv): line 2: model: 'googlenet' is not a registered model "
     f"(known: {KNOWN_MODELS})"),
    ("baseline-table-kernel-too-fast", {"base.csv": KERNEL_TABLE, **twins(train_record())},
     ("compare", "base.csv", "new"), 2,
     "archbench compare: base (base.csv): line 2: throughput: 1e+20 GFLOP/s = 1e+29 FLOP/s, over 10 x"),
    ("new-table-too-fast", {"new.csv": table(throughput=1e20), **twins(train_record())},
     ("compare", "results", "new.csv"), 2,
     "archbench compare: new (new.csv): line 2: throughput: 1e+20 img/s x "),
    ("baseline-table-sound", {"base.csv": table(), **twins(train_record())},
     ("compare", "base.csv", "new"), 0, ""),
    ("compare-with-a-table-too-fast", {"c.yaml": campaign(compare_with="base.csv"),
                                       "base.csv": table(throughput=1e20)}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: compare_with: base (base.csv): line 2: throughput: "
     "1e+20 img/s x "),
]


def plant(root: Path, name: str, content) -> None:
    """Write one of a case's files under ``root``."""
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, Fifo):
        os.mkfifo(path)
    elif isinstance(content, Link):
        path.symlink_to(content.target.replace("{root}", str(root)))
    elif isinstance(content, Sparse):
        with open(path, "wb") as handle:
            handle.truncate(content.size)
    else:
        path.write_text(content)


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: its kind, and a regular file's bytes, a link's target."""
    out = {}
    for p in sorted(root.rglob("*")):
        info = p.lstat()
        if stat.S_ISLNK(info.st_mode):
            out[str(p.relative_to(root))] = ("link", os.readlink(p))
        elif stat.S_ISREG(info.st_mode):
            out[str(p.relative_to(root))] = ("file", info.st_size, p.read_bytes() if info.st_size < 2**20 else b"")
        else:
            out[str(p.relative_to(root))] = (stat.S_IFMT(info.st_mode),)
    return out


def hang(*_):
    raise TimeoutError("the command hung")


@pytest.mark.parametrize("files, argv, code, line", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_number_is_one_line(tmp_path, monkeypatch, files, argv, code, line):
    root = tmp_path.resolve()
    monkeypatch.chdir(root)
    no_slurm(root / "bin", monkeypatch)
    monkeypatch.setattr(cli.os, "execve", started)  # a refusal must come before Snakemake
    (root / "results").mkdir()
    for name, content in files.items():
        plant(root, name, content)
    before = snapshot(root / "results")
    signal.signal(signal.SIGALRM, hang)
    signal.alarm(30)
    try:
        got, out, err = run(argv)
    finally:
        signal.alarm(0)
    line = line.replace("{root}", str(root))
    assert got == code, (out, err)
    assert "Traceback" not in err and "Traceback" not in out
    if line:
        assert err.startswith(line) and err.count("\n") == 1, err
        count_input("issue 53 (sense, listed cases)", "rejected")
    else:
        assert err == "", err
        count_input("issue 53 (sense, listed cases)", "accepted")
    if code:
        assert out == ""
    assert "root:" not in err + out  # a link to /etc/passwd is never echoed
    assert snapshot(root / "results") == before


# ------------------------------------------------------------ the tables built on records
def run_of(precision: str, losses: list, k: int = 0, **edits) -> dict:
    """An ok fp32-strict-eager (or ``precision``) run of the sound training record."""
    record = train_record(precision=precision, math_mode="strict", graph="eager", losses=losses,
                          experiment_type="thread_scaling",
                          loss_first=losses[0], loss_last=losses[-1], **edits)
    from archbench.workloads.training.outcome import loss_decreased
    finite = [x for x in losses if x is not None]
    record["loss_decreased"] = loss_decreased(finite) if len(finite) == len(losses) else False
    config = "c" if precision == "fp32" else f"c_{precision}"
    return {**record, "config_id": config, "repetition": k, "run_id": f"{config}/rep{k}"}


FALLING = [2.3, 2.0, 1.8, 1.6, 1.5, 1.4]
RISING = [1.4, 1.5, 1.6, 1.8, 2.0, 2.3]
NONE = [None] * 6


@pytest.mark.parametrize("bf16, fp32, flag", [
    (NONE, FALLING, True),  # every bf16 loss was not finite: the speedup is not shown bare
    ([2.3, 2.0, None, 1.6, 1.5, 1.4], FALLING, True),  # one step's loss not finite
    (RISING, FALLING, True),  # bf16's loss rose every step
    (RISING, RISING, True),  # both rose: neither trains the model
    (FALLING, RISING, True),  # the twin it is measured against does not train
    (FALLING, FALLING, False),  # both train alike
    ([2.3, 2.0, 1.8, 1.62, 1.5, 1.41], FALLING, False),  # within the tolerance of its twin
])
def test_a_loss_that_does_not_train_sets_the_quality_flag(bf16, fp32, flag):
    frame = records_to_frame([run_of("fp32", fp32), run_of("bf16", bf16)])
    table = precision_speedup(frame)
    assert len(table) == 1 and table["speedup"].iloc[0] == pytest.approx(1.0)
    assert bool(table["quality_flag"].iloc[0]) is flag
    count_input("issue 53 (sense, listed cases)", "rejected" if flag else "accepted")


@pytest.mark.parametrize("joules, status", [
    ((100.0, 1e6), "measured; repetitions disagree: 0.156 to 1.56e+03 J/img"),
    ((100.0, 250.0), "measured; repetitions disagree: 0.156 to 0.391 J/img"),
    ((100.0, 110.0), "measured"),  # run-to-run noise
])
def test_repetitions_that_disagree_on_energy_say_so(joules, status):
    runs = [repetition(train_record(energy=[reading(joules=j)]), k) for k, j in enumerate(joules)]
    table = energy_table(records_to_frame(runs))
    assert table["status"].tolist() == [status]
    assert table["j_per_img"].iloc[0] == pytest.approx(sum(joules) / 2 / 640)
    count_input("issue 53 (sense, listed cases)", "accepted" if status == "measured" else "rejected")


def test_a_worker_passes_over_a_fifo_or_device_beside_its_record(tmp_path):
    """A worker looks for another repetition's vendor evidence among its siblings: a FIFO
    there would block it forever, a link to /dev/zero fill its memory."""
    from archbench.workloads.training.vendor_evidence.reuse import earlier_record
    os.mkfifo(tmp_path / "rep1.json")
    (tmp_path / "rep2.json").symlink_to("/dev/zero")
    signal.signal(signal.SIGALRM, hang)
    signal.alarm(10)
    try:
        assert earlier_record(tmp_path / "rep0.json", "abc") is None
    finally:
        signal.alarm(0)
