"""Checks for the chapters "The Transformer" and "Capstone: from LSTM to GPT"."""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import torch

from ._engine import Case, CheckResult, ExerciseFailure, _compare, _randn, _run_cases, _same, _type_name


def _ref():
    from course_lib import transformer  # imported lazily: the checks only need it when run

    return transformer


# --------------------------------------------------------------------------------------
# Chapter 9, exercise 1: the decoder input, shifted right
# --------------------------------------------------------------------------------------
_SHIFT_HINT = ("the decoder reads <bos> y_1 ... y_{n-1} while it must predict y_1 ... y_n: put a "
               "column of bos_id in front (torch.full or torch.cat) and drop the LAST column, so "
               "the shape stays (B, T).")


def check_shift_right(fn: Callable) -> CheckResult:
    """Check ``fn(tgt (B, T) ids, bos_id) -> (B, T)``: <bos> then tgt without its last token."""
    g = torch.Generator().manual_seed(0)
    names = ("tgt", "bos_id")
    cases = [
        Case("a batch of two", (torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]]), 1), names=names),
        Case("one token", (torch.tensor([[2]]), 1), names=names),
        Case("another bos id", (torch.randint(3, 20, (3, 6), generator=g), 0), names=names),
    ]
    return _run_cases("check_shift_right", fn, lambda t, b: _ref().shift_right(t, b), cases,
                      _SHIFT_HINT, compare=_compare_ids, diagnose=_diagnose_shift)


def _compare_ids(got: Any, expected: torch.Tensor, label: str = "result") -> Optional[str]:
    if not isinstance(got, torch.Tensor):
        return f"{label}: expected a torch.Tensor of token ids, got {_type_name(got)}."
    if got.shape != expected.shape:
        return f"{label}: expected shape {tuple(expected.shape)}, got shape {tuple(got.shape)}."
    if got.dtype.is_floating_point:
        return f"{label}: expected integer token ids (torch.long), got dtype {got.dtype}."
    wrong = got != expected
    if not bool(wrong.any()):
        return None
    idx = [int(i) for i in wrong.nonzero()[0]]
    return (f"{label}: {int(wrong.sum())} of {wrong.numel()} ids differ; first at {idx}: expected "
            f"{int(expected[tuple(idx)])}, got {int(got[tuple(idx)])}. Expected {expected.tolist()}, "
            f"got {got.tolist()}.")


def _diagnose_shift(case: Case, got: Any, expected: torch.Tensor) -> Optional[str]:
    tgt, bos = case.args
    if not isinstance(got, torch.Tensor):
        return None
    if got.shape[-1] == tgt.shape[-1] + 1:
        return "the result is one column too long: drop the last token of tgt after adding <bos>."
    if got.shape == tgt.shape and tgt.shape[1] > 1 and torch.equal(got[:, :-1], tgt[:, 1:]):
        return "this shifts LEFT (the decoder would read the token it must predict): shift right."
    if got.shape == tgt.shape and torch.equal(got[:, 1:], tgt[:, :-1]) and not bool((got[:, 0] == bos).all()):
        return "the first column must be bos_id."
    if got.shape == tgt.shape and bool((got[:, -1] == bos).all()):
        return "<bos> goes at the START of every row, not the end."
    return None


# --------------------------------------------------------------------------------------
# Chapter 9, exercise 2: the decoder layer's forward pass (post-LN)
# --------------------------------------------------------------------------------------
_DECODER_HINT = ("three sub-layers, each x = norm_k(x + sublayer(x)): masked self-attention "
                 "layer.self_attn(x, x, x, self_mask)[0] with norm1; cross-attention "
                 "layer.multihead_attn(x, memory, memory, memory_mask)[0] (queries from the decoder, "
                 "keys and values from the encoder) with norm2; the FFN "
                 "layer.linear2(relu(layer.linear1(x))) with norm3.")


def _decoder_cases() -> list[Case]:
    ref = _ref()
    g = torch.Generator().manual_seed(1)
    torch_state = torch.random.get_rng_state()
    torch.manual_seed(1)
    layers = [ref.DecoderLayer(16, 4, 32, dropout=0.0).eval(), ref.DecoderLayer(8, 2, 16, dropout=0.0).eval()]
    torch.random.set_rng_state(torch_state)
    for layer in layers:   # random norms and biases, so that every piece matters
        with torch.no_grad():
            for p in layer.parameters():
                if p.dim() == 1:
                    p.add_(torch.randn(p.shape, generator=g) * 0.3)
    causal = ref.causal_mask(5)
    pad = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    pad[1, ..., 4:] = False
    names = ("layer", "x", "memory")
    return [
        Case("no masks", (layers[0], _randn(g, 2, 5, 16), _randn(g, 2, 6, 16)), names=names),
        Case("causal self mask, source padding mask",
             (layers[0], _randn(g, 2, 5, 16), _randn(g, 2, 6, 16)),
             {"self_mask": causal, "memory_mask": pad}, names=names),
        Case("T != S, d_model = 8, causal", (layers[1], _randn(g, 3, 4, 8), _randn(g, 3, 7, 8)),
             {"self_mask": ref.causal_mask(4)}, names=names),
    ]


def _reference_decoder(layer, x, memory, self_mask=None, memory_mask=None):
    with torch.no_grad():
        return layer(x, memory, self_mask, memory_mask)


def check_decoder_layer(fn: Callable) -> CheckResult:
    """Check ``fn(layer, x, memory, self_mask=None, memory_mask=None)``: a post-LN decoder
    layer's forward pass with the sub-modules of ``layer`` (a course_lib DecoderLayer)."""
    return _run_cases("check_decoder_layer", fn, _reference_decoder, _decoder_cases(), _DECODER_HINT,
                      diagnose=_diagnose_decoder)


def _decoder_variant(layer, x, memory, self_mask=None, memory_mask=None, cross_from_x=False,
                     residual=True, pre_ln=False, masks=True, order=(1, 2, 3)):
    """The decoder layer with one typical mistake, for the diagnosis."""
    relu = torch.nn.functional.relu
    if not masks:
        self_mask = memory_mask = None
    if cross_from_x:   # the learner's likely call: no memory, so no memory mask either
        cross = lambda h: layer.multihead_attn(h, h, h)[0]  # noqa: E731
    else:
        cross = lambda h: layer.multihead_attn(h, memory, memory, memory_mask)[0]  # noqa: E731
    subs = {
        1: lambda h: layer.self_attn(h, h, h, self_mask)[0],
        2: cross,
        3: lambda h: layer.linear2(relu(layer.linear1(h))),
    }
    norms = {1: layer.norm1, 2: layer.norm2, 3: layer.norm3}
    with torch.no_grad():
        for k in order:
            if pre_ln:
                x = x + subs[k](norms[k](x))
            else:
                x = norms[k](x + subs[k](x) if residual else subs[k](x))
    return x


def _diagnose_decoder(case: Case, got: Any, expected: torch.Tensor) -> Optional[str]:
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return None
    try:
        return _decoder_mistake(case.args, case.kwargs, got)
    except (ValueError, RuntimeError):   # a variant that cannot run on this case
        return None


def _decoder_mistake(args, kwargs, got):
    if _same(got, _decoder_variant(*args, **kwargs, cross_from_x=True)):
        return ("cross-attention takes its keys and values from the decoder itself: pass `memory` "
                "as key and value (layer.multihead_attn(x, memory, memory, ...)).")
    if _same(got, _decoder_variant(*args, **kwargs, residual=False)):
        return "the residual connections are missing: each sub-layer adds its output to its input."
    if _same(got, _decoder_variant(*args, **kwargs, pre_ln=True)):
        return ("this is the pre-LN placement (x + sublayer(norm(x))); the exercise asks for the "
                "paper's post-LN: norm(x + sublayer(x)).")
    if kwargs and _same(got, _decoder_variant(*args, **kwargs, masks=False)):
        return "the masks are ignored: pass self_mask to self-attention and memory_mask to cross-attention."
    if _same(got, _decoder_variant(*args, **kwargs, order=(2, 1, 3))):
        return "the sub-layers are in the wrong order: masked self-attention first, then cross-attention."
    return None


# --------------------------------------------------------------------------------------
# Chapter 9, exercise 3: greedy decoding
# --------------------------------------------------------------------------------------
_GREEDY_HINT = ("memory = model.encode(src) once; ys starts as a (B, 1) column of bos_id; at each "
                "step logits = model.decode(ys, memory, src), take the argmax of the LAST position "
                "logits[:, -1], append it to ys, and stop when every row has produced eos_id or after "
                "max_len steps. Return ys without the <bos> column.")


def _greedy_cases() -> list[Case]:
    ref = _ref()
    state = torch.random.get_rng_state()
    torch.manual_seed(5)
    model = ref.Transformer(9, 7, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
                            d_ff=32, dropout=0.0, max_len=32).eval()
    with torch.no_grad():
        model.out.bias[2] += 1.2   # <eos> (id 2) gets likely after a few steps
    torch.random.set_rng_state(state)
    names = ("model", "src", "max_len", "bos_id", "eos_id")
    return [
        Case("one source", (model, torch.tensor([[3, 4, 5, 6]]), 8, 1, 2), names=names),
        Case("a batch with padding", (model, torch.tensor([[3, 4, 5, 6, 7], [8, 7, 6, 0, 0],
                                                           [5, 5, 5, 5, 5]]), 8, 1, 2), names=names),
        Case("max_len = 1", (model, torch.tensor([[6, 7, 8]]), 1, 1, 2), names=names),
    ]


def _until_eos(row, eos_id):
    row = list(row)
    return row[:row.index(eos_id) + 1] if eos_id in row else row


def check_greedy_decode(fn: Callable) -> CheckResult:
    """Check ``fn(model, src, max_len, bos_id, eos_id) -> (B, L)`` ids, compared up to each
    row's first <eos> (what comes after it does not matter)."""
    def compare(got, expected):
        if not isinstance(got, torch.Tensor) or got.dim() != 2:
            return f"expected a (B, L) tensor of ids, got {_type_name(got)}" + (
                f" of shape {tuple(got.shape)}" if isinstance(got, torch.Tensor) else "") + "."
        if got.shape[0] != expected.shape[0]:
            return f"expected {expected.shape[0]} rows (one per source), got {got.shape[0]}."
        for b, (g_row, e_row) in enumerate(zip(got.tolist(), expected.tolist())):
            if _until_eos(g_row, 2) != _until_eos(e_row, 2):
                return (f"row {b}: expected {_until_eos(e_row, 2)} (up to <eos> = 2), "
                        f"got {_until_eos(g_row, 2)}.")
        return None

    def diagnose(case, got, expected):
        if isinstance(got, torch.Tensor) and got.dim() == 2 and got.shape[0] == expected.shape[0]:
            if bool((got[:, 0] == case.args[3]).all()) and got.shape[1] == expected.shape[1] + 1:
                return "the result still starts with <bos>: return ys[:, 1:]."
            if got.shape[1] > case.args[2]:
                return f"more than max_len={case.args[2]} tokens were generated."
        return None

    return _run_cases("check_greedy_decode", fn,
                      lambda m, s, n, b, e: _ref().greedy_decode(m, s, n, b, e),
                      _greedy_cases(), _GREEDY_HINT, compare=compare, diagnose=diagnose)


# --------------------------------------------------------------------------------------
# Chapter 10, exercise 1: bits per character
# --------------------------------------------------------------------------------------
_BPC_HINT = ("the mean cross-entropy over every position, in bits: F.cross_entropy(logits.flatten(0, 1), "
             "targets.flatten()) is in nats; divide by ln 2 (math.log(2)). Return a Python float.")


def bits_per_char_reference(logits, targets):
    """Mean cross-entropy of next-character predictions, in bits: CE / ln 2."""
    nats = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
    return nats.item() / math.log(2)


def check_bits_per_char(fn: Callable) -> CheckResult:
    """Check ``fn(logits (B, T, V), targets (B, T)) -> float`` bits per character."""
    g = torch.Generator().manual_seed(2)
    names = ("logits", "targets")
    cases = [
        Case("uniform logits: log2(V) bits", (torch.zeros(2, 5, 8), torch.randint(0, 8, (2, 5), generator=g)),
             names=names),
        Case("random logits", (_randn(g, 3, 7, 11, scale=2.0), torch.randint(0, 11, (3, 7), generator=g)),
             names=names),
        Case("one sequence", (_randn(g, 1, 4, 5), torch.randint(0, 5, (1, 4), generator=g)), names=names),
    ]

    def compare(got, expected):
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if not isinstance(got, (float, int)):
            return f"expected a number (a Python float), got {_type_name(got)}."
        if math.isclose(got, expected, rel_tol=1e-4, abs_tol=1e-5):
            return None
        return f"expected {expected:.5f} bits per character, got {got:.5f}."

    def diagnose(case, got, expected):
        got = got.item() if isinstance(got, torch.Tensor) and got.numel() == 1 else got
        if not isinstance(got, (float, int)):
            return None
        if math.isclose(got, expected * math.log(2), rel_tol=1e-4):
            return "this is in nats (natural log): divide by ln 2 to get bits."
        if math.isclose(got, expected * case.args[1].numel(), rel_tol=1e-4):
            return "this is the SUM over positions: take the mean (per character)."
        return None

    return _run_cases("check_bits_per_char", fn, bits_per_char_reference, cases, _BPC_HINT,
                      compare=compare, diagnose=diagnose)


# --------------------------------------------------------------------------------------
# Chapter 10, exercise 2: sampling temperature
# --------------------------------------------------------------------------------------
_TEMPERATURE_HINT = ("probabilities = softmax(logits / temperature) over the last dim (the vocabulary): "
                     "a low temperature sharpens the distribution, a high one flattens it.")


def check_temperature_probs(fn: Callable) -> CheckResult:
    """Check ``fn(logits (..., V), temperature) -> probabilities (..., V)``."""
    g = torch.Generator().manual_seed(3)
    names = ("logits", "temperature")
    cases = [
        Case("temperature 1", (_randn(g, 2, 6), 1.0), names=names),
        Case("temperature 0.5 (sharper)", (_randn(g, 3, 10), 0.5), names=names),
        Case("temperature 2 (flatter), a single row", (_randn(g, 7), 2.0), names=names),
    ]

    def diagnose(case, got, expected):
        logits, t = case.args
        if _same(got, torch.softmax(logits * t, -1)):
            return "the logits are multiplied by the temperature: divide by it."
        if _same(got, logits / t):
            return "these are scaled logits, not probabilities: apply the softmax."
        if logits.dim() > 1 and _same(got, torch.softmax(logits / t, 0)):
            return "the softmax runs over the wrong dim: use dim=-1 (the vocabulary)."
        return None

    return _run_cases("check_temperature_probs", fn, lambda x, t: torch.softmax(x / t, dim=-1),
                      cases, _TEMPERATURE_HINT, diagnose=diagnose)


# --------------------------------------------------------------------------------------
# Chapter 10, exercise 3: a key/value cache
# --------------------------------------------------------------------------------------
_CACHE_HINT = ("project the new token once (q, k, v = attn.project(x_t, x_t, x_t), each (B, h, 1, d_k)); "
               "append k and v to the cached ones along the time dim (dim=2) with torch.cat; then "
               "attend from q to ALL cached keys (no mask needed: the cache only holds the past and "
               "the present) and finish as multi-head attention does: merge_heads and attn.out_proj. "
               "Return (out (B, 1, d_model), (k_all, v_all)).")


def _run_cache(fn, attn, x):
    """Feed x (B, T, d) one token at a time through fn; stack the outputs."""
    cache, outs = None, []
    for t in range(x.shape[1]):
        out, cache = fn(attn, x[:, t:t + 1], cache)
        outs.append(out)
    return torch.cat(outs, dim=1), cache


def check_kv_cache_step(fn: Callable) -> CheckResult:
    """Check ``fn(attn, x_t (B, 1, d_model), cache) -> (out (B, 1, d_model), (k, v))``:
    fed one token at a time, it must reproduce causal multi-head self-attention over the
    whole sequence, and the cache must hold (B, h, t, d_k) keys and values."""
    from course_lib.multihead import MultiHeadAttention

    if not callable(fn):
        raise ExerciseFailure(f"check_kv_cache_step expects a function, got {_type_name(fn)}: pass "
                              f"the function itself, without calling it.")
    state = torch.random.get_rng_state()
    torch.manual_seed(4)
    attns = [MultiHeadAttention(16, 4).eval(), MultiHeadAttention(8, 1).eval()]
    torch.random.set_rng_state(state)
    g = torch.Generator().manual_seed(4)
    names = ("attn", "x")
    cases = [Case("4 heads, 6 tokens", (attns[0], _randn(g, 2, 6, 16)), names=names),
             Case("1 head, 3 tokens", (attns[1], _randn(g, 1, 3, 8)), names=names)]

    def reference(attn, x):
        with torch.no_grad():
            return _run_cache(_ref().kv_cache_step, attn, x)

    def learner(attn, x):
        with torch.no_grad():
            return _run_cache(fn, attn, x)

    def compare(got, expected):
        out, (k, v) = expected
        if not isinstance(got, tuple) or len(got) != 2 or not isinstance(got[1], (tuple, list)) or len(got[1]) != 2:
            return "each step must return (out, (k, v))."
        return (_compare(got[0], out, "outputs of the steps, concatenated over time")
                or _compare(got[1][0], k, "cached keys after the last step")
                or _compare(got[1][1], v, "cached values after the last step"))

    def diagnose(case, got, expected):
        attn, x = case.args
        with torch.no_grad():
            only_now = attn(x, x, x, torch.eye(x.shape[1], dtype=torch.bool))[0]
        if isinstance(got, tuple) and _same(got[0], only_now):
            return "each token attends only to itself: concatenate the new k, v to the cache first."
        return None

    return _run_cases("check_kv_cache_step", learner, reference, cases, _CACHE_HINT,
                      compare=compare, diagnose=diagnose)
