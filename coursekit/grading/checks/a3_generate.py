"""References of assignment 3, parts 5 and 6 and the goal: generation with one key/value cache
per block, nucleus sampling, and a trained reference (model, tokenizer) for the goal (parts 1
and 2 in ``a3.py``, 3 and 4 in ``a3_train.py``).
"""

from __future__ import annotations

from functools import cache

import torch
import torch.nn.functional as F

from course_lib.exercises._variant import variant_seed
from course_lib.exercises.a3 import bpe_training_text, course_text

from ..references import Case, GoalReference, Reference, load, register
from .a3 import GPT, Tokenizer, _config, _weights, train_bpe
from .a3_train import lr_at, make_optimizer, train_step


# ======================================================================================
# Part 5: generation with one key/value cache per block
# ======================================================================================
class CachedGPT(GPT):
    """The reference cached generation; the class attributes are the typical mistakes."""

    cached = True
    position = "absolute"
    keep_prompt = True
    grow = True

    def block_step(self, block, x, cache):
        """x (B, 1, C), cache None or (k, v) each (B, h, t, d) -> x (B, 1, C), the grown cache."""
        attn = block.attn
        q, k, v = (attn.heads(t) for t in attn.qkv(block.ln1(x)).chunk(3, dim=-1))
        if cache is not None and self.grow:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        x = x + attn.attend(q, k, v)
        return x + block.mlp(block.ln2(x)), (k, v)

    @torch.no_grad()
    def generate(self, prompt, num_tokens):
        P = prompt.shape[1]
        caches, ids = [None] * len(self.blocks), prompt
        for t in range(P + num_tokens - 1):
            if self.cached:
                pos = torch.tensor([t if self.position == "absolute" else 0])
                x = self.wte(ids[:, t : t + 1]) + self.wpe(pos)  # (B, 1, C)
                for i, block in enumerate(self.blocks):
                    x, caches[i] = self.block_step(block, x, caches[i])
                logits = self.head(self.ln_f(x))[:, -1]  # (B, V)
            else:
                logits = self(ids[:, : t + 1])[:, -1]
            if t >= P - 1:
                ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
        return ids if self.keep_prompt else ids[:, P:]


def _cached(**attrs):
    return type("CachedGPTMistake", (CachedGPT,), attrs)


class _DecodingGPT(CachedGPT):
    """A shortcut: course_lib's greedy decoding loop."""

    def generate(self, prompt, num_tokens):
        def step(y, state):
            return self(state)[:, -1], state

        load("decoding.greedy")(step, prompt[:, -1], prompt, num_tokens)
        return super().generate(prompt, num_tokens)


class _SdpaCachedGPT(CachedGPT):
    """A shortcut: the cached attention by F.scaled_dot_product_attention."""

    def block_step(self, block, x, cache):
        attn = block.attn
        q, k, v = (attn.heads(t) for t in attn.qkv(block.ln1(x)).chunk(3, dim=-1))
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        y = F.scaled_dot_product_attention(q, k, v)
        B, h, _, d = y.shape
        x = x + attn.out(y.transpose(1, 2).reshape(B, 1, h * d))
        return x + block.mlp(block.ln2(x)), (k, v)


def _generate_cases(g):
    cases = []
    for text, config, B, P, n in [
        ("2 blocks, 2 heads, a batch of 3 prompts of 4, 6 new tokens", _config(11, 16, 2, 2, 16), 3, 4, 6),
        ("1 block, 1 head, a prompt of 1 token, 8 new tokens", _config(7, 12, 1, 1, 8), 1, 1, 8),
        ("2 blocks, up to the context's end", _config(11, 16, 2, 4, 16), 2, 9, 7),
    ]:
        state = _weights(config, g)
        prompt = torch.randint(0, config["vocab_size"], (B, P), generator=g)
        cases.append(Case(text, config, state, prompt, n))
    return cases


register(
    "check_a3_generate_cached",
    Reference(
        seed=38,
        cases=_generate_cases,
        solution=CachedGPT,
        mistakes=[
            _cached(cached=False),
            _cached(position="zero"),
            _cached(keep_prompt=False),
            _cached(grow=False),
        ],
        shortcuts=[_DecodingGPT, _SdpaCachedGPT],
    ),
)


# ======================================================================================
# Part 6: nucleus sampling
# ======================================================================================
def sample_top_p(
    logits, temperature, top_p, generator, keep="before", order="vocabulary", first="temperature"
):
    """The reference; the keywords are the typical mistakes."""
    if temperature == 0:
        return logits.argmax(-1)
    if first == "temperature":
        probs = torch.softmax(logits / temperature, -1)
    else:
        probs = torch.softmax(logits, -1)
    sorted_p, order_ids = probs.sort(-1, descending=True)  # (B, V)
    mass = sorted_p.cumsum(-1)
    keep_sorted = (mass - sorted_p < top_p) if keep == "before" else (mass <= top_p)
    if first != "temperature":
        sorted_p = torch.softmax(logits / temperature, -1).gather(-1, order_ids)
    kept_sorted = sorted_p * keep_sorted
    if order == "sorted":
        return torch.multinomial(kept_sorted, 1, generator=generator).squeeze(-1)
    kept = torch.zeros_like(probs).scatter(-1, order_ids, kept_sorted)
    return torch.multinomial(kept, 1, generator=generator).squeeze(-1)


def _no_zero_case(logits, temperature, top_p, generator):
    """A mistake: no special case for temperature 0 (the division gives inf and NaN)."""
    probs = torch.softmax(logits / temperature, -1)
    if torch.isnan(probs).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    return sample_top_p(logits, temperature, top_p, generator)


def _sampling_cases(g):
    def logits(B, V, scale):
        return torch.randn(B, V, generator=g) * scale

    return [
        Case("64 rows of 10 ids, T=1, top_p=0.8", logits(64, 10, 2.0), 1.0, 0.8, 5),
        Case("64 rows of 12 ids, T=0.7, top_p=0.5", logits(64, 12, 1.5), 0.7, 0.5, 6),
        Case("64 rows of 8 ids, T=1.5, top_p=0.9", logits(64, 8, 3.0), 1.5, 0.9, 7),
        Case("4 rows of 6 ids, temperature 0", logits(4, 6, 1.0), 0, 0.9, 8),
    ]


register(
    "check_a3_sample_top_p",
    Reference(
        seed=39,
        cases=_sampling_cases,
        solution=sample_top_p,
        mistakes=[
            lambda *a: sample_top_p(*a, keep="within"),
            lambda *a: sample_top_p(*a, order="sorted"),
            lambda *a: sample_top_p(*a, first="filter"),
            _no_zero_case,
        ],
        shortcuts=[
            lambda lg, t, p, g: load("decoding.sample_next")(lg, t, top_p=p, generator=g),
            lambda lg, t, p, g: torch.multinomial(
                torch.softmax(load("decoding.top_p_filter")(lg / t, p), -1), 1, generator=g
            ).squeeze(-1),
        ],
    ),
)


# ======================================================================================
# The goal: a trained reference (model, tokenizer)
# ======================================================================================
VOCAB_SIZE, BLOCK_SIZE, N_LAYER, N_HEAD, N_EMBD = 512, 64, 2, 4, 64
STEPS, BATCH, MAX_LR, WARMUP, WEIGHT_DECAY, MAX_NORM = 800, 16, 4e-3, 80, 0.1, 1.0


def train_reference(seed: int | None = None, steps: int = STEPS, vocab_size: int = VOCAB_SIZE):
    """The notebook's pipeline with the references: tokenizer, encoding, training. Returns
    (model, tokenizer). (vocab_size=1024 is the written part's question, measured for the
    rubric's model answer.)"""
    seed = variant_seed() if seed is None else seed
    tokenizer = reference_tokenizer(seed, vocab_size)
    ids = torch.tensor(tokenizer.encode(course_text("train")))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT(vocab_size, BLOCK_SIZE, N_LAYER, N_HEAD, N_EMBD)
    optimizer = make_optimizer(model, MAX_LR, WEIGHT_DECAY)
    g = torch.Generator().manual_seed(seed * 7919 + 1)
    offsets = torch.arange(BLOCK_SIZE + 1)
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, MAX_LR, WARMUP, steps, MAX_LR / 10)
        starts = torch.randint(0, len(ids) - BLOCK_SIZE - 1, (BATCH, 1), generator=g)
        windows = ids[starts + offsets]  # (B, T + 1)
        train_step(model, optimizer, windows[:, :-1], windows[:, 1:], MAX_NORM)
    return model.eval(), tokenizer


@cache
def reference_tokenizer(seed: int, vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """The notebook's tokenizer for the variant ``seed``: 512 tokens from 150,000 characters."""
    return Tokenizer(train_bpe(bpe_training_text(seed), vocab_size))


@cache
def _trained():
    return train_reference()


def _untrained():
    tokenizer = reference_tokenizer(variant_seed())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        fresh = GPT(VOCAB_SIZE, BLOCK_SIZE, N_LAYER, N_HEAD, N_EMBD).eval()
    return fresh, tokenizer


register("check_a3_heldout_bpc", GoalReference(passing=_trained, missing=_untrained))
