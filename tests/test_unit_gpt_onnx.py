"""Chapter 10's GPT as ONNX (tools/export_gpt_onnx.py) and its explorer's Python side
(course_lib.widgets.GPTExplorer): the export wrapper computes GPT's numbers, onnxruntime's
numbers equal torch's within 1e-5, the export gives the same bytes every time (and the file that
`make gpt-onnx` wrote, if any, is current), and the explorer's kernel path answers the front end.
The browser's numbers: tests/test_site_gpt_explorer.py."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from export_gpt_onnx import ONNX_OUT, AttentionGPT, export_bytes, load_gpt  # noqa: E402

from course_lib import data  # noqa: E402
from course_lib.gpt import GPTConfig  # noqa: E402
from course_lib.widgets import GPTExplorer  # noqa: E402

PROMPTS = ["The return value of ", "T", "def f(x):\n    return x.", "A" * 64]


@pytest.fixture(scope="module")
def capstone():
    torch.set_num_threads(1)
    return load_gpt()


@pytest.fixture(scope="module")
def onnx_bytes(capstone):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warnings about Python-side checks
        return export_bytes(capstone[0])


def _ids(vocab, text):
    stoi = {ch: i for i, ch in enumerate(vocab)}
    return [stoi.get(ch, 0) for ch in text]


def test_the_weights_are_the_chapters_gpt(capstone):
    model, vocab, saved = capstone
    corpus = data.char_corpus()
    assert vocab == corpus.vocab.itos
    assert model.config == GPTConfig(len(vocab))  # GPTConfig's defaults, as the page
    assert sum(p.numel() for p in model.parameters()) == 809_088  # the page's count
    assert (saved["steps"], saved["lr"], saved["threads"]) == (1750, 4e-3, 2)
    assert saved["val_bpc"] < 2.05  # trained: the unigram baseline is 4.6


def test_the_wrapper_returns_gpts_own_logits_and_weights(capstone):
    model, vocab, _ = capstone
    idx = torch.tensor([_ids(vocab, PROMPTS[0]), _ids(vocab, PROMPTS[0][::-1])])  # (2, 20)
    with torch.no_grad():
        logits, attention = AttentionGPT(model)(idx)
        expected = model(idx)
    assert torch.equal(logits, expected)
    for layer, weights in enumerate(model.attention_weights()):
        assert torch.equal(attention[layer], weights)  # (B, h, T, T)
    assert attention.shape == (4, 2, 4, 20, 20)
    assert torch.allclose(attention.sum(-1), torch.ones(4, 2, 4, 20))
    assert attention.triu(1).abs().max() == 0  # causal


@pytest.mark.parametrize("text", PROMPTS)
def test_onnxruntime_equals_torch(capstone, onnx_bytes, text):
    ort = pytest.importorskip("onnxruntime")  # pinned in requirements.txt
    model, vocab, _ = capstone
    session = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    idx = torch.tensor([_ids(vocab, text)] * 2)
    logits, attention = session.run(None, {"idx": idx.numpy()})
    with torch.no_grad():
        want_logits, want_attention = AttentionGPT(model)(idx)
    assert logits.shape == tuple(want_logits.shape) and attention.shape == tuple(want_attention.shape)
    assert np.abs(logits - want_logits.numpy()).max() <= 1e-5
    assert np.abs(attention - want_attention.numpy()).max() <= 1e-5


def test_the_export_is_reproducible_and_the_built_file_current(capstone, onnx_bytes):
    import onnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = export_bytes(capstone[0])
    assert again == onnx_bytes
    graph = onnx.load_from_string(onnx_bytes)
    onnx.checker.check_model(graph)
    assert [o.name for o in graph.graph.output] == ["logits", "attention"]
    assert graph.opset_import[0].version == 17
    assert 3.0e6 < len(onnx_bytes) < 3.6e6  # float32, about 3.3 MB
    if ONNX_OUT.exists():
        assert ONNX_OUT.read_bytes() == onnx_bytes, f"{ONNX_OUT} is stale: run `make gpt-onnx`"


def test_the_explorer_answers_the_front_end_with_torchs_numbers(capstone):
    model, vocab, _ = capstone
    explorer = GPTExplorer(model, vocab)
    sent = []
    explorer.send = lambda content, buffers=None: sent.append((content, buffers))
    ids = _ids(vocab, PROMPTS[0])
    explorer._forward(explorer, {"type": "forward", "request": 7, "ids": ids}, [])
    ((content, buffers),) = sent
    assert content == {"type": "forward", "request": 7, "T": len(ids)}
    logits = np.frombuffer(buffers[0], dtype=np.float32).reshape(len(ids), len(vocab))
    attention = np.frombuffer(buffers[1], dtype=np.float32).reshape(4, 4, len(ids), len(ids))
    with torch.no_grad():
        want_logits, want_attention = AttentionGPT(model)(torch.tensor([ids]))
    assert np.array_equal(logits, want_logits[0].numpy())
    assert np.array_equal(attention, want_attention[:, 0].numpy())
    assert (explorer.n_layer, explorer.n_head, explorer.block_size) == (4, 4, 64)


def test_the_explorer_refuses_what_it_cannot_run(capstone):
    model, vocab, _ = capstone
    with pytest.raises(ValueError, match="vocab must list the model's 104"):
        GPTExplorer(model, vocab[:-1])
    explorer = GPTExplorer(model, vocab)
    with pytest.raises(ValueError, match="block_size=64"):
        explorer.forward("x" * 65)
    with pytest.raises(ValueError, match="block_size=64"):
        explorer.forward("")


def test_the_static_figure_draws_every_layer_and_head(capstone):
    import matplotlib

    matplotlib.use("Agg")
    explorer = GPTExplorer(*capstone[:2])
    fig = explorer.figure("The return value", position=11)
    heat, bars = fig.axes
    assert heat.images[0].get_array().shape == (16, 12)  # 4 layers x 4 heads, positions 0..11
    assert len(bars.patches) == 10


JS = ROOT / "course_lib" / "static" / "gpt_explorer.js"
NODE_FILTERED = """
import {filtered} from %s;
const cases = JSON.parse(process.argv[1]);
console.log(JSON.stringify(cases.map(([logits, s]) => filtered(logits, s))));
"""


def test_the_pages_sampling_filters_are_course_libs():
    """The explorer's front end keeps the tokens that course_lib.decoding.sample_next keeps (temperature,
    then top-k, then top-p), with the same probabilities (node runs the page's own function)."""
    import json
    import shutil
    import subprocess

    from course_lib import decoding

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the site's npm set-up needs it)")
    g = torch.Generator().manual_seed(0)
    settings = [(1.0, 0, 1.0), (0.7, 5, 1.0), (1.3, 0, 0.9), (0.5, 20, 0.6), (1.0, 1, 1.0), (2.0, 0, 0.05)]
    cases = [(torch.randn(104, generator=g).mul(3).tolist(), s) for s in settings]
    script = NODE_FILTERED % json.dumps(JS.as_uri())
    payload = json.dumps([[logits, {"temperature": t, "topK": k, "topP": p}] for logits, (t, k, p) in cases])
    out = subprocess.run(
        [node, "--input-type=module", "-e", script, payload], capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout)
    for (logits, (t, k, p)), probs in zip(cases, got):
        z = torch.tensor([logits], dtype=torch.float64) / t
        if k:
            z = decoding.top_k_filter(z, k)
        if p < 1:
            z = decoding.top_p_filter(z, p)
        want = z.softmax(-1)[0]
        assert torch.equal(torch.tensor(probs) > 0, want > 0), (t, k, p)
        assert torch.allclose(torch.tensor(probs, dtype=torch.float64), want, atol=1e-12), (t, k, p)
