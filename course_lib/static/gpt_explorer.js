// The GPT explorer (course_lib.widgets.GPTExplorer): chapter 10's trained GPT, run live.
//
// Two ways to run the model, the same numbers (tests/test_site_gpt_explorer.py, tests/test_unit_gpt_onnx.py):
// * on the static site: onnxruntime-web (WebAssembly only) in the reader's browser, on the ONNX
//   file that tools/export_gpt_onnx.py writes; _ext/course_site.py serves the runtime and the
//   model from the site itself (next to vendor/course-widgets-loader.js), never from a CDN;
// * in Jupyter or Colab (no such script on the page): the kernel runs the model with torch,
//   asked through the widget's messages (GPTExplorer._forward).
// A forward pass maps ids (T,) to {logits (T, V), attention (n_layer, n_head, T, T)}, row-major.
// Sampling (temperature, top-k, top-p, in course_lib.decoding's order) uses the page's own
// seeded generator (mulberry32), so a seed repeats a text on this page, not torch's samples.
// Numbers are written into data-* attributes so tests read numbers, not pixels.

const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e",
                 "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"];
const SVG = "http://www.w3.org/2000/svg";
const LOADER = "course-widgets-loader.js";

function h(tag, attrs = {}, parent = null, ns = null) {
  const node = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function viridis(t) {
  return VIRIDIS[Math.round(Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1))];
}

function shown(ch) {
  return ch === " " ? "␣" : ch === "\n" ? "⏎" : ch;
}

// -- the model: ids -> {T, logits, attention} ------------------------------------------------

// The folder of the site's vendored scripts, or null off the site (Jupyter, Colab).
function siteVendor() {
  const script = document.querySelector(`script[src*='${LOADER}']`);
  return script ? script.src.slice(0, script.src.lastIndexOf("/") + 1) : null;
}

async function wasmBackend(vendor, modelFile) {
  const ort = await import(`${vendor}onnxruntime-web/ort.wasm.min.mjs`);
  ort.env.wasm.wasmPaths = `${vendor}onnxruntime-web/`;
  ort.env.wasm.numThreads = 1;      // threads need cross-origin isolation, which a static site lacks
  ort.env.wasm.proxy = false;
  const url = new URL(`../course-gpt/${modelFile}`, vendor).href;
  const session = await ort.InferenceSession.create(url, { executionProviders: ["wasm"] });
  return async (ids) => {
    const idx = new ort.Tensor("int64", BigInt64Array.from(ids, (i) => BigInt(i)), [1, ids.length]);
    const out = await session.run({ idx });
    return { T: ids.length, logits: out.logits.data, attention: out.attention.data };
  };
}

function floats(view) {
  return new Float32Array(view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength));
}

function kernelBackend(model) {
  const pending = new Map();
  let next = 0;
  model.on("msg:custom", (msg, buffers) => {
    if (msg.type !== "forward" || !pending.has(msg.request)) return;
    pending.get(msg.request)({ T: msg.T, logits: floats(buffers[0]), attention: floats(buffers[1]) });
    pending.delete(msg.request);
  });
  return (ids) => new Promise((resolve) => {
    const request = next++;
    pending.set(request, resolve);
    model.send({ type: "forward", request, ids: Array.from(ids) });
  });
}

// -- sampling: course_lib.decoding.sample_next's order, the page's own random numbers --------

function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function softmax(xs) {
  const m = Math.max(...xs);
  const e = xs.map((x) => (x === -Infinity ? 0 : Math.exp(x - m)));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / z);
}

function argmax(xs) {
  let best = 0;
  for (let i = 1; i < xs.length; i++) if (xs[i] > xs[best]) best = i;
  return best;   // the first of equal maxima, as torch.argmax
}

// logits (V,) -> the kept tokens' probabilities (0 for the others): / temperature, top-k, top-p.
function filtered(logits, { temperature, topK, topP }) {
  let z = Array.from(logits, (v) => v / temperature);
  const order = z.map((_, i) => i).sort((a, b) => z[b] - z[a]);
  if (topK > 0 && topK < z.length) {
    const kth = z[order[topK - 1]];
    z = z.map((v) => (v < kth ? -Infinity : v));
  }
  if (topP < 1) {
    const p = softmax(z);
    let before = 0;
    for (const i of order) {
      const mine = p[i];
      if (before >= topP) z[i] = -Infinity;
      before += mine;
    }
  }
  return softmax(z);
}

function sampleNext(logits, settings, rand) {
  if (settings.temperature === 0) return argmax(logits);
  const probs = filtered(logits, settings);
  let u = rand(), last = 0;
  for (let i = 0; i < probs.length; i++) {
    if (probs[i] === 0) continue;
    last = i;
    u -= probs[i];
    if (u < 0) return i;
  }
  return last;
}

// -- the page ------------------------------------------------------------------------------

function numberControl(parent, name, label, value, attrs) {
  const wrap = h("label", { class: "cl-control", "data-control": name }, parent);
  h("span", { class: "cl-control-label" }, wrap).textContent = label;
  const input = h("input", { type: "number", ...attrs }, wrap);
  input.value = String(value);
  return input;
}

function render({ model, el }) {
  const vocab = model.get("vocab");
  const stoi = new Map(vocab.map((ch, i) => [ch, i]));
  const block = model.get("block_size"), L = model.get("n_layer"), H = model.get("n_head");
  const V = vocab.length;

  const root = h("div", { class: "cl-explorer cl-gpt", "data-explorer": "gpt", "data-state": "loading",
                          role: "group", "aria-label": "GPT explorer" }, el);
  root.setAttribute("data-lm-suppress-shortcuts", "true");   // JupyterLab: typed keys stay here
  h("div", { class: "cl-title" }, root).textContent = model.get("title");
  const status = h("p", { class: "cl-gpt-status", role: "status", "aria-live": "polite" }, root);
  const controls = h("div", { class: "cl-controls" }, root);
  controls.addEventListener("keydown", (e) => {
    if (e.key !== "Tab" && e.key !== "Escape" && !(e.key === "Enter" && e.shiftKey)) e.stopPropagation();
  });
  const promptWrap = h("label", { class: "cl-control cl-gpt-prompt", "data-control": "prompt" }, controls);
  h("span", { class: "cl-control-label" }, promptWrap).textContent = "prompt";
  const prompt = h("textarea", { rows: 2, maxlength: block - 1, spellcheck: "false" }, promptWrap);
  prompt.value = model.get("prompt");
  const inputs = {
    temperature: numberControl(controls, "temperature", "temperature (0: greedy)", model.get("temperature"),
                               { min: 0, max: 3, step: 0.1 }),
    top_k: numberControl(controls, "top_k", "top-k (0: all)", model.get("top_k"), { min: 0, max: V, step: 1 }),
    top_p: numberControl(controls, "top_p", "top-p", model.get("top_p"), { min: 0.05, max: 1, step: 0.05 }),
    seed: numberControl(controls, "seed", "seed", model.get("seed"), { min: 0, step: 1 }),
    num_tokens: numberControl(controls, "num_tokens", "characters to write", model.get("num_tokens"),
                              { min: 1, max: block - 1, step: 1 }),
  };
  const button = h("button", { type: "button", class: "cl-gpt-generate", disabled: "" }, controls);
  button.textContent = "Generate";

  const textBox = h("div", { class: "cl-gpt-text", "data-panel": "text" }, root);
  const posWrap = h("label", { class: "cl-control", "data-control": "position" }, root);
  h("span", { class: "cl-control-label" }, posWrap).textContent = "position";
  const position = h("input", { type: "range", min: 0, max: 0, step: 1, value: 0 }, posWrap);
  const posOut = h("output", {}, posWrap);
  const panels = h("div", { class: "cl-panels" }, root);
  const attnFig = h("figure", { class: "cl-panel cl-gpt-attention", "data-panel": "attention" }, panels);
  const distFig = h("figure", { class: "cl-panel cl-gpt-next", "data-panel": "next" }, panels);
  h("div", { class: "cl-caption" }, root).textContent = model.get("caption");

  let forward = null, ids = [], promptLength = 0, last = null, busy = false;

  function encode(str) {
    return Array.from(str).map((ch) => stoi.get(ch) ?? 0);   // 0: <unk>
  }

  function settings() {
    const num = (k, lo, hi, fallback) => {
      const v = Number(inputs[k].value);
      return Number.isFinite(v) ? Math.min(Math.max(v, lo), hi) : fallback;
    };
    return { temperature: num("temperature", 0, 3, 1), topK: Math.round(num("top_k", 0, V, 0)),
             topP: num("top_p", 0.05, 1, 1), seed: Math.round(num("seed", 0, 2 ** 31, 0)),
             numTokens: Math.round(num("num_tokens", 1, block - 1, 40)) };
  }

  function drawText() {
    textBox.replaceChildren();
    const t = Number(position.value);
    ids.forEach((id, i) => {
      const span = h("span", { class: i < promptLength ? "cl-gpt-char cl-gpt-given" : "cl-gpt-char",
                               "data-pos": i }, textBox);
      if (i === t) span.classList.add("cl-gpt-chosen");
      span.textContent = vocab[id] === "\n" ? "⏎\n" : vocab[id];
      span.addEventListener("click", () => { position.value = String(i); drawPosition(); });
    });
    root.dataset.ids = JSON.stringify(ids);
    root.dataset.text = ids.map((i) => vocab[i]).join("");
    root.dataset.promptLength = String(promptLength);
  }

  // The chosen position t: every layer's and head's attention row over the context 0..t, and
  // the distribution of the token after t.
  function drawPosition() {
    if (!last) return;
    const t = Math.min(Number(position.value), last.T - 1), T = last.T;
    posOut.textContent = `${t}: ${shown(vocab[ids[t]])}`;
    for (const span of textBox.children) span.classList.toggle("cl-gpt-chosen", Number(span.dataset.pos) === t);
    const rows = [];
    for (let l = 0; l < L; l++) for (let hd = 0; hd < H; hd++) {
      const start = ((l * H + hd) * T + t) * T;
      rows.push(Array.from(last.attention.slice(start, start + t + 1)));
    }
    drawAttention(t, rows);
    drawNext(t, Array.from(last.logits.slice(t * V, (t + 1) * V)));
  }

  function drawAttention(t, rows) {
    attnFig.replaceChildren();
    h("figcaption", {}, attnFig).textContent =
      `attention of position ${t} (${shown(vocab[ids[t]])}) over positions 0-${t}: one row per layer and head`;
    const cell = Math.max(5, Math.min(16, Math.floor(460 / (t + 1)))), left = 44, top = 16;
    const width = left + cell * (t + 1) + 4, height = top + rows.length * 14 + 4;
    let best = { w: -1 };
    rows.forEach((row, r) => row.forEach((w, j) => { if (w > best.w) best = { w, r, j }; }));
    const svg = h("svg", { viewBox: `0 0 ${width} ${height}`, class: "cl-svg", role: "img",
                           "aria-label": `Attention weights of position ${t} in ${L} layers of ${H} heads; ` +
                             `the largest, ${best.w.toFixed(2)}, is layer ${Math.floor(best.r / H) + 1} ` +
                             `head ${(best.r % H) + 1} on position ${best.j} (${shown(vocab[ids[best.j]])})` }, attnFig, SVG);
    ids.slice(0, t + 1).forEach((id, j) => {
      if (cell >= 9 || j % 4 === 0) {
        const c = h("text", { x: left + j * cell + cell / 2, y: top - 4, "font-size": 9, "text-anchor": "middle",
                              fill: "currentColor" }, svg, SVG);
        c.textContent = shown(vocab[id]);
      }
    });
    rows.forEach((row, r) => {
      const y = top + r * 14;
      const lab = h("text", { x: left - 4, y: y + 10, "font-size": 9, "text-anchor": "end", fill: "currentColor" }, svg, SVG);
      lab.textContent = `L${Math.floor(r / H) + 1} H${(r % H) + 1}`;
      row.forEach((w, j) => {
        const rect = h("rect", { x: left + j * cell, y, width: cell, height: 13, fill: viridis(w) }, svg, SVG);
        h("title", {}, rect, SVG).textContent = `layer ${Math.floor(r / H) + 1}, head ${(r % H) + 1}, ` +
          `position ${j} (${shown(vocab[ids[j]])}): ${w.toFixed(3)}`;
      });
    });
    attnFig.dataset.position = String(t);
    attnFig.dataset.values = JSON.stringify(rows);
  }

  function drawNext(t, logits) {
    distFig.replaceChildren();
    const s = settings();
    const probs = s.temperature === 0 ? logits.map((_, i) => (i === argmax(logits) ? 1 : 0)) : filtered(logits, s);
    h("figcaption", {}, distFig).textContent =
      `the next character after position ${t}: the 10 most likely, at these settings`;
    const table = h("table", { class: "cl-gpt-dist" }, distFig);
    const head = h("tr", {}, h("thead", {}, table));
    for (const name of ["character", "probability"]) h("th", { scope: "col" }, head).textContent = name;
    const body = h("tbody", {}, table);
    const order = probs.map((_, i) => i).sort((a, b) => probs[b] - probs[a] || logits[b] - logits[a]).slice(0, 10);
    for (const i of order) {
      const tr = h("tr", { "data-token": i }, body);
      h("td", { class: "cl-gpt-token" }, tr).textContent = shown(vocab[i]);
      const td = h("td", {}, tr);
      h("span", { class: "cl-gpt-bar", style: `width:${(probs[i] * 70).toFixed(1)}%`, "aria-hidden": "true" }, td);
      h("span", { class: "cl-gpt-prob" }, td).textContent = probs[i].toFixed(3);
    }
    distFig.dataset.position = String(t);
    distFig.dataset.logits = JSON.stringify(logits);
    distFig.dataset.values = JSON.stringify(order.map((i) => [i, probs[i]]));
  }

  // One forward pass over newIds; the text is redrawn, the panels only when `panels` (while
  // generating they are drawn once, at the end: redrawing them costs more than the model).
  async function run(newIds, panels = true) {
    ids = newIds;
    last = await forward(ids);
    position.max = String(ids.length - 1);
    position.value = String(ids.length - 1);
    drawText();
    if (panels) drawPosition();
  }

  async function generate() {
    if (busy || !forward) return;
    busy = true;
    button.disabled = true;
    root.dataset.state = "generating";
    const s = settings();
    const rand = mulberry32(s.seed);
    const start = performance.now();
    let first = null;
    ids = encode(prompt.value.slice(0, block - 1) || " ");
    promptLength = ids.length;
    const n = Math.min(s.numTokens, block - ids.length);
    status.textContent = `Writing ${n} characters...`;
    await run(ids, false);
    for (let k = 0; k < n; k++) {
      const next = sampleNext(Array.from(last.logits.slice((last.T - 1) * V, last.T * V)), s, rand);
      await run([...ids, next], k === n - 1);
      if (first === null) first = performance.now() - start;   // the first new character is on the page
    }
    const seconds = (performance.now() - start) / 1000;
    root.dataset.firstTokenMs = String(first ?? 0);
    root.dataset.tokensPerSecond = String(n / seconds);
    status.textContent = `Wrote ${n} characters in ${seconds.toFixed(2)} s (${backend}).`;
    root.dataset.state = "ready";
    model.set("text", root.dataset.text);
    try { model.save_changes(); } catch (err) { /* no kernel on the static site */ }
    busy = false;
    button.disabled = false;
  }

  button.addEventListener("click", generate);
  position.addEventListener("input", drawPosition);
  for (const input of Object.values(inputs)) input.addEventListener("change", drawPosition);

  const vendor = siteVendor();
  const backend = vendor ? "WebAssembly, in this browser" : "the notebook's kernel, with torch";
  root.dataset.backend = vendor ? "wasm" : "kernel";
  status.textContent = "Loading the model...";
  (async () => {
    try {
      if (vendor && typeof WebAssembly !== "object") {
        root.dataset.state = "no-wasm";
        status.textContent = "This browser does not run WebAssembly, so the model cannot run on this " +
          "page. The figure below shows the same panels for one prompt.";
        controls.hidden = true;
        return;
      }
      forward = vendor ? await wasmBackend(vendor, model.get("model_file")) : kernelBackend(model);
      root.courseForward = forward;   // the tests compare the page's numbers with torch's
      promptLength = encode(prompt.value).length;
      await run(encode(prompt.value || " "));
      status.textContent = `Ready: the model runs on ${backend}.`;
      root.dataset.state = "ready";
      button.disabled = false;
    } catch (err) {
      root.dataset.state = "error";
      status.textContent = `The model could not be loaded (${err}). The figure below shows the same ` +
        "panels for one prompt.";
    }
  })();
}

export { argmax, filtered, mulberry32, sampleNext };   // for tests/test_unit_gpt_onnx.py (node)
export default { render };
