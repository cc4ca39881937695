"""End-to-end tests of `minfer tokenize` against Hugging Face tokenizers (the Qwen3 tokenizer.json)."""
import json
import os
import subprocess
import sys

import pytest

BIN = os.environ.get("MINFER_BIN", "build/minfer")
FIX = os.environ.get("MINFER_FIXTURES", "../shared/fixtures")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN3 = os.path.join(FIX, "models", "vocab-qwen3.gguf")
QWEN25 = os.path.join(FIX, "models", "vocab-qwen2.5.gguf")

TEXTS = [
    "Hello world",
    "  indented code:\n\tif (x) {\n\t\treturn 1;\n\t}\n",
    "Caf\u0065\u0301 cre\u0300me \u212b \uac00\u11a8 \u1100\u1161",  # decomposed and singleton forms
    "数字 1234567 and ٣٤٥ and ｆｕｌｌ　ｗｉｄｔｈ",
    "😶‍🌫️👨‍👩‍👧 🇯🇵 1️⃣ don't WE'LL 'ſ",
    "<|im_start|>user\nhi<|im_end|>\n<think>\n</think>",
    "trailing spaces   \n\n\n   ",
]


@pytest.fixture(scope="module")
def hf():
    tokenizers = pytest.importorskip("tokenizers")
    path = os.path.join(FIX, "tokenizers", "qwen3", "tokenizer.json")
    tok = tokenizers.Tokenizer.from_file(path)
    plain = tokenizers.Tokenizer.from_file(path)
    plain.encode_special_tokens = True
    return tok, plain


def run(*args, stdin=None):
    return subprocess.run([BIN, "tokenize", *args], input=stdin, capture_output=True)


def ids_of(*args, stdin=None):
    r = run(*args, "--ids", stdin=stdin)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert out.count("\n") == 1 and out.startswith("[")
    return json.loads(out)


@pytest.mark.parametrize("text", TEXTS)
def test_ids_match_hf(hf, text):
    tok, plain = hf
    assert ids_of(QWEN3, text) == tok.encode(text, add_special_tokens=False).ids
    assert ids_of(QWEN25, text) == tok.encode(text, add_special_tokens=False).ids
    assert ids_of(QWEN3, text, "--no-special") == plain.encode(text, add_special_tokens=False).ids


def test_stdin_and_file_take_exact_bytes(hf, tmp_path):
    tok, _ = hf
    text = "line one\r\nline two\n\n  end \n"
    data = text.encode()
    expected = tok.encode(text, add_special_tokens=False).ids
    assert ids_of(QWEN3, "-", stdin=data) == expected
    p = tmp_path / "t.txt"
    p.write_bytes(data)
    assert ids_of(QWEN3, "--file", str(p)) == expected
    # Bytes that are not UTF-8 still tokenize (byte by byte) and come back exactly.
    raw = b"ok \xff\xfe \xe4\xb8 end"
    p.write_bytes(raw)
    r = run(QWEN3, "--file", str(p), "--json")
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)
    got = b"".join(bytes(i["bytes"]) if "bytes" in i else i["piece"].encode() for i in items)
    assert got == raw


def test_json_and_default_output(hf):
    tok, _ = hf
    text = "Hi 🦙<|im_end|>"
    r = run(QWEN3, text, "--json")
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)
    assert [i["id"] for i in items] == tok.encode(text, add_special_tokens=False).ids
    got = b"".join(bytes(i["bytes"]) if "bytes" in i else i["piece"].encode() for i in items)
    assert got == text.encode()
    assert any("bytes" in i for i in items)  # the llama emoji is split inside its UTF-8 bytes
    assert items[-1]["piece"] == "<|im_end|>"
    r = run(QWEN3, "Hello world")
    assert r.returncode == 0
    lines = r.stdout.decode().splitlines()
    assert lines == ["  9707 -> 'Hello'", "  1879 -> ' world'"]


def test_model_file_and_errors(tmp_path):
    # A model file with a cut vocabulary (4,096 ids): everything still round-trips.
    r = run(os.path.join(FIX, "models", "mini-qwen2.Q8_0.gguf"), "Hello world<|im_end|>", "--json")
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)
    assert all(i["id"] < 4096 for i in items) and items[-1]["id"] == 4066
    assert "".join(i["piece"] for i in items) == "Hello world<|im_end|>"
    r = run(str(tmp_path / "missing.gguf"), "x")
    assert r.returncode == 1 and r.stderr.decode().count("\n") == 1 and b"missing.gguf" in r.stderr
    assert run(QWEN3).returncode == 2
    assert run(QWEN3, "x", "--bogus").returncode == 2
    assert run(QWEN3, "--bogus", "x").returncode == 2
    r = run(QWEN3, "--ids", "--", "--bogus")
    assert r.returncode == 0 and json.loads(r.stdout) == ids_of(QWEN3, "-", stdin=b"--bogus")
    assert run(QWEN3, "x", "--file").returncode == 2


def test_bench_script_runs(tmp_path):
    pytest.importorskip("tokenizers")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_tokenizer.py"), "--minfer", BIN,
                        "--fixtures", FIX, "--size", "60000", "--runs", "1"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ids identical: True" in r.stdout and "ratio" in r.stdout
