"""Checks for chapter 9, "The Transformer"."""

from __future__ import annotations


import torch
import torch.nn.functional as F

from ._compare import compare, within
from ._engine import Case, Check, Mistake, Prediction, lib, load, no_grad, randn


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


# --------------------------------------------------------------------------------------
# the inverse-square-root warm-up of Vaswani et al. (2017)
# --------------------------------------------------------------------------------------
def _inverse_sqrt_lr(step, d_model, warmup, rise=1.5, pick=min, scale=True):
    """lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5); the keywords are mistakes."""
    rate = pick(step ** -0.5, step * warmup ** -rise)
    return d_model ** -0.5 * rate if scale else rate


check_inverse_sqrt_lr = Check(
    "check_inverse_sqrt_lr", "fn(step, d_model, warmup) -> float: the learning rate of "
    "Vaswani et al. (2017) at step `step` (counted from 1)",
    params=("step", "d_model", "warmup"),
    reference=_inverse_sqrt_lr,
    cases=lambda g: [
        Case("the paper's base model, step 1", 1, 512, 4000),
        Case("inside the warm-up", 1000, 512, 4000),
        Case("the end of the warm-up", 4000, 512, 4000),
        Case("after the warm-up", 100000, 512, 4000),
        Case("d_model = 64, warmup = 100, step 400", 400, 64, 100),
    ],
    mistakes=[
        Mistake("the warm-up branch rises too fast and the two branches do not meet at "
                "step = warmup: the rising branch is step * warmup^-1.5.",
                lambda s, d, w: _inverse_sqrt_lr(s, d, w, rise=0.5)),
        Mistake("max instead of min: the rate must be the SMALLER of the rising and the "
                "decaying branch (the decay wins after the warm-up).",
                lambda s, d, w: _inverse_sqrt_lr(s, d, w, pick=max)),
        Mistake("the factor d_model^-0.5 is missing: wider models get smaller rates.",
                lambda s, d, w: _inverse_sqrt_lr(s, d, w, scale=False)),
    ],
    hints=["The rate is a product: a factor that depends on the width only, times the smaller "
           "of two functions of the step.",
           "One branch decays like 1/sqrt(step); the other grows linearly in step and must "
           "equal the first at step = warmup. Solve for its slope."],
)


# --------------------------------------------------------------------------------------
# the decoder's self-attention mask: causal AND no padded keys
# --------------------------------------------------------------------------------------
def _self_mask(tgt_in, pad_id, causal=True, padding=True, queries=False, blocked=False,
               upper=False):
    """(B, 1, T, T) bool, True = allowed; the keywords are typical mistakes."""
    B, T = tgt_in.shape
    ones = torch.ones(T, T, dtype=torch.bool)
    mask = torch.ones(B, 1, T, T, dtype=torch.bool)
    if causal:
        mask = mask & (ones.triu() if upper else ones.tril())
    real = tgt_in != pad_id                                              # (B, T)
    if padding:
        mask = mask & real[:, None, None, :]
    if queries:
        mask = mask & real[:, None, :, None]
    return ~mask if blocked else mask


def _mask_cases(g):
    t = torch.randint(3, 12, (3, 6), generator=g)
    t[1, 4:] = 0
    t[2, 2:] = 0
    return [
        Case("no padding", torch.randint(3, 12, (2, 5), generator=g), 0),
        Case("rows with padding", t, 0),
        Case("pad id 1, padded at the end", torch.tensor([[4, 1, 1]]), 1),
        Case("padded at the start (left padding)", torch.tensor([[0, 0, 5, 6, 7], [3, 4, 5, 6, 7]]), 0),
    ]


check_decoder_self_mask = Check(
    "check_decoder_self_mask", "fn(tgt_in (B, T) ids, pad_id) -> (B, 1, T, T) bool, True = "
    "allowed: query t may attend key s if s <= t and key s is not padding",
    params=("tgt_in", "pad_id"),
    reference=_self_mask, cases=_mask_cases, seed=9,
    mistakes=[
        Mistake("only the padding is masked: a query also must not see the keys after it "
                "(the causal part).", lambda t, p: _self_mask(t, p, causal=False)),
        Mistake("only the causal part is there: padded keys must be masked too.",
                lambda t, p: _self_mask(t, p, padding=False)),
        Mistake("the polarity is torch's (True = blocked); the course's masks say True = allowed.",
                lambda t, p: _self_mask(t, p, blocked=True)),
        Mistake("the rows of padded QUERIES are masked too: they are then all False and their "
                "softmax is 0/0 = NaN. Mask only the keys; no one reads the outputs at padded "
                "positions.", lambda t, p: _self_mask(t, p, queries=True)),
        Mistake("the triangle is the wrong one: query t may see keys s <= t (lower triangle, "
                "diagonal included).", lambda t, p: _self_mask(t, p, upper=True)),
    ],
    hints=["Build the two conditions separately: one depends on (query, key) positions only, "
           "the other on the key's token only.",
           "Give the key condition the shape (B, 1, 1, T) and the position condition (T, T); "
           "broadcasting combines them into (B, 1, T, T) with a logical AND."],
)


# --------------------------------------------------------------------------------------
# the label-smoothed loss
# --------------------------------------------------------------------------------------
def _smoothed(logits, target, eps, pad_id, spread="all", ignore=True, reduce="mean", keep=True):
    """Label-smoothed cross-entropy; the keywords are typical mistakes."""
    logp = logits.log_softmax(-1)                                        # (N, V)
    V = logits.shape[-1]
    nll = -logp.gather(-1, target[:, None])[:, 0]                        # (N,)
    if spread == "others":                                               # eps over the V-1 others
        others = -(logp.sum(-1) + nll) / (V - 1)
        loss = (1 - eps) * nll + eps * others
    elif spread == "scale":                                              # (1 - eps) * nll only
        loss = (1 - eps) * nll
    else:
        loss = (1 - eps) * nll + eps * (-logp.mean(-1))
    real = target != pad_id if ignore else torch.ones_like(target, dtype=torch.bool)
    loss = loss[real]
    return loss.sum() if reduce == "sum" else loss.mean()


def _smoothed_reference(logits, target, eps, pad_id):
    return F.cross_entropy(logits, target, ignore_index=pad_id, label_smoothing=eps)


def _smoothing_cases(g):
    t = torch.randint(1, 7, (6,), generator=g)
    t[4:] = 0
    return [
        Case("eps = 0.1, two padded targets", randn(g, 6, 7), t, 0.1, 0),
        Case("eps = 0.3, no padding, V = 5", randn(g, 4, 5) * 3,
             torch.randint(1, 5, (4,), generator=g), 0.3, 0),
        Case("eps = 0, pad id 2", randn(g, 5, 4), torch.tensor([1, 2, 3, 0, 2]), 0.0, 2),
    ]


check_label_smoothed_loss = Check(
    "check_label_smoothed_loss", "fn(logits (N, V), target (N,), eps, pad_id) -> scalar: the "
    "label-smoothed cross-entropy, mean over the non-pad targets, as "
    "F.cross_entropy(..., ignore_index=pad_id, label_smoothing=eps)",
    params=("logits", "target", "eps", "pad_id"),
    reference=_smoothed_reference, cases=_smoothing_cases, seed=11,
    mistakes=[
        Mistake("eps is spread over the V - 1 wrong classes only; torch (and Szegedy et al., "
                "2016) spread it over all V classes, the right one included.",
                lambda *a: _smoothed(*a, spread="others")),
        Mistake("the loss is only scaled by (1 - eps): the smoothed target also puts eps / V on "
                "every class, which adds eps times the mean of -log p over the classes.",
                lambda *a: _smoothed(*a, spread="scale")),
        Mistake("the padded targets count in the mean: drop the positions whose target is pad_id.",
                lambda *a: _smoothed(*a, ignore=False)),
        Mistake("this is a sum; the loss is the MEAN over the non-pad targets.",
                lambda *a: _smoothed(*a, reduce="sum")),
    ],
    hints=["The smoothed target is a distribution q: 1 - eps on the right class plus eps "
           "shared equally by all V classes. The loss is the cross-entropy -sum_v q_v log p_v.",
           "With log p = log_softmax(logits), the loss of one row splits into (1 - eps) times "
           "the usual -log p[target] plus eps times an average over the classes. Average the "
           "rows whose target is not pad_id."],
)


check_smoothing_floor_prediction = Prediction(
    "check_smoothing_floor_prediction", "your prediction of the lowest label-smoothed loss "
    "(eps = 0.1, V = 15) any logits can reach, against the measurement",
    quantity="the lowest label-smoothed cross-entropy (eps = 0.1, 15 classes), in nats",
    tolerance=within(rel=0.2), example=0.5555,
    explanation=("the cross-entropy -sum_v q_v log p_v is smallest when p = q, and then it equals "
                 "the entropy of q: with q = 0.9067 on the right class and 0.0067 on each of "
                 "the 14 others, H(q) = 0.56 nats. A model trained with label smoothing never "
                 "reaches zero loss, and its training loss is not comparable with an unsmoothed "
                 "one: compare held-out metrics (exact match, perplexity) instead."),
    mistakes=[
        Mistake("a perfect model does not reach zero: the smoothed target is not one-hot, so the "
                "best prediction is the target itself, whose entropy is not zero.",
                lambda measured: 0.0),
        Mistake("the floor is not eps itself: it is the entropy of the smoothed target, where "
                "the 14 small probabilities each cost -log(0.0067) = 5 nats.",
                lambda measured: 0.1),
        Mistake("the floor is far below the chance level ln 15: the model can still put most of "
                "its probability on the right class.", lambda measured: 2.708),
    ],
    hints=["Which distribution p minimises the cross-entropy between the target q and p?",
           "Write q out for eps = 0.1 and V = 15 (the right class also receives eps / V), and "
           "compute its entropy."],
)
