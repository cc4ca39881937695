"""`minfer bench` on small models: table and JSON fields, list flags, the per-token byte and MAC
accounting (checked against the GGUF file read by the gguf package), machine-limit sources, errors;
and tools/mkmodel.py's files loading in both readers. No timing assertions."""
import json
import os
import subprocess
import sys

import gguf
import numpy as np
import pytest

BIN = os.environ.get("MINFER_BIN", "build/minfer")
FIX = os.environ.get("MINFER_FIXTURES", os.path.join(os.path.dirname(__file__), "../../../shared/fixtures"))
SRC = os.environ.get("MINFER_SOURCE", os.path.join(os.path.dirname(__file__), "../.."))
MODEL = os.path.join(FIX, "models", "mini-qwen2.Q4_0.gguf")
LIMITS = ["--mem-bw", "50", "--peak-gmacs", "800"]  # skip the probes where they are not under test


def bench(*args, env=None):
    e = dict(os.environ)
    e.pop("MINFER_MEM_BW", None)
    e.pop("MINFER_PEAK_GMACS", None)
    e.update(env or {})
    return subprocess.run([BIN, "bench", *args], capture_output=True, text=True, timeout=120, env=e)


def bench_json(*args, env=None):
    r = bench(*args, "--json", env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def table_rows(out):
    lines = [l for l in out.splitlines() if l.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return head, [dict(zip(head, (c.strip() for c in l.strip("|").split("|")))) for l in lines[2:]]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tied and an untied model from tools/mkmodel.py, small enough to write in a moment."""
    d = tmp_path_factory.mktemp("bench")
    paths = {}
    for tied in (True, False):
        p = str(d / f"tiny-{'tied' if tied else 'untied'}.gguf")
        subprocess.run([sys.executable, os.path.join(SRC, "tools", "mkmodel.py"), "--shape", "tiny",
                        "--tied" if tied else "--no-tied", p], check=True, capture_output=True)
        paths[tied] = p
    return paths


def test_markdown_table():
    r = bench(MODEL, "-p", "8", "-n", "4", "-r", "1", "-t", "1", *LIMITS)
    assert r.returncode == 0, r.stderr
    head, rows = table_rows(r.stdout)
    assert head == ["model", "size", "params", "backend", "threads", "test", "t/s", "achieved", "peak RSS"]
    assert [row["test"] for row in rows] == ["pp8", "tg4"]
    for row in rows:
        assert row["model"].startswith("qwen2 ") and row["model"].endswith("Q4_0"), row
        assert row["backend"] == "CPU" and row["threads"] == "1"
        mean, sd = (float(x) for x in row["t/s"].split("±"))
        assert mean > 0 and sd == 0  # one repetition: no deviation
        assert row["peak RSS"].endswith("MiB")
    assert rows[0]["achieved"].endswith("%)") and "GMAC/s" in rows[0]["achieved"]
    assert "GB/s" in rows[1]["achieved"]
    assert "limits, 1 thread: memory read 50.0 GB/s (flag), int8 800 GMAC/s (flag)" in r.stdout


def test_json_fields_and_statistics():
    tests = bench_json(MODEL, "-p", "8", "-n", "4", "-r", "3", "-t", "1", *LIMITS)
    assert [t["test"] for t in tests] == ["pp8", "tg4"]
    size = os.path.getsize(MODEL)
    for t in tests:
        assert t["model_filename"] == MODEL and t["backends"] == "CPU" and t["n_threads"] == 1
        assert 0 < t["model_size"] < size
        assert len(t["samples_ns"]) == len(t["samples_ts"]) == 3
        n_tok = t["n_prompt"] + t["n_gen"]
        ts = [n_tok * 1e9 / ns for ns in t["samples_ns"]]
        assert t["samples_ts"] == pytest.approx(ts, rel=1e-4)  # samples_ns are whole nanoseconds
        assert t["avg_ts"] == pytest.approx(np.mean(ts), rel=1e-4)
        assert t["stddev_ts"] == pytest.approx(np.std(ts, ddof=1), rel=1e-2, abs=1e-3)
        assert t["achieved_gbs"] == pytest.approx(t["bytes_per_token"] * t["avg_ts"] / 1e9, rel=1e-6)
        # a prompt computes the output projection (macs_output of macs_per_token) for its last token only
        assert 0 < t["macs_output"] < t["macs_per_token"]
        macs = t["macs_per_token"]
        if t["n_prompt"]:
            macs += t["macs_output"] / t["n_prompt"] - t["macs_output"]
        assert t["achieved_gmacs"] == pytest.approx(macs * t["avg_ts"] / 1e9, rel=1e-6)
        assert t["mem_bw_gbs"] == 50 and t["mem_bw_source"] == "flag"
        assert t["peak_gmacs"] == 800 and t["peak_gmacs_source"] == "flag"
        assert t["peak_rss_bytes"] > t["bytes_per_token"] // 2  # the weights were read, so they are resident
        assert t["pages"] == "n/a"  # under one 2 MiB page of data: nothing for the page cache check to do
    assert (tests[0]["n_prompt"], tests[0]["n_gen"], tests[1]["n_prompt"], tests[1]["n_gen"]) == (8, 0, 0, 4)
    assert tests[0]["isa"] in ("avx512-vnni", "avx2", "neon-dotprod", "scalar") and "cpu_info" in tests[0]
    t = bench_json(MODEL, "-p", "0", "-n", "1", "-r", "1", "-t", "1", *LIMITS, env={"MINFER_ISA": "scalar"})[0]
    assert t["isa"] == "scalar"


@pytest.mark.parametrize("tied", [True, False])
def test_bytes_and_macs_per_token(tiny, tied):
    """Decode reads every weight except the embedding table (one row), unless the table is also the
    output projection; MACs are those of the 2-D weights among them."""
    path = tiny[tied]
    t = bench_json(path, "-p", "0", "-n", "2", "-r", "1", "-t", "1", *LIMITS)[0]
    rd = gguf.GGUFReader(path)
    total = sum(int(x.n_bytes) for x in rd.tensors)
    emb = next(x for x in rd.tensors if x.name == "token_embd.weight")
    assert ("output.weight" in [x.name for x in rd.tensors]) == (not tied)
    counted = [x for x in rd.tensors if tied or x.name != "token_embd.weight"]
    assert t["model_size"] == total
    assert t["model_n_params"] == sum(int(x.n_elements) for x in rd.tensors)
    assert t["bytes_per_token"] == (total if tied else total - int(emb.n_bytes))
    assert t["macs_per_token"] == sum(int(x.n_elements) for x in counted if len(x.shape) == 2)
    assert t["model_type"] == "qwen2 0.2M F16"


def test_lists_and_repeated_flags(tiny):
    a = bench_json("-m", f"{MODEL},{tiny[True]}", "-p", "4,8", "-n", "2", "-t", "1,2", "-r", "1", *LIMITS)
    b = bench_json(MODEL, tiny[True], "-p", "4", "-p", "8", "-n", "2", "-t", "1", "-t", "2", "-r", "1", *LIMITS)
    key = lambda t: (t["model_filename"], t["n_threads"], t["test"])
    want = [(m, th, te) for m in (MODEL, tiny[True]) for th in (1, 2) for te in ("pp4", "pp8", "tg2")]
    assert [key(t) for t in a] == want
    assert [key(t) for t in b] == want
    c = bench_json(f"{MODEL},{tiny[True]}", "-p", "4,8", "-n", "2", "-t", "1,2", "-r", "1", *LIMITS)
    assert [key(t) for t in c] == want


def test_depth():
    """-d: each test after that many tokens of context, named as llama-bench names it ("pp8 @ d40"),
    every prompt and generation length at every depth; the timed runs start from exactly the depth's
    cells (the fill is kept, what a run added is dropped before the next)."""
    r = bench(MODEL, "-p", "8", "-n", "4", "-d", "0,40", "-r", "2", "-t", "1", *LIMITS)
    assert r.returncode == 0, r.stderr
    head, rows = table_rows(r.stdout)
    assert [row["test"] for row in rows] == ["pp8", "pp8 @ d40", "tg4", "tg4 @ d40"]
    tests = bench_json(MODEL, "-p", "8", "-n", "4", "-d", "40", "-d", "100", "-r", "2", "-t", "1", "-ub", "16",
                       *LIMITS)
    assert [(t["test"], t["n_depth"], t["n_prompt"], t["n_gen"]) for t in tests] == [
        ("pp8 @ d40", 40, 8, 0), ("pp8 @ d100", 100, 8, 0), ("tg4 @ d40", 40, 0, 4), ("tg4 @ d100", 100, 0, 4)]
    assert [t["n_cells_start"] for t in tests] == [40, 100, 40, 100]
    assert all(len(t["samples_ns"]) == 2 for t in tests)
    t = bench_json(MODEL, "-p", "8", "-n", "0", "-r", "1", "-t", "1", *LIMITS)[0]
    assert (t["test"], t["n_depth"], t["n_cells_start"]) == ("pp8", 0, 0)
    r = bench(MODEL, "-d", "-1", *LIMITS)
    assert r.returncode == 2 and "-d" in r.stderr


def test_parallel_sequences():
    """-np: P sequences at once, as llama-batched-bench ("pp8 x3", "tg4 x3 @ d40"), in that order
    among the depths; each sequence has its own depth context, so a run starts from P * D cells;
    t/s counts every sequence's tokens, GB/s the weights once per step; bad counts refused."""
    r = bench(MODEL, "-p", "8", "-n", "4", "-np", "1,3", "-d", "0,40", "-r", "1", "-t", "1", *LIMITS)
    assert r.returncode == 0, r.stderr
    head, rows = table_rows(r.stdout)
    assert [row["test"] for row in rows] == ["pp8", "pp8 x3", "pp8 @ d40", "pp8 x3 @ d40",
                                             "tg4", "tg4 x3", "tg4 @ d40", "tg4 x3 @ d40"]
    tests = bench_json(MODEL, "-p", "0", "-n", "4", "-np", "3", "-d", "40", "-r", "2", "-t", "1", *LIMITS)
    assert len(tests) == 1
    t = tests[0]
    assert (t["test"], t["n_par"], t["n_depth"], t["n_cells_start"]) == ("tg4 x3 @ d40", 3, 40, 120)
    for ns, ts in zip(t["samples_ns"], t["samples_ts"]):
        assert ts == pytest.approx(3 * 4 * 1e9 / ns, rel=1e-4)  # ns are whole numbers
    assert t["achieved_gbs"] == pytest.approx(t["bytes_per_token"] * t["avg_ts"] / 3 / 1e9, rel=1e-6)
    one = bench_json(MODEL, "-p", "0", "-n", "4", "-r", "1", "-t", "1", *LIMITS)[0]
    assert one["n_par"] == 1 and one["test"] == "tg4"
    for bad in ("0", "65", "x"):
        r = bench(MODEL, "-np", bad, *LIMITS)
        assert r.returncode == 2 and "-np" in r.stderr


def test_ubatch_column_and_zero_lengths():
    r = bench(MODEL, "-p", "16", "-n", "0", "-ub", "4,16", "-r", "1", "-t", "1", *LIMITS)
    assert r.returncode == 0, r.stderr
    head, rows = table_rows(r.stdout)
    assert "n_ubatch" in head
    assert [(row["n_ubatch"], row["test"]) for row in rows] == [("4", "pp16"), ("16", "pp16")]


def test_limits_from_env_and_probe():
    t = bench_json(MODEL, "-p", "0", "-n", "1", "-r", "1", "-t", "1", "--peak-gmacs", "800",
                   env={"MINFER_MEM_BW": "12.5"})[0]
    assert t["mem_bw_gbs"] == 12.5 and t["mem_bw_source"] == "env"
    # The probes (a child process each time, so they do not count in the benchmark's RSS).
    t = bench_json(MODEL, "-p", "0", "-n", "1", "-r", "1", "-t", "1")[0]
    assert t["mem_bw_source"] == "probe" and t["mem_bw_gbs"] > 0.1
    assert t["peak_gmacs_source"] == "probe"
    if t["peak_gmacs_isa"] != "none":
        assert t["peak_gmacs"] > 0.1
    assert t["peak_rss_bytes"] < 200 * 2**20


def test_mmap_off_reads_the_model():
    mapped = bench_json(MODEL, "-p", "8", "-n", "2", "-r", "1", "-t", "1", *LIMITS)
    read = bench_json(MODEL, "-p", "8", "-n", "2", "-r", "1", "-t", "1", "-mmp", "0", *LIMITS)
    assert [t["test"] for t in read] == ["pp8", "tg2"]
    assert [t["bytes_per_token"] for t in read] == [t["bytes_per_token"] for t in mapped]
    assert all(t["avg_ts"] > 0 for t in read)
    assert {t["pages"] for t in read} == {"read"}


def test_page_cache_state_of_a_large_file(tmp_path):
    """A model with whole 2 MiB pages of data reports how the page cache held it: a file just copied in
    4 KiB writes is dropped and read back in 2 MiB pages ("reloaded", where the system has them), and
    the next load finds it "huge"; where files get no 2 MiB pages, both loads say "small" ("n/a" without
    transparent huge pages)."""
    src = os.path.join(FIX, "models", "mini-qwen2.F32.gguf")
    dst = tmp_path / "copy.gguf"
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        while chunk := fi.read(4096):
            fo.write(chunk)
            fo.flush()
    args = ("-p", "0", "-n", "2", "-r", "1", "-t", "1", *LIMITS)
    first = bench_json(str(dst), *args)[0]["pages"]
    second = bench_json(str(dst), *args)[0]["pages"]
    assert (first, second) in {("reloaded", "huge"), ("small", "small"), ("n/a", "n/a")}, (first, second)


def test_errors():
    r = bench()
    assert r.returncode == 2 and "usage: minfer bench" in r.stderr
    r = bench(MODEL, "-p", "x")
    assert r.returncode == 2 and r.stderr.startswith("minfer:") and "-p" in r.stderr
    r = bench(MODEL, "-o", "csv")
    assert r.returncode == 2 and "csv" in r.stderr
    r = bench(MODEL, "-mmp", "2")
    assert r.returncode == 2 and "--mmap" in r.stderr and "'2'" in r.stderr
    r = bench(MODEL, "--frobnicate")
    assert r.returncode == 2 and "--frobnicate" in r.stderr
    r = bench("/nonexistent/model.gguf", *LIMITS)
    assert r.returncode == 1 and "/nonexistent/model.gguf" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


FAKE_PEER = """#!/usr/bin/env python3
# llama-bench stand-in: minfer bench once per -fa value, each row tagged with flash_attn; fa 1 reports
# twice the tokens/s of one and the same run (not a second, differently timed one), so it is the better
# setting by exactly 2x.
import json, subprocess, sys
args = sys.argv[1:]
fa = ["0"]
if "-fa" in args:
    i = args.index("-fa")
    fa = args[i + 1].split(",")
    del args[i:i + 2]
rows = []
out = subprocess.run([%r, "bench", "--mem-bw", "50", "--peak-gmacs", "800", *args], check=True,
                     capture_output=True, text=True).stdout
for v in fa:
    for t in json.loads(out):
        t["flash_attn"] = int(v)
        t["cpu_info"] = "stand-in CPU"
        t["build_commit"] = "abc1234"
        if v == "1":
            t["samples_ts"] = [2 * x for x in t["samples_ts"]]
        rows.append(t)
print(json.dumps(rows))
"""


def test_compare_script_depths_isa_and_flash_attention(tmp_path):
    """compare_llama.py -d passes the depths to both programs, --isa and --order set MINFER_ISA and
    MINFER_ORDER for minfer only,
    --llama-fa 0,1 compares against llama.cpp's better setting; the header names the CPU and kernels."""
    peer = tmp_path / "fake-llama-bench"
    peer.write_text(FAKE_PEER % os.path.abspath(BIN))
    peer.chmod(0o755)
    out_json = tmp_path / "t.json"
    r = subprocess.run([sys.executable, os.path.join(SRC, "tools", "compare_llama.py"), "--minfer", BIN,
                        "--llama-bench", str(peer), "--model", MODEL, "-p", "8", "-n", "4", "-d", "0,20", "-t", "1",
                        "-r", "1", "--rounds", "1", "--mem-bw", "50", "--peak-gmacs", "800", "--isa", "scalar",
                        "--order", "fast", "--llama-fa", "0,1", "--llama-label", "test build", "--json", str(out_json)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    head, rows = table_rows(r.stdout)
    assert [row["test"] for row in rows] == ["pp8", "pp8 @ d20", "tg4", "tg4 @ d20"]
    assert head[-1] == "llama.cpp fa" and all(row["llama.cpp fa"] == "1 (best of 0,1)" for row in rows)
    res = json.load(open(out_json))["results"][MODEL]
    for row in rows:
        ll = res["llama.cpp"]["tests"][row["test"]]
        assert ll["row"]["isa"] != "scalar" or os.environ.get("MINFER_ISA") == "scalar"  # the peer runs without it
        assert res["minfer"]["tests"][row["test"]]["row"]["isa"] == "scalar"
        assert float(row["llama.cpp t/s"].split("±")[0]) == pytest.approx(np.mean(ll["by_fa"]["1"]), rel=0.01)
        assert np.mean(ll["by_fa"]["1"]) == pytest.approx(2 * np.mean(ll["by_fa"]["0"]), rel=1e-6)
    hdr = next(l for l in r.stdout.splitlines() if l.startswith("CPU: "))
    assert "minfer kernels: scalar (MINFER_ISA=scalar)" in hdr and "float order: fast (MINFER_ORDER)" in hdr
    assert "llama.cpp: test build, build abc1234" in hdr and "its CPU: stand-in CPU" in hdr


def test_mkmodel_files_read_back(tiny):
    """Both GGUF readers accept the synthetic files; the shape and vocabulary are what was asked for."""
    rd = gguf.GGUFReader(tiny[False])
    f = {k: v.contents() for k, v in rd.fields.items() if not k.startswith("tokenizer.ggml.")}
    assert f["general.architecture"] == "qwen2" and f["qwen2.embedding_length"] == 64
    assert f["qwen2.block_count"] == 2 and f["qwen2.attention.head_count_kv"] == 2
    toks = rd.fields["tokenizer.ggml.tokens"].contents()
    merges = rd.fields["tokenizer.ggml.merges"].contents()
    assert len(toks) == 1024 and len(set(toks)) == 1024
    assert len(merges) == 1024 - 256 - 3
    for m in merges[:50] + merges[-50:]:  # each merge joins two existing tokens into a token
        a, b = m.split(" ")
        assert a in toks and b in toks and a + b in toks
    out = next(x for x in rd.tensors if x.name == "output.weight")
    assert list(out.shape) == [64, 1024] and out.tensor_type == gguf.GGMLQuantizationType.F16
    r = subprocess.run([BIN, "tokenize", tiny[False], "hello"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_compare_script_with_stand_in_peer(tmp_path):
    """tools/compare_llama.py end to end on a fixture, with `minfer bench` standing in for llama-bench
    (it takes the same flags and prints the same JSON fields), so the ratio and RSS columns are filled."""
    peer = tmp_path / "fake-llama-bench"
    peer.write_text(f'#!/bin/sh\nexec "{os.path.abspath(BIN)}" bench --mem-bw 50 --peak-gmacs 800 "$@"\n')
    peer.chmod(0o755)
    out_md, out_json = tmp_path / "t.md", tmp_path / "t.json"
    r = subprocess.run([sys.executable, os.path.join(SRC, "tools", "compare_llama.py"), "--minfer", BIN,
                        "--llama-bench", str(peer), "--model", MODEL, "-p", "8", "-n", "4", "-t", "1", "-r", "1",
                        "--rounds", "2", "--mem-bw", "50", "--peak-gmacs", "800", "--out", str(out_md),
                        "--json", str(out_json)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    head, rows = table_rows(r.stdout)
    assert head[:5] == ["model", "test", "minfer t/s", "llama.cpp t/s", "ratio"]
    assert [row["test"] for row in rows] == ["pp8", "tg4"]
    d = json.load(open(out_json))
    res = d["results"][MODEL]
    for row in rows:
        mf = res["minfer"]["tests"][row["test"]]["samples"]
        ll = res["llama.cpp"]["tests"][row["test"]]["samples"]
        assert len(mf) == len(ll) == 2  # one repetition in each of two rounds
        assert float(row["ratio"].rstrip("x")) == pytest.approx(np.mean(mf) / np.mean(ll), rel=0.01)
        assert float(row["ratio of best"].rstrip("x")) == pytest.approx(max(mf) / max(ll), rel=0.01)
        assert row["minfer peak RSS"].endswith("MiB") and row["llama.cpp peak RSS"].endswith("MiB")
    assert res["minfer"]["rss"] > 1 << 20 and res["llama.cpp"]["rss"] > 1 << 20
    assert f"Page cache of each file after the untimed first load" in r.stdout
    assert f"{os.path.basename(MODEL)}: n/a" in r.stdout and d["results"][MODEL]["pages"] == "n/a"
    assert open(out_md).read().strip() == r.stdout.strip()
    # The table again from the JSON alone.
    r2 = subprocess.run([sys.executable, os.path.join(SRC, "tools", "compare_llama.py"), "--from-json", str(out_json)],
                        capture_output=True, text=True, timeout=60)
    assert r2.returncode == 0 and r2.stdout.strip() == r.stdout.strip(), r2.stderr
