#!/usr/bin/env bash
# Horovod 0.28.1's sdist, downloaded into DIR and patched to build against today's
# TensorFlow and PyTorch; prints the source folder. One script for the host environment
# (scripts/setup_env.sh) and every image (containers/*.def copy it in), so every Horovod
# archbench runs is built from the same source. docs/pinned-versions.md argues each patch:
#  1. C++17 instead of C++14 overall (the fix upstream made after 0.28.1, never released);
#  2. C++20 for the PyTorch extension (torch 2.14 and later headers refuse anything older);
#  3. TensorFlow 2.19 and later (horovod/horovod#4302, following TensorFlow commit
#     9dc8650): XLA's builder header moved to xla/hlo/builder,
#  4. XLA's StatusOr is absl::StatusOr,
#  5. and the XLA headers include highwayhash and farmhash, which the wheel ships under
#     include/external, outside Horovod's include path: added for xla_mpi_ops.cc alone;
#  6. with --cpu-torch only: no CUDA for the PyTorch extension (Horovod adds CUDA support
#     whenever torch is a CUDA build and a CUDA toolkit is found; the CPU builds' collectives
#     run over MPI or Gloo).
# Every pattern must be there: a source that differs stops the build in one line.
set -euo pipefail
DIR=${1:?usage: horovod_source.sh DIR [--cpu-torch]}
CPU_TORCH=${2:-}
SRC="$DIR/horovod-0.28.1"

patch_source() {  # file, BRE, replacement[, sed flags]
    grep -q -- "$2" "$SRC/$1" || { echo "horovod_source: Horovod source not as expected: '$2' not in $1" >&2; exit 1; }
    sed -i "s|$2|$3|${4:-}" "$SRC/$1"
}

python -m pip download -q --no-cache-dir --no-binary :all: --no-deps horovod==0.28.1 -d "$DIR" >&2
tar -xzf "$DIR/horovod-0.28.1.tar.gz" -C "$DIR"
patch_source CMakeLists.txt '^set(CMAKE_CXX_STANDARD 14)$' 'set(CMAKE_CXX_STANDARD 17)'
patch_source horovod/torch/CMakeLists.txt '^\( *\)set(CMAKE_CXX_STANDARD 14)$' '\1set(CMAKE_CXX_STANDARD 20)'
patch_source horovod/tensorflow/xla_mpi_ops.cc \
    '^#include "tensorflow/compiler/xla/client/xla_builder.h"$' \
    '#include "tensorflow/compiler/xla/hlo/builder/xla_builder.h"'
patch_source horovod/tensorflow/xla_mpi_ops.cc '::xla::StatusOr<::xla::XlaOp>' 'absl::StatusOr<::xla::XlaOp>' g
XLA_OPS='${PROJECT_SOURCE_DIR}/horovod/tensorflow/xla_mpi_ops.cc'
patch_source horovod/tensorflow/CMakeLists.txt \
    "^\\(list(APPEND TF_SOURCES \"$XLA_OPS\")\\)\$" \
    "\\1\\nset_source_files_properties(\"$XLA_OPS\" PROPERTIES INCLUDE_DIRECTORIES \"\${Tensorflow_INCLUDE_DIRS}/external/highwayhash;\${Tensorflow_INCLUDE_DIRS}/external/farmhash_archive/src\")"
if [ "$CPU_TORCH" = --cpu-torch ]; then
    patch_source cmake/Modules/FindPytorch.cmake \
        'print(True if ((torch.version.cuda is not None) and (CUDA_HOME is not None)) else False)' 'print(False)'
elif [ -n "$CPU_TORCH" ]; then
    echo "horovod_source: unknown option $CPU_TORCH (only --cpu-torch)" >&2; exit 1
fi
echo "$SRC"
