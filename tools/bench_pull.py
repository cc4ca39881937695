#!/usr/bin/env python3
"""bench_pull.py: how fast `minfer pull` fetches one large file from the loopback mock of the
Hugging Face Hub (tests/py/hub_mock.py: API on 127.0.0.1, storage on 127.0.0.2), with 1 and with
several connections (parallel range requests), side by side with curl fetching the same URL into a
file. The storage host may limit each connection's rate (--rate, in MB/s), as CDNs do per
connection; with no limit the numbers say what loopback and the Python mock allow.

  python3 tools/bench_pull.py --minfer build/minfer --size-mb 256 --rate 40 --runs 3

Each run starts from an empty cache (the time includes the SHA-256 check minfer does and curl does
not). Prints one line per tool and connection count: median seconds, MB/s, and the ratio to curl.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
from hub_mock import HubMock  # noqa: E402


def timed(cmd, env):
    t = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stderr))
    return time.monotonic() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minfer", default="build/minfer")
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--rate", type=float, default=40, help="MB/s per storage connection (0: no limit)")
    ap.add_argument("--connections", default="1,2,4,8")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-pull-")
    try:
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        blob = os.path.join(src, "big-Q8_0.gguf")
        with open(blob, "wb") as f:
            for _ in range(a.size_mb):
                f.write(os.urandom(1 << 20))
        size = os.path.getsize(blob)
        mock = HubMock()
        mock.add_repo("bench/big", {"big-Q8_0.gguf": blob})
        mock.rate = a.rate * 1e6 if a.rate > 0 else None
        mock.start()
        url = "%s/bench/big/resolve/main/big-Q8_0.gguf" % mock.url
        base = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        rows = []

        def bench(name, make_cmd):
            ts = []
            for i in range(a.runs):
                out = os.path.join(tmp, "run")
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)
                env = dict(base, HF_ENDPOINT=mock.url, HF_HUB_CACHE=os.path.join(out, "hub"), HOME=out)
                ts.append(timed(make_cmd(out), env))
            rows.append((name, statistics.median(ts)))

        if shutil.which("curl"):
            bench("curl -L (1 connection)", lambda out: ["curl", "-sSfL", "-o", os.path.join(out, "f"), url])
        for c in [int(x) for x in a.connections.split(",")]:
            bench("minfer pull -c %d" % c, lambda out, c=c: [a.minfer, "pull", "-q", "-c", str(c), "hf:bench/big"])
        mock.stop()
        ref = rows[0][1]
        print("file %d MiB, storage limit %s per connection, median of %d runs" %
              (a.size_mb, "%.0f MB/s" % a.rate if a.rate > 0 else "none", a.runs))
        for name, t in rows:
            print("  %-26s %7.2f s  %8.1f MB/s  %5.2fx curl" % (name, t, size / t / 1e6, ref / t))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
