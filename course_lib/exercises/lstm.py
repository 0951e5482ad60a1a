"""Checks for chapter 2, "LSTM and GRU"."""

from __future__ import annotations

import torch

from ._compare import compare, within
from ._engine import Answer, Check, Mistake, Prediction, WrongResult, no_grad
from ._forbid import Forbidden


# --------------------------------------------------------------------------------------
# the GRU cell
# --------------------------------------------------------------------------------------
check_gru_cell = Check(
    "check_gru_cell",
    "fn(x (B, I), h (B, H), W_ih (3H, I), W_hh (3H, H), b_ih, b_hh) -> h' (B, H), "
    "torch's GRU (gates r, z, n)",
    params=("x", "h", "W_ih", "W_hh", "b_ih", "b_hh"),
    mistakes=[
        Mistake("z and 1 - z are swapped: in torch's convention z is the share of the OLD state "
                "kept, h' = (1 - z) * n + z * h."),
        Mistake("the reset gate multiplies h before the matrix product (the paper's other "
                "variant); torch applies it after: n = tanh(x_n + r * (h @ W_hn.T + b_hn))."),
        Mistake("the reset gate is missing from the candidate: n = tanh(x_n + r * h_n)."),
        Mistake("the r and z blocks are swapped: torch stacks the gates in the order r, z, n."),
    ],
    hints=["Project x and h once each (with their biases) and split both results into three "
           "blocks along the last dim, in torch's gate order.",
           "Two gates are sigmoids of the sum of their x and h blocks; the candidate is a tanh "
           "in which the reset gate scales the h block.",
           "The update gate z interpolates between the candidate and the old state; check which "
           "one z weights in torch's documentation of nn.GRU."],
    forbidden=(Forbidden("course_lib.rnn.gru_step"), Forbidden("course_lib.rnn.GRUCell"),
               Forbidden("course_lib.rnn.GRU"), Forbidden("torch.nn.GRUCell"),
               Forbidden("torch.nn.GRU"), Forbidden("torch.gru_cell")),
)


# --------------------------------------------------------------------------------------
# the forget-gate bias
# --------------------------------------------------------------------------------------
def _parameters_after(fn, lstm, value):
    """Run fn(lstm, value) (it modifies lstm in place); observe every parameter."""
    fn(lstm, value)
    return {k: v.detach().clone() for k, v in lstm.named_parameters()}


def _changed_block(args, kwargs, got, expected):
    """A gate other than f whose bias rows changed, whatever code changed them."""
    lstm = args[0]
    if not isinstance(got, dict):
        return None
    H = lstm.hidden_size
    for name, old in lstm.named_parameters():
        if name.startswith("bias") and name in got and got[name].shape == old.shape:
            for k, gate in enumerate("ifgo"):
                if gate != "f" and not torch.equal(got[name].chunk(4)[k], old.detach().chunk(4)[k]):
                    return (f"the {gate} block of {name} (rows {k * H}:{(k + 1) * H}) changed: the "
                            f"order is i, f, g, o, so the forget gate is rows {H}:{2 * H}.")
    return None


check_set_forget_bias = Check(
    "check_set_forget_bias",
    "fn(lstm, value) sets, in place, the forget gate's total bias "
    "(b_ih + b_hh) of every layer and direction of a course_lib LSTM to value",
    params=("lstm", "value"),
    call=_parameters_after,
    diagnose=_changed_block,
    mistakes=[
        Mistake("the gates are stacked i, f, g, o: the forget gate is rows H:2H, not 0:H."),
        Mistake("the gate adds b_ih + b_hh, so setting both to value gives twice the value: set "
                "one to value and the other to 0."),
        Mistake("the gate adds b_ih + b_hh: bias_hh's forget rows still hold their random values; "
                "set them to 0."),
        Mistake("every layer and direction has its own biases (bias_ih_l1, bias_ih_l0_reverse, "
                "...): set them all."),
    ],
    hints=["List the LSTM's parameters (lstm.named_parameters()): which ones are biases, and "
           "which rows of them belong to the forget gate?",
           "The four gates are stacked in torch's order i, f, g, o, H rows each; the gate sees "
           "the SUM of the two biases.",
           "Modify the parameters in place under torch.no_grad()."],
    forbidden=(Forbidden("course_lib.rnn.set_forget_bias"),),
)


# --------------------------------------------------------------------------------------
# a bidirectional layer from two directions
# --------------------------------------------------------------------------------------
check_bidirectional = Check(
    "check_bidirectional",
    "fn(forward, backward, x (B, T, I)) -> (B, T, 2H): the output of a "
    "bidirectional layer made of two one-directional layers",
    params=("forward", "backward", "x"),
    call=no_grad,
    mistakes=[
        Mistake("the backward outputs are in reversed time order: flip them back with .flip(1) "
                "before concatenating, so position t lines up with x[:, t]."),
        Mistake("the backward layer read x in the forward order: give it x.flip(1)."),
        Mistake("the two halves are swapped: forward direction first, then backward."),
        Mistake("return only the output tensor (B, T, 2H), not the (output, state) pair."),
    ],
    hints=["The backward direction is an ordinary layer that reads the sequence from its end.",
           "Reverse the time dim of x for it (.flip(1)), and reverse its outputs back, so that "
           "position t of both halves describes x[:, t].",
           "Concatenate the two outputs along the feature dim."],
    forbidden=tuple(
        Forbidden(f"{module}.{layer}.forward", label=f"a bidirectional {module}.{layer}",
                  when=lambda args: args["self"].bidirectional)
        for module, layer in [("course_lib.rnn", "RecurrentLayer"), ("torch.nn", "RNN"),
                              ("torch.nn", "LSTM"), ("torch.nn", "GRU")]),
)


# --------------------------------------------------------------------------------------
# sampling with a temperature
# --------------------------------------------------------------------------------------
_SHOWN = "[[2, 1, 0, -1], [0.5, 3, 0.2, 0.1]]"


_LOGITS = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.5, 3.0, 0.2, 0.1]])


_DRAWS = 4000


def _frequencies(fn, logits, temperature, generator):
    """Run fn on `_DRAWS` copies of the rows of `logits`; the frequency of each id per row."""
    logits = logits.repeat(_DRAWS, 1)
    ids = fn(logits, temperature, generator)
    rows, V = _LOGITS.shape
    if not isinstance(ids, torch.Tensor):
        raise WrongResult(f"expected a tensor of ids, got {type(ids).__name__}.")
    if ids.shape != (logits.shape[0],):
        raise WrongResult(f"expected shape {(logits.shape[0],)} (one id per row of logits), got "
                          f"{tuple(ids.shape)}" + (": add .squeeze(-1) after torch.multinomial("
                                                   "probs, 1)." if ids.dim() == 2 else "."))
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise WrongResult(f"expected integer ids (torch.long), got dtype {ids.dtype}.")
    if int(ids.min()) < 0 or int(ids.max()) >= V:
        raise WrongResult(f"ids must lie in 0..{V - 1}, got {int(ids.min())} to {int(ids.max())}.")
    ids = ids.reshape(-1, rows)  # the batch repeats the rows in order
    return torch.stack([torch.bincount(ids[:, r], minlength=V).double() / len(ids)
                        for r in range(rows)])


def _same_distribution(got, expected):
    """Total variation below 0.05 in every row (empirical frequencies of 4000 draws)."""
    if not isinstance(got, torch.Tensor) or not isinstance(expected, torch.Tensor):
        return compare(got, expected)
    if float((got - expected).abs().sum(-1).max()) / 2 < 0.05:
        return None
    return (f"the ids do not follow softmax(logits / temperature): observed frequencies "
            f"{[[round(v, 3) for v in row] for row in got.tolist()]}, expected about "
            f"{[[round(v, 3) for v in row] for row in expected.tolist()]}.")


def _not_greedy(args, kwargs, got, expected):
    if args[1] == 0 and isinstance(got, torch.Tensor):
        return "temperature 0 must be greedy: always the argmax of each row (no sampling)."
    return None


check_sample_next = Check(
    "check_sample_next",
    "fn(logits (B, V), temperature, generator) -> ids (B,): one draw per row "
    "from softmax(logits / temperature); temperature 0 gives the argmax",
    params=("logits", "temperature", "generator"),
    call=_frequencies,
    compare=_same_distribution,
    diagnose=_not_greedy,
    mistakes=[
        Mistake("the logits are multiplied by the temperature; divide them."),
        Mistake("the temperature is ignored."),
        Mistake("ids are drawn uniformly; draw them with the probabilities."),
        Mistake("temperature 0 means greedy: return the argmax (dividing by 0 gives inf and "
                "NaN probabilities)."),
    ],
    hints=["Temperature 0 is a special case: no sampling at all.",
           "Otherwise, turn the logits divided by the temperature into probabilities over the "
           "last dim, and draw one id per row with torch.multinomial, passing the generator.",
           "torch.multinomial(probs, 1) returns shape (B, 1): remove the last dim."],
    forbidden=(Forbidden("course_lib.decoding.sample_next"),
               Forbidden("course_lib.decoding.sample")),
)


# --------------------------------------------------------------------------------------
# the coupled-gate LSTM (input gate = 1 - forget gate)
# --------------------------------------------------------------------------------------
check_coupled_lstm_cell = Check(
    "check_coupled_lstm_cell",
    "fn(x (B, I), h (B, H), c (B, H), W_ih (3H, I), W_hh (3H, H), b_ih, "
    "b_hh) -> (h', c'): the LSTM with coupled gates, blocks f, g, o, input gate 1 - f",
    params=("x", "h", "c", "W_ih", "W_hh", "b_ih", "b_hh"),
    outputs=("h'", "c'"),
    mistakes=[
        Mistake("the coupling is the wrong way round: f keeps the OLD cell state and 1 - f "
                "writes the candidate."),
        Mistake("the candidate is written without a gate: the input gate is not gone, it is "
                "1 - f."),
        Mistake("h' shows the squashed cell state: o * tanh(c'), not o * c'."),
        Mistake("the blocks are stacked f, g, o: the first H rows are the forget gate, the next "
                "H the candidate."),
    ],
    hints=["Start from the LSTM's equations: which of i, f, g, o is no longer computed, and "
           "what takes its place?",
           "One product of x and one of h (with their biases) give three blocks of H; two "
           "become sigmoids and one a tanh.",
           "Only the line of the cell state changes; the hidden state is computed as in the "
           "LSTM. Return both new states."],
    no_shortcut="neither course_lib nor torch has a coupled-gate LSTM cell",
)


# --------------------------------------------------------------------------------------
# the forget bias at which the gradient reaches 50 steps back
# --------------------------------------------------------------------------------------
check_reach_bias = Answer(
    "check_reach_bias",
    "the smallest forget-gate bias of 0, 0.25, ..., 4 at which the gradient measured by "
    "gradient_reach(..., steps=steps) at initialisation still exceeds the threshold all the way "
    "back, k = steps ((steps, threshold) = variant_params(\"ex-reach-bias\"); the book's page: "
    "50 and 1e-2)",
    quantity="the smallest forget bias (grid 0.25) whose reach at k = steps exceeds the threshold",
    tolerance=within(abs=0.2),
    mistakes=[
        Mistake("that is where the forget-gate product alone (the orange curve, or sigmoid(b) ** "
                "steps) exceeds the threshold; the measured gradient also flows through h and the "
                "gates and is larger. Measure reach, the gradient autograd computes."),
        Mistake("that is the last bias at which the reach is still BELOW the threshold; the "
                "question asks for the first one above it."),
    ],
    hints=["gradient_reach(\"lstm\", forget_bias=b, steps=steps) returns a dict; its \"reach\" "
           "entry is a tensor indexed by k, the number of steps back.",
           "Loop over the biases in increasing order and stop at the first one whose value at "
           "k = steps is above the threshold."],
)


# --------------------------------------------------------------------------------------
# predict, then measure: how far a GRU's gradient reaches with a large update-gate bias
# --------------------------------------------------------------------------------------
check_gru_reach_prediction = Prediction(
    "check_gru_reach_prediction", "your prediction of the gradient reaching 50 steps back in a "
    "fresh GRU whose update gates start at bias 3, against the measurement",
    quantity="||d(u . h_50) / d h_0|| of a fresh GRU with update-gate bias 3",
    tolerance=within(factor=2.0), example=0.093,
    explanation=("with bias 3 the update gates start near sigmoid(3) = 0.95, and h_t = (1 - z) * n "
                 "+ z * h_{t-1} copies the old state with that weight: the copy path alone gives "
                 "about 0.95 ** 50 = 0.09, and that is what is measured. Every other path goes "
                 "through the candidate n, which is multiplied by 1 - z = 0.05, or through the "
                 "gates' own slopes (sigmoid'(3) = 0.045), so they add little. The LSTM at "
                 "forget bias 3 differs: the chapter measured that its other paths carry "
                 "several times the forget-gate product (the figure), not which ones; one likely "
                 "reason, not tested, is that its input gate is not tied to the forget gate "
                 "(about 0.5 at the start), so the paths through i * g and the gates stay open."),
    mistakes=[
        Mistake("the LSTM at forget bias 3 measured several times its forget-gate product; in "
                "the GRU the paths other than the copy go through 1 - z, which is small here.",
                lambda measured: 8 * measured),
        Mistake("the update gate copies the state: with z near 0.95 the gradient decays like "
                "0.95 per step, not like the vanilla RNN's.", lambda measured: 1e-6 * measured),
    ],
    hints=["With bias 3, what is the typical value of z at initialisation, and what does the "
           "line h_t = (1 - z) * n + z * h_{t-1} do to the gradient when z is near it?",
           "Raise that factor to the 50th power; then ask whether the paths through the "
           "candidate n can add much when they are multiplied by 1 - z."],
)
