#!/usr/bin/env python3
"""compare_llama.py: minfer against llama.cpp on the same synthetic model files, in one run.

Makes benchmark models of real shapes on its own (tools/mkmodel.py writes an F16 file with random
weights, `minfer quantize` makes each type; both are cached by shape and type in --models-dir), then
runs `minfer bench` and, when given a llama-bench binary, llama-bench on the same files with the same
settings. The two programs take turns (--rounds rounds, each program -r repetitions per round, the
order flipping every round), so load on a shared machine falls on both. Prints one table with
tokens/s of both, the ratio minfer / llama.cpp, and each program's peak resident memory (from wait4)
for the same model and context, under a header naming the CPU and the kernels each program ran.

-d runs every test at those depths in both programs (llama-bench's "pp512 @ d4096"); --llama-fa 0,1
runs llama-bench with flash attention off and on, and the table compares minfer with llama.cpp's
better setting per test (the column "llama.cpp fa" says which). --order fast (or MINFER_ORDER) runs
minfer in its fast float order (the header says which). --isa (or MINFER_ISA) picks minfer's
kernels, e.g. avx2 on an AVX-512 machine against a llama.cpp built for AVX2 only (--llama-label names
that build in the header).

  compare_llama.py --minfer build/minfer [--llama-bench PATH] --shape qwen2-0.5b --types Q4_0,Q8_0,Q4_K_M
                   [-p 512] [-n 128] [-d 0,4096] [--llama-fa 0,1] [--isa avx2] [-t 2] [-r 2] [--rounds 2]
                   [--no-mmap] [--models-dir DIR] [--out FILE.md]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def load_avg():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "nan"


def make_model(args, shape, qtype):
    """Path of the cached <shape>-<qtype>.gguf, making the F16 base and the quantized file if absent."""
    os.makedirs(args.models_dir, exist_ok=True)
    base = os.path.join(args.models_dir, f"{shape}-F16.gguf")
    # Files quantized by llama-quantize are cached under their own name.
    out = os.path.join(args.models_dir, f"{shape}-{qtype}{'.llamaq' if args.llama_quantize else ''}.gguf")
    if os.path.exists(out):
        return out
    if not os.path.exists(base):
        log(f"writing {base}")
        subprocess.run([sys.executable, os.path.join(HERE, "mkmodel.py"), "--shape", shape, "--ftype", "f16", base],
                       check=True)
    if qtype.upper() == "F16":
        return base
    log(f"quantizing {base} -> {out}")
    if args.llama_quantize:
        cmd = [args.llama_quantize, base, out, qtype, str(args.quant_threads)]
    else:
        cmd = [args.minfer, "quantize", "-t", str(args.quant_threads), base, out, qtype]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return out


def run_with_rss(cmd, env=None):
    """Run cmd with its own wait4, so its peak RSS is its own (not the maximum over all children)."""
    t0 = time.time()
    out_path = f"/tmp/compare_llama.{os.getpid()}.out"
    err_path = out_path + ".err"
    with open(out_path, "wb") as fo, open(err_path, "wb") as fe:
        pid = os.posix_spawn(cmd[0], cmd, env or os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, fo.fileno(), 1), (os.POSIX_SPAWN_DUP2, fe.fileno(), 2)])
        _, status, ru = os.wait4(pid, 0)
    out = open(out_path, "rb").read().decode(errors="replace")
    err = open(err_path, "rb").read().decode(errors="replace")
    os.unlink(out_path)
    os.unlink(err_path)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({code}):\n{err[-2000:]}")
    return out, ru.ru_maxrss * 1024, time.time() - t0


def llama_no_mmap_flags(llama_bench):
    """llama-bench's way to read the model instead of mapping it: newer builds have --load-mode, older -mmp."""
    r = subprocess.run([llama_bench, "--help"], capture_output=True, text=True)
    return ["-lm", "none"] if "--load-mode" in r.stdout + r.stderr else ["-mmp", "0"]


def parse_bench_json(text):
    """Both programs print a JSON array of tests; llama-bench may print log lines before it."""
    start = text.find("[")
    if start < 0:
        raise RuntimeError(f"no JSON in output:\n{text[-2000:]}")
    return json.loads(text[start:])


def test_name(t):
    """llama-bench's name: pp512, tg128, and " @ d4096" after it at a depth."""
    name = f"pp{t['n_prompt']}" if t["n_prompt"] else f"tg{t['n_gen']}"
    return name + (f" @ d{t['n_depth']}" if t.get("n_depth") else "")


def cpu_model():
    """The processor's model name (Linux /proc/cpuinfo) and, on x86, its family and model numbers
    (minfer's cpu_info gives the same), or "unknown"."""
    name, fam, model = None, None, None
    try:
        for line in open("/proc/cpuinfo"):
            key, _, val = line.partition(":")
            key, val = key.strip(), val.strip()
            if key == "model name" and name is None:
                name = val
            elif key == "cpu family" and fam is None:
                fam = val
            elif key == "model" and model is None:
                model = val
            elif not line.strip() and name is not None:
                break
    except OSError:
        pass
    if fam is not None and model is not None:
        return f"{name or 'unknown'} (family {fam}, model {model})"
    return name or "unknown"


def header(results, args):
    """Where the figures come from: the CPU, the kernels minfer ran, the llama.cpp build."""
    mf_rows = [e["row"] for r in results.values() for e in r.get("minfer", {"tests": {}})["tests"].values()]
    ll_rows = [e["row"] for r in results.values() for e in r.get("llama.cpp", {"tests": {}})["tests"].values()]
    isa = sorted({r.get("isa", "?") for r in mf_rows}) or ["?"]
    cpu = next((r["cpu_info"] for r in mf_rows if r.get("cpu_info")), None) or getattr(args, "cpu", None) or cpu_model()
    line = f"CPU: {cpu}; minfer kernels: {', '.join(isa)}"
    if getattr(args, "isa", None):
        line += f" (MINFER_ISA={args.isa})"
    order = getattr(args, "order", None)
    line += f"; float order: {order or 'exact'}" + (" (MINFER_ORDER)" if order else "")
    if ll_rows:
        ll = ll_rows[0]
        line += (f"; llama.cpp: {getattr(args, 'llama_label', None) or 'llama-bench'}, build "
                 f"{ll.get('build_commit', '?')} ({ll.get('build_number', '?')}), its CPU: {ll.get('cpu_info', '?')}")
    return line


def llama_best(e):
    """The llama.cpp setting (flash attention value) with the best mean, its samples."""
    fa, samples = max(e["by_fa"].items(), key=lambda kv: stats(kv[1])[0])
    return fa, samples


def stats(samples):
    n = len(samples)
    mean = sum(samples) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in samples) / (n - 1)) if n > 1 else 0.0
    return mean, sd


def render(results, started, loads, args):
    """The markdown table. Best-of columns beside the means: on a shared machine other work only ever
    slows a run down, so the fastest repetition is the least disturbed one."""
    lines = [f"minfer vs llama.cpp, {started}; threads {args.t}; {args.rounds} rounds x {args.r} repetitions per "
             f"program, alternating; 1-minute load average during the run: {min(loads, key=float)}.."
             f"{max(loads, key=float)} "
             f"({os.cpu_count()} CPUs)", header(results, args), ""]
    lines += ["| model | test | minfer t/s | llama.cpp t/s | ratio | best minfer | best llama.cpp | ratio of best "
              "| minfer achieved (best) | minfer peak RSS | llama.cpp peak RSS | llama.cpp fa |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for path, res in results.items():
        mf = res.get("minfer", {"tests": {}})
        ll = res.get("llama.cpp", {"tests": {}})
        for tname, e in mf["tests"].items():
            m_mean, m_sd = stats(e["samples"])
            m_best = max(e["samples"])
            row = e["row"]
            # a prompt computes the output projection for its last token only
            per_tok = (row["macs_per_token"] - row.get("macs_output", 0) + row.get("macs_output", 0) / row["n_prompt"]
                       if row["n_prompt"] else row["bytes_per_token"])
            ach = f"{per_tok * m_best / 1e9:.1f} {'GMAC/s' if row['n_prompt'] else 'GB/s'}"
            fa = "-"
            if tname in ll["tests"]:
                fa, ls = llama_best(ll["tests"][tname])
                if len(ll["tests"][tname]["by_fa"]) > 1:
                    fa = f"{fa} (best of {','.join(ll['tests'][tname]['by_fa'])})"
                l_mean, l_sd = stats(ls)
                l_best = max(ls)
                lcol, ratio = f"{l_mean:.2f} ± {l_sd:.2f}", f"{m_mean / l_mean:.2f}x"
                lbest, rbest = f"{l_best:.2f}", f"{m_best / l_best:.2f}x"
                lrss = f"{ll['rss'] / 2**20:.0f} MiB"
            else:
                lcol = ratio = lbest = rbest = lrss = "-"
            lines.append(f"| {os.path.basename(path)} | {tname} | {m_mean:.2f} ± {m_sd:.2f} | {lcol} | {ratio} | "
                         f"{m_best:.2f} | {lbest} | {rbest} | {ach} | {mf['rss'] / 2**20:.0f} MiB | {lrss} | {fa} |")
    pages = [f"{os.path.basename(p)}: {r['pages']}" for p, r in results.items() if r.get("pages")]
    if pages:
        lines += ["", "Page cache of each file after the untimed first load (huge: 2 MiB pages; reloaded: read "
                  "again into them; small: none to be had; read: -mmp 0): " + ", ".join(pages) + "."]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minfer", help="the minfer binary")
    ap.add_argument("--llama-bench", help="a llama-bench binary (omit to measure minfer only)")
    ap.add_argument("--shape", action="append", help="tools/mkmodel.py shape (repeatable; default qwen2-0.5b)")
    ap.add_argument("--types", default="Q4_0,Q8_0,Q4_K_M", help="comma-separated minfer quantize types")
    ap.add_argument("--model", action="append", default=[], help="an existing GGUF file to add (repeatable)")
    ap.add_argument("-p", default="512", help="prompt lengths, comma-separated")
    ap.add_argument("-n", default="128", help="generation lengths, comma-separated")
    ap.add_argument("-d", help="depths (tokens already in the cache), comma-separated; passed to both programs")
    ap.add_argument("--llama-fa", help="llama-bench's -fa values, e.g. 0,1: the table takes the better per test")
    ap.add_argument("--order", default=os.environ.get("MINFER_ORDER"), choices=["exact", "fast"],
                    help="minfer's float order (MINFER_ORDER for its runs; default: env or exact)")
    ap.add_argument("--isa", default=os.environ.get("MINFER_ISA"),
                    help="minfer's kernels (MINFER_ISA for its runs: avx2, avx512, scalar; default: env or auto)")
    ap.add_argument("--llama-label", help="what the llama.cpp build is, for the header (e.g. 'AVX2-only build')")
    ap.add_argument("-t", default="2", help="threads")
    ap.add_argument("-r", type=int, default=2, help="repetitions per program per round")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of alternating runs")
    ap.add_argument("--no-mmap", action="store_true",
                    help="both programs read the model into memory instead of mapping it (minfer -mmp 0; "
                         "llama-bench -lm none, or -mmp 0 in older builds)")
    ap.add_argument("--models-dir", default=os.environ.get("MINFER_BENCH_MODELS", "/work/bench-models"))
    ap.add_argument("--quant-threads", type=int, default=2)
    ap.add_argument("--llama-quantize", help="make the quantized files with this llama-quantize binary instead "
                    "of minfer quantize (its type mixtures differ a little, e.g. for tied embeddings)")
    ap.add_argument("--mem-bw", type=float, help="passed to minfer bench (GB/s)")
    ap.add_argument("--peak-gmacs", type=float, help="passed to minfer bench (GMAC/s)")
    ap.add_argument("--out", help="also write the markdown table here")
    ap.add_argument("--json", help="write every sample of both programs here")
    ap.add_argument("--from-json", help="print the table of an earlier run's --json file and exit")
    args = ap.parse_args()
    if args.from_json:
        d = json.load(open(args.from_json))
        args.t, args.rounds, args.r = d["args"]["t"], d["args"]["rounds"], d["args"]["r"]
        args.isa, args.llama_label = d["args"].get("isa"), d["args"].get("llama_label")
        args.order = d["args"].get("order")
        args.cpu = d.get("cpu")
        print(render(d["results"], d["started"], d["loads"], args))
        return
    args.minfer = os.path.abspath(args.minfer)

    models = list(args.model)
    for shape in args.shape or ([] if args.model else ["qwen2-0.5b"]):
        for qt in filter(None, (x.strip() for x in args.types.split(","))):
            models.append(make_model(args, shape, qt))

    common = ["-p", args.p, "-n", args.n, "-t", args.t, "-r", str(args.r)] + (["-d", args.d] if args.d else [])
    mf_env = dict(os.environ)
    if args.isa:
        mf_env["MINFER_ISA"] = args.isa
    if args.order:
        mf_env["MINFER_ORDER"] = args.order
    mf_cmd = [args.minfer, "bench", *common, "--json"] + (["-mmp", "0"] if args.no_mmap else [])
    if args.mem_bw:
        mf_cmd += ["--mem-bw", str(args.mem_bw)]
    if args.peak_gmacs:
        mf_cmd += ["--peak-gmacs", str(args.peak_gmacs)]
    ll_cmd = [os.path.abspath(args.llama_bench), *common, "-o", "json"] if args.llama_bench else None
    if ll_cmd and args.llama_fa:
        ll_cmd += ["-fa", args.llama_fa]
    if ll_cmd and args.no_mmap:
        ll_cmd += llama_no_mmap_flags(ll_cmd[0])

    loads = [load_avg()]
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    # results[model][program] = {"tests": {name: {"samples": [...], "row": last json row}}, "rss": max}
    results = {}
    for path in models:
        res = results[path] = {}
        # One untimed minfer load first: it reads the file into the page cache, in 2 MiB pages where
        # the cache held it in small ones (see src/gguf/gguf_pages.c), so both programs' timed runs
        # start from the same cache.
        out, _, _ = run_with_rss(mf_cmd[:2] + ["-m", path, "-p", "0", "-n", "1", "-r", "1", "-t", args.t, "--json"],
                                 mf_env)
        res["pages"] = parse_bench_json(out)[0].get("pages", "?")
        log(f"[{os.path.basename(path)}] page cache: {res['pages']}")
        for rnd in range(args.rounds):
            progs = [("minfer", mf_cmd)] + ([("llama.cpp", ll_cmd)] if ll_cmd else [])
            if rnd % 2:
                progs.reverse()
            for name, cmd in progs:
                full = cmd[:2] + ["-m", path] + cmd[2:] if name == "minfer" else cmd[:1] + ["-m", path] + cmd[1:]
                log(f"[{os.path.basename(path)} round {rnd + 1}/{args.rounds}] {name} (load {load_avg()})")
                out, rss, secs = run_with_rss(full, mf_env if name == "minfer" else None)
                loads.append(load_avg())
                r = res.setdefault(name, {"tests": {}, "rss": 0, "seconds": 0.0})
                r["rss"] = max(r["rss"], rss)
                r["seconds"] += secs
                for t in parse_bench_json(out):
                    e = r["tests"].setdefault(test_name(t), {"samples": [], "row": t, "by_fa": {}})
                    e["samples"] += t["samples_ts"]
                    e["by_fa"].setdefault(str(t.get("flash_attn", "-")), []).extend(t["samples_ts"])
                    e["row"] = t

    table = render(results, started, loads, args)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"started": started, "loads": loads, "minfer_cmd": mf_cmd, "llama_cmd": ll_cmd,
                       "args": {"t": args.t, "rounds": args.rounds, "r": args.r, "isa": args.isa, "order": args.order,
                                "llama_label": args.llama_label}, "cpu": cpu_model(),
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
