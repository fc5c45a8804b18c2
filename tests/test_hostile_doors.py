"""Issue 53's doors, one table: every door a configuration enters by (imports, claims,
campaigns, the training worker) holds it to one framework x strategy x variable update x
device matrix (:func:`archbench.workloads.training.matrix.outside_matrix`); an image
built for another architecture than its system's, a batch larger than the data and a
``peak:`` that is not a positive number are refused before any job; and a schema's
alternatives (oneOf, anyOf) are refused naming the key, not dumping the schema.

Each case writes its files in a scratch directory, runs one command in this process
(``archbench`` as :func:`archbench.cli.main`, or the training worker's command line as
``python -m archbench.train`` parses it) and asserts the exit code, the one line it
prints, and that nothing under ``results/`` changed.
"""

from __future__ import annotations

import contextlib
import io
import shutil

import pytest
import yaml
from conftest import REPO, count_input
from test_hostile_inputs import snapshot, started

from archbench import cli
from archbench.workloads.training import benchmark

TINY = yaml.safe_load((REPO / "tests" / "campaigns" / "tiny.yaml").read_text())
RECORD = ("results/raw/local/threads/rec.json", '{"status": "ok"}\n')
REFUSED = "archbench: invalid configuration: "


def campaign(**top) -> str:
    """The tiny campaign (small_cnn, thread_scaling on local) with ``top`` keys set."""
    return yaml.safe_dump({**TINY, **top})


def experiment(**keys) -> str:
    """The tiny campaign whose one experiment ``e`` is ``keys`` (2 steps, local)."""
    return campaign(experiments={"e": keys})


def importing(*files: str, **top) -> str:
    return campaign(imports=list(files), **top)


def both_frameworks() -> dict:
    """Experiments that run each framework's own strategies on one node: TensorFlow with
    parameter servers (synchronous and asynchronous), mirrored and Horovod, PyTorch with
    DDP and Horovod, so that a claim's every column matches some configuration."""
    node = {"type": "node_scaling", "models": ["small_cnn"], "nodes": [1], "batch_per_process": [4]}
    return {"tf": {**node, "variable_update": ["parameter_server", "distributed_replicated", "ps_async",
                                               "mirrored", "horovod"]},
            "pt": {**node, "framework": ["pytorch"], "strategies": ["ddp", "horovod"]}}


def on_system(system: dict, **top) -> str:
    """The tiny campaign on system ``two`` defined inline as ``system``."""
    return campaign(systems=["two"], system_definitions={"two": system}, **top)


def in_container(arch: str, **keys) -> dict:
    """A one-node system of ``arch`` running apptainer (``keys``: image, framework_images)."""
    return {"arch": arch, "cores_per_socket": 2, "container_runtime": "apptainer", **keys}


HEADER = "system,model,throughput,unit"
CLAIMS = "metric,system,model,value,unit,source"
CHECK = ("check", "c.yaml")
AT = f"{REFUSED}c.yaml: imports.0: a.csv: row 1 (line 2): "
AT_CLAIM = f"{REFUSED}c.yaml: imports.0: x-claims.csv: row 1 (line 2): "
PT_HAS = "(it has: single, horovod, ddp, fsdp2)"
TF_HAS = "(it has: single, horovod, mirrored, parameter_server)"
PS_OWNS = "variable update '{}' is strategy parameter_server's, not {}'s"


def imported(columns: str, *rows: str, **top) -> dict:
    """Files of a campaign importing a.csv: ``columns`` after the required ones, ``rows``."""
    text = "\n".join([f"{HEADER},{columns}", *(f"local,small_cnn,40,img/s,{r}" for r in rows)])
    return {"c.yaml": importing("a.csv", **top), "a.csv": text + "\n"}


def claimed(columns: str, *rows: str, **top) -> dict:
    """Files of a campaign importing x-claims.csv: throughput claims of local, small_cnn."""
    text = "\n".join([f"{CLAIMS},{columns}",
                      *(f"throughput,local,small_cnn,40,img/s,p. 1,{r}" for r in rows)])
    return {"c.yaml": importing("x-claims.csv", **top), "x-claims.csv": text + "\n"}


def train(*argv: str) -> tuple[str, ...]:
    return ("train", "--model", "small_cnn", "--steps", "2", "--output", "r.json",
            "--batch-per-process", "4", *argv)


def digits(*argv: str) -> tuple[str, ...]:
    return ("train", "--model", "digits_cnn", "--data", "real", "--steps", "2", "--output", "r.json",
            *argv)


def peak(value) -> dict:
    return {"c.yaml": campaign(peak={"local": value})}


DIGITS_SPLIT = "the digits training split (1438 images"

# id, files (name -> text), command, exit code, the line (err: starts with; out: equals)
CASES = [
    # ------------------------------------------------------------------ imports
    ("import-pytorch-parameter-server", imported("framework,strategy,workers", "pytorch,parameter_server,2"),
     CHECK, 1, f"{AT}column 'strategy': framework pytorch has no strategy 'parameter_server' {PT_HAS}"),
    ("import-pytorch-mirrored", imported("framework,strategy", "pytorch,mirrored"), CHECK, 1,
     f"{AT}column 'strategy': framework pytorch has no strategy 'mirrored' {PT_HAS}"),
    ("import-pytorch-distributed-replicated", imported("framework,variable_update",
                                                       "pytorch,distributed_replicated"), CHECK, 1,
     f"{AT}column 'variable_update': framework pytorch has no variable update "
     "'distributed_replicated' (it has: none)"),
    ("import-pytorch-ps-update", imported("framework,strategy,variable_update",
                                          "pytorch,ddp,parameter_server"), CHECK, 1,
     f"{AT}column 'variable_update': framework pytorch has no variable update 'parameter_server'"),
    ("import-pytorch-any-update", imported("framework,strategy,variable_update", "pytorch,single,replicated"),
     CHECK, 1, f"{AT}column 'variable_update': framework pytorch has no variable update 'replicated'"),
    ("import-tensorflow-ddp", imported("framework,strategy", "tensorflow,ddp"), CHECK, 1,
     f"{AT}column 'strategy': framework tensorflow has no strategy 'ddp' {TF_HAS}"),
    ("import-default-framework-ddp", imported("strategy", "ddp"), CHECK, 1,
     f"{AT}column 'strategy': framework tensorflow has no strategy 'ddp' {TF_HAS}"),
    ("import-horovod-distributed-replicated", imported("strategy,variable_update",
                                                       "horovod,distributed_replicated"), CHECK, 1,
     f"{AT}column 'variable_update': {PS_OWNS.format('distributed_replicated', 'horovod')}"),
    ("import-single-ps-update", imported("strategy,variable_update", "single,parameter_server"),
     CHECK, 1, f"{AT}column 'variable_update': {PS_OWNS.format('parameter_server', 'single')}"),
    ("import-ps-async-on-gpus", imported("strategy,variable_update,gpus", "parameter_server,ps_async,2"),
     CHECK, 1, f"{AT}column 'gpus': variable update 'ps_async' does not run on GPUs here"),
    ("import-pytorch-ps-in-mapping", {
        "c.yaml": importing("a.csv"), "a.csv": f"{HEADER},strategy,workers\nlocal,small_cnn,40,img/s,parameter_server,2\n",
        "a.yaml": "constants: {framework: pytorch}\n"}, CHECK, 1,
     f"{AT}column 'strategy': framework pytorch has no strategy 'parameter_server' {PT_HAS}"),
    ("import-second-row-of-two", {"c.yaml": importing("a.csv"), "a.csv":
                                  f"{HEADER},framework,strategy\nlocal,small_cnn,40,img/s,pytorch,ddp\n"
                                  "local,small_cnn,40,img/s,pytorch,mirrored\n"}, CHECK, 1,
     f"{REFUSED}c.yaml: imports.0: a.csv: row 2 (line 3): column 'strategy': framework pytorch "
     "has no strategy 'mirrored'"),
    ("import-pytorch-ddp", imported("framework,strategy", "pytorch,ddp"), CHECK, 0, "c.yaml: 4 measurements"),
    ("import-pytorch-horovod-gpus", imported("framework,strategy,gpus", "pytorch,horovod,4"), CHECK, 0,
     "c.yaml: 4 measurements"),
    ("import-tf-ps-distributed-replicated", imported("strategy,variable_update,workers",
                                                     "parameter_server,distributed_replicated,2"),
     CHECK, 0, "c.yaml: 4 measurements"),
    ("import-tf-update-alone", imported("variable_update", "distributed_replicated"), CHECK, 0,
     "c.yaml: 4 measurements"),
    ("import-tf-published-update", imported("variable_update", "replicated"), CHECK, 0,
     "c.yaml: 4 measurements"),
    ("import-tf-mirrored-gpus", imported("strategy,gpus", "mirrored,2"), CHECK, 0, "c.yaml: 4 measurements"),
    ("import-ps-async-on-cpus", imported("strategy,variable_update,workers", "parameter_server,ps_async,2"), CHECK, 0,
     "c.yaml: 4 measurements"),
    ("import-kernel-workers", {"c.yaml": importing("k.csv"), "k.csv":
                               "system,kernel,strategy,throughput,unit\nlocal,matmul,workers,9,GFLOP/s\n"},
     CHECK, 0, "c.yaml: 4 measurements"),
    # ------------------------------------------------------------------ claims
    ("claim-pytorch-parameter-server", claimed("framework,strategy", "pytorch,parameter_server",
                                               experiments=both_frameworks()), CHECK, 1,
     f"{AT_CLAIM}column 'strategy': framework pytorch has no strategy 'parameter_server' {PT_HAS}"),
    ("claim-pytorch-mirrored", claimed("framework,strategy", "pytorch,mirrored",
                                       experiments=both_frameworks()), CHECK, 1,
     f"{AT_CLAIM}column 'strategy': framework pytorch has no strategy 'mirrored' {PT_HAS}"),
    ("claim-tensorflow-ddp", claimed("framework,strategy", "tensorflow,ddp", experiments=both_frameworks()), CHECK, 1,
     f"{AT_CLAIM}column 'strategy': framework tensorflow has no strategy 'ddp' {TF_HAS}"),
    ("claim-default-framework-ddp", claimed("strategy", "ddp", experiments=both_frameworks()), CHECK, 1,
     f"{AT_CLAIM}column 'strategy': framework tensorflow has no strategy 'ddp' {TF_HAS}"),
    ("claim-pytorch-update", claimed("framework,variable_update", "pytorch,distributed_replicated",
                                     experiments=both_frameworks()), CHECK, 1,
     f"{AT_CLAIM}column 'variable_update': framework pytorch has no variable update "
     "'distributed_replicated' (it has: none)"),
    ("claim-horovod-ps-update", claimed("strategy,variable_update", "horovod,parameter_server",
                                                   experiments=both_frameworks()), CHECK, 1,
     f"{AT_CLAIM}column 'variable_update': {PS_OWNS.format('parameter_server', 'horovod')}"),
    ("claim-ps-async-gpu", claimed("device,variable_update", "gpu,ps_async"), CHECK, 1,
     f"{AT_CLAIM}column 'device': variable update 'ps_async' does not run on GPUs here"),
    ("claim-unknown-framework", claimed("framework", "jax"), CHECK, 1,
     f"{AT_CLAIM}column 'framework': unknown framework 'jax' (known: tensorflow, pytorch)"),
    ("claim-unknown-strategy", claimed("strategy", "gossip"), CHECK, 1,
     f"{AT_CLAIM}column 'strategy': framework tensorflow has no strategy 'gossip'"),
    ("claim-not-pytorch-ddp", claimed("framework,strategy", "!pytorch,ddp", experiments=both_frameworks()),
     CHECK, 1, f"{AT_CLAIM}column 'strategy': framework tensorflow has no strategy 'ddp'"),
    ("claim-pytorch-ddp", claimed("framework,strategy", "pytorch,ddp",
                                     experiments=both_frameworks()), CHECK, 0, "c.yaml: 7 measurements"),
    ("claim-not-tensorflow-ddp", claimed("framework,strategy", "!tensorflow,ddp",
                                            experiments=both_frameworks()), CHECK, 0,
     "c.yaml: 7 measurements"),
    # ------------------------------------------------------------------ campaigns
    ("campaign-pytorch-parameter-server", {"c.yaml": experiment(
        type="node_scaling", models=["small_cnn"], framework=["pytorch"], strategies=["parameter_server"],
        nodes=[1], batch_per_process=[4])}, CHECK, 1,
     f"{REFUSED}c.yaml: experiments.e.framework: framework pytorch has no strategy 'parameter_server' "
     f"{PT_HAS}"),
    ("campaign-pytorch-distributed-replicated", {"c.yaml": experiment(
        type="node_scaling", models=["small_cnn"], framework=["pytorch"],
        variable_update=["distributed_replicated"], nodes=[1], batch_per_process=[4])}, CHECK, 1,
     f"{REFUSED}c.yaml: experiments.e.framework: framework pytorch has no strategy 'parameter_server'"),
    ("campaign-tensorflow-ddp", {"c.yaml": experiment(
        type="node_scaling", models=["small_cnn"], strategies=["ddp"], nodes=[1], batch_per_process=[4])},
     CHECK, 1, f"{REFUSED}c.yaml: experiments.e.framework: framework tensorflow has no strategy 'ddp'"),
    ("campaign-pytorch-ddp", {"c.yaml": experiment(
        type="node_scaling", models=["small_cnn"], framework=["pytorch"], strategies=["ddp"], nodes=[1],
        batch_per_process=[4])}, CHECK, 0, "c.yaml: 1 measurements"),
    # ------------------------------------------------------------------ images and their systems
    ("image-aarch64-on-x86", {"c.yaml": on_system(in_container("x86_64", image="aarch64-acl"))}, CHECK, 1,
     f"{REFUSED}c.yaml: system_definitions.two.image: image aarch64-acl is built for aarch64 "
     "(containers/aarch64-acl.def, label arch), system two is x86_64"),
    ("image-ppc64le-on-aarch64", {"c.yaml": on_system(in_container("aarch64", image="ppc64le-vanilla"))},
     CHECK, 1, f"{REFUSED}c.yaml: system_definitions.two.image: image ppc64le-vanilla is built for "
               "ppc64le (containers/ppc64le-vanilla.def, label arch), system two is aarch64"),
    ("image-x86-on-ppc64le", {"c.yaml": on_system(in_container("ppc64le", image="x86_64-onednn"))},
     CHECK, 1, f"{REFUSED}c.yaml: system_definitions.two.image: image x86_64-onednn is built for x86_64"),
    ("framework-image-aarch64-on-x86", {"c.yaml": on_system(in_container(
        "x86_64", image="x86_64-onednn", framework_images={"pytorch": "aarch64-acl"}))}, CHECK, 1,
     f"{REFUSED}c.yaml: system_definitions.two.framework_images.pytorch: image aarch64-acl is built "
     "for aarch64 (containers/aarch64-acl.def, label arch), system two is x86_64"),
    ("framework-image-unused-still-refused", {"c.yaml": on_system(in_container(
        "ppc64le", image="ppc64le-vanilla", framework_images={"pytorch": "x86_64-cuda-pytorch"}))},
     CHECK, 1, f"{REFUSED}c.yaml: system_definitions.two.framework_images.pytorch: image "
               "x86_64-cuda-pytorch is built for x86_64"),
    ("image-system-file-aarch64-on-x86", {"c.yaml": campaign(systems=["two"]), "Snakefile": "",
                                          "config/systems/two.yaml": yaml.safe_dump(
                                              in_container("x86_64", image="aarch64-armpl"))},
     CHECK, 1, f"{REFUSED}config/systems/two.yaml: image: image aarch64-armpl is built for aarch64"),
    ("image-x86-on-x86", {"c.yaml": on_system(in_container("x86_64", image="x86_64-onednn"))}, CHECK, 0,
     "c.yaml: 2 measurements"),
    ("image-and-framework-image-x86", {"c.yaml": on_system(in_container(
        "x86_64", image="x86_64-onednn", framework_images={"pytorch": "x86_64-cuda-pytorch"}))}, CHECK, 0,
     "c.yaml: 2 measurements"),
    ("image-ppc64le-on-ppc64le", {"c.yaml": on_system(in_container(
        "ppc64le", image="ppc64le-vanilla", framework_images={"pytorch": "ppc64le-debian"}))}, CHECK, 0,
     "c.yaml: 2 measurements"),
    # ------------------------------------------------------------------ a batch larger than the data
    ("batch-over-digits-quality", {"c.yaml": experiment(
        type="quality", models=["digits_cnn"], batch_per_process=[2000], threads=[1])}, CHECK, 1,
     f"{REFUSED}c.yaml: experiments.e.batch_per_process: 2000 is larger than {DIGITS_SPLIT}"),
    ("batch-over-digits-by-one", {"c.yaml": experiment(
        type="thread_scaling", models=["digits_cnn"], data=["real"], threads=[1], batch_per_process=[1439])},
     CHECK, 1, f"{REFUSED}c.yaml: experiments.e.batch_per_process: 1439 is larger than {DIGITS_SPLIT}"),
    ("batch-over-digits-pytorch", {"c.yaml": experiment(
        type="thread_scaling", models=["digits_cnn"], data=["real"], threads=[1], framework=["pytorch"],
        batch_per_process=[4096])}, CHECK, 1,
     f"{REFUSED}c.yaml: experiments.e.batch_per_process: 4096 is larger than {DIGITS_SPLIT}"),
    ("batch-over-digits-shard", {"c.yaml": experiment(
        type="ppn_sweep", models=["digits_cnn"], data=["real"], processes_per_node=[2],
        batch_per_process=[720])}, CHECK, 1,
     f"{REFUSED}c.yaml: experiments.e.batch_per_process: 720 is larger than {DIGITS_SPLIT}, "
     "719 per process over 2 processes)"),
    ("batch-over-digits-in-defaults", {"c.yaml": campaign(
        defaults={**TINY["defaults"], "batch_per_process": [1500]},
        experiments={"e": {"type": "thread_scaling", "models": ["digits_cnn"], "data": ["real"],
                           "threads": [1]}})}, CHECK, 1,
     f"{REFUSED}c.yaml: defaults.batch_per_process: 1500 is larger than {DIGITS_SPLIT}"),
    ("batch-digits-whole-split", {"c.yaml": experiment(
        type="thread_scaling", models=["digits_cnn"], data=["real"], threads=[1], batch_per_process=[1438])},
     CHECK, 0, "c.yaml: 1 measurements"),
    ("batch-digits-shard-fits", {"c.yaml": experiment(
        type="ppn_sweep", models=["digits_cnn"], data=["real"], processes_per_node=[2],
        batch_per_process=[719])}, CHECK, 0, "c.yaml: 1 measurements"),
    ("batch-digits-synthetic", {"c.yaml": experiment(
        type="thread_scaling", models=["digits_cnn"], threads=[1], batch_per_process=[4096])},
     CHECK, 0, "c.yaml: 1 measurements"),
    ("batch-imagenet-size-unknown", {"c.yaml": experiment(
        type="thread_scaling", models=["small_cnn"], data=["real"], threads=[1], batch_per_process=[4096])},
     CHECK, 0, "c.yaml: 1 measurements"),
    # the worker, for every framework
    ("worker-batch-over-digits-pytorch", {}, digits("--framework", "pytorch", "--batch-per-process", "2000"),
     2, "python -m archbench.train: error: --batch-per-process 2000 is larger than " + DIGITS_SPLIT),
    ("worker-batch-over-digits-tensorflow", {}, digits("--batch-per-process", "1439"), 2,
     "python -m archbench.train: error: --batch-per-process 1439 is larger than " + DIGITS_SPLIT),
    ("worker-batch-over-digits-shard", {}, digits("--framework", "pytorch", "--strategy", "ddp",
                                                  "--processes-per-node", "4", "--batch-per-process", "360"),
     2, "python -m archbench.train: error: --batch-per-process 360 is larger than " + DIGITS_SPLIT
     + ", 359 per process over 4 processes)"),
    ("worker-pytorch-parameter-server", {}, train("--framework", "pytorch", "--strategy", "parameter_server",
                                                  "--parameter-servers", "1"), 2,
     f"python -m archbench.train: error: --framework pytorch: framework pytorch has no strategy "
     f"'parameter_server' {PT_HAS}"),
    ("worker-tensorflow-ddp", {}, train("--strategy", "ddp"), 2,
     "python -m archbench.train: error: --framework tensorflow: framework tensorflow has no strategy 'ddp'"),
    ("worker-ps-async-gpu", {}, train("--strategy", "parameter_server", "--parameter-servers", "1",
                                      "--variable-update", "ps_async", "--device", "gpu"), 2,
     "python -m archbench.train: error: --device gpu: variable update 'ps_async' does not run "
     "on GPUs here"),
    ("worker-horovod-update", {}, train("--strategy", "horovod", "--variable-update", "parameter_server"), 2,
     "python -m archbench.train: error: --variable-update parameter_server: "
     + PS_OWNS.format("parameter_server", "horovod")),
    ("worker-digits-fits", {}, digits("--batch-per-process", "1438"), 0, ""),
    # ------------------------------------------------------------------ peak
    ("peak-text", peak({"gflops": "fast"}), CHECK, 1,
     f"{REFUSED}c.yaml: peak.local.gflops: 'fast' is not of type 'number'"),
    ("peak-negative", peak({"gflops": -1}), CHECK, 1,
     f"{REFUSED}c.yaml: peak.local.gflops: -1 is less than or equal to the minimum of 0"),
    ("peak-zero", peak({"gflops": 0}), CHECK, 1,
     f"{REFUSED}c.yaml: peak.local.gflops: 0 is less than or equal to the minimum of 0"),
    ("peak-boolean", peak({"gflops": True}), CHECK, 1,
     f"{REFUSED}c.yaml: peak.local.gflops: True is not of type 'number'"),
    ("peak-bare-number", peak(5), CHECK, 1, f"{REFUSED}c.yaml: peak.local: 5 is not of type 'object'"),
    ("peak-no-gflops", peak({"unit": "GFLOP/s"}), CHECK, 1,
     f"{REFUSED}c.yaml: peak.local.gflops: missing (required)"),
    ("peak-unknown-unit", peak({"gflops": 100, "unit": "furlongs"}), CHECK, 1,
     f"{REFUSED}c.yaml: peak.local.unit: 'furlongs' is not one of"),
    ("peak-unknown-key", peak({"gflops": 100, "gflop": 1}), CHECK, 1,
     f"{REFUSED}c.yaml: peak.local.gflop: not a key allowed here"),
    ("peak-beyond-bound", peak({"gflops": 1e30}), CHECK, 1,
     f"{REFUSED}c.yaml: peak.local.gflops: 1e+30 is greater than the maximum of"),
    ("peak-a-number", peak({"gflops": 100}), CHECK, 0, "c.yaml: 4 measurements"),
    ("peak-in-tflops", peak({"gflops": 1.5, "unit": "TFLOP/s"}), CHECK, 0, "c.yaml: 4 measurements"),
    # ------------------------------------------------------------------ alternatives (oneOf)
    ("compare-with-number", {"c.yaml": campaign(compare_with=5)}, CHECK, 1,
     f"{REFUSED}c.yaml: compare_with: 5 is none of the allowed forms (a string or a mapping)"),
    ("cores-per-socket-text", {"c.yaml": on_system({"arch": "x86_64", "cores_per_socket": "many"})}, CHECK,
     1, f"{REFUSED}c.yaml: system_definitions.two.cores_per_socket: 'many' is none of the allowed forms "
        "(an integer or 'auto')"),
    ("threads-per-process-text", {"c.yaml": experiment(
        type="node_scaling", models=["small_cnn"], nodes=[1], batch_per_process=[4],
        threads_per_process="lots")}, CHECK, 1,
     f"{REFUSED}c.yaml: experiments.e.threads_per_process: 'lots' is none of the allowed forms "
     "(an integer, 'cores' or 'cores_minus_one')"),
]


def run(argv: tuple[str, ...]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``archbench ARGV``, or of the training worker's
    command-line check for ``("train", ARG...)``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if argv[0] == "train":
                benchmark.parse_args(list(argv[1:]))
                code = 0
            else:
                code = cli.main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("files, argv, code, line", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_door_is_one_line(tmp_path, monkeypatch, files, argv, code, line):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli.os, "execve", started)  # a refusal must come before Snakemake
    if any(name == "Snakefile" for name in files) or any("image" in text for text in files.values()):
        shutil.copytree(REPO / "containers", tmp_path / "containers")
    for name, text in {RECORD[0]: RECORD[1], **files}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    raw = snapshot(tmp_path / "results")
    got, out, err = run(argv)
    assert got == code, (out, err)
    if code:
        last = err.splitlines()[-1] if err else ""
        assert last.startswith(line), err
        assert "Traceback" not in err and "{" not in last, err
        assert err.count("\n") == 1 or argv[0] == "train", err  # argparse's usage line first
        assert out == ""
        count_input("issue 53 (doors)", "rejected")
    else:
        assert out.strip() == line and err == "", (out, err)
        count_input("issue 53 (doors)", "accepted")
    assert snapshot(tmp_path / "results") == raw


def test_the_digits_split_is_what_the_data_holds():
    """The size the plan refuses batches by is the split the frameworks read."""
    from sklearn.datasets import load_digits

    from archbench.workloads.training.datasets import DIGITS_IMAGES, TRAIN_IMAGES, digits_arrays
    assert len(load_digits().images) == DIGITS_IMAGES
    assert len(digits_arrays()[0]) == TRAIN_IMAGES["digits"] == 1438


def test_pytorch_digits_never_spin_on_a_shard_smaller_than_the_batch():
    """The PyTorch loop's batches of a shard the batch does not fit: refused at once, where
    the endless loop over an empty range once ran until the time limit."""
    pytest.importorskip("torch")
    from archbench.workloads.training.datasets import DataError
    from archbench.workloads.training.pytorch.data import digits_batches
    from archbench.workloads.training.settings import TrainRun
    config = TrainRun.from_args(benchmark.parser().parse_args(
        ["--framework", "pytorch", "--model", "digits_cnn", "--data", "real", "--output", "r.json",
         "--batch-per-process", "720"]))
    with pytest.raises(DataError, match=r"^--batch-per-process 720 is larger than the digits training "
                                        r"split \(1438 images, 719 per process over 2 processes\)$"):
        next(digits_batches(config, shard=1, shards=2))
    images, labels = next(digits_batches(config, shard=0, shards=1))
    assert len(images) == len(labels) == 720
