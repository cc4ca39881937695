#!/usr/bin/env python3
"""Writes src/chat/jinja_case_data.c: the Unicode tables behind minfer's Python-compatible string
methods (upper, lower, title, capitalize, isalpha, isalnum, wordcount's \\w), taken from the running
Python's own str methods so that templates transform text exactly as Hugging Face's jinja2 does.
  python3 tests/data/templates/gen_case_table.py src/chat/jinja_case_data.c"""
import sys, unicodedata

MAXCP = 0x110000

def ranges(pred):
    out, start = [], None
    for c in range(MAXCP + 1):
        ok = c < MAXCP and not (0xD800 <= c <= 0xDFFF) and pred(chr(c))
        if ok and start is None: start = c
        if not ok and start is not None:
            out.append((start, c - 1)); start = None
    return out

def maps(fn):
    simple, special = [], []
    for c in range(MAXCP):
        if 0xD800 <= c <= 0xDFFF: continue
        ch = chr(c); m = fn(ch)
        if m == ch: continue
        if len(m) == 1: simple.append((c, ord(m)))
        else: special.append((c, m))
    return simple, special

def pairs(name, items):
    body = ",".join("{0x%X,0x%X}" % p for p in items)
    lines, line = [], ""
    for tok in body.split("},{"):
        tok = tok.strip("{}")
        piece = "{" + tok + "},"
        if len(line) + len(piece) > 118: lines.append(line); line = ""
        line += piece
    if line: lines.append(line)
    return f"static const uint32_t {name}[][2] = {{\n" + "\n".join(lines) + "\n};\n"

def specials(name, items):
    rows = ",\n".join("    {0x%X, \"%s\"}" % (c, "".join("\\x%02X" % b for b in m.encode())) for c, m in items)
    return f"static const ju_special {name}[] = {{\n{rows}\n}};\n"

def main():
    up, up_sp = maps(str.upper)
    lo, lo_sp = maps(str.lower)
    # title case of a single character: only where it differs from upper (the digraphs, ligatures)
    ti = [(c, ord(chr(c).title())) for c in range(MAXCP) if not 0xD800 <= c <= 0xDFFF
          and len(chr(c).title()) == 1 and chr(c).title() != chr(c).upper()]
    ti_sp = [(c, chr(c).title()) for c in range(MAXCP) if not 0xD800 <= c <= 0xDFFF
             and len(chr(c).title()) > 1 and chr(c).title() != chr(c).upper()]
    cased = ranges(lambda ch: ch.islower() or ch.isupper() or ch.istitle())
    alpha = ranges(str.isalpha)
    numeric = ranges(lambda ch: ch.isnumeric() or ch.isdigit() or ch.isdecimal())
    # case-ignorable characters, as lower() sees them around a final capital sigma
    printable = ranges(str.isprintable)  # what repr() leaves unescaped
    # (seen through after a cased "A", and not itself making a sigma final after a space)
    ignorable = ranges(lambda ch: ("A" + ch + "\u03a3").lower()[-1] == "\u03c2" and (" " + ch + "\u03a3").lower()[-1] == "\u03c3")
    out = [f"""/* jinja_case_data.c: Unicode tables for the Python string semantics of chat templates (case
 * mapping, cased/alpha/numeric classes), generated from Python {sys.version.split()[0]} (Unicode
 * {unicodedata.unidata_version}) by tests/data/templates/gen_case_table.py; do not edit by hand. */
#include "chat/jinja_case.h"

"""]
    out.append(pairs("upper_map", up)); out.append(pairs("lower_map", lo)); out.append(pairs("title_map", ti))
    out.append(specials("upper_special", up_sp)); out.append(specials("lower_special", lo_sp)); out.append(specials("title_special", ti_sp))
    out.append(pairs("cased_ranges", cased)); out.append(pairs("alpha_ranges", alpha)); out.append(pairs("numeric_ranges", numeric))
    out.append(pairs("ignorable_ranges", ignorable))
    out.append(pairs("printable_ranges", printable))
    out.append("""
const ju_case_tables ju_case = {
    upper_map, sizeof upper_map / sizeof upper_map[0], lower_map, sizeof lower_map / sizeof lower_map[0],
    title_map, sizeof title_map / sizeof title_map[0],
    upper_special, sizeof upper_special / sizeof upper_special[0], lower_special, sizeof lower_special / sizeof lower_special[0],
    title_special, sizeof title_special / sizeof title_special[0],
    cased_ranges, sizeof cased_ranges / sizeof cased_ranges[0], alpha_ranges, sizeof alpha_ranges / sizeof alpha_ranges[0],
    numeric_ranges, sizeof numeric_ranges / sizeof numeric_ranges[0],
    ignorable_ranges, sizeof ignorable_ranges / sizeof ignorable_ranges[0],
    printable_ranges, sizeof printable_ranges / sizeof printable_ranges[0],
};
""")
    open(sys.argv[1], "w").write("".join(out))

main()
