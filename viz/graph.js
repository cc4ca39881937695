// graph.js: what the views derive from a graph export (docs/graph-json.md): layers, pipeline stages,
// model dimensions, the Operators view's block layout (Graphviz's from the server or dagre's in the
// page), and colours. Nothing here knows a model: every number comes from the export.
'use strict';

const MG = {};

// The layer of a node from its name ("attn_norm-3" -> 3), -1 for nodes outside the layer loop.
MG.layerOf = (n) => { const m = /-(\d+)(?: \(.*\))?$/.exec(n.name); return m ? +m[1] : -1; };

// The stage of a node inside a layer: the layer loop is RMSNorm -> Attention -> +Residual -> RMSNorm ->
// FFN -> +Residual; the first norm and residual belong to attention, the second to the FFN.
MG.layerStage = (n, seenResidual) => {
  const w = n.weight ? n.weight.name : '';
  if (n.op === 'rms_norm' && /attn_norm/.test(w)) return 'attn_norm';
  if (n.op === 'rms_norm' && /ffn_norm/.test(w)) return 'ffn_norm';
  if (n.op === 'add') return seenResidual ? 'ffn_residual' : 'attn_residual';
  if (/ffn/.test(w) || /^ffn/.test(n.name) || ['silu', 'mul', 'swiglu'].includes(n.op)) return 'ffn';
  return 'attention';
};
MG.STAGE_LABEL = { input: 'Input', embedding: 'Embedding', attn_norm: 'RMSNorm', attention: 'Attention',
  attn_residual: '+Residual', ffn_norm: 'RMSNorm', ffn: 'FFN', ffn_residual: '+Residual',
  final_norm: 'Final RMSNorm', logits: 'Logits', sampler: 'Sampler' };
MG.LAYER_STAGES = ['attn_norm', 'attention', 'attn_residual', 'ffn_norm', 'ffn', 'ffn_residual'];

// Index a graph export: nodes by id, each node's layer and stage, the layers' node lists, the model's
// dimensions. Throws on a file that is not a minfer graph.
MG.analyze = (g) => {
  if (!g || g.format !== 'minfer-graph' || g.version !== 1 || !Array.isArray(g.nodes))
    throw new Error('not a minfer graph export (format "minfer-graph", version 1)');
  const byId = new Map(), layers = [], top = { input: [], embedding: [], final_norm: [], logits: [] };
  const resSeen = new Map();
  for (const n of g.nodes) {
    byId.set(n.id, n);
    const L = MG.layerOf(n);
    n._layer = L;
    if (n.op === 'input') n._stage = 'input';
    else if (L < 0 && n.op === 'get_rows') n._stage = 'embedding';
    else if (L < 0 && n.op === 'rms_norm') n._stage = 'final_norm';
    else if (L < 0) n._stage = 'logits';
    else {
      // a view takes the stage of what it reads; the last layer's row selections (out_ids) theirs
      const src0 = byId.get(n.src[0]);
      if (n.op === 'view' && src0 && src0._layer === L) n._stage = src0._stage;
      else if (n.op === 'get_rows' && !n.weight) n._stage = resSeen.get(L) ? 'ffn' : /inp_rows/.test(n.name) ? 'attn_residual' : 'attention';
      else n._stage = MG.layerStage(n, resSeen.get(L));
      if (n.op === 'add') resSeen.set(L, true);
    }
    if (L >= 0) (layers[L] = layers[L] || []).push(n);
    else top[n._stage].push(n);
  }
  const dims = MG.dims(g, byId, layers), A = { g, byId, layers, top, dims };
  A.blocks = MG.blocks(A);
  return A;
};

// Model dimensions, read off the weights and op parameters of the export.
MG.dims = (g, byId, layers) => {
  const d = { n_layer: layers.length };
  const tokens = byId.get(g.inputs.tokens);
  d.nt = tokens ? tokens.shape[0] : 0;
  const outIds = g.inputs.out_ids !== undefined ? byId.get(g.inputs.out_ids) : null;
  d.n_out = outIds ? outIds.shape[0] : d.nt;
  for (const n of g.nodes) {
    const w = n.weight;
    if (n.op === 'get_rows' && w && /token_embd/.test(w.name)) { d.n_embd = w.shape[0]; d.embd_type = w.type; }
    if (w && /ffn_up/.test(w.name) && d.n_ff === undefined) { d.n_ff = w.shape[1]; }
    if (n.id === g.output && w) { d.n_vocab = w.shape[1]; d.out_type = w.type; }
    const a = n.op === 'attention' || n.op === 'qkv_rope_store' ? n.params : null;
    if (a && d.n_head === undefined) { d.n_head = a.n_head; d.n_head_kv = a.n_head_kv; d.head_dim = a.head_dim; }
  }
  return d;
};

// The nodes a stage of layer L holds (L < 0: a top-level stage).
MG.stageNodes = (A, L, stage) => (L < 0 ? A.top[stage] || [] : (A.layers[L] || []).filter((n) => n._stage === stage));

// ---- the Operators view's layout, block by block ----
// The graph is drawn as a stack of blocks: the nodes before the layer loop, each layer, the nodes
// after it. A block is laid out on its own (Graphviz in the server, or dagre in the page), so a
// layout is small and the layers, which share one structure, share one layout: opening all layers
// of a 28-layer model costs as much as opening two. A block's sources outside it are its ports,
// small boxes at its top named after the tensor; a port fed by the block just above is joined to
// its source by a connector, the graph's inputs (positions, cells, ...) are named only.

// The blocks in graph order: {key: 'head' | 'L<n>' | 'tail', layer (-1 outside the loop), nodes}.
MG.blocks = (A) => {
  const out = [], by = new Map();
  for (const n of A.g.nodes) {
    const key = n._layer >= 0 ? 'L' + n._layer : out.some((b) => b.layer >= 0) ? 'tail' : 'head';
    if (!by.has(key)) { const b = { key, layer: n._layer, nodes: [] }; by.set(key, b); out.push(b); }
    by.get(key).nodes.push(n);
  }
  return out;
};

// A block as a graph of its own: items 'a<i>' (its i-th node), ports 'p<j>' (its j-th outside
// source, in order of first use), edges between them, and a signature: the structure alone (ops and
// edges by position), equal for the layers that share a layout.
MG.blockGraph = (blk) => {
  if (blk._bg) return blk._bg;
  const idx = new Map(blk.nodes.map((n, i) => [n.id, i])), ports = [], portOf = new Map(), edges = [], es = new Set();
  const sig = [];
  blk.nodes.forEach((n, i) => {
    const refs = [];
    for (const s of n.src) {
      let k;
      if (idx.has(s)) k = 'a' + idx.get(s);
      else { if (!portOf.has(s)) { portOf.set(s, 'p' + ports.length); ports.push({ key: 'p' + ports.length, src: s }); } k = portOf.get(s); }
      refs.push(k);
      if (k !== 'a' + i && !es.has(k + '>' + i)) { es.add(k + '>' + i); edges.push([k, 'a' + i]); }
    }
    sig.push(n.op + '(' + refs.join(',') + ')');
  });
  return (blk._bg = { items: blk.nodes.map((n, i) => ({ key: 'a' + i, node: n })), ports, edges, sig: sig.join(' ') });
};
MG.BOX = { node: [150, 44], layer: [230, 50], port: [120, 18] }; // points
MG.LAYOUT_MAX = 300; // boxes the server lays out (src/viz/viz.c LAYOUT_MAX_NODES); past it dagre
MG.boxOf = (key) => (key[0] === 'p' ? MG.BOX.port : MG.BOX.node);

// DOT text of a block for Graphviz: fixed-size boxes (the page draws their content).
MG.toDot = (bg) => {
  const lines = ['digraph minfer {', '  rankdir=TB; nodesep=0.25; ranksep=0.35;', '  node [shape=box, fixedsize=true, label=""];'];
  for (const k of [...bg.ports.map((p) => p.key), ...bg.items.map((it) => it.key)]) {
    const [w, h] = MG.boxOf(k);
    lines.push(`  ${k} [width=${(w / 72).toFixed(3)}, height=${(h / 72).toFixed(3)}];`);
  }
  for (const [a, b] of bg.edges) lines.push(`  ${a} -> ${b};`);
  lines.push('}');
  return lines.join('\n') + '\n';
};

// dagre's layout of a block, in the server's layout format ({width, height, nodes: {key: [x, y, w, h]},
// edges: [[tail, head, points]]}), the edges polylines. dagre is the page's own layout library
// (dagre.min.js, embedded next to the page; licences in licenses.txt).
MG.dagreLayout = (bg) => {
  if (typeof dagre === 'undefined') throw new Error('dagre.min.js is missing next to the page: open the page the build writes (build/viz-page/index.html) or the one minfer viz serves');
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'TB', nodesep: 18, ranksep: 25, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const k of [...bg.ports.map((p) => p.key), ...bg.items.map((it) => it.key)]) { const [w, h] = MG.boxOf(k); g.setNode(k, { width: w, height: h }); }
  for (const [a, b] of bg.edges) g.setEdge(a, b);
  dagre.layout(g);
  const nodes = {}, edges = [];
  for (const k of g.nodes()) { const n = g.node(k); nodes[k] = [n.x, n.y, n.width, n.height]; }
  for (const e of g.edges()) edges.push([e.v, e.w, g.edge(e).points.flatMap((p) => [p.x, p.y])]);
  return { width: g.graph().width, height: g.graph().height, nodes, edges, curve: 'polyline', engine: 'dagre' };
};

// The whole view: blocks stacked top to bottom, open layers by their block layout (layoutOf(bg)),
// closed layers one box each. Returns {width, height, boxes, paths, engines, n_edges}: boxes
// {x, y, w, h (top-left), node | layer+nodes | port}, paths {d, cls}.
MG.compose = (A, open, layoutOf) => {
  const GAP = 34, boxes = [], paths = [], engines = new Set(), placed = [];
  let y = 10, width = 0, nEdges = 0;
  for (const blk of A.blocks) {
    const closed = blk.layer >= 0 && !open.has(blk.layer);
    if (closed) {
      const [w, h] = MG.BOX.layer;
      placed.push({ blk, w, h, y, closed: true });
      y += h + GAP;
      width = Math.max(width, w);
      continue;
    }
    const bg = MG.blockGraph(blk), lay = layoutOf(bg);
    engines.add(lay.engine);
    placed.push({ blk, bg, lay, w: lay.width, h: lay.height, y });
    y += lay.height + GAP;
    width = Math.max(width, lay.width);
  }
  width += 40;
  let prev = null; // the block placed above: Map(node id -> its box)
  for (const P of placed) {
    const x0 = (width - P.w) / 2, mine = new Map();
    const connect = (src, tx, ty) => { // a connector from the block above's node src down to (tx, ty)
      const s = prev && prev.get(src);
      if (!s) return;
      const sx = s.x + s.w / 2, sy = s.y + s.h, my = (sy + ty) / 2;
      paths.push({ d: `M${sx},${sy} C${sx},${my} ${tx},${my} ${tx},${ty}`, cls: 'edge link' });
      nEdges++;
    };
    if (P.closed) {
      const b = { x: x0, y: P.y, w: P.w, h: P.h, layer: P.blk.layer, nodes: P.blk.nodes };
      boxes.push(b);
      const ids = new Set(P.blk.nodes.map((n) => n.id)), srcs = new Set();
      for (const n of P.blk.nodes) for (const s of n.src) if (!ids.has(s) && A.byId.get(s) && A.byId.get(s).op !== 'input') srcs.add(s);
      for (const s of srcs) connect(s, b.x + b.w / 2, b.y);
      for (const n of P.blk.nodes) mine.set(n.id, b);
      prev = mine;
      continue;
    }
    const nb = (k) => { const [cx, cy, w, h] = P.lay.nodes[k]; return { x: x0 + cx - w / 2, y: P.y + cy - h / 2, w, h }; };
    for (const it of P.bg.items) { const b = Object.assign(nb(it.key), { node: it.node }); boxes.push(b); mine.set(it.node.id, b); }
    for (const p of P.bg.ports) {
      const src = A.byId.get(p.src), b = Object.assign(nb(p.key), { port: src ? src.name : String(p.src), src: p.src });
      boxes.push(b);
      if (src && src.op !== 'input') connect(p.src, b.x + b.w / 2, b.y);
    }
    for (const [a, b, pts] of P.lay.edges) {
      const sh = (q) => q.map((v, i) => (i % 2 ? v + P.y : v + x0));
      let d;
      if (pts && pts.length >= 8 && P.lay.curve !== 'polyline') { const q = sh(pts); d = `M${q[0]},${q[1]} C` + q.slice(2).join(','); } // Graphviz: a cubic B-spline
      else if (pts && pts.length >= 4) { const q = sh(pts); d = 'M' + q.slice(0, 2).join(',') + ' L' + q.slice(2).join(','); }
      else { const A0 = nb(a), B0 = nb(b); d = `M${A0.x + A0.w / 2},${A0.y + A0.h} L${B0.x + B0.w / 2},${B0.y}`; }
      paths.push({ d, cls: 'edge' });
      nEdges++;
    }
    prev = mine;
  }
  return { width, height: y, boxes, paths, engines, n_edges: nEdges };
};

MG.BACKEND_COLOR = { CPU: '#fff7c2', CUDA: '#c9f2c9' };
// A node's fill: the backend's colour, or with statistics the magnitude of its output (log10 rms).
MG.magnitudeColor = (rms) => {
  if (rms === null || rms === undefined) return '#ddd';
  const t = Math.max(0, Math.min(1, (Math.log10(Math.max(rms, 1e-6)) + 3) / 5)); // 1e-3 .. 1e2
  const h = 240 - 240 * t;
  return `hsl(${h.toFixed(0)},70%,78%)`;
};
MG.fmtShape = (s) => '[' + s.filter((x, i) => x !== 1 || i === 0 || i === 1).join(', ') + ']';
MG.fmt = (x, p = 4) => (x === null || x === undefined ? '-' : Math.abs(x) >= 1e4 || (Math.abs(x) < 1e-3 && x !== 0) ? x.toExponential(2) : (+x).toPrecision(p));
