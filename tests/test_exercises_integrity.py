"""Issue 36: the checks cannot be passed without doing the work.

* refusal by class: every automatic-differentiation route torch has, every torch route to a
  forbidden loss (another loss that ignores an index, the C and aten operators beneath), a
  subclass or wrapper of a course class the part asks for, a whole module;
* Answers: the learner's package holds salted hashes of the expected numbers, never the
  numbers, and a number within the tolerance still passes;
* goals are measured from the learner's object (tests/test_exercises_records.py runs every Goal).
"""

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.exercises import (
    ExerciseFailure,
    check_attention_grad_q,
    check_label_smoothed_loss,
    check_sequence_loss,
)
from course_lib.exercises._compare import within
from course_lib.exercises._data import read
from course_lib.exercises._forbid import Forbidden, guard
from coursekit.grading import REFERENCES

torch.set_num_threads(1)


def _attention_sum(q, k, v, grad_out):
    return (torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v * grad_out).sum()


def by_jacfwd(q, k, v, grad_out):
    return torch.func.jacfwd(lambda q_: _attention_sum(q_, k, v, grad_out))(q)


def by_func_grad(q, k, v, grad_out):
    return torch.func.grad(lambda q_: _attention_sum(q_, k, v, grad_out))(q)


def by_forward_mode(q, k, v, grad_out):
    import torch.autograd.forward_ad as fw

    out = torch.zeros_like(q)
    with fw.dual_level():
        for i in range(q.numel()):
            tangent = torch.zeros(q.numel())
            tangent[i] = 1
            dual = fw.make_dual(q, tangent.view_as(q))
            out.view(-1)[i] = fw.unpack_dual(_attention_sum(dual, k, v, grad_out)).tangent
    return out


def by_the_engine(q, k, v, grad_out):
    from torch.autograd import Variable

    with torch.autograd.grad_mode.set_grad_enabled(True):
        q = q.clone().requires_grad_()
        total = _attention_sum(q, k, v, grad_out)
        Variable._execution_engine.run_backward((total,), (torch.ones(()),), False, False, (), True, True)
        return q.grad


def by_autograd_functional(q, k, v, grad_out):
    return torch.autograd.functional.jacobian(lambda q_: _attention_sum(q_, k, v, grad_out), q)


@pytest.mark.parametrize(
    "route", [by_jacfwd, by_func_grad, by_forward_mode, by_the_engine, by_autograd_functional]
)
def test_every_automatic_differentiation_route_is_refused(route):
    with pytest.raises(ExerciseFailure, match="puts off limits") as info:
        check_attention_grad_q(route)
    print(route.__name__, "->", str(info.value).splitlines()[0])
    assert torch.is_grad_enabled()


def test_the_engine_is_refused_even_when_grad_mode_is_switched_on_by_its_c_function():
    def sly(q, k, v, grad_out):
        from torch.autograd import Variable

        torch._C._set_grad_enabled(True)
        try:
            q = q.clone().requires_grad_()
            total = _attention_sum(q, k, v, grad_out)
            Variable._execution_engine.run_backward((total,), (torch.ones(()),), False, False, (), True, True)
            return q.grad
        finally:
            torch._C._set_grad_enabled(False)

    with pytest.raises(ExerciseFailure, match="puts off limits"):
        check_attention_grad_q(sly)


def _flat(logits, target):
    return logits.flatten(0, 1), target.flatten()


LOSS_ROUTES = {
    "F.nll_loss with ignore_index": lambda lg, t, pad: F.nll_loss(
        F.log_softmax(_flat(lg, t)[0], -1), _flat(lg, t)[1], ignore_index=pad
    ),
    "pads remapped to -100, F.cross_entropy's default": lambda lg, t, pad: F.cross_entropy(
        _flat(lg, t)[0], _flat(lg, t)[1].masked_fill(_flat(lg, t)[1] == pad, -100)
    ),
    "torch._C._nn.cross_entropy_loss": lambda lg, t, pad: torch._C._nn.cross_entropy_loss(
        *_flat(lg, t), None, 1, pad, 0.0
    ),
    "torch.ops.aten.nll_loss_nd": lambda lg, t, pad: torch.ops.aten.nll_loss_nd(
        _flat(lg, t)[0].log_softmax(-1), _flat(lg, t)[1], None, 1, pad
    ),
    "nn.NLLLoss module": lambda lg, t, pad: torch.nn.NLLLoss(ignore_index=pad)(
        _flat(lg, t)[0].log_softmax(-1), _flat(lg, t)[1]
    ),
}


@pytest.mark.parametrize("route", sorted(LOSS_ROUTES))
def test_every_loss_that_ignores_an_index_is_refused(route):
    with pytest.raises(ExerciseFailure, match="puts off limits"):
        check_sequence_loss(LOSS_ROUTES[route])


def test_the_per_position_cross_entropy_the_statement_allows_still_passes(capsys):
    def by_hand(logits, target, pad_id):
        losses = F.cross_entropy(*_flat(logits, target), reduction="none")  # (B*T,)
        real = target.flatten() != pad_id
        return (losses * real).sum() / real.sum()

    assert check_sequence_loss(by_hand)


@pytest.mark.parametrize("route", ["torch._C._nn", "torch.ops.aten"])
def test_label_smoothing_through_the_operator_beneath_is_refused(route):
    def beneath(logits, target, eps, pad_id):
        op = torch._C._nn.cross_entropy_loss if route == "torch._C._nn" else torch.ops.aten.cross_entropy_loss
        return op(logits, target, None, 1, pad_id, eps)

    with pytest.raises(ExerciseFailure, match="cross_entropy_loss operator"):
        check_label_smoothed_loss(beneath)


def test_a_torch_c_function_is_refused_by_its_name_however_it_is_reached():
    x, h = torch.randn(2, 3), torch.randn(2, 4)
    w_ih, w_hh = torch.randn(12, 3), torch.randn(12, 4)
    for route in (torch.gru_cell, torch._VF.gru_cell, torch.ops.aten.gru_cell):
        with guard([Forbidden(aten="gru_cell")]) as refused, pytest.raises(RuntimeError, match="off limits"):
            route(x, h, w_ih, w_hh)
        assert refused, route


def test_a_class_target_refuses_subclasses_and_wrappers_and_a_module_target_all_it_defines():
    from course_lib.multihead import MultiHeadAttention

    class Mine(MultiHeadAttention):  # a subclass: its construction runs the course's __init__
        pass

    class Wrapper(torch.nn.Module):  # a wrapper: its forward calls the course's forward
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x, x, x)

    inner = MultiHeadAttention(8, 2)
    x = torch.randn(1, 3, 8)
    for target in ("course_lib.multihead.MultiHeadAttention", "course_lib.multihead"):
        with guard([Forbidden(target)]) as refused, pytest.raises(RuntimeError, match="off limits"):
            Mine(8, 2)
        assert refused
        with guard([Forbidden(target)]) as refused, pytest.raises(RuntimeError, match="off limits"):
            Wrapper(inner)(x)
        assert refused
    with guard([Forbidden("course_lib.multihead")]) as refused:
        from course_lib import multihead

        with pytest.raises(RuntimeError, match="off limits"):
            multihead.split_heads(torch.randn(1, 3, 8), 2)
    assert refused


@pytest.mark.parametrize("name", ["check_adding_1997_baseline", "check_reach_bias"])
def test_an_answer_is_stored_as_salted_hashes_never_as_its_number(name):
    from course_lib.exercises import REGISTRY

    data, record = read(name), REGISTRY[name]
    expected = float(REFERENCES[name].value())
    flat = repr(data)
    assert f"{expected:g}" not in flat and repr(expected) not in flat, "the number is in the data"
    assert all(isinstance(h, str) and len(h) == 20 for h in data["expected"])
    tol = record.tolerance
    inside = expected + (tol.abs if tol.abs else abs(expected) * (tol.rel or 0.01)) * 0.9
    for value in (expected, inside):
        assert record(value), value
    far = expected + (tol.abs if tol.abs else abs(expected) * (tol.rel or 0.5)) * 1.2
    with pytest.raises(ExerciseFailure):
        record(far)


def test_a_tolerance_grid_accepts_within_and_refuses_beyond_an_eighth_more():
    for tol, target in ((within(abs=0.2), 1.75), (within(rel=0.01), 0.0208333), (within(factor=2), 15.1)):
        cells = set(tol.cells(target))
        for value in torch.linspace(target * 0.3, target * 3, 2001).tolist():
            off = abs(value - target) / (tol.abs or 1)
            if tol.accepts(value, target):
                assert tol.cell(value) in cells, (tol, value)
            elif tol.abs is not None and off > 1.125:
                assert tol.cell(value) not in cells, (tol, value)


def test_a_compiled_library_named_as_a_module_has_its_objects_methods_refused():
    """The Hugging Face tokenizers library is Rust: its methods are C calls on its objects."""
    from tokenizers import Tokenizer, models, trainers

    tokenizer, trainer = Tokenizer(models.BPE()), trainers.BpeTrainer(vocab_size=270)
    with pytest.raises(RuntimeError, match="off limits"), guard([Forbidden("tokenizers")]) as refused:
        tokenizer.train_from_iterator(["low lower lowest"] * 4, trainer)
    assert refused
