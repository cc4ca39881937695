#!/usr/bin/env bash
# Installs what building and testing minfer needs, from Debian (apt) and PyPI (pip). Idempotent:
# packages already present are not fetched again.
set -euo pipefail

apt_pkgs=(build-essential cmake pkg-config clang libjansson-dev unicode-data python3 python3-pip)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python packages used by the end-to-end tests and reference checks.
py_pkgs=(numpy gguf tokenizers jinja2 pytest)
need_pip=0
for m in numpy gguf tokenizers jinja2 pytest; do
  python3 -c "import $m" 2>/dev/null || need_pip=1
done
if [ $need_pip -eq 1 ]; then
  python3 -m pip install -q "${py_pkgs[@]}" 2>&1 | grep -v -i "running pip as the 'root' user" || true
fi
