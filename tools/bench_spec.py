#!/usr/bin/env python3
"""bench_spec.py: speculative decoding against plain decoding, side by side: generation tokens/s of
`minfer run --temp 0` with and without a draft source, the acceptance rate, and whether the text
is the same (it must be). Every prompt runs once per mode, alternating, so each run is a first run
of its prompt (nothing is cached between processes; a repeated prompt would not inflate lookup's
acceptance here, but distinct prompts keep the cases honest). Each case prints the ratio of the
median rates and the geometric mean of the ratios of each prompt's two runs (seconds apart, so in
the same state of a shared machine).

Cases (SmolLM2-135M-Instruct; scripts/smollm2.sh fetches it):
  lookup     n-gram lookup on text-rewriting prompts, target the published Q4_1 file
  draft      a Q4_0 draft for an F16 (or Q8_0) target, both made with `minfer quantize` from an F16
             copy dequantized with the gguf package
  poor       lookup and the Q4_0 draft on open-ended prompts (little to copy): adaptive depth must
             back off so that speculation costs at most a few percent
  shape      the synthetic Qwen2.5-0.5B shape (tools/mkmodel.py, random weights, the benchmarks'
             model): its F16 file as the target, its Q4_0 file (a third of the bytes) as the draft,
             on all the prompts; both made and cached in --models-dir as tools/compare_llama.py
             makes them. A step of this target reads its weights, so a cheap draft can pay.

  tools/bench_spec.py [--bin build/minfer] [--cases lookup,draft,poor,shape] [--target f16|q8_0] [-n 128]
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys

REWRITE = [
    "Rewrite the following paragraph in the past tense, keeping everything else the same:\n\nThe train leaves "
    "the station at seven. Maria walks to the platform and buys a coffee. She reads the newspaper while she waits. "
    "When the train arrives, she finds a seat by the window and watches the fields go by.",
    "Correct the spelling mistakes in this text and return the whole text:\n\nOur compnay was founded in 1998 by "
    "two freinds who wanted to make better tools for gardners. Today we sell our products in more then forty "
    "countries, and our team has grown to over three hundred people who care about quality.",
    "Replace every occurrence of 'customer' with 'client' in this email and return it:\n\nDear team, the customer "
    "called again about the delayed order. The customer says the invoice was wrong and the customer wants a "
    "refund. Please contact the customer today and tell the customer what we will do.",
    "Convert this list into a numbered list, one item per line, keeping the text of each item:\n\napples, "
    "bananas, fresh bread, two litres of milk, olive oil, black pepper, a dozen eggs, tomatoes, green tea.",
]
OPEN = [
    "Write a short poem about the sea at night.",
    "Give me three ideas for a birthday party for a ten year old.",
    "Explain why the sky is blue in simple words.",
    "Tell me a story about a fox who learns to swim.",
]

GEN = re.compile(r"generated (\d+) tokens, ([0-9.]+) tokens/s")
SPEC = re.compile(r"(lookup|draft): (\d+) drafted, (\d+) accepted")


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def smollm2():
    here = os.path.dirname(os.path.abspath(__file__))
    r = sh([os.path.join(here, "..", "scripts", "smollm2.sh")])
    if r.returncode:
        sys.exit("scripts/smollm2.sh failed: " + r.stderr)
    return r.stdout.strip().splitlines()[-1]


def dequantize(src, dst):
    """An F16 copy of src (F32 for vectors), with the gguf package (PyPI)."""
    import gguf
    import numpy as np
    from gguf.quants import dequantize as deq
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"]
    w = gguf.GGUFWriter(dst + ".part", bytes(arch.parts[arch.data[0]]).decode())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            st = f.types[1]
            if st == gguf.GGUFValueType.STRING:
                val = [bytes(f.parts[i]).decode("utf-8", "surrogateescape") for i in f.data]
            else:
                val = [f.parts[i][0].item() for i in f.data]
            w.add_key_value(name, val, vt, sub_type=st)
        elif vt == gguf.GGUFValueType.STRING:
            w.add_key_value(name, bytes(f.parts[f.data[0]]).decode("utf-8", "surrogateescape"), vt)
        else:
            w.add_key_value(name, f.parts[f.data[0]][0].item(), vt)
    for t in r.tensors:
        a = deq(t.data, t.tensor_type).astype(np.float32).reshape(list(reversed([int(x) for x in t.shape])))
        w.add_tensor(t.name, a if a.ndim == 1 else a.astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(dst + ".part", dst)


def make_models(binary, src, cache, target_type):
    os.makedirs(cache, exist_ok=True)
    f16 = os.path.join(cache, "smollm2.F16.gguf")
    if not os.path.exists(f16):
        print("dequantizing", src, "->", f16, file=sys.stderr)
        dequantize(src, f16)
    out = {"f16": f16}
    for t in ("Q8_0", "Q4_0"):
        p = os.path.join(cache, "smollm2.%s.gguf" % t)
        if not os.path.exists(p):
            r = sh([binary, "quantize", f16, p, t])
            if r.returncode:
                sys.exit("quantize %s: %s" % (t, r.stderr))
        out[t.lower()] = p
    return out[target_type], out["q4_0"]


def shape_models(binary, models_dir):
    """The synthetic 0.5B shape's F16 and Q4_0 files, made as tools/compare_llama.py makes them."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import compare_llama
    ns = argparse.Namespace(models_dir=models_dir, llama_quantize=None, minfer=binary, quant_threads=os.cpu_count() or 2)
    return compare_llama.make_model(ns, "qwen2-0.5b", "F16"), compare_llama.make_model(ns, "qwen2-0.5b", "Q4_0")


def one(binary, model, prompt, n, extra):
    r = sh([binary, "run", model, prompt, "--temp", "0", "-n", str(n)] + extra, timeout=900)
    if r.returncode:
        sys.exit("minfer run failed: " + r.stderr[-2000:])
    g = GEN.search(r.stderr)
    s = SPEC.search(r.stderr)
    return r.stdout, float(g.group(2)), int(g.group(1)), (int(s.group(2)), int(s.group(3))) if s else (0, 0)


def case(binary, name, model, prompts, n, extra, reps):
    plain_tps, spec_tps, drafted, accepted, same = [], [], 0, 0, True
    for _ in range(reps):
        for p in prompts:  # alternating: plain, then speculative, prompt by prompt
            a, tps_a, _, _ = one(binary, model, p, n, [])
            b, tps_b, _, (d, k) = one(binary, model, p, n, extra)
            plain_tps.append(tps_a)
            spec_tps.append(tps_b)
            drafted, accepted, same = drafted + d, accepted + k, same and a == b
    pm, sm = statistics.median(plain_tps), statistics.median(spec_tps)
    # each pair ran seconds apart, in the same state of a shared machine (whose memory speed can swing
    # by half between minutes): the geometric mean of the pairs' ratios is the steadier figure
    paired = math.exp(statistics.fmean(math.log(b / a) for a, b in zip(plain_tps, spec_tps)))
    rate = 100.0 * accepted / drafted if drafted else 0.0
    print("%-28s plain %6.1f tok/s | spec %6.1f tok/s | x%.2f, paired x%.2f | %d drafted, %.1f %% accepted | "
          "same text: %s" % (name, pm, sm, sm / pm, paired, drafted, rate, "yes" if same else "NO"))
    return same


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/minfer")
    ap.add_argument("--cases", default="lookup,draft,poor,shape")
    ap.add_argument("--target", default="f16", choices=["f16", "q8_0"])
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/minfer-bench"))
    ap.add_argument("--models-dir", default=os.environ.get("MINFER_BENCH_MODELS", "/work/bench-models"),
                    help="where the shape case's files are made and kept (as tools/compare_llama.py)")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--reps", type=int, default=1, help="passes over the prompts (default 1: first runs only)")
    a = ap.parse_args()
    cases = a.cases.split(",")
    smol = smollm2()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compare_llama import cpu_model  # the model name with the x86 family and model numbers
    print("CPU:", cpu_model(), "| ISA:", os.environ.get("MINFER_ISA", "auto"))
    ok = True
    if "lookup" in cases:
        ok &= case(a.bin, "lookup, rewriting (Q4_1)", smol, REWRITE, a.n, ["--lookup"], a.reps)
    if "draft" in cases or "poor" in cases:
        target, draft = make_models(a.bin, smol, a.cache, a.target)
    if "draft" in cases:
        ok &= case(a.bin, "draft Q4_0 -> %s, rewriting" % a.target.upper(), target, REWRITE, a.n, ["-md", draft], a.reps)
        ok &= case(a.bin, "draft Q4_0 -> %s, open" % a.target.upper(), target, OPEN, a.n, ["-md", draft], a.reps)
    if "poor" in cases:
        ok &= case(a.bin, "lookup, open prompts (Q4_1)", smol, OPEN, a.n, ["--lookup"], a.reps)
    if "shape" in cases:
        target, draft = shape_models(a.bin, a.models_dir)
        ok &= case(a.bin, "0.5B shape, Q4_0 -> F16", target, REWRITE + OPEN, a.n, ["-md", draft], a.reps)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
