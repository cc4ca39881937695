#!/usr/bin/env bash
# Builds minfer (release, -O3, CPU features chosen at run time) into build/. Extra arguments go to
# cmake, e.g. scripts/build.sh -DMINFER_CUDA=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
