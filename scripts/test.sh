#!/usr/bin/env bash
# Builds minfer and runs every test: the C tests (ctest) in a release build, the end-to-end tests
# (pytest), then the C tests again in an AddressSanitizer + UndefinedBehaviorSanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)

echo "== release build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
echo "== C tests (release)"
(cd build && ctest --output-on-failure -j"$jobs")

if compgen -G "tests/py/test_*.py" >/dev/null; then
  echo "== end-to-end tests"
  MINFER_BIN="$PWD/build/minfer" MINFER_FIXTURES="$(cd .. && pwd)/shared/fixtures" \
    python3 -m pytest -q tests/py
fi

echo "== C tests (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMINFER_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 MINFER_SANITIZED=1 ctest --output-on-failure -j"$jobs")
echo "all tests passed"
