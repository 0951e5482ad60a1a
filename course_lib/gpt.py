"""A GPT language model in one file: nanoGPT's `model.py`, with a key/value cache.

    x = wte[idx] + wpe[0..T-1]                          token and position embeddings  (B, T, C)
    x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))         each of the n_layer blocks (pre-LN)
    logits = ln_f(x) @ lm_head^T                          (B, T, V); lm_head = wte when tied

    attn(x) = concat_i softmax(q_i k_i^T / sqrt(d_k) + causal mask) v_i  @ W_proj   (n_head heads)
    mlp(x)  = GELU(x W_fc) W_proj                         (width 4 C)

`GPTConfig` holds the sizes; `GPT(config)` builds the model. The names of the modules, and so of
the parameters, are nanoGPT's and GPT-2's (`transformer.wte`, `transformer.h.0.attn.c_attn`,
`lm_head`, ...), which is what lets `GPT.from_gpt2` load a Hugging Face GPT-2 state dict.

What it takes from nanoGPT (karpathy/nanoGPT, model.py, read at commit 3adf61e):
- the modules `CausalSelfAttention` (one `c_attn` for q, k, v; `c_proj`), `MLP` (`c_fc`, GELU,
  `c_proj`), `Block` (pre-LN: `x + attn(ln_1(x))`, `x + mlp(ln_2(x))`) and `GPT` (`wte`, `wpe`,
  dropout, blocks, the final LayerNorm `ln_f`, `lm_head` without bias): model.py, those classes;
- `bias` switches off every bias of the Linears and LayerNorms: `GPTConfig.bias`, whose default
  nanoGPT's train.py sets to False, as here;
- the output layer tied to the token embedding: `GPT.__init__`,
  `self.transformer.wte.weight = self.lm_head.weight` (`tie_weights=False` unties it here);
- GPT-2's initialisation: N(0, 0.02) for every Linear and Embedding weight, zero biases
  (`GPT._init_weights`), and N(0, 0.02 / sqrt(2 n_layer)) for the residual projections, the
  weights ending in `c_proj.weight` (`GPT.__init__`, "per GPT-2 paper");
- exact GELU (`MLP`: `nn.GELU()`), LayerNorm eps 1e-5, dropout on the embeddings, the attention
  weights, and after each residual branch.
What differs: attention is written out (nanoGPT calls F.scaled_dot_product_attention, which
returns no weights; its fallback path is the same arithmetic, and tests/test_unit_gpt.py checks it
against that function), so `attention_weights()` can show them; `forward` returns the logits of
every position and no loss (the course's recipes compute the loss); a key/value cache
(`forward(idx, caches)`) makes generation cheap; `generate` samples through `course_lib.decoding`.
GPT-2's own checkpoints use the tanh approximation of GELU: `gelu_approximate="tanh"`.

Generation: without a cache every new token re-reads the whole prefix; with one (a
`multihead.KVCache` per block) each step computes the query, key and value of the new token only
and attends to the cached keys and values of the earlier ones: the same numbers, fewer operations.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
import torch.nn as nn

from . import decoding
from ._checks import check_ids
from .multihead import KVCache

__all__ = ["GPTConfig", "CausalSelfAttention", "MLP", "Block", "GPT", "gpt2_config", "kv_cache_step",
           "known_word_share"]


@dataclass
class GPTConfig:
    """The sizes of a GPT. The defaults are those of nanoGPT's quick CPU run of its character-level
    Shakespeare model (its README: 4 layers, 4 heads, width 128, context 64, no dropout, no biases,
    tied embeddings; the README's "baby GPT" is the larger 6-layer model it trains on a GPU)."""

    vocab_size: int
    block_size: int = 64           # the longest context, in tokens (positions 0..block_size-1)
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128              # the width C of the residual stream; each head has C / n_head
    dropout: float = 0.0
    bias: bool = False             # biases in the Linears and LayerNorms (GPT-2: True)
    tie_weights: bool = True       # lm_head shares the token embedding's matrix
    gelu_approximate: str = "none"  # "none": exact GELU (nanoGPT); "tanh": GPT-2's checkpoints

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GPTConfig.{name} must be a positive int, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig.n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if isinstance(self.dropout, bool) or not 0 <= self.dropout < 1:
            raise ValueError(f"GPTConfig.dropout must be in [0, 1), got {self.dropout!r}")
        for name in ("bias", "tie_weights"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"GPTConfig.{name} must be a bool, got {getattr(self, name)!r}")
        if self.gelu_approximate not in ("none", "tanh"):
            raise ValueError(f"GPTConfig.gelu_approximate must be 'none' or 'tanh', "
                             f"got {self.gelu_approximate!r}")


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t sees positions <= t only.

    forward(x (B, T, C), cache=None) -> (B, T, C). With a KVCache holding the keys and values of
    the P tokens before x, x's tokens sit at positions P..P+T-1 and attend to the cache too; the
    cache is extended in place. `last_weights`: (B, n_head, T, P + T), from the last call.
    """

    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)   # [W_q W_k W_v]
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)       # W_O
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        causal = torch.ones(config.block_size, config.block_size, dtype=torch.bool).tril()
        self.register_buffer("causal", causal, persistent=False)   # True where a key is visible
        self.last_weights = None

    def qkv(self, x):
        """The queries, keys and values of x (B, T, C), split into heads: each (B, n_head, T, d_k)."""
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)                   # each (B, T, C)
        return [t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v)]

    def forward(self, x, cache=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x)                                       # (B, h, T, d_k)
        if cache is not None:
            k, v = cache.extend(k, v)                               # (B, h, S, d_k), S = P + T
        S = k.shape[2]
        att = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])      # (B, h, T, S)
        att = att.masked_fill(~self.causal[S - T:S, :S], float("-inf"))   # query i is at S-T+i
        att = att.softmax(dim=-1)
        self.last_weights = att.detach()
        y = self.attn_dropout(att) @ v                              # (B, h, T, d_k)
        y = y.transpose(1, 2).reshape(B, T, C)                      # the heads side by side
        return self.resid_dropout(self.c_proj(y))                   # (B, T, C)


class MLP(nn.Module):
    """The position-wise feed-forward network: GELU(x W_fc + b_fc) W_proj + b_proj, width 4 C."""

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU(approximate=config.gelu_approximate)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))   # (B, T, C)


class Block(nn.Module):
    """One Transformer block, pre-LN: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x), cache)
        x = x + self.mlp(self.ln_2(x))
        return x                                                    # (B, T, C)


class GPT(nn.Module):
    """A decoder-only Transformer language model (GPT-2's architecture, nanoGPT's code).

    forward(idx (B, T), caches=None) -> logits (B, T, vocab_size); logits[:, t] scores the token
    after idx[:, t]. caches: None, or one KVCache per block holding the P tokens before idx
    (generation): then idx continues that sequence, P + T <= block_size, and the caches grow.
    """

    def __init__(self, config):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__} "
                            f"(e.g. GPT(GPTConfig(vocab_size=...)))")
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),    # token embedding
            wpe=nn.Embedding(config.block_size, config.n_embd),    # position embedding
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList(Block(config) for _ in range(config.n_layer)),
            ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_weights:
            self.transformer.wte.weight = self.lm_head.weight      # one (V, C) matrix, used twice
        self.apply(self._init_weights)
        for name, p in self.named_parameters():                    # GPT-2's scaled residual init
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def __setattr__(self, name, value):
        """`self.config = config`, the first line of __init__ to use the config, checks it again
        (GPTConfig's own checks): a config edited after construction (say n_head) is refused as
        the model is built instead of building one that fails only in forward."""
        if name == "config" and isinstance(value, GPTConfig):
            value.__post_init__()                                  # GPTConfig's checks, once more
        super().__setattr__(name, value)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, caches=None):
        past = 0 if caches is None else self._cached_length(caches)   # P: tokens already cached
        check_ids("idx", idx, self.config.vocab_size, self.config.block_size - past)
        T = idx.shape[1]
        pos = torch.arange(past, past + T, device=idx.device)       # (T,)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))   # (B, T, C)
        for block, cache in zip(self.transformer.h, caches or [None] * self.config.n_layer):
            x = block(x, cache)
        return self.lm_head(self.transformer.ln_f(x))              # (B, T, V)

    def _cached_length(self, caches):
        if len(caches) != self.config.n_layer or not all(isinstance(c, KVCache) for c in caches):
            raise ValueError(f"caches must be a list of n_layer={self.config.n_layer} KVCache, "
                             f"got {[type(c).__name__ for c in caches]}")
        return len(caches[0])

    def attention_weights(self):
        """The attention weights of the last forward pass: one (B, n_head, T, S) tensor per block."""
        return [block.attn.last_weights for block in self.transformer.h]

    # -- decoding: the step protocol of course_lib.decoding --------------------------------

    def start(self, prompt, use_cache=True):
        """Read all of prompt (N, P) but its last token, which is the first one fed to `step`.
        -> y0 (N,), state {"ids": the tokens read so far, "caches": KVCaches or None}"""
        check_ids("prompt", prompt, self.config.vocab_size)
        caches = None
        if use_cache and prompt.shape[1] <= self.config.block_size:
            caches = [KVCache() for _ in self.transformer.h]
            if prompt.shape[1] > 1:
                self(prompt[:, :-1], caches)                       # fill the caches
        return prompt[:, -1], {"ids": prompt[:, :-1], "caches": caches}

    def step(self, y, state):
        """One token y (N,) -> logits (N, V) of the next one. With caches, only y is computed;
        once the sequence is longer than block_size (positions are absolute, so cached keys
        cannot slide), every step re-reads the last block_size tokens, as without a cache."""
        ids = torch.cat([state["ids"], y[:, None]], dim=1)         # (N, t)
        caches = state["caches"]
        if caches is not None and ids.shape[1] <= self.config.block_size:
            logits = self(y[:, None], caches)                      # the new token only
        else:
            caches = None
            logits = self(ids[:, -self.config.block_size:])        # the whole window again
        return logits[:, -1], {"ids": ids, "caches": caches}

    @torch.no_grad()
    def generate(self, idx, num_tokens, temperature=1.0, top_k=None, top_p=None, use_cache=True,
                 generator=None):
        """Sample `num_tokens` more tokens (`decoding.sample`): idx (B, T) -> (B, T + num_tokens)."""
        was_training = self.training
        self.eval()
        y0, state = self.start(idx, use_cache)
        tokens, _ = decoding.sample(self.step, y0, state, num_tokens, temperature, top_k, top_p,
                                    generator=generator)
        self.train(was_training)
        return torch.cat([idx, tokens], dim=1)

    # -- GPT-2 (Hugging Face transformers) ------------------------------------------------

    # GPT-2's checkpoints store these four weights as `Conv1D`s, (in, out): y = x W + b.
    # nn.Linear stores (out, in) and computes y = x W^T + b, so they are transposed on the way.
    CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")

    @classmethod
    def from_gpt2(cls, state_dict, config):
        """A GPT holding the weights of a Hugging Face `GPT2LMHeadModel`'s state dict.

        config: a GPTConfig of the same sizes with bias=True (`gpt2_config` reads one from a
        `transformers.GPT2Config`). The names are the same; GPT-2's attention-mask buffers, if
        the state dict has any, are skipped. A state dict with a key this model lacks (e.g. a
        layer more, or cross-attention) or without one it needs is refused, naming the keys.
        """
        model = cls(config)
        ours = model.state_dict()
        masks = (".attn.bias", ".attn.masked_bias")               # buffers of older checkpoints
        given = {name for name in state_dict if not name.endswith(masks)}
        missing, extra = sorted(set(ours) - given), sorted(given - set(ours))
        if missing:
            raise ValueError(f"state_dict lacks {_few(missing)}: is it a GPT2LMHeadModel's of "
                             f"n_layer={config.n_layer} and {config}?")
        if extra:
            raise ValueError(f"state_dict has {_few(extra)}, which this model does not: is it a "
                             f"GPT2LMHeadModel's of n_layer={config.n_layer} and {config}?")
        weights = {name: state_dict[name].t() if name.endswith(cls.CONV1D) else state_dict[name]
                   for name in ours}
        for name, w in weights.items():
            if w.shape != ours[name].shape:
                raise ValueError(f"{name}: GPT-2's tensor gives shape {tuple(w.shape)}, "
                                 f"this config expects {tuple(ours[name].shape)}")
        if config.tie_weights and not torch.equal(weights["lm_head.weight"],
                                                  weights["transformer.wte.weight"]):
            raise ValueError("config.tie_weights is True but GPT-2's lm_head and wte differ: "
                             "use tie_weights=False")
        model.load_state_dict(weights)
        return model

    def to_gpt2(self):
        """This model's weights as a Hugging Face `GPT2LMHeadModel` state dict (the inverse of
        `from_gpt2`): load it with `GPT2LMHeadModel(config).load_state_dict(...)`."""
        return {name: w.t().contiguous() if name.endswith(self.CONV1D) else w
                for name, w in self.state_dict().items()}


def gpt2_config(hf_config):
    """The GPTConfig of a `transformers.GPT2Config` (read by attribute: no import needed).

    GPT-2's model is this GPT with biases, an MLP of width 4 C, LayerNorm eps 1e-5 and its own
    GELU ("gelu_new", the tanh approximation; "gelu" is the exact one). What this GPT does not
    have is refused, naming the option and its value, rather than loaded into a different model:
    attention scores not divided by sqrt(d_k) (scale_attn_weights=False) or also divided by the
    layer's number (scale_attn_by_inverse_layer_idx=True), cross-attention, another model_type.
    reorder_and_upcast_attn=True is accepted: it computes the same scores in another order and in
    float32 under mixed precision, the same function (tests/test_parity_gpt2_refusals.py)."""
    unmodelled = {"model_type": ("gpt2",), "scale_attn_weights": (True,),
                  "scale_attn_by_inverse_layer_idx": (False,), "add_cross_attention": (False,)}
    refused = {name: getattr(hf_config, name, None) for name, allowed in unmodelled.items()
               if getattr(hf_config, name, None) not in allowed}
    if refused:
        said = ", ".join(f"{name}={value!r}" for name, value in refused.items())
        raise ValueError(f"course_lib.gpt does not model {said}: refused rather than loaded into "
                         f"a model that computes something else")
    gelu = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh"}
    if hf_config.activation_function not in gelu:
        raise ValueError(f"activation_function {hf_config.activation_function!r} is not one of {list(gelu)}")
    if hf_config.n_inner not in (None, 4 * hf_config.n_embd) or hf_config.layer_norm_epsilon != 1e-5:
        raise ValueError(f"need n_inner None or 4 n_embd and layer_norm_epsilon 1e-5, got "
                         f"{hf_config.n_inner} and {hf_config.layer_norm_epsilon}")
    drops = {hf_config.embd_pdrop, hf_config.attn_pdrop, hf_config.resid_pdrop}
    if len(drops) != 1:
        raise ValueError(f"GPTConfig has one dropout rate; embd_pdrop, attn_pdrop, resid_pdrop are {drops}")
    return GPTConfig(vocab_size=hf_config.vocab_size, block_size=hf_config.n_positions,
                     n_layer=hf_config.n_layer, n_head=hf_config.n_head, n_embd=hf_config.n_embd,
                     dropout=drops.pop(), bias=True, tie_weights=hf_config.tie_word_embeddings,
                     gelu_approximate=gelu[hf_config.activation_function])


def _few(names, n=4):
    """'[a, b, c, d] ...' for a message: the first n names of a list."""
    return f"{names[:n]}{' ...' if len(names) > n else ''}"


def kv_cache_step(attn, x_t, cache=None):
    """One step of a GPT's causal self-attention with a key/value cache, written out
    (`CausalSelfAttention.forward(x, cache)` does the same with a KVCache, inside the GPT).

    attn: a CausalSelfAttention; x_t: (B, 1, C), the newest token; cache: None or (k, v), each
    (B, n_head, t, d_k) -> out (B, 1, C), (k, v) each (B, n_head, t + 1, d_k).
    Fed x[:, 0], x[:, 1], ... in turn, the outputs equal attn(x) (in eval mode).
    """
    q, k, v = attn.qkv(x_t)                                        # each (B, h, 1, d_k)
    if cache is not None:
        k = torch.cat([cache[0], k], dim=2)                        # (B, h, t + 1, d_k)
        v = torch.cat([cache[1], v], dim=2)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), dim=-1)   # (B, h, 1, t + 1)
    y = (weights @ v).transpose(1, 2).reshape(x_t.shape)            # (B, 1, C)
    return attn.c_proj(y), (k, v)


def known_word_share(texts, known_words):
    """How many of the words a model wrote are real: the share of the words of `texts` (runs of
    letters; a text's last run is dropped unless a non-letter follows it, since it may be cut)
    that are in the set `known_words` (e.g. every word of the training text).
    -> (share, number of words)"""
    words = []
    for text in texts:
        runs = re.findall(r"[A-Za-z]+(?=[^A-Za-z])", text)        # complete words only
        words += runs
    if not words:
        raise ValueError("texts hold no complete word")
    return sum(w in known_words for w in words) / len(words), len(words)
