"""The adding problem of chapter 1 (course_lib.adding): sweeps over seeds, too long for the
notebook, committed as data in course_lib/sweeps/ and drawn by book/01_sequences_and_rnns.ipynb
beside its own live run.

    python benchmarks/sweep.py adding_rnn       # vanilla RNN: lags and initialisations
    python benchmarks/sweep.py adding_budget    # the LSTM and truncated BPTT at the same budget
    python benchmarks/sweep.py adding_rnn_wide  # a vanilla RNN with the LSTM's parameter count
    python benchmarks/sweep.py adding_clipping  # SGD on exploding gradients, clipped or not
    python benchmarks/sweep.py adding_gated_bias  # chapter 2: GRU and LSTM, with and without gate bias

Every model: Adam at learning rate 0.01, gradients clipped to norm 1, batches of 64 fresh
sequences, the same number of steps (course_lib.adding.train_adding); one torch thread.
"""

import dataclasses

from common import SweepSpec

from course_lib.adding import adding_mse, remembered_values, train_adding, train_clipping, train_gated_adding

CONFIG = {"steps": 2000, "eval_every": 250, "lr": 1e-2, "hidden_size": 32}
METRICS = {
    "mse": {"unit": "MSE", "higher_is_better": False},
    **{
        f"mse_{s}": {"unit": "MSE", "higher_is_better": False}
        for s in range(CONFIG["eval_every"], CONFIG["steps"] + 1, CONFIG["eval_every"])
    },
    "b1": {"unit": "", "higher_is_better": True},
    "b2": {"unit": "", "higher_is_better": True},
}


def adding_run(point, seed, config):
    """One model: held-out MSE every `eval_every` steps (mse_<step>, 4000 validation sequences),
    the test MSE at the end (mse, 4000 other sequences), and the least-squares weights b1, b2 of
    the prediction on the two marked values (what it remembers)."""
    model, history = train_adding(
        point["cell"],
        point["T"],
        config["steps"],
        seed=seed,
        lr=config["lr"],
        hidden_size=config["hidden_size"],
        init=point["init"],
        truncate=point["truncate"],
        eval_every=config["eval_every"],
    )
    out = {f"mse_{step}": value for step, value in history.evals}
    remembered = remembered_values(model, point["T"])
    out.update(mse=adding_mse(model, point["T"], seed=20_000), b1=remembered["b1"], b2=remembered["b2"])
    return out


def adding_lr_run(point, seed, config):
    """adding_run with the learning rate taken from the point (a learning-rate sweep)."""
    return adding_run(point, seed, dict(config, lr=point["lr"]))


def _point(cell="rnn", T=40, init="default", truncate=None):
    return {"cell": cell, "T": T, "init": init, "truncate": truncate}


SWEEPS = {
    "adding_rnn": SweepSpec(
        title="The adding problem: the vanilla RNN by lag and initialisation (2000 steps)",
        run=adding_run,
        points=[
            _point(T=10),
            _point(T=20),
            _point(T=40),
            _point(T=40, init="orthogonal"),
            _point(T=40, init="identity"),
        ],
        config=CONFIG,
        smoke={"steps": 8, "eval_every": 4},
        margins={"mse_vs_default_rnn": 0.05},
        metrics=METRICS,
        records=[("mse", "adding_test_mse/{cell}/{init}/T{T}")],
        description="Vanilla tanh RNN (32 units) at T = 10, 20, 40 from torch's default "
        "initialisation; at T = 40 also an orthogonal W_hh and the IRNN (ReLU, W_hh = I, "
        "Le, Jaitly & Hinton 2015). 3 seeds, 2000 steps each, one learning rate (0.01).",
    ),
    "adding_budget": SweepSpec(
        title="The adding problem: an LSTM at T = 40, and truncated BPTT at T = 20 (2000 steps)",
        run=adding_run,
        points=[_point(cell="lstm", T=40), _point(T=20, truncate=2), _point(T=20, truncate=5)],
        config=CONFIG,
        smoke={"steps": 8, "eval_every": 4},
        margins={"mse_vs_default_rnn": 0.05, "mse_full_vs_truncated": 0.005, "mse_below_one_value": 0.02},
        metrics=METRICS,
        records=[("mse", "adding_test_mse/{cell}/{init}/T{T}/truncate{truncate}")],
        description="The LSTM (32 units) at T = 40 with the vanilla RNN's budget; the vanilla RNN at "
        "T = 20 with the gradient cut 2 or 5 steps back. 3 seeds, 2000 steps each.",
    ),
}

for _init in ("default", "orthogonal"):
    SWEEPS[f"adding_rnn_lr_{_init}"] = SweepSpec(
        title=f"The adding problem: the vanilla RNN ({_init} init) at T = 40, learning rates 0.001 and 0.003",
        run=adding_lr_run,
        points=[dict(_point(T=40, init=_init), lr=lr) for lr in (1e-3, 3e-3)],
        config=CONFIG,
        smoke={"steps": 8, "eval_every": 4},
        margins={"rnn_over_irnn_ratio": 2.0},
        metrics=METRICS,
        records=[("mse", f"adding_test_mse/rnn/{_init}/T40/lr{{lr}}")],
        description="The vanilla RNN at T = 40 with two more learning rates than adding_rnn's 0.01, "
        "so that its failure at this budget is not a matter of the learning rate. 3 seeds, "
        "2000 steps each.",
    )

BENCHMARKS = []


# Chapter 1: is the LSTM's advantage a matter of parameters? A vanilla RNN of 66 units has
# 66 * (2 + 66 + 2) + 67 = 4687 parameters, the LSTM of 32 units 4 * 32 * (2 + 32 + 2) + 33 = 4641.
def adding_sized_run(point, seed, config):
    """adding_run with the hidden size taken from the point (cells compared at equal parameters)."""
    return adding_run(point, seed, dict(config, hidden_size=point["hidden_size"]))


SWEEPS["adding_rnn_wide"] = dataclasses.replace(
    SWEEPS["adding_rnn"],
    title="The adding problem: a vanilla RNN with the LSTM's parameter count (66 units, T = 40, 2000 steps)",
    run=adding_sized_run,
    points=[dict(_point(T=40), hidden_size=66)],
    records=[("mse", "adding_test_mse/rnn/default/T40/hidden66")],
    description="The vanilla tanh RNN at T = 40 with 66 units (4687 parameters, the LSTM of adding_budget "
    "has 4641), torch's initialisation, chapter 1's recipe (Adam 0.01, clipping at 1, 2000 steps of 64 "
    "sequences). 3 seeds. Margin mse_vs_default_rnn: the LSTM's lead must hold by 0.05 against it too.",
)


def clipping_run(point, seed, config):
    """Chapter 1's clipping experiment (course_lib.adding.train_clipping): SGD on a tanh RNN whose
    W_hh is 2 x an orthogonal matrix, clipped to norm point["clip"] or not clipped (None)."""
    return train_clipping(
        point["clip"], steps=config["steps"], T=config["T"], gain=config["gain"], lr=config["lr"], seed=seed
    )


SWEEPS["adding_clipping"] = SweepSpec(
    title="Gradient clipping: SGD on a tanh RNN with exploding Jacobians (gain 2), clipped or not",
    run=clipping_run,
    points=[{"clip": None}, {"clip": 1.0}],
    config={"steps": 200, "T": 40, "gain": 2.0, "lr": 0.05},
    smoke={"steps": 8},
    metrics={
        "steps_finite": {"unit": "steps", "higher_is_better": True},
        "loss_last50": {"unit": "MSE", "higher_is_better": False},
    },
    records=[("steps_finite", "adding_clipping_steps_finite/clip{clip}")],
    description="A tanh RNN of 32 units whose W_hh is 2 x a random orthogonal matrix, trained on the adding "
    "problem (T = 40, batches of 64) with plain SGD at learning rate 0.05 for 200 steps, the gradient "
    "clipped to norm 1 or not clipped; steps_finite: the steps before the loss became non-finite "
    "(200 if it never did). 3 seeds.",
)


def adding_gated_run(point, seed, config):
    """One gated model of chapter 2 (course_lib.adding.train_gated_adding): adding_run's metrics,
    plus solve_step, the first evaluation step whose held-out MSE is below config["solved_mse"]
    (steps + eval_every when none is: not solved within the budget)."""
    model, history = train_gated_adding(
        point["cell"],
        point["T"],
        config["steps"],
        gate_bias=point["gate_bias"],
        seed=seed,
        lr=config["lr"],
        hidden_size=point["hidden_size"],
        eval_every=config["eval_every"],
    )
    out = {f"mse_{step}": value for step, value in history.evals}
    remembered = remembered_values(model, point["T"])
    out.update(mse=adding_mse(model, point["T"], seed=20_000), b1=remembered["b1"], b2=remembered["b2"])
    every, steps = config["eval_every"], config["steps"]
    solved = [s for s in range(every, steps + 1, every) if out[f"mse_{s}"] < config["solved_mse"]]
    out["solve_step"] = solved[0] if solved else steps + every
    return out


# Chapter 2: GRU against LSTM on the adding problem at equal parameter counts (an LSTM of
# 32 units has 4 * 32 * (2 + 32 + 2) + 33 = 4641 parameters, a GRU of 37 units
# 3 * 37 * (2 + 37 + 2) + 38 = 4589), each with torch's initialisation and with the bias of
# its memory gate at 1 (the LSTM's forget gate, the GRU's update gate).
SWEEPS["adding_gated_bias"] = SweepSpec(
    title="The adding problem: GRU and LSTM at equal parameters, gate bias torch's or 1, T = 40 and 100",
    run=adding_gated_run,
    points=[
        {"cell": cell, "T": T, "hidden_size": hidden, "gate_bias": bias}
        for T in (40, 100)
        for cell, hidden in (("lstm", 32), ("gru", 37))
        for bias in (None, 1.0)
    ],
    config=dict(CONFIG, solved_mse=0.01),
    smoke={"steps": 8, "eval_every": 4},
    margins={"below_one_value": 0.05, "solve_steps": 250, "mse_250": 0.05},
    metrics=dict(METRICS, solve_step={"unit": "steps", "higher_is_better": False}),
    records=[("mse", "adding_test_mse/{cell}/T{T}/hidden{hidden_size}/bias{gate_bias}")],
    description="LSTM (32 units) and GRU (37 units: about the same number of parameters) on the adding "
    "problem at T = 40 and T = 100, each with torch's initialisation (gate_bias None: forget or update "
    "gate near 0.5 at the start) and with the memory gate's bias at 1 (about 0.73), chapter 1's recipe "
    "(Adam 0.01, clipping at 1, 2000 steps of 64 sequences), one learning rate for all. 3 seeds. "
    "solve_step: the first evaluation (every 250 steps) with held-out MSE below 0.01. Margins: "
    "below_one_value, every run ends below 1/12 - 0.05; solve_steps, a difference in solve_step "
    "of at least one evaluation interval, seed by seed; mse_250, a difference in held-out MSE after "
    "250 steps.",
)
