"""Checks for the multi-part assignments (``assignments/`` in the course's repository).

Each assignment builds a model from parts checked by the chapters' records (``check_gru_cell``,
``check_decoder_layer``, ``check_kv_cache_step``, ...), trains it, and measures it. The records
here are what only the assignments need: the goals a trained model must reach (each bar well
below what a correct build reaches on every seed tried, so that it holds on any CPU), the
predictions made before training, and a check of cached generation.
"""

from __future__ import annotations

from ._compare import within
from ._engine import Goal, Mistake, Prediction

# --------------------------------------------------------------------------------------
# Assignment 1: a sequence-to-sequence model with attention, from its parts
# --------------------------------------------------------------------------------------
check_dates_seq2seq_exact_match = Goal(
    "check_dates_seq2seq_exact_match",
    "the held-out exact match of the encoder-decoder built from your parts after 100 steps: at "
    "least 0.6 (a correct build reached 0.81 to 0.87 over five seeds)",
    quantity="the held-out exact match", at_least=0.6,
    mistakes=[
        Mistake("the loss is computed against tgt_in instead of tgt_out (the model then learns to "
                "copy its input)"),
        Mistake("the optimiser is created inside the loop (Adam's moments restart every step)"),
        Mistake("zero_grad is missing, so the gradients of every step add up"),
    ],
    hints=["Print the loss every 20 steps: it should fall below 0.3 well before step 100.",
           "If every part passed its check, the training loop is what is left: compare it line by "
           "line with the statement."],
)

check_exact_match_prediction = Prediction(
    "check_exact_match_prediction",
    "your prediction of the held-out exact match after 100 steps, against the measurement",
    quantity="the held-out exact match after 100 steps", tolerance=within(abs=0.15),
    example=0.84,
    explanation=("100 steps of batches of 64 are about two passes over the 3000 training dates, "
                 "and with attention each output character needs to find only one or two source "
                 "characters: the model writes most dates exactly right (0.81 to 0.87 over five "
                 "seeds). The mistakes left are mostly one wrong digit of the day or the month, "
                 "which the exact match counts as a whole date wrong; the per-character accuracy "
                 "is far higher. Chapter 4 trains larger models longer and reaches 0.99."),
    mistakes=[
        Mistake("an exact match counts a date right only if all 10 characters are; but attention "
                "makes each character easy, so after two passes most dates are whole.",
                lambda measured: 0.1),
        Mistake("two passes over the data do not make it perfect: the rarer days and months are "
                "still confused.", lambda measured: 1.0),
    ],
)
