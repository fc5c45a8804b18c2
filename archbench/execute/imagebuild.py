"""Build an image from a ``containers/*.def`` definition without Apptainer: every step of
the definition really runs, on a Debian root filesystem made here, as root.

    python -m archbench.execute.imagebuild containers/x86_64-onednn.def results/images/x86_64-onednn.sqfs
    python -m archbench.execute.imagebuild containers/aarch64-acl.def OUT.sqfs --build-arg HOROVOD=0

Steps, in Apptainer's order: the base (see below), ``%files`` (copied from the current
directory, as ``apptainer build`` run from the repository root), ``%post`` (``/bin/sh -e``
in a chroot with ``/proc`` mounted, in a private mount namespace), ``%environment``,
``%labels`` and ``%runscript`` written where Apptainer puts them (``/.singularity.d/``),
then ``%test`` in the chroot with the environment sourced, and the tree packed as a SquashFS
image that Charliecloud's ``ch-run`` runs. ``{{ NAME }}`` is replaced by a build argument
(``%arguments`` gives defaults; ``--build-arg NAME=VALUE`` overrides), as Apptainer does.

The base: a ``Bootstrap: docker`` image cannot be pulled here, so ``python:X.Y-slim-<suite>``
is rebuilt as its Debian equivalent: ``debootstrap`` of that Debian release for the image's
architecture (``%labels arch``; a foreign one runs under qemu-user-static through
binfmt_misc), its python3 made the ``python``/``pip`` of ``/usr/local`` by a venv there, as
in the official image. ``debian:<release>`` (or ``-slim``) is that debootstrap tree alone,
no venv: Debian's own ``python3`` and its packages (``apt-get install python3-torch``). The debootstrap tree is cached per architecture and release
(``--cache``); the definition's own steps run on every build. The package mirror is the
build host's (its apt sources) unless ``--mirror`` names one.

``--host-network-config`` (local test builds only, never part of a definition) copies this
host's CA bundle and pip configuration in for ``%post``, and passes its ``PIP_*`` variables.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from archbench.plan.containers import Definition, image_digest, validate_definition

# image arch label -> Debian architecture
DEBIAN_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64el"}
# Debian release -> its python3 (what a python:X.Y-slim-<release> image is rebuilt with)
DEBIAN_PYTHON = {"bookworm": "3.11"}
# python3-dev: the official python image carries its headers (Horovod's build needs them)
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "python3-dev", "ca-certificates")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_BASE = re.compile(r"^python:(\d+\.\d+)-slim-([a-z]+)$")
_DEBIAN = re.compile(r"^debian:([a-z]+)(-slim)?$")
_ARG = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
# what the host lends a local test build (--host-network-config)
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
HOST_PIP_CONFIG = ("/etc/pip.conf", "/etc/xdg/pip")
DEFAULT_CACHE = Path("/var/tmp/archbench-image-cache")


class BuildError(RuntimeError):
    """A build that cannot go on; the message is one line naming the definition or step."""


def python_venv(definition: Definition) -> bool:
    """Whether the base is an official python image (its Python a venv in /usr/local), not
    plain Debian (``debian:<release>``: Debian's python3 and packages as they are)."""
    return not _DEBIAN.match(definition.header.get("From", ""))


def debian_base(definition: Definition) -> tuple[str, str]:
    """(Debian release, Debian architecture) a definition's base is rebuilt from."""
    name, base = definition.path.name, definition.header.get("From", "")
    if definition.header.get("Bootstrap") != "docker" or not (_BASE.match(base) or _DEBIAN.match(base)):
        raise BuildError(f"{name}: From: {base!r} has no Debian equivalent here "
                         "(supported: python:X.Y-slim-<debian release>, debian:<release>)")
    if _DEBIAN.match(base):
        release = _DEBIAN.match(base).group(1)
        if release not in DEBIAN_PYTHON:
            raise BuildError(f"{name}: From: {base}: Debian {release} is not supported here "
                             f"(supported: {', '.join(DEBIAN_PYTHON)})")
    else:
        python, release = _BASE.match(base).groups()
        if DEBIAN_PYTHON.get(release) != python:
            raise BuildError(f"{name}: From: {base}: Debian {release} does not ship Python {python}")
    arch = definition.labels.get("arch", "")
    if arch not in DEBIAN_ARCH:
        raise BuildError(f"{name}: %labels arch {arch!r} is not one of {', '.join(DEBIAN_ARCH)}")
    return release, DEBIAN_ARCH[arch]


def host_mirror(release: str, sources: Sequence[Path] = ()) -> str:
    """The Debian mirror this host's apt uses for ``release`` (its main archive, not the
    security one), from one-line and deb822 source files."""
    files = list(sources) or [Path("/etc/apt/sources.list"),
                              *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for uri, suites in _apt_entries(text):
            if release in suites and "security" not in uri:
                return uri
    raise BuildError(f"no apt source for Debian {release} on this host; pass --mirror")


def _apt_entries(text: str) -> Iterator[tuple[str, list[str]]]:
    """(URI, suites) of each deb entry of a sources.list or deb822 .sources text."""
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 3 and words[0] == "deb":
            rest = [w for w in words[1:] if not w.startswith("[")]
            yield rest[0], rest[1:2]
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
        if "deb" in fields.get("Types", "").split() and fields.get("URIs"):
            yield fields["URIs"].split()[0], fields.get("Suites", "").split()


def build_args(definition: Definition, overrides: Mapping[str, str]) -> dict[str, str]:
    """Build arguments: ``%arguments`` defaults (``NAME=value`` lines), then ``overrides``;
    an override the definition does not declare is an error."""
    values: dict[str, str] = {}
    for line in definition.sections.get("arguments", "").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip().strip("'\"")
    unknown = sorted(set(overrides) - set(values))
    if unknown:
        raise BuildError(f"{definition.path.name}: build argument {unknown[0]} is not declared "
                         "in %arguments")
    return {**values, **overrides}


def substitute(text: str, args: Mapping[str, str], where: str) -> str:
    """``text`` with every ``{{ NAME }}`` replaced; an undefined NAME is an error."""
    def value(match: re.Match) -> str:
        if match.group(1) not in args:
            raise BuildError(f"{where}: {{{{ {match.group(1)} }}}} has no value (%arguments)")
        return args[match.group(1)]
    return _ARG.sub(value, text)


def binfmt_interpreter(arch: str) -> tuple[str, bool] | None:
    """(interpreter path, fix-binary flag) of the binfmt_misc entry running ``arch`` binaries
    on this host; None when ``arch`` is the host's own."""
    if arch == os.uname().machine:
        return None
    entry = Path(f"/proc/sys/fs/binfmt_misc/qemu-{arch}")
    try:
        text = entry.read_text()
    except OSError:
        raise BuildError(f"no binfmt_misc entry {entry}: install qemu-user-static and "
                         "binfmt-support (scripts/image_tools.sh)") from None
    if not text.startswith("enabled"):
        raise BuildError(f"{entry} is disabled")
    interpreter = re.search(r"^interpreter (\S+)", text, re.M).group(1)
    flags = re.search(r"^flags: (\S*)", text, re.M)
    return interpreter, bool(flags and "F" in flags.group(1))


def run(argv: Sequence[str], *, log, step: str) -> None:
    """Run one build command, its output into ``log``; a failure names the step."""
    log.write(f"+ {' '.join(argv)}\n")
    log.flush()
    done = subprocess.run(list(argv), stdout=log, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise BuildError(f"{step} failed (exit {done.returncode}); see {log.name}")


def base_rootfs(release: str, debarch: str, *, cache: Path, mirror: str, log) -> Path:
    """The cached debootstrap tree of ``release`` for ``debarch`` (made once)."""
    packages = hashlib.sha256(",".join(sorted(BASE_PACKAGES)).encode()).hexdigest()[:8]
    tree = cache / f"debootstrap-{release}-{debarch}-{packages}"
    if (tree / ".archbench-base-done").exists():
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    tree.parent.mkdir(parents=True, exist_ok=True)
    # in a private mount namespace: the /proc it mounts in the tree never outlives it
    run(["unshare", "--mount", "--propagation", "private", "debootstrap", f"--arch={debarch}", "--variant=minbase",
         f"--include={','.join(BASE_PACKAGES)}", release, str(tree), mirror],
        log=log, step=f"debootstrap {release} {debarch}")
    (tree / ".archbench-base-done").write_text(mirror + "\n")
    return tree


def in_chroot(root: Path, script: str, *, env: Mapping[str, str], log, step: str) -> None:
    """Run ``script`` with ``/bin/sh -e`` inside ``root`` (a private mount namespace with
    /proc mounted, a clean environment of ``env``)."""
    script_path = root / ".archbench-step.sh"
    script_path.write_text(script + "\n")
    env_args = [f"{k}={v}" for k, v in env.items()]
    inner = (f'mount -t proc proc "$1/proc" && exec chroot "$1" /usr/bin/env -i {_quote(env_args)}'
             " /bin/sh -e /.archbench-step.sh")
    try:
        run(["unshare", "--mount", "--propagation", "private", "sh", "-c", inner, "sh", str(root)],
            log=log, step=step)
    finally:
        script_path.unlink(missing_ok=True)


def _quote(words: Sequence[str]) -> str:
    import shlex
    return " ".join(shlex.quote(w) for w in words)


def prepare_root(base: Path, root: Path, *, arch: str, host_network: bool, log,
                 venv: bool = True) -> dict[str, str]:
    """Copy the base into ``root``, lend it what a build needs from the host, and make the
    venv in /usr/local (``venv``: an official python image's base); return the environment
    ``%post`` runs with."""
    run(["cp", "-a", f"{base}/.", str(root)], log=log, step="copy base")
    (root / ".archbench-base-done").unlink(missing_ok=True)
    shutil.copy2("/etc/resolv.conf", root / "etc/resolv.conf")
    interpreter = binfmt_interpreter(arch)
    if interpreter and not interpreter[1]:  # the kernel looks the interpreter up in the chroot
        target = root / interpreter[0].lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(interpreter[0]), target)
    env = {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8"}
    if host_network:
        shutil.copy2(HOST_CA_BUNDLE, root / HOST_CA_BUNDLE.lstrip("/"))
        for path in HOST_PIP_CONFIG:
            if os.path.isfile(path):
                shutil.copy2(path, root / path.lstrip("/"))
            elif os.path.isdir(path):
                shutil.copytree(path, root / path.lstrip("/"), dirs_exist_ok=True)
        env.update({k: v for k, v in os.environ.items() if k.startswith("PIP_")})
    if venv:
        in_chroot(root, "python3 -m venv /usr/local", env=env, log=log, step="python venv in /usr/local")
    return env


def copy_files(definition: Definition, root: Path, *, args: Mapping[str, str], log) -> None:
    """``%files``: ``src [dst]`` lines, sources relative to the current directory."""
    for line in definition.sections.get("files", "").splitlines():
        words = substitute(line, args, f"{definition.path.name} %files").split("#", 1)[0].split()
        if not words:
            continue
        src, dst = words[0], words[1] if len(words) > 1 else words[0]
        target = root / dst.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not os.path.exists(src):
            raise BuildError(f"{definition.path.name}: %files source {src} does not exist "
                             "(build from the repository root)")
        run(["cp", "-a", src, str(target)], log=log, step=f"%files {src}")


def write_metadata(definition: Definition, root: Path, *, args: Mapping[str, str], log) -> None:
    """``%environment``, ``%labels`` and ``%runscript`` where Apptainer keeps them, plus the
    evaluated environment as ``/ch/environment`` (what ``ch-run --set-env`` reads)."""
    name = definition.path.name
    meta = root / ".singularity.d"
    (meta / "env").mkdir(parents=True, exist_ok=True)
    environment = substitute(definition.sections.get("environment", ""), args, f"{name} %environment")
    (meta / "env" / "90-environment.sh").write_text("#!/bin/sh\n" + environment + "\n")
    runscript = substitute(definition.sections.get("runscript", ""), args, f"{name} %runscript")
    (meta / "runscript").write_text("#!/bin/sh\n" + runscript + "\n")
    (meta / "runscript").chmod(0o755)
    (meta / "labels.json").write_text(json.dumps(definition.labels, indent=1, sort_keys=True) + "\n")
    (root / "ch").mkdir(exist_ok=True)
    in_chroot(root, ". /.singularity.d/env/90-environment.sh\n/usr/bin/env > /ch/environment",
              env={"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8"}, log=log,
              step=f"{name} %environment")
    kept = [line for line in (root / "ch/environment").read_text().splitlines()
            if line.split("=", 1)[0] not in ("PWD", "SHLVL", "_", "HOME")]
    (root / "ch/environment").write_text("\n".join(kept) + "\n")


def pack(root: Path, output: Path, log) -> None:
    """SquashFS image of ``root`` at ``output`` (lz4: fast to pack, read by squashfuse)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    output.unlink(missing_ok=True)
    run(["mksquashfs", str(root), str(output), "-noappend", "-comp", "lz4", "-no-progress"],
        log=log, step="mksquashfs")


def build(definition_path: str | Path, output: str | Path, *, overrides: Mapping[str, str] = {},
          cache: Path, mirror: str | None = None, host_network: bool = False,
          workdir: Path | None = None, keep_root: bool = False, log_path: Path | None = None) -> dict:
    """Build ``output`` (SquashFS) from the definition; write ``<output>.sha256`` and
    ``<output>.build.json`` (steps and their seconds); return that build report."""
    definition = validate_definition(definition_path)
    name, output = definition.path.name, Path(output)
    release, debarch = debian_base(definition)
    arch = definition.labels["arch"]
    args = build_args(definition, overrides)
    post = substitute(definition.sections["post"], args, f"{name} %post")
    test = substitute(definition.sections["test"], args, f"{name} %test")
    mirror = mirror or host_mirror(release)
    log_path = Path(log_path or output.with_suffix(".build.log"))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}
    work = Path(tempfile.mkdtemp(prefix="archbench-build-", dir=workdir))
    root = work / "root"
    root.mkdir()
    with open(log_path, "w") as log:
        def step(label: str, action) -> None:
            start = time.monotonic()
            print(f"imagebuild: {name}: {label} ...", file=sys.stderr, flush=True)
            log.write(f"=== {label}\n")
            log.flush()
            action()
            times[label] = round(time.monotonic() - start, 1)
            print(f"imagebuild: {name}: {label} done in {times[label]:.0f} s", file=sys.stderr, flush=True)
        try:
            base: list[Path] = []
            env: dict[str, str] = {}
            step("base (debootstrap, cached)", lambda: base.append(
                base_rootfs(release, debarch, cache=cache, mirror=mirror, log=log)))
            step("base copy + venv", lambda: env.update(
                prepare_root(base[0], root, arch=arch, host_network=host_network, log=log,
                             venv=python_venv(definition))))
            step("%files", lambda: copy_files(definition, root, args=args, log=log))
            step("%post", lambda: in_chroot(root, post, env=env, log=log, step=f"{name} %post"))
            step("%environment %labels %runscript", lambda: write_metadata(definition, root, args=args, log=log))
            test_script = f". /.singularity.d/env/90-environment.sh\n{test}"
            step("%test", lambda: in_chroot(root, test_script, env={"PATH": PATH, "HOME": "/root"},
                                            log=log, step=f"{name} %test"))
            if host_network:  # what the host lent the build stays out of the image
                for path in HOST_PIP_CONFIG:
                    target = root / path.lstrip("/")
                    shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
            step("pack SquashFS", lambda: pack(root, output, log))
        finally:
            if not keep_root:
                shutil.rmtree(work, ignore_errors=True)
    digest = image_digest(output)
    output.with_suffix(".sha256").write_text(digest + "\n")
    report = {"definition": str(definition_path), "image": str(output), "sha256": digest,
              "arch": arch, "base": f"debian {release} {debarch} (for {definition.header['From']})",
              "build_args": args, "seconds": times, "bytes": output.stat().st_size,
              "root": str(root) if keep_root else None}
    output.with_suffix(".build.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; one line on error."""
    p = argparse.ArgumentParser(prog="python -m archbench.execute.imagebuild", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("definition")
    p.add_argument("output", help="the SquashFS image to write (<name>.sqfs)")
    p.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                   help="where debootstrap trees are kept between builds")
    p.add_argument("--mirror", help="Debian mirror (default: the one this host's apt uses)")
    p.add_argument("--host-network-config", action="store_true",
                   help="lend %%post this host's CA bundle and pip configuration (local tests)")
    p.add_argument("--workdir", type=Path, help="where the root filesystem is assembled")
    p.add_argument("--keep-root", action="store_true", help="keep the assembled tree")
    args = p.parse_args(argv)
    overrides = dict(a.split("=", 1) for a in args.build_arg if "=" in a)
    if os.geteuid() != 0:
        print("imagebuild: must run as root (debootstrap, chroot, mounts)", file=sys.stderr)
        return 2
    try:
        report = build(args.definition, args.output, overrides=overrides, cache=args.cache,
                       mirror=args.mirror, host_network=args.host_network_config,
                       workdir=args.workdir, keep_root=args.keep_root)
    except (BuildError, ValueError, OSError) as exc:
        print(f"imagebuild: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
