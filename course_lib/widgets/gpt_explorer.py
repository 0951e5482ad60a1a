"""The explorer of chapter 10: its trained GPT, prompted and sampled live, its attention shown.

Unlike the other explorers, nothing here is precomputed: the model runs on the reader's prompt
when the page loads and at each Generate.
On the static site it runs in the reader's browser (onnxruntime-web, WebAssembly) from the ONNX
file that `make gpt-onnx` writes from the committed weights (course_lib/static/gpt_capstone.pt,
written by tools/train_gpt_capstone.py); in Jupyter or Colab the kernel runs it with torch (the
front end asks for each forward pass through the widget's messages, `_forward` below). Either
way one forward pass gives the logits of every position and the attention weights of every
layer and head, and the front end samples from the last position's logits.

    ex = GPTExplorer()                  # the committed capstone GPT
    ex                                  # prompt it, sample it, pick a position
    ex.text                             # what it wrote last (with a kernel)
    ex.forward("The return")            # the numbers behind the panels, from torch
    ex.figure("The return value", 12)   # the static fallback (print, PDF, no WebAssembly)
"""

from __future__ import annotations

import anywidget
import torch
import traitlets

from .base import STATIC

WEIGHTS = STATIC / "gpt_capstone.pt"
MODEL_FILE = "gpt_capstone.onnx"   # served by _ext/course_site.py in _static/course-gpt/


def load_capstone(path=WEIGHTS):
    """-> (the committed capstone GPT in eval mode, its vocabulary: one character per id,
    the saved record: config, val_bpc, test_bpc, steps, lr, threads)."""
    from ..gpt import GPT, GPTConfig

    saved = torch.load(path, weights_only=True)
    model = GPT(GPTConfig(**saved["config"]))
    model.load_state_dict(saved["state_dict"])
    return model.eval(), saved["vocab"], saved


class GPTExplorer(anywidget.AnyWidget):
    """Prompt the trained GPT, sample it (temperature, top-k, top-p, seed) and, for a chosen
    position, see every layer's and head's attention over the context and the next-token
    distribution. Traits set by the front end: ``text`` (the last generated text)."""

    _esm = STATIC / "gpt_explorer.js"
    _css = (STATIC / "explorer.css").read_text() + (STATIC / "gpt_explorer.css").read_text()
    title = traitlets.Unicode("The capstone GPT, running live").tag(sync=True)
    caption = traitlets.Unicode("").tag(sync=True)
    vocab = traitlets.List(traitlets.Unicode()).tag(sync=True)
    block_size = traitlets.Int().tag(sync=True)
    n_layer = traitlets.Int().tag(sync=True)
    n_head = traitlets.Int().tag(sync=True)
    model_file = traitlets.Unicode(MODEL_FILE).tag(sync=True)
    prompt = traitlets.Unicode("The return value of ").tag(sync=True)
    temperature = traitlets.Float(0.8).tag(sync=True)
    top_k = traitlets.Int(0).tag(sync=True)
    top_p = traitlets.Float(1.0).tag(sync=True)
    seed = traitlets.Int(0).tag(sync=True)
    num_tokens = traitlets.Int(40).tag(sync=True)
    text = traitlets.Unicode("").tag(sync=True)

    def __init__(self, model=None, vocab=None, **kwargs):
        """model, vocab: a course_lib GPT and its characters by id (default: the committed
        capstone GPT, load_capstone())."""
        if model is None:
            model, vocab, _ = load_capstone()
        if vocab is None or len(vocab) != model.config.vocab_size:
            raise ValueError(f"vocab must list the model's {model.config.vocab_size} characters by id, "
                             f"got {None if vocab is None else len(vocab)}")
        self.model = model.eval()
        c = model.config
        kwargs.setdefault("caption", "Write a prompt, set the sampling and generate; then slide the position "
                          "(or click a character) to see where each head looks from there and what the model "
                          "expects next. On the site the model runs in your browser (WebAssembly), in "
                          f"Jupyter in the kernel. {c.n_layer} layers of {c.n_head} heads, context "
                          f"{c.block_size} characters; a character the model never saw reads as <unk>.")
        super().__init__(vocab=list(vocab), block_size=c.block_size, n_layer=c.n_layer,
                         n_head=c.n_head, **kwargs)
        self.on_msg(self._forward)

    def encode(self, text):
        """Characters -> ids (a character outside the vocabulary -> 0, <unk>)."""
        stoi = {ch: i for i, ch in enumerate(self.vocab)}
        return [stoi.get(ch, 0) for ch in text]

    def forward(self, text_or_ids):
        """-> (logits (T, V), attention (n_layer, n_head, T, T)) of one sequence, from torch."""
        ids = self.encode(text_or_ids) if isinstance(text_or_ids, str) else list(text_or_ids)
        if not 1 <= len(ids) <= self.block_size:
            raise ValueError(f"the sequence must hold 1 to block_size={self.block_size} tokens, "
                             f"got {len(ids)}")
        with torch.no_grad():
            logits = self.model(torch.tensor([ids]))                       # (1, T, V)
        attention = torch.stack(self.model.attention_weights())            # (n_layer, 1, h, T, T)
        return logits[0], attention[:, 0]

    def _forward(self, widget, content, buffers):
        """A forward pass the front end asked for (in Jupyter): reply with the float32 buffers."""
        if content.get("type") != "forward":
            return
        logits, attention = self.forward(content["ids"])
        self.send({"type": "forward", "request": content["request"], "T": len(content["ids"])},
                  buffers=[logits.float().numpy().tobytes(), attention.float().numpy().tobytes()])

    def figure(self, prompt=None, position=None, top=10):
        """Static fallback: every layer's and head's attention from `position` (default: the
        last) over the context, and the `top` most likely next characters (temperature 1)."""
        import matplotlib.pyplot as plt

        prompt = self.prompt if prompt is None else prompt
        logits, attention = self.forward(prompt)
        t = len(prompt) - 1 if position is None else position
        rows = attention[:, :, t, : t + 1].reshape(-1, t + 1)                # (n_layer * h, t + 1)
        probs = logits[t].softmax(-1)
        best = probs.topk(top)
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 3.6), gridspec_kw={"width_ratios": [3, 1]})
        ax.imshow(rows, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(t + 1), [_shown(ch) for ch in prompt[: t + 1]], fontsize=8)
        ax.set_yticks(range(len(rows)), [f"L{i // self.n_head + 1} H{i % self.n_head + 1}"
                                         for i in range(len(rows))], fontsize=7)
        ax.set_title(f"attention of position {t} ({_shown(prompt[t])!r}), every layer and head")
        bx.barh(range(top)[::-1], best.values.tolist(), color="#0072B2")
        bx.set_yticks(range(top)[::-1], [repr(_shown(self.vocab[i])) for i in best.indices.tolist()])
        bx.set(xlabel="probability", title="next character")
        fig.tight_layout()
        return fig


def _shown(ch):
    return {" ": "␣", "\n": "⏎"}.get(ch, ch)
