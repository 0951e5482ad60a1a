"""Debugging exercises: one per part of the book, each a component with a planted bug.

The learner gets a symptom ("trains, but forgets", "the output depends on the batch's
padding"), finds the faulty component by a measurement (the notebook asks for it, and a written
answer says what was measured), and writes the fixed component, which a check compares with the
right one. The suspects below are shown to the learner (``show_source``); what is wrong with each
is in the instructor kit, not here. A check's message on a wrong component reports what a
measurement of its result shows (which quantity is off, and by how much), never the fix.

    suspect_lstm_step       part 1 (recurrent networks), fixed with check_lstm_step
    suspect_source_mask     part 2 (sequence to sequence), fixed with check_source_mask
    suspect_causal_mask     part 3 (attention), fixed with check_causal_mask
    suspect_decoder_layer   part 4 (the Transformer), fixed with check_decoder_layer
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._compare import compare
from ._engine import Check, Mistake
from ._forbid import Forbidden


# --------------------------------------------------------------------------------------
# The suspects
# --------------------------------------------------------------------------------------
def suspect_lstm_step(x_proj, state, weight_hh, bias_hh=None):
    """One LSTM step: x_proj (B, 4H), weight_hh (4H, H) and bias_hh (4H,) stacked in torch's
    layout, state (h, c) each (B, H) -> (h', c')."""
    h, c = state
    H = c.shape[-1]
    pre = x_proj + F.linear(h, weight_hh, bias_hh)                  # (B, 4H)
    blocks = pre.split(H, dim=-1)                                   # four (B, H) blocks
    keep, write, show = (torch.sigmoid(blocks[k]) for k in (0, 1, 3))
    candidate = torch.tanh(blocks[2])                               # (B, H)
    c = keep * c + write * candidate                                # (B, H)
    return show * torch.tanh(c), c


def suspect_source_mask(lengths, S):
    """The attention mask of right-padded sources: lengths (B,) -> (B, S) bool, True = real."""
    last = lengths[:, None]                                         # (B, 1): the last real position
    return torch.arange(S)[None, :] <= last                         # (B, S)


def suspect_causal_mask(T):
    """The decoder's mask: (T, T) bool, True where query t may attend to key s."""
    query = torch.arange(1, T + 1)[:, None]                         # (T, 1): the query positions
    key = torch.arange(T)[None, :]                                  # (1, T): the key positions
    return key <= query                                             # (T, T): no key after its query


def suspect_decoder_layer(layer, x, memory, self_mask=None, memory_mask=None):
    """A post-LN decoder layer's forward pass with the sub-modules of a course_lib DecoderLayer."""
    x = layer.norm1(x + layer.self_attn(x, x, x, self_mask)[0])
    x = layer.norm2(layer.multihead_attn(x, memory, memory, memory_mask)[0])
    return layer.norm3(x + layer.linear2(F.relu(layer.linear1(x))))


# --------------------------------------------------------------------------------------
# The fixes' checks that the chapters do not already have
# --------------------------------------------------------------------------------------
def _kept_fraction(args, kwargs, got, expected):
    """On a case where a right step's c' is f * c (h = 0 and the candidate's pre-activations 0,
    so that nothing is written): the fraction of c that the learner's step keeps, against a
    right step's."""
    x_proj, (h, c), _, bias_hh = args
    H = c.shape[-1]
    pre = x_proj + (0.0 if bias_hh is None else bias_hh)            # (B, 4H), since h = 0
    probe = bool((h == 0).all() and (pre[..., 2 * H:3 * H] == 0).all() and (c != 0).all())
    if not (probe and isinstance(got, (tuple, list)) and len(got) == 2
            and isinstance(got[1], torch.Tensor) and got[1].shape == c.shape):
        return None
    yours, right = (got[1].detach() / c).double(), (expected[1] / c).double()
    if torch.allclose(yours, right, rtol=1e-4, atol=1e-5):
        return None

    def fraction(r):
        low, high = r.min().item(), r.max().item()
        return f"{low:.3g}" if high - low < 5e-3 else f"{low:.3g} to {high:.3g}"

    forget = pre[..., H:2 * H]
    return (f"with h = 0, the forget block's pre-activations (block 2 of 4, "
            f"rows H..2H, where set_forget_bias writes) at {forget.mean().item():+.3g} and the "
            f"candidate's at 0, your step keeps {fraction(yours)} of its cell state per step "
            f"(c'/c), where a right LSTM step keeps {fraction(right)}.")


check_lstm_step = Check(
    "check_lstm_step",
    "fn(x_proj (B, 4H), (h, c) each (B, H), weight_hh (4H, H), bias_hh (4H,)) -> (h', c'): one "
    "LSTM step in torch's gate order i, f, g, o",
    cause_label="Measured",  # a debugging exercise: the check reports a measurement, not the bug
    params=("x_proj", "state", "weight_hh", "bias_hh"), outputs=("h'", "c'"),
    forbidden=(Forbidden("course_lib.rnn.lstm_step"), Forbidden("course_lib.rnn.LSTMCell"),
               Forbidden("course_lib.rnn.LSTM"), Forbidden("torch.nn.LSTMCell"),
               Forbidden("torch.nn.LSTM"), Forbidden("torch.lstm_cell")),
    diagnose=_kept_fraction,
    mistakes=[
        Mistake("your (h', c') do not change when the input gate's "
                "pre-activations (block 1 of 4, rows 0..H) change; in an LSTM they set how much "
                "of the candidate is written into the cell state."),
        Mistake("your h' follows the cell state linearly (double c' and h' "
                "doubles), where an LSTM's h' saturates and stays within (-1, 1) however large "
                "c' grows."),
        Mistake("with the candidate's pre-activations at 0 (block 3 of 4) "
                "your step still adds to the cell state, and only ever adds positive amounts; an "
                "LSTM's candidate is 0 there and negative below it."),
    ],
    hints=["Measure before reading: the check's first case is a probe (h = 0, c = 1, x_proj zero "
           "but the forget block at +3). How much of c does your step keep, and how much should "
           "a step with forget gate sigmoid(3) keep?",
           "Repeat that probe with each of the four blocks of x_proj at +3 in turn: which block "
           "makes your step keep its cell state, and which block does set_forget_bias write?"],
)


def _padding_symptoms(got, expected):
    """The comparison of a source mask, reported as what the mask does to attention: each
    source's output read over random states with random scores (the same for every mask), when
    only its padding changes (a right mask: no change) and when one real state changes (a right
    mask: a change)."""
    problem = compare(got, expected)
    if (problem is None or not isinstance(got, torch.Tensor) or got.dtype != torch.bool
            or got.shape != expected.shape or expected.dim() != 2):
        return problem
    B, S = expected.shape
    gen = torch.Generator().manual_seed(1234)
    scores, states, others = (torch.randn(B, S, *d, generator=gen) for d in ((), (4,), (4,)))

    def read(mask, v):
        """(B, 4): each source's attention output over the states v, with the mask given."""
        w = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).nan_to_num(0.0)
        return (w[..., None] * v).sum(dim=1)

    base = read(got, states)
    repadded = torch.where(expected[..., None], states, others)    # same words, other padding
    moved = (read(got, repadded) - base).abs().amax(-1)           # (B,)
    found = []
    for b in range(B):
        length = int(expected[b].sum())
        where = f"source {b} (length {length}, padded to S = {S})"
        if moved[b] > 1e-6:
            found.append(f"{where}: its attention output changes by {moved[b]:.2g} when only its "
                         "padding changes (with a right mask it does not change)")
        for j in range(length):
            changed = states.clone()
            changed[b, j] = others[b, j]
            if (read(got, changed)[b] - base[b]).abs().max() < 1e-6:
                found.append(f"{where}: its output does not change when its real position {j} "
                             "changes (with a right mask it does)")
                break
    counted = problem.split(";")[0]                                # how many entries, not where
    return (f"{counted}. Measured with your mask, over random states and scores: "
            + "; ".join(found[:2]) + "." if found else f"{counted}.")


check_source_mask = Check(
    "check_source_mask",
    "fn(lengths (B,) int64, S) -> (B, S) bool: True at the real positions 0 .. length - 1 of each "
    "right-padded source, False at its padding",
    cause_label="Measured",  # a debugging exercise: the check reports a measurement, not the bug
    params=("lengths", "S"),
    compare=_padding_symptoms,
    forbidden=(Forbidden("course_lib.attention.padding_mask"),
               Forbidden("course_lib.attention.padding_mask_from_tokens")),
    mistakes=[
        Mistake("with your mask a source's attention output depends on its "
                "padding and on none of its words; True marks what attention may read."),
        Mistake("with your mask the output of every source ignores its last "
                "word (it does not change when that state changes), whatever the padding."),
        Mistake("the mask has the layout (B, 1, 1, S) of attention.padding_mask, made for the "
                "Transformer's scores (chapter 5 on); this chapter's decoders score (B, S)."),
    ],
    hints=["Measure before reading: build a few sources of known lengths, read random states with "
           "your mask, and change only the padding states: a right mask's outputs do not move.",
           "Measure per source: which sources move when only the padding changes, or when the "
           "batch is padded longer? Compare each one's length with S."],
)
