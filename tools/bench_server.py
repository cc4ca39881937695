#!/usr/bin/env python3
"""bench_server.py: `minfer serve` against llama-server under concurrent streaming clients, in one run.

For each server (minfer, and llama-server when --llama-server gives its binary), on the same model,
slots (-np), context and threads, one server at a time:
  - N concurrent streaming clients (N in --clients, default 1,2,4,8), each with a fixed prompt of
    token ids (new to the server: no run reuses another's prompt, so none is a cache hit) and its
    own seed, --gen tokens each (ignore_eos): aggregate generated tokens/s over
    the run, time to first token p50/p99, inter-token latency p50/p99 (gaps between content events);
  - interference: --running streams (default 3) run; once they are generating, a newcomer sends a
    --long-prompt token prompt (default 2000). Reported: the running streams' p99 inter-token latency
    while the newcomer prefills against their p99 unloaded (the same streams without it), and the
    newcomer's time to first token against its time on an idle server.
Then one table with both servers and minfer / llama-server ratios. Both servers get the requests on
/v1/completions with a token-id prompt, so no chat template or tokenizer differs. Not a test: speed
on a shared machine is noisy; run it with nothing else running and read the ratios.

  bench_server.py --minfer build/minfer [--llama-server PATH] [--model FILE | --shape qwen2-0.5b --type Q4_0]
                  [-np 4] [-c 8192] [-t 2] [--gen 64] [--clients 1,2,4,8] [--out FILE.md]
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


# seconds a request may wait for its next bytes (--timeout): a stuck server ends the run with an error
REQUEST_TIMEOUT = 120


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(q / 100.0 * (len(xs) - 1)))))
    return xs[k]


class Backend:
    def __init__(self, name, cmd, port):
        self.name, self.port = name, port
        log(f"starting {name}: {' '.join(cmd)}")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 600
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {self.proc.returncode}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{name} did not become healthy")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def stream(port, prompt, n_gen, seed, out, start_evt=None, first_evt=None):
    """One streamed completion; out gets t0, the arrival time of each content event, and errors
    (a status other than 200, a connection error, nothing for --timeout seconds)."""
    if start_evt:
        start_evt.wait()
    try:
        stream_once(port, prompt, n_gen, seed, out, first_evt)
    except (OSError, http.client.HTTPException, ValueError) as e:
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        if first_evt:  # whoever waits for the first token is not left waiting by a stream that gave none
            first_evt.set()


def stream_once(port, prompt, n_gen, seed, out, first_evt):
    body = {"prompt": prompt, "max_tokens": n_gen, "stream": True, "ignore_eos": True, "temperature": 0.8,
            "seed": seed, "top_k": 40, "top_p": 0.95, "min_p": 0.05}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    t0 = time.perf_counter()
    out["t0"] = t0
    out["times"] = []
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        out["error"] = f"status {r.status}: {r.read()[:200]!r}"
        return
    while True:
        line = r.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        ev = json.loads(data)
        ch = ev.get("choices") or []
        if ch and ch[0].get("text"):
            out["times"].append(time.perf_counter())
            if first_evt and len(out["times"]) == 1:
                first_evt.set()
    c.close()


def prompts(n, length, vocab, seed=7):
    rng = random.Random(seed)
    return [[rng.randrange(100, vocab - 100) for _ in range(length)] for _ in range(n)]


def concurrent(port, n, args, vocab, seed):
    # prompts no earlier run sent (seed): every stream's prompt is computed, none comes from the cache
    ps = prompts(n, args.prompt, vocab, seed)
    outs = [dict() for _ in range(n)]
    go = threading.Event()
    ts = [threading.Thread(target=stream, args=(port, ps[i], args.gen, 1000 + i, outs[i], go)) for i in range(n)]
    for t in ts:
        t.start()
    t_start = time.perf_counter()
    go.set()
    for t in ts:
        t.join()
    t_end = time.perf_counter()
    errs = [o["error"] for o in outs if "error" in o]
    if errs:
        raise RuntimeError(errs[0])
    n_tok = sum(len(o["times"]) for o in outs)
    ttft = [o["times"][0] - o["t0"] for o in outs if o["times"]]
    itl = [b - a for o in outs for a, b in zip(o["times"], o["times"][1:])]
    return {"tps": n_tok / (t_end - t_start), "ttft50": pct(ttft, 50), "ttft99": pct(ttft, 99),
            "itl50": pct(itl, 50), "itl99": pct(itl, 99), "tokens": n_tok}


def interference(port, args, vocab):
    """The running streams' inter-token gaps with and without a long prompt arriving, and the
    newcomer's first-token time loaded and idle."""
    long_prompt = prompts(1, args.long_prompt, vocab, seed=99)[0]
    # the newcomer alone on an idle server (a different prompt each time: no prompt-cache hit)
    idle = {}
    stream(port, long_prompt, 4, 5, idle)
    if "error" in idle or not idle.get("times"):
        raise RuntimeError("interference, the newcomer alone: " + idle.get("error", "no tokens"))
    ttft_idle = idle["times"][0] - idle["t0"]

    def run(with_newcomer):
        ps = prompts(args.running, args.prompt, vocab, seed=11 if with_newcomer else 12)
        outs = [dict() for _ in ps]
        first = [threading.Event() for _ in ps]
        ts = [threading.Thread(target=stream, args=(port, ps[i], args.gen * 3, 2000 + i, outs[i], None, first[i]))
              for i in range(len(ps))]
        for t in ts:
            t.start()
        for e in first:
            e.wait()
        time.sleep(0.3)
        new = {}
        window = None
        if with_newcomer:
            lp = prompts(1, args.long_prompt, vocab, seed=100)[0]
            stream(port, lp, 4, 6, new)
            window = (new["t0"], new["times"][0] if new.get("times") else time.perf_counter())
        else:
            window = (0.0, float("inf"))  # unloaded: every gap of the run
        for t in ts:
            t.join()
        errs = [o["error"] for o in outs + [new] if "error" in o]
        if errs:
            raise RuntimeError("interference: " + errs[0])
        gaps = [b - a for o in outs for a, b in zip(o["times"], o["times"][1:]) if b >= window[0] and a <= window[1]]
        return gaps, (new["times"][0] - new["t0"]) if with_newcomer else None

    gaps_quiet, _ = run(False)
    gaps_loaded, ttft_loaded = run(True)
    return {"itl99_quiet": pct(gaps_quiet, 99), "itl99_loaded": pct(gaps_loaded, 99), "ttft_idle": ttft_idle,
            "ttft_loaded": ttft_loaded}


def model_vocab(path):
    try:
        import gguf
        r = gguf.GGUFReader(path)
        return len(r.fields["tokenizer.ggml.tokens"].data)
    except Exception:
        return 32000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minfer", default="build/minfer")
    ap.add_argument("--llama-server", help="a llama-server binary (omit to measure minfer only)")
    ap.add_argument("--model", help="a GGUF file (default: the --shape/--type benchmark model, made if absent)")
    ap.add_argument("--shape", default="qwen2-0.5b")
    ap.add_argument("--type", default="Q4_0")
    ap.add_argument("--models-dir", default=os.environ.get("MINFER_BENCH_MODELS", "/work/bench-models"))
    ap.add_argument("-np", type=int, default=4)
    ap.add_argument("-c", type=int, default=8192)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--gen", type=int, default=64, help="tokens generated per stream")
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens per stream")
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--running", type=int, default=3)
    ap.add_argument("--long-prompt", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds a request may wait for its next bytes before the run fails (default 120)")
    ap.add_argument("--out", help="also write the markdown table here")
    args = ap.parse_args()
    global REQUEST_TIMEOUT
    REQUEST_TIMEOUT = args.timeout

    model = args.model
    if not model:
        model = os.path.join(args.models_dir, f"{args.shape}-{args.type}.gguf")
        if not os.path.exists(model):
            subprocess.run([sys.executable, os.path.join(HERE, "compare_llama.py"), "--minfer", args.minfer,
                            "--shape", args.shape, "--types", args.type, "-p", "1", "-n", "1", "-r", "1",
                            "--rounds", "1", "--models-dir", args.models_dir], check=True, stdout=subprocess.DEVNULL)
    vocab = model_vocab(model)
    clients = [int(x) for x in args.clients.split(",")]
    servers = [("minfer", lambda port: [args.minfer, "serve", model, "--port", str(port), "-np", str(args.np),
                                        "-c", str(args.c), "-t", str(args.t)])]
    if args.llama_server:
        servers.append(("llama-server", lambda port: [args.llama_server, "-m", model, "--port", str(port), "-np",
                                                      str(args.np), "-c", str(args.c), "-t", str(args.t),
                                                      "--host", "127.0.0.1"]))
    results = {}
    for name, cmd in servers:
        port = free_port()
        b = Backend(name, cmd(port), port)
        try:
            concurrent(port, 1, args, vocab, 1)  # warm up
            res = {n: concurrent(port, n, args, vocab, 1000 + n) for n in clients}
            for n in clients:
                r = res[n]
                log(f"{name} {n} streams: {r['tps']:.1f} tokens/s, ttft p50 {r['ttft50']*1e3:.0f} ms, "
                    f"itl p50 {r['itl50']*1e3:.1f} p99 {r['itl99']*1e3:.1f} ms")
            res["interference"] = interference(port, args, vocab)
            log(f"{name} interference: {res['interference']}")
            results[name] = res
        finally:
            b.stop()

    sys.path.insert(0, HERE)
    from compare_llama import cpu_model  # the model name with the x86 family and model numbers
    cpu = cpu_model()
    lines = [f"model {os.path.basename(model)}, -np {args.np} -c {args.c} -t {args.t}, {args.prompt}-token prompts, "
             f"{args.gen} tokens per stream; CPU {cpu}", "",
             "| server | streams | tokens/s | vs 1 stream | ttft p50 ms | ttft p99 ms | itl p50 ms | itl p99 ms |"
             + (" minfer/llama tokens/s |" if len(results) > 1 else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|" if len(results) > 1 else "")]
    for name, res in results.items():
        for n in clients:
            r = res[n]
            ratio = ""
            if len(results) > 1:
                ratio = f" {results['minfer'][n]['tps'] / results['llama-server'][n]['tps']:.2f}x |" \
                    if name == "minfer" else " |"
            lines.append(f"| {name} | {n} | {r['tps']:.1f} | {r['tps'] / res[clients[0]]['tps']:.2f}x | "
                         f"{r['ttft50']*1e3:.0f} | {r['ttft99']*1e3:.0f} | {r['itl50']*1e3:.1f} | {r['itl99']*1e3:.1f} |"
                         + ratio)
    lines += ["", f"interference: {args.running} streams running, a {args.long_prompt}-token prompt arrives", "",
              "| server | running p99 itl quiet ms | while prefilling ms | ratio | newcomer ttft idle s | beside streams s | ratio |",
              "|---|---|---|---|---|---|---|"]
    for name, res in results.items():
        i = res["interference"]
        lines.append(f"| {name} | {i['itl99_quiet']*1e3:.1f} | {i['itl99_loaded']*1e3:.1f} | "
                     f"{i['itl99_loaded'] / i['itl99_quiet']:.2f}x | {i['ttft_idle']:.2f} | {i['ttft_loaded']:.2f} | "
                     f"{i['ttft_loaded'] / i['ttft_idle']:.2f}x |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
