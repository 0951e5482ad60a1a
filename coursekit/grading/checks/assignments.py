"""References of the checks that only the multi-part assignments use."""

from __future__ import annotations

import math

import torch

from course_lib.exercises._data import build

from ..references import Case, Reference, load, register


# --------------------------------------------------------------------------------------
# Assignment 3: greedy generation with one key/value cache per block
# --------------------------------------------------------------------------------------
def _cache_step(attn, x_t, cache):
    """One cached step of a CausalSelfAttention, from tensor operations."""
    q, k, v = attn.qkv(x_t)  # each (B, h, 1, d_k)
    if cache is not None:
        k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), -1)  # (B, h, 1, t)
    return attn.c_proj((weights @ v).transpose(1, 2).reshape(x_t.shape)), (k, v)


def _generate(model, prompt, num_tokens, cached=True, position="absolute", keep_prompt=True, residual=True):
    """Greedy generation, one token per step; the keywords are the typical mistakes."""
    wte, wpe, blocks = model.transformer.wte, model.transformer.wpe, model.transformer.h
    caches, ids = [None] * len(blocks), prompt
    for t in range(prompt.shape[1] + num_tokens - 1):
        if cached:
            x = wte(ids[:, t : t + 1]) + wpe(torch.tensor([t if position == "absolute" else 0]))
            for i, block in enumerate(blocks):
                out, caches[i] = _cache_step(block.attn, block.ln_1(x), caches[i])
                x = x + out if residual else out
                x = x + block.mlp(block.ln_2(x))
            logits = model.lm_head(model.transformer.ln_f(x))[:, -1]  # (B, V)
        else:
            logits = model(ids[:, : t + 1])[:, -1]
        if t >= prompt.shape[1] - 1:  # from the prompt's last token on, each step writes one
            ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
    return ids if keep_prompt else ids[:, prompt.shape[1] :]


def _by_library(model, prompt, num_tokens):
    """The library's cached decoding (GPT.start / GPT.step, KVCache)."""
    y0, state = model.start(prompt)
    tokens, _ = load("decoding.greedy")(model.step, y0, state, num_tokens)
    return torch.cat([prompt, tokens], dim=1)


def _attention_decides(model, g, std=0.5):
    """Redraw the weight matrices N(0, std^2). At GPT-2's initialisation (std 0.02) the attention
    barely moves the logits, and a generator without attention wrote the same greedy tokens;
    at 0.5 a missing, shared or never-growing cache changes them (tests/test_assignments.py)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, std, generator=g)
    return model


def _gpt_cases(g):
    config = load("gpt.GPTConfig")
    small = build("gpt.GPT", config(vocab_size=11, block_size=16, n_layer=2, n_head=2, n_embd=16)).eval()
    one = build(
        "gpt.GPT", config(vocab_size=7, block_size=12, n_layer=1, n_head=1, n_embd=8, bias=True)
    ).eval()
    small, one = _attention_decides(small, g), _attention_decides(one, g)
    return [
        Case(
            "2 blocks, a batch of 3 prompts of 4, 6 new tokens",
            small,
            torch.randint(0, 11, (3, 4), generator=g),
            6,
        ),
        Case(
            "1 block, one prompt of 1 token, 8 new tokens", one, torch.randint(0, 7, (1, 1), generator=g), 8
        ),
        Case("2 blocks, up to the context's end", small, torch.randint(0, 11, (2, 9), generator=g), 7),
    ]


register(
    "check_generate_cached",
    Reference(
        seed=7,
        cases=_gpt_cases,
        solution=_generate,
        mistakes=[
            lambda m, p, n: _generate(m, p, n, cached=False),
            lambda m, p, n: _generate(m, p, n, position="zero"),
            lambda m, p, n: _generate(m, p, n, keep_prompt=False),
            lambda m, p, n: _generate(m, p, n, residual=False),
        ],
        shortcuts=[_by_library],
    ),
)
