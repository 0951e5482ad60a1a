"""course_lib.decoding: one step protocol; greedy, sampling (temperature, top-k, top-p) and beam
search over it, for every model that writes tokens (seq2seq is tested in test_unit_seq2seq.py)."""

import itertools
import math

import pytest
import torch

from course_lib import decoding
from course_lib.gpt import GPT, GPTConfig
from course_lib.multihead import KVCache


class TableModel:
    """A toy 'model': the next token's log-probabilities depend on the last token only,
    log p(v | y) = table[y, v]. The state counts the steps (a tensor with the batch first)."""

    def __init__(self, table):
        self.table = table

    def step(self, y, state):
        return self.table[y], state + 1


def _table(V=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(V, V, generator=g).log_softmax(-1)


def _log_p(table, y0, seq):
    prev, total = y0, 0.0
    for v in seq:
        total += table[prev, v].item()
        prev = v
    return total


def test_greedy_takes_the_argmax_and_sums_its_log_probabilities():
    table = _table()
    model = TableModel(table)
    y0 = torch.tensor([0, 1, 2])
    tokens, log_prob = decoding.greedy(model.step, y0, torch.zeros(3), max_len=5)
    for row, start in enumerate(y0.tolist()):
        prev = start
        for t in range(5):
            assert tokens[row, t].item() == table[prev].argmax().item()
            prev = tokens[row, t].item()
        assert log_prob[row].item() == pytest.approx(_log_p(table, start, tokens[row].tolist()), abs=1e-5)


def test_rows_stop_at_eos_and_are_filled_with_eos():
    table = torch.full((3, 3), -10.0)
    table[0, 1] = table[1, 2] = table[2, 0] = 0.0  # 0 -> 1 -> 2 (eos) -> 0
    tokens, log_prob = decoding.greedy(
        TableModel(table).step, torch.tensor([0, 1]), torch.zeros(2), max_len=6, eos_id=2
    )
    assert tokens.tolist() == [[1, 2], [2, 2]]  # the loop stops once every row is done
    lp = torch.tensor([-10.0, 0.0, -10.0]).log_softmax(-1)[1]  # log p of each sure step
    assert torch.allclose(log_prob, torch.stack([2 * lp, lp]), atol=1e-7)


def test_sampling_at_temperature_zero_is_greedy_and_a_beam_of_one_too():
    model = TableModel(_table(6, seed=1))
    y0 = torch.tensor([0, 3])
    greedy, lp = decoding.greedy(model.step, y0, torch.zeros(2), 7, eos_id=5)
    cold, lp_cold = decoding.sample(model.step, y0, torch.zeros(2), 7, temperature=0, eos_id=5)
    beam, lp_beam = decoding.beam_search(model.step, y0, torch.zeros(2), 7, beam_size=1, eos_id=5)
    assert torch.equal(greedy, cold) and torch.allclose(lp, lp_cold)
    assert torch.equal(beam[:, 0, : greedy.shape[1]], greedy) and torch.allclose(lp_beam[:, 0], lp)


def test_sampling_follows_the_distribution_at_each_temperature():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(20000, 1)
    for t in (0.5, 1.0, 2.0):
        ids = decoding.sample_next(logits, t, generator=torch.Generator().manual_seed(0))
        freq = torch.bincount(ids, minlength=4) / len(ids)
        expected = torch.softmax(logits[0] / t, -1)
        assert (freq - expected).abs().sum() / 2 < 0.02, (t, freq, expected)


def test_top_k_keeps_the_k_most_likely_tokens():
    logits = torch.tensor([[0.1, 3.0, 2.0, -1.0, 2.5]])
    kept = decoding.top_k_filter(logits, 2)
    assert torch.isfinite(kept).tolist() == [[False, True, False, False, True]]
    ids = decoding.sample_next(
        logits.repeat(5000, 1), 1.0, top_k=2, generator=torch.Generator().manual_seed(0)
    )
    assert set(ids.tolist()) == {1, 4}
    with pytest.raises(ValueError, match="top_k must be a positive int"):
        decoding.top_k_filter(logits, 0)


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    logits = probs.log()
    assert torch.isfinite(decoding.top_p_filter(logits, 0.5)).tolist() == [[True, False, False, False]]
    assert torch.isfinite(decoding.top_p_filter(logits, 0.8)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(decoding.top_p_filter(logits, 0.81)).tolist() == [[True, True, True, False]]
    assert torch.isfinite(decoding.top_p_filter(logits, 1.0)).all()
    shuffled = logits[:, [2, 0, 3, 1]]  # the order of the vocabulary does not matter
    assert torch.isfinite(decoding.top_p_filter(shuffled, 0.8)).tolist() == [[False, True, False, True]]
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\]"):
        decoding.top_p_filter(logits, 0.0)


def test_sample_next_rejects_bad_arguments():
    with pytest.raises(ValueError, match="temperature must be a number >= 0"):
        decoding.sample_next(torch.zeros(1, 3), -1.0)
    with pytest.raises(ValueError, match=r"logits must have shape \(N, V\)"):
        decoding.sample_next(torch.zeros(3), 1.0)


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_exhaustive_beam_search_finds_the_best_output(length_penalty):
    V, max_len, eos = 4, 3, 3
    table = _table(V, seed=2)
    best, best_rank = None, -math.inf
    for seq in itertools.product(range(V), repeat=max_len):
        seq = list(seq)
        if eos in seq:
            seq = seq[: seq.index(eos) + 1]
        rank = _log_p(table, 0, seq) / len(seq) ** length_penalty
        if rank > best_rank + 1e-9:
            best, best_rank = seq, rank
    tokens, log_p = decoding.beam_search(
        TableModel(table).step,
        torch.tensor([0]),
        torch.zeros(1),
        max_len,
        beam_size=V**max_len,
        eos_id=eos,
        length_penalty=length_penalty,
    )
    assert tokens[0, 0, : len(best)].tolist() == best
    assert log_p[0, 0].item() / len(best) ** length_penalty == pytest.approx(best_rank, abs=1e-5)


def test_select_rows_reorders_nested_states():
    cache = KVCache(torch.arange(6.0).view(3, 1, 2, 1), torch.arange(6.0).view(3, 1, 2, 1))
    state = {
        "h": torch.arange(3),
        "pair": (torch.arange(3), torch.arange(3) * 2),
        "n": 5,
        "caches": [cache, KVCache()],
    }
    out = decoding.select_rows(state, torch.tensor([2, 2, 0]))
    assert out["h"].tolist() == [2, 2, 0] and out["pair"][1].tolist() == [4, 4, 0]
    assert out["n"] == 5 and out["caches"][1].k is None
    assert out["caches"][0].k[:, 0, :, 0].tolist() == [[4, 5], [4, 5], [0, 1]]
    assert cache.k.shape[0] == 3  # the original is untouched


@pytest.mark.slow
def test_gpt_with_a_kv_cache_generates_what_it_generates_without():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=13, block_size=12, n_layer=2, n_head=4, n_embd=16)).eval()
    prompt = torch.randint(0, 13, (3, 4))
    for steps in (5, 20):  # within max_len, and past it (the cache gives way to a sliding window)
        cached = gpt.generate(prompt, steps, generator=torch.Generator().manual_seed(1))
        plain = gpt.generate(prompt, steps, use_cache=False, generator=torch.Generator().manual_seed(1))
        assert torch.equal(cached, plain)
    y0, state = gpt.start(prompt)
    logits, state = gpt.step(y0, state)
    assert torch.allclose(logits, gpt(prompt)[:, -1], atol=1e-5)
    assert len(state["caches"][0]) == 4


def test_gpt_beam_search_reorders_its_caches():
    """Beam search over the cached step equals beam search over the uncached one."""
    torch.manual_seed(1)
    gpt = GPT(GPTConfig(vocab_size=7, block_size=10, n_layer=1, n_head=2, n_embd=8)).eval()
    prompt = torch.randint(0, 7, (2, 3))
    results = []
    for use_cache in (True, False):
        y0, state = gpt.start(prompt, use_cache)
        results.append(decoding.beam_search(gpt.step, y0, state, 5, beam_size=3))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.allclose(results[0][1], results[1][1], atol=1e-5)
