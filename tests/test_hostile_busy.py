"""Issue 53's busy machine, hostile cases: records whose figures of the machine's other
load (``host_load``) or flag (``host_busy``) are impossible or contradict each other,
compared (``archbench compare``), and ``rerun_busy`` values a campaign may not give
(``archbench check``).

Each case writes its files in a scratch directory, runs ``archbench`` in this process
(:func:`archbench.cli.main`) and asserts the exit code, the one line it prints (a refused
record: the line naming it and its field; a campaign: the line naming the file and key),
and that ``results/`` is unchanged.
"""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import REPO, count_input
from test_compare import configuration, run_record
from test_hostile_inputs import RECORD, no_slurm, run, snapshot, started

from archbench import cli
from archbench.core.record import raw_path

TINY = yaml.safe_load((REPO / "tests" / "campaigns" / "tiny.yaml").read_text())
CONF = configuration(threads=2)
RAW = raw_path({**CONF, "repetition": 0}).removeprefix("results/")
BAD = f"new/{RAW}"
QUIET = {"window_s": 10.0, "cores": 2, "cores_asked": 2, "own_cpu_s": 19.0, "cores_busy_s": 19.5,
         "steal_s": 0.0, "other_cores": 0.05, "load_1m": [0.1, 0.2], "slurm_oversubscribe": None}
BUSY = {**QUIET, "own_cpu_s": 9.0, "cores_busy_s": 19.0, "other_cores": 1.0}


def sides(**edit) -> dict[str, str]:
    """Two results folders of one configuration, three runs each; ``edit`` on the new
    side's repetition 0 (``host_load`` given as a dict of changed figures)."""
    files = {}
    for side, values in (("base", (100.0, 101.0, 99.0)), ("new", (100.0, 100.5, 99.5))):
        for rep, value in enumerate(values):
            record = {**run_record(CONF, rep, value), "host_load": QUIET, "host_busy": False}
            if side == "new" and rep == 0:
                record.update(edit)
            files[f"{side}/{raw_path(record).removeprefix('results/')}"] = json.dumps(record)
    return files


def figures(**changed) -> dict:
    return {"host_load": {**QUIET, **changed}}


def campaign(**defaults) -> dict[str, str]:
    return {"c.yaml": yaml.safe_dump({**TINY, "defaults": {**TINY["defaults"], **defaults}})}


def experiment(**keys) -> dict[str, str]:
    threads = {**TINY["experiments"]["threads"], **keys}
    return {"c.yaml": yaml.safe_dump({**TINY, "experiments": {"threads": threads}})}


COMPARE = ("compare", "base", "new")
CHECK = ("check", "c.yaml")
EXCLUDED = f"archbench compare: new: excluded invalid record: {BAD}: "
INVALID = "archbench: invalid configuration: c.yaml: "

# id, files, command, exit code, the line (err: equals; out: contains for exit 0)
CASES = [
    # a flag its figures contradict
    ("flag-false-figures-busy", sides(host_load=BUSY, host_busy=False), COMPARE, 0,
     EXCLUDED + "host_busy: record says False, its host_load figures say True"),
    ("flag-true-figures-quiet", sides(host_busy=True), COMPARE, 0,
     EXCLUDED + "host_busy: record says True, its host_load figures say False"),
    ("flag-null-figures-busy", sides(host_load=BUSY, host_busy=None), COMPARE, 0,
     EXCLUDED + "host_busy: record says None, its host_load figures say True"),
    ("flag-without-figures", sides(host_load=None, host_busy=True), COMPARE, 0,
     EXCLUDED + "host_busy: True stated without host_load figures"),
    ("flag-false-without-figures", sides(host_load=None, host_busy=False), COMPARE, 0,
     EXCLUDED + "host_busy: False stated without host_load figures"),
    ("flag-true-no-other-cores", sides(**figures(other_cores=None), host_busy=True), COMPARE, 0,
     EXCLUDED + "host_busy: record says True, its host_load figures say None"),
    ("flag-busy-on-spare-cores", sides(**figures(cores=4, cores_asked=2, own_cpu_s=9.0,
                                                cores_busy_s=19.0, other_cores=1.0), host_busy=True),
     COMPARE, 0, EXCLUDED + "host_busy: record says True, its host_load figures say False"),
    # figures that contradict each other
    ("other-cores-understated", sides(**figures(own_cpu_s=9.0, other_cores=0.05)), COMPARE, 0,
     EXCLUDED + "host_load: other_cores 0.05, its figures say 1.050 ((cores_busy_s - own_cpu_s) / window_s)"),
    ("other-cores-overstated", sides(**figures(other_cores=0.2)), COMPARE, 0,
     EXCLUDED + "host_load: other_cores 0.2, its figures say 0.050 ((cores_busy_s - own_cpu_s) / window_s)"),
    ("own-beyond-the-cores", sides(**figures(own_cpu_s=40.0, cores_busy_s=40.0, other_cores=0.0)), COMPARE, 0,
     EXCLUDED + "host_load: own_cpu_s 40 s in 10 s on 2 cores (at most 21.5 s)"),
    ("busy-beyond-the-cores", sides(**figures(cores_busy_s=1e6, other_cores=(1e6 - 19) / 10)), COMPARE, 0,
     EXCLUDED + "host_load: cores_busy_s 1e+06 s in 10 s on 2 cores (at most 21.5 s)"),
    ("steal-beyond-busy", sides(**figures(steal_s=20.0)), COMPARE, 0,
     EXCLUDED + "host_load: steal_s 20 above cores_busy_s 19.5"),
    ("steal-beyond-the-cores", sides(**figures(steal_s=30.0, cores_busy_s=30.0, other_cores=1.1)),
     COMPARE, 0, EXCLUDED + "host_load: cores_busy_s 30 s in 10 s on 2 cores (at most 21.5 s)"),
    ("asked-more-than-given", sides(**figures(cores_asked=4)), COMPARE, 0,
     EXCLUDED + "host_load: cores_asked 4 of 2 cores"),
    # figures the schema refuses
    ("negative-own", sides(**figures(own_cpu_s=-1.0)), COMPARE, 0,
     EXCLUDED + "host_load/own_cpu_s: -1.0 is less than the minimum of 0"),
    ("negative-other", sides(**figures(other_cores=-0.5)), COMPARE, 0,
     EXCLUDED + "host_load/other_cores: -0.5 is less than the minimum of 0"),
    ("zero-cores", sides(**figures(cores=0)), COMPARE, 0,
     EXCLUDED + "host_load/cores: 0 is less than the minimum of 1"),
    ("cores-as-text", sides(**figures(cores="2")), COMPARE, 0,
     EXCLUDED + "host_load/cores: '2' is not of type 'integer'"),
    ("flag-as-text", sides(host_busy="false"), COMPARE, 0,
     EXCLUDED + "host_busy: 'false' is not of type 'boolean', 'null'"),
    ("figures-as-list", sides(host_load=[1, 2]), COMPARE, 0,
     EXCLUDED + "host_load: [1, 2] is not of type 'object', 'null'"),
    ("figures-missing-window", sides(host_load={k: v for k, v in QUIET.items() if k != "window_s"}),
     COMPARE, 0, EXCLUDED + "host_load: 'window_s' is a required property"),
    ("figures-extra-key", sides(**figures(note="<script>")), COMPARE, 0,
     EXCLUDED + "host_load: Additional properties are not allowed ('note' was unexpected)"),
    ("window-nan", sides(**figures(window_s=float("nan"))), COMPARE, 0,
     EXCLUDED.removesuffix(": ") + ": unreadable record (NaN is not a JSON number)"),
    ("other-infinite", sides(**figures(other_cores=float("inf"))), COMPARE, 0,
     EXCLUDED.removesuffix(": ") + ": unreadable record (Infinity is not a JSON number)"),
    ("oversubscribe-huge", sides(**figures(slurm_oversubscribe="x" * 100)), COMPARE, 0,
     EXCLUDED + "host_load/slurm_oversubscribe: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' is too long"),
    # a flag that holds: counted, and the verdict says so
    ("busy-and-consistent", sides(host_load=BUSY, host_busy=True), COMPARE, 0,
     "host busy (new: 1 of 3 ok run(s) shared their cores)"),
    # rerun_busy: a count of reruns, 0 to 5
    ("rerun-negative", campaign(rerun_busy=-1), CHECK, 1,
     INVALID + "defaults.rerun_busy: -1 is less than the minimum of 0"),
    ("rerun-unbounded", campaign(rerun_busy=6), CHECK, 1,
     INVALID + "defaults.rerun_busy: 6 is greater than the maximum of 5"),
    ("rerun-text", campaign(rerun_busy="2"), CHECK, 1,
     INVALID + "defaults.rerun_busy: '2' is not of type 'integer'"),
    ("rerun-fraction", campaign(rerun_busy=1.5), CHECK, 1,
     INVALID + "defaults.rerun_busy: 1.5 is not of type 'integer'"),
    ("rerun-boolean", campaign(rerun_busy=True), CHECK, 1,
     INVALID + "defaults.rerun_busy: True is not of type 'integer'"),
    ("rerun-null", campaign(rerun_busy=None), CHECK, 1,
     INVALID + "defaults.rerun_busy: None is not of type 'integer'"),
    ("rerun-list", campaign(rerun_busy=[1]), CHECK, 1,
     INVALID + "defaults.rerun_busy: [1] is not of type 'integer'"),
    ("rerun-experiment-negative", experiment(rerun_busy=-2), CHECK, 1,
     INVALID + "experiments.threads.rerun_busy: -2 is less than the minimum of 0"),
    ("rerun-experiment-huge", experiment(rerun_busy=10 ** 9), CHECK, 1,
     INVALID + "experiments.threads.rerun_busy: 1000000000 is greater than the maximum of 5"),
    ("rerun-misspelt", experiment(rerun_busyy=1), CHECK, 1, INVALID + "experiments.threads"),
    ("rerun-default", campaign(rerun_busy=2), CHECK, 0, "c.yaml: 4 measurements"),
    ("rerun-experiment", experiment(rerun_busy=1), CHECK, 0, "c.yaml: 4 measurements"),
]


@pytest.mark.parametrize("files, argv, code, line", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_busy_input_is_one_line(tmp_path, monkeypatch, files, argv, code, line):
    monkeypatch.chdir(tmp_path)
    no_slurm(tmp_path / "bin", monkeypatch)
    monkeypatch.setattr(cli.os, "execve", started)  # a refusal must come before Snakemake
    for name, text in {RECORD[0]: RECORD[1], **files}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    results = snapshot(tmp_path / "results")
    got, out, err = run(argv)
    assert got == code, (out, err)
    assert "Traceback" not in out + err
    if code:
        assert err.startswith(line) and err.count("\n") == 1 and out == "", err
        count_input("issue 53 busy machine", "rejected")
    elif argv == COMPARE and line.startswith(EXCLUDED):
        assert err == line + "\n", err  # the record is left out, named with its field
        assert "| 3 | 2 |" in out  # and counted nowhere: 3 base runs, 2 new
        count_input("issue 53 busy machine", "rejected")
    else:
        assert line in out and err == "", (out, err)
        count_input("issue 53 busy machine", "accepted")
    assert snapshot(tmp_path / "results") == results
