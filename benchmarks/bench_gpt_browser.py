"""Chapter 10's GPT explorer in headless Chromium: time to first token and tokens per second.

    python benchmarks/bench_gpt_browser.py [--runs 3] [--tokens 40]

The page is the built site's chapter 10 if the site is built (`make book`), else the one-page
book of tools/gpt_explorer_page.py (the same scripts and model). The network is cut (every
request outside the local server is blocked). For each run: a fresh page; the seconds until the
model is loaded (onnxruntime-web, WebAssembly, one thread: the ONNX session created and the
prompt's first forward pass done); then Generate with the chapter's default settings: the
milliseconds from the click to the first sampled token, and tokens per second over the whole
generation, as the page measures them itself (performance.now(); data-first-token-ms,
data-tokens-per-second). Each token is one forward pass over the whole context (no key/value
cache in the ONNX graph), so later tokens cost more. Writes benchmarks/gpt_browser.json.
A measurement, not a test: it depends on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tests")]

from gpt_explorer_page import PAGE, build_page  # noqa: E402
from test_site_gpt_explorer import CHAPTER, READY, _serve  # noqa: E402

from site_browser import SITE, PageVisit, launch_browser  # noqa: E402

OUT = ROOT / "benchmarks" / "gpt_browser.json"


def measure(browser, base, path, tokens):
    start = time.perf_counter()
    visit = PageVisit(browser, base, path)
    try:
        visit.page.wait_for_selector(READY, timeout=120000)
        load_s = time.perf_counter() - start
        root = visit.page.locator("[data-explorer='gpt']")
        root.locator("[data-control='num_tokens'] input").fill(str(tokens))
        root.locator("button.cl-gpt-generate").click()
        visit.page.wait_for_function(
            "() => { const r = document.querySelector(\"[data-explorer='gpt']\");"
            " return r.dataset.state === 'ready' && r.dataset.tokensPerSecond; }",
            timeout=120000,
        )
        assert visit.external == [], visit.external
        return {
            "load_s": load_s,
            "first_token_ms": float(root.get_attribute("data-first-token-ms")),
            "tokens_per_s": float(root.get_attribute("data-tokens-per-second")),
        }
    finally:
        visit.close()


def _cpu():
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "cpu"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=40)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]  # the machine is shared: its load is part of the record
    with tempfile.TemporaryDirectory() as tmp:
        if (SITE / CHAPTER).exists():
            folder, path = SITE, CHAPTER
        else:
            folder, path = build_page(Path(tmp)), PAGE
        httpd = _serve(folder)
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        browser_gen = launch_browser()
        browser = next(browser_gen)
        runs = [measure(browser, base, path, args.tokens) for _ in range(args.runs)]
        browser_gen.close()
        httpd.shutdown()
    summary = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    record = {
        "page": path,
        "tokens": args.tokens,
        "runs": runs,
        "median": summary,
        "browser": "headless Chromium (Debian), onnxruntime-web WebAssembly, 1 thread",
        "machine": f"{platform.machine()}, {_cpu()}",
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(
        f"median of {args.runs} runs: model ready in {summary['load_s']:.2f} s, first token "
        f"{summary['first_token_ms']:.0f} ms, {summary['tokens_per_s']:.1f} tokens/s ({args.tokens} tokens)"
    )


if __name__ == "__main__":
    main()
