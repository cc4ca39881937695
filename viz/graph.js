// graph.js: what the views derive from a graph export (docs/graph-json.md): layers, pipeline stages,
// model dimensions, a fallback layout for when no Graphviz layout is at hand (offline files), and
// colours. Nothing here knows a model: every number comes from the export.
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
  const dims = MG.dims(g, byId, layers);
  return { g, byId, layers, top, dims };
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

// Edges as [src, dst] of nodes both present (the graph's own ids).
MG.edges = (g) => { const out = []; const ids = new Set(g.nodes.map((n) => n.id));
  for (const n of g.nodes) for (const s of n.src) if (ids.has(s)) out.push([s, n.id]); return out; };

// The graph as the Operators view draws it: a box per node outside the layer loop and in the open
// layers, one box per closed layer (its nodes collapsed), an edge per tensor flow between boxes.
// Keys: "n<id>" for a node, "L<layer>" for a closed layer.
MG.viewGraph = (A, open) => {
  const items = [], keyOf = new Map(), seen = new Set(), edges = [];
  for (const n of A.g.nodes) {
    const L = n._layer;
    const key = L >= 0 && !open.has(L) ? 'L' + L : 'n' + n.id;
    keyOf.set(n.id, key);
    if (!seen.has(key)) { seen.add(key); items.push(key[0] === 'L' ? { key, layer: L, nodes: A.layers[L] } : { key, node: n }); }
  }
  // Positions, sequence ids, cells and output ids feed every layer; into a closed layer their edges
  // would only fan out over the picture, so they are drawn into open layers only.
  const side = new Set(A.g.nodes.filter((n) => n.op === 'input' && n.params.kind !== 'tokens').map((n) => n.id));
  const es = new Set();
  for (const n of A.g.nodes) for (const s of n.src) {
    const a = keyOf.get(s), b = keyOf.get(n.id);
    if (side.has(s) && b[0] === 'L') continue;
    if (a && b && a !== b && !es.has(a + '>' + b)) { es.add(a + '>' + b); edges.push([a, b]); }
  }
  return { items, edges };
};
MG.BOX = { node: [150, 44], layer: [220, 50] }; // points
MG.LAYOUT_MAX = 300; // boxes the server lays out (src/viz/viz.c LAYOUT_MAX_NODES); past it the ranked fallback

// DOT text for Graphviz: fixed-size boxes (the page draws their content), edges in graph order.
MG.toDot = (vg) => {
  const lines = ['digraph minfer {', '  rankdir=TB; nodesep=0.25; ranksep=0.35;', '  node [shape=box, fixedsize=true, label=""];'];
  for (const it of vg.items) {
    const [w, h] = it.layer !== undefined ? MG.BOX.layer : MG.BOX.node;
    lines.push(`  ${it.key} [width=${(w / 72).toFixed(3)}, height=${(h / 72).toFixed(3)}];`);
  }
  for (const [a, b] of vg.edges) lines.push(`  ${a} -> ${b};`);
  lines.push('}');
  return lines.join('\n') + '\n';
};

// A ranked layout for when no Graphviz is at hand (offline files, a build without libgvc): rank =
// longest path from an input, order within a rank = graph order. The server's dot layout replaces it.
MG.fallbackLayout = (vg) => {
  const rank = new Map(), rows = [], into = new Map();
  for (const [a, b] of vg.edges) (into.get(b) || into.set(b, []).get(b)).push(a);
  for (const it of vg.items) {
    let r = 0;
    for (const a of into.get(it.key) || []) if (rank.has(a)) r = Math.max(r, rank.get(a) + 1);
    rank.set(it.key, r);
    (rows[r] = rows[r] || []).push(it);
  }
  const nodes = {}, GAP = 20, RH = 76;
  let width = 0;
  rows.forEach((its, r) => {
    let x = 20;
    for (const it of its) {
      const [w, h] = it.layer !== undefined ? MG.BOX.layer : MG.BOX.node;
      nodes[it.key] = [x + w / 2, 30 + r * RH, w, h];
      x += w + GAP;
    }
    width = Math.max(width, x);
  });
  return { width, height: rows.length * RH + 40, nodes, edges: null, engine: 'ranked fallback (no Graphviz)' };
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
