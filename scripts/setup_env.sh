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
# Then, without their dependencies, the packages pyproject lists under [tool.archbench]
# install-without-deps: tf_keras (a plain install pulls the full tensorflow wheel) and the
# Slurm executor plugin (it declares numpy>=2.4.5, TensorFlow 2.18 needs numpy<2.1, and it
# uses numpy for np.inf alone; pyproject's dependencies carry its other requirements).
# tests/test_slurm_plugin.py checks the versions, the imports and what `pip check` says.
mapfile -t WITHOUT_DEPS < <("$VENV/bin/python" -c 'import tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["tool"]["archbench"]["install-without-deps"]))')
[ ${#WITHOUT_DEPS[@]} -gt 0 ] || { echo "setup: no [tool.archbench] install-without-deps in pyproject.toml" >&2; exit 1; }
$PIP install -q --no-deps "${WITHOUT_DEPS[@]}"

# One Horovod for TensorFlow and PyTorch, CPU collectives only (the GPU image builds its
# own), from the 0.28.1 sdist patched three ways: C++17 instead of C++14 overall (the fix
# upstream made after 0.28.1 and never released), C++20 for the PyTorch extension (torch
# 2.14 headers refuse anything older), and no CUDA for it (Horovod adds CUDA support
# whenever torch is a CUDA build and a CUDA toolkit is found).
patch_source() {  # file, BRE, replacement: the pattern must be there
    grep -q "$2" "$1" || { echo "setup: Horovod source not as expected: '$2' not in ${1#"$HVD_SRC"/}" >&2; exit 1; }
    sed -i "s/$2/$3/" "$1"
}
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
    $PIP download -q --no-binary :all: --no-deps horovod==0.28.1 -d "$HVD_TMP"
    tar -xzf "$HVD_TMP/horovod-0.28.1.tar.gz" -C "$HVD_TMP"
    HVD_SRC="$HVD_TMP/horovod-0.28.1"
    patch_source "$HVD_SRC/CMakeLists.txt" \
        '^set(CMAKE_CXX_STANDARD 14)$' 'set(CMAKE_CXX_STANDARD 17)'
    patch_source "$HVD_SRC/horovod/torch/CMakeLists.txt" \
        '^\( *\)set(CMAKE_CXX_STANDARD 14)$' '\1set(CMAKE_CXX_STANDARD 20)'
    patch_source "$HVD_SRC/cmake/Modules/FindPytorch.cmake" \
        'print(True if ((torch.version.cuda is not None) and (CUDA_HOME is not None)) else False)' 'print(False)'
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
    HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=${MAKEFLAGS:--j$(nproc)} \
        $PIP install -q --no-build-isolation "$HVD_SRC"
fi
echo "$HASH" > "$STAMP"
echo "setup: environment ready in $VENV"
