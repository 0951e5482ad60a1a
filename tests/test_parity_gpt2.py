"""The course's GPT against Hugging Face's GPT-2 (transformers' GPT2LMHeadModel).

A small GPT2Config with random weights (nothing is downloaded): its state dict loads into
`course_lib.gpt.GPT` through `GPT.from_gpt2` and gives the same logits; `GPT.to_gpt2` exports the
weights back, and a fresh GPT2LMHeadModel holding them gives the first model's logits again.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported: never download

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from course_lib.gpt import GPT, gpt2_config

torch.set_num_threads(1)
V, T = 37, 24


def _hf_model(seed=0, **kw):
    """Random weights of std 0.2 (GPT-2's initializer_range is 0.02): activations of order one,
    as in a trained model; at 0.02 they are so small that exact and tanh GELU agree to 2e-6."""
    config = GPT2Config(
        vocab_size=V,
        n_positions=T,
        n_embd=32,
        n_layer=3,
        n_head=4,
        bos_token_id=0,
        eos_token_id=0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        resid_pdrop=0.0,
        initializer_range=0.2,
        **kw,
    )
    torch.manual_seed(seed)
    return GPT2LMHeadModel(config).eval()


def _tokens(seed=1, shape=(3, T)):
    return torch.randint(0, V, shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("activation", ["gelu_new", "gelu"])
@pytest.mark.parametrize("tied", [True, False])
def test_gpt2_weights_give_the_same_logits(activation, tied):
    hf = _hf_model(activation_function=activation, tie_word_embeddings=tied)
    config = gpt2_config(hf.config)
    assert config.gelu_approximate == {"gelu_new": "tanh", "gelu": "none"}[activation]
    ours = GPT.from_gpt2(hf.state_dict(), config).eval()
    assert (ours.lm_head.weight is ours.transformer.wte.weight) == tied
    idx = _tokens()
    with torch.no_grad():
        theirs, mine = hf(idx).logits, ours(idx)
    diff = (theirs - mine).abs().max().item()
    print(f"GPT-2 ({activation}, tied={tied}) vs course_lib.gpt: largest logit difference {diff:.2e}")
    assert diff <= 1e-5


def test_round_trip_gpt2_to_ours_to_gpt2():
    hf = _hf_model(seed=3)
    ours = GPT.from_gpt2(hf.state_dict(), gpt2_config(hf.config))
    again = _hf_model(seed=4)  # other random weights, then ours loaded
    idx = _tokens(seed=2)
    with torch.no_grad():
        before = again(idx).logits
        again.load_state_dict(ours.to_gpt2())
        first, back = hf(idx).logits, again(idx).logits
    assert (before - first).abs().max() > 0.1  # the load changed the second model
    diff = (first - back).abs().max().item()
    print(f"GPT-2 -> course_lib.gpt -> GPT-2: largest logit difference {diff:.2e}")
    assert diff == 0


def test_the_gelu_variant_matters():
    """GPT-2 uses the tanh approximation of GELU; nanoGPT's model (exact GELU) loaded with GPT-2's
    weights gives other logits, by more than the parity tolerance."""
    hf = _hf_model(activation_function="gelu_new")
    config = gpt2_config(hf.config)
    config.gelu_approximate = "none"
    exact = GPT.from_gpt2(hf.state_dict(), config).eval()
    idx = _tokens()
    with torch.no_grad():
        diff = (hf(idx).logits - exact(idx)).abs().max().item()
    print(f"GPT-2 (tanh GELU) vs the same weights with exact GELU: largest logit difference {diff:.2e}")
    assert diff > 1e-5


def test_cached_greedy_generation_matches_gpt2s():
    hf = _hf_model(seed=5)
    ours = GPT.from_gpt2(hf.state_dict(), gpt2_config(hf.config))
    prompt = _tokens(seed=6, shape=(2, 5))
    with torch.no_grad():
        theirs = hf.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=False,
            max_new_tokens=12,
            min_new_tokens=12,
            pad_token_id=0,
        )
    assert torch.equal(ours.generate(prompt, 12, top_k=1), theirs)


def test_conv1d_weights_are_transposed():
    hf = _hf_model()
    ours = GPT.from_gpt2(hf.state_dict(), gpt2_config(hf.config))
    conv = hf.transformer.h[0].attn.c_attn.weight  # (in, out) = (32, 96)
    assert conv.shape == (32, 96) and ours.transformer.h[0].attn.c_attn.weight.shape == (96, 32)
    assert torch.equal(ours.transformer.h[0].attn.c_attn.weight, conv.t())
    assert torch.equal(ours.to_gpt2()["transformer.h.0.attn.c_attn.weight"], conv)


def test_mismatched_configs_raise():
    hf = _hf_model()
    config = gpt2_config(hf.config)
    config.n_embd = 16
    with pytest.raises(
        ValueError,
        match=r"transformer.wte.weight: GPT-2's tensor gives shape \(37, 32\), "
        r"this config expects \(37, 16\)",
    ):
        GPT.from_gpt2(hf.state_dict(), config)
    with pytest.raises(ValueError, match="lacks"):
        GPT.from_gpt2(
            {k: v for k, v in hf.state_dict().items() if not k.endswith("c_fc.bias")}, gpt2_config(hf.config)
        )
    untied = _hf_model(tie_word_embeddings=False)
    config = gpt2_config(untied.config)
    config.tie_weights = True
    with pytest.raises(ValueError, match="tie_weights"):
        GPT.from_gpt2(untied.state_dict(), config)
    with pytest.raises(ValueError, match="activation_function 'relu'"):
        gpt2_config(GPT2Config(activation_function="relu"))
