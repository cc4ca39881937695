"""`minfer quantize` end to end: with --pure every plain type from the F32 fixtures gives llama.cpp's
fixture file byte for byte (those fixtures are llama-quantize --pure output), and Q4_K_M without it; by
default every file type follows llama-quantize's per-tensor rules (types as llama-quantize chose them
on these models, bytes equal to the fixtures' tensors of the same type); --output-tensor-type and
--token-embedding-type; the Q4_K_M mixture for all three architectures, threads, F16 input, atomic
output (failures and SIGINT leave nothing under OUT's name), and bad arguments."""
import functools
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize  # noqa: E402

MINFER = os.environ.get("MINFER_BIN", "build/minfer")
MODELS = Path(os.environ.get("MINFER_FIXTURES", "../shared/fixtures")) / "models"
PURE_FIXTURES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"]
LLAMA_FTYPE = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10, "Q3_K_S": 11,
               "Q3_K": 12, "Q3_K_M": 12, "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K": 15, "Q4_K_M": 15, "Q5_K_S": 16,
               "Q5_K": 17, "Q5_K_M": 17, "Q6_K": 18, "BF16": 32}

# What llama-quantize (without --pure) chose for the 2-D weights of mini-qwen2/mini-qwen3 (2 layers,
# 4 heads over 2 KV heads): the file type's base type, except for these tensors. HEAD is output.weight,
# or token_embd.weight for qwen3, whose embeddings are tied. Q3_K, Q4_K and Q5_K are aliases of the
# _M mixtures. Layer 1 of 2 gets more bits in Q4_K_M/Q5_K_M (use_more_bits: i >= 7n/8).
BASE = {"Q3_K_S": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_L": "Q3_K", "Q4_K_S": "Q4_K", "Q4_K_M": "Q4_K", "Q5_K_S": "Q5_K",
        "Q5_K_M": "Q5_K"}
M_MIX = {"HEAD": "Q6_K", "blk.1.attn_v": "Q6_K", "blk.1.ffn_down": "Q6_K"}
Q3KM = {"HEAD": "Q6_K", "attn_v": "Q5_K", "ffn_down": "Q4_K", "attn_output": "Q4_K"}
EXPECTED = {
    "F32": {}, "F16": {}, "BF16": {}, "Q8_0": {}, "Q6_K": {},
    "Q4_0": {"HEAD": "Q6_K"}, "Q4_1": {"HEAD": "Q6_K"}, "Q5_0": {"HEAD": "Q6_K"}, "Q5_1": {"HEAD": "Q6_K"},
    "Q2_K": {"HEAD": "Q6_K", "attn_v": "Q3_K", "ffn_down": "Q3_K", "attn_output": "Q3_K"},
    "Q3_K_S": {"HEAD": "Q6_K"}, "Q3_K_M": Q3KM, "Q3_K": Q3KM,
    "Q3_K_L": {"HEAD": "Q6_K", "attn_v": "Q5_K", "ffn_down": "Q5_K", "attn_output": "Q5_K"},
    "Q4_K_S": {"HEAD": "Q6_K", "attn_v": "Q5_K"}, "Q4_K_M": M_MIX, "Q4_K": M_MIX,
    "Q5_K_S": {"HEAD": "Q6_K"}, "Q5_K_M": M_MIX, "Q5_K": M_MIX,
}


def quantize(src, dst, qtype, *extra, check=True):
    r = subprocess.run([MINFER, "quantize", *extra, str(src), str(dst), qtype], capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def field_value(field):
    """A metadata value in comparable form (scalars, strings, and arrays of them)."""
    is_str = field.types and field.types[-1] == gguf.GGUFValueType.STRING
    vals = []
    for i in field.data:
        v = field.parts[i].tolist()
        vals.append(bytes(v).decode("utf-8", "replace") if is_str else v[0] if len(v) == 1 else tuple(v))
    return (tuple(int(t) for t in field.types), tuple(vals))


def metadata(reader):
    return {k: field_value(f) for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def as_f32(t):
    return dequantize(t.data, t.tensor_type).astype(np.float64).reshape(-1)


def expected_types(model, qtype, reader, special=None):
    """Per-tensor types by EXPECTED (or `special`) for the tensors of reader: 1-D tensors stay F32."""
    head = "token_embd.weight" if model == "qwen3" else "output.weight"
    special = EXPECTED[qtype] if special is None else special
    want = {}
    for t in reader.tensors:
        if len([d for d in t.shape if d > 1]) < 2:
            want[t.name] = "F32"
            continue
        stem = t.name[: -len(".weight")]
        kind = stem.split(".", 2)[2] if stem.startswith("blk.") else None
        want[t.name] = special.get("HEAD" if t.name == head else stem, special.get(kind, BASE.get(qtype, qtype)))
    return want


@functools.lru_cache(maxsize=None)
def fixture_tensors(model):
    """The fixtures' tensors by type and name: llama-quantize's bytes for each type it has a file of
    (read once: the caller must not modify the result)."""
    out = {}
    for qtype in PURE_FIXTURES + ["F16"]:
        path = MODELS / f"mini-{model}.{qtype}.gguf"
        if path.exists():
            out[qtype] = {t.name: t for t in gguf.GGUFReader(path).tensors}
    return out


def same_bytes(a, b):
    return np.array_equal(np.asarray(a.data).view(np.uint8).reshape(-1), np.asarray(b.data).view(np.uint8).reshape(-1))


@pytest.mark.parametrize("model", ["qwen2", "qwen3"])
@pytest.mark.parametrize("qtype", PURE_FIXTURES + ["Q4_K_M"])
def test_same_file_as_llama_quantize(model, qtype, tmp_path):
    """The plain-type fixtures are llama-quantize --pure output and Q4_K_M its default: the same bytes,
    metadata, tensor order (by layer, then name) and alignment padding included."""
    out = tmp_path / "out.gguf"
    quantize(MODELS / f"mini-{model}.F32.gguf", out, qtype, *([] if qtype == "Q4_K_M" else ["--pure"]))
    ref_path = MODELS / f"mini-{model}.{qtype}.gguf"
    if out.read_bytes() != ref_path.read_bytes():  # say where
        ours, ref = gguf.GGUFReader(out), gguf.GGUFReader(ref_path)
        assert [t.name for t in ours.tensors] == [t.name for t in ref.tensors]
        for a, b in zip(ours.tensors, ref.tensors):
            assert a.tensor_type == b.tensor_type and same_bytes(a, b), a.name
        assert metadata(ours) == metadata(ref)
        pytest.fail("files differ outside tensor data and metadata")


@pytest.mark.parametrize("model", ["qwen2", "qwen3"])
def test_default_rules_like_llama_quantize(model, tmp_path):
    """Every file type without --pure: llama-quantize's per-tensor types, general.file_type, the input's
    metadata, and each tensor's bytes equal to llama.cpp's fixture of that type where there is one."""
    src = MODELS / f"mini-{model}.F32.gguf"
    f32 = gguf.GGUFReader(src)
    fixtures = dict(fixture_tensors(model), F32={t.name: t for t in f32.tensors})
    m_in = metadata(f32)
    checked = 0
    for qtype in EXPECTED:
        out = tmp_path / f"{qtype}.gguf"
        quantize(src, out, qtype.lower() if qtype == "Q5_K_S" else qtype)  # names are case-insensitive
        ours = gguf.GGUFReader(out)
        assert {t.name: t.tensor_type.name for t in ours.tensors} == expected_types(model, qtype, ours), qtype
        for t in ours.tensors:
            ref = fixtures.get(t.tensor_type.name, {}).get(t.name)
            if ref is not None:
                assert same_bytes(t, ref), (qtype, t.name)
                checked += 1
        m_out = metadata(ours)
        assert m_out["general.file_type"][1][0] == LLAMA_FTYPE[qtype], qtype
        assert m_out["general.quantization_version"][1][0] == 2
        for k, v in m_in.items():
            assert m_out.get(k) == v, (qtype, k)
    assert checked > 200  # most tensors have a fixture to compare with (not Q2_K/Q3_K)


def test_pure_every_file_type(tmp_path):
    """--pure: every 2-D weight in the base type for every file type (mixtures included), file type kept."""
    src = MODELS / "mini-qwen3.F32.gguf"
    for qtype in ["Q2_K", "Q3_K_L", "Q4_K_S", "Q5_K_M", "Q4_0", "BF16"]:
        out = tmp_path / f"{qtype}.gguf"
        quantize(src, out, qtype, "--pure")
        ours = gguf.GGUFReader(out)
        assert {t.name: t.tensor_type.name for t in ours.tensors} == expected_types("qwen3", qtype, ours, {}), qtype
        assert metadata(ours)["general.file_type"][1][0] == LLAMA_FTYPE[qtype]


@pytest.mark.parametrize("model,qtype,opts,special", [
    ("qwen2", "Q4_0", ["--output-tensor-type", "q8_0", "--token-embedding-type", "Q5_K"],
     {"HEAD": "Q8_0", "token_embd": "Q5_K"}),
    ("qwen2", "Q4_K_M", ["--pure", "--output-tensor-type", "Q6_K"], {"HEAD": "Q6_K"}),
    ("qwen2", "F16", ["--output-tensor-type", "Q4_0", "--token-embedding-type", "q8_0"],
     {"HEAD": "Q4_0", "token_embd": "Q8_0"}),  # the overrides apply to float file types too
    # tied embeddings: the output type is the embeddings' type, by the rules (not with --pure)
    ("qwen3", "Q4_K_M", ["--output-tensor-type", "Q8_0"], dict(M_MIX, HEAD="Q8_0")),
    ("qwen3", "Q4_0", ["--pure", "--output-tensor-type", "Q8_0"], {}),
    ("qwen3", "Q4_0", ["--output-tensor-type", "Q8_0", "--token-embedding-type", "Q5_1"], {"HEAD": "Q5_1"}),
    ("qwen3", "Q5_K_S", ["--pure", "--token-embedding-type", "f16"], {"HEAD": "F16"}),
])
def test_type_overrides(model, qtype, opts, special, tmp_path):
    """llama-quantize's --output-tensor-type / --token-embedding-type (types and bytes as it wrote them)."""
    out = tmp_path / "out.gguf"
    quantize(MODELS / f"mini-{model}.F32.gguf", out, qtype, *opts)
    ours = gguf.GGUFReader(out)
    assert {t.name: t.tensor_type.name for t in ours.tensors} == expected_types(model, qtype, ours, special)
    fixtures = fixture_tensors(model)
    for t in ours.tensors:
        ref = fixtures.get(t.tensor_type.name, {}).get(t.name)
        assert ref is None or same_bytes(t, ref), t.name
    assert metadata(ours)["general.file_type"][1][0] == LLAMA_FTYPE[qtype]


def write_f32_model(path, arch, tensors, n_layer, n_head=4, n_head_kv=4):
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(n_layer)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    for name, data in tensors:
        w.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_q4_k_m_mixture_all_architectures(tmp_path):
    """The per-tensor types of llama.cpp's Q4_K_M fixtures for qwen2, qwen3 (tied embeddings) and llama;
    llama has no F32 fixture, so its F32 input is rebuilt from the Q8_0 fixture."""
    llama_q8 = gguf.GGUFReader(MODELS / "mini-llama.Q8_0.gguf")
    llama_f32 = tmp_path / "mini-llama.F32.gguf"
    write_f32_model(llama_f32, "llama", [(t.name, dequantize(t.data, t.tensor_type)) for t in llama_q8.tensors], 2)
    for model, src in [("qwen2", MODELS / "mini-qwen2.F32.gguf"), ("qwen3", MODELS / "mini-qwen3.F32.gguf"),
                       ("llama", llama_f32)]:
        out = tmp_path / f"{model}.gguf"
        quantize(src, out, "Q4_K_M")
        ours = {t.name: t.tensor_type.name for t in gguf.GGUFReader(out).tensors}
        ref = {t.name: t.tensor_type.name for t in gguf.GGUFReader(MODELS / f"mini-{model}.Q4_K_M.gguf").tensors}
        assert ours == ref, model
        assert "Q6_K" in ours.values()


def test_q5_k_m_and_whole_file_types(tmp_path):
    src = MODELS / "mini-qwen2.F32.gguf"
    out = tmp_path / "q5km.gguf"
    quantize(src, out, "q5_k_m")  # names are case-insensitive
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(out).tensors}
    # same choices as Q4_K_M, on a Q5_K base
    assert types["output.weight"] == "Q6_K" and types["blk.1.attn_v.weight"] == "Q6_K"
    assert types["blk.1.ffn_down.weight"] == "Q6_K" and types["blk.0.ffn_down.weight"] == "Q5_K"
    assert types["token_embd.weight"] == "Q5_K" and types["blk.0.attn_norm.weight"] == "F32"
    for qtype in ["F16", "BF16", "F32"]:
        out = tmp_path / f"{qtype}.gguf"
        quantize(src, out, qtype)
        r = gguf.GGUFReader(out)
        types = {t.tensor_type.name for t in r.tensors if len([d for d in t.shape if d > 1]) >= 2}
        assert types == {qtype}
        assert metadata(r)["general.file_type"][1][0] == LLAMA_FTYPE[qtype]
    # F32 -> BF16 rounds to nearest even, and `minfer dump` reads BF16 back as the gguf package does
    f32 = {t.name: np.asarray(t.data, dtype=np.float32).reshape(-1) for t in gguf.GGUFReader(src).tensors}
    for t in gguf.GGUFReader(tmp_path / "BF16.gguf").tensors:
        if t.tensor_type.name != "BF16":
            continue
        u = f32[t.name].view(np.uint32).astype(np.uint64)
        want = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        assert np.array_equal(np.asarray(t.data).view(np.uint16).reshape(-1), want), t.name
        dump = tmp_path / "bf16.f32"
        subprocess.run([MINFER, "dump", str(tmp_path / "BF16.gguf"), t.name, "-o", str(dump)], check=True)
        assert np.array_equal(np.fromfile(dump, dtype="<f4"), as_f32(t).astype(np.float32)), t.name
    # F32 -> F16 gives the same bytes as the F16 fixture (round to nearest even)
    ours = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(tmp_path / "F16.gguf").tensors}
    for t in gguf.GGUFReader(MODELS / "mini-qwen2.F16.gguf").tensors:
        assert np.array_equal(ours[t.name].view(np.uint8), np.asarray(t.data).view(np.uint8)), t.name


def test_f16_input_and_threads(tmp_path):
    src = MODELS / "mini-qwen2.F16.gguf"
    outs = []
    for threads in ["1", "3"]:
        out = tmp_path / f"t{threads}.gguf"
        quantize(src, out, "Q4_K_M", "-t", threads)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    # BF16 input too: a BF16 copy of the F32 model quantizes to Q8_0 within BF16's rounding
    bf16 = tmp_path / "bf16.gguf"
    quantize(MODELS / "mini-qwen2.F32.gguf", bf16, "BF16")
    quantize(bf16, tmp_path / "from-bf16.gguf", "Q8_0")
    ref = {t.name: t for t in gguf.GGUFReader(MODELS / "mini-qwen2.Q8_0.gguf").tensors}
    for t in gguf.GGUFReader(tmp_path / "from-bf16.gguf").tensors:
        assert t.tensor_type == ref[t.name].tensor_type, t.name
        a, b = as_f32(t), as_f32(ref[t.name])
        assert np.max(np.abs(a - b)) <= 0.02 * np.max(np.abs(b)), t.name
    # quantizing the F16 weights is close to quantizing the F32 ones
    f32 = {t.name: t for t in gguf.GGUFReader(MODELS / "mini-qwen2.F32.gguf").tensors}
    for t in gguf.GGUFReader(tmp_path / "t1.gguf").tensors:
        x = as_f32(f32[t.name])
        rel = np.sqrt(np.mean((as_f32(t) - x) ** 2)) / (np.sqrt(np.mean(x ** 2)) + 1e-30)
        assert rel < 0.2, t.name


def test_copies_same_type_and_refuses_requantizing(tmp_path):
    q8 = MODELS / "mini-qwen2.Q8_0.gguf"
    out = tmp_path / "copy.gguf"
    quantize(q8, out, "Q8_0")  # every tensor already has its target type: a copy
    a, b = gguf.GGUFReader(out), gguf.GGUFReader(q8)
    for ta, tb in zip(sorted(a.tensors, key=lambda t: t.name), sorted(b.tensors, key=lambda t: t.name)):
        assert ta.name == tb.name and np.array_equal(np.asarray(ta.data), np.asarray(tb.data))
    r = quantize(q8, tmp_path / "re.gguf", "Q4_0", check=False)
    assert r.returncode == 1 and "already quantized" in r.stderr
    assert not (tmp_path / "re.gguf").exists()
    # the split model is read through its first part
    split = MODELS / "mini-qwen2.Q8_0-split-00001-of-00003.gguf"
    out = tmp_path / "joined.gguf"
    quantize(split, out, "Q8_0")
    m = metadata(gguf.GGUFReader(out))
    assert not any(k.startswith("split.") for k in m)
    assert len(gguf.GGUFReader(out).tensors) == len(b.tensors)


def test_bad_arguments(tmp_path):
    src = MODELS / "mini-qwen2.F32.gguf"
    out = tmp_path / "x.gguf"
    for args, code in [([], 2), ([str(src), str(out)], 2), ([str(src), str(out), "Q3_X"], 2),
                       (["--output-tensor-type", "Q4_K_M", str(src), str(out), "Q4_0"], 2),
                       (["--token-embedding-type", "IQ4_NL", str(src), str(out), "Q4_0"], 2),
                       (["--token-embedding-type", "Q8_K", str(src), str(out), "Q4_0"], 2),
                       ([str(src), str(out), "Q4_0", "--output-tensor-type"], 2),
                       (["-t", "0", str(src), str(out), "Q4_0"], 2), (["--bogus", str(src), str(out), "Q4_0"], 2),
                       ([str(tmp_path / "missing.gguf"), str(out), "Q4_0"], 1)]:
        r = subprocess.run([MINFER, "quantize", *args], capture_output=True, text=True)
        assert r.returncode == code, (args, r.stderr)
        assert r.stderr.startswith("minfer") or r.stderr.startswith("usage")
        assert not out.exists()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 10)
    r = quantize(bad, out, "Q4_0", check=False)
    assert r.returncode == 1 and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.gguf"]  # no temporary files left


def test_sigint_leaves_no_output(tmp_path):
    big = tmp_path / "big.F32.gguf"
    rng = np.random.default_rng(1)
    write_f32_model(big, "llama", [("blk.0.ffn_up.weight", rng.standard_normal((4096, 4096), dtype=np.float32)),
                                   ("blk.0.ffn_down.weight", rng.standard_normal((4096, 4096), dtype=np.float32))], 1)
    out = tmp_path / "out.gguf"
    out.write_bytes(b"previous contents")
    proc = subprocess.Popen([MINFER, "quantize", "-t", "1", str(big), str(out), "Q6_K"], stderr=subprocess.PIPE,
                            text=True)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert out.read_bytes() == b"previous contents"  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.F32.gguf", "out.gguf"]


def test_row_length_fallbacks(tmp_path):
    """Rows that a 256-value super-block does not divide fall back like llama.cpp: Q4_K -> Q5_0,
    Q5_K -> Q5_1, Q6_K -> Q8_0, and to F16 when 32 does not divide them either (a 32-block type goes
    to F16 directly); an override type has no fallback (an error naming the tensor)."""
    rng = np.random.default_rng(2)
    src = tmp_path / "odd.F32.gguf"
    write_f32_model(src, "llama", [("blk.0.ffn_up.weight", rng.standard_normal((64, 320), dtype=np.float32)),
                                   ("blk.0.ffn_gate.weight", rng.standard_normal((64, 100), dtype=np.float32)),
                                   ("blk.0.ffn_norm.weight", rng.standard_normal(100, dtype=np.float32))], 1)
    for qtype, want in [("Q4_K", "Q5_0"), ("Q5_K", "Q5_1"), ("Q6_K", "Q8_0"), ("Q3_K_S", "Q4_0"), ("Q4_0", "Q4_0")]:
        for pure in [[], ["--pure"]]:
            out = tmp_path / f"{qtype}.gguf"
            quantize(src, out, qtype, *pure)
            types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(out).tensors}
            assert types == {"blk.0.ffn_up.weight": want, "blk.0.ffn_gate.weight": "F16",
                             "blk.0.ffn_norm.weight": "F32"}, (qtype, pure)
    # llama.cpp's output rule: Q8_0 when the base type's block does not divide the rows
    src2 = tmp_path / "odd-out.F32.gguf"
    write_f32_model(src2, "llama", [("output.weight", rng.standard_normal((64, 320), dtype=np.float32)),
                                    ("token_embd.weight", rng.standard_normal((64, 320), dtype=np.float32))], 1)
    quantize(src2, tmp_path / "out.gguf", "Q4_K_M")
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(tmp_path / "out.gguf").tensors}
    assert types == {"output.weight": "Q8_0", "token_embd.weight": "Q5_0"}
    r = quantize(src, tmp_path / "q4_0.gguf", "Q4_0", "--token-embedding-type", "Q4_0", check=False)
    assert r.returncode == 0  # no token_embd.weight: nothing to override
    src3 = tmp_path / "odd-embd.F32.gguf"
    write_f32_model(src3, "llama", [("token_embd.weight", rng.standard_normal((64, 100), dtype=np.float32))], 1)
    r = quantize(src3, tmp_path / "bad.gguf", "Q8_0", "--token-embedding-type", "Q4_0", check=False)
    assert r.returncode == 1 and "token_embd.weight" in r.stderr and "100" in r.stderr
    assert not (tmp_path / "bad.gguf").exists()


def test_q2_k_q3_k_and_q3_k_m(tmp_path):
    """No llama.cpp fixture has Q2_K/Q3_K, so: our Q2_K/Q3_K bytes decode (gguf package) to what
    `minfer dump` gives and the error ranks between the formats as it must."""
    src = MODELS / "mini-qwen2.F32.gguf"
    f32 = {t.name: as_f32(t) for t in gguf.GGUFReader(src).tensors}
    rmse = {}
    for qtype in ["Q2_K", "Q3_K", "Q4_K"]:
        out = tmp_path / f"{qtype}.gguf"
        quantize(src, out, qtype, "--pure")
        dump = tmp_path / f"dump-{qtype}"
        subprocess.run([MINFER, "dump", str(out), "--all", "-o", str(dump)], check=True)
        err = n = 0
        for t in gguf.GGUFReader(out).tensors:
            ref = as_f32(t)
            ours = np.fromfile(dump / f"{t.name}.f32", dtype="<f4")
            assert np.max(np.abs(ours - ref)) <= 4 * np.finfo(np.float32).eps * np.max(np.abs(ref)), t.name
            err += float(np.sum((ref - f32[t.name]) ** 2))
            n += ref.size
        rmse[qtype] = (err / n) ** 0.5
    rms = (sum(float(np.sum(v ** 2)) for v in f32.values()) / sum(v.size for v in f32.values())) ** 0.5
    assert rmse["Q2_K"] > rmse["Q3_K"] > rmse["Q4_K"]
    assert rmse["Q3_K"] < 0.25 * rms and rmse["Q2_K"] < 0.45 * rms, (rmse, rms)


def test_dry_run_and_in_place(tmp_path):
    src = MODELS / "mini-llama.Q8_0.gguf"
    r = subprocess.run([MINFER, "quantize", "--dry-run", str(src), str(tmp_path / "x.gguf"), "Q8_0"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "blk.1.ffn_down.weight" in r.stdout and "Q8_0  -> Q8_0" in r.stdout
    assert not (tmp_path / "x.gguf").exists()
    # OUT may be IN: the input stays mapped while the new file is renamed over it
    model = tmp_path / "m.gguf"
    model.write_bytes((MODELS / "mini-qwen3.F32.gguf").read_bytes())
    quantize(model, model, "Q8_0")
    ref = {t.name: t for t in gguf.GGUFReader(MODELS / "mini-qwen3.Q8_0.gguf").tensors}
    for t in gguf.GGUFReader(model).tensors:
        assert t.tensor_type == ref[t.name].tensor_type
        assert np.array_equal(np.asarray(t.data), np.asarray(ref[t.name].data)), t.name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf"]
