"""Unit tests of course_lib.gpt: causality, the key/value cache (same tokens, same outputs)."""

import torch

from course_lib.gpt import GPT, kv_cache_step
from course_lib.multihead import MultiHeadAttention

torch.set_num_threads(1)


def _model(seed=0, **kw):
    torch.manual_seed(seed)
    return GPT(vocab_size=13, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=12, **kw).eval()


def test_logits_are_causal():
    model = _model()
    x = torch.randint(0, 13, (2, 9))
    changed = x.clone()
    changed[:, 5] = (x[:, 5] + 1) % 13
    a, b = model(x), model(changed)
    assert (a[:, :5] - b[:, :5]).abs().max() < 1e-6
    assert (a[:, 5:] - b[:, 5:]).abs().max() > 1e-4


def test_cache_gives_the_same_tokens_sampled_and_greedy():
    model = _model()
    prompt = torch.randint(0, 13, (3, 2))
    for kwargs in ({}, {"top_k": 1}, {"top_p": 0.8, "temperature": 0.7}):
        runs = [
            model.generate(prompt, 9, use_cache=c, generator=torch.Generator().manual_seed(1), **kwargs)
            for c in (False, True)
        ]
        assert torch.equal(runs[0], runs[1]), kwargs


def test_cache_beyond_the_context_falls_back_to_the_window():
    model = _model()
    prompt = torch.randint(0, 13, (1, 3))
    runs = [model.generate(prompt, 15, use_cache=c, top_k=1) for c in (False, True)]
    assert runs[0].shape == (1, 18) and torch.equal(runs[0], runs[1])


def test_kv_cache_step_matches_causal_self_attention():
    torch.manual_seed(0)
    attn = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 7, 16)
    mask = torch.ones(7, 7, dtype=torch.bool).tril()
    with torch.no_grad():
        full = attn(x, x, x, mask)
        full = full[0] if isinstance(full, tuple) else full
        cache, outs = None, []
        for t in range(7):
            out, cache = kv_cache_step(attn, x[:, t : t + 1], cache)
            outs.append(out)
    assert cache[0].shape == (2, 4, 7, 4)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-5)


def test_tied_weights_share_one_matrix():
    model = _model(tie_weights=True)
    assert model.head.weight is model.token_embed.weight
