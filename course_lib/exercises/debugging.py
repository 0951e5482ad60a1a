"""Debugging exercises: one per part of the book, each a component with a planted bug.

The learner gets a symptom ("trains, but forgets", "the output depends on the batch's
padding"), finds the faulty component by a measurement (the notebook asks for it, and a written
answer says what was measured), and writes the fixed component, which a check compares with the
right one. The suspects below are shown to the learner (``show_source``); what is wrong with each
is in the instructor kit, not here.

    suspect_lstm_step       part 1 (recurrent networks), fixed with check_lstm_step
    suspect_source_mask     part 2 (sequence to sequence), fixed with check_source_mask
    suspect_causal_mask     part 3 (attention), fixed with check_causal_mask
    suspect_decoder_layer   part 4 (the Transformer), fixed with check_decoder_layer
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._engine import Check, Mistake
from ._forbid import Forbidden


# --------------------------------------------------------------------------------------
# The suspects
# --------------------------------------------------------------------------------------
def suspect_lstm_step(x_proj, state, weight_hh, bias_hh=None):
    """One LSTM step, torch's gate order (i, f, g, o): x_proj (B, 4H), state (h, c) -> (h', c')."""
    h, c = state
    gates = x_proj + F.linear(h, weight_hh, bias_hh)                # (B, 4H)
    f, i, g, o = gates.chunk(4, dim=-1)                             # (B, H) each
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    c = f * c + i * g
    return o * torch.tanh(c), c


def suspect_source_mask(lengths, S):
    """The attention mask of right-padded sources: lengths (B,) -> (B, S) bool, True = real."""
    positions = torch.arange(S)                                     # (S,)
    return positions[None, :] <= lengths[:, None]                   # (B, S)


def suspect_causal_mask(T):
    """The decoder's mask: (T, T) bool, True where query t may attend to key s."""
    return torch.ones(T, T, dtype=torch.bool).tril(1)


def suspect_decoder_layer(layer, x, memory, self_mask=None, memory_mask=None):
    """A post-LN decoder layer's forward pass with the sub-modules of a course_lib DecoderLayer."""
    x = layer.norm1(x + layer.self_attn(x, x, x, self_mask)[0])
    x = layer.norm2(layer.multihead_attn(x, memory, memory, memory_mask)[0])
    return layer.norm3(x + layer.linear2(F.relu(layer.linear1(x))))


# --------------------------------------------------------------------------------------
# The fixes' checks that the chapters do not already have
# --------------------------------------------------------------------------------------
check_lstm_step = Check(
    "check_lstm_step",
    "fn(x_proj (B, 4H), (h, c) each (B, H), weight_hh (4H, H), bias_hh (4H,)) -> (h', c'): one "
    "LSTM step in torch's gate order i, f, g, o",
    params=("x_proj", "state", "weight_hh", "bias_hh"), outputs=("h'", "c'"),
    forbidden=(Forbidden("course_lib.rnn.lstm_step"), Forbidden("course_lib.rnn.LSTMCell"),
               Forbidden("course_lib.rnn.LSTM"), Forbidden("torch.nn.LSTMCell"),
               Forbidden("torch.nn.LSTM"), Forbidden("torch.lstm_cell")),
    mistakes=[
        Mistake("the input and forget gates are swapped: torch stacks the gates i, f, g, o, so the "
                "forget gate is the SECOND block of H rows (the one set_forget_bias sets)."),
        Mistake("the cell state is written without the input gate: c' = f * c + i * g."),
        Mistake("h' shows the raw cell state: h' = o * tanh(c')."),
        Mistake("the candidate g is squashed with a sigmoid; it is a tanh (values in -1..1)."),
    ],
    hints=["Split the (B, 4H) gate pre-activations into four blocks in torch's order; which block "
           "does set_forget_bias change?",
           "Three gates are sigmoids, the candidate a tanh; the cell state keeps f * c and writes "
           "i * g; the output is o * tanh(c')."],
)

check_source_mask = Check(
    "check_source_mask",
    "fn(lengths (B,) int64, S) -> (B, S) bool: True at the real positions 0 .. length - 1 of each "
    "right-padded source, False at its padding",
    params=("lengths", "S"),
    forbidden=(Forbidden("course_lib.attention.padding_mask"),
               Forbidden("course_lib.attention.padding_mask_from_tokens")),
    mistakes=[
        Mistake("off by one: a source of length L has real positions 0 .. L - 1, so position L is "
                "already padding (compare with <, not <=)."),
        Mistake("the polarity is inverted: True marks the real positions, which attention may read."),
        Mistake("the mask has the layout (B, 1, 1, S) of attention.padding_mask, made for the "
                "Transformer's scores (chapter 5 on); this chapter's decoders score (B, S)."),
    ],
    hints=["Compare a (S,) row of positions with a (B, 1) column of lengths.",
           "Position j of source b is real exactly when j < lengths[b]."],
)
