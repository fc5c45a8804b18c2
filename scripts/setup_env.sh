#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment with every pinned dependency.
# Installs OpenMPI and build tools from Debian packages when run as root; otherwise
# reports what is missing. Idempotent: a finished environment is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${ARCHBENCH_VENV:-.venv}
PY=${PYTHON:-python3}
STAMP="$VENV/.archbench-setup-done"
HASH=$(cat pyproject.toml scripts/setup_env.sh | sha256sum | cut -c1-16)

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ]; then
    exit 0
fi

need_apt=()
command -v mpirun >/dev/null 2>&1 || need_apt+=(openmpi-bin libopenmpi-dev)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++ make)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "setup: installing system packages: ${need_apt[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    else
        echo "setup: missing system packages ${need_apt[*]} (run as root or install them); Horovod/MPI runs will be unavailable" >&2
    fi
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
$PIP install -q --upgrade pip wheel setuptools
$PIP install -q -e '.[test]'
# One Horovod for TensorFlow and PyTorch, CPU collectives only (the GPU images build their
# own), from the 0.28.1 sdist as scripts/horovod_source.sh patches it (every image builds
# from the same script; docs/pinned-versions.md argues each patch).
horovod_ok() {  # horovod.torch imports without its extension (it only prints a warning)
    local fw
    for fw in tensorflow torch; do
        "$VENV/bin/python" -c "import horovod.$fw as h; assert h.mpi_built() and h.gloo_built()" \
            >/dev/null 2>&1 || return 1
    done
}
if command -v mpirun >/dev/null 2>&1 && ! horovod_ok; then
    echo "setup: building Horovod 0.28.1 with TensorFlow, PyTorch, MPI and Gloo (5 to 20 minutes on 2 cores)"
    HVD_TMP=$(mktemp -d)
    trap 'rm -rf "$HVD_TMP"' EXIT
    # an absolute python: pip prepares the sdist's metadata from inside its folder
    HVD_SRC=$(PATH="$(cd "$VENV/bin" && pwd):$PATH" bash scripts/horovod_source.sh "$HVD_TMP" --cpu-torch)
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
    HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=${MAKEFLAGS:--j$(nproc)} \
        $PIP install -q --no-build-isolation "$HVD_SRC"
fi
echo "$HASH" > "$STAMP"
echo "setup: environment ready in $VENV"
