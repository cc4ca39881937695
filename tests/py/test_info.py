"""`minfer info` against llama.cpp's own GGUF reader (the gguf Python package) on every fixture,
the split model, and bad paths and files."""
import glob
import json
import os
import struct
import subprocess

import gguf
import pytest

BIN = os.environ.get("MINFER_BIN", "build/minfer")
FIX = os.environ.get("MINFER_FIXTURES", os.path.join(os.path.dirname(__file__), "../../../shared/fixtures"))
MODELS = os.path.join(FIX, "models")
ALL = sorted(p for p in glob.glob(os.path.join(MODELS, "*.gguf")) if "-split-" not in p or "-00001-of-" in p)
SPLIT = os.path.join(MODELS, "mini-qwen2.Q8_0-split-00001-of-00003.gguf")


def run(*args):
    return subprocess.run([BIN, "info", *args], capture_output=True, text=True, timeout=60)


def info_json(path):
    r = run(path, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def field(reader, key, default=None):
    if isinstance(reader, dict):
        return reader.get(key, default)
    f = reader.fields.get(key)
    return f.contents() if f is not None else default


def plain_metadata(path):
    """Metadata of a GGUF file as a dict, by a direct struct walk: gguf-py takes ~15 s on the
    151,936-token vocabularies, this takes a fraction of a second."""
    data = open(path, "rb").read()
    pos = 24
    n_kv = struct.unpack_from("<Q", data, 16)[0]
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        nonlocal pos
        if t == 8:
            n = struct.unpack_from("<Q", data, pos)[0]
            pos += 8 + n
            return data[pos - n:pos].decode("utf-8", "replace")
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            return [value(et) for _ in range(n)]
        v = struct.unpack_from("<" + scalar[t], data, pos)[0]
        pos += struct.calcsize(scalar[t])
        return v

    meta = {}
    for _ in range(n_kv):
        key = value(8)
        t = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        meta[key] = value(t)
    assert struct.unpack_from("<Q", data, 8)[0] == 0, "only for files without tensors"
    return meta


def reference_for(path):
    """The unsplit file holds what a split model must report."""
    return os.path.join(MODELS, "mini-qwen2.Q8_0.gguf") if path == SPLIT else path


def test_fixture_list_is_complete():
    assert len(ALL) >= 30
    assert SPLIT in ALL


@pytest.mark.parametrize("path", ALL, ids=os.path.basename)
def test_info_matches_gguf_py(path):
    info = info_json(path)
    vocab_only = os.path.basename(path).startswith("vocab-")
    ref = plain_metadata(path) if vocab_only else gguf.GGUFReader(reference_for(path))
    tensors = [] if vocab_only else ref.tensors
    arch = field(ref, "general.architecture")
    assert info["architecture"] == arch
    assert info["name"] == field(ref, "general.name")
    assert info["tensor_count"] == len(tensors)
    assert info["parameters"] == sum(int(t.n_elements) for t in tensors)
    by_name = {t["name"]: t for t in info["tensors"]}
    assert len(by_name) == len(tensors)
    counts = {}
    for t in tensors:
        mine = by_name[t.name]
        assert mine["shape"] == [int(x) for x in t.shape]
        assert mine["type"] == t.tensor_type.name
        assert mine["bytes"] == int(t.n_bytes)
        if path != SPLIT:
            assert mine["offset"] == int(t.data_offset) - ref.data_offset
        counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
    assert {k: v["count"] for k, v in info["tensor_types"].items()} == counts
    hp = info["hparams"]
    for mine, key in [("context_length", "context_length"), ("embedding_length", "embedding_length"),
                      ("block_count", "block_count"), ("head_count", "attention.head_count"),
                      ("head_count_kv", "attention.head_count_kv"), ("feed_forward_length", "feed_forward_length")]:
        assert hp.get(mine) == field(ref, f"{arch}.{key}"), mine
    head_size = field(ref, f"{arch}.attention.key_length") or hp["embedding_length"] // hp["head_count"]
    assert hp["head_size"] == head_size
    assert hp["rope_freq_base"] == pytest.approx(field(ref, f"{arch}.rope.freq_base", 10000.0))
    assert hp["rope_mode"] == {"qwen2": "neox", "qwen3": "neox", "llama": "normal"}[arch]
    tok = info["tokenizer"]
    tokens = field(ref, "tokenizer.ggml.tokens")
    assert tok["vocab_size"] == len(tokens)
    assert tok["model"] == field(ref, "tokenizer.ggml.model")
    assert tok.get("pre") == field(ref, "tokenizer.ggml.pre")
    for name, key in [("bos", "bos_token_id"), ("eos", "eos_token_id"), ("eot", "eot_token_id"),
                      ("pad", "padding_token_id"), ("unk", "unknown_token_id")]:
        want = field(ref, f"tokenizer.ggml.{key}")
        if want is None:
            assert name not in tok["special"]
        else:
            assert tok["special"][name]["id"] == want
            assert tok["special"][name]["text"] == tokens[want]
    template = field(ref, "tokenizer.chat_template")
    assert tok["chat_template"] == (template is not None)
    if template is not None:
        assert tok["chat_template_bytes"] == len(template.encode())
    assert info["file_size"] == sum(os.path.getsize(p) for p in info["parts"])


def test_split_parts():
    info = info_json(SPLIT)
    assert [os.path.basename(p) for p in info["parts"]] == [
        f"mini-qwen2.Q8_0-split-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert {t["part"] for t in info["tensors"]} == {0, 1, 2}
    text = run(SPLIT).stdout
    assert "split parts:    3" in text


def test_text_output():
    path = os.path.join(MODELS, "mini-qwen2.Q4_K_M.gguf")
    r = run(path)
    assert r.returncode == 0 and r.stderr == ""
    lines = dict(line.split(":", 1) for line in r.stdout.splitlines() if ":" in line and not line.startswith(" "))
    assert lines["architecture"].strip() == "qwen2"
    assert lines["layers"].strip() == "2"
    assert lines["KV heads"].strip() == "2"
    assert lines["RoPE"].strip() == "base 1000000, mode NEOX"
    assert lines["eos token"].strip() == "4066 '<|im_end|>'"
    assert lines["chat template"].strip().startswith("yes")
    assert "tensor" not in r.stdout.split("split parts")[1]
    llama = run(os.path.join(MODELS, "mini-llama.Q8_0.gguf")).stdout
    assert "base 10000, mode normal" in llama


def test_tensor_listing():
    path = os.path.join(MODELS, "mini-qwen3.Q4_K_M.gguf")
    r = run(path, "--tensors")
    assert r.returncode == 0
    ref = gguf.GGUFReader(path)
    rows = {line.split()[0]: line.split() for line in r.stdout.split("\n\n", 1)[1].splitlines()[1:]}
    assert len(rows) == len(ref.tensors)
    for t in ref.tensors:
        row = rows[t.name]
        assert row[-3] == t.tensor_type.name
        assert int(row[-2]) == int(t.data_offset) - ref.data_offset
        assert int(row[-1]) == int(t.n_bytes)
        assert " ".join(row[1:-3]) == " x ".join(str(int(x)) for x in t.shape)


def one_line_error(r, *needles):
    assert r.returncode == 1
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("minfer: info: ")
    for n in needles:
        assert n in lines[0], lines[0]


def test_bad_paths(tmp_path):
    one_line_error(run(str(tmp_path / "missing.gguf")), "missing.gguf", "No such file")
    one_line_error(run(str(tmp_path)), "not a regular file")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"this is not a model at all")
    one_line_error(run(str(junk)), "junk.gguf", "not a GGUF file")
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    one_line_error(run(str(empty)), "empty.gguf", "magic needs 4 bytes")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(open(os.path.join(MODELS, "mini-llama.Q4_0.gguf"), "rb").read()[:100000])
    one_line_error(run(str(cut)), "cut.gguf", "truncated")
    one_line_error(run(os.path.join(MODELS, "mini-qwen2.Q8_0-split-00002-of-00003.gguf")), "open part 1")


def test_usage_errors():
    assert run().returncode == 2
    r = run(os.path.join(MODELS, "mini-llama.Q4_0.gguf"), "--bogus")
    assert r.returncode == 2 and "--bogus" in r.stderr
    assert run("a.gguf", "b.gguf").returncode == 2
    h = run("--help")
    assert h.returncode == 0 and "--tensors" in h.stdout
