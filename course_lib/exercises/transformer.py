"""Checks for chapter 9, "The Transformer"."""

from __future__ import annotations


import torch
import torch.nn.functional as F

from ._compare import compare
from ._engine import Case, Check, Mistake, lib, load, no_grad, randn


# --------------------------------------------------------------------------------------
# the decoder input, shifted right
# --------------------------------------------------------------------------------------
def _bos(tgt, bos_id):
    return torch.full_like(tgt[:, :1], bos_id)


def _shifted_left(case, got, expected):
    """A left shift, whatever fills the last column."""
    tgt = case.args[0]
    if (isinstance(got, torch.Tensor) and got.shape == tgt.shape and tgt.shape[1] > 1
            and torch.equal(got[:, :-1], tgt[:, 1:])):
        return "this shifts LEFT (the decoder would read the token it must predict): shift right."
    return None


check_shift_right = Check(
    "check_shift_right", "fn(tgt (B, T) ids, bos_id) -> (B, T): <bos> then tgt without its last token",
    params=("tgt", "bos_id"),
    reference=lib("transformer.shift_right"), diagnose=_shifted_left,
    cases=lambda g: [
        Case("a batch of two", torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]]), 1),
        Case("one token", torch.tensor([[2]]), 1),
        Case("another bos id", torch.randint(3, 20, (3, 6), generator=g), 0),
    ],
    mistakes=[
        Mistake("the result is one column too long: drop the last token of tgt after adding <bos>.",
                lambda t, b: torch.cat([_bos(t, b), t], 1)),
        Mistake("this shifts LEFT (the decoder would read the token it must predict): shift right.",
                lambda t, b: torch.cat([t[:, 1:], _bos(t, b)], 1)),
        Mistake("<bos> goes at the START of every row, not the end.",
                lambda t, b: torch.cat([t[:, :-1], _bos(t, b)], 1)),
    ],
    hints=["The decoder reads <bos> y_1 ... y_{n-1} while it must predict y_1 ... y_n.",
           "Put a column of bos_id in front and drop the last column, so that the shape stays "
           "(B, T)."],
)


# --------------------------------------------------------------------------------------
# the decoder layer's forward pass (post-LN)
# --------------------------------------------------------------------------------------
def _decoder(layer, x, memory, self_mask=None, memory_mask=None, cross_from_x=False,
             residual=True, pre_ln=False, masks=True, order=(1, 2, 3)):
    """The post-LN decoder layer from layer's sub-modules; the keywords are typical mistakes."""
    if not masks:
        self_mask = memory_mask = None
    if cross_from_x:  # no memory, so no memory mask either
        cross = lambda h: layer.multihead_attn(h, h, h)[0]  # noqa: E731
    else:
        cross = lambda h: layer.multihead_attn(h, memory, memory, memory_mask)[0]  # noqa: E731
    subs = {1: lambda h: layer.self_attn(h, h, h, self_mask)[0], 2: cross,
            3: lambda h: layer.linear2(F.relu(layer.linear1(h)))}
    norms = {1: layer.norm1, 2: layer.norm2, 3: layer.norm3}
    for k in order:
        if pre_ln:
            x = x + subs[k](norms[k](x))
        else:
            x = norms[k](x + subs[k](x) if residual else subs[k](x))
    return x


def _decoder_cases(g):
    layers = [load("transformer.DecoderLayer")(16, 4, 32, dropout=0.0).eval(),
              load("transformer.DecoderLayer")(8, 2, 16, dropout=0.0).eval()]
    for layer in layers:  # random norms and biases, so that every piece matters
        with torch.no_grad():
            for p in layer.parameters():
                if p.dim() == 1:
                    p.add_(torch.randn(p.shape, generator=g) * 0.3)
    causal = lib("attention.causal_mask")
    pad = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    pad[1, ..., 4:] = False
    return [
        Case("no masks", layers[0], randn(g, 2, 5, 16), randn(g, 2, 6, 16)),
        Case("causal self mask, source padding mask", layers[0], randn(g, 2, 5, 16),
             randn(g, 2, 6, 16), self_mask=causal(5), memory_mask=pad),
        Case("T != S, d_model = 8, causal", layers[1], randn(g, 3, 4, 8), randn(g, 3, 7, 8),
             self_mask=causal(4)),
    ]


check_decoder_layer = Check(
    "check_decoder_layer", "fn(layer, x (B, T, d), memory (B, S, d), self_mask=None, "
    "memory_mask=None) -> (B, T, d): a post-LN decoder layer's forward pass, with the "
    "sub-modules of a course_lib DecoderLayer",
    params=("layer", "x", "memory"),
    reference=lambda layer, x, memory, self_mask=None, memory_mask=None: layer(
        x, memory, self_mask, memory_mask),
    call=no_grad, cases=_decoder_cases, seed=1,
    mistakes=[
        Mistake("cross-attention takes its keys and values from the decoder itself: pass "
                "`memory` as key and value (layer.multihead_attn(x, memory, memory, ...)).",
                lambda *a, **kw: _decoder(*a, **kw, cross_from_x=True)),
        Mistake("the residual connections are missing: each sub-layer adds its output to its input.",
                lambda *a, **kw: _decoder(*a, **kw, residual=False)),
        Mistake("this is the pre-LN placement (x + sublayer(norm(x))); the exercise asks for the "
                "paper's post-LN: norm(x + sublayer(x)).",
                lambda *a, **kw: _decoder(*a, **kw, pre_ln=True)),
        Mistake("the masks are ignored: pass self_mask to self-attention and memory_mask to "
                "cross-attention.", lambda *a, **kw: _decoder(*a, **kw, masks=False)),
        Mistake("the sub-layers are in the wrong order: masked self-attention first, then "
                "cross-attention, then the feed-forward network.",
                lambda *a, **kw: _decoder(*a, **kw, order=(2, 1, 3))),
    ],
    hints=["Three sub-layers, each wrapped the same way: x = norm_k(x + sublayer_k(x)).",
           "Self-attention takes its queries, keys and values from x, with self_mask; "
           "cross-attention takes its queries from x and its keys and values from memory, with "
           "memory_mask. The attention modules return (out, weights).",
           "The third sub-layer is the feed-forward network linear2(relu(linear1(x)))."],
)


# --------------------------------------------------------------------------------------
# greedy decoding
# --------------------------------------------------------------------------------------
def _greedy_decode(model, src, max_len, bos_id, eos_id, keep_bos=False, position=-1, stop=True):
    """Greedy decoding with encode/decode; the keywords are typical mistakes."""
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    for _ in range(max_len):
        logits = model.decode(ys, memory, src)  # (B, len(ys), V)
        ys = torch.cat([ys, logits[:, position].argmax(-1, keepdim=True)], 1)
        if stop and bool((ys == eos_id).any(1).all()):
            break
    return ys if keep_bos else ys[:, 1:]


def _greedy_cases(g):
    model = load("transformer.Transformer")(9, 7, d_model=16, num_heads=2, num_encoder_layers=1,
                                            num_decoder_layers=1, d_ff=32, dropout=0.0,
                                            max_len=32).eval()
    with torch.no_grad():
        model.out.bias[2] += 1.2  # <eos> (id 2) gets likely after a few steps
    return [
        Case("one source", model, torch.tensor([[3, 4, 5, 6]]), 8, 1, 2),
        Case("a batch with padding", model, torch.tensor([[3, 4, 5, 6, 7], [8, 7, 6, 0, 0],
                                                          [5, 5, 5, 5, 5]]), 8, 1, 2),
        Case("max_len = 1", model, torch.tensor([[6, 7, 8]]), 1, 1, 2),
    ]


def _until_eos(row, eos_id=2):
    return row[:row.index(eos_id) + 1] if eos_id in row else row


def _compare_until_eos(got, expected):
    """Rows compared up to their first <eos> (= 2 in the cases): what follows does not matter."""
    if not isinstance(got, torch.Tensor) or got.dim() != 2 or got.shape[0] != expected.shape[0]:
        return compare(got, expected, "tokens")
    for b, (g_row, e_row) in enumerate(zip(got.tolist(), expected.tolist())):
        if _until_eos(g_row) != _until_eos(e_row):
            return f"row {b}: expected {_until_eos(e_row)} (up to <eos> = 2), got {_until_eos(g_row)}."
    return None


check_greedy_decode = Check(
    "check_greedy_decode", "fn(model, src (B, S), max_len, bos_id, eos_id) -> (B, L) ids without "
    "<bos>, compared up to each row's first <eos>",
    params=("model", "src", "max_len", "bos_id", "eos_id"),
    reference=lib("transformer.greedy_decode"), call=no_grad, compare=_compare_until_eos,
    cases=_greedy_cases, seed=5,
    mistakes=[
        Mistake("the result still starts with <bos>: return ys[:, 1:].",
                lambda *a: _greedy_decode(*a, keep_bos=True)),
        Mistake("the next token came from the FIRST position's logits; the prediction for the "
                "next token is at the last position, logits[:, -1].",
                lambda *a: _greedy_decode(*a, position=0)),
        Mistake("more than max_len tokens were generated: write at most max_len tokens.",
                lambda m, s, n, b, e: _greedy_decode(m, s, n + 1, b, e, stop=False)),
    ],
    hints=["Encode the source once; the decoder then reads the tokens written so far, starting "
           "from a (B, 1) column of bos_id.",
           "At each step, the logits of the next token are those of the last position: take "
           "their argmax and append it.",
           "Stop when every row has written eos_id or after max_len tokens; return the tokens "
           "without the <bos> column."],
)
