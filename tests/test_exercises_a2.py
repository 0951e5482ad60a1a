"""Assignment 2 (a Transformer from a blank page, reading numbers in words): what the generic
record tests (test_exercises_records.py) do not cover.

* the task: the held-out numbers never reach training, the words read back to their number, and
  the data moves with the variant;
* the goal measured from a trained reference on three seeds (the spread printed), on the visible
  and on the grader's hidden held-out sets, well above the bar; a typed number, an untrained model
  and a decoder that reads the words without the model all fail;
* refusal by class, one representative of each: a course_lib module's function, a subclass of a
  course class, a torch module class, an aten operator reached through torch.ops or torch._C, the
  label-smoothing route of F.cross_entropy, torch's schedulers, course_lib's decoders, and the
  course's Transformer inside the goal's measurement;
* the notebook's exercises follow the conventions (labels, stars, hints, checks).
"""

import statistics
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib.exercises import (
    ExerciseFailure,
    a2,
    check_a2_attention,
    check_a2_encoder_layer,
    check_a2_exact_match,
    check_a2_greedy_decode,
    check_a2_lr_schedule,
    check_a2_masks,
    check_a2_model,
    check_a2_smoothed_loss,
    check_a2_train_step,
)
from course_lib.exercises._variant import GOAL_OFFSET
from coursekit.grading import hidden_cases
from coursekit.grading.checks import a2 as ref
from coursekit.grading.checks import a2_model as ref_model
from coursekit.grading.checks import a2_train as ref_train

torch.set_num_threads(1)
NOTEBOOK = Path(__file__).resolve().parents[1] / "assignments" / "a2_transformer_from_blank.ipynb"
BAR = check_a2_exact_match.at_least


# --------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------
def _value(words: str) -> int:
    """Read the words back (independently of number_words)."""
    small = {w: i for i, w in enumerate(a2.ONES)} | {w: 10 * i for i, w in enumerate(a2.TENS) if w}
    total = part = 0
    for w in words.split():
        if w == "thousand":
            total, part = (total + part) * 1000, 0
        elif w == "hundred":
            part *= 100
        elif w != "and":
            part += small[w]
    return total + part


def test_the_words_read_back_to_their_number_and_the_examples_of_the_statement():
    assert " ".join(a2.number_words(12004)) == "twelve thousand and four"
    assert " ".join(a2.number_words(312)) == "three hundred and twelve"
    assert " ".join(a2.number_words(700017)) == "seven hundred thousand and seventeen"
    for n in [0, 7, 19, 20, 99, 100, 101, 999, 1000, 1001, 1100, 21005, 5021, 100000, 999999]:
        assert _value(" ".join(a2.number_words(n))) == n
    for words, digits in a2.make_pairs(2000, seed=3):
        assert _value(words) == int(digits)
    with pytest.raises(ValueError, match="n must be"):
        a2.number_words(10**6)


def test_held_out_numbers_never_reach_training_and_the_data_moves_with_the_seed():
    train = {int(d) for _, d in a2.make_pairs(20000, seed=1)}
    test = {int(d) for _, d in a2.make_pairs(2000, seed=2, split="test")}
    assert not {n for n in train & test if n >= 100}
    assert all(n < 100 or a2.is_held_out(n) for n in test)
    share = sum(map(a2.is_held_out, range(100, 10**6))) / (10**6 - 100)
    assert 0.19 < share < 0.21
    assert a2.make_pairs(50, seed=1) == a2.make_pairs(50, seed=1) != a2.make_pairs(50, seed=2)


# --------------------------------------------------------------------------------------
# The goal, measured from a trained reference
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained():
    return [ref_train.trained_reference(seed) for seed in (0, 1, 2)]


@pytest.mark.slow
def test_the_goal_holds_well_above_its_bar_on_three_seeds_visible_and_hidden(trained, capsys):
    measured = {}
    for seed, obj in enumerate(trained):
        for held_out in (GOAL_OFFSET, GOAL_OFFSET + 1, 12345):
            measured[seed, held_out] = a2.measure_exact_match(obj, held_out)
    values = list(measured.values())
    with capsys.disabled():
        print(
            f"\ncheck_a2_exact_match (bar {BAR}): reference, 3 training seeds x 3 held-out seeds: "
            f"{min(values):.3f} to {max(values):.3f}, mean {statistics.mean(values):.3f}"
        )
    assert min(values) >= BAR + 0.1, measured
    for obj in trained:
        assert check_a2_exact_match(obj)
        with hidden_cases():
            assert check_a2_exact_match(obj)


@pytest.mark.slow
def test_a_typed_number_an_untrained_model_and_a_model_free_decoder_fail(trained):
    for typed in (0.99, 1, torch.tensor(0.99), "0.99"):
        with pytest.raises(ExerciseFailure, match="got the number"):
            check_a2_exact_match(typed)
    with pytest.raises(ExerciseFailure, match="the goal is at least"):
        check_a2_exact_match((ref_train.reference_model().eval(), ref_train.greedy_decode))

    def reads_the_words(model, src, max_len, bos_id, eos_id):
        """The right digits without the model: Python reads the words."""
        rows = []
        for row in src.tolist():
            words = " ".join(a2.SRC_VOCAB.itos[i] for i in row if i != a2.PAD_ID)
            ids = a2.TGT_VOCAB.encode(str(_value(words)), eos=True)
            rows.append(ids + [eos_id] * (max_len - len(ids)))
        return torch.tensor(rows)

    model, _ = trained[0]
    with pytest.raises(ExerciseFailure, match="must come from the model"):
        check_a2_exact_match((model, reads_the_words))
    with pytest.raises(ExerciseFailure, match=r"pass \(model, greedy_decode\)"):
        check_a2_exact_match(model)


def test_the_course_transformer_is_refused_inside_the_goal():
    from course_lib.transformer import Transformer, TransformerConfig

    config = TransformerConfig(
        len(a2.SRC_VOCAB),
        len(a2.TGT_VOCAB),
        d_model=16,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        d_ff=32,
        max_len=32,
    )
    with pytest.raises(ExerciseFailure, match="called course_lib.transformer"):
        check_a2_exact_match((Transformer(config), ref_train.greedy_decode))


# --------------------------------------------------------------------------------------
# Refusal by class: one representative of each
# --------------------------------------------------------------------------------------
def test_a_course_function_inside_the_learners_module_is_refused():
    class ByCourseFunction(ref._Attention):
        def forward(self, query, key_value, mask=None):
            from course_lib.attention import scaled_dot_product_attention

            q, k, v = (
                self.split(w(x)) for w, x in ((self.w_q, query), (self.w_k, key_value), (self.w_v, key_value))
            )
            out, weights = scaled_dot_product_attention(q, k, v, mask)
            B, _, T, _ = out.shape
            return self.w_o(out.transpose(1, 2).reshape(B, T, -1)), weights

    with pytest.raises(ExerciseFailure, match="called course_lib.attention"):
        check_a2_attention(ByCourseFunction)


def test_a_subclass_of_a_course_layer_is_refused():
    from course_lib.transformer import EncoderLayer

    class Mine(EncoderLayer):  # the course's pre-LN layer, renamed to the statement's parts
        def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
            super().__init__(d_model, num_heads, d_ff, dropout, norm_first=True)

    with pytest.raises(ExerciseFailure, match="called course_lib.transformer"):
        check_a2_encoder_layer(Mine)


def test_torch_module_classes_are_refused():
    with pytest.raises(ExerciseFailure, match="called torch.nn.MultiheadAttention"):
        check_a2_attention(ref._TorchAttention)
    with pytest.raises(ExerciseFailure, match="called torch.nn.TransformerEncoderLayer"):
        check_a2_encoder_layer(ref_model.torch_layer_class(decoder=False))
    with pytest.raises(ExerciseFailure, match="called torch.nn.Transformer"):
        check_a2_model(ref_model._torch_model())

    def by_generate_square_subsequent_mask(src, tgt_in, pad_id):
        future = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1]) < 0
        return (src != pad_id)[:, None, None, :], ~future & (tgt_in != pad_id)[:, None, None, :]

    with pytest.raises(ExerciseFailure, match="called torch.nn.Transformer"):
        check_a2_masks(by_generate_square_subsequent_mask)


def test_aten_operators_are_refused_however_reached():
    with pytest.raises(ExerciseFailure, match="scaled dot-product attention"):
        check_a2_attention(ref._AtenAttention)  # torch.ops.aten._..._math
    with pytest.raises(ExerciseFailure, match="called torch.nn.functional.scaled_dot_product"):
        check_a2_attention(ref._FusedAttention)
    with pytest.raises(ExerciseFailure, match="aten::nll_loss_forward"):
        check_a2_smoothed_loss(ref_train._loss_by_cross_entropy)  # torch._C._nn.cross_entropy_loss

    def by_label_smoothing(logits, tgt_out, pad_id, eps):
        V = logits.shape[-1]
        return F.cross_entropy(
            logits.flatten(0, 1), tgt_out.flatten(), ignore_index=pad_id, label_smoothing=eps * V / (V - 2)
        )

    with pytest.raises(ExerciseFailure, match="cross_entropy"):
        check_a2_smoothed_loss(by_label_smoothing)


def test_the_loss_in_the_training_step_and_the_schedulers_and_decoders_are_refused():
    with pytest.raises(ExerciseFailure, match="called torch.nn.functional.cross_entropy"):
        check_a2_train_step(ref_train._train_step_by_library)
    with pytest.raises(ExerciseFailure, match="called torch.optim.lr_scheduler"):
        check_a2_lr_schedule(ref_train._lr_by_scheduler)
    with pytest.raises(ExerciseFailure, match="called course_lib.decoding"):
        check_a2_greedy_decode(ref_train._decode_by_library)


def test_a_decoder_that_encodes_at_every_step_or_row_by_row_is_named(capsys):
    def every_step(model, src, max_len, bos_id, eos_id):
        ys = torch.full((src.shape[0], 1), bos_id)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len):
            token = model.decode(ys, model.encode(src), src)[:, -1].argmax(-1).masked_fill(done, eos_id)
            ys, done = torch.cat([ys, token[:, None]], 1), done | (token == eos_id)
            if done.all():
                break
        return ys[:, 1:]

    def row_by_row(model, src, max_len, bos_id, eos_id):
        rows = [
            ref_train.greedy_decode(model, src[i : i + 1], max_len, bos_id, eos_id)[0]
            for i in range(src.shape[0])
        ]
        width = max(len(r) for r in rows)
        return torch.stack([F.pad(r, (0, width - len(r)), value=eos_id) for r in rows])

    with pytest.raises(ExerciseFailure, match="the encoder ran"):
        check_a2_greedy_decode(every_step)
    with pytest.raises(ExerciseFailure, match="encoder ran|decoder ran"):
        check_a2_greedy_decode(row_by_row)


# --------------------------------------------------------------------------------------
# The notebook
# --------------------------------------------------------------------------------------
def test_the_notebook_has_its_parts_each_with_a_check_hints_and_a_time():
    from coursekit.release.outline import read_exercises

    nb = nbformat.read(NOTEBOOK, as_version=4)
    exercises = read_exercises(nb)
    assert [e.problems() for e in exercises] == [[]] * len(exercises)
    labels = [e.label for e in exercises]
    assert labels == [
        "a2-positions",
        "a2-attention",
        "a2-masks",
        "a2-encoder-layer",
        "a2-decoder-layer",
        "a2-model",
        "a2-smoothed-loss",
        "a2-lr-schedule",
        "a2-train-step",
        "a2-greedy-decode",
        "a2-train",
        "a2-ablation",
    ]
    checked = {n for e in exercises for n in e.check_names}
    assert {n for n in dir(a2) if n.startswith("check_a2_")} <= checked
    assert sum(e.minutes for e in exercises) == 445 and "445 min" in nb.cells[0].source
    assert sum(len(e.answers) for e in exercises) == 2  # tying, ablation
    assert "variant_seed()" in "".join(c.source for c in nb.cells if c.cell_type == "code")
