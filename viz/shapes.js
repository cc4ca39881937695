// shapes.js: the Shape flow page: one forward pass animated along the rail of stages, a packet
// carrying each stage's shape, the shape formula with the model's real numbers, the KV cache
// footer, and the shape check: the shapes computed here from the model's dimensions must equal the
// ones the export wrote (it is what found the last layer's nt = 1 and attention's n_head x hd width).
'use strict';

// The rows a stage's output has: nt, or n_out once the layer selected the output rows (out_ids).
function rowsAt(A, L, node) {
  const sel = A.g.inputs.out_ids;
  if (sel === undefined || L < 0) return node && node._stage === 'final_norm' || node && node._stage === 'logits' ? A.dims.n_out : A.dims.nt;
  const picked = (A.layers[L] || []).some((n) => n.op === 'get_rows' && !n.weight && n.src[0] === sel && n.id <= node.id);
  return picked ? A.dims.n_out : A.dims.nt;
}

// The stages of the pass with, for each, the representative node (its last), the computed shape
// and its formula. Inner shapes (heads split, scores, merged) for attention.
function shapeStages(A) {
  const d = A.dims, out = [];
  const add = (L, stage, formula, dimsOf) => {
    const nodes = L < 0 ? A.top[stage] || [] : MG.stageNodes(A, L, stage);
    const rep = stage === 'input' ? A.byId.get(A.g.inputs.tokens) : nodes[nodes.length - 1];
    if (!rep) return;
    const r = rowsAt(A, L, rep);
    const shape = dimsOf(r), names = formula.map((f) => f.replace('ROWS', r === d.nt ? 'nt' : 'n_out'));
    const s = { L, stage, rep, shape, formula: names, weight: nodes.find((n) => n.weight) };
    if (stage === 'attention') {
      const att = nodes.find((n) => n.op === 'attention');
      const q = nodes.find((n) => n.op === 'view' && /^Qcur/.test(n.name));
      const k = nodes.find((n) => n.op === 'view' && /^Kcur/.test(n.name));
      s.inner = [
        q && ['Q heads split', 'hd, n_head, nt', [d.head_dim, d.n_head, d.nt], q],
        k && ['K heads split', 'hd, n_head_kv, nt', [d.head_dim, d.n_head_kv, d.nt], k],
        ['scores', 'n_head, nt, n_kv', [d.n_head, d.nt, 'n_kv'], null],
        att && ['heads merged', 'n_head \u00d7 hd, nt', [d.n_head * d.head_dim, d.nt], att],
      ].filter(Boolean);
    }
    out.push(s);
  };
  add(-1, 'input', ['nt'], () => [d.nt]);
  add(-1, 'embedding', ['n_embd', 'nt'], () => [d.n_embd, d.nt]);
  for (let L = 0; L < d.n_layer; L++) {
    add(L, 'attn_norm', ['n_embd', 'nt'], (r) => [d.n_embd, r]);
    add(L, 'attention', ['n_embd', 'ROWS'], (r) => [d.n_embd, r]);
    add(L, 'attn_residual', ['n_embd', 'ROWS'], (r) => [d.n_embd, r]);
    add(L, 'ffn_norm', ['n_embd', 'ROWS'], (r) => [d.n_embd, r]);
    add(L, 'ffn', ['n_embd', 'ROWS'], (r) => [d.n_embd, r]);
    add(L, 'ffn_residual', ['n_embd', 'ROWS'], (r) => [d.n_embd, r]);
  }
  add(-1, 'final_norm', ['n_embd', 'n_out'], () => [d.n_embd, d.n_out]);
  add(-1, 'logits', ['n_vocab', 'n_out'], () => [d.n_vocab, d.n_out]);
  return out;
}

const trimShape = (s) => { const a = s.slice(); while (a.length > 1 && a[a.length - 1] === 1) a.pop(); return a; };
const sameShape = (a, b) => JSON.stringify(trimShape(a)) === JSON.stringify(trimShape(b));

// Every computed shape against the exported one; returns {ok, total, bad: [text]}.
function shapeCheck(A) {
  const res = { ok: 0, total: 0, bad: [] };
  const cmp = (what, comp, node) => {
    if (!node || comp.includes('n_kv')) return;
    res.total++;
    if (sameShape(comp, node.shape)) res.ok++;
    else res.bad.push(`${what} (${node.name}): computed [${comp}] vs exported [${trimShape(node.shape)}]`);
  };
  for (const s of shapeStages(A)) {
    cmp(MG.STAGE_LABEL[s.stage], s.shape, s.rep);
    for (const [name, , comp, node] of s.inner || []) cmp(name, comp, node);
  }
  return res;
}

function renderShapes(root) {
  const A = S.graph();
  if (!A) { root.append(el('p', { class: 'hint' }, 'No graph yet.')); return; }
  const d = A.dims, stages = shapeStages(A), chk = shapeCheck(A);
  const header = el('div', { class: 'sf-header', id: 'sf-header' }, 'press Prefill, Decode or Run');
  const ctl = el('div', { class: 'sf-header' });
  for (const [label, mode] of [['Prefill', 'prefill'], ['Decode', 'decode'], ['Run', 'run']]) {
    const b = el('button', { id: `sf-${mode}` }, label);
    b.addEventListener('click', () => playShapes(mode));
    ctl.append(b, ' ');
  }
  const check = el('span', { id: 'shape-check', 'data-ok': String(chk.ok === chk.total && chk.total > 0), class: chk.ok === chk.total ? 'good' : 'bad' },
    `shape check: ${chk.ok}/${chk.total} computed shapes equal the export` + (chk.bad.length ? ' \u2014 ' + chk.bad.slice(0, 3).join('; ') : ''));
  ctl.append(check);
  const rail = el('div', { class: 'rail', id: 'rail' });
  rail.append(el('span', { id: 'packet' }, ''));
  const node = (s, key) => {
    const b = el('div', { class: 'sf-node', 'data-key': key });
    b.append(el('div', {}, MG.STAGE_LABEL[s.stage]), el('span', { class: 'badge' }, `[${s.shape.join(', ')}]`));
    return b;
  };
  const top = stages.filter((s) => s.L < 0), layer0 = stages.filter((s) => s.L === 0);
  top.slice(0, 2).forEach((s) => rail.append(node(s, s.stage)));
  const br = el('div', { class: 'bracket' });
  layer0.forEach((s) => br.append(node(s, 'L:' + s.stage)));
  br.append(el('span', { class: 'xn' }, `\u00d7 ${d.n_layer} layers`));
  rail.append(br);
  // stages whose shape differs in some layer: the last layer of a prefill graph keeps only the
  // output rows (n_out) once attention has run, which the badges of layer 0 do not show
  const quirks = [];
  for (const s0 of layer0) {
    const other = stages.find((s) => s.L > 0 && s.stage === s0.stage && !sameShape(s.shape, s0.shape));
    if (other) quirks.push(`${MG.STAGE_LABEL[s0.stage]} of layer ${other.L}: [${other.formula.join(', ')}] = [${other.shape.join(', ')}]`);
  }
  top.slice(2).forEach((s) => rail.append(node(s, s.stage)));
  rail.append(node({ stage: 'sampler', shape: [1] }, 'sampler'));
  const side = el('div', { class: 'sf-header', id: 'sf-inner' });
  const strip = el('div', { class: 'sf-strip', id: 'sf-strip' });
  const footer = el('div', { class: 'sf-footer', id: 'sf-kv' });
  const note = el('div', { class: 'sf-header', id: 'sf-quirks' }, quirks.length ? 'the last layer runs at n_out rows after attention (only the output rows go on): ' + quirks.join('; ') : '');
  root.append(ctl, header, rail, note, side, strip, footer);
  S.sf = { stages, cells: 0, gen: 0 };
  renderStrip();
  renderKv();
  setLegend([['stage', '#f2f6ff'], ['current', '#ffd']], `nt = ${d.nt} (graph tokens), n_out = ${d.n_out}, n_embd = ${d.n_embd}, n_head = ${d.n_head}, n_head_kv = ${d.n_head_kv}, hd = ${d.head_dim}, n_ff = ${d.n_ff}, n_vocab = ${d.n_vocab}`);
}

function renderStrip() {
  const strip = document.getElementById('sf-strip');
  if (!strip) return;
  strip.replaceChildren('text: ');
  const toks = S.promptTokens.length ? S.promptTokens : [{ text: '\u27e8prompt\u27e9' }];
  for (const t of toks) strip.append(el('span', { class: 'tok' }, t.text));
  for (let i = 0; i < S.sf.gen; i++) {
    const t = S.generated[i];
    strip.append(el('span', { class: 'tok gen' }, t ? t.text : '\u27e8tok\u27e9'));
  }
}

function renderKv() {
  const f = document.getElementById('sf-kv');
  if (f) f.textContent = `KV cache: ${S.sf.cells} cells written per layer \u00d7 ${S.graph().dims.n_layer} layers (K and V of ${S.graph().dims.n_head_kv} heads \u00d7 ${S.graph().dims.head_dim})`;
}

// Play the pass: prefill (nt prompt tokens -> nt cells), decode (one token -> one cell), or run
// (prefill, then one decode step per generated token, or one placeholder step without a trace).
function playShapes(mode) {
  clearInterval(S.sfTimer);
  const A = S.graph(), d = A.dims;
  const steps = [];
  const pass = (kind) => {
    for (const s of S.sf.stages) steps.push({ s, kind });
    steps.push({ s: { stage: 'sampler', L: -1, shape: [1], formula: ['1'] }, kind });
  };
  const nPrompt = S.promptTokens.length || d.nt;
  if (mode === 'prefill' || mode === 'run') { S.sf.cells = 0; S.sf.gen = 0; pass('prefill'); }
  if (mode === 'decode') pass('decode');
  if (mode === 'run') for (let i = 0; i < Math.max(1, S.generated.length - 1); i++) pass('decode');
  let i = 0;
  const tick = () => {
    if (i >= steps.length) { clearInterval(S.sfTimer); document.getElementById('sf-header').setAttribute('data-done', '1'); return; }
    const { s, kind } = steps[i++];
    const key = s.L >= 0 ? 'L:' + s.stage : s.stage;
    document.querySelectorAll('.sf-node').forEach((n) => n.classList.toggle('current', n.dataset.key === key));
    const cur = document.querySelector(`.sf-node[data-key="${key}"]`), pk = document.getElementById('packet');
    const shape = kind === 'decode' && s.stage !== 'sampler' ? s.shape.map((x, j) => (j === s.shape.length - 1 && s.stage !== 'input' ? 1 : s.stage === 'input' ? 1 : x)) : s.shape;
    if (cur && pk) { // the packet sits over the current node (its box relative to the rail's)
      const rail = document.getElementById('rail');
      pk.style.transitionDuration = `${Math.min(250, 0.8 * S.sfDelay)}ms`; // it arrives before the next step
      pk.style.left = (cur.getBoundingClientRect().left - rail.getBoundingClientRect().left + rail.scrollLeft) + 'px';
      pk.textContent = `[${shape.join(', ')}]`;
    }
    if (s.L >= 0) document.querySelector('.bracket .xn').textContent = `layer ${s.L + 1} of ${d.n_layer}`;
    else if (s.stage !== 'input' && s.stage !== 'embedding') document.querySelector('.bracket .xn').textContent = `\u00d7 ${d.n_layer} layers`;
    const h = document.getElementById('sf-header');
    const w = s.weight && s.weight.weight;
    h.textContent = s.stage === 'sampler' ? `${kind}: sampler picks the next token from [n_vocab] = [${d.n_vocab}] logits`
      : `${kind}${s.L >= 0 ? ' layer ' + s.L : ''}: ${s.rep.name}  [${s.formula.join(', ')}] = [${shape.join(', ')}]` + (w ? `  weight ${w.name} ${w.type}` : '');
    const inner = document.getElementById('sf-inner');
    inner.textContent = (s.inner || []).map(([name, f, comp]) => `${name}: [${f}] = [${comp.map((x) => (x === 'n_kv' ? S.sf.cells : x)).join(', ')}]`).join('   ');
    if (s.stage === 'attention' && s.L === 0) { S.sf.cells += kind === 'prefill' ? nPrompt : 1; renderKv(); }
    if (s.stage === 'sampler') { S.sf.gen++; renderStrip(); }
  };
  S.sfTimer = setInterval(tick, S.sfDelay);
}
