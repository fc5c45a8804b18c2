"""The image tests' builds, started when collection ends, at idle priority, so that they run
while the rest of the suite does (the image tests are collected last: conftest.py).

A build is archbench.execute.imagebuild's CLI on one of containers/*.def, run in the
background from the repository root (its %files are relative to it), lending it this
host's CA bundle and pip configuration. At nice 19 the builds take the CPU time the other
tests leave idle (their disk I/O is not ranked: the disk's scheduler ignores priorities);
what is left of a build when its first image test asks for it runs alone, at full speed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from conftest import REPO, tool_env

from archbench.execute import imagebuild

BUILD_TIMEOUT_S = 3600  # from when a test first waits for the build
# the session fixture that wants each build -> (definition, build arguments, emulated arch)
BUILDS = {
    "x86_image": ("x86_64-onednn", (), None),
    "aarch64_image": ("aarch64-acl", ("--build-arg", "HOROVOD=0"), "aarch64"),
    "ppc64le_image": ("ppc64le-debian", (), "ppc64le"),
}
TIMES: dict[str, float] = {}  # build -> wall seconds from its start to its end


class Build:
    """One image build, started at once in the background."""

    def __init__(self, definition: str, image_dir: Path, *args: str) -> None:
        self.definition, self.output = definition, image_dir / f"{definition}.sqfs"
        self.start = time.monotonic()
        self.stdout = open(image_dir / f"{definition}.stdout", "w+")
        self.process = subprocess.Popen(
            ["nice", "-n", "19", sys.executable, "-m", "archbench.execute.imagebuild", f"containers/{definition}.def",
             str(self.output), "--host-network-config", "--workdir", str(image_dir), *args],
            cwd=REPO, stdout=self.stdout, stderr=subprocess.STDOUT, text=True,
            env=tool_env(PYTHONPATH=str(REPO)))

    def report(self) -> dict:
        """The build's report once it has finished (AssertionError with its log if it failed)."""
        try:
            code = self.process.wait(timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        TIMES.setdefault(self.definition, time.monotonic() - self.start)
        self.stdout.seek(0)
        out = self.stdout.read()
        log = self.output.with_suffix(".build.log")
        tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
        assert code == 0, f"{out[-2000:]}\n{tail}"
        return json.loads(out.strip().splitlines()[-1])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.stdout.close()


class Builds:
    """This session's image directory and the builds started in it."""

    def __init__(self) -> None:
        self.image_dir: Path | None = None
        self.started: dict[str, Build] = {}
        self.tools_error: str | None = None

    def start(self, wanted: set[str]) -> None:
        """Install the image tools (scripts/image_tools.sh, as root) and start the builds
        that the fixtures in ``wanted`` need and this host can run; once per session."""
        if self.image_dir is not None or not wanted & set(BUILDS):
            return
        if os.geteuid() != 0:
            self.tools_error = "image builds need root (debootstrap, chroot, mounts)"
            return
        done = subprocess.run(["bash", str(REPO / "scripts/image_tools.sh"), "install"],
                              capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            self.tools_error = f"image tools unavailable: {done.stderr.strip().splitlines()[-1:]}"
            return
        # removed at the end of the session: the images are 1-5 GB each
        self.image_dir = Path(tempfile.mkdtemp(prefix="archbench-images-", dir="/var/tmp"))
        for fixture, (definition, args, emulated) in BUILDS.items():
            if fixture in wanted and (emulated is None or imagebuild.binfmt_interpreter(emulated)):
                self.started[fixture] = Build(definition, self.image_dir, *args)

    def stop(self) -> None:
        for build in self.started.values():
            build.stop()
        if self.image_dir is not None:
            shutil.rmtree(self.image_dir, ignore_errors=True)


SESSION = Builds()
