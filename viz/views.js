// views.js: the Operators view (the layered tensor grid: a box per op, an edge per tensor flow, laid
// out block by block by Graphviz on the server or dagre in the page) and the Pipeline view (stages derived
// from the export, the layer loop collapsed as xN, drill-down with Back). Both read S, the one state
// object (app.js), and render from it.
'use strict';

const SVGNS = 'http://www.w3.org/2000/svg';
const el = (tag, attrs = {}, text) => {
  const e = tag.startsWith('svg:') ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
};

// Statistics of node id in the pass shown (the latest pass of the graph's kind), or null.
function nodeStats(id) {
  const p = S.shownPass();
  return p ? p.nodes.get(id) || null : null;
}

// ---- Operators ----

function renderOperators(root) {
  const A = S.graph();
  if (!A) { root.append(el('p', { class: 'hint' }, 'No graph yet: run a prompt, pick a sample or open a graph JSON.')); return; }
  const open = S.openLayers();
  let lay;
  try { lay = MG.compose(A, open, (bg) => S.blockLayout(bg)); } catch (e) { root.append(el('p', { class: 'hint bad', id: 'ops-error' }, e.message)); return; }
  const svg = el('svg:svg', { id: 'ops-svg', width: lay.width, height: lay.height + 10 });
  const defs = el('svg:defs'), marker = el('svg:marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  marker.append(el('svg:path', { d: 'M0,0 L10,5 L0,10 z', fill: '#999' }));
  defs.append(marker);
  const gEdges = el('svg:g'), gNodes = el('svg:g');
  svg.append(defs, gEdges, gNodes);
  for (const p of lay.paths) gEdges.append(el('svg:path', { class: p.cls, d: p.d, 'marker-end': 'url(#arrow)' }));
  let count = 0, closed = 0;
  for (const b of lay.boxes) {
    const g = el('svg:g', { transform: `translate(${b.x},${b.y})` });
    if (b.port !== undefined) { // a block's outside source: named, joined to it when it is just above
      g.setAttribute('class', 'port');
      g.append(el('svg:rect', { width: b.w, height: b.h, rx: 9 }));
      g.append(el('svg:text', { x: b.w / 2, y: 12, 'text-anchor': 'middle' }, b.port.length > 20 ? b.port.slice(0, 19) + '\u2026' : b.port));
      gNodes.append(g);
      continue;
    }
    if (b.layer !== undefined) { // a closed layer: click to open (and lay out) it
      g.setAttribute('class', 'op-node layer-box');
      g.setAttribute('data-layer', b.layer);
      g.append(el('svg:rect', { width: b.w, height: b.h, rx: 6, fill: '#ffe9c7', 'stroke-dasharray': '5 3' }));
      g.append(el('svg:text', { x: 8, y: 20 }, `layer ${b.layer}: ${b.nodes.length} ops (click to open)`));
      g.append(el('svg:text', { x: 8, y: 36 }, fmtMs(timeOf(b.nodes))));
      g.addEventListener('click', () => { open.add(b.layer); render(); });
      gNodes.append(g);
      closed++;
      continue;
    }
    const n = b.node, st = nodeStats(n.id), w = b.w, h = b.h;
    const fill = st ? MG.magnitudeColor(st.rms) : n.is_output ? '#ffc680' : MG.BACKEND_COLOR[n.backend] || '#dde';
    g.setAttribute('class', 'op-node' + (S.selected === n.id ? ' selected' : ''));
    g.setAttribute('data-id', n.id);
    g.append(el('svg:rect', { width: w, height: h, rx: 4, fill, 'stroke-dasharray': n.backend === 'CPU' ? '' : '4 2' }));
    const fit = (t) => (t.length > 24 ? t.slice(0, 23) + '\u2026' : t); // 10px monospace: 24 characters in 150 points
    g.append(el('svg:text', { x: 4, y: 12 }, fit(`${n.id} ${n.name}`)));
    g.append(el('svg:text', { x: 4, y: 24 }, fit(`${n.op} ${MG.fmtShape(n.shape)}`)));
    if (st && st.t !== undefined) g.append(el('svg:text', { x: 4, y: 36 }, fit(`${(st.t * 1e6).toFixed(0)} us  rms ${MG.fmt(st.rms, 3)}`)));
    else if (st) g.append(el('svg:text', { x: 4, y: 36 }, fit(`rms ${MG.fmt(st.rms, 3)}`)));
    else if (n.weight) g.append(el('svg:text', { x: 4, y: 36 }, fit(n.weight.type)));
    const title = el('svg:title', {}, `${n.id} ${n.name}\n${n.op} ${MG.fmtShape(n.shape)}${n.weight ? '\n' + n.weight.name + ' ' + n.weight.type : ''}`);
    g.append(title);
    g.addEventListener('click', () => { S.selected = n.id; showNodePanel(n); render(); });
    gNodes.append(g);
    count++;
  }
  // the engine that laid the open blocks out: graphviz (the server's), dagre (the page's; offline,
  // without libgvc, past the server's cap, or while the server's layouts are on their way), or both
  const engines = [...lay.engines], engine = engines.length === 1 ? (engines[0] === 'dagre' ? 'dagre' : 'graphviz') : engines.length ? 'mixed' : 'none';
  svg.setAttribute('data-nodes', count);
  svg.setAttribute('data-closed', closed);
  svg.setAttribute('data-engine', engine);
  const label = { graphviz: 'Graphviz dot (server), per block', dagre: 'dagre 0.8.5 (in the page), per block', mixed: 'dagre while Graphviz lays out', none: 'none' }[engine];
  const crumbs = el('div', { class: 'crumbs', id: 'ops-crumbs' },
    `${count} operators${closed ? `, ${closed} layers collapsed` : ''}, ${lay.n_edges} tensor flows; layout: ${label} `);
  for (const [id, text, fn] of [['ops-open-all', 'open all layers', () => A.layers.forEach((_, L) => open.add(L))],
    ['ops-collapse', 'collapse layers', () => open.clear()]]) {
    const btn = el('button', { id }, text);
    btn.addEventListener('click', () => { fn(); render(); });
    crumbs.append(btn, ' ');
  }
  root.append(crumbs, svg);
  setLegend([['CPU backend', MG.BACKEND_COLOR.CPU], ['logits', '#ffc680'], ['collapsed layer', '#ffe9c7'], ['input from outside the block', '#eee'], ['small |x|', MG.magnitudeColor(1e-3)],
    ['rms ~1', MG.magnitudeColor(1)], ['large |x|', MG.magnitudeColor(100)]], 'fill: backend; with a run, magnitude (log rms)');
}

// A small heatmap of a node's output (block means, rows = tokens) into a canvas.
function heatCanvas(heat) {
  const c = el('canvas', { class: 'heat', width: heat.c, height: heat.r });
  const ctx = c.getContext('2d'), img = ctx.createImageData(heat.c, heat.r);
  const vals = heat.v.filter((x) => x !== null), m = Math.max(1e-12, ...vals.map(Math.abs));
  heat.v.forEach((x, i) => {
    const t = x === null ? 0 : x / m; // -1 .. 1: blue .. white .. red
    img.data[4 * i] = t > 0 ? 255 : 255 * (1 + t);
    img.data[4 * i + 1] = 255 * (1 - Math.abs(t));
    img.data[4 * i + 2] = t < 0 ? 255 : 255 * (1 - t);
    img.data[4 * i + 3] = 255;
  });
  ctx.putImageData(img, 0, 0);
  return c;
}

function showNodePanel(n) {
  const p = document.getElementById('panel');
  p.replaceChildren(el('h3', {}, `${n.id} ${n.name}`));
  const rows = [['op', n.op], ['shape', MG.fmtShape(n.shape)], ['backend', n.backend], ['layer', n._layer],
    ['stage', MG.STAGE_LABEL[n._stage] || n._stage], ['sources', n.src.join(', ')]];
  if (n.weight) rows.push(['weight', `${n.weight.name} ${n.weight.type} ${MG.fmtShape(n.weight.shape)}`]);
  const st = nodeStats(n.id);
  if (st) {
    const pass = S.shownPass();
    rows.push(['pass', `${pass.index} (${pass.kind}, ${pass.n_tokens} tokens)`]);
    if (st.t !== undefined) {
      rows.push(['time', `${(st.t * 1e6).toFixed(1)} us`]);
      rows.push(['bytes', `${(st.bytes / 1e6).toFixed(3)} MB -> ${(st.bytes / st.t / 1e9).toFixed(2)} GB/s`]);
      if (st.macs) rows.push(['compute', `${(st.macs / st.t / 1e9).toFixed(2)} GMAC/s`]);
      const roof = S.roofline();
      if (roof.gbs > 0) {
        // roofline: a node is bound by memory below the ridge (MACs per byte = peak / bandwidth)
        const ai = st.macs / st.bytes, bound = Math.min(roof.gmacs, ai * roof.gbs);
        rows.push(['roofline', `${(100 * st.bytes / st.t / 1e9 / roof.gbs).toFixed(0)} % of ${roof.what} ${roof.gbs.toFixed(1)} GB/s` +
          (st.macs ? `; ${ai.toFixed(2)} MAC/byte: the roof is ${bound.toFixed(1)} GMAC/s (${ai * roof.gbs < roof.gmacs ? 'memory' : 'compute'} bound), reached ${(100 * st.macs / st.t / 1e9 / bound).toFixed(0)} %` : '')]);
      }
    }
    rows.push(['min / max', `${MG.fmt(st.min)} / ${MG.fmt(st.max)}`], ['mean / rms', `${MG.fmt(st.mean)} / ${MG.fmt(st.rms)}`],
      ['NaN / Inf', `${st.nan} / ${st.inf}`], ['values', st.count]);
  }
  const t = el('table', { class: 'stats' });
  for (const [k, v] of rows) { const tr = el('tr'); tr.append(el('td', {}, k), el('td', {}, String(v))); t.append(tr); }
  p.append(t);
  if (st && st.heat) p.append(el('div', {}, 'output heatmap (rows: tokens, columns: features)'), heatCanvas(st.heat));
  if (n.is_output) {
    const pass = S.shownPass();
    if (pass && pass.top5) {
      p.append(el('h4', {}, 'logits top-5'));
      for (const c of pass.top5) p.append(el('div', {}, `${c.token} ${JSON.stringify(c.text || '')}  ${MG.fmt(c.logit)}`));
    }
  }
}

// ---- Pipeline ----

// Seconds of a set of nodes in the shown pass (0 when there is no run).
function timeOf(nodes) { let t = 0; for (const n of nodes) { const s = nodeStats(n.id); if (s && s.t) t += s.t; } return t; }
const fmtMs = (t) => (t > 0 ? `${(t * 1e3).toFixed(2)} ms` : '');

function stageBox(label, sub, cls, onClick, attrs = {}) {
  const b = el('div', Object.assign({ class: 'stage ' + (cls || '') }, attrs));
  b.append(el('div', {}, label));
  if (sub) b.append(el('div', { class: 't' }, sub));
  if (onClick) b.addEventListener('click', onClick);
  return b;
}
const arrow = () => el('span', { class: 'arrow' }, '\u2192');

function renderPipeline(root) {
  const A = S.graph();
  if (!A) { root.append(el('p', { class: 'hint' }, 'No graph yet.')); return; }
  const path = S.pipePath; // [] top; ['layers'] the layer list; ['layer', L]; ['stage', L, stage]
  const crumbs = el('div', { class: 'crumbs' });
  if (path.length) {
    const back = el('button', { id: 'back-btn' }, '\u2190 Back');
    back.addEventListener('click', () => { S.pipePath = path[0] === 'stage' ? ['layer', path[1]] : path[0] === 'layer' ? ['layers'] : []; render(); });
    crumbs.append(back, ' ');
  }
  crumbs.append(['pipeline', ...(path[0] === 'layers' ? ['layers'] : path[0] === 'layer' ? ['layers', `layer ${path[1]}`] :
    path[0] === 'stage' ? ['layers', `layer ${path[1]}`, MG.STAGE_LABEL[path[2]]] : [])].join(' / '));
  root.append(crumbs);
  const box = el('div', { class: 'pipeline', id: 'pipeline' });
  root.append(box);
  const d = A.dims;
  if (!path.length) {
    const top = [['input', 'Input'], ['embedding', 'Embedding']];
    for (const [k, label] of top) box.append(stageBox(label, fmtMs(timeOf(A.top[k])), '', () => { S.pipePath = ['stage', -1, k]; render(); }, { 'data-stage': k }), arrow());
    const all = A.layers.flat();
    box.append(stageBox(`[layer loop] \u00d7 ${d.n_layer}`, 'RMSNorm \u2192 Attention \u2192 +Residual \u2192 RMSNorm \u2192 FFN \u2192 +Residual ' + fmtMs(timeOf(all)),
      'layers', () => { S.pipePath = ['layers']; render(); }, { 'data-stage': 'layers' }), arrow());
    for (const [k, label] of [['final_norm', 'Final RMSNorm'], ['logits', 'Logits']])
      box.append(stageBox(label, fmtMs(timeOf(A.top[k])), '', () => { S.pipePath = ['stage', -1, k]; render(); }, { 'data-stage': k }), arrow());
    box.append(stageBox('Sampler', S.lastToken ? `\u2192 ${JSON.stringify(S.lastToken.text)}` : '', '', null, { 'data-stage': 'sampler' }));
    setLegend([['stage', '#eef'], ['collapsed layers (click to open)', '#ffe9c7']], `${d.n_layer} layers, n_embd ${d.n_embd}, ${d.n_head} heads (${d.n_head_kv} KV) \u00d7 ${d.head_dim}, n_ff ${d.n_ff}, vocab ${d.n_vocab}`);
  } else if (path[0] === 'layers') {
    A.layers.forEach((nodes, L) => box.append(stageBox(`layer ${L}`, `${nodes.length} ops ${fmtMs(timeOf(nodes))}`, 'layers',
      () => { S.pipePath = ['layer', L]; render(); }, { 'data-stage': `layer-${L}` })));
    setLegend([['a layer (click to open)', '#ffe9c7']], 'time per layer from the shown pass');
  } else if (path[0] === 'layer') {
    const L = path[1];
    MG.LAYER_STAGES.forEach((k, i) => {
      const nodes = MG.stageNodes(A, L, k);
      if (i) box.append(arrow());
      box.append(stageBox(MG.STAGE_LABEL[k], `${nodes.length} ops ${fmtMs(timeOf(nodes))}`, '', () => { S.pipePath = ['stage', L, k]; render(); }, { 'data-stage': k }));
    });
    setLegend([['stage of layer ' + L, '#eef']], 'click a stage for its operators');
  } else {
    const [, L, k] = path;
    for (const n of MG.stageNodes(A, L, k)) {
      const st = nodeStats(n.id);
      box.append(stageBox(`${n.name}`, `${n.op} ${MG.fmtShape(n.shape)}${n.weight ? ' ' + n.weight.type : ''} ${st && st.t ? fmtMs(st.t) : ''}`, '',
        () => { S.selected = n.id; showNodePanel(n); }, { 'data-node': n.id }));
    }
    setLegend([['operator (click for stats)', '#eef']], `${MG.STAGE_LABEL[k]}${L >= 0 ? ' of layer ' + L : ''}`);
  }
  // where the time goes: one decode step's nodes as a timeline
  const pass = S.shownPass();
  if (pass && pass.nodes.size) {
    const tl = el('div', { class: 'timeline', id: 'timeline' });
    const total = [...pass.nodes.values()].reduce((a, s) => a + (s.t || 0), 0);
    tl.append(el('div', {}, `timeline of pass ${pass.index} (${pass.kind}): ${fmtMs(total)}`));
    const bars = el('div', { style: 'width:100%;white-space:nowrap;overflow:hidden' });
    for (const [id, s] of pass.nodes) {
      const n = A.byId.get(id);
      bars.append(el('span', { class: 'bar', title: `${n ? n.name : id}: ${(s.t * 1e6).toFixed(0)} us`,
        style: `width:${(100 * (s.t || 0) / total).toFixed(3)}%;background:${n && n.op === 'matmul' ? '#79c' : n && n.op === 'attention' ? '#c97' : '#9b9'}` }));
    }
    tl.append(bars);
    const key = el('div', { class: 'key' });
    for (const [label, c] of [['matmul', '#79c'], ['attention', '#c97'], ['other ops', '#9b9']]) key.append(el('span', { style: `background:${c}` }), label);
    tl.append(key);
    root.append(tl);
  }
}

function setLegend(items, text) {
  const l = document.getElementById('legend');
  l.replaceChildren();
  for (const [label, color] of items) {
    const s = el('span', { class: 'legend-item' });
    s.append(el('span', { class: 'swatch', style: `background:${color}` }), label);
    l.append(s);
  }
  if (text) l.append(el('span', {}, text));
}
