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
# tf_keras without its dependencies: a plain install pulls the full tensorflow wheel.
$PIP install -q --no-deps tf_keras==2.18.0

if command -v mpirun >/dev/null 2>&1 && ! "$VENV/bin/python" -c 'import horovod.tensorflow' 2>/dev/null; then
    echo "setup: building Horovod 0.28.1 with TensorFlow, MPI and Gloo (about 3 minutes)"
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
    HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
        $PIP install -q --no-build-isolation horovod==0.28.1
fi
echo "$HASH" > "$STAMP"
echo "setup: environment ready in $VENV"
