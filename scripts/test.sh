#!/usr/bin/env bash
# Builds minfer and runs every test: the C tests (ctest) in a release build (on AVX-512 machines
# also with the AVX2 kernels), the end-to-end tests (pytest), the C tests again in an
# AddressSanitizer + UndefinedBehaviorSanitizer build, and on x86-64 an arm64 cross build whose
# kernel and format tests run under qemu (MINFER_SKIP_ARM64=1 skips that stage).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)

echo "== release build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
echo "== C tests (release)"
(cd build && ctest --output-on-failure -j"$jobs")
if grep -qw avx512_vnni /proc/cpuinfo 2>/dev/null; then
  # The AVX-512 kernels serve by default here; the AVX2 ones (and the portable attention) too.
  echo "== C tests (release, MINFER_ISA=avx2)"
  (cd build && MINFER_ISA=avx2 ctest --output-on-failure -j"$jobs")
fi

if compgen -G "tests/py/test_*.py" >/dev/null; then
  echo "== end-to-end tests"
  MINFER_BIN="$PWD/build/minfer" MINFER_FIXTURES="$(cd .. && pwd)/shared/fixtures" \
    python3 -m pytest -q tests/py
fi

echo "== C tests (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMINFER_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 MINFER_SANITIZED=1 ctest --output-on-failure -j"$jobs")
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "== CUDA build (compile and link only; runs where a GPU is present)"
  PATH="$PATH:/usr/local/cuda/bin" cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DMINFER_CUDA=ON >/dev/null
  PATH="$PATH:/usr/local/cuda/bin" cmake --build build-cuda -j"$jobs" --target minfer_cli
  build-cuda/minfer --version
fi

if [ "$(uname -m)" = x86_64 ] && [ "${MINFER_SKIP_ARM64:-0}" != 1 ]; then
  echo "== arm64 build, kernel and format tests under qemu (NEON)"
  bash scripts/cross-arm64.sh -R 'test_(core|simd|simd_models|quant|gguf|gguf_hostile|tok|sample|sample_stop|jinja|model_order)$'
fi
echo "all tests passed"
