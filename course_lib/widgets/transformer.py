"""Explorers of the chapter "The Transformer": every layer and head of a trained model."""

from __future__ import annotations

import torch
import traitlets

from .base import Explorer, _stat

KINDS = ["encoder", "decoder_self", "cross"]
KIND_LABELS = ["encoder self-attention", "decoder masked self-attention",
               "cross-attention (decoder → encoder)"]
DELIMITERS = set(" ,./-")


def pattern_scores(weights, key_is_delimiter=None, square=True):
    """How much a head's weights follow simple patterns (averaged over the queries).

    weights: (T_q, T_k) one head's weights for one example. Returns a dict:
        previous   mean_i w[i, i-1]             (i >= 1; square only) a "previous-token head"
        self       mean_i w[i, i]               (square only)
        future     mean_i sum_{j > i} w[i, j]   (square only; 0 under a causal mask)
        delimiter  mean_i sum_{j delimiter} w[i, j]   (if key_is_delimiter (T_k,) bool is given)
        entropy    mean_i -sum_j w log w        (nats; log T_k when uniform)
        max_weight mean_i max_j w[i, j]
    """
    w = weights.detach().double()
    if w.dim() != 2:
        raise ValueError(f"weights must be (T_q, T_k), got shape {tuple(w.shape)}")
    out = {}
    if square:
        if w.shape[0] != w.shape[1]:
            raise ValueError(f"square=True needs T_q == T_k, got shape {tuple(w.shape)}")
        T = w.shape[0]
        out["previous"] = w.diagonal(-1).mean().item() if T > 1 else 0.0
        out["self"] = w.diagonal().mean().item()
        out["future"] = w.triu(1).sum(-1).mean().item()
    if key_is_delimiter is not None:
        out["delimiter"] = w[:, key_is_delimiter].sum(-1).mean().item()
    out["entropy"] = -(w * w.clamp_min(1e-12).log()).sum(-1).mean().item()
    out["max_weight"] = w.max(-1).values.mean().item()
    return out


_STAT_LABELS = {
    "previous": "weight on the previous token",
    "self": "weight on itself",
    "future": "weight on later tokens",
    "delimiter": "weight on delimiters ( ,./-)",
    "entropy": "entropy (nats)",
    "max_weight": "largest weight",
}


def example_attention(model, src_tokens, tgt_tokens, src_vocab, tgt_vocab):
    """Run `model` (teacher-forced on <bos> + tgt) on one example; return the weights
    {"encoder" | "decoder_self" | "cross": [per layer (h, T_q, T_k)]} and the token labels."""
    src = torch.tensor([src_vocab.encode(src_tokens)])
    tgt_in = torch.tensor([tgt_vocab.encode(tgt_tokens, bos=True)])
    was_training = model.training
    model.eval()
    with torch.no_grad():
        model(src, tgt_in)
    model.train(was_training)
    weights = {kind: [w[0] for w in ws] for kind, ws in model.attention_weights().items()}
    src_labels = [_show(c) for c in src_tokens]
    tgt_labels = ["<bos>"] + [_show(c) for c in tgt_tokens]
    return weights, src_labels, tgt_labels


def _show(c):
    return "␣" if c == " " else c


class LayerHeadExplorer(Explorer):
    """Pick a held-out example, the kind of attention, the layer and the head; see the weights.

    Built from a trained course_lib Transformer: every frame (example x kind x layer x head)
    is computed here, so the explorer works with no kernel. Traits set by the controls:
    ``example`` (index), ``kind`` ("encoder", "decoder_self", "cross"), ``layer`` and
    ``head`` (from 1).
    """

    example = traitlets.Int(0).tag(sync=True)
    kind = traitlets.Unicode("encoder").tag(sync=True)
    layer = traitlets.Int(1).tag(sync=True)
    head = traitlets.Int(1).tag(sync=True)

    def __init__(self, model, examples, src_vocab, tgt_vocab, digits=2, **kwargs):
        """examples: list of (source string, output string); the output is what the decoder
        reads after <bos> (e.g. the model's own greedy output)."""
        if not examples:
            raise ValueError("examples must hold at least one (source, output) pair")
        data = [example_attention(model, s, t, src_vocab, tgt_vocab) for s, t in examples]
        num_layers = len(data[0][0]["encoder"])
        if len(data[0][0]["decoder_self"]) != num_layers:
            raise ValueError(f"the explorer needs as many encoder as decoder layers, got "
                             f"{num_layers} and {len(data[0][0]['decoder_self'])}")
        num_heads = data[0][0]["encoder"][0].shape[0]
        self.num_layers, self.num_heads = num_layers, num_heads

        def frame(example, kind, layer, head):
            weights, src_labels, tgt_labels = data[example]
            w = weights[kind][layer - 1][head - 1]                       # (T_q, T_k)
            rows = src_labels if kind == "encoder" else tgt_labels
            cols = tgt_labels if kind == "decoder_self" else src_labels
            source, output = examples[example]
            keys = source if kind != "decoder_self" else "\0" + output    # "\0": the <bos> key
            delim = torch.tensor([c in DELIMITERS for c in keys])
            scores = pattern_scores(w, delim, square=kind != "cross")
            return {
                "weights": {"matrix": [[round(float(v), digits) for v in row] for row in w],
                            "rows": rows, "cols": cols},
                "stats": [_stat(name, _STAT_LABELS[name], value, 3) for name, value in scores.items()],
            }

        controls = [
            {"name": "example", "label": "example", "kind": "select",
             "options": list(range(len(examples))), "labels": [s for s, _ in examples]},
            {"name": "kind", "label": "attention", "kind": "select", "options": KINDS, "labels": KIND_LABELS},
            {"name": "layer", "label": "layer", "kind": "slider", "options": list(range(1, num_layers + 1))},
            {"name": "head", "label": "head", "kind": "slider", "options": list(range(1, num_heads + 1))},
        ]
        panels = [
            {"kind": "heatmap", "key": "weights",
             "title": "attention weights: rows are queries, columns keys",
             "vmin": 0, "vmax": 1},
            {"kind": "stats", "key": "stats", "title": "this head on this example (mean over the queries)"},
        ]
        spec = self.build_spec(
            "layer_head", "Every layer and head of the trained Transformer", controls, panels, frame,
            caption="Decoder rows are the decoder's inputs (<bos> then the output so far); "
                    "the row of input t is the query that predicts output character t.")
        super().__init__(spec=spec, **kwargs)
