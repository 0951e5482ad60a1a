"""References of the checks of chapter 9, "The Transformer"."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_lib.exercises._data import build
from course_lib.transformer import TransformerConfig

from ..references import Case, Reference, lib, randn, register


# --------------------------------------------------------------------------------------
# the decoder input, shifted right
# --------------------------------------------------------------------------------------
def _bos(tgt, bos_id):
    return torch.full_like(tgt[:, :1], bos_id)


register(
    "check_shift_right",
    Reference(
        cases=lambda g: [
            Case("a batch of two", torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]]), 1),
            Case("one token", torch.tensor([[2]]), 1),
            Case("another bos id", torch.randint(3, 20, (3, 6), generator=g), 0),
        ],
        solution=lib("transformer.shift_right"),
        written=lambda t, b: torch.cat([_bos(t, b), t[:, :-1]], 1),
        mistakes=[
            lambda t, b: torch.cat([_bos(t, b), t], 1),
            lambda t, b: torch.cat([t[:, 1:], _bos(t, b)], 1),
            lambda t, b: torch.cat([t[:, :-1], _bos(t, b)], 1),
        ],
        shortcuts=[lib("transformer.shift_right")],
    ),
)


# --------------------------------------------------------------------------------------
# the decoder layer's forward pass (post-LN)
# --------------------------------------------------------------------------------------
def _decoder(
    layer,
    x,
    memory,
    self_mask=None,
    memory_mask=None,
    cross_from_x=False,
    residual=True,
    pre_ln=False,
    masks=True,
    order=(1, 2, 3),
):
    """The post-LN decoder layer from layer's sub-modules; the keywords are typical mistakes."""
    if not masks:
        self_mask = memory_mask = None
    if cross_from_x:  # no memory, so no memory mask either
        cross = lambda h: layer.multihead_attn(h, h, h)[0]  # noqa: E731
    else:
        cross = lambda h: layer.multihead_attn(h, memory, memory, memory_mask)[0]  # noqa: E731
    subs = {
        1: lambda h: layer.self_attn(h, h, h, self_mask)[0],
        2: cross,
        3: lambda h: layer.linear2(F.relu(layer.linear1(h))),
    }
    norms = {1: layer.norm1, 2: layer.norm2, 3: layer.norm3}
    for k in order:
        if pre_ln:
            x = x + subs[k](norms[k](x))
        else:
            x = norms[k](x + subs[k](x) if residual else subs[k](x))
    return x


def _decoder_cases(g):
    layers = [
        build("transformer.DecoderLayer", 16, 4, 32, dropout=0.0).eval(),
        build("transformer.DecoderLayer", 8, 2, 16, dropout=0.0).eval(),
    ]
    for layer in layers:  # random norms and biases, so that every piece matters
        with torch.no_grad():
            for p in layer.parameters():
                if p.dim() == 1:
                    p.add_(torch.randn(p.shape, generator=g) * 0.3)
    causal = lib("attention.causal_mask")
    pad = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    pad[1, ..., 4:] = False
    return [
        Case(
            "a probe: the memory is one vector repeated at every source position, no masks",
            layers[0],
            randn(g, 2, 5, 16),
            randn(g, 2, 1, 16).expand(2, 6, 16).clone(),
        ),
        Case("no masks", layers[0], randn(g, 2, 5, 16), randn(g, 2, 6, 16)),
        Case(
            "causal self mask, source padding mask",
            layers[0],
            randn(g, 2, 5, 16),
            randn(g, 2, 6, 16),
            self_mask=causal(5),
            memory_mask=pad,
        ),
        Case(
            "T != S, d_model = 8, causal",
            layers[1],
            randn(g, 3, 4, 8),
            randn(g, 3, 7, 8),
            self_mask=causal(4),
        ),
    ]


register(
    "check_decoder_layer",
    Reference(
        seed=1,
        cases=_decoder_cases,
        solution=lambda layer, x, memory, self_mask=None, memory_mask=None: layer(
            x, memory, self_mask, memory_mask
        ),
        written=_decoder,
        mistakes=[
            lambda *a, **kw: _decoder(*a, **kw, cross_from_x=True),
            lambda *a, **kw: _decoder(*a, **kw, residual=False),
            lambda *a, **kw: _decoder(*a, **kw, pre_ln=True),
            lambda *a, **kw: _decoder(*a, **kw, masks=False),
            lambda *a, **kw: _decoder(*a, **kw, order=(2, 1, 3)),
        ],
        shortcuts=[
            lambda layer, x, memory, self_mask=None, memory_mask=None: layer(
                x, memory, self_mask, memory_mask
            )
        ],
    ),
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
    config = TransformerConfig(
        9,
        7,
        d_model=16,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        d_ff=32,
        dropout=0.0,
        max_len=32,
    )
    model = build("transformer.Transformer", config).eval()
    with torch.no_grad():
        model.out.bias[2] += 1.2  # <eos> (id 2) gets likely after a few steps
    return [
        Case("one source", model, torch.tensor([[3, 4, 5, 6]]), 8, 1, 2),
        Case(
            "a batch with padding",
            model,
            torch.tensor([[3, 4, 5, 6, 7], [8, 7, 6, 0, 0], [5, 5, 5, 5, 5]]),
            8,
            1,
            2,
        ),
        Case("max_len = 1", model, torch.tensor([[6, 7, 8]]), 1, 1, 2),
    ]


register(
    "check_greedy_decode",
    Reference(
        seed=5,
        cases=_greedy_cases,
        solution=lib("transformer.greedy_decode"),
        written=_greedy_decode,
        mistakes=[
            lambda *a: _greedy_decode(*a, keep_bos=True),
            lambda *a: _greedy_decode(*a, position=0),
            lambda m, s, n, b, e: _greedy_decode(m, s, n + 1, b, e, stop=False),
        ],
        shortcuts=[lib("transformer.greedy_decode")],
    ),
)


# --------------------------------------------------------------------------------------
# the inverse-square-root warm-up of Vaswani et al. (2017)
# --------------------------------------------------------------------------------------
def _inverse_sqrt_lr(step, d_model, warmup, rise=1.5, pick=min, scale=True):
    """lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5); the keywords are mistakes."""
    rate = pick(step**-0.5, step * warmup**-rise)
    return d_model**-0.5 * rate if scale else rate


def _lr_by_recipe(step, d_model, warmup):
    """The chapter's scheduler, normalised to peak at d_model^-0.5 warmup^-0.5 (the paper's peak)."""
    peak = d_model**-0.5 * warmup**-0.5
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=peak)
    scheduler = lib("transformer_train.inverse_sqrt_warmup")(optimizer, warmup)
    return peak * scheduler.lr_lambdas[0](step - 1)


register(
    "check_inverse_sqrt_lr",
    Reference(
        cases=lambda g: [
            Case("the paper's base model, step 1", 1, 512, 4000),
            Case("inside the warm-up", 1000, 512, 4000),
            Case("the end of the warm-up", 4000, 512, 4000),
            Case("after the warm-up", 100000, 512, 4000),
            Case("d_model = 64, warmup = 100, step 400", 400, 64, 100),
        ],
        hidden=lambda g: [
            Case(f"step {s}, d_model {d}, warmup {w}", s, d, w)
            for s, d, w in [(37, 128, 50), (5000, 256, 2000), (2000, 256, 2000)]
        ],
        solution=_inverse_sqrt_lr,
        mistakes=[
            lambda s, d, w: _inverse_sqrt_lr(s, d, w, rise=0.5),
            lambda s, d, w: _inverse_sqrt_lr(s, d, w, pick=max),
            lambda s, d, w: _inverse_sqrt_lr(s, d, w, scale=False),
        ],
        shortcuts=[_lr_by_recipe],
    ),
)


# --------------------------------------------------------------------------------------
# the decoder's self-attention mask: causal AND no padded keys
# --------------------------------------------------------------------------------------
def _self_mask(tgt_in, pad_id, causal=True, padding=True, queries=False, blocked=False, upper=False):
    """(B, 1, T, T) bool, True = allowed; the keywords are typical mistakes."""
    B, T = tgt_in.shape
    ones = torch.ones(T, T, dtype=torch.bool)
    mask = torch.ones(B, 1, T, T, dtype=torch.bool)
    if causal:
        mask = mask & (ones.triu() if upper else ones.tril())
    real = tgt_in != pad_id  # (B, T)
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


register(
    "check_decoder_self_mask",
    Reference(
        seed=9,
        cases=_mask_cases,
        solution=_self_mask,
        mistakes=[
            lambda t, p: _self_mask(t, p, causal=False),
            lambda t, p: _self_mask(t, p, padding=False),
            lambda t, p: _self_mask(t, p, blocked=True),
            lambda t, p: _self_mask(t, p, queries=True),
            lambda t, p: _self_mask(t, p, upper=True),
        ],
        shortcuts=[
            lambda tgt_in, pad_id: (
                lib("attention.causal_mask")(tgt_in.shape[1])
                & lib("attention.padding_mask_from_tokens")(tgt_in, pad_id)
            )
        ],
    ),
)


# --------------------------------------------------------------------------------------
# the label-smoothed loss
# --------------------------------------------------------------------------------------
def _smoothed(logits, target, eps, pad_id, spread="all", ignore=True, reduce="mean", keep=True):
    """Label-smoothed cross-entropy; the keywords are typical mistakes."""
    logp = logits.log_softmax(-1)  # (N, V)
    V = logits.shape[-1]
    nll = -logp.gather(-1, target[:, None])[:, 0]  # (N,)
    if spread == "others":  # eps over the V-1 others
        others = -(logp.sum(-1) + nll) / (V - 1)
        loss = (1 - eps) * nll + eps * others
    elif spread == "scale":  # (1 - eps) * nll only
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
        Case(
            "eps = 0.3, no padding, V = 5", randn(g, 4, 5) * 3, torch.randint(1, 5, (4,), generator=g), 0.3, 0
        ),
        Case("eps = 0, pad id 2", randn(g, 5, 4), torch.tensor([1, 2, 3, 0, 2]), 0.0, 2),
    ]


register(
    "check_label_smoothed_loss",
    Reference(
        seed=11,
        cases=_smoothing_cases,
        solution=_smoothed_reference,
        written=_smoothed,
        mistakes=[
            lambda *a: _smoothed(*a, spread="others"),
            lambda *a: _smoothed(*a, spread="scale"),
            lambda *a: _smoothed(*a, ignore=False),
            lambda *a: _smoothed(*a, reduce="sum"),
        ],
        shortcuts=[
            _smoothed_reference,
            lambda logits, target, eps, pad_id: torch.nn.CrossEntropyLoss(
                ignore_index=pad_id, label_smoothing=eps
            )(logits, target),
        ],
    ),
)
