"""What `gpt2_config` and `GPT.from_gpt2` refuse: GPT-2 options the course's GPT does not model,
state dicts of other sizes, and configs edited into invalid ones after construction.

Each refusal is there because loading would give another model: the first test measures how far
Hugging Face's GPT-2 with each attention flag is from the course's GPT holding the same weights.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported: never download

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, GPTNeoConfig

from course_lib.gpt import GPT, GPTConfig, gpt2_config

torch.set_num_threads(1)
V, T = 37, 24


def _hf_config(**kw):
    sizes = dict(
        vocab_size=V,
        n_positions=T,
        n_embd=32,
        n_layer=2,
        n_head=4,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        resid_pdrop=0.0,
        initializer_range=0.2,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2Config(**{**sizes, **kw})


def _hf_model(seed=0, **kw):
    torch.manual_seed(seed)
    return GPT2LMHeadModel(_hf_config(**kw)).eval()


def _tokens(seed=1, shape=(3, T)):
    return torch.randint(0, V, shape, generator=torch.Generator().manual_seed(seed))


def _largest_difference(hf):
    """GPT-2 against the course's GPT built from a plain GPT2Config and GPT-2's weights."""
    ours = GPT.from_gpt2(hf.state_dict(), gpt2_config(_hf_config())).eval()
    with torch.no_grad():
        return (hf(_tokens()).logits - ours(_tokens())).abs().max().item()


@pytest.mark.parametrize(
    "flag, value", [("scale_attn_weights", False), ("scale_attn_by_inverse_layer_idx", True)]
)
def test_attention_scaling_flags_are_refused(flag, value):
    hf = _hf_model(**{flag: value})
    diff = _largest_difference(hf)
    print(
        f"GPT-2 with {flag}={value} vs the course's GPT with its weights: largest logit difference {diff:.2f}"
    )
    assert diff > 0.1  # another model: it must not load
    with pytest.raises(ValueError, match=f"course_lib.gpt does not model {flag}={value}") as error:
        gpt2_config(hf.config)
    print(error.value)


def test_reorder_and_upcast_attn_is_the_same_function():
    """The flag computes the scores in float32 and in another order (eager attention only): in
    float32 the course's GPT gives GPT-2's logits, so it loads."""
    hf = _hf_model(reorder_and_upcast_attn=True)
    hf.config._attn_implementation = "eager"  # the only path that reads the flag
    calls = []
    for block in hf.transformer.h:  # count the calls of the reordered path: it is the one tested
        block.attn._upcast_and_reordered_attn = _counted(block.attn._upcast_and_reordered_attn, calls)
    ours = GPT.from_gpt2(hf.state_dict(), gpt2_config(hf.config)).eval()
    with torch.no_grad():
        diff = (hf(_tokens()).logits - ours(_tokens())).abs().max().item()
    assert len(calls) == 2  # both blocks
    print(f"GPT-2 with reorder_and_upcast_attn=True vs course_lib.gpt: largest logit difference {diff:.2e}")
    assert diff <= 1e-5


def _counted(fn, calls):
    def wrapper(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    return wrapper


def test_cross_attention_and_other_model_types_are_refused():
    with pytest.raises(ValueError, match="does not model add_cross_attention=True"):
        gpt2_config(_hf_config(add_cross_attention=True))
    with pytest.raises(ValueError, match="does not model model_type='gpt_neo'"):
        gpt2_config(GPTNeoConfig())
    with pytest.raises(ValueError, match="activation_function 'gelu_fast'"):
        gpt2_config(_hf_config(activation_function="gelu_fast"))
    crossed = _hf_model(add_cross_attention=True).state_dict()  # its keys refused too, if forced
    with pytest.raises(ValueError, match=r"has \['transformer.h.0.crossattention.c_attn.bias'"):
        GPT.from_gpt2(crossed, gpt2_config(_hf_config()))


def test_state_dicts_with_a_layer_more_or_fewer_are_refused():
    sd2, sd3 = _hf_model().state_dict(), _hf_model(n_layer=3).state_dict()
    with pytest.raises(
        ValueError,
        match=r"has \['transformer.h.2.attn.c_attn.bias', .*, which this "
        r"model does not: is it a GPT2LMHeadModel's of n_layer=2",
    ):
        GPT.from_gpt2(sd3, gpt2_config(_hf_config()))
    config3 = gpt2_config(_hf_config())
    config3.n_layer = 3
    with pytest.raises(ValueError, match=r"lacks \['transformer.h.2.attn.c_attn.bias', .*n_layer=3"):
        GPT.from_gpt2(sd2, config3)


def test_the_config_is_checked_when_the_model_is_built():
    """A GPTConfig edited after construction used to build a model that failed only in forward
    (view of 32 features as 5 heads); it is now refused by GPT(config), and so by from_gpt2."""
    config = GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=4, n_embd=32)
    GPT(config)
    for name, value, said in [
        ("n_head", 5, "n_embd=32 is not divisible by n_head=5"),
        ("dropout", 1.5, "dropout must be in"),
        ("n_layer", 0, "n_layer must be a positive int"),
        ("gelu_approximate", "fast", "gelu_approximate must be"),
    ]:
        edited = GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=4, n_embd=32)
        setattr(edited, name, value)
        with pytest.raises(ValueError, match=said):
            GPT(edited)
    config = gpt2_config(_hf_config())
    config.n_head = 3
    with pytest.raises(ValueError, match="n_embd=32 is not divisible by n_head=3"):
        GPT.from_gpt2(_hf_model().state_dict(), config)
