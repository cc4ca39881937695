"""`minfer viz` in a real headless Chromium (selenium + chromedriver), one browser session for all
checks: the page loads without console errors, the Operators view draws one box per exported node,
the Pipeline view's stages and drill-down (layers, a layer's six stages, a stage's operators, Back),
a live run streams its events and ends showing the sampled tokens (the same ones the SSE stream
gives a plain HTTP client), the Shape flow page's computed shapes equal the exported ones (prefill
and decode, three architectures), and the offline page (file://, no server) opens a canned sample
and a graph file. Screenshots go to build/viz-screenshots/."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from serve_util import BIN, MODELS, SLOW

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402

SRC = os.environ.get("MINFER_SOURCE", os.path.join(os.path.dirname(__file__), "../.."))
SHOTS = os.path.join(os.path.dirname(os.path.abspath(BIN)), "viz-screenshots")
MODEL = os.path.join(MODELS, "mini-qwen2.Q8_0.gguf")
PROMPT = "The capital of France is"
# under the sanitizers: Graphviz's own leftover block is not minfer's (lsan-graphviz.supp)
os.environ.setdefault("LSAN_OPTIONS", "suppressions=" + os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsan-graphviz.supp"))


ENGINE = "document.querySelector('#ops-svg').dataset.engine"
PAGE = os.path.join(os.path.dirname(os.path.abspath(BIN)), "viz-page", "index.html")  # the build writes it
DAGRE = "/usr/share/nodejs/dagre/dist/dagre.min.js"


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.fixture(scope="module")
def viz():
    p = subprocess.Popen([BIN, "viz", MODEL, "--port", "0", "-t", "1", "--no-probe"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    line = p.stdout.readline()
    m = re.search(r"listening on (http://\S+)", line)
    if not m:
        p.kill()
        raise RuntimeError("minfer viz did not start: " + line + p.stderr.read())
    yield m.group(1)
    p.terminate()
    assert p.wait(timeout=30 * SLOW) == 0, p.stderr.read()[-4000:]


@pytest.fixture(scope="module")
def browser():
    chrome = find_chromium()
    if not chrome or not shutil.which("chromedriver"):
        pytest.skip("no chromium/chromedriver (scripts/deps.sh installs them)")
    o = webdriver.ChromeOptions()
    o.binary_location = chrome
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,900",
              "--allow-file-access-from-files"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=webdriver.ChromeService(executable_path=shutil.which("chromedriver")), options=o)
    os.makedirs(SHOTS, exist_ok=True)
    yield d
    d.quit()


def errors(d):
    return [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def wait(d, js, timeout=60):
    end = time.time() + timeout * SLOW
    while time.time() < end:
        v = d.execute_script("return " + js)
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for: " + js)


def click(d, css):
    d.find_element(By.CSS_SELECTOR, css).click()


def click_fresh(d, css, index):
    """Clicks the index-th element matching css, finding it again if a redraw replaced it meanwhile."""
    from selenium.common.exceptions import StaleElementReferenceException
    end = time.time() + 30 * SLOW
    while True:
        try:
            d.find_elements(By.CSS_SELECTOR, css)[index].click()
            return
        except StaleElementReferenceException:
            if time.time() > end:
                raise
            time.sleep(0.05)


def shot(d, name):
    d.save_screenshot(os.path.join(SHOTS, name + ".png"))


def get_json(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def sse(url):
    with urllib.request.urlopen(url, timeout=120) as r:
        return [json.loads(line[6:]) for line in r.read().decode().splitlines() if line.startswith("data: ")]


def test_page_views_and_live_run(viz, browser):
    d = browser
    d.get(viz + "/")
    graph = get_json(viz + "/api/graph?stage=prefill&n=8")
    n_layer = get_json(viz + "/api/info")["n_layer"]
    # Operators: one box per exported node, laid out by Graphviz
    wait(d, "document.querySelector('#ops-svg') && document.querySelector('#ops-svg').dataset.nodes")
    wait(d, ENGINE + " == 'graphviz'")
    assert int(d.execute_script("return document.querySelector('#ops-svg').dataset.nodes")) == len(graph["nodes"])
    assert len(d.find_elements(By.CSS_SELECTOR, ".op-node")) == len(graph["nodes"])
    # layers collapse to one box each and open one at a time, each laid out by Graphviz when asked for
    layer_of = lambda n: int(m.group(1)) if (m := re.search(r"-(\d+)(?: \(.*\))?$", n["name"])) else -1
    outside = sum(layer_of(n) < 0 for n in graph["nodes"])
    click(d, "#ops-collapse")
    wait(d, f"document.querySelector('#ops-svg').dataset.closed == '{n_layer}' && " + ENGINE + " == 'graphviz'")
    assert int(d.execute_script("return document.querySelector('#ops-svg').dataset.nodes")) == outside
    shot(d, "operators-collapsed")
    click(d, '[data-layer="1"]')
    wait(d, f"document.querySelector('#ops-svg').dataset.closed == '{n_layer - 1}' && " + ENGINE + " == 'graphviz'")
    assert int(d.execute_script("return document.querySelector('#ops-svg').dataset.nodes")) == outside + sum(layer_of(n) == 1 for n in graph["nodes"])
    click(d, "#ops-open-all")
    wait(d, f"document.querySelector('#ops-svg').dataset.nodes == '{len(graph['nodes'])}' && " + ENGINE + " == 'graphviz'")
    click_fresh(d, ".op-node", 7)
    assert graph["nodes"][7]["name"] in d.find_element(By.ID, "panel").text
    shot(d, "operators")

    # Pipeline: Input, Embedding, layers xN, Final RMSNorm, Logits, Sampler; drill down and back
    click(d, '[data-view="pipeline"]')
    stages = [e.get_attribute("data-stage") for e in d.find_elements(By.CSS_SELECTOR, "#pipeline .stage")]
    assert stages == ["input", "embedding", "layers", "final_norm", "logits", "sampler"]
    assert f"\u00d7 {n_layer}" in d.find_element(By.CSS_SELECTOR, '[data-stage="layers"]').text
    shot(d, "pipeline")
    click(d, '[data-stage="layers"]')
    assert len(d.find_elements(By.CSS_SELECTOR, "#pipeline .stage")) == n_layer
    click(d, '[data-stage="layer-0"]')
    labels = [e.text.split("\n")[0] for e in d.find_elements(By.CSS_SELECTOR, "#pipeline .stage")]
    assert labels == ["RMSNorm", "Attention", "+Residual", "RMSNorm", "FFN", "+Residual"]
    click(d, '[data-stage="attention"]')
    attn = [e.get_attribute("data-node") for e in d.find_elements(By.CSS_SELECTOR, "#pipeline .stage")]
    names = {str(n["id"]): n["name"] for n in graph["nodes"]}
    assert attn and all(names[i].endswith("-0") or "-0 " in names[i] for i in attn)
    assert any(names[i] == "attn-0" for i in attn)
    click(d, "#back-btn")
    assert len(d.find_elements(By.CSS_SELECTOR, "#pipeline .stage")) == 6
    click(d, "#back-btn")
    click(d, "#back-btn")
    assert len(d.find_elements(By.CSS_SELECTOR, "#pipeline .stage")) == 6

    # a live run: the page shows the tokens the stream gives any client (greedy: deterministic)
    n = 3
    ref = [e for e in sse(f"{viz}/api/run?prompt={urllib.parse.quote(PROMPT)}&n={n}") if e["type"] == "token"]
    assert len(ref) == n
    d.find_element(By.ID, "prompt").clear()
    d.find_element(By.ID, "prompt").send_keys(PROMPT)
    d.find_element(By.ID, "n-predict").clear()
    d.find_element(By.ID, "n-predict").send_keys(str(n))
    click(d, "#run-btn")
    wait(d, "document.getElementById('sampled').dataset.done")
    assert d.find_element(By.ID, "sampled").text == "sampled: " + "".join(t["text"] for t in ref)
    assert d.execute_script("return document.getElementById('sampled').dataset.lastToken") == str(ref[-1]["id"])
    passes = d.execute_script("return S.passes.map(p => [p.kind, p.nodes.size, p.top5.length])")
    executed = [x for x in graph["nodes"] if x["op"] not in ("input", "view")]
    assert [p[0] for p in passes] == ["prefill"] + ["decode"] * (n - 1)
    assert passes[0][1] == len(executed) - sum(x["op"] == "kv_store" for x in executed) and all(p[2] == 5 for p in passes)
    # node statistics arrived with times, bytes and heatmaps
    st = d.execute_script("const p = S.passes[0]; return [...p.nodes.values()].find(s => s.macs > 0)")
    assert st["t"] > 0 and st["bytes"] > 0 and st["heat"]["r"] >= 1 and st["nan"] == 0
    shot(d, "pipeline-after-run")
    click(d, '[data-view="operators"]')
    # the graph shown is now the decode pass's: its blocks are laid out by Graphviz on their way in
    # (the page redraws when each arrives), so wait for the final drawing before clicking in it
    wait(d, "document.querySelector('#ops-svg') && " + ENGINE + " == 'graphviz'")
    click_fresh(d, ".op-node", -1)
    assert "logits top-5" in d.find_element(By.ID, "panel").text
    assert "GB/s" in d.find_element(By.ID, "panel").text
    shot(d, "operators-after-run")

    # Shape flow: computed shapes equal the export, for prefill and decode graphs; Run plays to the end
    for stage in ("prefill", "decode"):
        d.execute_script(f"S.stage = '{stage}'; S.view = 'shapes'; render()")
        ok = d.find_element(By.ID, "shape-check")
        assert ok.get_attribute("data-ok") == "true", ok.text
        assert re.search(r"shape check: (\d+)/\1 ", ok.text)
    d.execute_script("S.stage = 'prefill'; S.sfDelay = 5; render()")
    click(d, "#sf-run")
    wait(d, "document.getElementById('sf-header').dataset.done")
    strip = d.find_element(By.ID, "sf-strip").text
    assert strip.endswith(ref[-1]["text"].strip()) or ref[-1]["text"].strip() == ""
    assert "KV cache" in d.find_element(By.ID, "sf-kv").text
    shot(d, "shape-flow")
    # the Chrome trace export, downloaded as a user gets it: an event per node event, one per pass,
    # each as the Trace Event Format has it (check_chrome_trace)
    downloads = os.path.join(SHOTS, "downloads")
    shutil.rmtree(downloads, ignore_errors=True)
    os.makedirs(downloads)
    d.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
    click(d, "#trace-export")
    path = os.path.join(downloads, "minfer-run.trace.json")
    end = time.time() + 30 * SLOW
    while not os.path.exists(path) and time.time() < end:
        time.sleep(0.05)
    time.sleep(0.2)
    trace = json.load(open(path))
    xs = check_chrome_trace(trace)
    assert len(xs) == sum(p[1] for p in passes) + len(passes) == d.execute_script("return S.lastChromeTrace") - 5
    assert [e["name"] for e in xs if e["cat"] == "pass"] == [f"pass {i} ({k}, {nt} tokens)" for i, (k, nt) in
                                                             enumerate(d.execute_script("return S.passes.map(p => [p.kind, p.n_tokens])"))]
    by_name = {n["name"] for n in graph["nodes"]}
    assert all(e["name"] in by_name for e in xs if e["cat"] != "pass")
    assert errors(d) == []


def check_chrome_trace(trace):
    """Every event of a Chrome trace export as the Trace Event Format (what Perfetto and chrome://tracing
    read) has it: a top-level object with a traceEvents list (displayTimeUnit "ms" or "ns" if present);
    complete events ("X") with a name, numeric ts and dur >= 0 in microseconds, integer pid and tid;
    metadata events ("M") naming the process and every thread used; complete events on one thread
    nested or disjoint, never overlapping partly. Returns the complete events."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    assert trace.get("displayTimeUnit", "ms") in ("ms", "ns")
    num = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")
    xs, named, threads = [], set(), set()
    for e in trace["traceEvents"]:
        assert isinstance(e["name"], str) and e["name"] and isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index", "process_sort_index"), e
            if e["name"].endswith("_name"):
                assert isinstance(e["args"]["name"], str) and e["args"]["name"], e
                named.add((e["name"], e["pid"], e["tid"] if e["name"] == "thread_name" else None))
            else:
                assert isinstance(e["args"]["sort_index"], int), e
        else:
            assert e["ph"] == "X", e
            assert num(e["ts"]) and num(e["dur"]) and e["ts"] >= 0 and e["dur"] >= 0, e
            assert "args" not in e or isinstance(e["args"], dict)
            assert isinstance(e.get("cat", ""), str)
            xs.append(e)
            threads.add((e["pid"], e["tid"]))
    for pid, tid in threads:
        assert ("thread_name", pid, tid) in named and ("process_name", pid, None) in named, (pid, tid)
        # on one thread, slices nest (a pass holds its nodes) or follow one another
        stack = []
        for e in sorted((e for e in xs if (e["pid"], e["tid"]) == (pid, tid)), key=lambda e: (e["ts"], -e["dur"])):
            while stack and e["ts"] >= stack[-1] - 1e-6:
                stack.pop()
            assert not stack or e["ts"] + e["dur"] <= stack[-1] + 1e-6, ("partly overlapping slices", e)
            stack.append(e["ts"] + e["dur"])
    return xs


def test_offline_samples_and_files(browser, tmp_path):
    d = browser
    # graph exports of the other architectures (Qwen3: QK-norm; llama) for the shape check
    files = []
    for f in ("mini-qwen3.Q4_K.gguf", "mini-llama.Q4_0.gguf"):
        for stage in ("prefill", "decode"):
            out = tmp_path / f"{f}.{stage}.json"
            r = subprocess.run([BIN, "run", os.path.join(MODELS, f), PROMPT, "-n", "1", "--dump-graph-json", str(out),
                                "--dump-graph-stage", stage], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            files.append(str(out))
    d.get("file://" + PAGE)
    assert d.find_element(By.ID, "run-btn").get_attribute("disabled")
    options = d.find_elements(By.CSS_SELECTOR, "#sample-select option")
    assert len(options) >= 2
    d.execute_script("const s = document.getElementById('sample-select'); s.value = '0'; s.dispatchEvent(new Event('change'))")
    samples = d.execute_script("return window.MINFER_SAMPLES.map(s => s.graph.nodes.length)")
    assert int(d.execute_script("return document.querySelector('#ops-svg').dataset.nodes")) == samples[0]
    assert d.execute_script("return " + ENGINE) == "dagre"  # offline: the page's own layout library
    assert all(r.startswith("file://") for r in d.execute_script("return performance.getEntriesByType('resource').map(e => e.name)"))
    assert d.execute_script("return S.passes.length") >= 2
    shot(d, "offline-sample")
    for path in files:
        d.find_element(By.ID, "file-input").send_keys(path)
        wait(d, f"/{os.path.basename(path)}/.test(document.getElementById('run-status').textContent)")
        n_nodes = len(json.load(open(path))["nodes"])
        assert int(d.execute_script("return document.querySelector('#ops-svg').dataset.nodes")) == n_nodes
        d.execute_script("S.view = 'shapes'; render()")
        ok = d.find_element(By.ID, "shape-check")
        assert ok.get_attribute("data-ok") == "true", (path, ok.text)
        d.execute_script("S.view = 'operators'; render()")
    # a graph and its trace together (the trace's statistics colour the graph), then a file dropped
    trace = tmp_path / "trace.json"
    graph = tmp_path / "graph.json"
    r = subprocess.run([BIN, "run", os.path.join(MODELS, "mini-qwen3.Q4_K.gguf"), PROMPT, "-n", "3",
                        "--dump-graph-json", str(graph)], capture_output=True, text=True,
                       env=dict(os.environ, MINFER_TRACE=str(trace)))
    assert r.returncode == 0, r.stderr
    runs = json.load(open(trace))["runs"]
    d.find_element(By.ID, "file-input").send_keys(f"{trace}\n{graph}")
    wait(d, "/opened/.test(document.getElementById('run-status').textContent) && S.passes.length > 0")
    assert d.execute_script("return S.passes.map(p => p.kind)") == [r["kind"] for r in runs]
    traced = d.execute_script("return document.querySelectorAll('.op-node text').length")
    assert "rms" in d.find_element(By.ID, "ops-svg").text and traced > 0
    shot(d, "offline-file")
    drop = files[1]
    d.execute_script("""const dt = new DataTransfer();
        dt.items.add(new File([arguments[0]], 'dropped.json', {type: 'application/json'}));
        document.getElementById('view').dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true}));""",
                     open(drop).read())
    wait(d, "/dropped.json/.test(document.getElementById('run-status').textContent)")
    assert d.execute_script("return S.graph().g.kind") == "decode"
    assert int(d.execute_script("return document.querySelector('#ops-svg').dataset.nodes")) == len(json.load(open(drop))["nodes"])
    assert errors(d) == []


def status_of(url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_api_bad_requests(viz):
    """Every bad request gets a 4xx naming what is wrong; the server keeps serving."""
    q = urllib.parse.quote
    cases = [
        (f"{viz}/api/run", None, 400, "prompt"),
        (f"{viz}/api/run?prompt=", None, 400, "prompt"),
        (f"{viz}/api/run?prompt=hi&n=0", None, 400, "n '0'"),
        (f"{viz}/api/run?prompt=hi&n=65", None, 400, "[1, 64]"),
        (f"{viz}/api/run?prompt=hi&n=2x", None, 400, "n '2x'"),
        (f"{viz}/api/run?prompt=hi&temp=-1", None, 400, "temp"),
        (f"{viz}/api/run?prompt=hi&n=%2B3", None, 400, "n '+3'"),
        (f"{viz}/api/run?prompt=hi&chat=yes", None, 400, "chat 'yes'"),
        (f"{viz}/api/run?prompt={q('x' * 20000)}", None, 400, "at most"),
        (f"{viz}/api/graph?stage=middle", None, 400, "prefill or decode"),
        (f"{viz}/api/graph?stage=prefill&n=1", None, 400, "[2, 512]"),
        (f"{viz}/api/graph?stage=prefill&n=513", None, 400, "[2, 512]"),
        (f"{viz}/no-such-file.js", None, 404, "no page asset"),
        (f"{viz}/api/layout", b"this is not dot {", 400, "graphviz"),
        (f"{viz}/api/layout", b"digraph g {" + b"".join(b"n%d;" % i for i in range(400)) + b"}", 400, "at most 300"),
    ]
    for url, body, want, text in cases:
        code, data = status_of(url, body, {"Content-Type": "text/vnd.graphviz"} if body is not None else None)
        assert code == want and text in data.decode(), (url[:80], code, data[:200])
    # a run too long for the context
    code, data = status_of(f"{viz}/api/run?prompt={q('word ' * 1100)}&n=4")
    assert code == 200 and b'"type":"error"' in data and b"need 1 to 1024" in data
    # while a run streams, a second one is refused with 429 (a run of 900 tokens: a few hundred ms)
    with urllib.request.urlopen(f"{viz}/api/run?prompt={q('word ' * 420)}&n=64", timeout=60) as first:
        first.readline()
        code, _ = status_of(f"{viz}/api/run?prompt=hi&n=1")
        assert code == 429
        rest = first.read().decode()
    assert '"type":"done"' in rest
    code, data = status_of(f"{viz}/api/layout", b"digraph g { a -> b; }", {"Content-Type": "text/vnd.graphviz"})
    assert code == 200 and set(json.loads(data)["nodes"]) == {"a", "b"}


def test_stop_during_run():
    """SIGTERM while a run streams: the run ends at its next node and the process exits 0."""
    p = subprocess.Popen([BIN, "viz", MODEL, "--port", "0", "-t", "1", "--no-probe", "--max-tokens", "4096", "-c", "8192"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = re.search(r"listening on (http://\S+)", p.stdout.readline()).group(1)
    with urllib.request.urlopen(f"{url}/api/run?prompt={urllib.parse.quote('word ' * 2000)}&n=4000", timeout=60) as r:
        r.readline()
        p.terminate()
        assert p.wait(timeout=20 * SLOW) == 0, p.stderr.read()


def test_assets_dagre_and_licences(viz):
    """dagre is served as the page's own asset, byte for byte the installed bundle, with its licences."""
    with urllib.request.urlopen(viz + "/dagre.min.js", timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/javascript") and r.read() == open(DAGRE, "rb").read()
    with urllib.request.urlopen(viz + "/licenses.txt", timeout=30) as r:
        text = r.read().decode()
    assert "dagre" in text and "Chris Pettitt" in text and "Permission is hereby granted" in text
    assert 'href="licenses.txt"' in urllib.request.urlopen(viz + "/", timeout=30).read().decode()
    assert open(os.path.join(os.path.dirname(PAGE), "licenses.txt")).read() == text


def test_28_layers(browser, tmp_path):
    """A 28-layer model (a small synthetic one of that depth): layers start collapsed, "open all layers"
    lays every layer out with Graphviz from one layout per distinct block structure (no fallback),
    live and offline (dagre) alike, in a few seconds."""
    model = tmp_path / "deep.gguf"
    subprocess.run(["python3", os.path.join(SRC, "tools/mkmodel.py"), "--arch", "qwen2", "--n-layer", "28", "--n-embd", "64",
                    "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128", "--n-vocab", "512", "--ctx", "512", "--ftype", "f16",
                    str(model)], check=True, capture_output=True)
    p = subprocess.Popen([BIN, "viz", str(model), "--port", "0", "-t", "1", "--no-probe"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"listening on (http://\S+)", p.stdout.readline()).group(1)
        graph = get_json(url + "/api/graph?stage=prefill&n=8")
        d = browser
        d.get(url + "/")
        wait(d, f"document.querySelector('#ops-svg') && document.querySelector('#ops-svg').dataset.closed == '28' && {ENGINE} == 'graphviz'")
        t0 = time.time()
        click(d, "#ops-open-all")
        wait(d, f"document.querySelector('#ops-svg').dataset.nodes == '{len(graph['nodes'])}' && {ENGINE} == 'graphviz'")
        live_s = time.time() - t0
        assert d.execute_script("return document.querySelector('#ops-svg').dataset.closed") == "0"
        # head, tail, the layers' one structure and the last layer's (it keeps the output rows only)
        assert d.execute_script("return Object.keys(S.graph().layouts).length") <= 4
        assert live_s < 20 * SLOW, live_s
        shot(d, "operators-28-layers")
        d.execute_script("document.getElementById('view').scrollTop = 6000")  # layers 8 to 10, stacked
        shot(d, "operators-28-layers-middle")
        assert errors(d) == []
    finally:
        p.terminate()
        p.wait(timeout=30 * SLOW)
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(graph))
    d.get("file://" + PAGE)
    d.find_element(By.ID, "file-input").send_keys(str(path))
    wait(d, "/deep.json/.test(document.getElementById('run-status').textContent)")
    assert d.execute_script("return document.querySelector('#ops-svg').dataset.closed") == "28"
    t0 = time.time()
    click(d, "#ops-open-all")
    wait(d, f"document.querySelector('#ops-svg').dataset.nodes == '{len(graph['nodes'])}'")
    offline_s = time.time() - t0
    assert d.execute_script("return " + ENGINE) == "dagre" and offline_s < 20 * SLOW, offline_s
    print(f"28 layers, {len(graph['nodes'])} nodes: open all in {live_s:.2f} s (Graphviz), {offline_s:.2f} s offline (dagre)")
    shot(d, "offline-28-layers")
    assert errors(d) == []
