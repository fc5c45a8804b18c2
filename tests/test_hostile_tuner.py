"""Issue 53's hostile inputs to the tuner, one table per surface: a `tune` experiment
refused at plan time (``archbench check``), and a study's own files (journal, round
files, records) damaged or edited between runs, refused by the round and best jobs.

Each case asserts the exit code, the one line printed (a prefix: the rest says what to
do), and that nothing under ``results/`` changed. The study cases run the jobs in this
process on a real study of a small space (round files written by the tuner, records
valued by a surface), built once and copied per case.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import count_input
from test_hostile_inputs import run, snapshot

from archbench.core.record import raw_path
from archbench.plan.campaign import experiments_of, load_campaign
from archbench.plan.placeholders import choice_file, study_dir
from archbench.workflow import rule_bodies

LAYOUT = {"type": "tune", "models": ["small_cnn"], "image_size": 32, "num_classes": 10,
          "batch_per_process": [8, 16, 32], "inter_threads": [1, 2],
          "threads_per_process": ["cores", 1], "steps": 18, "warmup_steps": 2, "min_steps": 2,
          "budget_measurements": 5, "repetitions": 2, "timeout_minutes": 3}
THREADS = {"type": "thread_scaling", "models": ["small_cnn"], "threads": [1, 2], "batch_per_process": [8]}
KERNEL = {"type": "kernel", "kernels": ["matmul"], "sizes": [256], "tile_sizes": [128], "workers": [1]}
RECORD = ("results/raw/local/threads/rec.json", '{"status": "ok"}\n')  # no refusal may touch it
BAD = "archbench: invalid configuration: c.yaml: experiments.layout"


def campaign(drop: tuple = (), others: dict | None = None, campaign_systems=("local",), **keys) -> str:
    layout = {k: v for k, v in {**LAYOUT, **keys}.items() if k not in drop}
    return yaml.safe_dump({"campaign": "t", "systems": list(campaign_systems),
                           "experiments": {"layout": layout, **(others or {})}})


SWEEPS = {"th": THREADS, "k": KERNEL, "other": {**LAYOUT, "seed": 3},
          "big": {**THREADS, "models": ["resnet50"]}, "q": {**THREADS, "type": "quality",
                                                            "models": ["digits_cnn"]}}

# id, files, command, exit code, the line it prints (a prefix)
CONFIG_CASES = [
    ("both-budgets", {"c.yaml": campaign(budget_node_hours=1)}, 1,
     f"{BAD}.budget_node_hours: one budget: budget_measurements or budget_node_hours, not both"),
    ("no-budget", {"c.yaml": campaign(drop=("budget_measurements",))}, 1,
     f"{BAD}.budget_measurements: a tune experiment needs a budget: budget_measurements or budget_node_hours"),
    ("no-budget-but-minutes", {"c.yaml": campaign(drop=("budget_measurements",), minutes_per_measurement=2)},
     1, f"{BAD}.budget_measurements: a tune experiment needs a budget"),
    ("fp16-alone-on-cpu", {"c.yaml": campaign(precision=["fp16"])}, 1,
     f"{BAD}.precision: fp16 is in no configuration the tuner can run on system 'local'"),
    ("tf32-alone-on-cpu", {"c.yaml": campaign(math_mode=["tf32"])}, 1,
     f"{BAD}.math_mode: tf32 is in no configuration the tuner can run on system 'local'"),
    ("fp16-beside-fp32", {"c.yaml": campaign(precision=["fp32", "fp16"])}, 1,
     f"{BAD}.precision: fp16 is in no configuration the tuner can run on system 'local'"),
    ("tf32-beside-strict", {"c.yaml": campaign(math_mode=["strict", "tf32"])}, 1,
     f"{BAD}.math_mode: tf32 is in no configuration the tuner can run on system 'local'"),
    ("processes-3-on-2-cores", {"c.yaml": campaign(processes=[3])}, 1,
     f"{BAD}.processes: 3 is in no configuration the tuner can run on system 'local' (more processes than its 2 cores)"),
    ("processes-1-and-3-on-2-cores", {"c.yaml": campaign(processes=[1, 3])}, 1,
     f"{BAD}.processes: 3 is in no configuration the tuner can run on system 'local' (more processes than its 2 cores)"),
    ("processes-64", {"c.yaml": campaign(processes=[2, 64])}, 1,
     f"{BAD}.processes: 64 is in no configuration the tuner can run on system 'local'"),
    ("processes-zero", {"c.yaml": campaign(processes=[0])}, 1, f"{BAD}.processes"),
    ("processes-word", {"c.yaml": campaign(processes="some")}, 1, f"{BAD}.processes"),
    ("threads-5-on-2-cores", {"c.yaml": campaign(threads_per_process=[5])}, 1,
     f"{BAD}.threads_per_process: 5 is in no configuration the tuner can run on system 'local'"),
    ("threads-word", {"c.yaml": campaign(threads_per_process=["lots"])}, 1, f"{BAD}.threads_per_process.0"),
    ("sweep-not-an-experiment", {"c.yaml": campaign(sweep="nope")}, 1,
     f"{BAD}.sweep: 'nope' is not an experiment of this campaign"),
    ("sweep-the-tune-itself", {"c.yaml": campaign(sweep="layout")}, 1,
     f"{BAD}.sweep: 'layout' is a tune experiment"),
    ("sweep-another-tune", {"c.yaml": campaign(sweep="other", others={"other": SWEEPS["other"]})}, 1,
     f"{BAD}.sweep: 'other' is a tune experiment"),
    ("sweep-a-kernel", {"c.yaml": campaign(sweep="k", others={"k": KERNEL})}, 1,
     f"{BAD}.sweep: 'k' is a kernel experiment"),
    ("sweep-a-quality-run", {"c.yaml": campaign(sweep="q", others={"q": SWEEPS["q"]})}, 1,
     f"{BAD}.sweep: 'q' is a quality experiment"),
    ("sweep-of-another-model", {"c.yaml": campaign(sweep="big", others={"big": SWEEPS["big"]})}, 1,
     f"{BAD}.sweep: 'big' runs none of this tune's models (small_cnn)"),
    ("sweep-of-another-system", {"c.yaml": campaign(sweep="th", others={"th": {**THREADS, "systems": ["marenostrum4"]}},
                                         campaign_systems=("local", "marenostrum4"), systems=["local"])},
     1, f"{BAD}.sweep: 'th' runs on none of this tune's systems (local)"),
    ("sweep-empty-name", {"c.yaml": campaign(sweep="")}, 1, f"{BAD}.sweep: '' is not an experiment of this campaign"),
    ("sweep-a-number", {"c.yaml": campaign(sweep=3)}, 1, f"{BAD}.sweep: 3 is not of type 'string'"),
    ("sweep-a-training-sweep", {"c.yaml": campaign(sweep="th", others={"th": THREADS})}, 0, "c.yaml: 24 measurements"),
    ("budget-a-string", {"c.yaml": campaign(budget_measurements="5")}, 1,
     f"{BAD}.budget_measurements: '5' is not of type 'number'"),
    ("budget-negative", {"c.yaml": campaign(budget_measurements=-1)}, 1,
     f"{BAD}.budget_measurements: -1 is less than or equal to the minimum of 0"),
    ("budget-too-small", {"c.yaml": campaign(budget_measurements=0.01)}, 1,
     f"{BAD}.budget_measurements: 0.01 buys less than one trial measured at every rung"),
    ("budget-the-whole-sweep", {"c.yaml": campaign(budget_measurements=100)}, 1,
     f"{BAD}.budget_measurements: 100 is at or above the exhaustive sweep's"),
    ("node-hours-the-whole-sweep", {"c.yaml": campaign(drop=("budget_measurements",), budget_node_hours=1000)},
     1, f"{BAD}.budget_node_hours: 1000 is at or above the exhaustive sweep's"),
    ("budget-both-null", {"c.yaml": campaign(budget_measurements=None)}, 1, f"{BAD}.budget_measurements"),
    ("reduction-factor-1", {"c.yaml": campaign(reduction_factor=1)}, 1,
     f"{BAD}.reduction_factor: 1 is less than the minimum of 2"),
    ("seed-negative", {"c.yaml": campaign(seed=-1)}, 1, f"{BAD}.seed: -1 is less than the minimum of 0"),
    ("min-steps-zero", {"c.yaml": campaign(min_steps=0)}, 1, f"{BAD}.min_steps: 0 is less than the minimum of 1"),
    ("min-steps-over-steps", {"c.yaml": campaign(min_steps=40)}, 1, f"{BAD}.min_steps: 40 > steps 18"),
    ("cycle-time-zero", {"c.yaml": campaign(cycle_time_ms=[0])}, 1,
     f"{BAD}.cycle_time_ms.0: 0 is less than or equal to the minimum of 0"),
    ("fusion-negative", {"c.yaml": campaign(fusion_threshold_mb=[-1])}, 1,
     f"{BAD}.fusion_threshold_mb.0: -1 is less than the minimum of 0"),
    ("batch-empty", {"c.yaml": campaign(batch_per_process=[])}, 1,
     f"{BAD}.batch_per_process: [] should be non-empty"),
    ("two-data-sources", {"c.yaml": campaign(data=["synthetic", "real"])}, 1,
     f"{BAD}.data: a tune experiment searches with one data source"),
    ("nodes-two", {"c.yaml": campaign(nodes=[2])}, 1, f"{BAD}.nodes: not a key of tune experiments"),
    ("one-configuration", {"c.yaml": campaign(batch_per_process=[8], inter_threads=[1], processes=[1],
                                             threads_per_process=["cores"])}, 1,
     f"{BAD}.processes: the space has one configuration"),
]

# ---------------------------------------------------------------- a study's own files


def tune_files(results: Path) -> tuple[dict, dict, list[list[dict]]]:
    """The experiment, system and rounds (placeholders per round) of the LAYOUT study."""
    c = load_campaign(yaml.safe_load(campaign()))
    ms = [m for m in c.measurements if m["experiment"] == "layout"]
    rounds = [[m for m in ms if m["tune_round"] == r] for r in sorted({m["tune_round"] for m in ms})]
    return experiments_of(c.config)["layout"], c.systems["local"], rounds


def value(run: dict) -> float:
    """A surface with one best layout: more threads per process, bigger batch."""
    return 100.0 * run["intra_threads"] * (1 + run["batch_per_process"] / 64) / run["inter_threads"] ** 0.1


def dag_of(experiment: dict, system: dict, rounds: list[list[dict]]) -> SimpleNamespace:
    """What the tuner's jobs read of the workflow's DAG."""
    files = {str(choice_file("results", ms[0])): ms for ms in rounds}
    return SimpleNamespace(tune_rounds=files, statistic="mean",
                           tune_experiment=lambda _: (experiment, system))


class Files(dict):
    """A job's named inputs or outputs (Snakemake's: by attribute and by key)."""

    __getattr__ = dict.get


def round_job(dag: SimpleNamespace, rounds: list[list[dict]], r: int) -> None:
    previous = {"previous": str(choice_file("results", rounds[r - 1][0]))} if r else {}
    rule_bodies.tune_round(dag, Files(previous), Files(trials=str(choice_file("results", rounds[r][0]))),
                    log=[f"logs/round{r + 1}.log"])


def best_job(dag: SimpleNamespace, rounds: list[list[dict]]) -> None:
    best = study_dir("results", rounds[0][0]) / "best.json"
    rule_bodies.tune_best(dag, Files(previous=str(choice_file("results", rounds[-1][0]))),
                   Files(best=str(best)), log=["logs/best.log"])


def write_records(placeholders: list[dict], value_of=value) -> None:
    """An ok record for each placeholder of what its round file says it runs."""
    from archbench.core import provenance
    from archbench.core.record import make_record
    from archbench.execute.supervisor import identity_fields
    host = provenance.host_fields()
    chosen = json.loads(choice_file("results", placeholders[0]).read_text())
    for m in placeholders:
        run = chosen[raw_path(m)]
        record = make_record(**{**host, **identity_fields(run, Path("worker.log")), "env": host["env"],
                                "start_time": "2024-01-01T00:00:00Z", "end_time": "2024-01-01T00:00:30Z",
                                "status": "ok", "reason": "", "throughput": value_of(run),
                                "throughput_unit": "img/s"})
        path = Path("results", raw_path(m))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory) -> Path:
    """A folder holding a finished study of LAYOUT: every round file, record and best.json."""
    root = tmp_path_factory.mktemp("study")
    with contextlib.chdir(root):
        experiment, system, rounds = tune_files(Path("results"))
        dag = dag_of(experiment, system, rounds)
        Path("logs").mkdir()
        for r, placeholders in enumerate(rounds):
            round_job(dag, rounds, r)
            write_records(placeholders)
        best_job(dag, rounds)
    return root


def journal_lines(study: Path) -> list[str]:
    return (study / "study.journal").read_text().splitlines(keepends=True)


def truncate_journal(study: Path, rounds) -> str:
    lines = journal_lines(study)
    (study / "study.journal").write_text("".join(lines[:-3]) + lines[-3][: len(lines[-3]) // 2])
    return f"{study}/study.journal: damaged study journal (line {len(lines) - 2} is not JSON)"


def garbage_journal(study: Path, rounds) -> str:
    (study / "study.journal").write_bytes(b"\x00\xff not json\n")
    return f"{study}/study.journal: damaged study journal (line 1 is not JSON)"


def empty_journal(study: Path, rounds) -> str:
    (study / "study.journal").write_text("")
    return f"{study}/study.journal: holds no trial of round 1, which {study}/round1.json names"


def delete_journal(study: Path, rounds) -> str:
    (study / "study.journal").unlink()
    return f"{study}/study.journal: holds no trial of round 1, which {study}/round1.json names"


def journal_a_folder(study: Path, rounds) -> str:
    (study / "study.journal").unlink()
    (study / "study.journal").mkdir()
    return f"{study}/study.journal: unreadable study journal"


def journal_of_another_study(study: Path, rounds) -> str:
    """The journal of the same experiment with its space edited (batch 64 for 8), its
    round 1 asked in another folder and copied here."""
    scratch = study.parents[4] / "scratch"
    scratch.mkdir()
    edited = yaml.safe_load(campaign(batch_per_process=[64, 16, 32]))
    with contextlib.chdir(scratch):
        c = load_campaign(edited)
        ms = [m for m in c.measurements if m["experiment"] == "layout"]
        other = [[m for m in ms if m["tune_round"] == r] for r in sorted({m["tune_round"] for m in ms})]
        Path("logs").mkdir()
        round_job(dag_of(experiments_of(c.config)["layout"], c.systems["local"], other), other, 0)
        journal = scratch / study_dir("results", other[0][0]) / "study.journal"
    shutil.copy(journal, study / "study.journal")
    shutil.rmtree(scratch)
    return f"{study}/study.journal: "


def edit_told_value(study: Path, rounds) -> str:
    lines = journal_lines(study)
    for i in range(len(lines) - 1, -1, -1):
        op = json.loads(lines[i])
        if op.get("state") == 1 and op.get("values"):  # a trial told complete with its value
            number = op["trial_id"]
            op["values"] = [op["values"][0] * 10]
            lines[i] = json.dumps(op) + "\n"
            break
    (study / "study.journal").write_text("".join(lines))
    return f"{study}/study.journal: trial {number}: told"


def round_file(r: int, edit) -> callable:
    """A case editing round r's file (1-based; 0: the last round's) with ``edit``."""
    def mutate(study: Path, rounds) -> str:
        path = study / f"round{r or len(rounds)}.json"
        chosen = json.loads(path.read_text())
        new, line = edit(chosen, rounds[r - 1])
        path.write_text(new if isinstance(new, str) else json.dumps(new))
        return line.format(R=str(path))
    return mutate


def first_path(rounds_r: list[dict]) -> str:
    return raw_path(rounds_r[0])


def _set(chosen, path, **fields):
    chosen[path] = {**chosen[path], **fields}
    return chosen


STUDY_EDITS = {
    "round-file-truncated": (1, lambda c, ms: (json.dumps(c)[:40], "{R}: damaged round file (not JSON")),
    "round-file-a-list": (1, lambda c, ms: ([1, 2], "{R}: damaged round file (not a JSON object)")),
    "round-file-a-string": (1, lambda c, ms: ('"x"', "{R}: damaged round file (not a JSON object)")),
    "round-file-empty": (1, lambda c, ms: ("", "{R}: damaged round file (not JSON")),
    "round-entry-other-trial-number": (1, lambda c, ms: (_set(c, first_path(ms), trial={
        **c[first_path(ms)]["trial"], "number": 99}), "{R}: " + first_path(ms) + ": not what the study chose")),
    "round-entry-batch-outside-space": (1, lambda c, ms: (_set(c, first_path(ms), batch_per_process=4),
                                                         "{R}: " + first_path(ms) + ": not what the study chose")),
    "round-entry-threads-edited": (1, lambda c, ms: (_set(c, first_path(ms), intra_threads=64),
                                                    "{R}: " + first_path(ms) + ": not what the study chose")),
    "round-entry-steps-edited": (1, lambda c, ms: (_set(c, first_path(ms), measured_steps=1),
                                                  "{R}: " + first_path(ms) + ": not what the study chose")),
    "round-entry-an-error-instead": (1, lambda c, ms: ({**c, first_path(ms): {"error": "x"}},
                                                      "{R}: " + first_path(ms) + ": not what the study chose")),
    "round-entry-not-an-object": (1, lambda c, ms: ({**c, first_path(ms): 7},
                                                   "{R}: " + first_path(ms) + ": not what the study chose")),
    "round-entry-missing": (1, lambda c, ms: ({k: v for k, v in c.items() if k != first_path(ms)},
                                             "{R}: " + first_path(ms) + ": missing")),
    "round-entry-extra": (1, lambda c, ms: ({**c, "raw/local/layout/x/rep0.json": c[first_path(ms)]},
                                           "{R}: raw/local/layout/x/rep0.json: not a measurement of this round")),
    "last-round-file-truncated": (0, lambda c, ms: ("{", "{R}: damaged round file (not JSON")),
    "last-round-entry-other-trial": (0, lambda c, ms: (_set(c, first_path(ms), trial={
        **c[first_path(ms)]["trial"], "number": 0 if c[first_path(ms)]["trial"]["number"] else 1}),
        "{R}: " + first_path(ms) + ": not what the study chose")),
}


def record_edit(r: int, edit, line: str) -> callable:
    """A case editing the first record of round r (1-based; 0: the last round)."""
    def mutate(study: Path, rounds) -> str:
        path = Path("results", raw_path(rounds[r - 1][0]))
        record = json.loads(path.read_text())
        new = edit(record)
        path.write_text(new if isinstance(new, str) else json.dumps(new))
        return line.format(P=str(path))
    return mutate


def _trial(record: dict, **fields) -> dict:
    return {**record, "trial": {**record["trial"], **fields}}


RECORD_EDITS = {
    "record-of-another-trial": (1, lambda rec: _trial(rec, number=rec["trial"]["number"] + 50),
                                "{P}: a record of trial"),
    "record-of-another-study": (1, lambda rec: _trial(rec, study="0123456789ab"), "{P}: a record of study"),
    "record-without-its-trial": (1, lambda rec: {k: v for k, v in rec.items() if k != "trial"},
                                 "{P}: a record of trial None"),
    "record-truncated": (1, lambda rec: json.dumps(rec)[:50], "{P}: "),
    "record-a-list": (1, lambda rec: "[]", "{P}: "),
    "last-record-of-another-trial": (0, lambda rec: _trial(rec, number=rec["trial"]["number"] + 50),
                                     "{P}: a record of trial"),
    "last-record-truncated": (0, lambda rec: json.dumps(rec)[:50], "{P}: "),
}


def delete_round_file(study: Path, rounds) -> str:
    (study / "round1.json").unlink()
    return f"{study}/round1.json: unreadable round file"


def round_file_a_folder(study: Path, rounds) -> str:
    (study / "round1.json").unlink()
    (study / "round1.json").mkdir()
    return f"{study}/round1.json: unreadable round file"


def round_file_of_another_study(study: Path, rounds) -> str:
    """Round 1's file swapped for round 3's (a file of the same folder, another round)."""
    path = sorted(study.glob("round*.json"))[-1]
    shutil.copy(path, study / "round1.json")
    return f"{study}/round1.json: "


# id, the edit (returns the line expected), the job rerun (round k, 1-based, or "best")
STUDY_CASES = [
    ("journal-truncated", truncate_journal, 2),
    ("journal-truncated-at-best", truncate_journal, "best"),
    ("journal-garbage", garbage_journal, 2),
    ("journal-emptied", empty_journal, 2),
    ("journal-emptied-at-best", empty_journal, "best"),
    ("journal-deleted", delete_journal, 2),
    ("journal-deleted-at-best", delete_journal, "best"),
    ("journal-a-folder", journal_a_folder, 2),
    ("journal-of-the-space-before-an-edit", journal_of_another_study, 2),
    ("told-value-edited", edit_told_value, "best"),
    ("round-file-deleted", delete_round_file, 2),
    ("round-file-a-folder", round_file_a_folder, 2),
    ("round-file-of-another-round", round_file_of_another_study, 2),
    *((name, round_file(r, edit), "best" if r == 0 else r + 1) for name, (r, edit) in STUDY_EDITS.items()),
    *((name, record_edit(r, edit, line), "best" if r == 0 else r + 1) for name, (r, edit, line) in RECORD_EDITS.items()),
]


@pytest.mark.parametrize("files, code, line", [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES])
def test_a_hostile_tune_experiment_is_refused_in_one_line(tmp_path, monkeypatch, files, code, line):
    monkeypatch.chdir(tmp_path)
    for name, text in {RECORD[0]: RECORD[1], **files}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    raw = snapshot(tmp_path / "results")
    got, out, err = run(("check", "c.yaml"))
    assert got == code, (out, err)
    if code:
        assert err.startswith(line) and err.count("\n") == 1 and "Traceback" not in err, err
        assert out == ""
        count_input("issue 53 tune experiments", "rejected")
    else:
        assert out.strip() == line and err == "", (out, err)
        count_input("issue 53 tune experiments", "accepted")
    assert snapshot(tmp_path / "results") == raw


def rerun(step, dag, rounds) -> tuple[int, str]:
    """(exit code, message) of rerunning a tuner job as the workflow does."""
    from snakemake.exceptions import WorkflowError
    try:
        best_job(dag, rounds) if step == "best" else round_job(dag, rounds, step - 1)
    except WorkflowError as exc:
        return 1, str(exc)
    return 0, ""


@pytest.mark.parametrize("edit, step", [c[1:] for c in STUDY_CASES], ids=[c[0] for c in STUDY_CASES])
def test_a_damaged_or_edited_study_file_is_refused_naming_it(finished_study, tmp_path, monkeypatch, edit, step):
    shutil.copytree(finished_study, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    experiment, system, rounds = tune_files(Path("results"))
    study = study_dir("results", rounds[0][0])
    if step != "best":  # the round rerun after the edit: its own file goes, as Snakemake would
        choice_file("results", rounds[step - 1][0]).unlink()
    line = edit(study, rounds)
    before = snapshot(tmp_path / "results")
    code, message = rerun(step, dag_of(experiment, system, rounds), rounds)
    assert code == 1, f"accepted: {line}"
    assert message.startswith(f"archbench: {line}"), message
    assert "\n" not in message and "Traceback" not in message
    count_input("issue 53 tune study files", "rejected")
    after = snapshot(tmp_path / "results")
    assert after == before, sorted(k for k in {*after, *before} if after.get(k) != before.get(k))


@pytest.mark.parametrize("edit", [{"batch_per_process": [16, 32, 64]}, {"budget_measurements": 6}, {"seed": 1}])
def test_an_edited_space_or_budget_starts_a_study_of_its_own_beside_the_old(finished_study, tmp_path,
                                                                           monkeypatch, edit):
    """The finding: after an edit, the old study's journal, rounds and best were reused
    (a best outside the space). Now the edited plan is another study, in its own folder;
    the old one is kept as it was, and the new study's answer lies in the new space."""
    shutil.copytree(finished_study, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    old = snapshot(tmp_path / "results" / "tune")
    c = load_campaign(yaml.safe_load(campaign(**edit)))
    ms = [m for m in c.measurements if m["experiment"] == "layout"]
    rounds = [[m for m in ms if m["tune_round"] == r] for r in sorted({m["tune_round"] for m in ms})]
    _, _, before = tune_files(Path("results"))
    assert study_dir("results", rounds[0][0]) != study_dir("results", before[0][0])
    dag = dag_of(experiments_of(c.config)["layout"], c.systems["local"], rounds)
    for r, placeholders in enumerate(rounds):
        round_job(dag, rounds, r)
        write_records(placeholders)
    best_job(dag, rounds)
    after = snapshot(tmp_path / "results" / "tune")
    assert {k: after[k] for k in old} == old  # the old study, kept
    found = json.loads((study_dir("results", rounds[0][0]) / "best.json").read_text())
    space = {**LAYOUT, **edit}["batch_per_process"]
    assert found["best"]["point"]["batch_per_process"] in space
    assert found["study"] == rounds[0][0]["trial"]["study"] != before[0][0]["trial"]["study"]


def test_the_same_plan_is_the_same_study():
    one, two = (tune_files(Path("results"))[2][0][0] for _ in range(2))
    assert one["trial"]["study"] == two["trial"]["study"]
    assert study_dir("results", one).name == f"tensorflow-small_cnn-{one['trial']['study']}"


def unchosen_trial(tmp_path: Path, entry) -> tuple[dict, Path]:
    """A layout trial's spec whose round file holds ``entry`` for it (None: no entry)."""
    c = load_campaign(yaml.safe_load(campaign()))
    m = next(m for m in c.measurements if m["experiment"] == "layout")
    round_file = tmp_path / "round1.json"
    round_file.write_text(json.dumps({} if entry is None else {raw_path(m): entry}))
    return {"measurement": m, "system": c.systems["local"], "tune_round": str(round_file)}, round_file


@pytest.mark.parametrize("entry", [{"trial": {"number": 3}}, 7])
def test_an_entry_of_another_trial_is_refused_before_any_worker(tmp_path, entry):
    """An entry that is no trial of the placeholder's study (another's, or no object) is
    refused before any worker, with no record (:mod:`archbench.plan.choices`)."""
    from archbench.execute.supervisor import ChoiceRefused, run_leased
    spec, round_file = unchosen_trial(tmp_path, entry)
    output = tmp_path / "rep0.json"
    with pytest.raises(ChoiceRefused, match=f"^{round_file}: raw/.*: (not a measurement|.*not what its plan lets it run)"):
        run_leased(spec, output=output, log_path=tmp_path / "log", renew=lambda: None)
    assert not output.exists()


@pytest.mark.parametrize("entry", [None, {"error": "round 2: no trial"}])
def test_a_trial_its_round_file_does_not_choose_fails_with_a_record(tmp_path, entry):
    """The finding: a round file without the trial's entry (a stale one, after an edit)
    made the supervisor raise (``trial: 'number' is a required property``). Now the run
    fails with a record saying why, and the record names no trial."""
    from archbench.core.record import read_record
    from archbench.execute.supervisor import run_leased
    spec, round_file = unchosen_trial(tmp_path, entry)
    output = tmp_path / "rep0.json"
    assert run_leased(spec, output=output, log_path=tmp_path / "log", renew=lambda: None) == 0
    record = read_record(output)
    assert record["status"] == "failed" and record.get("trial") is None
    assert record["reason"].startswith(f"{round_file}: ") or record["reason"] == "round 2: no trial"
