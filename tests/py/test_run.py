"""End-to-end tests of `minfer run` and `minfer logits` on the fixture models: streamed generation
and its summary, the `minfer MODEL PROMPT` form, one-line errors, graph exports and traces, and the
logits file layout against llama.cpp's reference."""
import json
import os
import subprocess

import numpy as np
import pytest

BIN = os.environ.get("MINFER_BIN", "build/minfer")
FIX = os.environ.get("MINFER_FIXTURES", os.path.join(os.path.dirname(__file__), "../../../shared/fixtures"))
MODELS = os.path.join(FIX, "models")
QWEN2 = os.path.join(MODELS, "mini-qwen2.Q8_0.gguf")


def run(*args, env=None, stdin=None):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([BIN, *args], capture_output=True, text=True, env=e, input=stdin, timeout=120)


def test_run_greedy_streams_and_summarises():
    r = run("run", QWEN2, "Hello there", "--temp", "0", "-n", "8", "-t", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() != ""
    summary = [l for l in r.stderr.splitlines() if "generated" in l]
    assert len(summary) == 1
    assert "load" in summary[0] and "prompt" in summary[0] and "tokens/s" in summary[0]
    assert "generated 8 tokens" in summary[0]
    # Greedy is deterministic, and `minfer MODEL PROMPT` is the run command.
    r2 = run(QWEN2, "Hello there", "--temp", "0", "-n", "8", "-t", "1")
    assert r2.returncode == 0, r2.stderr
    assert r2.stdout == r.stdout


def test_run_template_raw_system_and_stdin():
    def prompt_tokens(r):
        line = [l for l in r.stderr.splitlines() if "generated" in l][0]
        return int(line.split("prompt ")[1].split(" tokens")[0])

    raw = run("run", QWEN2, "Hello", "--raw", "--temp", "0", "-n", "1")
    chat = run("run", QWEN2, "Hello", "--temp", "0", "-n", "1")
    system = run("run", QWEN2, "Hello", "--system", "You answer in one word.", "--temp", "0", "-n", "1")
    piped = run("run", QWEN2, "--temp", "0", "-n", "1", stdin="Hello")
    for r in (raw, chat, system, piped):
        assert r.returncode == 0, r.stderr
    assert prompt_tokens(raw) >= 1
    assert prompt_tokens(chat) > prompt_tokens(raw)  # the template adds its markers
    assert prompt_tokens(system) != prompt_tokens(chat)  # the Qwen template has a default system prompt
    assert prompt_tokens(piped) == prompt_tokens(chat)


def test_run_kv_f32_and_no_fuse_agree_with_default():
    a = run("run", QWEN2, "Tell me a story", "--temp", "0", "-n", "6", "--kv-type", "f32")
    b = run("run", QWEN2, "Tell me a story", "--temp", "0", "-n", "6", "--kv-type", "f32", "--no-fuse", "--ubatch", "7")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout


def test_run_no_mmap_agrees_with_mapped():
    """--no-mmap reads the weights into memory instead of mapping them: the same reply."""
    a = run("run", QWEN2, "Tell me a story", "--temp", "0", "-n", "6")
    b = run("run", QWEN2, "Tell me a story", "--temp", "0", "-n", "6", "--no-mmap")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout and a.stdout.strip()


@pytest.mark.parametrize(
    "args, message",
    [
        (["/nonexistent/model.gguf", "hi"], "cannot open"),
        ([os.path.join(MODELS, "vocab-qwen3.gguf"), "hi"], "token_embd.weight"),
        ([QWEN2, "hi", "--ctx", "5"], "does not fit the context"),
        ([QWEN2, "hi", "--kv-type", "q8"], "--kv-type"),
    ],
)
def test_run_errors_are_one_line(args, message):
    r = run("run", *args)
    assert r.returncode != 0
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("minfer: ") and message in lines[0]


def test_run_unsupported_architecture(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "bert.gguf"
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = run("run", str(path), "hi")
    assert r.returncode == 1
    assert "architecture 'bert' is not supported" in r.stderr


def test_run_missing_metadata(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "nohp.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = run("run", str(path), "hi")
    assert r.returncode == 1
    assert "'llama.embedding_length' is missing" in r.stderr


def test_graph_exports_and_trace(tmp_path):
    gj, gd, gjd, tr = (tmp_path / n for n in ("g.json", "g.dot", "gd.json", "trace.json"))
    r = run("run", QWEN2, "Hi", "--temp", "0", "-n", "3", "--dump-graph-json", str(gj), "--dump-graph-dot", str(gd),
            env={"MINFER_TRACE": str(tr)})
    assert r.returncode == 0, r.stderr
    g = json.loads(gj.read_text())
    assert g["format"] == "minfer-graph" and g["version"] == 1 and g["kind"] == "prefill"
    ids = {n["id"] for n in g["nodes"]}
    assert len(ids) == g["n_nodes"] and g["output"] in ids
    ops = {n["op"] for n in g["nodes"]}
    assert {"input", "get_rows", "rms_norm", "matmul", "attention", "swiglu", "qkv_rope_store"} <= ops
    for n in g["nodes"]:
        assert all(s in ids for s in n["src"]) and all(s < n["id"] for s in n["src"])
        assert n["backend"] == "CPU"
        if n["op"] == "matmul":
            assert n["weight"]["name"].endswith(".weight") and n["weight"]["type"] == "Q8_0"
    assert gd.read_text().startswith("digraph")
    r = run("run", QWEN2, "Hi", "--temp", "0", "-n", "1", "--dump-graph-json", str(gjd), "--dump-graph-stage", "decode",
            "--no-fuse")
    d = json.loads(gjd.read_text())
    assert d["kind"] == "decode" and "out_ids" not in d["inputs"]
    assert {"rope", "kv_store", "silu", "mul"} <= {n["op"] for n in d["nodes"]}
    t = json.loads(tr.read_text())
    assert t["format"] == "minfer-trace"
    kinds = [run_["kind"] for run_ in t["runs"]]
    assert kinds[0] == "prefill" and kinds[1:] == ["decode", "decode"]
    for run_ in t["runs"]:
        assert run_["logits_top5"][0]["logit"] >= run_["logits_top5"][-1]["logit"]
        for n in run_["nodes"]:
            assert n["nan"] == 0 and n["inf"] == 0 and n["min"] <= n["mean"] <= n["max"]
    assert {n["id"] for n in t["runs"][0]["nodes"]} <= ids


def test_logits_layout_matches_reference(tmp_path):
    out = tmp_path / "l.f32"
    ids = os.path.join(MODELS, "prompt.ids")
    r = run("logits", os.path.join(MODELS, "mini-qwen2.F32.gguf"), "--ids", ids, "-o", str(out), "--all")
    assert r.returncode == 0, r.stderr
    got = np.fromfile(out, dtype="<f4")
    ref = np.fromfile(os.path.join(MODELS, "ref", "mini-qwen2.F32.short.logits.f32"), dtype="<f4")
    assert got.shape == ref.shape == (39 * 4096,)
    assert ((got - ref) ** 2).sum() / (ref ** 2).sum() < 1e-6
    r = run("logits", os.path.join(MODELS, "mini-qwen2.F32.gguf"), "--ids", ids, "-o", str(out))
    assert r.returncode == 0 and np.fromfile(out, dtype="<f4").shape == (4096,)
    bad = tmp_path / "bad.ids"
    bad.write_text("1 2 x")
    r = run("logits", QWEN2, "--ids", str(bad), "-o", str(out))
    assert r.returncode == 1 and "not a list of integers" in r.stderr
    bad.write_text("1 99999")
    r = run("logits", QWEN2, "--ids", str(bad), "-o", str(out))
    assert r.returncode == 1 and "[0, 4096)" in r.stderr
