"""Issue 42's hostile inputs, one table: imports and claims, --configfile files, systems
whose cores are not theirs to know, a Slurm profile without Slurm, the schema command.

Each case writes its files in a scratch directory, runs one command in this process
(``archbench`` as :func:`archbench.cli.main`, or the --configfile check the workflow
profile runs), and asserts the exit code, the one line it prints, and that
``results/raw`` is unchanged. Every refusal here was accepted, or named the wrong thing,
before.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import REPO, count_input

from archbench import cli
from archbench.core.hardware import cores_of
from archbench.core.validate import ConfigError
from archbench.plan import systems
from archbench.plan.configfiles import check_configfiles
from archbench.results.imports import read_import

TINY = yaml.safe_load((REPO / "tests" / "campaigns" / "tiny.yaml").read_text())
# a record of an earlier run, which no refusal may touch
RECORD = ("results/raw/local/threads/rec.json", '{"status": "ok"}\n')


def campaign(**top) -> str:
    """The tiny campaign (small_cnn, thread_scaling on local) with ``top`` keys set."""
    return yaml.safe_dump({**TINY, **top})


def importing(*files: str) -> str:
    return campaign(imports=list(files))


def inline(system: dict) -> str:
    """The tiny campaign on system ``two`` defined inline as ``system``."""
    return campaign(systems=["two"], system_definitions={"two": system})


HEADER = "system,model,throughput,unit"
CLAIMS = "metric,system,model,value,unit,source"
CHECK = ("check", "c.yaml")

# id, files (name -> text), command, exit code, the line (err: starts with; out: equals)
CASES = [
    # imports: a configuration and repetition given twice, naming both rows
    ("import-identical-rows", {"c.yaml": importing("a.csv"), "a.csv":
                               f"{HEADER},repetition\nlocal,small_cnn,4000,img/s,1\n"
                               "local,small_cnn,4000,img/s,1\n"}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: a.csv: rows 1 and 2 (lines 2 and "
     "3): the same row twice (system=local, model=small_cnn, repetition 1)"),
    ("import-same-repetition", {"c.yaml": importing("a.csv"), "a.csv":
                                f"{HEADER}\nlocal,small_cnn,4000,img/s\n\nlocal,small_cnn,9000,img/s\n"},
     CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: a.csv: rows 1 and 2 (lines 2 and "
     "4): one configuration and repetition twice (system=local, model=small_cnn, repetition 0): "
     "4000 img/s and 9000 img/s (each run takes its own repetition)"),
    ("import-a-default-and-its-value", {"c.yaml": importing("a.csv"), "a.csv":
                                        f"{HEADER},nodes\nlocal,small_cnn,4000,img/s,\n"
                                        "local,small_cnn,4100,img/s,1\n"}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: a.csv: rows 1 and 2 (lines 2 and "
     "3): one configuration and repetition twice (system=local, model=small_cnn, nodes=1, "
     "repetition 0): 4000 img/s and 4100 img/s"),
    ("import-one-value-in-two-units", {"c.yaml": importing("k.csv"), "k.csv":
                                       "system,kernel,throughput,unit\nlocal,matmul,1000,GFLOP/s\n"
                                       "local,matmul,1,TFLOP/s\n"}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: k.csv: rows 1 and 2 (lines 2 and "
     "3): one configuration and repetition twice (system=local, kernel=matmul, repetition 0): "
     "1000 GFLOP/s and 1 TFLOP/s"),
    ("import-repetitions-apart", {"c.yaml": importing("a.csv"), "a.csv":
                                  f"{HEADER},repetition\nlocal,small_cnn,4000,img/s,0\n"
                                  "local,small_cnn,4100,img/s,1\n"}, CHECK, 0,
     "c.yaml: 4 measurements"),
    ("import-unknown-framework", {"c.yaml": importing("a.csv"), "a.csv":
                                  f"{HEADER},framework\nlocal,small_cnn,4000,img/s,jax\n"}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: a.csv: row 1 (line 2): column "
     "'framework': 'jax' is not one of tensorflow, pytorch"),
    ("import-two-frameworks", {"c.yaml": importing("a.csv"), "a.csv":
                               f"{HEADER},framework\nlocal,small_cnn,4000,img/s,pytorch\n"
                               "local,small_cnn,4000,img/s,tensorflow\n"}, CHECK, 0,
     "c.yaml: 4 measurements"),
    # claims: two that cannot both hold; the column that matches nothing
    ("claims-contradictory", {"c.yaml": importing("x-claims.csv"), "x-claims.csv":
                              f"{CLAIMS}\nthroughput,local,small_cnn,4000,img/s,p. 1\n"
                              "throughput,local,small_cnn,9000,img/s,p. 2\n"}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: x-claims.csv: rows 1 and 2 (lines "
     "2 and 3): two throughput claims of one configuration (system=local, framework=tensorflow, "
     "model=small_cnn) that cannot both hold: 4000 img/s (tolerance 10%) and 9000 img/s "
     "(tolerance 10%)"),
    ("claims-fraction-against-percent", {"c.yaml": importing("x-claims.csv"), "x-claims.csv":
                                         "metric,system,model,value,unit,source\n"
                                         "thread_efficiency,local,small_cnn,0.9,fraction,p. 1\n"
                                         "thread_efficiency,local,small_cnn,45,%,p. 2\n"}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: x-claims.csv: rows 1 and 2 (lines "
     "2 and 3): two thread_efficiency claims"),
    ("claims-one-value-stated-twice", {"c.yaml": importing("x-claims.csv"), "x-claims.csv":
                                       f"{CLAIMS}\nthroughput,local,small_cnn,1.74,img/s,sect. 6\n"
                                       "throughput,local,small_cnn,1.7,img/s,abstract\n"}, CHECK, 0,
     "c.yaml: 4 measurements"),
    ("claims-model-missing", {"c.yaml": importing("x-claims.csv"), "x-claims.csv":
                              f"{CLAIMS}\nspeedup,local,resnet50,1.8,x,p. 1\n"}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: x-claims.csv: row 1: column 'model': "
     "'resnet50' matches no configuration of the campaign (it runs model small_cnn)"),
    ("claims-metric-never-given", {"c.yaml": importing("x-claims.csv"), "x-claims.csv":
                                   f"{CLAIMS}\nspeedup,local,small_cnn,1.8,x,p. 1\n"}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: x-claims.csv: row 1: column 'metric': "
     "no configuration of the campaign gives a speedup (its node_scaling table is empty)"),
    # --configfile files Snakemake would refuse naming none
    ("configfile-empty", {"c.yaml": ""}, ("configfile", "c.yaml"), 1,
     "archbench: invalid configuration: c.yaml: (top level): a campaign must be a mapping "
     "(the file is empty)"),
    ("configfile-comment-only", {"c.yaml": "# nothing yet\n"}, ("configfile", "c.yaml"), 1,
     "archbench: invalid configuration: c.yaml: (top level): a campaign must be a mapping "
     "(the file is empty)"),
    ("configfile-list", {"c.yaml": "- campaign: x\n- systems: [local]\n"}, ("configfile", "c.yaml"),
     1, "archbench: invalid configuration: c.yaml: (top level): a campaign must be a mapping "
        "(the file holds a list)"),
    ("configfile-scalar", {"c.yaml": "42\n"}, ("configfile", "c.yaml"), 1,
     "archbench: invalid configuration: c.yaml: (top level): a campaign must be a mapping "
     "(the file holds a int)"),
    ("configfile-second-of-two", {"c.yaml": campaign(), "d.yaml": "[]\n"},
     ("configfile", "c.yaml", "d.yaml"), 1,
     "archbench: invalid configuration: d.yaml: (top level): a campaign must be a mapping "
     "(the file holds a list)"),
    ("configfile-json-list", {"c.json": "[1, 2]"}, ("configfile", "c.json"), 1,
     "archbench: invalid configuration: c.json: (top level): a campaign must be a mapping "
     "(the file holds a list)"),
    ("configfile-a-campaign", {"c.yaml": campaign()}, ("configfile", "c.yaml"), 0, ""),
    # systems whose cores the workflow's machine would have stood in for
    ("system-sockets-without-cores", {"c.yaml": inline({"arch": "x86_64", "sockets": 2})}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: system_definitions.two.cores_per_socket: "
     "missing (required)"),
    ("system-file-without-cores", {"c.yaml": campaign(systems=["two"]), "Snakefile": "",
                                   "config/systems/two.yaml": "arch: x86_64\nsockets: 2\n"},
     CHECK, 1, "archbench: invalid configuration: config/systems/two.yaml: cores_per_socket: "
               "missing (required)"),
    ("system-auto-cores-on-srun", {"c.yaml": inline({"arch": "x86_64", "sockets": 2,
                                                     "launcher": "srun", "cores_per_socket": "auto"})},
     CHECK, 1,
     "archbench: invalid configuration: c.yaml: system_definitions.two.cores_per_socket: 'auto' "
     "counts the cores of the machine running the workflow, not of a node that launcher srun "
     "runs on: give the node's cores per socket (or this_machine: true when the nodes are this "
     "machine)"),
    ("system-auto-cores-on-mpirun", {"c.yaml": inline({"arch": "x86_64", "launcher": "mpirun",
                                                       "cores_per_socket": "auto"})}, CHECK, 1,
     "archbench: invalid configuration: c.yaml: system_definitions.two.cores_per_socket: 'auto' "
     "counts the cores of the machine running the workflow, not of a node that launcher mpirun"),
    ("system-auto-cores-on-nodes-that-are-here", {"c.yaml": inline({
        "arch": "x86_64", "launcher": "srun", "cores_per_socket": "auto", "this_machine": True})},
     CHECK, 0, "c.yaml: 2 measurements"),
    ("system-auto-cores-here", {"c.yaml": inline({"arch": "x86_64", "cores_per_socket": "auto"})},
     CHECK, 0, "c.yaml: 2 measurements"),
    ("system-given-cores", {"c.yaml": inline({"arch": "x86_64", "sockets": 2, "launcher": "srun",
                                              "cores_per_socket": 2})}, CHECK, 0,
     "c.yaml: 2 measurements"),
    # a Slurm profile on a machine without sbatch
    ("slurm-run-without-sbatch", {"profiles/slurm/config.yaml": "executor: slurm\n", "Snakefile": ""},
     ("run", "--profile", "profiles/slurm"), 1,
     "archbench: --profile profiles/slurm submits jobs with sbatch, and this machine has no "
     "sbatch on PATH"),
    ("slurm-executor-argument", {"Snakefile": ""},
     ("paper", "--executor", "slurm"), 1,
     "archbench: --executor slurm submits jobs with sbatch, and this machine has no sbatch"),
    ("slurm-paper-without-sbatch", {"profiles/slurm/config.yaml": "executor: slurm\n", "Snakefile": ""},
     ("paper", "--profile", "profiles/slurm"), 1,
     "archbench: --profile profiles/slurm submits jobs with sbatch"),
]


def no_slurm(folder: Path, monkeypatch) -> None:
    """PATH: ``folder`` alone, with ``which`` (the Slurm plugin runs it when Snakemake's
    parser is built), whatever Slurm this machine has."""
    folder.mkdir(exist_ok=True)
    (folder / "which").symlink_to(shutil.which("which"))
    monkeypatch.setenv("PATH", str(folder))


def started(*argv) -> None:
    raise AssertionError(f"Snakemake started: {argv[1]}")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run(argv: tuple[str, ...]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``archbench ARGV``, or of the workflow profile's
    --configfile check for ``("configfile", FILE...)``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if argv[0] == "configfile":
                check_configfiles(["snakemake", "-n", "--configfile", *argv[1:]])
                code = 0
            else:
                code = cli.main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
            print(exc.code, file=err) if isinstance(exc.code, str) else None
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("files, argv, code, line", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_is_one_line(tmp_path, monkeypatch, files, argv, code, line):
    monkeypatch.chdir(tmp_path)
    no_slurm(tmp_path / "bin", monkeypatch)
    monkeypatch.setattr(cli.os, "execve", started)  # a refusal must come before Snakemake
    for name, text in {RECORD[0]: RECORD[1], **files}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    raw = snapshot(tmp_path / "results")
    got, out, err = run(argv)
    assert got == code, (out, err)
    if code:
        assert err.startswith(line) and err.count("\n") == 1 and "Traceback" not in err, err
        assert out == ""
        count_input("issue 42 (listed cases)", "rejected")
    else:
        assert out.strip() == line and err == "", (out, err)
        count_input("issue 42 (listed cases)", "accepted")
    assert snapshot(tmp_path / "results") == raw


def test_auto_cores_never_give_a_node_more_cores_than_this_machine(monkeypatch):
    monkeypatch.setattr(systems.os, "cpu_count", lambda: 2)
    definition = {"arch": "x86_64", "sockets": 4, "cores_per_socket": "auto"}
    with pytest.raises(ConfigError, match=r"^system_definitions.two.sockets: 4 sockets with "
                                          r"cores_per_socket 'auto': this machine has 2 cores$"):
        systems.resolve_system("two", definition)
    system = systems.resolve_system("two", {**definition, "sockets": 2})
    assert cores_of(system) == 2


def test_a_dry_run_with_slurm_and_no_sbatch_says_so_and_plans(tmp_path, monkeypatch, capsys):
    (tmp_path / "Snakefile").write_text("")
    no_slurm(tmp_path, monkeypatch)
    args, extra = cli.parser().parse_known_args(["plan", "--profile", str(REPO / "profiles/slurm")])
    assert cli.check_sbatch(args, extra, tmp_path) is None  # the plan goes on
    err = capsys.readouterr().err
    assert err.startswith("archbench: no sbatch on this machine: the plan below is what "
                          "--profile") and err.count("\n") == 1
    sbatch = tmp_path / "sbatch"
    sbatch.write_text("#!/bin/sh\n")
    sbatch.chmod(0o755)
    assert cli.check_sbatch(args, ["--cores", "1"], tmp_path) is None
    assert capsys.readouterr().err == ""


def test_an_imported_row_names_its_framework(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text(f"{HEADER},framework\nlocal,small_cnn,40,img/s,pytorch\nlocal,small_cnn,50,img/s,\n")
    assert read_import(path)["framework"].tolist() == ["pytorch", "tensorflow"]


def test_schema_prints_every_key_in_three_sections(capsys):
    assert cli.main(["schema"]) == 0
    text = capsys.readouterr().out
    schemas = yaml.safe_load(text)
    assert list(schemas) == ["campaign", "experiment", "system"]
    assert {"campaign", "systems", "experiments", "imports", "defaults"} <= set(
        schemas["campaign"]["properties"])
    assert "thread_scaling" in schemas["experiment"]["$defs"]
    assert {"sockets", "cores_per_socket", "launcher"} <= set(schemas["system"]["properties"])
    assert text.startswith("# Every key a campaign may use")
    assert cli.main(["schema", "system"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["description"].startswith("One machine kind")


def test_archbench_plan_names_an_empty_configfile(tmp_path):
    """The one case through Snakemake: its workflow profile runs the check above."""
    import subprocess
    import sys

    from conftest import tool_env
    (tmp_path / "empty.yaml").write_text("")
    proc = subprocess.run([sys.executable, "-m", "archbench.cli", "plan", "--workflow", str(REPO),
                           "--configfile", str(tmp_path / "empty.yaml")], capture_output=True,
                          text=True, timeout=300, env=tool_env(PYTHONPATH=str(REPO)), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.splitlines()[-1] == (
        f"archbench: invalid configuration: {tmp_path / 'empty.yaml'}: (top level): a campaign "
        "must be a mapping (the file is empty)")
    assert "Config file must be given" not in proc.stderr
