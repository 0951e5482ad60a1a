"""Checks for chapter 1, "Sequences and recurrent networks"."""

from __future__ import annotations

from ..rnn_gradients import jacobian_norms
from ._compare import within
from ._engine import Answer, Check, Mistake, Prediction
from ._forbid import AUTOGRAD, Forbidden


# --------------------------------------------------------------------------------------
# unrolling the vanilla RNN
# --------------------------------------------------------------------------------------
check_rnn_forward = Check(
    "check_rnn_forward",
    "fn(x (B, T, I), h0 (B, H), W_ih, W_hh, b_ih, b_hh) -> "
    "(outputs (B, T, H), h_T (B, H)): a tanh RNN unrolled over time",
    params=("x", "h0", "W_ih", "W_hh", "b_ih", "b_hh"),
    outputs=("outputs", "h_T"),
    mistakes=[
        Mistake("every step used h0: feed the new state back in (h = ... inside the loop, and "
                "use that h at the next step)."),
        Mistake("the outputs are shifted by one step: store h AFTER updating it (h_1..h_T, not "
                "h_0..h_{T-1})."),
        Mistake("outputs are (T, B, H): stack the states along dim=1 to get (B, T, H) (batch "
                "first)."),
        Mistake("return a pair: (the outputs of every step (B, T, H), the final state (B, H))."),
        Mistake("the outputs are right but the final state is not: return the last h, h_T."),
    ],
    hints=["Loop over the time steps t = 0 .. T-1 with a running state h, starting from h0.",
           "At each step the new state mixes the input x[:, t] and the previous state through "
           "their weight matrices and biases, then tanh; write x_t @ W_ih.T for row vectors.",
           "Collect the new states in a list and stack them along dim=1; return them with the "
           "last state."],
    forbidden=(Forbidden("course_lib.rnn.RNN"), Forbidden("course_lib.rnn.RNNCell"),
               Forbidden("course_lib.rnn.rnn_step"), Forbidden("torch.nn.RNN"),
               Forbidden("torch.nn.RNNCell"), Forbidden("torch.rnn_tanh"),
               Forbidden("torch.rnn_tanh_cell")),
)


# --------------------------------------------------------------------------------------
# the BPTT Jacobian dh_T/dh_0
# --------------------------------------------------------------------------------------
check_bptt_jacobian = Check(
    "check_bptt_jacobian",
    "fn(W_hh (H, H), hs (T, H) = h_1..h_T) -> dh_T/dh_0 (H, H) of a tanh RNN",
    params=("W_hh", "hs"),
    mistakes=[
        Mistake("the result is transposed: row i of dh_T/dh_0 is the gradient of h_T[i]."),
        Mistake("the factors are multiplied in the wrong order: the newest step goes on the "
                "left, J = D_t W_hh J."),
        Mistake("diag(tanh') must multiply on the LEFT of W_hh: h_t = tanh(a_t) with a_t = "
                "W_hh h_{t-1} + ..., so dh_t/dh_{t-1} = diag(1 - h_t**2) W_hh."),
        Mistake("the tanh derivative is missing: each step contributes diag(1 - h_t**2) too."),
    ],
    hints=["By the chain rule dh_T/dh_0 is a product of T one-step Jacobians dh_t/dh_{t-1}.",
           "One step: h_t = tanh(a_t) with a_t = W_hh h_{t-1} + ...; differentiate the tanh "
           "(written with h_t itself) and the linear map, and mind which factor comes first.",
           "Start from the identity and multiply one step's Jacobian in per t; the newest step "
           "ends up on the left."],
    forbidden=(Forbidden("torch.autograd.functional.jacobian"), *AUTOGRAD),
)


# --------------------------------------------------------------------------------------
# gradient clipping
# --------------------------------------------------------------------------------------
check_clip_grad_norm = Check(
    "check_clip_grad_norm",
    "fn(grads (tensors), max_norm) -> the tensors rescaled so that their "
    "global L2 norm is at most max_norm",
    params=("grads", "max_norm"),
    mistakes=[
        Mistake("each tensor was clipped on its own: clip by the GLOBAL norm of all of them "
                "together, so the direction of the whole gradient is kept."),
        Mistake("the values were clamped one by one: rescale the whole gradient instead (that "
                "keeps its direction)."),
        Mistake("a small gradient was scaled UP to max_norm: clipping only ever shrinks "
                "(scale = min(1, max_norm / norm))."),
    ],
    hints=["Compute ONE norm for all the tensors together: the square root of the sum of every "
           "squared entry.",
           "Rescale every tensor by the same factor, and only when that norm exceeds max_norm."],
    forbidden=(Forbidden("torch.nn.utils.clip_grad_norm_"),
               Forbidden("torch.nn.utils.get_total_norm"),
               Forbidden("torch.nn.utils.clip_grads_with_norm_")),
)


# --------------------------------------------------------------------------------------
# cosine similarity
# --------------------------------------------------------------------------------------
check_cosine_similarity = Check(
    "check_cosine_similarity",
    "fn(a (N, d), b (M, d)) -> (N, M): cos(a_i, b_j) for every pair of rows",
    params=("a", "b"),
    mistakes=[
        Mistake("these are dot products: divide by the lengths ||a_i|| ||b_j||."),
        Mistake("the result is (M, N): rows index a, columns index b."),
        Mistake("the norms were taken over dim=0 (columns): normalise each ROW (dim=-1)."),
    ],
    hints=["cos(u, v) is the dot product of u and v divided by both lengths.",
           "Normalise every row of a and of b to length 1 first (norm over the last dim, "
           "keepdim=True); then one matrix product gives every pair."],
    forbidden=(Forbidden("torch.nn.functional.cosine_similarity"),
               Forbidden("torch.nn.CosineSimilarity"),
               Forbidden("course_lib.attention.cosine_score")),
)


# --------------------------------------------------------------------------------------
# backpropagation through time by hand: dL/dW_hh as a sum over the steps
# --------------------------------------------------------------------------------------
check_bptt_weight_grad = Check(
    "check_bptt_weight_grad",
    "fn(x (B, T, I), h0 (B, H), W_ih, W_hh, b_ih, b_hh, w_out (H,), "
    "b_out, y (B,)) -> dL/dW_hh (H, H) for the tanh RNN read out from h_T, "
    "L = mean((h_T . w_out + b_out - y)^2), by hand (no autograd)",
    params=("x", "h0", "W_ih", "W_hh", "b_ih", "b_hh", "w_out", "b_out", "y"),
    mistakes=[
        Mistake("the result is transposed: entry (i, j) is dL/dW_hh[i, j], and W_hh[i, j] "
                "carries h_{t-1}[j] into unit i."),
        Mistake("only the last step's term: W_hh is used at EVERY step, so dL/dW_hh is a sum "
                "of T terms, one per step (this is truncation after one step)."),
        Mistake("tanh' is missing: on its way back, each step multiplies the gradient by "
                "1 - h_t**2."),
        Mistake("step t's term pairs the error with h_t; W_hh multiplies h_{t-1} at step t, so "
                "pair it with h_{t-1}."),
        Mistake("off by a factor of 2: the derivative of the squared error (e)^2 is 2e."),
    ],
    hints=["Run the forward pass and keep every state h_0 .. h_T. The loss depends on W_hh "
           "through each of the T steps: the gradient is a sum of one term per step.",
           "Go backwards from t = T, carrying the gradient with respect to h_t. At step t, "
           "pass it through tanh' (written with h_t) to get the gradient of the pre-activation "
           "a_t; the term of step t is an outer product of that with the state W_hh multiplied.",
           "Before moving to step t - 1, carry the gradient of a_t back to h_{t-1} through "
           "W_hh. Mind the batch: the mean over B puts 2 (y_hat - y) / B on each example."],
    forbidden=AUTOGRAD,
)


# --------------------------------------------------------------------------------------
# the adding problem of 1997: its one-value baseline
# --------------------------------------------------------------------------------------
check_adding_1997_baseline = Answer(
    "check_adding_1997_baseline",
    "the MSE of a model that remembers one of the two marked values "
    "exactly (and predicts the best constant for the other) on the exercise's setting of "
    "Hochreiter & Schmidhuber's 1997 adding problem: values in U[lo, hi], target offset + "
    "(X1 + X2) / divisor (variant_params(\"ex-adding-1997\"); the book's page: U[-1, 1], "
    "0.5 + (X1 + X2) / 4)",
    quantity="the one-value baseline of the exercise's adding problem (an MSE)",
    tolerance=within(rel=0.02),
    mistakes=[
        Mistake("1/12 is the one-value baseline of this page's adding problem (values in U[0, 1], "
                "target X1 + X2); the exercise's target is scaled and its values spread "
                "differently."),
        Mistake("that is the MSE of remembering nothing (the variance of the whole target); "
                "remembering one value removes that value's share."),
        Mistake("the variance of U[lo, hi] is (hi - lo)^2 / 12; it is 1/12 only when the range "
                "is 1 wide."),
        Mistake("the target's scale is missing: X2 / divisor has 1 / divisor^2 of the variance "
                "of X2."),
    ],
    hints=["The best prediction of a value you do not know is its mean, and the MSE it costs is "
           "its variance.",
           "If X1 is remembered exactly, the error left is the part of the target that X2 "
           "contributes. Var(a X) = a^2 Var(X), and Var(U[lo, hi]) = (hi - lo)^2 / 12."],
)


# --------------------------------------------------------------------------------------
# predict, then measure: the gain at which the tanh RNN's Jacobian stops vanishing
# --------------------------------------------------------------------------------------
def critical_gain(nonlinearity="tanh", t=100, lo=1.0, hi=2.5, tol=1e-3):
    """The smallest gain of W_hh (a scaled random orthogonal matrix) at which the measured
    ||dh_t/dh_0|| (course_lib.rnn_gradients.jacobian_norms) reaches 1, by bisection."""
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if float(jacobian_norms(mid, nonlinearity)[t]) >= 1 else (mid, hi)
    return hi


check_critical_gain_prediction = Prediction(
    "check_critical_gain_prediction", "your prediction of the smallest gain of W_hh at which the "
    "tanh RNN's ||dh_100/dh_0|| reaches 1, against the measurement",
    quantity="the gain at which the tanh RNN's Jacobian norm after 100 steps reaches 1",
    tolerance=within(abs=0.15), example=1.53,
    explanation=("with tanh every step also multiplies by diag(1 - h_t^2), which is below 1, "
                 "and the larger the gain, the larger the pre-activations and the flatter tanh "
                 "gets. So the gain has to exceed 1 by a wide margin before the product stops "
                 "shrinking; then it grows quickly (the explorer above shows how fast)."),
    mistakes=[
        Mistake("1 is the answer of the linear network with an orthogonal W_hh (its Jacobian "
                "is exactly gain^t); tanh's derivative shrinks every step further.", lambda m: 1.0),
        Mistake("saturation does not hold the product down for ever: past a moderate gain it "
                "grows exponentially, so the crossing comes well before a gain of 3.",
                lambda m: 3.0),
    ],
    hints=["Start from the linear network, whose answer you know, then ask in which direction "
           "each factor 1 - h_t^2 pushes it.",
           "The tanh panel of the first figure stays below 1 at t = 100 for every gain it plots, "
           "even the largest: the critical gain is larger. The explorer reaches larger gains."],
)
