// The one renderer behind every explorer of the course (an anywidget front end).
//
// Python (course_lib.widgets) computes everything and sends a `spec`:
//   { name, title, caption,
//     controls: [{name, label, kind: "slider"|"select"|"toggle", options, labels}],
//     panels:   [{kind: "histogram"|"bars"|"heatmap"|"heatmaps"|"lines"|"stats"|"text"|"tokens",
//                 key, title, ...}],
//     frames:   { "<i0>|<i1>|...": { <panel key>: <panel data> } } }
// A frame key is the list of the controls' option indices joined by "|".
// Moving a control only switches frames, so the explorer works on the static
// site with no kernel; with a kernel, the control's trait is also set in Python.
// Numbers are written into data-* attributes so tests read numbers, not pixels.

const SVG = "http://www.w3.org/2000/svg";
const BLUE = "#0072B2";   // Okabe–Ito palette: colour-blind safe
const ORANGE = "#E69F00";
const SERIES = [BLUE, ORANGE, "#009E73", "#CC79A7", "#56B4E9", "#D55E00"];
const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e",
                 "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"];

function h(tag, attrs = {}, parent = null, ns = null) {
  const node = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function s(tag, attrs, parent) { return h(tag, attrs, parent, SVG); }

function text(parent, x, y, str, attrs = {}) {
  const t = s("text", { x, y, "font-size": 11, fill: "currentColor", ...attrs }, parent);
  t.textContent = str;
  return t;
}

function fmt(v, digits = 3) {
  if (typeof v !== "number") return String(v);
  if (v !== 0 && (Math.abs(v) >= 1e4 || Math.abs(v) < 1e-3)) return v.toExponential(2);
  return v.toFixed(digits);
}

function viridis(t) {
  const x = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1);
  return VIRIDIS[Math.round(x)];
}

// A plotting area with axes: returns {svg, g, x(v), y(v), W, H}.
function frame(parent, { xmin, xmax, ymin, ymax, logy = false, xticks = true, width = 340, height = 200 }) {
  const m = { l: 46, r: 10, t: 8, b: 30 };
  const W = width - m.l - m.r, H = height - m.t - m.b;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, class: "cl-svg" }, parent);
  const g = s("g", { transform: `translate(${m.l},${m.t})` }, svg);
  const ty = logy ? (v) => Math.log10(Math.max(v, 1e-300)) : (v) => v;
  const y0 = ty(ymin), y1 = ty(ymax);
  const x = (v) => ((v - xmin) / (xmax - xmin || 1)) * W;
  const y = (v) => H - ((ty(v) - y0) / (y1 - y0 || 1)) * H;
  s("line", { x1: 0, y1: H, x2: W, y2: H, stroke: "currentColor" }, g);
  s("line", { x1: 0, y1: 0, x2: 0, y2: H, stroke: "currentColor" }, g);
  for (const v of xticks ? [xmin, (xmin + xmax) / 2, xmax] : []) {
    text(g, x(v), H + 14, fmt(v, Number.isInteger(v) ? 0 : 1), { "text-anchor": "middle" });
  }
  const yticks = logy ? [ymin, ymax] : [ymin, (ymin + ymax) / 2, ymax];
  for (const v of yticks) {
    text(g, -4, y(v) + 4, fmt(v, 2), { "text-anchor": "end" });
  }
  return { svg, g, x, y, W, H };
}

function label(box, panel) {
  if (panel.xlabel) text(box.g, box.W / 2, box.H + 27, panel.xlabel, { "text-anchor": "middle" });
}

// Lines of text (e.g. samples from a language model), preformatted, spanning the row.
// d = {lines: [string], note}.
function textPanel(el, panel, d) {
  el.style.maxWidth = "none";
  el.style.flexBasis = "100%";
  const box = h("div", { class: "cl-text" }, el);
  for (const line of d.lines) h("pre", { class: "cl-text-line" }, box).textContent = line;
  if (d.note) h("div", { class: "cl-text-note" }, box).textContent = d.note;
  el.dataset.values = JSON.stringify(d.lines);
}

const PANELS = {
  histogram(el, panel, d) {
    const ymax = panel.ymax ?? Math.max(...d.counts, 1e-12);
    const box = frame(el, { xmin: d.edges[0], xmax: d.edges[d.edges.length - 1], ymin: 0, ymax });
    d.counts.forEach((c, i) => {
      const x0 = box.x(d.edges[i]), x1 = box.x(d.edges[i + 1]);
      s("rect", { x: x0, y: box.y(Math.min(c, ymax)), width: Math.max(x1 - x0 - 0.5, 0.5),
                  height: box.H - box.y(Math.min(c, ymax)), fill: BLUE }, box.g);
    });
    label(box, panel);
    el.dataset.values = d.counts.join(",");
  },

  bars(el, panel, d) {
    // One bar per category, drawn from zero (values may be negative, e.g. scores); up to 12
    // bars each get a tick label (d.labels, else the index).
    const n = d.values.length;
    const ymin = panel.ymin ?? Math.min(0, ...d.values);
    const ymax = panel.ymax ?? Math.max(...d.values, ymin + 1e-12);
    const box = frame(el, { xmin: 0, xmax: n, ymin, ymax, xticks: n > 12 });
    const w = box.W / n;
    d.values.forEach((v, i) => {
      const top = box.y(Math.min(Math.max(v, 0), ymax)), bottom = box.y(Math.max(Math.min(v, 0), ymin));
      s("rect", { x: i * w + 1, y: top, width: Math.max(w - 2, 1), height: Math.max(bottom - top, 0),
                  fill: d.highlight === i ? ORANGE : BLUE }, box.g);
      if (n <= 12) text(box.g, (i + 0.5) * w, box.H + 14, d.labels ? d.labels[i] : String(i),
                        { "text-anchor": "middle", "font-size": 9 });
    });
    if (ymin < 0) s("line", { x1: 0, y1: box.y(0), x2: box.W, y2: box.y(0), stroke: "currentColor" }, box.g);
    label(box, panel);
    el.dataset.values = d.values.map((v) => fmt(v, 6)).join(",");
  },

  lines(el, panel, d) {
    const ys = d.series.flatMap((ser) => ser.y);
    const box = frame(el, { xmin: Math.min(...d.x), xmax: Math.max(...d.x),
                            ymin: panel.ymin ?? Math.min(...ys), ymax: panel.ymax ?? Math.max(...ys),
                            logy: !!panel.logy });
    d.series.forEach((ser, k) => {
      const pts = ser.y.map((v, i) => `${box.x(d.x[i])},${box.y(v)}`).join(" ");
      s("polyline", { points: pts, fill: "none", stroke: SERIES[k % SERIES.length], "stroke-width": 2 }, box.g);
      // Legend: the label in the text colour (readable on a light or a dark page), the series'
      // colour on a short line beside it.
      const ly = 12 + 13 * k;
      s("line", { x1: box.W - 18, y1: ly - 4, x2: box.W - 2, y2: ly - 4,
                  stroke: SERIES[k % SERIES.length], "stroke-width": 3 }, box.g);
      text(box.g, box.W - 22, ly, ser.label, { "text-anchor": "end" });
    });
    label(box, panel);
    el.dataset.values = JSON.stringify(d.series.map((ser) => ser.y));
  },

  heatmap(el, panel, d) {
    const rows = d.matrix.length, cols = d.matrix[0].length;
    const cell = Math.max(8, Math.min(28, Math.floor(300 / Math.max(rows, cols))));
    const m = { l: 70, t: 60 };
    const svg = s("svg", { viewBox: `0 0 ${m.l + cols * cell + 10} ${m.t + rows * cell + 10}`,
                           class: "cl-svg" }, el);
    const vmin = panel.vmin ?? 0, vmax = panel.vmax ?? 1;
    d.matrix.forEach((row, i) => row.forEach((v, j) => {
      const r = s("rect", { x: m.l + j * cell, y: m.t + i * cell, width: cell, height: cell,
                            fill: viridis((v - vmin) / (vmax - vmin || 1)) }, svg);
      s("title", {}, r).textContent = `${d.rows?.[i] ?? i} → ${d.cols?.[j] ?? j}: ${fmt(v)}`;
    }));
    (d.rows || []).forEach((lab, i) =>
      text(svg, m.l - 4, m.t + i * cell + cell / 2 + 4, lab, { "text-anchor": "end" }));
    (d.cols || []).forEach((lab, j) =>
      text(svg, m.l + j * cell + cell / 2, m.t - 4, lab,
           { transform: `rotate(-60 ${m.l + j * cell + cell / 2} ${m.t - 4})` }));
    el.dataset.values = JSON.stringify(d.matrix);
  },

  // Small multiples: several heatmaps side by side (e.g. one per attention head), sharing
  // row/column labels. d = {maps: [{title, matrix}], rows, cols}; the panel spans the row.
  heatmaps(el, panel, d) {
    el.style.maxWidth = "none";
    el.style.flexBasis = "100%";
    const grid = h("div", { class: "cl-heatmaps" }, el);
    d.maps.forEach((m, k) => {
      const item = h("div", { class: "cl-heatmaps-item", "data-map": k }, grid);
      h("div", { class: "cl-heatmaps-title" }, item).textContent = m.title;
      PANELS.heatmap(item, panel, { matrix: m.matrix, rows: d.rows, cols: d.cols });
    });
    el.dataset.count = String(d.maps.length);
    el.dataset.values = JSON.stringify(d.maps.map((m) => m.matrix));
  },

  stats(el, panel, d) {
    const table = h("table", { class: "cl-stats" }, el);
    for (const st of d) {
      const tr = h("tr", {}, table);
      h("th", {}, tr).textContent = st.label;
      const td = h("td", { "data-stat": st.name, "data-value": String(st.value) }, tr);
      td.textContent = fmt(st.value, st.digits ?? 3);
    }
  },
  text: textPanel,

  // A text split into tokens (course_lib.widgets.tokens): one box per token, colours
  // alternating, a space shown as '·' and a line end as '⏎'; the panel spans the row.
  // d = {tokens: [string], ids: [int]}.
  tokens(el, panel, d) {
    el.style.maxWidth = "none";
    el.style.flexBasis = "100%";
    const box = h("div", { class: "cl-tokens" }, el);
    d.tokens.forEach((t, i) => {
      const token = h("span", { class: `cl-token cl-token-${i % 2}`, title: `id ${d.ids[i]}` }, box);
      token.textContent = t.replace(/ /g, "·").replace(/\n/g, "⏎");
    });
    el.dataset.count = String(d.tokens.length);
    el.dataset.values = JSON.stringify(d.tokens);
    el.dataset.ids = JSON.stringify(d.ids);
  },
};

function makeControl(parent, ctl, index, onChange) {
  const wrap = h("label", { class: "cl-control", "data-control": ctl.name }, parent);
  h("span", { class: "cl-control-label" }, wrap).textContent = ctl.label;
  const shown = (i) => (ctl.labels ? ctl.labels[i] : String(ctl.options[i]));
  let input;
  if (ctl.kind === "toggle") {
    input = h("input", { type: "checkbox" }, wrap);
    input.checked = ctl.options[index] === true;
    input.addEventListener("change", () => onChange(ctl.options.indexOf(input.checked)));
  } else if (ctl.kind === "select") {
    input = h("select", {}, wrap);
    // Each option's value is its position; the frame index is the selected option's position.
    ctl.options.forEach((_, i) => { h("option", { value: i }, input).textContent = shown(i); });
    input.selectedIndex = index;
    input.addEventListener("change", () => onChange(input.selectedIndex));
  } else {
    input = h("input", { type: "range", min: 0, max: ctl.options.length - 1, step: 1 }, wrap);
    input.value = index;
    const out = h("output", {}, wrap);
    out.textContent = shown(index);
    input.addEventListener("input", () => {
      out.textContent = shown(Number(input.value));
      onChange(Number(input.value));
    });
  }
  return input;
}

// With a kernel, Python sees the new value. On the static site there is no
// kernel (and no comm): the frame has already switched, so there is nothing to do.
function sendToPython(model, name, value) {
  try {
    model.set(name, value);
    model.save_changes();
  } catch (err) {
    if (!String(err).includes("comm")) throw err;
  }
}

// Keys a control handles itself: the arrows, Home/End, PageUp/PageDown (slider, select),
// Space (toggle, select) and, on a select, the letters that jump to an option.
function ownsKey(e) {
  if (e.ctrlKey || e.metaKey || e.altKey) return false;
  if (OWN_KEYS.has(e.key)) return true;
  return e.target.tagName === "SELECT" && e.key.length === 1;
}
const OWN_KEYS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End",
                          "PageUp", "PageDown", " "]);

// In JupyterLab and Jupyter Notebook 7, the notebook's command-mode shortcuts (Lumino's
// key bindings, on the document) also see the keys pressed on a control: the arrow keys
// that move a slider move the notebook's active cell, and the focus with it. The keys a
// control owns stay with the control; the others (Shift+Enter, Escape, Ctrl+S, Tab) still
// reach the notebook:
// * JupyterLab listens in the bubbling phase: the control stops the key (guardControls);
// * Notebook 7 listens in the capture phase, before the control: a listener on the window,
//   which comes first, marks the control with Lumino's `data-lm-suppress-shortcuts` for
//   that key only (Lumino matches no key binding at or above an element so marked).
// On the static site nothing listens to these keys; both are then harmless.
function guardControls(controls) {
  controls.addEventListener("keydown", (e) => { if (ownsKey(e)) e.stopPropagation(); });
  if (window.__clExplorerKeys) return;
  window.__clExplorerKeys = true;
  window.addEventListener("keydown", (e) => {
    const target = e.target;
    if (!(target instanceof Element) || !target.closest(".cl-explorer .cl-control")) return;
    if (ownsKey(e)) target.setAttribute("data-lm-suppress-shortcuts", "true");
    else target.removeAttribute("data-lm-suppress-shortcuts");
  }, true);
}

function render({ model, el }) {
  const spec = model.get("spec");
  const root = h("div", { class: "cl-explorer", "data-explorer": spec.name }, el);
  if (spec.title) h("div", { class: "cl-title" }, root).textContent = spec.title;
  const controls = h("div", { class: "cl-controls" }, root);
  guardControls(controls);
  const panels = h("div", { class: "cl-panels" }, root);
  if (spec.caption) h("div", { class: "cl-caption" }, root).textContent = spec.caption;

  const indexOf = (ctl) => {
    const i = ctl.options.findIndex((o) => o === model.get(ctl.name));
    return i < 0 ? 0 : i;
  };
  const index = spec.controls.map(indexOf);

  function draw() {
    const key = index.join("|");
    const data = spec.frames[key];
    root.dataset.frame = key;
    panels.replaceChildren();
    for (const panel of spec.panels) {
      const box = h("figure", { class: "cl-panel", "data-panel": panel.key }, panels);
      if (panel.title) h("figcaption", {}, box).textContent = panel.title;
      if (data && data[panel.key] !== undefined) PANELS[panel.kind](box, panel, data[panel.key]);
    }
  }

  spec.controls.forEach((ctl, c) => {
    const input = makeControl(controls, ctl, index[c], (i) => {
      index[c] = i;
      draw();
      sendToPython(model, ctl.name, ctl.options[i]);
    });
    // Python may set the trait too (explorer.d_k = 256): follow it.
    model.on(`change:${ctl.name}`, () => {
      const i = indexOf(ctl);
      if (i === index[c]) return;
      index[c] = i;
      if (ctl.kind === "toggle") input.checked = ctl.options[i] === true;
      else if (ctl.kind === "select") input.selectedIndex = i;
      else input.value = i;
      const out = input.parentNode.querySelector("output");
      if (out) out.textContent = ctl.labels ? ctl.labels[i] : String(ctl.options[i]);
      draw();
    });
  });
  draw();
}

export default { render };
