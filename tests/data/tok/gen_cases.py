#!/usr/bin/env python3
"""Generate tests/data/tok/qwen3_cases.json: tokenizer test strings (Unicode edge cases, NFD/NFC input,
emoji sequences, CJK, long whitespace and digit runs, code, special tokens inside text, and seeded
random mixtures) with the ids Hugging Face `tokenizers` gives for them using the Qwen3
tokenizer.json (special tokens parsed, and as plain text) and their NFC form.
Usage: tests/data/tok/gen_cases.py [FIXTURES_DIR]  (default ../shared/fixtures beside the repository)
"""
import json
import os
import random
import sys
import unicodedata

from tokenizers import Tokenizer, normalizers

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "..", "shared", "fixtures")

FIXED = [
    # plain text and contractions
    "Hello world", " Hello world", "Hello, World!", "I'm sure you'll see they've done it, isn't it?",
    "DON'T SHOUT. WE'LL SEE. THEY'RE HERE. I'D GO. YOU'VE WON. SHE'S OK. I'M IN.", "x'ſx 'ſ 'S 'Ll 'rE",
    "rock'n'roll", "''s '''", "'", "'s", " 's", "a'b'c'd", "l'été", "O'Neil's", "  'tis", "\t'll",
    # whitespace
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n", "\n ", " \n \n ", "\t\n\t",
    "a  b", "a   b", "a\t\tb", "a \t b", "a\n\nb", "a \n\n  b", "a\r\n\r\n b", "end   ", "end\n\n",
    " " * 1000, " " * 999 + "x", "\t" * 300 + "y", "\n" * 500, "\r\n" * 200 + "z", " \u00a0 \u3000 x",
    "\u2003\u2003word", "\u3000\u3000中文", "a\u00a0b", "a\u2028b\u2029c", "\u0085next", "\x0b\x0c vt ff",
    "x \u200b y", "tabs\tand spaces  mixed\t \t end",
    # digits and numbers
    "0", "12", "123", "1234", "12345678901234567890", "3.14159", "1,000,000", "-42", "1e-9", "0x1F",
    "9" * 1000, "٠١٢٣٤٥٦٧٨٩", "０１２３４５", "²³¹ ½ ¾ ⅓", "Ⅻ ⅻ", "১২৩", "x²+y²=z²", "v1.2.3-rc4",
    "2024-01-15T10:30:00Z", "$100.00 €50 ¥1000", "100%", "#1 #2", "a1b2c3", "12ab34cd",
    # code
    "def f(x):\n    return x + 1\n", "int main(void) {\n\treturn 0;\n}\n",
    "for (int i = 0; i < n; i++) { a[i] = b[i] * 2; }", "    if x:\n        y()\n",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}", "<div class=\"x\">&amp;</div>",
    "SELECT * FROM t WHERE id = 42;", "x => x * 2; // comment", "#include <stdio.h>\n",
    "fn main() -> Result<(), Box<dyn Error>> {}", "a->b::c..d...e", "!==", "===", "<<=>>=", "/* */",
    "path/to/file.txt", "https://example.com/a?b=c&d=e#f", "user@example.com", "C:\\Windows\\System32",
    "```python\nprint('hi')\n```", "| a | b |\n|---|---|", "\\n\\t\\\\", "$$E=mc^2$$", "@decorator\ndef g(): pass",
    # CJK and other scripts
    "你好，世界！", "我爱自然语言处理。", "日本語のテキストです。", "カタカナとひらがな", "한국어 텍스트입니다",
    "中文English混合text", "繁體中文測試", "𠀀𠀁𠀂 extension B", "〇一二三", "ｈｅｌｌｏ　ｗｏｒｌｄ",
    "нещо на Български", "Привет, мир!", "Γειά σου Κόσμε", "שלום עולם", "مرحبا بالعالم", "नमस्ते दुनिया",
    "สวัสดีชาวโลก", "កាន់តែពិសេសអាចខលចេញ", "ሰላም ዓለም", "Tiếng Việt có dấu", "Ärger über Öl", "ﬁﬂ ligatures",
    "ℌℍℎ ℂ ℝ", "Ω Ω Å Å K K", "µ μ", "ǅ ǈ ǋ", "İstanbul ıi", "ß ẞ", "Þorn ðeth", "ŉ", "ﬀ ﬃ",
    # NFD / NFC and combining marks
    unicodedata.normalize("NFD", "Café crème brûlée à la façon"), unicodedata.normalize("NFD", "Ångström Ölçü"),
    unicodedata.normalize("NFD", "Tiếng Việt có dấu"), unicodedata.normalize("NFD", "한국어"), "e\u0301", "e\u0301\u0323",
    "e\u0323\u0301", "a\u0300\u0301\u0302\u0303", "o\u0308\u0304", "\u0301 leading mark", "x" + "\u0301" * 50,
    "\u1100\u1161\u11a8", "\u1100\u1161", "\uac00\u11a8", "\u212b\u2126\u212a", "\u0344", "\u0958\u0959",
    "\u00c5\u030a", "A\u030a\u0323", "q\u0307\u0323", "\u1e0b\u0323", "\u0041\u0328\u0301", "i\u0307\u0301",
    "\u05d0\u05b8\u05bc", "\u0915\u093c", "\u0b47\u0b3e", "\u0bc6\u0bbe", "\u0cc6\u0cc2\u0cd5", "\u1025\u102e",
    "\u3099\u304b", "\u304b\u3099", "\u30cf\u309a", "\uff76\uff9e", "Z\u0335\u0341\u0313a\u0336\u0358l", "g\u0303o",
    # emoji
    "🦙", "this is 🦙.cpp", "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
    "👨‍👩‍👧‍👦 family", "👍🏽👍🏿", "🇺🇸🇯🇵🇩🇪", "1️⃣ #️⃣", "❤️ ❤", "🏳️‍🌈", "😀😃😄😁😆😅😂🤣", "🧑‍💻 coding",
    "emoji🙂inside", "♀️♂️", "🫠🫡🫥", "ok👌.", "😀" * 100,
    # special tokens inside text
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "a<|endoftext|>b",
    "<|im_start|><|im_end|>", "<|im_start", "im_start|>", "<|im_start|", "<<|im_start|>>", "<|im_end|>x",
    "<think>\nreasoning\n</think>\n\nanswer", "<tool_call>{\"a\":1}</tool_call>", "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    "<|vision_start|><|image_pad|><|vision_end|>", "text <|endoftext|> more <|endoftext|>", "<|box_start|>(1,2)<|box_end|>",
    "[PAD151669]", "<|endoftext|><|endoftext|>", " <|im_end|> ", "\n<|im_start|>\n",
    # other edges
    "a" * 2000, "ab" * 700, "Supercalifragilisticexpialidocious", "pneumonoultramicroscopicsilicovolcanoconiosis",
    "!!!!!!!!!!", "?!?!", "...", "—–-", "«»“”‘’", "\x00", "a\x00b", "\x01\x02\x7f", "\ufeffBOM", "\ufffd",
    "\U0010fffd", "\ue000 private", "\U000e0041 tag", "ied 4 ½ months", "Äpfel", "w048 7tuijk dsdfhu",
]

FRAGMENTS = [
    "the", " quick", " brown", " fox", "'s", "'LL", " ", "  ", "\n", "\t", "\r\n", "123", "4567", "٣", "中文", "日本",
    "한국", "🦙", "👍🏽", "👨‍👩‍👧", "é", "e\u0301", "\u0301", "ǅ", "Ω", "\u212b", "(", ")", "{", "}", ";", "==", "->",
    "<|im_start|>", "<|im_end|>", "<think>", "<|endoftext|>", "<|", "|>", "\u3000", "\u00a0", "x", "Y", "ſ", "ﬁ",
    "....", "$", "%", "#", "@", "_", "__init__", "0x", "ff", "ü", "u\u0308", "\u1100", "\u1161", "\u11a8", "ไทย",
]


# The same vocabulary with the other pre-tokenizers minfer supports (tokenizer.ggml.pre values), as
# Hugging Face runs them: no normalizer; Llama 3 also emits a piece that is a token without merging.
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
             r"\s*[\r\n]+|\s+(?!\S)|\s+")
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
VARIANTS = {
    "llama3": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3_RE}, "behavior": "Isolated", "invert": False}, BYTE_LEVEL]},
    "gpt2": dict(BYTE_LEVEL, use_regex=True),
    "smollm": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                     dict(BYTE_LEVEL, use_regex=True)]},
}


def variant(fix, pre):
    with open(os.path.join(fix, "tokenizers", "qwen3", "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    j["normalizer"] = None
    j["pre_tokenizer"] = pre
    j["model"]["ignore_merges"] = pre is VARIANTS["llama3"]
    return Tokenizer.from_str(json.dumps(j))


def main():
    tok = Tokenizer.from_file(os.path.join(FIX, "tokenizers", "qwen3", "tokenizer.json"))
    plain = Tokenizer.from_file(os.path.join(FIX, "tokenizers", "qwen3", "tokenizer.json"))
    plain.encode_special_tokens = True
    variants = {name: variant(FIX, pre) for name, pre in VARIANTS.items()}
    nfc = normalizers.NFC()
    rng = random.Random(20261129)
    cases = list(FIXED)
    while len(cases) < 420:
        k = rng.randint(1, 24)
        cases.append("".join(rng.choice(FRAGMENTS) for _ in range(k)))
    out = []
    for s in cases:
        n = nfc.normalize_str(s)
        # Hugging Face's NFC tables predate Unicode 15 for a few recently added marks; keep only
        # strings where it agrees with Python's own NFC, so the expected ids are unambiguous.
        if n != unicodedata.normalize("NFC", s):
            print("skipped (HF NFC differs from unicodedata):", repr(s), file=sys.stderr)
            continue
        out.append({"text": s, "nfc": n, "ids": tok.encode(s, add_special_tokens=False).ids,
                    "ids_plain": plain.encode(s, add_special_tokens=False).ids,
                    **{"ids_" + k: v.encode(s, add_special_tokens=False).ids for k, v in variants.items()}})
    path = os.path.join(HERE, "qwen3_cases.json")
    with open(path, "w", encoding="ascii") as f:
        json.dump(out, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")
    print(f"{path}: {len(out)} cases")


if __name__ == "__main__":
    main()
