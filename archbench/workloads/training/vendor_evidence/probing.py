"""Running the vendor probe: one training step with oneDNN's verbose mode on, outside the window.

The writing worker starts one short child process
(``python -m archbench.workloads.training.vendor_probe_child``) that builds the same model
with the same batch, threads, data format and vendor flag (TF_ENABLE_ONEDNN_OPTS), runs one
warm-up step and then ONE probe step with ``ONEDNN_VERBOSE=1``. oneDNN reads that variable
once, when it first runs in a process, and TensorFlow exposes no runtime switch (its
library does not export oneDNN's ``dnnl_set_verbose``), so the probe cannot run inside the
measured process without its verbose output slowing the measured steps; the child leaves
the run's timing untouched. A run that probes starts the child first thing, before it
imports TensorFlow, and waits for it after its first step (:class:`ProbeChild`): the two
start-ups and step tracings overlap, the rest of the warm-up and the window run alone. Only
the lines between the probe step's two markers count. PyTorch switches oneDNN's verbose
mode at run time (``torch.backends.mkldnn.verbose``): a one-process PyTorch run probes ONE
more step of its own, after the window, with the mode on around that step only
(:func:`probe_in_process`), and starts no child. A probe that fails never fails the run
(:func:`failed_evidence`).
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import tempfile
from contextlib import AbstractContextManager
from typing import Callable

from archbench.workloads.training.settings import command_line
from archbench.workloads.training.vendor_evidence.onednn_verbose import PROBE_BEGIN, PROBE_END, parse_verbose

LIBRARIES_LINE = "archbench-vendor-probe-libraries:"
# oneDNN v3 reads ONEDNN_/DNNL_, v1-v2 DNNL_, MKL-DNN v0 MKLDNN_; "1" = executions + errors
VERBOSE_ENV = {"ONEDNN_VERBOSE": "1", "DNNL_VERBOSE": "1", "MKLDNN_VERBOSE": "1"}
PROBE_TIMEOUT_S = 300.0

# math runtimes worth naming when mapped into the probe process (the BLAS and LAPACK too:
# a framework built without oneDNN, Debian's ppc64el PyTorch, computes through them)
_RUNTIMES = re.compile(r"^lib(armpl|mkl|iomp5|gomp|omp|arm_compute|dnnl|mkldnn|openblas|blis|blas|lapack)[^/]*\.so")


def failed_evidence(reason: str) -> dict:
    """Evidence of a probe that did not finish: no library, the reason in ``error``."""
    return {"library": None, "version": None, "isa": None, "implementations": {},
            "optimized_share": None, "reference_share": None, "gemm_api_share": None,
            "loaded_libraries": [], "error": reason[:300]}


def probe_argv(config) -> list[str]:
    """argv of the probe child for the training run ``config`` (a TrainRun): the settings
    the child takes (``Setting.probe``)."""
    return [sys.executable, "-m", "archbench.workloads.training.vendor_probe_child",
            *command_line(config, probe=True)]


def probe_settings(config) -> str:
    """The settings the probe of training run ``config`` (a TrainRun) takes, as the
    evidence it gathers states them (``settings``)."""
    return " ".join(command_line(config, probe=True))


class ProbeChild:
    """The probe child for a training run, started at once; :meth:`evidence` waits for it.

    A TensorFlow run that probes starts it before it imports TensorFlow itself, so the
    child's start-up, model build and steps overlap the run's own, and waits for it after
    its first step (the rest of the warm-up and the window run alone). Its output goes to
    files, not pipes, so a child printing more than a pipe holds never waits on a parent
    that is not reading."""

    def __init__(self, config, *, timeout_s: float = PROBE_TIMEOUT_S):
        env = {**os.environ, **VERBOSE_ENV}
        env.pop("TF_CONFIG", None)  # the probe is one process, never a cluster task
        self.timeout_s = timeout_s
        self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self._process = subprocess.Popen(probe_argv(config), env=env, stdout=self._out,
                                         stderr=self._err, stdin=subprocess.DEVNULL)
        self._evidence: dict | None = None

    def evidence(self) -> dict:
        """Its evidence once it has exited (a failed probe gives :func:`failed_evidence`;
        it never fails the run)."""
        if self._evidence is None:
            try:
                code = self._process.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                self.stop()
                self._evidence = failed_evidence(f"probe exceeded {self.timeout_s:.0f} s")
                return self._evidence
            stdout, stderr = (self._read(f) for f in (self._out, self._err))
            if code != 0 or PROBE_END not in stdout:
                tail = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
                self._evidence = failed_evidence(f"probe exited {code}: {tail[0]}")
            else:
                loaded = next((line.split(":", 1)[1].split() for line in stdout.splitlines()
                               if line.startswith(LIBRARIES_LINE)), [])
                self._evidence = parse_verbose(stdout, loaded)
        return self._evidence

    @property
    def running(self) -> bool:
        """Whether the child has not exited yet."""
        return self._process.poll() is None

    def stop(self) -> None:
        """Kill the child if it still runs (the run failed before it waited): a probe left
        running would share the CPU with whatever runs next. Its output files are closed."""
        if self.running:
            self._process.kill()
            self._process.wait()
        for file in (self._out, self._err):
            file.close()

    @staticmethod
    def _read(file) -> str:
        file.seek(0)
        text = file.read().decode(errors="replace")
        file.close()
        return text


def probe(config, *, timeout_s: float = PROBE_TIMEOUT_S) -> dict:
    """Run the probe child for ``config`` and return its evidence (a failed probe gives
    :func:`failed_evidence`; it never fails the run)."""
    return ProbeChild(config, timeout_s=timeout_s).evidence()


def loaded_runtimes(maps_path: str = "/proc/self/maps") -> list[str]:
    """Math runtimes mapped into this process (libarmpl, libmkl, libiomp5, libgomp, ...)."""
    try:
        with open(maps_path) as maps:
            names = {line.split()[-1].rsplit("/", 1)[-1] for line in maps if ".so" in line}
    except OSError:
        return []
    return sorted(n for n in names if _RUNTIMES.match(n))


def flush_stdout() -> None:
    """Flush C stdio (where oneDNN prints) and Python's stdout."""
    ctypes.CDLL(None).fflush(None)
    sys.stdout.flush()


def write_line(text: str) -> None:
    """Write ``text`` as one line to file descriptor 1, after all that was printed before."""
    flush_stdout()
    os.write(1, f"{text}\n".encode())


def probe_in_process(step: Callable[[], object],
                     verbose: Callable[[], AbstractContextManager]) -> dict:
    """Evidence from ONE more ``step`` of this process with oneDNN's verbose mode on around
    it (``verbose()``: the framework's run-time switch), its output caught from file
    descriptor 1; the runtimes mapped into this process. A failure gives
    :func:`failed_evidence`; it never fails the run."""
    saved = os.dup(1)
    try:
        with tempfile.TemporaryFile() as sink:
            flush_stdout()  # what this process printed before goes where it went
            os.dup2(sink.fileno(), 1)
            try:
                write_line(PROBE_BEGIN)
                with verbose():
                    step()
                write_line(PROBE_END)
            finally:
                flush_stdout()
                os.dup2(saved, 1)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
    except Exception as exc:  # noqa: BLE001 - the probe never fails the run
        return failed_evidence(f"probe step failed: {exc!r}")
    finally:
        os.close(saved)
    return parse_verbose(text, loaded_runtimes())
