#!/usr/bin/env python3
"""mkmodel.py: write a synthetic GGUF model of a real shape (random weights, a synthesized byte-level
BPE vocabulary) for benchmarks and tests. Tensors are generated and written one at a time, so a 7B
F16 file (15 GB) needs little RAM. Needs numpy only.

  mkmodel.py --shape qwen2-0.5b [--ftype f16|f32] [--seed 1] OUT.gguf
  mkmodel.py --arch qwen2 --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 160 --n-vocab 512 OUT.gguf
"""
import argparse
import os
import struct
import sys

import numpy as np

# GGUF value types and GGML tensor types used here.
GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STR, GGUF_ARR = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_F16 = 0, 1
ALIGN = 32

# Real model shapes. Keys: arch, n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, tied, and
# optionally head_dim (when it is not n_embd / n_head), rope_base, eps, ctx.
SHAPES = {
    "qwen2-0.5b": dict(arch="qwen2", n_embd=896, n_layer=24, n_head=14, n_head_kv=2, n_ff=4864,
                       n_vocab=151936, tied=True),
    "qwen2-1.5b": dict(arch="qwen2", n_embd=1536, n_layer=28, n_head=12, n_head_kv=2, n_ff=8960,
                       n_vocab=151936, tied=True),
    "qwen2-7b": dict(arch="qwen2", n_embd=3584, n_layer=28, n_head=28, n_head_kv=4, n_ff=18944,
                     n_vocab=152064, tied=False),
    "qwen3-0.6b": dict(arch="qwen3", n_embd=1024, n_layer=28, n_head=16, n_head_kv=8, head_dim=128,
                       n_ff=3072, n_vocab=151936, tied=True, ctx=40960),
    "qwen3-8b": dict(arch="qwen3", n_embd=4096, n_layer=36, n_head=32, n_head_kv=8, head_dim=128,
                     n_ff=12288, n_vocab=151936, tied=False, ctx=40960),
    "llama-1b": dict(arch="llama", n_embd=2048, n_layer=16, n_head=32, n_head_kv=8, n_ff=8192,
                     n_vocab=128256, tied=True, rope_base=500000.0, eps=1e-5, ctx=131072),
    "llama-8b": dict(arch="llama", n_embd=4096, n_layer=32, n_head=32, n_head_kv=8, n_ff=14336,
                     n_vocab=128256, tied=False, rope_base=500000.0, eps=1e-5, ctx=131072),
    "tiny": dict(arch="qwen2", n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=160, n_vocab=1024,
                 tied=True),
}

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def gguf_str(x):
    b = x.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, vtype, val):
    """One metadata pair. Arrays are given as (element type, list)."""
    out = gguf_str(key) + struct.pack("<I", vtype)
    if vtype == GGUF_U32:
        return out + struct.pack("<I", val)
    if vtype == GGUF_I32:
        return out + struct.pack("<i", val)
    if vtype == GGUF_F32:
        return out + struct.pack("<f", val)
    if vtype == GGUF_BOOL:
        return out + struct.pack("<B", int(bool(val)))
    if vtype == GGUF_STR:
        return out + gguf_str(val)
    etype, items = val
    out += struct.pack("<IQ", etype, len(items))
    if etype == GGUF_STR:
        return out + b"".join(gguf_str(i) for i in items)
    if etype == GGUF_I32:
        return out + np.asarray(items, dtype="<i4").tobytes()
    raise ValueError(f"array element type {etype}")


def byte_symbols():
    """The byte-level BPE alphabet: byte b is shown as one printable character (printable ASCII and
    Latin-1 stand for themselves, the other bytes map to U+0100 and up), as GPT-2 vocabularies do."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    sym, extra = {}, 0
    for b in range(256):
        if b in keep:
            sym[b] = chr(b)
        else:
            sym[b] = chr(0x100 + extra)
            extra += 1
    return [sym[b] for b in range(256)]


def synth_vocab(n_vocab):
    """A self-consistent vocabulary of n_vocab tokens: the 256 byte symbols, then tokens made by
    appending one byte symbol to an earlier token (each with its merge, rank = id - 256), then the
    special tokens. Appending one symbol to distinct strings keeps every token distinct."""
    n_merged = n_vocab - 256 - len(SPECIALS)
    if n_merged < 0:
        sys.exit(f"mkmodel: --n-vocab {n_vocab} is below the minimum {256 + len(SPECIALS)}")
    byte = byte_symbols()
    # Letters first, so the common merges look like text; the order does not matter otherwise.
    order = sorted(range(256), key=lambda b: (not chr(b).isalpha(), not chr(b).isdigit(), b))
    toks, merges = list(byte), []
    prefixes = iter(order + list(range(256, n_vocab)))
    while len(merges) < n_merged:
        prefix = next(prefixes)
        for b in order:
            if len(merges) == n_merged:
                break
            toks.append(toks[prefix] + byte[b])
            merges.append(toks[prefix] + " " + byte[b])
    types = [1] * len(toks) + [3] * len(SPECIALS)
    toks += SPECIALS
    return toks, types, merges


def tensor_list(h):
    """(name, ne) of every tensor in file order; ne is GGML order (ne[0] = row length)."""
    E, F, V, hd = h["n_embd"], h["n_ff"], h["n_vocab"], h["head_dim"]
    q, kv = h["n_head"] * hd, h["n_head_kv"] * hd
    out = [("token_embd.weight", (E, V)), ("output_norm.weight", (E,))]
    if h.get("rope_freqs"):
        out.append(("rope_freqs.weight", (hd // 2,)))
    if not h["tied"]:
        out.append(("output.weight", (E, V)))
    for i in range(h["n_layer"]):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (E,)), (b + "attn_q.weight", (E, q)), (b + "attn_k.weight", (E, kv)),
                (b + "attn_v.weight", (E, kv))]
        if h["arch"] == "qwen2":
            out += [(b + "attn_q.bias", (q,)), (b + "attn_k.bias", (kv,)), (b + "attn_v.bias", (kv,))]
        if h["arch"] == "qwen3":
            out += [(b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,))]
        out += [(b + "attn_output.weight", (q, E)), (b + "ffn_norm.weight", (E,)), (b + "ffn_gate.weight", (E, F)),
                (b + "ffn_up.weight", (E, F)), (b + "ffn_down.weight", (F, E))]
    return out


def metadata(h, name):
    ar = h["arch"]
    meta = [
        gguf_kv("general.architecture", GGUF_STR, ar),
        gguf_kv("general.name", GGUF_STR, name),
        gguf_kv("general.alignment", GGUF_U32, ALIGN),
        gguf_kv("general.file_type", GGUF_U32, 1 if h["ftype"] == "f16" else 0),
        gguf_kv(f"{ar}.context_length", GGUF_U32, h["ctx"]),
        gguf_kv(f"{ar}.embedding_length", GGUF_U32, h["n_embd"]),
        gguf_kv(f"{ar}.block_count", GGUF_U32, h["n_layer"]),
        gguf_kv(f"{ar}.feed_forward_length", GGUF_U32, h["n_ff"]),
        gguf_kv(f"{ar}.attention.head_count", GGUF_U32, h["n_head"]),
        gguf_kv(f"{ar}.attention.head_count_kv", GGUF_U32, h["n_head_kv"]),
        gguf_kv(f"{ar}.rope.freq_base", GGUF_F32, h["rope_base"]),
        gguf_kv(f"{ar}.attention.layer_norm_rms_epsilon", GGUF_F32, h["eps"]),
    ]
    if h["head_dim"] * h["n_head"] != h["n_embd"] or ar == "qwen3":
        meta += [gguf_kv(f"{ar}.attention.key_length", GGUF_U32, h["head_dim"]),
                 gguf_kv(f"{ar}.attention.value_length", GGUF_U32, h["head_dim"])]
    if ar == "llama":
        meta.append(gguf_kv(f"{ar}.rope.dimension_count", GGUF_U32, h["head_dim"]))
    toks, types, merges = synth_vocab(h["n_vocab"])
    special = {t: len(toks) - len(SPECIALS) + k for k, t in enumerate(SPECIALS)}
    meta += [
        gguf_kv("tokenizer.ggml.model", GGUF_STR, "gpt2"),
        gguf_kv("tokenizer.ggml.pre", GGUF_STR, "qwen2"),
        gguf_kv("tokenizer.ggml.tokens", GGUF_ARR, (GGUF_STR, toks)),
        gguf_kv("tokenizer.ggml.token_type", GGUF_ARR, (GGUF_I32, types)),
        gguf_kv("tokenizer.ggml.merges", GGUF_ARR, (GGUF_STR, merges)),
        gguf_kv("tokenizer.ggml.bos_token_id", GGUF_U32, special["<|endoftext|>"]),
        gguf_kv("tokenizer.ggml.eos_token_id", GGUF_U32, special["<|im_end|>"]),
        gguf_kv("tokenizer.ggml.padding_token_id", GGUF_U32, special["<|endoftext|>"]),
        gguf_kv("tokenizer.ggml.add_bos_token", GGUF_BOOL, False),
    ]
    return meta


class Noise:
    """Gaussian values at low cost: one pool of 4M normals, read at a random offset per chunk (a chunk is
    never longer than the pool, so no chunk repeats itself). Benchmarks need realistic value
    distributions, not independent samples."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        pool = self.rng.standard_normal(1 << 22).astype(np.float32)
        self.pool = np.concatenate([pool, pool])
        self.n = 1 << 22

    def chunk(self, n):
        off = int(self.rng.integers(0, self.n))
        return self.pool[off:off + n]


def llama3_rope_factors(h):
    """The divisors Llama 3.1's converter writes for rope_scaling {factor 8, low_freq_factor 1,
    high_freq_factor 4, original_max_position_embeddings 8192}: 1 for the fast pairs, 8 for the slow."""
    hd, base = h["head_dim"], h["rope_base"]
    factor, low, high, old = 8.0, 1.0, 4.0, 8192.0
    out = []
    for i in range(0, hd, 2):
        wavelen = 2 * np.pi * base ** (i / hd)
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def write_tensor(f, noise, name, ne, ftype, h=None):
    """Write one tensor's data in chunks: 1-D tensors (norms, biases) as F32, matrices in ftype."""
    if name == "rope_freqs.weight":
        f.write(llama3_rope_factors(h).astype("<f4").tobytes())
        return ne[0] * 4
    count = int(np.prod(ne))
    is_norm = len(ne) == 1 and "bias" not in name
    scale = 0.1 if len(ne) == 1 else (0.5 if name == "token_embd.weight" else 1.0 / np.sqrt(ne[0]))
    dtype = "<f2" if (ftype == "f16" and len(ne) > 1) else "<f4"
    done = 0
    while done < count:
        n = min(count - done, noise.n)
        x = noise.chunk(n) * np.float32(scale)
        if is_norm:
            x = x + np.float32(1.0)
        f.write(x.astype(dtype).tobytes())
        done += n
    return count * (2 if dtype == "<f2" else 4)


def main():
    p = argparse.ArgumentParser(description="Write a synthetic GGUF model of a real shape (random weights).")
    p.add_argument("out")
    p.add_argument("--shape", choices=sorted(SHAPES), help="a real model's shape (the other flags override it)")
    p.add_argument("--arch", choices=["qwen2", "qwen3", "llama"])
    for k in ["n-embd", "n-layer", "n-head", "n-head-kv", "head-dim", "n-ff", "n-vocab", "ctx"]:
        p.add_argument("--" + k, type=int)
    p.add_argument("--tied", action=argparse.BooleanOptionalAction, default=None,
                   help="output projection shares token_embd")
    p.add_argument("--rope-base", type=float)
    p.add_argument("--eps", type=float)
    p.add_argument("--ftype", default="f16", choices=["f16", "f32"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--name", default=None)
    p.add_argument("--rope-freqs", action="store_true",
                   help="add Llama 3.1's rope_freqs.weight (llama3 rope scaling, factor 8)")
    a = p.parse_args()

    h = dict(SHAPES[a.shape]) if a.shape else dict(SHAPES["tiny"])
    for k in ["arch", "n_embd", "n_layer", "n_head", "n_head_kv", "head_dim", "n_ff", "n_vocab", "ctx", "tied",
              "rope_base", "eps"]:
        v = getattr(a, k)
        if v is not None:
            h[k] = v
    h.setdefault("head_dim", 0)
    h["head_dim"] = h["head_dim"] or h["n_embd"] // h["n_head"]
    h.setdefault("rope_base", 1000000.0)
    h.setdefault("eps", 1e-6)
    h.setdefault("ctx", 32768)
    h["ftype"] = a.ftype
    h["rope_freqs"] = a.rope_freqs
    if h["n_head"] % h["n_head_kv"]:
        sys.exit(f"mkmodel: n_head {h['n_head']} is not a multiple of n_head_kv {h['n_head_kv']}")

    tensors = tensor_list(h)
    meta = metadata(h, a.name or (a.shape or "synthetic"))
    infos, off = [], 0
    for name, ne in tensors:
        typ = GGML_F16 if (a.ftype == "f16" and len(ne) > 1) else GGML_F32
        infos.append(gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
                     + struct.pack("<IQ", typ, off))
        nbytes = int(np.prod(ne)) * (2 if typ == GGML_F16 else 4)
        off += nbytes + (-nbytes) % ALIGN
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta) + b"".join(infos)
    head += b"\0" * ((-len(head)) % ALIGN)

    noise = Noise(a.seed)
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head)
        for name, ne in tensors:
            nbytes = write_tensor(f, noise, name, ne, a.ftype, h)
            f.write(b"\0" * ((-nbytes) % ALIGN))
    os.replace(tmp, a.out)
    n_params = sum(int(np.prod(ne)) for _, ne in tensors)
    print(f"{a.out}: {h['arch']} {n_params / 1e6:.1f}M params, {len(tensors)} tensors, {a.ftype}", file=sys.stderr)


if __name__ == "__main__":
    main()
