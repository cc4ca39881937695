#!/usr/bin/env python3
"""Tokenizer throughput, minfer against Hugging Face `tokenizers`, side by side on one thread.

Generates a deterministic ~1 MB mixed text (English prose, code, CJK, emoji, some accented and
decomposed Latin), encodes it with `minfer tokenize --bench` (vocab-qwen3.gguf) and with Hugging
Face tokenizers (the Qwen3 tokenizer.json), checks both give the same ids, and prints the ratio.
Usage: tools/bench_tokenizer.py [--minfer BIN] [--fixtures DIR] [--size BYTES] [--runs N] [--save FILE]
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

WORDS = ("the of and to in is was that for it with as his on be at by had are but from or have an they which one "
         "you were all her she there would their we him been has when who will no more if out so up said what its "
         "about than into them can only other time new some could these two may first then do any like my now over "
         "such our man me even most made after also did many off before must well back through years much where "
         "your way down should because long each just state people those too how little good world very still "
         "government without between life being under never another know while last might us great old year come "
         "since against go came right used take three however house part small place general system number think "
         "tokenizer inference model quantization attention transformer embedding throughput latency benchmark").split()
IDENTS = ("buf len count index value result data node next prev size offset ctx state params config tokens ids "
          "weights bias scale block row col stride tensor graph layer head cache key query mask out err").split()
CJK = ("的一是不了人我在有他这为之大来以个中上们到说时地也子就道而要于下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多"
       "日本語のテキストですカタカナとひらがな한국어텍스트입니다學習機器翻譯資料處理模型推理速度測試中文繁體字")
EMOJI = ["😀", "😂", "🦙", "🚀", "✅", "❤️", "👍🏽", "🇯🇵", "👨‍👩‍👧‍👦", "😶‍🌫️", "🧑‍💻", "🎉", "🔥", "1️⃣", "🏳️‍🌈", "🤖"]
ACCENTED = ["café", "naïve", "Ångström", "façade", "Ærø", "Tiếng Việt", "über", "coöperate", "crème brûlée",
            "e\u0301te\u0301", "n\u0303o"]


def prose(rng, n):
    out = []
    while n > 0:
        k = rng.randint(6, 22)
        words = [rng.choice(WORDS) for _ in range(k)]
        if rng.random() < 0.2:
            words.insert(rng.randrange(k), rng.choice(ACCENTED))
        if rng.random() < 0.3:
            words.insert(rng.randrange(k), str(rng.randint(0, 100000)))
        s = " ".join(words)
        s = s[0].upper() + s[1:] + rng.choice([".", ".", ".", "!", "?", ","]) + rng.choice([" ", " ", "\n", "\n\n"])
        out.append(s)
        n -= len(s.encode())
    return "".join(out)


def code(rng, n):
    out = []
    while n > 0:
        a, b, c = (rng.choice(IDENTS) + rng.choice(["", "_" + rng.choice(IDENTS), str(rng.randint(0, 9))])
                   for _ in range(3))
        ind = "    " * rng.randint(0, 3)
        s = rng.choice([
            f"{ind}for (int i = 0; i < {a}; i++) {{ {b}[i] = {c}[i] * {rng.randint(2, 64)}; }}\n",
            f"{ind}if {a} is not None and len({b}) > {rng.randint(0, 999)}:\n{ind}    return {c}({a}, {b})\n",
            f"{ind}def {a}(self, {b}, {c}=None):\n{ind}    \"\"\"Compute {a} from {b}.\"\"\"\n",
            f"{ind}{{\"{a}\": [{rng.randint(0, 99)}, {rng.random():.4f}], \"{b}\": \"{c}\"}},\n",
            f"{ind}static int {a}(const char *{b}, size_t {c}) {{ return {b}[{c} - 1] == '\\n'; }}\n",
            f"{ind}// {a}: {rng.choice(WORDS)} {rng.choice(WORDS)} {b} -> {c}\n",
            f"{ind}{a} = {b}.get(\"{c}\", 0x{rng.randint(0, 65535):04x}) + {rng.randint(0, 9999)}\n",
        ])
        out.append(s)
        n -= len(s.encode())
    return "".join(out)


def cjk(rng, n):
    out = []
    while n > 0:
        s = "".join(rng.choice(CJK) for _ in range(rng.randint(5, 40))) + rng.choice(["。", "，", "！", "？", "\n"])
        out.append(s)
        n -= len(s.encode())
    return "".join(out)


def emoji(rng, n):
    out = []
    while n > 0:
        s = rng.choice(EMOJI) * rng.randint(1, 3) + rng.choice([" ", "", " ok ", "!", "\n"])
        out.append(s)
        n -= len(s.encode())
    return "".join(out)


def mixed_text(size, seed=1234):
    rng = random.Random(seed)
    parts = []
    total = 0
    kinds = [(prose, 0.45), (code, 0.30), (cjk, 0.17), (emoji, 0.08)]
    while total < size:
        r = rng.random()
        for fn, p in kinds:
            if r < p:
                break
            r -= p
        s = fn(rng, rng.randint(200, 2000))
        parts.append(s)
        total += len(s.encode())
    return "".join(parts).encode()[:size].decode("utf-8", "ignore")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minfer", default=os.environ.get("MINFER_BIN", os.path.join(here, "..", "build", "minfer")))
    ap.add_argument("--fixtures", default=os.environ.get("MINFER_FIXTURES", os.path.join(here, "..", "..", "shared", "fixtures")))
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--save", help="also write the generated text to this file")
    args = ap.parse_args()
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from tokenizers import Tokenizer

    text = mixed_text(args.size)
    data = text.encode()
    if args.save:
        with open(args.save, "wb") as f:
            f.write(data)
    gguf = os.path.join(args.fixtures, "models", "vocab-qwen3.gguf")
    hf = Tokenizer.from_file(os.path.join(args.fixtures, "tokenizers", "qwen3", "tokenizer.json"))

    best_hf = float("inf")
    for _ in range(args.runs):
        t0 = time.perf_counter()
        hf_ids = hf.encode(text, add_special_tokens=False).ids
        best_hf = min(best_hf, time.perf_counter() - t0)

    # Hugging Face on the same text cut into lines, as one batch on its one thread (RAYON_NUM_THREADS=1):
    # how fast it is without one huge input string (ids differ slightly at the cuts).
    lines = text.splitlines(keepends=True)
    best_hf_lines = float("inf")
    for _ in range(args.runs):
        t0 = time.perf_counter()
        hf.encode_batch(lines, add_special_tokens=False)
        best_hf_lines = min(best_hf_lines, time.perf_counter() - t0)

    with tempfile.NamedTemporaryFile(suffix=".txt") as f:
        f.write(data)
        f.flush()
        r = subprocess.run([args.minfer, "tokenize", gguf, "--file", f.name, "--bench", str(args.runs)],
                           capture_output=True, text=True, check=True)
        line = r.stdout.strip()
        best_mf = float(line.split("best of")[1].split(":")[1].split("ms")[0]) / 1e3
        ids = subprocess.run([args.minfer, "tokenize", gguf, "--file", f.name, "--ids"], capture_output=True,
                             text=True, check=True).stdout
    same = [int(x) for x in ids.strip()[1:-1].split(",")] == hf_ids
    mb = len(data) / 1e6
    print(f"text: {len(data)} bytes mixed (prose, code, CJK, emoji), {len(hf_ids)} tokens; ids identical: {same}")
    print(f"hf tokenizers: {best_hf * 1e3:8.1f} ms  {mb / best_hf:7.2f} MB/s")
    print(f"hf, by line:   {best_hf_lines * 1e3:8.1f} ms  {mb / best_hf_lines:7.2f} MB/s  ({len(lines)} lines, one batch)")
    print(f"minfer:        {best_mf * 1e3:8.1f} ms  {mb / best_mf:7.2f} MB/s")
    print(f"ratio (minfer / hf throughput): {best_hf / best_mf:.2f}x  (vs hf by line: {best_hf_lines / best_mf:.2f}x)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
