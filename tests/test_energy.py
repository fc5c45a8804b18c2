"""Energy of the measured window (archbench.workloads.energy): real records of this CPU
machine say "not measured" and why for every source it lacks; the arithmetic of the
counters (NVML's board counter, RAPL zones that wrap, Slurm's sstat) and the GPU sense
check on stand-in sensors; the sum over a multi-process run's workers."""

from __future__ import annotations

import math
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from archbench.core.record import read_record, validate
from archbench.workloads import energy

TINY = ["--model", "small_cnn", "--batch-per-process", "4", "--image-size", "8", "--num-classes", "10",
        "--warmup-steps", "1", "--steps", "3", "--intra-threads", "1", "--vendor-probe", "off"]


def train(out: Path, framework: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.run([sys.executable, "-m", "archbench.train", "--framework", framework, *TINY,
                           "--output", str(out)], capture_output=True, text=True, timeout=600, env=env)


def readable_rapl() -> bool:
    zones = list(energy.POWERCAP.glob("intel-rapl:*/energy_uj")) if energy.POWERCAP.is_dir() else []
    return any(os.access(z, os.R_OK) for z in zones)


# ------------------------------------------------------------------ real records here

@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_a_real_cpu_record_says_which_sensors_it_lacks_and_why(tmp_path, framework):
    done = train(tmp_path / "r.json", framework)
    assert done.returncode == 0, done.stderr[-2000:]
    record = read_record(tmp_path / "r.json")
    entries = {(e["source"], e["covers"]): e for e in record["energy"]}
    assert set(entries) == {("rapl", "cpu package"), ("rapl", "dram"), ("slurm", "node")}  # no GPU: no NVML
    window = record["metrics"]["window_s"]["value"]
    for e in entries.values():
        assert e["limits"] and e["interval_s"] >= window * 0.99
        assert (e["status"] == "measured") == (e["joules"] is not None)
        assert e["status"] in energy.STATUSES
    slurm = entries["slurm", "node"]
    assert slurm["status"] == "not measured" and slurm["reason"] == "not a Slurm job"
    if not readable_rapl():  # this machine: no powercap zones, or root-only ones
        for covers in ("cpu package", "dram"):
            e = entries["rapl", covers]
            assert e["status"] == "not measured" and e["joules"] is None
            assert "powercap" in e["reason"] or "root" in e["reason"] or "no dram" in e["reason"]


@pytest.mark.skipif(not __import__("shutil").which("mpirun"), reason="needs OpenMPI (scripts/setup_env.sh)")
def test_a_two_rank_record_sums_its_ranks_gathered_readings(tmp_path):
    """DDP over two ranks: each rank's readings go through the window's gather; none is
    readable here, so each source is "not measured" with the writer's reason."""
    from archbench.workloads.training.strategies.ddp import ADDRESS, free_port
    root = ("--allow-run-as-root",) if os.geteuid() == 0 else ()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env[ADDRESS] = f"127.0.0.1:{free_port()}"
    argv = ["mpirun", *root, "-np", "2", "--oversubscribe", "--bind-to", "none", "-x", "PATH",
            "-x", "PYTHONPATH", "-x", ADDRESS, sys.executable, "-m", "archbench.train",
            "--framework", "pytorch", "--strategy", "ddp", *TINY, "--output", str(tmp_path / "r.json")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    record = read_record(tmp_path / "r.json")
    assert record["workers"] == 2
    entries = {(e["source"], e["covers"]): e for e in record["energy"]}
    assert set(entries) == {("rapl", "cpu package"), ("rapl", "dram"), ("slurm", "node")}
    assert entries["slurm", "node"]["reason"] == "not a Slurm job"
    window = record["metrics"]["window_s"]["value"]
    assert all(e["interval_s"] >= window * 0.99 for e in entries.values())
    if not readable_rapl():
        assert all(e["status"] == "not measured" and e["reason"] for e in entries.values())


def test_a_gpu_process_on_a_machine_without_nvml_is_not_measured():
    """Whether nvidia-ml-py is installed or not: no driver here, so no reading, and why."""
    (src,) = energy.nvml_sources("0")
    assert src.read is None and src.reason
    assert "nvidia-ml-py" in src.reason or "NVML did not start" in src.reason
    meter = energy.Meter([src])
    meter.start()
    (e,) = energy.combine(meter, [meter.stop()])
    assert e["status"] == "not measured" and e["joules"] is None and e["reason"] == src.reason
    assert e["covers"] == "gpu board"


def test_without_the_bindings_nvml_is_not_measured():
    def missing():
        raise ImportError("No module named 'pynvml'")
    (src,) = energy.nvml_sources("0", nvml=missing)
    assert src.reason == "nvidia-ml-py (pynvml) is not installed"


def test_a_meter_opened_for_a_gpu_run_reads_nvml_first():
    meter = energy.Meter.open("gpu", env={"CUDA_VISIBLE_DEVICES": "0"})
    assert [(s.source, s.covers) for s in meter.sources] == [
        ("nvml", "gpu board"), ("rapl", "cpu package"), ("rapl", "dram"), ("slurm", "node")]


# ------------------------------------------------------------------ NVML arithmetic

class FakeNvml:
    """Stands in for pynvml: each GPU's counter advances ``watts`` x the reads' count x 1 s."""

    def __init__(self, watts: float, limit_w: float = 700.0, supported: bool = True):
        self.watts, self.limit_w, self.supported = watts, limit_w, supported
        self.counters = {0: 5_000_000, 1: 9_000_000}  # mJ since the driver loaded
        self.indexes: list[int] = []

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        self.indexes.append(i)
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return int(uuid.rsplit("-", 1)[1])

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H200"

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-fake-{h}"

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self.limit_w * 1000

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if not self.supported:
            raise RuntimeError("Not Supported")
        self.counters[h] += int(self.watts * 1000)
        return self.counters[h]


def measured(fake: FakeNvml, visible: str | None, seconds: float = 2.0) -> tuple[energy.Source, dict]:
    (src,) = energy.nvml_sources(visible, nvml=lambda: fake)
    meter = energy.Meter([src]).start()
    values = meter.stop()
    values[3] = seconds  # the interval the sense check compares with
    (e,) = energy.combine(meter, [values])
    return src, e


def test_nvml_reads_the_gpus_the_process_was_given():
    fake = FakeNvml(watts=300)
    src, e = measured(fake, "1")
    assert fake.indexes == [1] and src.devices == ["NVIDIA H200 (GPU-fake-1)"]
    assert e["status"] == "measured" and e["joules"] == pytest.approx(300.0)  # one read apart
    _, both = measured(FakeNvml(watts=300), None)
    assert both["joules"] == pytest.approx(600.0) and len(both["devices"]) == 2
    _, by_uuid = measured(FakeNvml(watts=100), "GPU-fake-0")
    assert by_uuid["devices"] == ["NVIDIA H200 (GPU-fake-0)"]


def test_the_gpu_sense_check():
    _, over = measured(FakeNvml(watts=900, limit_w=400), "0", seconds=2.0)
    assert over["status"] == "implausible" and "power limit 400 W" in over["reason"]
    assert over["joules"] == pytest.approx(900.0)
    _, idle = measured(FakeNvml(watts=0), "0")
    assert idle["status"] == "implausible" and "above 0" in idle["reason"]
    assert energy.sense(500.0, 400.0, 2.0) == "" and energy.sense(801.0, 400.0, 2.0)


def test_a_gpu_without_an_energy_counter_or_a_mig_instance_is_not_measured():
    (old,) = energy.nvml_sources("0", nvml=lambda: FakeNvml(watts=1, supported=False))
    assert old.read is None and "Not Supported" in old.reason
    (mig,) = energy.nvml_sources("MIG-1234", nvml=lambda: FakeNvml(watts=1))
    assert mig.read is None and "MIG" in mig.reason


# ------------------------------------------------------------------ RAPL on a stand-in sysfs

def zone(root: Path, name: str, label: str, uj: int, top: int = 2**32) -> Path:
    z = root / name
    z.mkdir(parents=True)
    (z / "name").write_text(label + "\n")
    (z / "energy_uj").write_text(f"{uj}\n")
    (z / "max_energy_range_uj").write_text(f"{top}\n")
    return z


def test_rapl_sums_packages_and_dram_and_unwraps_each_zone(tmp_path):
    p0 = zone(tmp_path, "intel-rapl:0", "package-0", 2**32 - 1_000_000)  # 1 J before wrapping
    p1 = zone(tmp_path, "intel-rapl:1", "package-1", 10_000_000)
    d0 = zone(tmp_path, "intel-rapl:0:0", "dram", 0)
    zone(tmp_path, "intel-rapl:0:1", "core", 0)  # neither package nor dram: not read
    zone(tmp_path, "intel-rapl-mmio:0", "package-0", 0)  # package 0 again, through MMIO: not read
    package, dram = energy.rapl_sources(tmp_path)
    assert (package.covers, dram.covers) == ("cpu package", "dram")
    assert package.devices == ["intel-rapl:0 (package-0)", "intel-rapl:1 (package-1)"]
    meter = energy.Meter([package, dram]).start()
    (p0 / "energy_uj").write_text("2000000\n")  # wrapped: 1 J + 2 J
    (p1 / "energy_uj").write_text("14000000\n")  # 4 J
    (d0 / "energy_uj").write_text("500000\n")  # 0.5 J
    entries = energy.combine(meter, [meter.stop()])
    assert [e["joules"] for e in entries] == [pytest.approx(7.0), pytest.approx(0.5)]
    assert all(e["status"] == "measured" for e in entries)


def test_root_only_or_missing_rapl_zones_are_not_measured(tmp_path, monkeypatch):
    missing = energy.rapl_sources(tmp_path / "none")
    assert all(s.read is None and "no powercap RAPL zones" in s.reason for s in missing)
    z = zone(tmp_path, "intel-rapl:0", "package-0", 5)
    (z / "energy_uj").chmod(stat.S_IWUSR)
    real_access = os.access
    monkeypatch.setattr(energy.os, "access",  # root reads a 0200 file anyway: ask as a user would
                        lambda p, mode: False if str(p).endswith("energy_uj") else real_access(p, mode))
    package, dram = energy.rapl_sources(tmp_path)
    assert package.read is None and "readable only by root" in package.reason
    assert dram.read is None and dram.reason == "the node's RAPL exposes no dram zone"


# ------------------------------------------------------------------ Slurm (a stand-in sstat)

def fake_sstat(tmp_path: Path, script: str) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sstat").write_text("#!/bin/sh\n" + script)
    (bin_dir / "sstat").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_slurm_energy_of_the_step_from_sstat(tmp_path, monkeypatch):
    counter = tmp_path / "count"
    counter.write_text("1000")
    env = fake_sstat(tmp_path, f'n=$(cat {counter}); echo $n; echo $((n + 1))\n'
                               f'echo $((n + 3000)) > {counter}\n')
    monkeypatch.setenv("PATH", env["PATH"])
    (src,) = energy.slurm_sources({"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "0"})
    meter = energy.Meter([src]).start()
    (e,) = energy.combine(meter, [meter.stop()])
    assert e["status"] == "measured" and e["joules"] == 6000.0  # two nodes' rows, 3000 J each


def test_slurm_without_energy_accounting_is_not_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", fake_sstat(tmp_path, "echo\n")["PATH"])
    (src,) = energy.slurm_sources({"SLURM_JOB_ID": "42"})
    meter = energy.Meter([src]).start()
    (e,) = energy.combine(meter, [meter.stop()])
    assert e["status"] == "not measured" and "gathers no energy" in e["reason"]
    (outside,) = energy.slurm_sources({})
    assert outside.reason == "not a Slurm job"


# ------------------------------------------------------------------ several processes

def test_a_multi_process_sum_needs_every_process_that_reads():
    def src(joules, duty=True):
        s = energy.Source("rapl", "cpu package", "limits", duty=duty)
        s.start_j, s.end_j = (0.0, joules) if joules is not None else (None, None)
        return s
    writer = energy.Meter([src(10.0)])
    other_node, same_node = energy.Meter([src(5.0)]), energy.Meter([src(99.0, duty=False)])
    rows = [m.values() for m in (writer, other_node, same_node)]
    (e,) = energy.combine(writer, rows)
    assert e["joules"] == 15.0 and e["status"] == "measured"  # the second process of a node adds 0
    unread = energy.Meter([src(None)])
    unread.sources[0].reason = "energy_uj readable only by root"
    (e,) = energy.combine(writer, [writer.values(), unread.values()])
    assert e["status"] == "not measured" and e["reason"] == "read here, but not by every process of the run"
    assert math.isnan(unread.values()[0])


def test_energy_entries_are_part_of_the_record_schema():
    from archbench.core.record import RecordError
    good = {"source": "nvml", "covers": "gpu board", "joules": 12.5, "status": "measured",
            "reason": "", "limits": "x"}
    base = dict(schema_version=1, run_id="a_r0", experiment="e", system="s", arch="x86_64",
                kind="train", status="ok", reason="", throughput=1.0, throughput_unit="img/s",
                repetition=0, config_id="a", start_time="t", end_time="t")
    validate({**base, "energy": [good]})
    with pytest.raises(RecordError, match="energy"):
        validate({**base, "energy": [{**good, "covers": "the moon"}]})


# ------------------------------------------------------------------ table and figure

def test_the_energy_table_and_figure_of_real_records_say_not_measured(tmp_path):
    from archbench.results.collect import records_to_frame
    from archbench.results.figures import NO_DATA, build_figure
    from archbench.results.tables import build_table
    done = train(tmp_path / "r.json", "pytorch")
    assert done.returncode == 0, done.stderr[-2000:]
    record = read_record(tmp_path / "r.json")
    table = build_table("energy", records_to_frame([record]))
    assert len(table) == 1 and table["j_per_img"].isna().all()
    assert table["img_s"].iloc[0] == pytest.approx(record["throughput"])
    status = table["status"].iloc[0]
    assert status.startswith("not measured: ") and "slurm node (not a Slurm job)" in status
    figure = build_figure("energy", records_to_frame([record]))
    texts = [t.get_text() for t in figure.findobj(lambda a: hasattr(a, "get_text"))]
    assert NO_DATA in texts


def with_energy(record: dict, name: str, entries: list[dict]) -> dict:
    out = {**record, "config_id": f"{record['config_id']}_{name}", "energy": entries,
           "precision": name}
    out["run_id"] = f"{out['config_id']}_r0"
    validate(out)
    return out


def test_each_measured_source_is_a_row_of_joules_per_image_and_images_per_kwh(tmp_path):
    from archbench.results.collect import records_to_frame
    from archbench.results.tables import build_table
    done = train(tmp_path / "r.json", "pytorch")
    assert done.returncode == 0, done.stderr[-2000:]
    real = read_record(tmp_path / "r.json")
    images = real["metrics"]["images"]["value"]
    gpu = energy.entry("nvml", "gpu board", joules=3.0 * images, status="measured", limits="x")
    cpu = energy.entry("rapl", "cpu package", joules=1.5 * images, status="measured", limits="x")
    hot = energy.entry("nvml", "gpu board", joules=9.0, status="implausible", reason="above", limits="x")
    table = build_table("energy", records_to_frame([with_energy(real, "bf16", [gpu, cpu]),
                                                   with_energy(real, "fp16", [hot])]))
    measured = table[table["status"] == "measured"].set_index("source")
    assert measured.loc["nvml", "j_per_img"] == pytest.approx(3.0)  # never summed with the CPU's
    assert measured.loc["rapl", "j_per_img"] == pytest.approx(1.5)
    assert measured.loc["rapl", "img_per_kwh"] == pytest.approx(3.6e6 / 1.5)
    (implausible,) = table.loc[table["precision"] == "fp16", "status"]
    assert implausible.startswith("not measured: ") and "implausible (above)" in implausible


def test_fabricated_energy_follows_its_power():
    """The fabricated CPU packages draw known watts: J/img is W / (img/s) run by run."""
    import fabricated
    import pandas as pd

    from archbench.results.collect import flatten
    from archbench.results.tables import build_table
    records = [r for r in fabricated.fabricate_records(repetitions=2) if r["kind"] == "train"]
    table = build_table("energy", pd.DataFrame([flatten(r) for r in records]))
    row = table[table["status"] == "measured"].iloc[0]
    runs = [r for r in records if r["status"] == "ok" and all(
        r[k] == row[k] for k in ("system", "model", "framework", "batch_per_process", "intra_threads",
                                 "experiment", "nodes", "workers"))]
    watts = fabricated.PACKAGE_WATTS[row["system"]]
    expected = sum(watts / r["throughput"] for r in runs) / len(runs)
    assert len({r["config_id"] for r in runs}) == 1 and row["j_per_img"] == pytest.approx(expected)
    assert row["source"] == "rapl" and row["covers"] == "cpu package"
