"""Positional encodings: chapter 8's extrapolation experiment as a committed sweep.

Each scheme of `course_lib.positional_experiments.POSITION_SCHEMES` learns the previous-token
task on sequences of 16 tokens and is tested on sequences of 48, 3 seeds; the chapter trains the
same models live (the same function, the same seeds) and checks that its numbers fall inside.
"""

import torch
from common import SweepSpec

from course_lib.positional_experiments import POSITION_SCHEMES, TRAIN_LEN, train_previous_token

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
