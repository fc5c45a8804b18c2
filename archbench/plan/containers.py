"""Apptainer/Singularity definition files and the container command lines of the workflow.

Pure functions: parsing and validating ``containers/*.def``, where a system's image lives
(built from a definition, pulled from a URI, or a prebuilt file), and the exact argv lists
that rules run (``apptainer build|pull``, ``apptainer exec ...``, ``ch-run ...``). Nothing
here runs a container; :func:`image_digest` only reads a file.

Runtimes: apptainer and singularity run SIF files; charliecloud runs SquashFS images with
``ch-run`` (built by :mod:`archbench.execute.imagebuild`, or pulled with ``ch-image`` and converted
by ``ch-convert``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from archbench.core import fields
from archbench.workloads.training.frameworks import FRAMEWORKS

RUNTIMES = ("apptainer", "singularity", "charliecloud", "none")
# the image file each runtime runs
IMAGE_SUFFIX = {"apptainer": ".sif", "singularity": ".sif", "charliecloud": ".sqfs"}
# URI schemes of prebuilt images, per runtime that can pull them
PULL_SCHEMES = {"apptainer": ("docker", "oras", "library"), "singularity": ("docker", "oras", "library"),
                "charliecloud": ("docker",)}
IMAGE_DIR = "results/images"
# where ch-run mounts the working directory (a directory every Debian image has: a
# read-only SquashFS image cannot get a new mount point)
CH_WORKDIR = "/mnt"
REQUIRED_HEADERS = ("Bootstrap", "From")
REQUIRED_SECTIONS = ("post", "environment", "labels", "test")
REQUIRED_LABELS = ("arch", "variant")
# Pinned packages that belong to no framework (the registry's ``Framework.pins`` name the rest)
OTHER_PINS = ("horovod",)


def _framework_packages() -> dict[str, tuple[str, ...]]:
    """Each registered framework's own packages among its pins (those whose version is the
    framework's), under its module's name (tensorflow, torch): the label stating its version."""
    return {chosen.module: tuple(p for p in getattr(chosen, "pins", ()) if p in chosen.distributions)
            for chosen in FRAMEWORKS.values()}


def pinned_names() -> tuple[str, ...]:
    """Packages whose version is part of what is measured (every install must pin them):
    each registered framework's pins, then the others (Horovod)."""
    pins = (p for chosen in FRAMEWORKS.values() for p in getattr(chosen, "pins", ()))
    return tuple(dict.fromkeys((*pins, *OTHER_PINS)))


def version_labels() -> dict[str, tuple[str, ...]]:
    """The labels that state a pinned package's version (a label must equal what %post
    installs), with the packages it may be: a framework's under its module's name
    (``tensorflow``: tensorflow or tensorflow-cpu), every other pin under its own."""
    own = _framework_packages()
    taken = {p for packages in own.values() for p in packages}
    return {**own, **{p: (p,) for p in pinned_names() if p not in taken}}

_SECTION = re.compile(r"^%(\w+)\s*(.*)$")
_HEADER = re.compile(r"^(\w+):\s*(.*?)\s*$")
_REQ = re.compile(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)$")
# a local source tree or sdist named <name>-<version> (pip install /tmp/x/horovod-0.28.1)
_SOURCE = re.compile(r"^([A-Za-z0-9_.]+?)-(\d[\w.]*?)(\.tar\.gz|\.zip)?$")
# a %post variable set to the source tree a script prints (HVD_SRC=$(bash /opt/x/horovod_source.sh DIR))
_SCRIPT_SOURCE = re.compile(r"^\s*(\w+)=\$\((?:bash|sh)\s+(\S+)[^)]*\)\s*$")
# a pip argument that is one variable ("$HVD_SRC", ${HVD_SRC})
_VARIABLE = re.compile(r"^\$\{?(\w+)\}?$")


@dataclass
class Definition:
    """A parsed definition file: header keywords, raw section bodies and labels."""

    path: Path
    header: dict[str, str] = field(default_factory=dict)
    sections: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)


def parse_definition(path: str | Path) -> Definition:
    """Parse a definition file into header keywords, sections, labels and environment.

    Own parser for the structure (spython's recipe parser drops ``Bootstrap`` and folds
    ``%test`` into ``%post``); spython is used by :func:`validate_definition` as a
    cross-check that the file is also readable by the usual tooling.
    """
    path = Path(path)
    definition = Definition(path=path)
    current: str | None = None
    body: list[str] = []

    def close() -> None:
        if current is not None:
            definition.sections[current] = "\n".join(body).strip("\n")

    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.rstrip()
        match = _SECTION.match(line)
        if match:
            close()
            current, body = match.group(1), []
            continue
        if current is None:
            stripped = line.strip()
            header = _HEADER.match(stripped)
            if header and not stripped.startswith("#"):
                definition.header[header.group(1)] = header.group(2)
        else:
            body.append(line)
    close()

    for line in definition.sections.get("labels", "").splitlines():
        parts = line.strip().split(None, 1)
        if parts and not parts[0].startswith("#"):
            definition.labels[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    for line in definition.sections.get("environment", "").splitlines():
        match = re.match(r"^\s*export\s+(\w+)=(.*)$", line)
        if match:
            definition.environment[match.group(1)] = match.group(2).strip()
    return definition


def _commands(script: str) -> list[list[str]]:
    """Shell commands of a section as token lists (continuations joined, comments dropped)."""
    joined = re.sub(r"\\\n", " ", script)
    commands: list[list[str]] = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"&&|\|\||;", line):
            try:
                tokens = shlex.split(part, comments=True)
            except ValueError:
                continue
            if tokens:
                commands.append(tokens)
    return commands


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(arg: str, tool: str,
                 sources: Mapping[str, tuple[str, str]] | None = None) -> tuple[str, str] | None:
    """(normalised name, version spec) of one package argument of ``pip`` or ``conda``;
    a local path whose last part is ``<name>-<version>`` (a patched sdist's source tree,
    say) reads as ``<name>==<version>``, a variable of ``sources`` (:func:`_script_sources`)
    as the package its script downloads; None for an option or a path without a version."""
    if arg.startswith("-"):
        return None
    variable = _VARIABLE.match(arg)
    if tool == "pip" and variable:
        return (sources or {}).get(variable.group(1))
    if tool == "pip" and "/" in arg:
        source = _SOURCE.match(arg.rstrip("/").rsplit("/", 1)[-1])
        return (_normalise(source.group(1)), f"=={source.group(2)}") if source else None
    match = _REQ.match(arg)
    return (_normalise(match.group(1)), match.group(3)) if match else None


def _pip_or_conda(tokens: Sequence[str]) -> tuple[str, list[str]] | None:
    """(tool, arguments) of a ``pip install|download`` or ``conda create|install`` command."""
    if "pip" in tokens:
        for verb in ("install", "download"):
            if verb in tokens:
                return "pip", list(tokens[tokens.index(verb) + 1:])
    if "conda" in tokens:
        for verb in ("install", "create"):
            if verb in tokens:
                return "conda", list(tokens[tokens.index(verb) + 1:])
    return None


def files(definition: Definition) -> dict[str, str]:
    """``%files``: destination in the image -> source (relative to the directory the image
    is built from, the repository root)."""
    copied: dict[str, str] = {}
    for line in definition.sections.get("files", "").splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            copied[words[1] if len(words) > 1 else words[0]] = words[0]
    return copied


def _script_sources(definition: Definition) -> dict[str, tuple[str, str]]:
    """The %post variables set to the package source tree a script of ``%files`` prints
    (``HVD_SRC=$(bash /opt/archbench/horovod_source.sh /tmp/horovod)``): variable ->
    (normalised name, ``==version``) of the one ``pip download`` in that script, read where
    %files copies it from: the repository root, the folder above ``containers/``."""
    copied, name, root = files(definition), definition.path.name, definition.path.parent.parent
    sources: dict[str, tuple[str, str]] = {}
    for line in re.sub(r"\\\n", " ", definition.sections.get("post", "")).splitlines():
        match = _SCRIPT_SOURCE.match(line)
        if not match or match.group(2) not in copied:
            continue
        script = root / copied[match.group(2)]
        if not script.is_file():
            raise ValueError(f"{name}: %post runs {copied[match.group(2)]}, not in {root}")
        downloads = []
        for tokens in _commands(script.read_text(encoding="utf-8")):
            command = _pip_or_conda(tokens)
            if command and command[0] == "pip" and "download" in tokens:
                downloads += [r for r in (_requirement(a, "pip") for a in command[1]) if r]
        if len(downloads) != 1 or not re.fullmatch(r"==\d[\w.]*", downloads[0][1]):
            raise ValueError(f"{name}: {copied[match.group(2)]} downloads no one package at an exact "
                             "version (==X.Y.Z)")
        sources[match.group(1)] = downloads[0]
    return sources


# a Debian package version: [epoch:]upstream[+repack][-revision] (1.13.1+dfsg-4 -> 1.13.1)
_DEBIAN_VERSION = re.compile(r"^(?:\d+:)?(\d[\w.]*?)(?:[+~][\w.+~]*)?(?:-[\w.+~]+)?$")


def _apt_packages(tokens: Sequence[str]) -> list[str] | None:
    """The package arguments of an ``apt-get install`` / ``apt install`` command."""
    if "install" in tokens and any(t in ("apt-get", "apt") for t in tokens[:tokens.index("install")]):
        return [t for t in tokens[tokens.index("install") + 1:] if not t.startswith("-")]
    return None


def debian_pins(definition: Definition) -> dict[str, str]:
    """Debian packages ``%post`` installs with a version (``apt-get install name=version``):
    package name -> its Debian version (``python3-torch`` -> ``1.13.1+dfsg-4``)."""
    pins: dict[str, str] = {}
    for tokens in _commands(definition.sections.get("post", "")):
        for arg in _apt_packages(tokens) or ():
            if "=" in arg:
                name, version = arg.split("=", 1)
                pins[name] = version
    return pins


def pinned_packages(definition: Definition, names: Sequence[str] | None = None) -> dict[str, str]:
    """Versions of the packages ``names`` (default: the measured ones, :func:`pinned_names`) installed in
    ``%post``, by normalised name.

    Reads ``pip install`` and ``pip download`` (``name==version``, a local source tree or
    sdist ``.../name-version``, or ``"$VAR"``, the source tree a script copied in by %files
    makes of its ``pip download``: :func:`_script_sources`), ``conda create|install``
    (``name=version``) and ``apt-get install`` of Debian's builds (``python3-<name>=<Debian
    version>``, read as the upstream version: ``python3-torch=1.13.1+dfsg-4`` is torch
    1.13.1) commands.
    Raises ValueError for an unpinned one of them.
    """
    names = pinned_names() if names is None else names
    sources = _script_sources(definition)
    pins: dict[str, str] = {}
    for tokens in _commands(definition.sections.get("post", "")):
        for arg in _apt_packages(tokens) or ():
            name, _, version = arg.partition("=")
            if not name.startswith("python3-") or _normalise(name[len("python3-"):]) not in names:
                continue
            upstream = _DEBIAN_VERSION.match(version)
            if not upstream:
                raise ValueError(f"{definition.path.name}: apt-get installs {arg!r} without an "
                                 "exact version (=<Debian version>)")
            pins[_normalise(name[len("python3-"):])] = upstream.group(1)
        command = _pip_or_conda(tokens)
        if command is None:
            continue
        tool, args = command
        for arg in args:
            requirement = _requirement(arg, tool, sources)
            if requirement is None or requirement[0] not in names:
                continue
            name, spec = requirement
            pattern = r"==(\d[\w.]*)" if tool == "pip" else r"=(\d+\.\d+\.\d+[\w.]*)"
            pin = re.fullmatch(pattern, spec)
            if not pin:
                raise ValueError(
                    f"{definition.path.name}: {tool} installs {arg!r} without an exact "
                    f"version ({'==' if tool == 'pip' else '='}X.Y.Z)"
                )
            pins[name] = pin.group(1)
    return pins


def install_env(definition: Definition, package: str) -> dict[str, str]:
    """The ``NAME=value`` assignments that prefix the ``pip install`` of ``package`` in
    ``%post`` (e.g. Horovod's ``HOROVOD_GPU_OPERATIONS=NCCL``); {} when there are none."""
    sources = _script_sources(definition)
    for tokens in _commands(definition.sections.get("post", "")):
        if "pip" not in tokens or "install" not in tokens:
            continue
        args = tokens[tokens.index("install") + 1:]
        if any((_requirement(a, "pip", sources) or ("",))[0] == _normalise(package) for a in args):
            return dict(t.split("=", 1) for t in tokens[:tokens.index("pip")] if "=" in t)
    return {}


def validate_definition(path: str | Path) -> Definition:
    """Parse and check a definition file; return it or raise ValueError (one line).

    Checks: ``Bootstrap`` and ``From`` headers; ``%post``, ``%environment``,
    ``%labels`` and ``%test`` sections; ``arch`` and ``variant`` labels; every measured
    package pinned exactly, a registered framework installed, and each version label
    (:func:`version_labels`: ``tensorflow``, ``torch``, ``torchvision``, ``timm``,
    ``horovod``, ...; when present) equal to the pinned version; spython's parser reads the
    same base image.
    """
    from spython.main.parse.parsers import SingularityParser

    definition = parse_definition(path)
    name = definition.path.name
    for key in REQUIRED_HEADERS:
        if not definition.header.get(key):
            raise ValueError(f"{name}: missing header '{key}:'")
    for section in REQUIRED_SECTIONS:
        if not definition.sections.get(section, "").strip():
            raise ValueError(f"{name}: missing or empty section %{section}")
    for label in REQUIRED_LABELS:
        if not definition.labels.get(label):
            raise ValueError(f"{name}: %labels lacks '{label}'")
    pins = pinned_packages(definition)
    own = _framework_packages()
    if not any(pins.get(p) for packages in own.values() for p in packages):
        raise ValueError(f"{name}: %post installs no pinned {' or '.join(own)}")
    for label, packages in version_labels().items():
        installed = next((pins[p] for p in packages if p in pins), None)
        stated = definition.labels.get(label)
        if stated is not None and stated != installed:
            raise ValueError(f"{name}: label {label} {stated} but %post installs "
                             f"{installed or 'none'}")
    recipe = SingularityParser(str(definition.path)).recipe["spython-base"]
    if recipe.fromHeader != definition.header["From"]:
        raise ValueError(f"{name}: spython reads From {recipe.fromHeader!r}")
    return definition


def _check_runtime(runtime: str) -> None:
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown container runtime {runtime!r}; expected one of {', '.join(RUNTIMES)}")


def uri_scheme(image_uri: str) -> str | None:
    """The scheme of a prebuilt image URI (``docker``, ``oras``, ``library``); None for a
    local path."""
    match = re.match(r"^([a-z]+)://", image_uri)
    return match.group(1) if match else None


def check_image_uri(runtime: str, image_uri: str) -> None:
    """ValueError (one line) when ``runtime`` cannot run or pull ``image_uri``."""
    _check_runtime(runtime)
    scheme = uri_scheme(image_uri)
    if runtime == "none":
        raise ValueError("an image needs a container_runtime other than none")
    if scheme is None:
        if not image_uri.endswith(IMAGE_SUFFIX[runtime]):
            raise ValueError(f"{runtime} runs {IMAGE_SUFFIX[runtime]} image files, not {image_uri}")
    elif scheme not in PULL_SCHEMES[runtime]:
        raise ValueError(f"{runtime} cannot pull {scheme}:// images "
                         f"(it pulls {', '.join(s + '://' for s in PULL_SCHEMES[runtime])})")


def pulled_image_path(runtime: str, image_uri: str) -> str:
    """Where the workflow keeps the image pulled from ``image_uri``:
    ``results/images/pulled-<last part of the URI>-<hash of the URI><suffix>``."""
    tail = re.sub(r"[^A-Za-z0-9_.-]+", "_", image_uri.split("://", 1)[1].rstrip("/").rsplit("/", 1)[-1])
    key = hashlib.sha256(image_uri.encode()).hexdigest()[:8]
    return f"{IMAGE_DIR}/pulled-{tail}-{key}{IMAGE_SUFFIX[runtime]}"


def image_name(system: Mapping, framework: str | None = None) -> str | None:
    """The definition (``containers/<name>.def``) the measurements of ``framework`` run
    in on ``system``: its ``framework_images`` entry, else its ``image`` (None with an
    ``image_uri`` or none)."""
    if system.get("image_uri"):
        return None
    return (system.get("framework_images") or {}).get(framework or "") or system.get("image")


def image_keys(system: Mapping) -> list[tuple[str, str]]:
    """(key, definition) of every image ``system`` names: ``image``, then each
    ``framework_images.<framework>``."""
    named = [("image", system["image"])] if system.get("image") else []
    return named + [(f"framework_images.{f}", image)
                    for f, image in (system.get("framework_images") or {}).items() if image]


def system_images(system: Mapping) -> list[str]:
    """Every definition a system's measurements may run in: its ``image``, then its
    ``framework_images``."""
    return list(dict.fromkeys(image for _, image in image_keys(system)))


def image_file(system: Mapping, framework: str | None = None) -> str | None:
    """The image file a system's benchmarks (of ``framework``: see :func:`image_name`) run
    in: its ``image_uri`` when that is a local path (used as is), the pulled copy of a URI,
    or the image built from ``containers/<image>.def``; None for runtime none."""
    runtime = system.get("container_runtime", "none")
    if runtime == "none":
        return None
    uri = system.get("image_uri")
    if uri:
        return uri if uri_scheme(uri) is None else pulled_image_path(runtime, uri)
    return f"{IMAGE_DIR}/{image_name(system, framework)}{IMAGE_SUFFIX[runtime]}"


def build_command(
    runtime: str, definition: str | Path, image_path: str | Path, *, fakeroot: bool = True
) -> list[str]:
    """argv that builds ``image_path`` from ``definition``.

    ``["apptainer", "build", "--fakeroot", image, definition]``; ``--fakeroot`` lets an
    unprivileged user build. charliecloud: ``python3 -m archbench.execute.imagebuild definition
    image`` (a SquashFS image; as root, see that module). Runtime ``none`` has no image
    to build: ValueError.
    """
    _check_runtime(runtime)
    if runtime == "none":
        raise ValueError("container runtime 'none' builds no image")
    if runtime == "charliecloud":
        return ["python3", "-m", "archbench.execute.imagebuild", str(definition), str(image_path)]
    return [runtime, "build", *(["--fakeroot"] if fakeroot else []), str(image_path), str(definition)]


def pull_commands(runtime: str, image_uri: str, image_path: str | Path) -> list[list[str]]:
    """argv lists that fetch ``image_uri`` into ``image_path``, run in order.

    apptainer/singularity: ``[runtime, "pull", image, uri]``. charliecloud (docker:// only):
    ``ch-image pull`` into its storage, then ``ch-convert`` to a SquashFS file.
    """
    check_image_uri(runtime, image_uri)
    if uri_scheme(image_uri) is None:
        raise ValueError(f"{image_uri} is a local image: nothing to pull")
    if runtime == "charliecloud":
        ref = image_uri.split("://", 1)[1]
        return [["ch-image", "pull", ref],
                ["ch-convert", "-i", "ch-image", "-o", "squash", ref, str(image_path)]]
    return [[runtime, "pull", str(image_path), image_uri]]


def runtime_env(runtime: str) -> dict[str, str]:
    """Variables the runtime itself needs in the launching environment (``ch-run`` refuses
    to start without ``USER``, which a batch job or CI runner may not set)."""
    if runtime == "charliecloud" and not os.environ.get("USER"):
        import getpass
        return {"USER": getpass.getuser()}
    return {}


def exec_prefix(
    runtime: str,
    image_path: str | Path,
    *,
    binds: Sequence[str] | Mapping[str, str] = (),
    env: Mapping[str, str] | None = None,
    cleanenv: bool = True,
    gpu: bool = False,
) -> list[str]:
    """argv prefix that runs a command inside the image; ``[]`` for runtime ``none``.

    apptainer/singularity: ``<runtime> exec [--cleanenv] [--nv] --bind .. --env K=V .. IMAGE``;
    ``gpu`` adds ``--nv``, which maps the host's NVIDIA driver and devices in (the CUDA image
    carries no driver). ch-run has no such option (``ch-fromhost --nvidia`` changes an
    image, which a read-only SquashFS image cannot be): a GPU run there sees no GPU and is
    recorded as that failure.
    charliecloud: ``ch-run [--unset-env=*] --set-env -b CWD:/mnt -c /mnt -b .. --set-env=K=V
    .. IMAGE --``: the image's own environment (``/ch/environment``) first, the working
    directory mounted and entered, so relative paths mean what they mean outside.

    ``cleanenv=False`` keeps the launcher's per-task variables (SLURM_*, PMI*, OMPI_*),
    which MPI inside the image needs when srun or mpirun starts the ranks.

    ``binds`` are ``"src:dst"`` strings or a ``{src: dst}`` mapping. ``--cleanenv``
    keeps the host environment out, so every variable the run needs is passed with
    ``--env`` (e.g. ``TF_USE_LEGACY_KERAS=1``) and recorded by the caller.
    """
    _check_runtime(runtime)
    if runtime == "none":
        return []
    pairs = [f"{src}:{dst}" for src, dst in binds.items()] if isinstance(binds, Mapping) else list(binds)
    if runtime == "charliecloud":
        argv = ["ch-run", *(["--unset-env=*"] if cleanenv else []), "--set-env",
                "-b", f"{os.getcwd()}:{CH_WORKDIR}", "-c", CH_WORKDIR]
        for bind in pairs:
            argv += ["-b", bind]
        for key, value in (env or {}).items():
            argv.append(f"--set-env={key}={value}")
        return argv + [str(image_path), "--"]
    argv = [runtime, "exec", *(["--cleanenv"] if cleanenv else []), *(["--nv"] if gpu else [])]
    for bind in pairs:
        argv += ["--bind", bind]
    for key, value in (env or {}).items():
        argv += ["--env", f"{key}={value}"]
    return argv + [str(image_path)]


def image_digest(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """sha256 hex digest of a file (an image), read in chunks so large SIFs stream."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk_size):
            digest.update(block)
    return digest.hexdigest()


def shell_join(argv: Sequence[str]) -> str:
    """Quote an argv list into one shell command line (for ``shell:`` rules and logs)."""
    return shlex.join([str(arg) for arg in argv])


# what an image's %labels may restrict, each to the values it lists (space-separated): the
# numerics settings (archbench.core.fields.NUMERICS) and the strategy. An image that names none of a
# setting runs every value its frameworks declare (frameworks.Framework.runs).
CAPABILITY_LABELS = (*fields.NUMERICS, "strategy")


def image_frameworks(definition: Definition) -> dict[str, str]:
    """The registered frameworks an image holds, with their versions: those whose module
    (tensorflow, torch) has a version label (``torch 1.13.1`` -> ``{"pytorch": "1.13.1"}``)."""
    return {name: definition.labels[chosen.module] for name, chosen in FRAMEWORKS.items()
            if definition.labels.get(chosen.module)}


def image_lacks(definition: Definition, measurement: Mapping) -> str:
    """Why the image of ``definition`` cannot run the training ``measurement`` (a planned
    measurement: framework, strategy, precision, math_mode, graph) ("" when it can, and
    for kernels): a framework it does not hold (:func:`image_frameworks`), Horovod where it
    has none (no ``horovod`` label), or a value of a :data:`CAPABILITY_LABELS` setting its
    label does not list (Debian's PyTorch 1.13: eager only, no fp32_precision math modes)."""
    if measurement.get("kind", "train") != "train":
        return ""
    held = image_frameworks(definition)
    name = measurement.get("framework") or fields.DEFAULT_FRAMEWORK
    label = FRAMEWORKS[name].label if name in FRAMEWORKS else name
    if name not in held:
        has = ", ".join(f"{FRAMEWORKS[f].label} {v}" for f, v in held.items()) or "none"
        return f"has no {label} (it has: {has})"
    strategy = measurement.get("strategy", "single")
    if strategy == "horovod" and not definition.labels.get("horovod"):
        return f"has no Horovod (strategy horovod; its {label} is {held[name]})"
    defaults = {**fields.NUMERICS_DEFAULTS, "strategy": "single"}
    for key in CAPABILITY_LABELS:
        allowed = definition.labels.get(key, "").split()
        value = measurement.get(key) or defaults[key]
        if allowed and value not in allowed:
            return (f"runs no {key} '{value}' with its {label} {held[name]} "
                    f"(it runs: {', '.join(allowed)})")
    return ""
