#!/usr/bin/env python3
"""Write viz/samples.js, the canned samples of the graph viewer's "Select a sample model" menu: for a
few fixture models, one live run of `minfer viz` (its graphs and every node event; offline the page
lays them out with dagre) stored as a "minfer-viz-sample" object, so the page shows real data offline too.

    python3 tools/viz_samples.py [--bin build/minfer] [--fixtures ../shared/fixtures]"""
import argparse
import json
import os
import re
import subprocess
import urllib.parse
import urllib.request

SAMPLES = [("mini-qwen2 Q8_0", "mini-qwen2.Q8_0.gguf"), ("mini-qwen3 Q4_K", "mini-qwen3.Q4_K.gguf"),
           ("mini-llama Q4_0", "mini-llama.Q4_0.gguf")]
PROMPT, N = "The capital of France is", 3


def get(url):
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read().decode()


def sample(bin_, model, name):
    p = subprocess.Popen([bin_, "viz", model, "--port", "0", "-t", "1", "--no-probe"], stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"listening on (http://\S+)", p.stdout.readline()).group(1)
        events = [json.loads(line[6:]) for line in get(f"{url}/api/run?prompt={urllib.parse.quote(PROMPT)}&n={N}").splitlines()
                  if line.startswith("data: ")]
        graphs = {e["stage"]: e for e in events if e["type"] == "graph"}
        runs, tokens, generated = [], [], []
        for e in events:
            if e["type"] == "start":
                tokens = e["tokens"]
            elif e["type"] == "pass":
                runs.append({"index": len(runs), "kind": e["kind"], "n_tokens": e["n_tokens"], "graph_tokens": e["graph_tokens"], "nodes": []})
            elif e["type"] == "node":
                e = {k: v for k, v in e.items() if k != "type"}
                runs[-1]["nodes"].append(e)
            elif e["type"] == "pass_end":
                runs[-1]["logits_top5"] = e["top5"]
            elif e["type"] == "token":
                generated.append({"id": e["id"], "text": e["text"]})
        return {"format": "minfer-viz-sample", "name": name, "prompt": PROMPT, "tokens": tokens, "generated": generated,
                "graph": graphs["prefill"]["graph"], "decode_graph": graphs["decode"]["graph"],
                "trace": {"format": "minfer-trace", "version": 1, "runs": runs}}
    finally:
        p.terminate()
        p.wait()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(here, "../build/minfer"))
    ap.add_argument("--fixtures", default=os.path.join(here, "../../shared/fixtures"))
    a = ap.parse_args()
    out = [sample(a.bin, os.path.join(a.fixtures, "models", f), name) for name, f in SAMPLES]
    with open(os.path.join(here, "../viz/samples.js"), "w") as f:
        f.write("// samples.js: canned runs of fixture models for the sample menu; written by tools/viz_samples.py.\n")
        f.write("window.MINFER_SAMPLES = " + json.dumps(out, separators=(",", ":")) + ";\n")


if __name__ == "__main__":
    main()
