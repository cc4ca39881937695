// app.js: the page's one state object S, where its data comes from (the live server's SSE run, a
// canned sample, files opened offline) and the toolbar. Views render from S (views.js, shapes.js).
'use strict';

const S = {
  view: 'operators',
  stage: 'prefill',         // which graph the views show
  graphs: {},               // stage -> analyzed graph (MG.analyze), with .open and .layouts
  passes: [],               // runs: {index, kind, n_tokens, graph_tokens, nodes: Map(id -> stats), top5, seconds}
  promptTokens: [], generated: [], lastToken: null,
  selected: null, pipePath: [],
  server: location.protocol.startsWith('http'), info: null,
  sf: null, sfTimer: null, sfDelay: 120,
  graph() { return this.graphs[this.stage] || this.graphs.prefill || this.graphs.decode || null; },
  // The open layers of the shown graph (the others are drawn collapsed): all of a small model's,
  // none of a large one's at first. Kept with the graph, as are its layouts.
  openLayers() {
    const A = this.graph();
    if (!A.open) A.open = new Set(A.layers.length <= 4 ? A.layers.map((_, L) => L) : []);
    return A.open;
  },
  // A block's layout (graph.js MG.compose): Graphviz's from the server, kept per block structure
  // (the layers share one), else dagre's, made here and kept too. While the server's is on its way
  // the block shows dagre's.
  blockLayout(bg) {
    const A = this.graph();
    if (A.layouts[bg.sig]) return A.layouts[bg.sig];
    if (this.server && this.info && this.info.layout && !A.pending.has(bg.sig) && !A.failed.has(bg.sig) &&
        bg.items.length + bg.ports.length <= MG.LAYOUT_MAX)
      fetchLayout(A, bg.sig, MG.toDot(bg));
    return A.dagre[bg.sig] || (A.dagre[bg.sig] = MG.dagreLayout(bg));
  },
  // The latest pass of the shown graph's kind (what the node colours and panels show).
  shownPass() {
    const g = this.graph();
    if (!g) return null;
    for (let i = this.passes.length - 1; i >= 0; i--) if (this.passes[i].kind === g.g.kind) return this.passes[i];
    return null;
  },
  // The ceilings each node is measured against: the machine's measured limits (memory read GB/s,
  // int8 GMAC/s peak) from the server, else the best node of the shown pass.
  roofline() {
    const p = this.shownPass(), r = { gbs: 0, gmacs: 0, what: 'the best of this pass' };
    if (this.info && this.info.mem_bw_gbs > 0 && this.info.peak_gmacs > 0)
      return { gbs: this.info.mem_bw_gbs, gmacs: this.info.peak_gmacs, what: 'the machine\'s measured limit' };
    if (!p) return r;
    for (const s of p.nodes.values()) if (s.t > 0) { r.gbs = Math.max(r.gbs, s.bytes / s.t / 1e9); if (s.macs) r.gmacs = Math.max(r.gmacs, s.macs / s.t / 1e9); }
    return r;
  },
};

function status(text) { document.getElementById('run-status').textContent = text; }

let renderQueued = false;
function render() {
  const root = document.getElementById('view');
  root.replaceChildren();
  document.querySelectorAll('.view-btn').forEach((b) => b.classList.toggle('active', b.dataset.view === S.view));
  root.setAttribute('data-view', S.view);
  if (S.view === 'operators') renderOperators(root);
  else if (S.view === 'pipeline') renderPipeline(root);
  else renderShapes(root);
}
// Live events arrive by the hundred: draw at most once per frame.
function renderSoon() { if (!renderQueued) { renderQueued = true; requestAnimationFrame(() => { renderQueued = false; if (S.view !== 'shapes') render(); }); } }

function setGraph(stage, g) {
  const A = MG.analyze(g), old = S.graphs[stage];
  // the same graph again (each live run sends it): keep its open layers and layouts
  const sig = (X) => JSON.stringify([X.g.kind, X.g.n_nodes, X.g.output, X.dims]);
  const same = old && sig(old) === sig(A);
  A.layouts = same ? old.layouts : {}; // Graphviz's, by block signature
  A.dagre = same ? old.dagre : {};     // dagre's, the same
  A.pending = same ? old.pending : new Set();
  A.failed = same ? old.failed : new Set();
  if (same) A.open = old.open;
  S.graphs[stage] = A;
}

async function fetchLayout(A, key, dot) {
  A.pending.add(key);
  try {
    const r = await fetch('api/layout', { method: 'POST', headers: { 'Content-Type': 'text/vnd.graphviz' }, body: dot });
    if (r.ok) { A.layouts[key] = await r.json(); renderSoon(); } else { A.failed.add(key); console.warn('layout:', (await r.json()).error.message); }
  } catch (e) { A.failed.add(key); console.warn('layout', e); }
  A.pending.delete(key);
}

// ---- live runs over server-sent events ----

function runLive() {
  if (S.es) S.es.close();
  const prompt = document.getElementById('prompt').value, n = document.getElementById('n-predict').value;
  S.passes = []; S.generated = []; S.lastToken = null; S.promptTokens = [];
  document.getElementById('sampled').textContent = '';
  document.getElementById('sampled').removeAttribute('data-done');
  status('running...');
  const chat = document.getElementById('chat').checked ? '&chat=1' : '';
  const es = new EventSource(`api/run?prompt=${encodeURIComponent(prompt)}&n=${encodeURIComponent(n)}${chat}`);
  S.es = es;
  let nodeEvents = 0;
  es.onmessage = (m) => {
    const ev = JSON.parse(m.data);
    switch (ev.type) {
      case 'start': S.promptTokens = ev.tokens; break;
      case 'graph': setGraph(ev.stage, ev.graph); renderSoon(); break;
      case 'pass': S.passes.push({ index: S.passes.length, kind: ev.kind, n_tokens: ev.n_tokens, graph_tokens: ev.graph_tokens, nodes: new Map() }); break;
      case 'node': { const p = S.passes[S.passes.length - 1]; if (p) p.nodes.set(ev.id, ev); nodeEvents++;
        if (nodeEvents % 64 === 0) status(`pass ${ev.pass}: ${nodeEvents} node events`); renderSoon(); break; }
      case 'pass_end': { const p = S.passes[S.passes.length - 1]; if (p) { p.top5 = ev.top5; p.seconds = ev.seconds; } break; }
      case 'token': S.generated.push(ev); S.lastToken = ev;
        document.getElementById('sampled').textContent = 'sampled: ' + S.generated.map((t) => t.text).join('');
        renderSoon(); break;
      case 'done':
        status(`done: ${ev.n_generated} tokens (${ev.reason}) in ${ev.seconds.toFixed(2)} s, ${nodeEvents} node events`);
        document.getElementById('sampled').setAttribute('data-done', '1');
        document.getElementById('sampled').setAttribute('data-last-token', S.lastToken ? S.lastToken.id : '');
        es.close(); render(); break;
      case 'error': status('error: ' + ev.message); es.close(); break;
      default: break;
    }
  };
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) return; status('the stream broke'); es.close(); };
}

// ---- offline: files and canned samples ----

// A trace file (MINFER_TRACE) becomes passes; its node statistics have no times.
function loadTrace(t) {
  if (!t || t.format !== 'minfer-trace' || !Array.isArray(t.runs)) throw new Error('not a minfer trace (format "minfer-trace")');
  S.passes = t.runs.map((r) => ({ index: r.index, kind: r.kind, n_tokens: r.n_tokens, graph_tokens: r.graph_tokens,
    nodes: new Map(r.nodes.map((n) => [n.id, n])), top5: r.logits_top5 }));
  S.generated = t.runs.slice(1).filter((r) => r.logits_top5 && r.logits_top5.length).map((r) => ({ id: r.logits_top5[0].token, text: `\u27e8${r.logits_top5[0].token}\u27e9` }));
}

function loadObject(o, name) {
  if (o.format === 'minfer-graph') { setGraph(o.kind, o); S.stage = o.kind; document.getElementById('stage-select').value = o.kind; }
  else if (o.format === 'minfer-trace') loadTrace(o);
  else if (o.format === 'minfer-viz-sample') loadSample(o);
  else throw new Error(`${name}: neither a graph export, a trace nor a sample`);
}

// Graphs first, then traces (whose node ids refer to the graph): a new graph drops older statistics.
async function openFiles(files) {
  const objs = [];
  for (const f of files) {
    try { objs.push([JSON.parse(await f.text()), f.name]); } catch (e) { status(`${f.name}: ${e.message}`); }
  }
  objs.sort((a, b) => (a[0].format === 'minfer-trace') - (b[0].format === 'minfer-trace'));
  for (const [o, name] of objs) {
    try {
      if (o.format === 'minfer-graph') { S.passes = []; S.generated = []; S.promptTokens = []; }
      loadObject(o, name);
      if (o.format === 'minfer-graph') {
        document.getElementById('model-name').textContent = `${name} (file)`;
        document.getElementById('sample-select').value = ''; // no longer the sample's graph
      }
      status(`opened ${name}`);
    } catch (e) { status(`${name}: ${e.message}`); }
  }
  render();
}

function loadSample(s) {
  S.graphs = {}; S.passes = []; S.generated = []; S.promptTokens = s.tokens || [];
  setGraph('prefill', s.graph);
  if (s.decode_graph) setGraph('decode', s.decode_graph);
  if (s.trace) loadTrace(s.trace);
  if (s.generated) S.generated = s.generated;
  document.getElementById('model-name').textContent = s.name + ' (sample)';
}

// The shown run in the Trace Event Format (what Perfetto and chrome://tracing read): a top-level
// object with traceEvents; per pass one complete event ("ph": "X", ts and dur in microseconds) on
// its kind's thread (tid 1 prefill, 2 decode) holding one complete event per node, back to back in
// execution order (node times from the run; a trace file's nodes have none: dur 0); metadata events
// ("ph": "M") name the process and the threads. Passes follow one another without gaps.
function chromeTrace() {
  const ev = [], us = (x) => Math.round(x * 1e3) / 1e3; // microseconds, to the nanosecond
  const name = document.getElementById('model-name').textContent || 'minfer';
  ev.push({ name: 'process_name', ph: 'M', pid: 1, tid: 0, args: { name: `minfer ${name}` } });
  for (const [tid, label] of [[1, 'prefill passes'], [2, 'decode passes']]) {
    ev.push({ name: 'thread_name', ph: 'M', pid: 1, tid, args: { name: label } });
    ev.push({ name: 'thread_sort_index', ph: 'M', pid: 1, tid, args: { sort_index: tid } });
  }
  let t = 0; // the running clock, in microseconds
  for (const p of S.passes) {
    const A = S.graphs[p.kind] || S.graph(), tid = p.kind === 'decode' ? 2 : 1, start = t;
    const nodes = [];
    for (const [id, s] of p.nodes) {
      const n = A && A.byId.get(id), t0 = t;
      t += Math.max(0, (s.t || 0) * 1e6);
      const args = { id, bytes: s.bytes || 0, macs: s.macs || 0, rms: s.rms === undefined ? null : s.rms, nan: s.nan || 0 };
      nodes.push({ name: n ? n.name : `node ${id}`, cat: n ? n.op : 'node', ph: 'X', ts: us(t0), dur: us(t) - us(t0), pid: 1, tid, args });
    }
    // the pass's own slice spans its nodes, or its measured wall time where longer (sampling, overhead)
    t = Math.max(t, start + (p.seconds || 0) * 1e6);
    ev.push({ name: `pass ${p.index} (${p.kind}, ${p.n_tokens} tokens)`, cat: 'pass', ph: 'X', ts: us(start), dur: us(t) - us(start), pid: 1, tid,
      args: { pass: p.index, kind: p.kind, n_tokens: p.n_tokens, graph_tokens: p.graph_tokens } }, ...nodes);
  }
  return { traceEvents: ev, displayTimeUnit: 'ms' };
}

function exportChromeTrace() {
  const trace = chromeTrace();
  const blob = new Blob([JSON.stringify(trace)], { type: 'application/json' });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = 'minfer-run.trace.json';
  a.click();
  S.lastChromeTrace = trace.traceEvents.length;
}

function init() {
  document.querySelectorAll('.view-btn').forEach((b) => b.addEventListener('click', () => { S.view = b.dataset.view; render(); }));
  document.getElementById('stage-select').addEventListener('change', (e) => { S.stage = e.target.value; S.pipePath = []; render(); });
  document.getElementById('file-input').addEventListener('change', (e) => openFiles(e.target.files));
  document.getElementById('trace-export').addEventListener('click', exportChromeTrace);
  const view = document.getElementById('view');
  view.addEventListener('dragover', (e) => { e.preventDefault(); view.classList.add('drop'); });
  view.addEventListener('dragleave', () => view.classList.remove('drop'));
  view.addEventListener('drop', (e) => { e.preventDefault(); view.classList.remove('drop'); openFiles(e.dataTransfer.files); });
  const sel = document.getElementById('sample-select');
  (window.MINFER_SAMPLES || []).forEach((s, i) => sel.append(new Option(s.name, String(i))));
  sel.addEventListener('change', () => { if (sel.value !== '') { loadSample(window.MINFER_SAMPLES[+sel.value]); render(); } });
  const runBtn = document.getElementById('run-btn');
  runBtn.addEventListener('click', runLive);
  if (S.server) {
    fetch('api/info').then((r) => r.json()).then((info) => {
      S.info = info;
      document.getElementById('model-name').textContent = `${info.model} (${info.n_layer} layers, ${info.isa}, ${info.n_threads} threads)`;
      return fetch('api/graph?stage=prefill&n=8');
    }).then((r) => r.json()).then((g) => { setGraph('prefill', g); render(); })
      .catch((e) => { S.server = false; runBtn.disabled = true; status('offline: open files or pick a sample'); void e; });
  } else { runBtn.disabled = true; status('offline: open files or pick a sample'); }
  render();
}

init();
