"""Unit tests of course_lib.gpt: nanoGPT's model (config, init, tying, biases), causality, the
attention against torch's scaled_dot_product_attention, a block against the course's own
EncoderLayer, bad input, and the key/value cache (same tokens, same outputs)."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib import decoding
from course_lib.gpt import GPT, Block, CausalSelfAttention, GPTConfig, kv_cache_step
from course_lib.multihead import KVCache
from course_lib.transformer import EncoderLayer

torch.set_num_threads(1)


def _config(**kw):
    return GPTConfig(**{**dict(vocab_size=13, block_size=12, n_layer=2, n_head=4, n_embd=16), **kw})


def _model(seed=0, **kw):
    torch.manual_seed(seed)
    return GPT(_config(**kw)).eval()


# ---------------------------------------------------------------------------
# The model is nanoGPT's: names, tying, biases, initialisation
# ---------------------------------------------------------------------------


def test_defaults_are_nanogpts_baby_gpt():
    config = GPTConfig(vocab_size=65)
    assert (config.block_size, config.n_layer, config.n_head, config.n_embd) == (64, 4, 4, 128)
    assert (config.dropout, config.bias, config.tie_weights) == (0.0, False, True)


def test_parameter_names_are_nanogpts_and_gpt2s():
    names = set(GPT(_config(bias=True)).state_dict())
    assert {
        "transformer.wte.weight",
        "transformer.wpe.weight",
        "transformer.h.0.ln_1.weight",
        "transformer.h.0.attn.c_attn.weight",
        "transformer.h.0.attn.c_attn.bias",
        "transformer.h.1.mlp.c_fc.weight",
        "transformer.h.1.mlp.c_proj.bias",
        "transformer.ln_f.bias",
        "lm_head.weight",
    } <= names
    assert not any("causal" in n for n in names)  # the mask is a buffer outside the state dict


def test_tied_output_layer_is_the_token_embedding():
    tied, untied = GPT(_config()), GPT(_config(tie_weights=False))
    assert tied.lm_head.weight is tied.transformer.wte.weight
    assert untied.lm_head.weight is not untied.transformer.wte.weight
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(untied) - count(tied) == 13 * 16  # one (V, C) matrix fewer


def test_bias_false_removes_every_bias():
    no_bias = GPT(_config())
    assert not [n for n, _ in no_bias.named_parameters() if n.endswith("bias")]
    with_bias = [n for n, _ in GPT(_config(bias=True)).named_parameters() if n.endswith("bias")]
    # per block: ln_1, c_attn, attn.c_proj, ln_2, c_fc, mlp.c_proj; and ln_f (lm_head has none)
    assert len(with_bias) == 2 * 6 + 1


def test_init_is_gpt2s():
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=500, block_size=256, n_layer=8, n_head=4, n_embd=256, bias=True)
    model = GPT(config)
    residual = 0.02 / math.sqrt(2 * config.n_layer)
    for name, p in model.named_parameters():
        if name.endswith("c_proj.weight"):
            assert p.std().item() == pytest.approx(residual, rel=0.05), name
        elif name.endswith(("c_attn.weight", "c_fc.weight", "wte.weight", "wpe.weight")):
            assert p.std().item() == pytest.approx(0.02, rel=0.05), name
        elif name.endswith("bias") and "ln_" not in name:
            assert p.abs().max().item() == 0, name
        assert p.mean().abs().item() < 0.01 or "ln_" in name, name


def test_bad_configs_raise_naming_the_field():
    with pytest.raises(ValueError, match=r"n_embd=10 is not divisible by n_head=4"):
        GPTConfig(vocab_size=5, n_embd=10, n_head=4)
    with pytest.raises(ValueError, match=r"GPTConfig.n_layer must be a positive int, got 0"):
        GPTConfig(vocab_size=5, n_layer=0)
    with pytest.raises(ValueError, match=r"GPTConfig.vocab_size"):
        GPTConfig(vocab_size=2.5)
    with pytest.raises(ValueError, match=r"dropout"):
        GPTConfig(vocab_size=5, dropout=1.0)
    with pytest.raises(TypeError, match=r"GPTConfig.bias must be a bool"):
        GPTConfig(vocab_size=5, bias=1)
    with pytest.raises(ValueError, match=r"gelu_approximate"):
        GPTConfig(vocab_size=5, gelu_approximate="fast")
    with pytest.raises(TypeError, match=r"config must be a GPTConfig"):
        GPT(13)


def test_bad_input_raises_once_with_the_shapes():
    model = _model()
    with pytest.raises(ValueError, match=r"idx must be a \(B, T\) tensor of token ids, got shape \(5,\)"):
        model(torch.zeros(5, dtype=torch.long))
    with pytest.raises(TypeError, match=r"idx must hold integer token ids"):
        model(torch.zeros(1, 5))
    with pytest.raises(ValueError, match=r"idx has ids outside \[0, 13\): min 0, max 13"):
        model(torch.tensor([[0, 13]]))
    with pytest.raises(ValueError, match=r"idx has length T=13, more than max_len=12"):
        model(torch.zeros(1, 13, dtype=torch.long))
    caches = [KVCache() for _ in range(2)]
    model(torch.zeros(1, 10, dtype=torch.long), caches)
    with pytest.raises(ValueError, match=r"T=3, more than max_len=2"):  # 10 cached + 3 > block_size
        model(torch.zeros(1, 3, dtype=torch.long), caches)
    with pytest.raises(ValueError, match=r"caches must be a list of n_layer=2 KVCache"):
        model(torch.zeros(1, 3, dtype=torch.long), [KVCache()])


# ---------------------------------------------------------------------------
# Causality, and parity of the attention and the block
# ---------------------------------------------------------------------------


def test_logits_are_causal():
    model = _model()
    x = torch.randint(0, 13, (2, 9))
    changed = x.clone()
    changed[:, 5] = (x[:, 5] + 1) % 13
    a, b = model(x), model(changed)
    assert (a[:, :5] - b[:, :5]).abs().max() < 1e-6
    assert (a[:, 5:] - b[:, 5:]).abs().max() > 1e-4
    weights = model.attention_weights()
    assert [w.shape for w in weights] == [(2, 4, 9, 9)] * 2
    assert all(w.triu(1).abs().max() == 0 for w in weights)
    torch.testing.assert_close(weights[0].sum(-1), torch.ones(2, 4, 9))


@pytest.mark.parametrize("bias", [False, True])
def test_attention_matches_torch_scaled_dot_product_attention(bias):
    torch.manual_seed(1)
    config = GPTConfig(vocab_size=5, block_size=20, n_head=4, n_embd=32, bias=bias)
    attn = CausalSelfAttention(config).eval()
    x = torch.randn(3, 17, 32)
    with torch.no_grad():
        ours = attn(x)
        q, k, v = attn.qkv(x)  # (B, h, T, d_k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        theirs = attn.c_proj(y.transpose(1, 2).reshape(3, 17, 32))
    diff = (ours - theirs).abs().max().item()
    print(f"CausalSelfAttention vs F.scaled_dot_product_attention: largest difference {diff:.2e}")
    assert diff < 1e-6


def test_block_matches_the_course_encoder_layer_with_a_causal_mask():
    """A GPT block with biases and exact GELU is chapter 9's pre-LN EncoderLayer (d_ff = 4 C)
    called with a causal mask; only the names differ."""
    torch.manual_seed(2)
    config = GPTConfig(vocab_size=5, block_size=16, n_head=4, n_embd=32, bias=True)
    block = Block(config).eval()
    layer = EncoderLayer(32, 4, 128, dropout=0.0, activation="gelu", norm_first=True).eval()
    names = {
        "ln_1": "norm1",
        "ln_2": "norm2",
        "attn.c_attn.weight": "self_attn.in_proj_weight",
        "attn.c_attn.bias": "self_attn.in_proj_bias",
        "attn.c_proj": "self_attn.out_proj",
        "mlp.c_fc": "linear1",
        "mlp.c_proj": "linear2",
    }

    def rename(key):
        for ours, theirs in names.items():
            if key.startswith(ours):
                return theirs + key[len(ours) :]
        raise KeyError(key)

    layer.load_state_dict({rename(k): v for k, v in block.state_dict().items()})
    x = torch.randn(2, 16, 32)
    with torch.no_grad():
        ours, theirs = block(x), layer(x, torch.ones(16, 16, dtype=torch.bool).tril())
    diff = (ours - theirs).abs().max().item()
    print(f"gpt.Block vs transformer.EncoderLayer (causal mask): largest difference {diff:.2e}")
    assert diff < 1e-5
    torch.testing.assert_close(block.attn.last_weights, layer.last_weights)


def test_dropout_acts_in_training_only():
    model = _model(dropout=0.5)
    x = torch.randint(0, 13, (2, 8))
    torch.testing.assert_close(model.eval()(x), model(x))
    model.train()
    assert (model(x) - model(x)).abs().max() > 1e-3


# ---------------------------------------------------------------------------
# The key/value cache
# ---------------------------------------------------------------------------


def test_cached_forward_equals_the_full_forward():
    model = _model()
    x = torch.randint(0, 13, (2, 10))
    caches = [KVCache() for _ in range(2)]
    with torch.no_grad():
        full = model(x)
        parts = [model(x[:, :4], caches), model(x[:, 4:5], caches), model(x[:, 5:], caches)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-5)
    assert len(caches[0]) == 10
    assert model.attention_weights()[0].shape == (2, 4, 5, 10)  # the last call: 5 queries, 10 keys


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


def test_generate_restores_the_training_mode():
    model = _model().train()
    out = model.generate(torch.zeros(1, 1, dtype=torch.long), 3)
    assert out.shape == (1, 4) and model.training


def test_beam_search_over_the_cached_step_equals_the_uncached_one():
    model = _model(seed=1)
    prompt = torch.randint(0, 13, (2, 3))
    results = []
    for use_cache in (True, False):
        y0, state = model.start(prompt, use_cache)
        results.append(decoding.beam_search(model.step, y0, state, 5, beam_size=3))
    assert torch.equal(results[0][0], results[1][0])
    torch.testing.assert_close(results[0][1], results[1][1], atol=1e-5, rtol=1e-5)


def test_kv_cache_step_matches_causal_self_attention():
    torch.manual_seed(0)
    attn = CausalSelfAttention(GPTConfig(vocab_size=5, block_size=8, n_head=4, n_embd=16)).eval()
    x = torch.randn(2, 7, 16)
    with torch.no_grad():
        full = attn(x)
        cache, outs = None, []
        for t in range(7):
            out, cache = kv_cache_step(attn, x[:, t : t + 1], cache)
            outs.append(out)
    assert cache[0].shape == (2, 4, 7, 4)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-5)
