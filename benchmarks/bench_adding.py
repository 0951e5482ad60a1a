"""The adding problem of chapter 1 (course_lib.adding): sweeps over seeds, too long for the
notebook, committed as data in course_lib/sweeps/ and drawn by book/01_sequences_and_rnns.ipynb
beside its own live run.

    python benchmarks/sweep.py adding_rnn       # vanilla RNN: lags and initialisations
    python benchmarks/sweep.py adding_budget    # the LSTM and truncated BPTT at the same budget

Every model: Adam at learning rate 0.01, gradients clipped to norm 1, batches of 64 fresh
sequences, the same number of steps (course_lib.adding.train_adding); one torch thread.
"""

from common import SweepSpec

from course_lib.adding import adding_mse, remembered_values, train_adding

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


def adding_sized_run(point, seed, config):
    """adding_run with the hidden size taken from the point (cells compared at equal parameters)."""
    return adding_run(point, seed, dict(config, hidden_size=point["hidden_size"]))


# Chapter 2: GRU against LSTM on the adding problem, at equal parameter counts (an LSTM of
# 32 units has 4 * 32 * (2 + 32 + 2) + 33 = 4641 parameters, a GRU of 37 units
# 3 * 37 * (2 + 37 + 2) + 38 = 4589).
SWEEPS["adding_gated"] = SweepSpec(
    title="The adding problem: GRU against LSTM at T = 40 and T = 100 (equal parameters, 2000 steps)",
    run=adding_sized_run,
    points=[
        dict(_point(cell=cell, T=T), hidden_size=hidden)
        for T in (40, 100)
        for cell, hidden in (("lstm", 32), ("gru", 37))
    ],
    config=CONFIG,
    smoke={"steps": 8, "eval_every": 4},
    margins={"mse_gru_vs_lstm_early": 0.1},
    metrics=METRICS,
    records=[("mse", "adding_test_mse/{cell}/T{T}/hidden{hidden_size}")],
    description="LSTM (32 units) and GRU (37 units: about the same number of parameters) on the adding "
    "problem at T = 40 and T = 100, the chapter 1 recipe (Adam 0.01, clipping at 1, 2000 steps of 64 "
    "sequences), one learning rate for both cells. 3 seeds.",
)
