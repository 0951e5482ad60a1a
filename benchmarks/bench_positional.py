"""Positional encodings: chapter 8's experiments as committed sweeps.

    positional_extrapolation   each scheme of POSITION_SCHEMES learns the previous-token task on
                               sequences of 16 tokens, tested on sequences of 48, 3 seeds
    positional_tuned           the same, every scheme with each value of its own knob (SETTINGS:
                               a base, the ALiBi slopes) and three learning rates; the setting is
                               chosen on a validation set, the claim made on the test set
    positional_tuned_edges     one more value of each knob, beyond the end of its grid
    key_window                 where each model of positional_extrapolation attends beyond the
                               training length, and an intervention: the same trained models with
                               the keys more than 15 positions back hidden
    position_from_mask         no positional code: does a causal mask alone tell positions apart?

The chapter runs the same functions (course_lib.pages.positional_experiments) with seed 0 and checks
that its runs reproduce the sweeps' (check_live).
"""

import dataclasses

import torch
from common import SweepSpec

from course_lib.pages.positional_experiments import (
    POSITION_SCHEMES,
    SETTINGS,
    TEST_LEN,
    TRAIN_LEN,
    accuracy_per_position,
    offset_mask,
    previous_token,
    train_previous_token,
    train_scheme,
    train_where_am_i,
)

RANGES = {
    "in_range": (0, TRAIN_LEN),
    "just_past": (TRAIN_LEN, TRAIN_LEN + 4),
    "far_beyond": (TRAIN_LEN + 4, None),
}


def extrapolation_run(point, seed, config):
    """One (scheme, seed): held-out accuracy on positions 0-15 (in range), 16-19 and 20-47."""
    torch.set_num_threads(1)
    _, per_position = train_previous_token(
        point["scheme"], seed, steps=config["steps"], lr=config["lr"], progress=False
    )
    return {name: per_position[a:b].mean().item() for name, (a, b) in RANGES.items()}


SWEEPS = {
    "positional_extrapolation": SweepSpec(
        title="Chapter 8: the previous-token task trained on length 16, tested on length 48, "
        "by position scheme (sinusoidal, learned, RoPE, ALiBi with two sets of slopes)",
        run=extrapolation_run,
        points=[{"scheme": name} for name in POSITION_SCHEMES],
        config={"steps": 400, "lr": 3e-3},
        smoke={"steps": 10},
        margins={"far_beyond": 0.2, "in_range": 0.2, "just_past": 0.05},
        metrics={name: {"unit": "accuracy", "higher_is_better": True} for name in RANGES},
        records=[("far_beyond", "positional_extrapolation/{scheme}")],
        description="Held-out accuracy (500 sequences of 48 tokens) averaged over positions 0-15 "
        "(seen in training), 16-19 and 20-47. Adam 3e-3, 400 steps of 64 sequences.",
    ),
}


# --------------------------------------------------------------------------------------
# positional_tuned: each scheme at each value of its own knob and three learning rates
# --------------------------------------------------------------------------------------
LRS = [1e-3, 3e-3, 1e-2]


def tuned_run(point, seed, config):
    """One (scheme, setting, lr, seed): accuracy on the test set (as positional_extrapolation)
    and on a validation set of 500 other sequences of 48 tokens (seed 4321), by range."""
    torch.set_num_threads(1)
    model, test = train_scheme(
        point["scheme"], point["setting"], seed, steps=config["steps"], lr=point["lr"], progress=False
    )
    x_val, y_val = previous_token(500, TEST_LEN, torch.Generator().manual_seed(4321))
    val = accuracy_per_position(model, x_val, y_val)
    out = {name: test[a:b].mean().item() for name, (a, b) in RANGES.items()}
    out.update({f"val_{name}": val[a:b].mean().item() for name, (a, b) in RANGES.items()})
    return out


# --------------------------------------------------------------------------------------
# key_window: where each model looks beyond the training length, and an intervention
# --------------------------------------------------------------------------------------
FAR = slice(TRAIN_LEN + 4, None)  # positions 20-47


def key_window_run(point, seed, config):
    """The model of positional_extrapolation (same scheme, seed, recipe and test set), on positions
    20-47: accuracy with the causal mask, with only the offsets 0-15 (those seen in training)
    visible, and with the offsets 17-21 and 36-40 hidden; its attention weight on offsets >= 16."""
    torch.set_num_threads(1)
    model, causal = train_previous_token(
        point["scheme"], seed, steps=config["steps"], lr=config["lr"], progress=False
    )
    x, y = previous_token(500, TEST_LEN, torch.Generator().manual_seed(1234))
    window = accuracy_per_position(model, x, y, offset_mask(TEST_LEN, 0, TRAIN_LEN - 1))
    offset = torch.arange(TEST_LEN)[:, None] - torch.arange(TEST_LEN)[None, :]  # (T, T): t - j
    bands = ((offset >= 17) & (offset <= 21)) | ((offset >= 36) & (offset <= 40))
    no_bands = accuracy_per_position(model, x, y, offset_mask(TEST_LEN) & ~bands)
    with torch.no_grad():
        _, weights = model(x, return_weights=True)  # (B, h, T, T)
    untrained = (weights.mean(1)[:, FAR] * (offset[FAR] >= TRAIN_LEN)).sum(-1).mean()  # mean of heads
    return {
        "far_causal": causal[FAR].mean().item(),
        "far_trained_offsets_only": window[FAR].mean().item(),
        "far_bands_hidden": no_bands[FAR].mean().item(),
        "weight_untrained_offsets": untrained.item(),
    }


# --------------------------------------------------------------------------------------
# position_from_mask: no positional code, with and without a causal mask
# --------------------------------------------------------------------------------------
def where_run(point, seed, config):
    """One (causal, seed): held-out accuracy of the predicted position (chance 1/16)."""
    torch.set_num_threads(1)
    _, accuracy = train_where_am_i(
        point["causal"], seed, steps=config["steps"], lr=config["lr"], progress=False
    )
    return {"accuracy": accuracy}


SWEEPS["positional_tuned"] = SweepSpec(
    title="Chapter 8: every position scheme at each value of its own knob (a base, the ALiBi slopes) "
    "and three learning rates, chosen on validation, reported on test",
    run=tuned_run,
    points=[
        {"scheme": scheme, "setting": setting, "lr": lr}
        for scheme, settings in SETTINGS.items()
        for setting in settings
        for lr in LRS
    ],
    config={"steps": 400, "selection": "best mean val_far_beyond over the seeds, per scheme"},
    smoke={"steps": 10},
    margins={"far_beyond": 0.2, "in_range": 0.05},
    metrics={
        name: {"unit": "accuracy", "higher_is_better": True} for r in RANGES for name in (r, f"val_{r}")
    },
    description="Held-out accuracy (test: the 500 sequences of positional_extrapolation; val: 500 "
    "others, seed 4321) on positions 0-15, 16-19 and 20-47. Adam, 400 steps of 64 sequences of 16.",
)

# The best setting of each scheme in positional_tuned lay at an end of its grid; one more value
# beyond that end, for every scheme with a knob, same learning rates and seeds (declared before
# it ran; the chapter chooses over both sweeps together, by the same validation rule).
EDGES = {"sinusoidal": [1e8], "RoPE": [10.0], "ALiBi": [[1.0, 1 / 2]]}

SWEEPS["positional_tuned_edges"] = dataclasses.replace(
    SWEEPS["positional_tuned"],
    title="Chapter 8: positional_tuned extended one value beyond the end of each scheme's grid "
    "(sinusoidal base 1e8, RoPE base 10, ALiBi slopes 1 and 1/2)",
    points=[
        {"scheme": scheme, "setting": setting, "lr": lr}
        for scheme, settings in EDGES.items()
        for setting in settings
        for lr in LRS
    ],
    config={"steps": 400, "selection": "with positional_tuned: best mean val_far_beyond over the seeds"},
    description="As positional_tuned (same recipe, test and validation sets), for one more setting "
    "per scheme.",
)

SWEEPS["key_window"] = SweepSpec(
    title="Chapter 8: where each position scheme attends beyond the training length, and the same "
    "models with the untrained offsets hidden",
    run=key_window_run,
    points=[{"scheme": name} for name in POSITION_SCHEMES],
    config={"steps": 400, "lr": 3e-3},
    smoke={"steps": 10},
    margins={"trained_offsets_only_vs_causal": 0.2},
    metrics={
        **{
            m: {"unit": "accuracy", "higher_is_better": True}
            for m in ("far_causal", "far_trained_offsets_only", "far_bands_hidden")
        },
        "weight_untrained_offsets": {"unit": "attention weight", "higher_is_better": False},
    },
    description="The models of positional_extrapolation (same seeds, same test set), on positions "
    "20-47: accuracy with the causal mask, with only offsets 0-15 visible, with offsets 17-21 and "
    "36-40 hidden; the attention weight on offsets >= 16 (mean of the two heads).",
)

SWEEPS["position_from_mask"] = SweepSpec(
    title="Chapter 8: no positional code: the position of each token, found with or without a causal mask",
    run=where_run,
    points=[{"causal": False}, {"causal": True}],
    config={"steps": 400, "lr": 3e-3},
    smoke={"steps": 10},
    margins={"causal_vs_no_mask": 0.5},
    metrics={"accuracy": {"unit": "accuracy", "higher_is_better": True}},
    description="Held-out accuracy (1000 sequences of <bos> + 15 tokens) of the predicted position, "
    "one attention layer without positional code, Adam 3e-3, 400 steps of 64 sequences.",
)
