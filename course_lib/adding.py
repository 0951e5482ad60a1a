"""The adding problem: a test of memory for recurrent networks (chapters 1 and 2).

Each of the T steps of a sequence holds two numbers, [value, marker]: the values are drawn
from U[0, 1]; the marker is 1 at exactly two steps, one in the first half of the sequence and
one in the second, and 0 elsewhere. The target, read after the last step, is the sum of the
two marked values,

    y = X1 + X2,        X1 = value at the first marker,  X2 = value at the second,

so the network must carry X1 over more than T/2 steps (this variant is that of Le, Jaitly &
Hinton, 2015, and Arjovsky, Shah & Bengio, 2016; Hochreiter & Schmidhuber's 1997 task drew
values from [-1, 1], put the first marker in the first 10 steps and asked for
0.5 + (X1 + X2) / 4). Two baselines read off the target's statistics:

    NO_MEMORY_MSE = Var(X1 + X2) = 1/6    predict the constant 1: nothing remembered
    ONE_VALUE_MSE = Var(X1)      = 1/12   remember one value exactly, guess 1/2 for the other

A variant asks for X1 alone (target="first"; the second marker is a distractor): remembering
nothing then costs Var(X1) = 1/12.

    adding_batch(B, T, generator)            -> x (B, T, 2), y (B,), where (B, 2)
    AddingRegressor(cell, hidden_size, init) a recurrent layer read out from its last state
    train_adding(cell, T, steps, ...)        -> model, History (history.evals: held-out MSE)
    adding_mse(model, T)                     held-out mean squared error on fresh sequences
    remembered_values(model, T)              least squares of the prediction on X1 and X2
    temporal_contributions(model, x, y)      dL/dW_hh split into one term per time step
    train_gated_adding(cell, T, steps, gate_bias)   train_adding for a GRU or an LSTM whose
                                             memory gate starts with bias gate_bias (chapter 2)
    train_clipping(clip)                     SGD on an RNN whose gradients explode, clipped or not

The layers are torch's (torch.nn.RNN, LSTM, GRU): they compute what course_lib.rnn computes
(the parity tests and chapter 1 check it) with fused kernels, three times faster for the LSTM.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_choice, check_int
from .rnn import rnn_step, set_forget_bias, set_update_bias
from .train import fit, seed_everything

__all__ = ["NO_MEMORY_MSE", "ONE_VALUE_MSE", "CELLS", "INITS", "adding_batch", "AddingRegressor",
           "train_adding", "adding_mse", "remembered_values", "temporal_contributions",
           "train_gated_adding", "train_clipping"]

NO_MEMORY_MSE = 1 / 6
ONE_VALUE_MSE = 1 / 12
CELLS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}
INITS = ("default", "orthogonal", "identity")
TARGETS = ("sum", "first")


def adding_batch(batch_size, T, generator=None, target="sum"):
    """B sequences of the adding problem of length T (T >= 2).

    -> x (B, T, 2) [value, marker], y (B,) the sum of the two marked values (target="sum")
       or the first marked value alone (target="first": the second marker is a distractor),
       where (B, 2) the positions of the first marker (in 0..T/2-1) and the second (T/2..T-1)
    """
    check_int("T", T, minimum=2)
    check_choice("target", target, TARGETS)
    B = check_int("batch_size", batch_size)
    values = torch.rand(B, T, generator=generator)  # (B, T)
    first = torch.randint(0, T // 2, (B,), generator=generator)  # in the first half
    second = torch.randint(T // 2, T, (B,), generator=generator)  # in the second half
    markers = torch.zeros(B, T)
    markers[torch.arange(B), first] = 1.0
    markers[torch.arange(B), second] = 1.0
    x = torch.stack([values, markers], dim=-1)  # (B, T, 2)
    y = (values * markers).sum(1) if target == "sum" else values[torch.arange(B), first]  # (B,)
    return x, y, torch.stack([first, second], dim=1)


class AddingRegressor(nn.Module):
    """A recurrent layer (2 inputs, `hidden_size` units) and a linear read-out of its last state.

    init: "default"     torch's uniform(-1/sqrt(H), 1/sqrt(H)) for every weight and bias
          "orthogonal"  W_hh a random orthogonal matrix (every singular value 1), for the rnn
          "identity"    the IRNN of Le, Jaitly & Hinton (2015): ReLU units, W_hh = I, biases 0
    forward(x (B, T, 2), truncate=None) -> (B,) predictions; with truncate = k, the first
    T - k steps run without gradient (truncated backpropagation through time: the gradient
    of the loss reaches only the last k steps).
    """

    def __init__(self, cell="rnn", hidden_size=32, init="default"):
        super().__init__()
        check_choice("cell", cell, CELLS)
        check_choice("init", init, INITS)
        if init != "default" and cell != "rnn":
            raise ValueError(f"init={init!r} is for cell='rnn', got cell={cell!r}")
        options = {"nonlinearity": "relu"} if init == "identity" else {}
        self.rnn = CELLS[cell](2, hidden_size, batch_first=True, **options)
        self.out = nn.Linear(hidden_size, 1)
        with torch.no_grad():
            if init == "orthogonal":
                nn.init.orthogonal_(self.rnn.weight_hh_l0)
            elif init == "identity":
                self.rnn.weight_hh_l0.copy_(torch.eye(hidden_size))
                self.rnn.bias_ih_l0.zero_()
                self.rnn.bias_hh_l0.zero_()

    def forward(self, x, truncate=None):
        state = None
        if truncate is not None and truncate < x.shape[1]:
            with torch.no_grad():  # the first T - k steps: the state, but no gradient path
                _, state = self.rnn(x[:, :x.shape[1] - truncate])
            x = x[:, x.shape[1] - truncate:]
        output, _ = self.rnn(x, state)  # (B, T, H)
        return self.out(output[:, -1]).squeeze(-1)  # (B,): from the last state only


def _test_set(T, n=4000, seed=10_000, target="sum"):
    """Fresh sequences for held-out errors, never drawn in training (their own generator)."""
    return adding_batch(n, T, torch.Generator().manual_seed(seed + T), target)


@torch.no_grad()
def adding_mse(model, T, n=4000, seed=10_000, target="sum"):
    """Held-out mean squared error of `model` on n fresh sequences of length T."""
    x, y, _ = _test_set(T, n, seed, target)
    was_training = model.training
    model.eval()
    mse = F.mse_loss(model(x), y).item()
    model.train(was_training)
    return mse


def train_adding(cell, T, steps, seed=0, lr=1e-2, hidden_size=32, batch_size=64, init="default",
                 truncate=None, target="sum", clip=1.0, eval_every=0, progress=False):
    """Chapter 1's recipe: Adam (learning rate lr), gradients clipped to norm `clip`, `steps`
    batches of `batch_size` fresh sequences of length T. The seed fixes the initialisation and
    the batches. Every `eval_every` steps (and at the end) history.evals records the held-out
    MSE (`adding_mse`, 4000 sequences). -> model, history
    """
    seed_everything(seed)
    model = AddingRegressor(cell, hidden_size, init)
    g = torch.Generator().manual_seed(seed + 1)
    x_val, y_val, _ = _test_set(T, target=target)

    def loss_fn(m, batch):
        return F.mse_loss(m(batch[0], truncate), batch[1])

    history = fit(model, loss_fn, lambda step: adding_batch(batch_size, T, g, target)[:2], steps=steps,
                  lr=lr, clip=clip, eval_fn=lambda m: F.mse_loss(m(x_val), y_val).item(),
                  eval_every=eval_every, progress=progress, desc=f"{cell} T={T}")
    return model, history


def train_gated_adding(cell, T, steps, gate_bias=None, seed=0, lr=1e-2, hidden_size=32, eval_every=0,
                       progress=False):
    """`train_adding` for a gated cell ("lstm" or "gru") whose memory gate starts with bias
    gate_bias: the LSTM's forget gate (`rnn.set_forget_bias`), the GRU's update gate
    (`rnn.set_update_bias`); None keeps torch's initialisation (the gate near 0.5 at first).
    Same recipe, batches and held-out evaluation as train_adding: with gate_bias=None it gives
    train_adding's numbers exactly (tested). -> model, history
    """
    check_choice("cell", cell, ("lstm", "gru"))
    seed_everything(seed)
    model = AddingRegressor(cell, hidden_size)
    if gate_bias is not None and cell == "lstm":
        set_forget_bias(model.rnn, gate_bias)  # f = sigmoid(gate_bias + ...) at the start
    elif gate_bias is not None:
        set_update_bias(model.rnn, gate_bias)  # z = sigmoid(gate_bias + ...) at the start
    g = torch.Generator().manual_seed(seed + 1)
    x_val, y_val, _ = _test_set(T)

    def loss_fn(m, batch):
        return F.mse_loss(m(batch[0]), batch[1])

    history = fit(model, loss_fn, lambda step: adding_batch(64, T, g)[:2], steps=steps, lr=lr, clip=1.0,
                  eval_fn=lambda m: F.mse_loss(m(x_val), y_val).item(), eval_every=eval_every,
                  progress=progress, desc=f"{cell} T={T} gate bias {gate_bias}")
    return model, history


def train_clipping(clip, steps=200, T=40, gain=2.0, lr=0.05, seed=0, hidden_size=32, batch_size=64):
    """Chapter 1's clipping experiment: a tanh RNN whose W_hh is `gain` times a random orthogonal
    matrix (every singular value = gain: its Jacobians explode), trained on the adding problem
    with plain SGD (learning rate lr), the gradient clipped to norm `clip` (None: not clipped).

    -> {"steps_finite": the steps trained before the loss became non-finite (`steps` if it never
        did), "loss_last50": the mean training loss over the last 50 of those steps}
    """
    seed_everything(seed)
    model = AddingRegressor("rnn", hidden_size, init="orthogonal")
    with torch.no_grad():
        model.rnn.weight_hh_l0.mul_(gain)  # gain x an orthogonal matrix
    g = torch.Generator().manual_seed(seed + 1)
    losses = []

    def loss_fn(m, batch):
        loss = F.mse_loss(m(batch[0]), batch[1])
        losses.append(loss.item())
        return loss

    try:
        fit(model, loss_fn, lambda step: adding_batch(batch_size, T, g)[:2], steps=steps,
            optimizer=torch.optim.SGD(model.parameters(), lr=lr), clip=clip, progress=False)
    except FloatingPointError:  # fit stops at the first non-finite loss
        losses.pop()
    return {"steps_finite": len(losses), "loss_last50": sum(losses[-50:]) / len(losses[-50:])}


@torch.no_grad()
def remembered_values(model, T, n=4000, seed=10_000, target="sum"):
    """Which marked values does the trained model use? Least squares on fresh sequences:

        prediction ~ a + b1 X1 + b2 X2

    b1 = b2 = 1 is the sum (both remembered); b1 = 0, b2 = 1 remembers only the second value
    (MSE 1/12 at best); b1 = b2 = 0 remembers nothing (1/6). Returns a dict with a, b1, b2,
    r2 (the share of the prediction's variance the two values explain) and the model's mse
    (against the `target` it was trained for).
    """
    x, y, where = _test_set(T, n, seed, target)
    was_training = model.training
    model.eval()
    pred = model(x)  # (n,)
    model.train(was_training)
    rows = torch.arange(n)
    X1, X2 = x[rows, where[:, 0], 0], x[rows, where[:, 1], 0]  # (n,) each
    design = torch.stack([torch.ones(n), X1, X2], dim=1).double()  # (n, 3)
    coef = torch.linalg.lstsq(design, pred.double()[:, None]).solution[:, 0]  # (3,)
    residual = pred.double() - design @ coef
    r2 = 1 - residual.var() / pred.double().var()
    return {"a": coef[0].item(), "b1": coef[1].item(), "b2": coef[2].item(), "r2": r2.item(),
            "mse": F.mse_loss(pred, y).item()}


def temporal_contributions(model, x, y):
    """The gradient of the loss with respect to W_hh as a sum over time (Pascanu et al., 2013):

        dL/dW_hh = sum_t G_t,     G_t = dL/dh_T  dh_T/dh_t  d+h_t/dW_hh

    where d+h_t/dW_hh differentiates step t alone (its own use of W_hh). G_t is computed
    exactly by giving each step its own copy of W_hh and differentiating the copies.
    For a vanilla RNN regressor (cell "rnn"); x (B, T, 2), y (B,) -> (T, H, H): G_1..G_T.
    """
    layer = model.rnn
    if not isinstance(layer, nn.RNN):
        raise ValueError(f"temporal_contributions needs a vanilla RNN, got {type(layer).__name__}")
    T = x.shape[1]
    copies = [layer.weight_hh_l0.detach().clone().requires_grad_() for _ in range(T)]
    x_proj = F.linear(x, layer.weight_ih_l0, layer.bias_ih_l0)  # (B, T, H)
    h = x.new_zeros(x.shape[0], layer.hidden_size)  # h_0: (B, H)
    for t in range(T):
        h = rnn_step(x_proj[:, t], h, copies[t], layer.bias_hh_l0, layer.nonlinearity)
    loss = F.mse_loss(model.out(h).squeeze(-1), y)
    return torch.stack(torch.autograd.grad(loss, copies))  # (T, H, H)


def marked_value_gain(model, T, n=4000, seed=10_000):
    """How much of a marked value reaches the prediction, by the marker's position:

        gain[p] = mean of  d prediction / d value_p  over the sequences whose marker sits at p

    1 at every p for a model that computes X1 + X2; 0 where the model forgot. The first
    marker sits at p < T/2, the second at p >= T/2; its lag to the read-out is T - 1 - p.
    -> (T,) float
    """
    x, _, _ = _test_set(T, n, seed)
    x = x.clone().requires_grad_()
    was_training = model.training
    model.eval()
    model(x).sum().backward()  # row b's prediction depends on row b's inputs only
    model.train(was_training)
    grad = x.grad[:, :, 0]  # (n, T): d prediction / d value at each step
    marked = x[:, :, 1].detach() > 0  # (n, T)
    return (grad * marked).sum(0) / marked.sum(0).clamp_min(1)  # (T,)
