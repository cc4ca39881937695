#!/usr/bin/env bash
# Installs what building and testing minfer needs, from Debian (apt) and PyPI (pip). Idempotent:
# packages already present are not fetched again.
set -euo pipefail

# clang: the second compiler and the fuzz builds; libclang-rt-dev: its sanitizer and libFuzzer runtimes
# (libclang_rt.fuzzer*.a, in libclang-rt-14-dev for Debian 12's clang 14), only recommended by clang.
# nginx-light: the server tests start their own nginx (own config, loopback) in front of two servers.
apt_pkgs=(build-essential cmake pkg-config clang libclang-rt-dev libjansson-dev libmicrohttpd-dev unicode-data python3 python3-pip nginx-light)
# libcurl4-openssl-dev and libssl-dev: src/hub (HTTP downloads; SHA-256 from OpenSSL's libcrypto).
apt_pkgs+=(libcurl4-openssl-dev libssl-dev)
# `minfer chat`: libedit for line editing and history, libxxhash for the session files' checksums,
# tmux for the REPL tests that drive a real terminal.
apt_pkgs+=(libedit-dev libxxhash-dev tmux)
# `minfer viz`: Graphviz's libgvc lays the graph out; tests/py/test_viz.py drives the page in a
# headless Chromium through chromedriver (selenium). node-dagre-layout: dagre 0.8.5, the page's own
# layout engine (offline, and where Graphviz is not at hand), embedded at build time from its installed
# dist/dagre.min.js with its licence (never copied into the repository).
apt_pkgs+=(libgraphviz-dev chromium chromium-driver node-dagre-layout)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python packages used by the end-to-end tests and reference checks (openai: the official client,
# against `minfer serve`). A system Python that refuses
# pip installs (PEP 668, "externally managed") gets them with --break-system-packages; they are
# ordinary PyPI packages that Debian does not ship.
py_pkgs=(numpy gguf tokenizers jinja2 pytest openai)
# huggingface_hub: tests/py/test_hub*.py check that its cache and minfer's are one (both ways).
py_pkgs+=(huggingface_hub)
# pexpect: tests/py/test_chat.py drives the REPL through a pseudo-terminal.
py_pkgs+=(pexpect)
# selenium: tests/py/test_viz.py drives Chromium.
py_pkgs+=(selenium)
missing_py() {
  local m out=()
  for m in numpy gguf tokenizers jinja2 pytest openai huggingface_hub pexpect selenium; do python3 -c "import $m" 2>/dev/null || out+=("$m"); done
  echo "${out[@]:-}"
}
if [ -n "$(missing_py)" ]; then
  python3 -m pip --version >/dev/null 2>&1 || python3 -m ensurepip --upgrade >/dev/null 2>&1 || true
  python3 -m pip install -q "${py_pkgs[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${py_pkgs[@]}"
  still=$(missing_py)
  if [ -n "$still" ]; then
    echo "deps: could not install the Python packages: $still (python3 is $(command -v python3))" >&2
    exit 1
  fi
fi
