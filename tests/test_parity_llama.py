"""The course's Llama against Hugging Face's (transformers' LlamaForCausalLM).

Small LlamaConfigs with random weights (nothing is downloaded): their state dicts load into
`course_lib.llama.Llama` through `Llama.from_hf` and give the same logits and the same greedy
tokens; `Llama.to_hf` gives the state dict back bit for bit. Options the course's Llama does not
model, and state dicts of other sizes, are refused.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported: never download

import pytest
import torch
import torch.nn.functional as F
from transformers import GPT2Config, LlamaForCausalLM, MistralConfig
from transformers import LlamaConfig as HFLlamaConfig

from course_lib.gpt import MLP as GPTMLP
from course_lib.gpt import GPTConfig
from course_lib.llama import MLP, Llama, LlamaConfig, RMSNorm, llama_config
from course_lib.multihead import KVCache

torch.set_num_threads(1)
V, T = 37, 24

# (n_head, n_kv_head, tied, hidden_size, rope_theta): full multi-head, grouped, multi-query
SHAPES = [
    (4, 4, True, 32, 10000.0),
    (4, 2, False, 32, 10000.0),
    (4, 1, True, 32, 10000.0),
    (6, 3, False, 48, 500000.0),
    (6, 1, False, 48, 10000.0),
]


def _hf_config(n_head=4, n_kv_head=2, tied=False, hidden=32, theta=10000.0, layers=2, **kw):
    return HFLlamaConfig(
        vocab_size=V,
        hidden_size=hidden,
        intermediate_size=3 * hidden // 2 + 2,
        num_hidden_layers=layers,
        num_attention_heads=n_head,
        num_key_value_heads=n_kv_head,
        max_position_embeddings=T,
        tie_word_embeddings=tied,
        rope_parameters={"rope_type": "default", "rope_theta": theta},
        rms_norm_eps=1e-5,
        initializer_range=0.2,  # activations of order one, as in a trained model
        bos_token_id=None,
        eos_token_id=None,  # no token ends a row, and no token is suppressed (min_new_tokens would)
        pad_token_id=None,
        **kw,
    )


def _hf_model(seed=0, **kw):
    torch.manual_seed(seed)
    model = LlamaForCausalLM(_hf_config(**kw)).eval()
    with torch.no_grad():  # RMSNorm gains start at one: draw them too, so that they are tested
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                p.uniform_(0.5, 1.5)
    return model


def _tokens(seed=1, shape=(3, T)):
    return torch.randint(0, V, shape, generator=torch.Generator().manual_seed(seed))


def _shape_kw(shape):
    n_head, n_kv_head, tied, hidden, theta = shape
    return dict(n_head=n_head, n_kv_head=n_kv_head, tied=tied, hidden=hidden, theta=theta)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"h{s[0]}-kv{s[1]}-{'tied' if s[2] else 'untied'}")
def test_hf_weights_give_the_same_logits(shape):
    hf = _hf_model(**_shape_kw(shape))
    config = llama_config(hf.config)
    assert (config.n_head, config.n_kv_head, config.tie_weights, config.rope_base) == (
        shape[0],
        shape[1],
        shape[2],
        shape[4],
    )
    ours = Llama.from_hf(hf.state_dict(), config).eval()
    assert (ours.lm_head.weight is ours.model.embed_tokens.weight) == shape[2]
    idx = _tokens()
    with torch.no_grad():
        theirs, mine = hf(idx).logits, ours(idx)
    diff = (theirs - mine).abs().max().item()
    print(
        f"LlamaForCausalLM {shape} vs course_lib.llama: largest logit difference {diff:.2e} "
        f"(logits up to {theirs.abs().max():.1f})"
    )
    assert theirs.abs().max() > 1  # logits of order one: the tolerance is not met by small numbers
    assert diff <= 1e-4


def test_the_rotary_layout_permutation_matters():
    """Hugging Face rotates feature pairs (i, i + d/2), apply_rope pairs (2i, 2i + 1): the same
    weights loaded without from_hf's permutation of q_proj and k_proj give other logits."""
    hf = _hf_model()
    ours = Llama(llama_config(hf.config)).eval()
    ours.load_state_dict(hf.state_dict())
    with torch.no_grad():
        diff = (hf(_tokens()).logits - ours(_tokens())).abs().max().item()
    print(f"without the permutation: largest logit difference {diff:.2e}")
    assert diff > 1e-2


def test_round_trip_is_bit_exact():
    for shape in SHAPES:
        hf = _hf_model(seed=3, **_shape_kw(shape))
        sd = hf.state_dict()
        back = Llama.from_hf(sd, llama_config(hf.config)).to_hf()
        assert set(back) == set(sd)
        assert all(torch.equal(back[name], sd[name]) for name in sd), shape
    again = _hf_model(seed=4)  # other random weights, then ours loaded
    ours = Llama.from_hf(_hf_model(seed=3).state_dict(), llama_config(again.config))
    idx = _tokens(seed=2)
    with torch.no_grad():
        before = again(idx).logits
        again.load_state_dict(ours.to_hf())
        first, back = _hf_model(seed=3)(idx).logits, again(idx).logits
    assert (before - first).abs().max() > 0.1  # the load changed the second model
    assert torch.equal(first, back)


@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[2], SHAPES[3]], ids=["gqa", "mqa", "theta"])
def test_greedy_generation_matches_hfs(shape):
    hf = _hf_model(seed=5, **_shape_kw(shape))
    ours = Llama.from_hf(hf.state_dict(), llama_config(hf.config))
    prompt = _tokens(seed=6, shape=(2, 5))
    with torch.no_grad():
        theirs = hf.generate(
            prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=15, pad_token_id=0
        )
    assert torch.equal(ours.generate(prompt, 15, temperature=0), theirs)
    assert torch.equal(ours.generate(prompt, 15, temperature=0, use_cache=False), theirs)


@pytest.mark.parametrize("n_kv_head", [4, 2, 1])
def test_the_cache_holds_n_kv_head_heads_and_changes_no_number(n_kv_head):
    torch.manual_seed(0)
    model = Llama(
        LlamaConfig(vocab_size=V, block_size=T, n_layer=2, n_head=4, n_kv_head=n_kv_head, n_embd=32)
    ).eval()
    idx = _tokens(seed=7, shape=(2, 12))
    caches = [KVCache() for _ in range(2)]
    with torch.no_grad():
        full = model(idx)
        steps = [model(idx[:, :5], caches)] + [model(idx[:, t : t + 1], caches) for t in range(5, 12)]
        steps = torch.cat(steps, dim=1)  # the prompt, then one token at a time
    assert caches[0].k.shape == caches[0].v.shape == (2, n_kv_head, 12, 8)
    assert (full - steps).abs().max() < 1e-5
    g = torch.Generator()  # 30 tokens: past block_size=24, both re-read the last 24 tokens
    sampled = [
        model.generate(idx[:, :4], 26, top_k=5, use_cache=cached, generator=g.manual_seed(3))
        for cached in (True, False)
    ]
    assert torch.equal(*sampled) and sampled[0].shape == (2, 30)


def test_rmsnorm_and_the_swiglu_width():
    norm = RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 5, 16)
    assert torch.allclose(norm(x), F.rms_norm(x, (16,), norm.weight, 1e-6), atol=1e-6)
    for C in (64, 128, 384):  # SwiGLU at 2/3 * 4C holds the parameters of GPT's 4C MLP (within 1 %)
        swiglu = sum(p.numel() for p in MLP(LlamaConfig(vocab_size=V, n_embd=C)).parameters())
        gelu = sum(p.numel() for p in GPTMLP(GPTConfig(vocab_size=V, n_embd=C)).parameters())
        assert abs(swiglu - gelu) / gelu < 0.01, (C, swiglu, gelu)


# -- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option, value, said",
    [
        (
            "rope_parameters",
            {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
            "rope_parameters=",
        ),
        (
            "rope_parameters",
            {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5},
            "rope_parameters=",
        ),
        ("attention_bias", True, "attention_bias=True"),
        ("mlp_bias", True, "mlp_bias=True"),
        ("hidden_act", "gelu", "hidden_act='gelu'"),
        ("head_dim", 16, "head_dim=16"),
        ("pretraining_tp", 2, "pretraining_tp=2"),
        ("attention_dropout", 0.1, "attention_dropout=0.1"),
    ],
)
def test_unmodelled_options_are_refused(option, value, said):
    config = _hf_config()
    setattr(config, option, value)
    with pytest.raises(ValueError, match=f"does not model .*{said}") as error:
        llama_config(config)
    print(error.value)


def test_other_model_types_are_refused():
    mistral = MistralConfig(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=50,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        sliding_window=8,
    )
    with pytest.raises(ValueError, match="does not model model_type='mistral'"):
        llama_config(mistral)
    with pytest.raises(ValueError, match="does not model model_type='gpt2'"):
        llama_config(GPT2Config())
    windowed = _hf_config()
    windowed.sliding_window = 8  # a Llama config carrying another model's option
    with pytest.raises(ValueError, match="does not model sliding_window=8"):
        llama_config(windowed)


def test_state_dicts_of_other_sizes_are_refused():
    sd2 = _hf_model(layers=2).state_dict()
    sd3 = _hf_model(layers=3).state_dict()
    two, three = llama_config(_hf_config(layers=2)), llama_config(_hf_config(layers=3))
    extra_layer = r"has \['model.layers.2.input_layernorm.weight', .*, which this model does not"
    with pytest.raises(ValueError, match=extra_layer):
        Llama.from_hf(sd3, two)
    with pytest.raises(ValueError, match=r"lacks \['model.layers.2.input_layernorm.weight'"):
        Llama.from_hf(sd2, three)
    biased = LlamaForCausalLM(_hf_config(attention_bias=True)).state_dict()
    with pytest.raises(ValueError, match=r"has \['model.layers.0.self_attn.k_proj.bias'"):
        Llama.from_hf(biased, two)
    narrow = llama_config(_hf_config(n_kv_head=1))
    with pytest.raises(
        ValueError,
        match=r"k_proj.weight: the state dict's tensor has shape \(16, 32\), "
        r"this config expects \(8, 32\)",
    ):
        Llama.from_hf(sd2, narrow)
    with pytest.raises(ValueError, match="tie_weights is True"):
        Llama.from_hf(sd2, llama_config(_hf_config(tied=True)))
    tied = _hf_model(tied=True).state_dict()  # a tied matrix stored once, as in a safetensors file
    stored_once = {k: w for k, w in tied.items() if k != "lm_head.weight"}
    ours = Llama.from_hf(stored_once, llama_config(_hf_config(tied=True)))
    assert torch.equal(ours.lm_head.weight, tied["lm_head.weight"])
    with pytest.raises(ValueError, match=r"lacks \['lm_head.weight'\]"):  # untied, it is needed
        Llama.from_hf({k: w for k, w in sd2.items() if k != "lm_head.weight"}, two)


def test_the_config_is_checked_when_the_model_is_built():
    with pytest.raises(ValueError, match="n_head=4 is not divisible by n_kv_head=3"):
        LlamaConfig(vocab_size=V, n_embd=32, n_head=4, n_kv_head=3)
    config = LlamaConfig(vocab_size=V, n_embd=32, n_head=4, n_kv_head=2)
    config.n_head = 5  # changed after construction: refused when the model is built
    with pytest.raises(ValueError, match="n_embd=32 is not divisible by n_head=5"):
        Llama(config)
    config.n_head, config.n_kv_head = 4, 3
    with pytest.raises(ValueError, match="n_head=4 is not divisible by n_kv_head=3"):
        Llama(config)
    config.n_kv_head, config.n_embd = 2, 12  # heads of 3 features: RoPE needs pairs
    with pytest.raises(ValueError, match="must be even"):
        Llama(config)
    with pytest.raises(TypeError, match="llama_config"):
        Llama(_hf_config())
