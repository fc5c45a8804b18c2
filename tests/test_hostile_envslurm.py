"""Issue 53's hostile inputs on what reaches a job's environment and sbatch: environment
variables that load code or steer archbench in a system's or an experiment's ``env``
(refused unless the run allows them on its command line), ``slurm_extra`` options beyond
its allowlist, and a choice file archbench wrote (a tuner's round file) edited to put
environment variables, arguments or another identity in front of a worker.

Each case runs one command in this process (``archbench check`` as
:func:`archbench.cli.main`, or the supervisor as :func:`archbench.execute.supervisor.main`)
and asserts the exit code, the one line it prints, and that nothing under ``results/``
changed (no record, no log, no worker: the supervisor's benchmark is replaced by one that
fails the test).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path
from typing import Callable

import pytest
import yaml
from conftest import REPO, count_input

from archbench import cli
from archbench.core.record import raw_path
from archbench.execute import supervisor
from archbench.execute.specfiles import digest, spec_text
from archbench.execute.tune_rounds import resolved
from archbench.plan.campaign import experiments_of, load_campaign
from archbench.plan.experiment_types.tune import plan_of
from archbench.plan.placeholders import choice_file
from archbench.plan.systems import run_settings

TINY = yaml.safe_load((REPO / "tests" / "campaigns" / "tiny.yaml").read_text())
RECORD = ("results/raw/local/threads/rec.json", '{"status": "ok"}\n')
SITE = {"arch": "x86_64", "sockets": 1, "cores_per_socket": 2, "launcher": "srun"}
CHECK = ("check", "c.yaml")
ALLOW = "; refused unless this run allows it (archbench run --allow-env {0}, or --config allow_env={0})"
BAD = "archbench: invalid configuration: "


def on_site(site: dict | None = None, **top) -> dict[str, str]:
    """A workflow (a Snakefile) whose system file config/systems/site.yaml is ``site``
    and the tiny campaign c.yaml on it, with ``top`` keys set."""
    return {"Snakefile": "", "config/systems/site.yaml": yaml.safe_dump({**SITE, **(site or {})}),
            "c.yaml": yaml.safe_dump({**TINY, "systems": ["site"], **top})}


def site_env(name: str, value: str = "/tmp/x") -> dict[str, str]:
    return on_site({"env": {name: value}})


def env_refused(where: str, name: str, what: str) -> str:
    return f"{BAD}{where}{name}: sets {what}" + ALLOW.format(name)


def experiment_env(key: str = "env", **env) -> dict[str, str]:
    threads = {**TINY["experiments"]["threads"], key: env}
    return on_site(experiments={"threads": threads})


LOADER = "the dynamic loader (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT load shared libraries)"
PYTHON = ("the Python interpreter (PYTHONPATH, PYTHONSTARTUP, PYTHONHOME, PYTHONUSERBASE "
          "load code; PYTHONINSPECT waits for input)")
OURS = "archbench itself (e.g. ARCHBENCH_GIT_COMMIT is the record's git_commit)"
RUNTIME = "the container runtime (binds, the image's environment)"
FILE = "config/systems/site.yaml: env."
# name, what the line says it steers
SYSTEM_ENV = [
    ("PYTHONPATH", PYTHON), ("PYTHONSTARTUP", PYTHON), ("PYTHONHOME", PYTHON),
    ("PYTHONUSERBASE", PYTHON), ("PYTHONINSPECT", PYTHON), ("PYTHONWARNINGS", PYTHON),
    ("PYTHONBREAKPOINT", PYTHON), ("LD_PRELOAD", LOADER), ("LD_LIBRARY_PATH", LOADER),
    ("LD_AUDIT", LOADER), ("DYLD_INSERT_LIBRARIES", "the dynamic loader"),
    ("BASH_ENV", "a file every non-interactive bash runs first"), ("ENV", "a file every sh runs first"),
    ("PERL5LIB", "Perl's module search path"), ("PERL5OPT", "Perl's options (-M loads a module)"),
    ("NODE_OPTIONS", "Node's options (--require loads code)"),
    ("GCONV_PATH", "glibc's character-set modules, loaded as shared libraries"),
    ("PATH", "which programs (python, srun, mpirun) run"),
    ("HOME", "the user's site-packages and shell start-up files"),
    ("ARCHBENCH_GIT_COMMIT", OURS), ("ARCHBENCH_IMAGE", OURS), ("ARCHBENCH_HOST_LOCK", OURS),
    ("TF_CONFIG", "TensorFlow's cluster, which archbench's launcher builds"),
    ("CUDA_VISIBLE_DEVICES", "the GPUs a run sees, which archbench binds"),
    ("SLURM_CPU_BIND", "what srun starts and where"),
    ("OMPI_MCA_plm_rsh_agent", "Open MPI's mpirun (e.g. the agent it starts ranks with)"),
    ("APPTAINERENV_LD_PRELOAD", RUNTIME), ("SINGULARITY_BIND", RUNTIME),
]


def extra(words: str) -> dict[str, str]:
    return on_site({"slurm_extra": words})


def extra_refused(words: str, option: str) -> str:
    return (f"{BAD}config/systems/site.yaml: slurm_extra: '{words}' sets {option}, which "
            "slurm_extra may not set: only options that change neither what runs, nor where "
            "its output goes, nor the planned layout (--begin, --hint, --licenses, --mail-type, "
            "--mail-user, --nice, --no-requeue, --requeue, --switches, --tmp, --wckey)")


def plugin_refused(words: str, name: str, instead: str) -> str:
    return (f"{BAD}config/systems/site.yaml: slurm_extra: '{words}' sets the {name} option, "
            f"which the Slurm executor plugin manages ({instead})")


CHECKED = "c.yaml: 2 measurements"
# id, files (name -> text), command, exit code, the line (err: starts with; out: equals)
CASES = [
    *[(f"system-env-{name}", site_env(name), CHECK, 1, env_refused(FILE, name, what))
      for name, what in SYSTEM_ENV],
    ("inline-system-env-PYTHONPATH",
     {"c.yaml": yaml.safe_dump({**TINY, "systems": ["two"], "system_definitions": {
         "two": {**SITE, "launcher": "local", "env": {"PYTHONPATH": "/tmp/x"}}}})}, CHECK, 1,
     env_refused("c.yaml: system_definitions.two.env.", "PYTHONPATH", PYTHON)),
    ("system-env-one-of-several", on_site({"env": {"KMP_BLOCKTIME": 0, "LD_PRELOAD": "/tmp/x.so"}}),
     CHECK, 1, env_refused(FILE, "LD_PRELOAD", LOADER)),
    ("experiment-env-PYTHONPATH", experiment_env(PYTHONPATH="/tmp/x"), CHECK, 1,
     env_refused("c.yaml: experiments.threads.env.", "PYTHONPATH", PYTHON)),
    ("experiment-env-BASH_ENV", experiment_env(BASH_ENV="/tmp/x"), CHECK, 1,
     env_refused("c.yaml: experiments.threads.env.", "BASH_ENV",
                 "a file every non-interactive bash runs first")),
    ("experiment-env-ARCHBENCH_GIT_COMMIT", experiment_env(ARCHBENCH_GIT_COMMIT="deadbeef"), CHECK,
     1, env_refused("c.yaml: experiments.threads.env.", "ARCHBENCH_GIT_COMMIT", OURS)),
    ("experiment-env-LD_PRELOAD", experiment_env(LD_PRELOAD="/tmp/x.so"), CHECK, 1,
     env_refused("c.yaml: experiments.threads.env.", "LD_PRELOAD", LOADER)),
    ("experiment-env-TF_CONFIG", experiment_env(TF_CONFIG="x"), CHECK, 1,
     env_refused("c.yaml: experiments.threads.env.", "TF_CONFIG",
                 "TensorFlow's cluster, which archbench's launcher builds")),
    ("defaults-env-LD_PRELOAD", on_site(defaults={**TINY["defaults"], "env": {"LD_PRELOAD": "/x.so"}}),
     CHECK, 1, env_refused("c.yaml: defaults.env.", "LD_PRELOAD", LOADER)),
    ("mkl-env-LD_PRELOAD", on_site(experiments={"ii": {
        "type": "inter_intra", "models": ["small_cnn"], "batch_per_process": [4],
        "mkl_env": {"KMP_BLOCKTIME": "0", "LD_PRELOAD": "/tmp/x.so"}}}), CHECK, 1,
     env_refused("c.yaml: experiments.ii.mkl_env.", "LD_PRELOAD", LOADER)),
    ("allow-env-in-the-campaign-file", on_site(allow_env="PYTHONPATH"), CHECK, 1,
     f"{BAD}c.yaml: allow_env: a run allows environment variables on its command line only "
     "(archbench run --allow-env NAME, or --config allow_env=NAME), never in a campaign file"),
    ("allow-env-another-name", site_env("PYTHONPATH"), (*CHECK, "--allow-env", "LD_PRELOAD"), 1,
     env_refused(FILE, "PYTHONPATH", PYTHON)),
    ("allow-env-one-of-two-set", on_site({"env": {"PYTHONPATH": "/x", "LD_PRELOAD": "/y.so"}}),
     (*CHECK, "--allow-env", "PYTHONPATH"), 1, env_refused(FILE, "LD_PRELOAD", LOADER)),
    ("allow-env-not-a-name", site_env("PYTHONPATH"), (*CHECK, "--allow-env", "A;B"), 1,
     f"{BAD}--config: allow_env: 'A;B' is not allowed here (shell metacharacters, quotes, "
     "newlines or an unexpected form)"),
    # opted in on the command line for this run: accepted
    ("allow-env-the-name", site_env("PYTHONPATH"), (*CHECK, "--allow-env", "PYTHONPATH"), 0, CHECKED),
    ("allow-env-both-names", on_site({"env": {"PYTHONPATH": "/x", "LD_PRELOAD": "/y.so"}}),
     (*CHECK, "--allow-env", "PYTHONPATH", "--allow-env", "LD_PRELOAD"), 0, CHECKED),
    # what sites set there: accepted
    ("system-env-math-libraries", on_site({"env": {"KMP_BLOCKTIME": 0, "OMP_PROC_BIND": "close",
                                                   "MKL_ENABLE_INSTRUCTIONS": "AVX2"}}),
     CHECK, 0, CHECKED),
    # slurm_extra: an allowlist
    *[(f"slurm-extra-{words.split('=')[0][2:]}", extra(words), CHECK, 1,
       extra_refused(words, words.split("=")[0]))
      for words in ("--array=1-4", "--container=/tmp/x", "--uid=0", "--gid=0", "--ntasks-per-node=4",
                    "--ntasks-per-core=1", "--dependency=afterok:1", "--wrap=id", "--chdir=/tmp",
                    "--input=/etc/passwd", "--open-mode=append", "--get-user-env", "--propagate=ALL",
                    "--hold", "--test-only", "--signal=B:USR1@60", "--bb=capacity=1G",
                    "--profile=all", "--cpu-freq=low", "--threads-per-core=1",
                    "--cores-per-socket=2", "--sockets-per-node=1", "--time-min=1",
                    "--kill-on-invalid-dep=yes", "--deadline=now", "--reboot", "--mem-bind=local")],
    ("slurm-extra-one-of-several", extra("--hint=nomultithread --array=1-2"), CHECK, 1,
     extra_refused("--hint=nomultithread --array=1-2", "--array")),
    ("slurm-extra-output", extra("--output=/tmp/x"), CHECK, 1,
     plugin_refused("--output=/tmp/x", "output file", "archbench or the plugin sets it")),
    ("slurm-extra-export", extra("--export=ALL"), CHECK, 1,
     plugin_refused("--export=ALL", "environment export", "archbench or the plugin sets it")),
    ("slurm-extra-clusters", extra("--clusters=other"), CHECK, 1,
     plugin_refused("--clusters=other", "cluster specification", "archbench or the plugin sets it")),
    ("slurm-extra-qos", extra("--qos=high"), CHECK, 1,
     plugin_refused("--qos=high", "quality of service", "use the system key qos")),
    ("slurm-extra-hint", extra("--hint=nomultithread"), CHECK, 0, CHECKED),
    ("slurm-extra-mail", extra("--mail-type=END --mail-user=me@site.org"), CHECK, 0, CHECKED),
    ("slurm-extra-begin-nice-wckey", extra("--begin=now+60 --nice=10 --wckey=bench --no-requeue"),
     CHECK, 0, CHECKED),
]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run(main, argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``main(argv)``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
            print(exc.code, file=err) if isinstance(exc.code, str) else None
    return code, out.getvalue(), err.getvalue()


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.mark.parametrize("files, argv, code, line", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_env_or_slurm_extra_is_one_line(tmp_path, monkeypatch, files, argv, code, line):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {RECORD[0]: RECORD[1], **files})
    before = snapshot(tmp_path / "results")
    got, out, err = run(cli.main, list(argv))
    assert got == code, (out, err)
    if code:
        assert err.startswith(line) and err.count("\n") == 1 and "Traceback" not in err, err
        assert out == ""
        count_input("issue 53 (env, slurm_extra)", "rejected")
    else:
        assert out.strip() == line and err == "", (out, err)
        count_input("issue 53 (env, slurm_extra)", "accepted")
    assert snapshot(tmp_path / "results") == before


# A tuner's study whose round 2 file is edited by hand.
TUNE = {"campaign": "tunehostile", "systems": ["local"], "experiments": {"layout": {
    "type": "tune", "models": ["small_cnn"], "image_size": 32, "num_classes": 10,
    "batch_per_process": [8, 16, 32], "inter_threads": [1, 2], "threads_per_process": ["cores", 1],
    "steps": 8, "warmup_steps": 1, "min_steps": 2, "budget_measurements": 5, "repetitions": 1,
    "timeout_minutes": 3, "memory_limit_mb": 4096, "env": {"KMP_BLOCKTIME": "0"}}}}


@pytest.fixture(scope="module")
def study() -> tuple[dict, dict, dict]:
    """(a round-2 placeholder, the entry its round file would hold, its spec)."""
    campaign = load_campaign(copy.deepcopy(TUNE))
    system = campaign.systems["local"]
    placeholder = next(m for m in campaign.measurements if m.get("tune_round") == 1)
    point = plan_of(experiments_of(campaign.config)["layout"], system).space.points()[0]
    entry = resolved(placeholder, point, 3, system=system)
    spec = {"measurement": placeholder, "system": run_settings(system),
            "tune_round": str(choice_file("results", placeholder))}
    return placeholder, entry, spec


def edited(key: str, value) -> Callable:
    def edit(entry: dict) -> dict:
        return {**entry, key: value}
    return edit


def without(key: str) -> Callable:
    return lambda entry: {k: v for k, v in entry.items() if k != key}


TAIL = ("not what its plan lets it run (the file was changed since archbench wrote it); "
        "remove it and rerun to choose again")
# id, how the entry is edited (a function of the entry; a whole file: the JSON text), the reason
ROUND_CASES = [
    ("env-PYTHONPATH-added", lambda e: {**e, "env": {**e["env"], "PYTHONPATH": "/tmp/x"}},
     "env.PYTHONPATH: not what its plan gives (unset)"),
    ("env-LD_PRELOAD-added", lambda e: {**e, "env": {**e["env"], "LD_PRELOAD": "/tmp/x.so"}},
     "env.LD_PRELOAD: not what its plan gives (unset)"),
    ("env-ARCHBENCH_GIT_COMMIT-added", lambda e: {**e, "env": {**e["env"], "ARCHBENCH_GIT_COMMIT": "x"}},
     "env.ARCHBENCH_GIT_COMMIT: not what its plan gives (unset)"),
    ("env-value-changed", lambda e: {**e, "env": {"KMP_BLOCKTIME": "200"}},
     "env.KMP_BLOCKTIME: not what its plan gives ('0')"),
    ("env-emptied", lambda e: {**e, "env": {}}, "env.KMP_BLOCKTIME: not what its plan gives ('0')"),
    ("env-not-a-mapping", edited("env", "PYTHONPATH=/tmp"),
     "env: not what its plan gives ({'KMP_BLOCKTIME': '0'})"),
    ("env-removed", without("env"), "env: missing (its plan gives {'KMP_BLOCKTIME': '0'})"),
    ("model-changed", edited("model", "resnet50"), "model: not what its plan gives ('small_cnn')"),
    ("system-changed", edited("system", "piz-daint"), "system: not what its plan gives ('local')"),
    ("experiment-changed", edited("experiment", "other"), "experiment: not what its plan gives ('layout')"),
    ("kind-changed", edited("kind", "kernel"), "kind: not what its plan gives ('train')"),
    ("steps-raised", edited("measured_steps", 10**9), "measured_steps: not what its plan gives (8)"),
    ("warmup-removed", without("warmup_steps"), "warmup_steps: missing (its plan gives 1)"),
    ("steps-added", edited("steps", 10**9), "steps: not a key a choice sets (its plan has none)"),
    ("strategy-changed", edited("strategy", "ddp"), "strategy: not what its plan gives ('horovod')"),
    ("data-changed", edited("data", "real"), "data: not what its plan gives ('synthetic')"),
    ("timeout-raised", edited("timeout_minutes", 10**6), "timeout_minutes: not what its plan gives (3)"),
    ("memory-cap-removed", without("memory_limit_mb"), "memory_limit_mb: missing (its plan gives 4096)"),
    ("config-id-changed", edited("config_id", "x"), "config_id: not what its plan gives"),
    ("argument-in-batch", edited("batch_per_process", "8 --output /etc/passwd"),
     "batch_per_process: no value its plan can give it"),
    ("negative-processes", edited("processes_per_node", -1), "processes_per_node: no value its plan can give it"),
    ("boolean-threads", edited("intra_threads", True), "intra_threads: no value its plan can give it"),
    ("huge-batch", edited("batch_per_process", 2**40), "batch_per_process: no value its plan can give it"),
    ("precision-with-a-space", edited("precision", "fp32 --x"), "precision: no value its plan can give it"),
    ("an-extra-key", edited("argv", ["python", "-c", "1"]), "argv: not a key a choice sets (its plan has none)"),
    ("an-extra-key-with-a-newline", edited("a\nb", 1), "'a\\nb': not a key a choice sets (its plan has none)"),
    ("tuning-a-list", edited("tuning", {"loader_workers": [1, 2]}),
     "tuning: not a mapping of settings to plain values"),
    ("tuning-not-a-mapping", edited("tuning", "x"), "tuning: not a mapping of settings to plain values"),
    ("trial-number-removed", lambda e: {**e, "trial": {k: v for k, v in e["trial"].items() if k != "number"}},
     "trial: not the placeholder's trial with a trial number"),
    ("trial-budget-changed", lambda e: {**e, "trial": {**e["trial"], "budget_node_hours": 0}},
     "trial: not the placeholder's trial with a trial number"),
    ("entry-a-list", lambda e: [e], "not a measurement (a JSON object)"),
    ("entry-a-number", lambda e: 7, "not a measurement (a JSON object)"),
    ("error-with-a-newline", lambda e: {"error": "x\nLD_PRELOAD=/tmp/x"}, "error: not one line of text"),
    ("error-with-more", lambda e: {"error": "x", "env": {"LD_PRELOAD": "/x"}}, "error: not one line of text"),
]


def stop_worker(*args, **kwargs):
    raise AssertionError("a worker would start")


@pytest.mark.parametrize("edit, reason", [c[1:] for c in ROUND_CASES], ids=[c[0] for c in ROUND_CASES])
def test_an_edited_round_file_reaches_no_worker(tmp_path, monkeypatch, study, edit, reason):
    placeholder, entry, spec = study
    round_file = spec["tune_round"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(supervisor, "supervise", stop_worker)
    record = f"results/{raw_path(placeholder)}"
    text = spec_text(spec)
    spec_file = f"results/specs/tunehostile/{digest(text)}.json"
    write(tmp_path, {RECORD[0]: RECORD[1], spec_file: text,
                     round_file: json.dumps({raw_path(placeholder): edit(copy.deepcopy(entry))})})
    before = snapshot(tmp_path / "results")
    got, out, err = run(supervisor.main, ["--spec-file", spec_file, "--output", record,
                                          "--log", "logs/rep0.log"])
    line = f"archbench.run: {round_file}: {raw_path(placeholder)}: {reason}"
    assert (got, out) == (1, ""), (got, out, err)
    assert err.startswith(line) and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.rstrip().endswith(reason if reason.startswith("error") else TAIL)
    assert snapshot(tmp_path / "results") == before and not (tmp_path / "logs").exists()
    count_input("issue 53 (round files)", "rejected")


def test_a_round_file_archbench_wrote_runs_as_written(tmp_path, monkeypatch, study):
    placeholder, entry, spec = study
    round_file = spec["tune_round"]
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {round_file: json.dumps({raw_path(placeholder): entry})})
    assert supervisor.chosen_layout(spec) == entry
    # a whole file that is no mapping of record paths: one line, no traceback
    write(tmp_path, {round_file: "[1, 2]"})
    with pytest.raises(ValueError, match=f"^{round_file}: no layout chosen for "):
        supervisor.chosen_layout(spec)
    count_input("issue 53 (round files)", "accepted")


def test_the_plan_shows_the_environment_each_job_gets():
    from archbench.plan.submission import campaign_plan, environment_notes
    campaign = copy.deepcopy(TINY)
    campaign["experiments"]["threads"]["env"] = {"KMP_BLOCKTIME": "0"}
    campaign["system_definitions"] = {"local": {"arch": "auto", "cores_per_socket": 2,
                                                "env": {"OMP_PROC_BIND": "close"}}}
    planned = load_campaign(campaign)
    lines = environment_notes(planned.measurements)
    assert lines[0] == "threads on local: `KMP_BLOCKTIME=0` `OMP_PROC_BIND=close` (2 measurements)"
    assert lines[1].startswith("every job also gets archbench's own `TF_USE_LEGACY_KERAS=1`")
    # the plan file and the dry run's plan (one text) carry them; a campaign without env
    # keeps its plan as it was
    text = campaign_plan("tiny", planned.measurements, planned.systems)[1]
    assert all(f"\n**Environment:** {line}\n" in text for line in lines)
    tiny = load_campaign(copy.deepcopy(TINY))
    assert environment_notes(tiny.measurements) == []
    assert "Environment" not in campaign_plan("tiny", tiny.measurements, tiny.systems)[1]


def test_allow_env_reaches_snakemake_as_its_config():
    args = cli.parser().parse_args(["run", "--allow-env", "PYTHONPATH", "--allow-env", "LD_PRELOAD"])
    words = cli.snakemake_arguments(args, ["--config", "x=1"], Path.cwd())
    assert words[words.index("--config"):][:3] == ["--config", "allow_env=PYTHONPATH,LD_PRELOAD", "x=1"]
    paper = cli.snakemake_arguments(cli.parser().parse_args(["paper", "--allow-env", "A"]), [], Path.cwd())
    assert "allow_env=A" in paper and "regenerate_only=True" in paper and paper.count("--config") == 1


def test_a_best_layout_archbench_chose_runs_and_an_edited_one_does_not(monkeypatch):
    from archbench.plan import choices
    from archbench.results.tables import best
    placeholder = next(m for m in load_campaign(yaml.safe_load(
        (REPO / "tests" / "campaigns" / "best.yaml").read_text())).measurements if m.get("best_of"))
    layout = {"processes_per_node": 2, "intra_threads": 1, "inter_threads": 1, "batch_per_process": 4}
    monkeypatch.setattr(best, "summary_of", lambda df, statistic: df)
    monkeypatch.setattr(best, "best_hybrid", lambda table: table)
    monkeypatch.setattr(best, "best_layout", lambda table, m: {**layout, "img_s": 1.0})
    entry = best.choose_layouts([placeholder], None)[raw_path(placeholder)]
    assert choices.refusal(placeholder, entry) is None
    assert choices.refusal(placeholder, {**entry, "env": {"LD_PRELOAD": "/x.so"}}) == \
        "env.LD_PRELOAD: not what its plan gives (unset)"
    assert choices.refusal(placeholder, {**entry, "tuning": {"best_of": ["layout", "x y"]}}) == \
        "tuning: not a mapping of settings to plain values"
    assert choices.refusal(placeholder, {**entry, "precision": "bf16"}) == \
        "precision: not a key a choice sets (its plan has none)"
    assert choices.refusal(placeholder, {**entry, "trial": {"number": 1}}) == \
        "trial: not a key a choice sets (its plan has none)"
    assert choices.refusal({**placeholder, "precision": "bf16"}, entry) == \
        "precision: missing (its plan gives 'bf16')"
