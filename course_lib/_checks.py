"""Argument validation shared by every course_lib module.

Each check raises a TypeError (wrong type) or ValueError (wrong value or shape) whose message
names the argument, what was expected and what was received, so a learner's mistake is
reported where it happens instead of surfacing later as a wrong number or a NaN.
The modules the book studies call these once, where a learner calls in (a model's forward, a
public function); the layers inside run unchecked. None of them has to be read to follow a chapter.
"""

from __future__ import annotations

import numbers
import warnings

import torch


def shape_of(x) -> str:
    """'(2, 3)' for a tensor, the type's name for anything else (for messages)."""
    return str(tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__


# ---------------------------------------------------------------------------
# Plain Python arguments
# ---------------------------------------------------------------------------

def check_int(name, n, minimum=1):
    """n must be an int (not a bool) >= minimum."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(n).__name__}")
    if n < minimum:
        kind = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(f"{name} must be {kind}, got {n}")
    return int(n)


def check_bool(name, value):
    """value must be a bool: bias=1 or batch_first="False" raise, as in torch.nn.RNN."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} should be of type bool, got: {type(value).__name__}")
    return value


def check_choice(name, value, choices):
    """value must be one of `choices`."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_prob(name, p):
    """p must be a real number in [0, 1]."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p <= 1:
        raise ValueError(f"{name} must be a probability between 0 and 1, got {p!r}")
    return float(p)


def check_dropout(dropout, num_layers):
    """A probability; warns (as torch) when it cannot act: dropout between layers of one layer."""
    check_prob("dropout", dropout)
    if dropout > 0 and num_layers == 1:
        warnings.warn(f"dropout={dropout} has no effect with num_layers=1: dropout is applied "
                      f"to the output of every layer but the last", stacklevel=3)
    return float(dropout)


def check_divisible(d_model, num_heads):
    """Multi-head attention splits d_model into num_heads equal parts."""
    check_int("d_model", d_model)
    check_int("num_heads", num_heads)
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


# ---------------------------------------------------------------------------
# Tensors
# ---------------------------------------------------------------------------

def check_float_tensor(name, x, dtype=None, owner=None):
    """x must be a floating-point tensor (of `dtype`, the parameters' dtype of `owner`)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if dtype is not None and x.dtype != dtype:
        raise TypeError(f"{name} has dtype {x.dtype} but the {owner}'s parameters are {dtype}: "
                        f"convert one of them (e.g. x.to({dtype}) or module.to({x.dtype}))")
    return x


def check_ids(name, ids, vocab_size=None, max_len=None):
    """ids must be a (B, T) integer tensor with values in [0, vocab_size) and T <= max_len."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
    if ids.dim() != 2:
        raise ValueError(f"{name} must be a (B, T) tensor of token ids, got shape {shape_of(ids)}")
    if ids.dtype not in (torch.long, torch.int32):
        raise TypeError(f"{name} must hold integer token ids (torch.long), got dtype {ids.dtype}")
    if max_len is not None and ids.shape[1] > max_len:
        raise ValueError(f"{name} has length T={ids.shape[1]}, more than max_len={max_len}")
    if vocab_size is not None and ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"{name} has ids outside [0, {vocab_size}): min {int(ids.min())}, "
                         f"max {int(ids.max())}")
    return ids


def check_states(name, x, d_model):
    """x must be a (B, T, d_model) float tensor."""
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"{name} must be (B, T, d_model={d_model}), got shape {shape_of(x)}")
    return x


def check_same_batch(name_a, a, name_b, b):
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"{name_a} of shape {shape_of(a)} and {name_b} of shape {shape_of(b)} "
                         f"need the same batch size B")


def check_lengths(name, lengths, B, max_len):
    """lengths: (B,) integers in 1..max_len; returned as a tensor."""
    lengths = torch.as_tensor(lengths)
    if lengths.shape != (B,):
        raise ValueError(f"{name} must have shape (B,) = ({B},), got shape {shape_of(lengths)}")
    if lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers, got dtype {lengths.dtype}")
    if bool((lengths < 1).any()) or bool((lengths > max_len).any()):
        raise ValueError(f"{name} must lie in 1..{max_len}, got {lengths.tolist()}")
    return lengths


def check_source(src, src_len, max_len=None):
    """A seq2seq source: src (B, S) token ids, src_len (B,) lengths in 1..S (returned as a tensor
    on src's device); S <= max_len when the model was built for at most max_len positions."""
    check_ids("src", src)
    if max_len is not None and src.shape[1] > max_len:
        raise ValueError(f"src of shape {shape_of(src)} has {src.shape[1]} positions, more than the "
                         f"max_src_len = {max_len} this model's location score was built for")
    return check_lengths("src_len", src_len, src.shape[0], src.shape[1]).to(src.device)


def check_seq2seq_inputs(src, src_len, tgt_in, max_len=None):
    """A seq2seq model's training inputs: the source (`check_source`) and tgt_in (B, T) token ids."""
    src_len = check_source(src, src_len, max_len)
    check_ids("tgt_in", tgt_in)
    check_same_batch("src", src, "tgt_in", tgt_in)
    return src_len


def check_decoder_step(y_prev, state, vocab_size, enc_size):
    """A seq2seq decoder's step: y_prev (B,) token ids in [0, vocab_size), and a state from its
    `init_state`, whose memory holds outputs (B, S, enc_size) and a bool mask (B, S)."""
    if not isinstance(y_prev, torch.Tensor) or y_prev.dim() != 1:
        raise ValueError(f"y_prev must be a (B,) tensor of token ids, got shape {shape_of(y_prev)}")
    check_ids("y_prev", y_prev[:, None], vocab_size)
    if not isinstance(state, dict) or "h" not in state or "memory" not in state:
        raise TypeError(f"state must be the dict of the decoder's init_state, got {type(state).__name__}")
    B, outputs, mask = y_prev.shape[0], state["memory"].outputs, state["memory"].mask
    if outputs.dim() != 3 or outputs.shape[0] != B or outputs.shape[2] != enc_size:
        raise ValueError(f"memory.outputs must be (B, S, H_enc) = ({B}, S, {enc_size}) for y_prev of "
                         f"shape {shape_of(y_prev)}, got {shape_of(outputs)}")
    if state["h"].shape[0] != B:
        raise ValueError(f"state['h'] of shape {shape_of(state['h'])} and y_prev of shape "
                         f"{shape_of(y_prev)} need the same batch size B")
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != outputs.shape[:2]:
        raise ValueError(f"memory.mask must be a bool tensor (B, S) = {tuple(outputs.shape[:2])} (True at "
                         f"real source positions), got {shape_of(mask)} {getattr(mask, 'dtype', '')}")


def check_local_inputs(scores, mask, p):
    """Luong's local attention: scores (B, T, S) float, mask (B, S) bool, window centres p (B, T)."""
    check_attention_tensor("scores", scores)
    B, T, S = scores.shape if scores.dim() == 3 else (None, None, None)
    if scores.dim() != 3 or not isinstance(mask, torch.Tensor) or mask.shape != (B, S) \
            or mask.dtype != torch.bool or not isinstance(p, torch.Tensor) or p.shape != (B, T):
        raise ValueError(f"scores must be (B, T, S), mask (B, S) bool and p (B, T); got scores "
                         f"{shape_of(scores)}, mask {shape_of(mask)} "
                         f"({getattr(mask, 'dtype', '')}), p {shape_of(p)}")


def check_score_inputs(q, k, d_q, d_k):
    """A learned score's inputs: q (..., T_q, d_q), k (..., T_k, d_k), one dtype, batch dims
    that broadcast."""
    check_last_dim("q", q, d_q, "d_q")
    check_last_dim("k", k, d_k, "d_k")
    check_same_dtype(q=q, k=k)
    check_batch_dims(q=q, k=k)


# ---------------------------------------------------------------------------
# Recurrent networks (course_lib.rnn): inputs and initial states
# ---------------------------------------------------------------------------

def check_rnn_input(module, x, layouts, dims):
    """x must be a float tensor of the parameters' dtype, with one of `dims` dims and
    input_size features in its last dim."""
    check_float_tensor("x", x, next(module.parameters()).dtype, type(module).__name__)
    if x.dim() not in dims:
        hint = (": inputs need a batch dimension (x[None] adds one)"
                if x.dim() == min(dims) - 1 and x.shape[-1] == module.input_size else "")
        raise ValueError(f"x must have shape {' or '.join(layouts)}, got shape {shape_of(x)}{hint}")
    if x.shape[-1] != module.input_size:
        raise ValueError(
            f"x has {x.shape[-1]} features but the {type(module).__name__} was built with "
            f"input_size={module.input_size} (x has shape {shape_of(x)}, expected "
            f"{' or '.join(layouts)} with input_size={module.input_size})")


def check_rnn_state(module, name, h, expected, layout):
    """An initial state must be a tensor of shape `expected`."""
    check_float_tensor(name, h, next(module.parameters()).dtype, type(module).__name__)
    if tuple(h.shape) != tuple(expected):
        raise ValueError(f"{name} has shape {shape_of(h)} but the {type(module).__name__} expects "
                         f"{layout} = {tuple(expected)} for x of this shape")


def split_lstm_state(module, hx):
    """hx = (h, c) or None -> h, c."""
    if hx is None:
        return None, None
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        got = f"a tuple of {len(hx)}" if isinstance(hx, (tuple, list)) else type(hx).__name__
        raise TypeError(f"hx must be a tuple (h, c) for the {type(module).__name__}, got {got}")
    return hx


def check_lstm_state(module, hx, expected, layout, names):
    """An LSTM's initial state: None, or a pair (h, c), each None or a tensor of shape `expected`.
    Returns (h, c) (None, None for hx None)."""
    h, c = split_lstm_state(module, hx)
    for name, state in zip(names, (h, c)):
        if state is not None:
            check_rnn_state(module, name, state, expected, layout)
    return h, c


def check_nonlinearity(nonlinearity):
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")


# ---------------------------------------------------------------------------
# Attention (course_lib.attention): scores, values, masks
# ---------------------------------------------------------------------------

_LAYOUT = {
    "q": "(..., T_q, d)",
    "k": "(..., T_k, d)",
    "v": "(..., T_k, d_v)",
    "scores": "(..., T_q, T_k)",
    "values": "(..., T_k, d_v)",
}


def check_attention_tensor(name, x):
    """x must be a floating-point tensor with at least 2 dims, laid out as _LAYOUT[name]."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.dim() < 2:
        raise ValueError(f"{name} must have shape {_LAYOUT[name]}, got shape {shape_of(x)}")


def check_batch_dims(**tensors):
    """The leading dims (all but the last two) must broadcast against each other."""
    try:
        torch.broadcast_shapes(*(x.shape[:-2] for x in tensors.values()))
    except RuntimeError:
        seen = ", ".join(f"{name} of shape {shape_of(x)}" for name, x in tensors.items())
        raise ValueError(f"the batch dims (all but the last two) of {seen} do not broadcast") from None


def check_same_dtype(**tensors):
    dtypes = {x.dtype for x in tensors.values()}
    if len(dtypes) > 1:
        seen = ", ".join(f"{name} is {x.dtype}" for name, x in tensors.items())
        raise TypeError(f"expected one dtype for all inputs, got: {seen}")


def check_query_key(q, k, same_d=True):
    check_attention_tensor("q", q)
    check_attention_tensor("k", k)
    if same_d and q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q of shape {shape_of(q)} and k of shape {shape_of(k)} must have the same last "
            f"dim d, got {q.shape[-1]} and {k.shape[-1]}"
        )
    check_same_dtype(q=q, k=k)
    check_batch_dims(q=q, k=k)


def check_query_key_value(q, k, v):
    check_query_key(q, k)
    check_attention_tensor("v", v)
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k of shape {shape_of(k)} and v of shape {shape_of(v)} must have the same "
            f"number of positions T_k, got {k.shape[-2]} and {v.shape[-2]}"
        )
    check_same_dtype(q=q, k=k, v=v)
    check_batch_dims(q=q, k=k, v=v)


def check_scores_values(scores, values):
    check_attention_tensor("scores", scores)
    check_attention_tensor("values", values)
    if scores.shape[-1] != values.shape[-2]:
        raise ValueError(
            f"scores of shape {shape_of(scores)} weigh {scores.shape[-1]} keys, so values "
            f"must have shape (..., {scores.shape[-1]}, d_v), got {shape_of(values)}"
        )
    check_same_dtype(scores=scores, values=values)
    check_batch_dims(scores=scores, values=values)


def check_last_dim(name, x, expected, dim_name):
    check_attention_tensor(name, x)
    if x.shape[-1] != expected:
        raise ValueError(
            f"{name} of shape {shape_of(x)} must have last dim {dim_name} = {expected}, "
            f"got {x.shape[-1]}"
        )


def check_key_length(name, x, max_len):
    check_attention_tensor(name, x)
    if x.shape[-2] > max_len:
        raise ValueError(
            f"{name} of shape {shape_of(x)} has {x.shape[-2]} positions, more than the "
            f"T_k = {max_len} this LocationScore was built for"
        )


def check_location_inputs(q, k, d_q, max_len):
    """The location score's inputs: q (..., T_q, d_q) and, if given, k with at most max_len positions."""
    check_last_dim("q", q, d_q, "d_q")
    if k is not None:
        check_key_length("k", k, max_len)


def check_mask(name, mask, scores_shape):
    """mask, if given, must be a bool (True = allowed) or float tensor that broadcasts to the
    scores' shape (..., T_q, T_k) without adding dims."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a bool or float torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(
            f"{name} must be bool (True = allowed) or floating-point (added to the scores), "
            f"got dtype {mask.dtype}"
        )
    try:
        fits = torch.broadcast_shapes(mask.shape, scores_shape) == tuple(scores_shape)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"{name} of shape {shape_of(mask)} does not broadcast to the scores' shape "
            f"{tuple(scores_shape)} (..., T_q, T_k)"
        )


def check_attention_inputs(query, key, value, d_model):
    """Multi-head attention's inputs: query (B, T, d_model), key and value (B, S, d_model)."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != d_model:
            raise ValueError(f"{name} must be (B, T, d_model={d_model}), got shape {shape_of(x)}")
    if key.shape[:2] != value.shape[:2]:
        raise ValueError(f"key and value need the same (B, S), got {tuple(key.shape)} "
                         f"and {tuple(value.shape)}")
    if query.shape[0] != key.shape[0]:
        raise ValueError(f"query and key need the same batch size, got {tuple(query.shape)} "
                         f"and {tuple(key.shape)}")


def check_decoder_inputs(x, memory, d_model):
    """A decoder's inputs: x (B, T, d_model) and the encoder's memory (B, S, d_model)."""
    for name, states in (("x", x), ("memory", memory)):
        if not isinstance(states, torch.Tensor) or states.dim() != 3 or states.shape[-1] != d_model:
            raise ValueError(f"{name} must be (B, T, d_model={d_model}), got shape {shape_of(states)}")
    if x.shape[0] != memory.shape[0]:
        raise ValueError(f"x of shape {shape_of(x)} and memory of shape {shape_of(memory)} "
                         f"need the same batch size B")


def check_mask_lengths(lengths, max_len):
    """Return `lengths` as a (B,) int64 tensor, after checking it and `max_len`."""
    if not isinstance(lengths, torch.Tensor):
        lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1 or lengths.numel() == 0:
        raise ValueError(f"lengths must have shape (B,) with B >= 1, got shape {shape_of(lengths)}")
    if lengths.is_floating_point() or lengths.dtype == torch.bool or lengths.is_complex():
        raise TypeError(f"lengths must hold integers, got dtype {lengths.dtype}")
    if (lengths < 0).any():
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    if max_len is not None:
        check_int("max_len", max_len)
        if (lengths > max_len).any():
            raise ValueError(f"lengths {lengths.tolist()} exceed max_len = {max_len}")
    elif lengths.max() == 0:
        raise ValueError("lengths are all 0: pass max_len to set the padded length T")
    return lengths.long()
