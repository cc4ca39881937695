"""Dequantizing every tensor of every fixture with `minfer dump` gives, to float rounding, what llama.cpp's
own Python reader (the `gguf` package, gguf.quants.dequantize) gives for the same bytes."""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize  # noqa: E402

MINFER = os.environ.get("MINFER_BIN", "build/minfer")
MODELS = Path(os.environ.get("MINFER_FIXTURES", "../shared/fixtures")) / "models"


def fixture_models():
    files = sorted(p for p in MODELS.glob("*.gguf") if not p.name.startswith("vocab-"))
    # a split model is dumped through its first part; the reference reads each part
    return [p for p in files if "-split-" not in p.name or "-00001-of-" in p.name]


def reference_tensors(path):
    parts = sorted(path.parent.glob(path.name.replace("-00001-of-", "-*-of-"))) if "-split-" in path.name else [path]
    for part in parts:
        for t in gguf.GGUFReader(part).tensors:
            yield t


@pytest.mark.parametrize("model", fixture_models(), ids=lambda p: p.name)
def test_dequantize_matches_gguf_package(model, tmp_path):
    out = tmp_path / "dump"
    subprocess.run([MINFER, "dump", str(model), "--all", "-o", str(out)], check=True, capture_output=True)
    n = 0
    for t in reference_tensors(model):
        ref = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        ours = np.fromfile(out / f"{t.name}.f32", dtype="<f4")
        assert ours.shape == ref.shape, t.name
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        err = float(np.max(np.abs(ours - ref))) if ref.size else 0.0
        # float rounding only: a few ulps of the tensor's largest value
        assert err <= 4 * np.finfo(np.float32).eps * max(scale, 1e-30), (t.name, t.tensor_type.name, err, scale)
        n += 1
    assert n > 0


def test_dump_summary_and_errors(tmp_path):
    model = MODELS / "mini-qwen2.Q4_K_M.gguf"
    r = subprocess.run([MINFER, "dump", str(model), "blk.1.ffn_down.weight"], capture_output=True, text=True)
    assert r.returncode == 0
    assert "Q6_K [512, 256]" in r.stdout and "rms" in r.stdout
    out = tmp_path / "t.f32"
    r = subprocess.run([MINFER, "dump", str(model), "output_norm.weight", "-o", str(out)], capture_output=True)
    assert r.returncode == 0 and out.stat().st_size == 256 * 4
    r = subprocess.run([MINFER, "dump", str(model), "no.such.tensor"], capture_output=True, text=True)
    assert r.returncode == 1 and "no.such.tensor" in r.stderr
    r = subprocess.run([MINFER, "dump", str(model)], capture_output=True, text=True)
    assert r.returncode == 2
    r = subprocess.run([MINFER, "dump", str(tmp_path / "missing.gguf"), "x"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.startswith("minfer: ")


@pytest.mark.parametrize("qtype,block_bytes", [("IQ4_NL", 18), ("IQ4_XS", 136), ("Q2_K", 84), ("Q3_K", 110)])
def test_dequantize_random_blocks(qtype, block_bytes, tmp_path):
    """Formats without a fixture: random blocks (random bits, a sane fp16 scale) written with the gguf
    package, then `minfer dump` against gguf.quants.dequantize."""
    rng = np.random.default_rng(7)
    rows, nblk = 8, 4
    data = rng.integers(0, 256, size=(rows, nblk, block_bytes), dtype=np.uint8)
    scales = (rng.random((rows, nblk)) * 0.01 + 0.001).astype(np.float16).view(np.uint8).reshape(rows, nblk, 2)
    # d is the first field of IQ4_NL/IQ4_XS blocks and sits at the end of Q2_K (d, dmin) and Q3_K (d)
    if qtype.startswith("IQ4"):
        data[:, :, 0:2] = scales
    elif qtype == "Q2_K":
        data[:, :, 80:82] = scales
        data[:, :, 82:84] = scales
    else:
        data[:, :, 108:110] = scales
    qt = getattr(gguf.GGMLQuantizationType, qtype)
    path = tmp_path / "random.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("blk.0.ffn_up.weight", data.reshape(rows, nblk * block_bytes), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = tmp_path / "out.f32"
    subprocess.run([MINFER, "dump", str(path), "blk.0.ffn_up.weight", "-o", str(out)], check=True)
    t = gguf.GGUFReader(path).tensors[0]
    ref = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
    ours = np.fromfile(out, dtype="<f4")
    assert ours.shape == ref.shape
    assert np.max(np.abs(ours - ref)) <= 4 * np.finfo(np.float32).eps * np.max(np.abs(ref))
