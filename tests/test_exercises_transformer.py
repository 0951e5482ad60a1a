"""The Transformer chapters' checks pass on correct solutions, fail on the stub
(ExerciseNotAttempted) and recognise typical mistakes with an actionable message."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.exercises import (
    ExerciseFailure,
    ExerciseNotAttempted,
    check_bits_per_char,
    check_decoder_layer,
    check_greedy_decode,
    check_kv_cache_step,
    check_shift_right,
    check_temperature_probs,
)
from course_lib.multihead import merge_heads


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise: write your solution here")


# ---- correct answers, written the way a learner would --------------------------------
def good_shift(tgt, bos_id):
    return torch.cat([torch.full((tgt.shape[0], 1), bos_id, dtype=tgt.dtype), tgt[:, :-1]], dim=1)


def good_decoder(layer, x, memory, self_mask=None, memory_mask=None):
    x = layer.norm1(x + layer.self_attn(x, x, x, self_mask)[0])
    x = layer.norm2(x + layer.multihead_attn(x, memory, memory, memory_mask)[0])
    return layer.norm3(x + layer.linear2(torch.relu(layer.linear1(x))))


def good_greedy(model, src, max_len, bos_id, eos_id):
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos_id)
    for _ in range(max_len):
        nxt = model.decode(ys, memory, src)[:, -1].argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], dim=1)
        if (ys == eos_id).any(1).all():
            break
    return ys[:, 1:]


def good_bpc(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item() / math.log(2)


def good_temperature(logits, temperature):
    return torch.softmax(logits / temperature, dim=-1)


def good_cache(attn, x_t, cache):
    q, k, v = attn.qkv(x_t)
    if cache is not None:
        k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
    return attn.c_proj(merge_heads(w @ v)), (k, v)


# ---- typical mistakes ----------------------------------------------------------------
def shift_left(tgt, bos_id):
    return torch.cat([tgt[:, 1:], torch.zeros_like(tgt[:, :1])], dim=1)


def shift_too_long(tgt, bos_id):
    return torch.cat([torch.full((tgt.shape[0], 1), bos_id), tgt], dim=1)


def decoder_cross_from_x(layer, x, memory, self_mask=None, memory_mask=None):
    x = layer.norm1(x + layer.self_attn(x, x, x, self_mask)[0])
    x = layer.norm2(x + layer.multihead_attn(x, x, x)[0])
    return layer.norm3(x + layer.linear2(torch.relu(layer.linear1(x))))


def decoder_pre_ln(layer, x, memory, self_mask=None, memory_mask=None):
    h = layer.norm1(x)
    x = x + layer.self_attn(h, h, h, self_mask)[0]
    x = x + layer.multihead_attn(layer.norm2(x), memory, memory, memory_mask)[0]
    return x + layer.linear2(torch.relu(layer.linear1(layer.norm3(x))))


def decoder_no_residual(layer, x, memory, self_mask=None, memory_mask=None):
    x = layer.norm1(layer.self_attn(x, x, x, self_mask)[0])
    x = layer.norm2(layer.multihead_attn(x, memory, memory, memory_mask)[0])
    return layer.norm3(layer.linear2(torch.relu(layer.linear1(x))))


def decoder_no_masks(layer, x, memory, self_mask=None, memory_mask=None):
    return good_decoder(layer, x, memory)


def greedy_keeps_bos(model, src, max_len, bos_id, eos_id):
    tokens = good_greedy(model, src, max_len, bos_id, eos_id)
    return torch.cat([torch.full((src.shape[0], 1), bos_id), tokens], 1)


def greedy_first_position(model, src, max_len, bos_id, eos_id):
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos_id)
    for _ in range(max_len):
        nxt = model.decode(ys, memory, src)[:, 0].argmax(-1, keepdim=True)  # wrong position
        ys = torch.cat([ys, nxt], dim=1)
    return ys[:, 1:]


def bpc_nats(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()


def bpc_sum(logits, targets):
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum"
    ).item() / math.log(2)


def temperature_times(logits, temperature):
    return torch.softmax(logits * temperature, dim=-1)


def temperature_no_softmax(logits, temperature):
    return logits / temperature


def cache_forgets(attn, x_t, cache):
    q, k, v = attn.qkv(x_t)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
    return attn.c_proj(merge_heads(w @ v)), (k, v)


CHECKS = [
    (check_shift_right, good_shift),
    (check_decoder_layer, good_decoder),
    (check_greedy_decode, good_greedy),
    (check_bits_per_char, good_bpc),
    (check_temperature_probs, good_temperature),
    (check_kv_cache_step, good_cache),
]


@pytest.mark.parametrize("check, solution", CHECKS, ids=[c.__name__ for c, _ in CHECKS])
def test_passes_on_a_correct_solution(check, solution, capsys):
    assert check(solution)
    assert "all" in capsys.readouterr().out


@pytest.mark.parametrize("check", [c for c, _ in CHECKS], ids=[c.__name__ for c, _ in CHECKS])
def test_stub_is_not_attempted(check):
    with pytest.raises(ExerciseNotAttempted, match="not implemented yet"):
        check(stub)


@pytest.mark.parametrize(
    "check, wrong, message",
    [
        (check_shift_right, shift_left, "shifts LEFT"),
        (check_shift_right, shift_too_long, "one column too long"),
        (check_decoder_layer, decoder_cross_from_x, "pass `memory`"),
        (check_decoder_layer, decoder_pre_ln, "pre-LN"),
        (check_decoder_layer, decoder_no_residual, "residual"),
        (check_decoder_layer, decoder_no_masks, "masks are ignored"),
        (check_greedy_decode, greedy_keeps_bos, "starts with <bos>"),
        (check_greedy_decode, greedy_first_position, r"row 0: expected"),
        (check_bits_per_char, bpc_nats, "nats"),
        (check_bits_per_char, bpc_sum, "SUM"),
        (check_temperature_probs, temperature_times, "divide"),
        (check_temperature_probs, temperature_no_softmax, "softmax"),
        (check_kv_cache_step, cache_forgets, "concatenate"),
    ],
)
def test_typical_mistakes_are_named(check, wrong, message):
    with pytest.raises(ExerciseFailure, match=message) as info:
        check(wrong)
    assert not isinstance(info.value, ExerciseNotAttempted)
    assert "Hint (" in str(info.value)


def test_checks_reject_a_non_function():
    for check, _ in CHECKS:
        with pytest.raises(ExerciseFailure, match="function"):
            check(42)


def test_a_forbidden_method_behind_a_decorator_is_named_as_itself():
    """GPT.generate and decoding.decode share torch.no_grad's wrapper: calling the first must be
    refused under its own name, not the other's."""
    from course_lib.exercises._forbid import Forbidden, guard
    from course_lib.gpt import GPT, GPTConfig

    model = GPT(GPTConfig(vocab_size=7, block_size=8, n_layer=1, n_head=1, n_embd=8)).eval()
    specs = [Forbidden("course_lib.gpt.GPT.generate"), Forbidden("course_lib.decoding.decode")]
    with guard(specs) as refused, pytest.raises(RuntimeError, match="off limits"):
        model.generate(torch.zeros(1, 2, dtype=torch.long), 3, top_k=1)
    assert [spec.name for spec in refused] == ["course_lib.gpt.GPT.generate"]
