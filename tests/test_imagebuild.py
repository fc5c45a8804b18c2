"""Unit tests of archbench.execute.imagebuild's pure parts: the Debian base a definition maps to,
the host's mirror, build arguments. (The real builds: tests/test_image_build.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from archbench.execute import imagebuild as b
from archbench.plan.containers import parse_definition

REPO = Path(__file__).resolve().parents[1]


def test_shipped_bases_map_to_debian():
    for name, debarch in [("x86_64-onednn", "amd64"), ("aarch64-acl", "arm64"),
                          ("aarch64-armpl", "arm64")]:
        assert b.debian_base(parse_definition(REPO / f"containers/{name}.def")) == ("bookworm", debarch)


def test_a_debian_base_is_debootstrap_without_a_venv(tmp_path):
    """From: debian:<release>: Debian's python3 and its packages as they are (ppc64le-debian
    installs PyTorch with apt), no /usr/local venv that would hide them."""
    d = parse_definition(REPO / "containers/ppc64le-debian.def")
    assert b.debian_base(d) == ("bookworm", "ppc64el") and not b.python_venv(d)
    assert b.python_venv(parse_definition(REPO / "containers/x86_64-onednn.def"))
    with pytest.raises(b.BuildError, match="Debian trixie is not supported here"):
        b.debian_base(_def(tmp_path, "Bootstrap: docker\nFrom: debian:trixie\n%labels\n    arch x86_64\n"))


@pytest.mark.parametrize("name, base", [("ppc64le-vanilla", "condaforge/miniforge3:"),
                                        ("x86_64-cuda", "nvidia/cuda:12.5.1-devel-ubuntu22.04"),
                                        ("x86_64-cuda-pytorch", "nvidia/cuda:13.0.2-devel-ubuntu22.04")])
def test_unbuildable_base_is_one_line(name, base):
    with pytest.raises(b.BuildError, match=rf"^{name}\.def: From: '{base}") as err:
        b.debian_base(parse_definition(REPO / f"containers/{name}.def"))
    assert "\n" not in str(err.value)


def _def(tmp_path, text):
    path = tmp_path / "x.def"
    path.write_text(text)
    return parse_definition(path)


def test_base_python_must_be_the_releases(tmp_path):
    d = _def(tmp_path, "Bootstrap: docker\nFrom: python:3.12-slim-bookworm\n%labels\n    arch x86_64\n")
    with pytest.raises(b.BuildError, match="Debian bookworm does not ship Python 3.12"):
        b.debian_base(d)


def test_host_mirror_reads_one_line_and_deb822_sources(tmp_path):
    one_line = tmp_path / "sources.list"
    one_line.write_text("# comment\ndeb [arch=amd64] http://mirror.example/debian-security bookworm-security main\n"
                        "deb http://mirror.example/debian bookworm main\n")
    assert b.host_mirror("bookworm", [one_line]) == "http://mirror.example/debian"
    deb822 = tmp_path / "debian.sources"
    deb822.write_text("Types: deb\nURIs: http://a.example/debian\nSuites: bookworm bookworm-updates\n"
                      "Components: main\n\nTypes: deb\nURIs: http://a.example/debian-security\n"
                      "Suites: bookworm-security\nComponents: main\n")
    assert b.host_mirror("bookworm", [deb822]) == "http://a.example/debian"
    with pytest.raises(b.BuildError, match="no apt source for Debian trixie"):
        b.host_mirror("trixie", [one_line, deb822])


def test_build_arguments_default_override_and_substitute():
    d = parse_definition(REPO / "containers/aarch64-acl.def")
    assert b.build_args(d, {}) == {"HOROVOD": "1"}
    args = b.build_args(d, {"HOROVOD": "0"})
    post = b.substitute(d.sections["post"], args, "post")
    assert 'if [ "0" = 1 ]; then' in post and "{{" not in post
    with pytest.raises(b.BuildError, match="build argument MPI is not declared"):
        b.build_args(d, {"MPI": "0"})
    with pytest.raises(b.BuildError, match=r"x: \{\{ NOPE \}\} has no value"):
        b.substitute("echo {{ NOPE }}", args, "x")


def test_the_cli_refuses_without_root(monkeypatch, capsys):
    monkeypatch.setattr(b.os, "geteuid", lambda: 1000)
    assert b.main(["containers/x86_64-onednn.def", "out.sqfs"]) == 2
    assert "must run as root" in capsys.readouterr().err
