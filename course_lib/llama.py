"""The modern decoder in one file: `gpt.py` with Llama's block, and a grouped key/value cache.

    x = embed_tokens[idx]                                     token embedding, no positions  (B, T, C)
    x = x + attn(rms_1(x));  x = x + mlp(rms_2(x))             each of the n_layer blocks (pre-norm)
    logits = rms_f(x) @ lm_head^T                              (B, T, V); lm_head = embed_tokens when tied

    attn(x) = concat_i softmax(R q_i (R k_g(i))^T / sqrt(d_k) + causal mask) v_g(i)  @ W_o
    mlp(x)  = (SiLU(x W_gate) * x W_up) W_down                 (width ffn_hidden)

Four changes from GPT-2's block (`gpt.py`), each from its paper:
- RMSNorm (Zhang & Sennrich, 2019) for LayerNorm: x / rms(x) * g, no centring, no bias (`RMSNorm`);
- rotary positions (Su et al., 2021) for the learned position table: queries and keys are
  rotated by their position (R above: chapter 8's `positional.apply_rope`) and nothing is added
  to the embeddings, so the scores depend on positions through their offset only;
- SwiGLU (Shazeer, 2020) for the GELU MLP: a gated layer of three matrices, whose width
  2/3 * 4 C keeps the parameters of GPT's 4 C MLP (`MLP`, `swiglu_hidden`);
- grouped-query attention (Ainslie et al., 2023): n_head query heads share n_kv_head key/value
  heads, query head i reading key/value head g(i) = i // (n_head / n_kv_head); n_kv_head = 1 is
  multi-query attention (Shazeer, 2019), n_kv_head = n_head full multi-head attention. The cache
  holds n_kv_head heads, n_head / n_kv_head times fewer numbers than GPT's (`Attention`).
And no biases anywhere (Llama: Touvron et al., 2023).

`LlamaConfig` holds the sizes; `Llama(config)` builds the model. The names of the modules, and so
of the parameters, are Hugging Face's `LlamaForCausalLM`'s (`model.embed_tokens`,
`model.layers.0.self_attn.q_proj`, `mlp.gate_proj`, `input_layernorm`, `model.norm`, `lm_head`),
which is what lets `Llama.from_hf` load its state dict; `llama_config` reads a
`transformers.LlamaConfig`, and refuses the options this model does not have.

Rotary layout: `apply_rope` rotates the interleaved pairs (2i, 2i+1) of a head, as Su et al. and
Meta's code do; Hugging Face's `rotate_half` rotates the pairs (i, i + d_k/2). The two are the
same model up to a permutation of each head's query and key features, which leaves q . k
unchanged: `from_hf` permutes the rows of q_proj and k_proj into our layout, `to_hf` back
(Hugging Face's convert_llama_weights_to_hf.py applies the same `permute` to Meta's weights).

Initialisation and dropout are gpt.py's (N(0, 0.02), the residual projections o_proj and
down_proj at 0.02 / sqrt(2 n_layer); dropout on the embeddings, the attention weights and after
each residual branch), so that the two models differ by the block only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import decoding
from ._checks import check_ids
from .multihead import KVCache
from .positional import apply_rope

__all__ = ["LlamaConfig", "RMSNorm", "Attention", "MLP", "Block", "Llama", "llama_config",
           "swiglu_hidden"]


def swiglu_hidden(n_embd):
    """SwiGLU's width at the parameters of GPT's 4 C MLP: three (C, H) matrices hold 3 C H = 8 C^2
    numbers when H = 2/3 * 4 C (Shazeer, 2020, keeps the parameters the same way); rounded."""
    return round(8 * n_embd / 3)


@dataclass
class LlamaConfig:
    """The sizes of a Llama. The defaults are gpt.py's GPTConfig's (4 layers, 4 heads, width 128,
    context 64, no dropout, tied embeddings), with full multi-head attention."""

    vocab_size: int
    block_size: int = 64           # the longest context, in tokens
    n_layer: int = 4
    n_head: int = 4                # query heads
    n_kv_head: int | None = None   # key/value heads, dividing n_head; None: n_head (1: multi-query)
    n_embd: int = 128              # the width C of the residual stream; each head has C / n_head
    ffn_hidden: int | None = None  # SwiGLU's width; None: swiglu_hidden(n_embd)
    dropout: float = 0.0
    tie_weights: bool = True       # lm_head shares the token embedding's matrix
    rope_base: float = 10000.0     # RoPE's base (Hugging Face: rope_theta; Llama 3: 500000)
    norm_eps: float = 1e-6         # RMSNorm's epsilon (Hugging Face: rms_norm_eps)

    def __post_init__(self):
        if self.n_kv_head is None:
            self.n_kv_head = self.n_head
        if self.ffn_hidden is None and isinstance(self.n_embd, int):
            self.ffn_hidden = swiglu_hidden(self.n_embd)
        self.validate()

    def validate(self):
        """Raise if a size or option is invalid; `Llama(config)` calls it again, so a config
        edited after construction is checked before it builds a model."""
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_kv_head", "n_embd", "ffn_hidden"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"LlamaConfig.{name} must be a positive int, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"LlamaConfig.n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if self.n_head % self.n_kv_head:
            raise ValueError(f"LlamaConfig.n_head={self.n_head} is not divisible by "
                             f"n_kv_head={self.n_kv_head}: each key/value head serves as many query heads")
        if (self.n_embd // self.n_head) % 2:
            raise ValueError(f"LlamaConfig: the head size n_embd / n_head = {self.n_embd // self.n_head} "
                             f"must be even (RoPE rotates feature pairs)")
        if isinstance(self.dropout, bool) or not 0 <= self.dropout < 1:
            raise ValueError(f"LlamaConfig.dropout must be in [0, 1), got {self.dropout!r}")
        if not isinstance(self.tie_weights, bool):
            raise TypeError(f"LlamaConfig.tie_weights must be a bool, got {self.tie_weights!r}")
        for name in ("rope_base", "norm_eps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"LlamaConfig.{name} must be a positive number, got {value!r}")


class RMSNorm(nn.Module):
    """RMSNorm (Zhang & Sennrich, 2019): y = x / sqrt(mean_j x_j^2 + eps) * g, over the last dim.
    LayerNorm without the mean subtracted and without a bias: one statistic, one parameter."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))               # g
        self.eps = eps

    def forward(self, x):
        rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)   # (..., 1)
        return self.weight * (x * rms)                            # x's shape


class Attention(nn.Module):
    """Causal self-attention with rotary positions and grouped key/value heads.

    forward(x (B, T, C), cache=None) -> (B, T, C). With a KVCache holding the rotated keys and the
    values of the P tokens before x (each (B, n_kv_head, P, d_k)), x's tokens sit at positions
    P..P+T-1 and attend to the cache too; the cache is extended in place. The causal mask is
    built for each call (T, S), not stored as gpt.py's (block_size, block_size) buffer, which a
    Hugging Face config's long context (max_position_embeddings) would make large.
    `last_weights`: (B, n_head, T, P + T), from the last call.
    """

    def __init__(self, config):
        super().__init__()
        self.n_head, self.n_kv_head = config.n_head, config.n_kv_head
        self.d_k = config.n_embd // config.n_head
        self.q_proj = nn.Linear(config.n_embd, self.n_head * self.d_k, bias=False)     # W_q
        self.k_proj = nn.Linear(config.n_embd, self.n_kv_head * self.d_k, bias=False)  # W_k, fewer heads
        self.v_proj = nn.Linear(config.n_embd, self.n_kv_head * self.d_k, bias=False)  # W_v, fewer heads
        self.o_proj = nn.Linear(self.n_head * self.d_k, config.n_embd, bias=False)     # W_o
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.rope_base = config.rope_base
        self.last_weights = None

    def qkv(self, x, start=0):
        """x (B, T, C) at positions start..start+T-1 -> q (B, n_head, T, d_k), k and v
        (B, n_kv_head, T, d_k); q and k rotated by their positions."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_head, self.d_k).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_head, self.d_k).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.d_k).transpose(1, 2)
        return apply_rope(q, self.rope_base, start), apply_rope(k, self.rope_base, start), v

    def forward(self, x, cache=None):
        B, T, C = x.shape
        P = 0 if cache is None else len(cache)                      # tokens already cached
        q, k, v = self.qkv(x, start=P)
        if cache is not None:
            k, v = cache.extend(k, v)                               # (B, h_kv, S, d_k), S = P + T
        S, g = k.shape[2], self.n_head // self.n_kv_head            # g query heads per kv head
        # query head i = j g + r reads kv head j: a group's g heads share one product with K, which
        # is never copied (a broadcast k[:, :, None] would copy it g times)
        q = q.reshape(B, self.n_kv_head, g * T, self.d_k)           # (B, h_kv, g T, d_k)
        att = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)         # (B, h_kv, g T, S)
        att = att.view(B, self.n_kv_head, g, T, S)
        causal = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)   # query i is at S-T+i
        att = att.masked_fill(~causal, float("-inf"))
        att = att.softmax(dim=-1)
        self.last_weights = att.detach().view(B, self.n_head, T, S)
        y = self.attn_dropout(att).view(B, self.n_kv_head, g * T, S) @ v   # (B, h_kv, g T, d_k)
        y = y.view(B, self.n_head, T, self.d_k).transpose(1, 2).reshape(B, T, C)   # heads side by side
        return self.resid_dropout(self.o_proj(y))                   # (B, T, C)


class MLP(nn.Module):
    """SwiGLU (Shazeer, 2020): (SiLU(x W_gate) * (x W_up)) W_down, SiLU(z) = z sigmoid(z)."""

    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.n_embd, config.ffn_hidden, bias=False)
        self.up_proj = nn.Linear(config.n_embd, config.ffn_hidden, bias=False)
        self.down_proj = nn.Linear(config.ffn_hidden, config.n_embd, bias=False)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        h = F.silu(self.gate_proj(x)) * self.up_proj(x)             # (B, T, ffn_hidden)
        return self.dropout(self.down_proj(h))                      # (B, T, C)


class Block(nn.Module):
    """One Llama block, pre-norm: x + attn(rms_1(x)), then x + mlp(rms_2(x))."""

    def __init__(self, config):
        super().__init__()
        self.input_layernorm = RMSNorm(config.n_embd, config.norm_eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.n_embd, config.norm_eps)
        self.mlp = MLP(config)

    def forward(self, x, cache=None):
        x = x + self.self_attn(self.input_layernorm(x), cache)
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x                                                    # (B, T, C)


class Llama(nn.Module):
    """A decoder-only Transformer language model with Llama's block.

    forward(idx (B, T), caches=None) -> logits (B, T, vocab_size); logits[:, t] scores the token
    after idx[:, t]. caches: None, or one KVCache per block holding the P tokens before idx
    (generation): then idx continues that sequence, P + T <= block_size, and the caches grow.
    """

    def __init__(self, config):
        super().__init__()
        if not isinstance(config, LlamaConfig):
            raise TypeError(f"config must be a course_lib.llama.LlamaConfig, got {type(config).__name__} "
                            f"(from a transformers.LlamaConfig: llama_config(hf_config))")
        config.validate()
        self.config = config
        self.model = nn.ModuleDict(dict(
            embed_tokens=nn.Embedding(config.vocab_size, config.n_embd),   # token embedding only
            drop=nn.Dropout(config.dropout),
            layers=nn.ModuleList(Block(config) for _ in range(config.n_layer)),
            norm=RMSNorm(config.n_embd, config.norm_eps),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_weights:
            self.model.embed_tokens.weight = self.lm_head.weight    # one (V, C) matrix, used twice
        self.apply(self._init_weights)
        for name, p in self.named_parameters():                    # GPT-2's scaled residual init
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, caches=None):
        past = 0 if caches is None else self._cached_length(caches)   # P: tokens already cached
        check_ids("idx", idx, self.config.vocab_size, self.config.block_size - past)
        x = self.model.drop(self.model.embed_tokens(idx))          # (B, T, C)
        for block, cache in zip(self.model.layers, caches or [None] * self.config.n_layer):
            x = block(x, cache)
        return self.lm_head(self.model.norm(x))                    # (B, T, V)

    def _cached_length(self, caches):
        if len(caches) != self.config.n_layer or not all(isinstance(c, KVCache) for c in caches):
            raise ValueError(f"caches must be a list of n_layer={self.config.n_layer} KVCache, "
                             f"got {[type(c).__name__ for c in caches]}")
        return len(caches[0])

    def attention_weights(self):
        """The attention weights of the last forward pass: one (B, n_head, T, S) tensor per block."""
        return [block.self_attn.last_weights for block in self.model.layers]

    # -- decoding: the step protocol of course_lib.decoding (as gpt.py) ------------------

    def start(self, prompt, use_cache=True):
        """Read all of prompt (N, P) but its last token, which is the first one fed to `step`.
        -> y0 (N,), state {"ids": the tokens read so far, "caches": KVCaches or None}"""
        check_ids("prompt", prompt, self.config.vocab_size)
        caches = None
        if use_cache and prompt.shape[1] <= self.config.block_size:
            caches = [KVCache() for _ in self.model.layers]
            if prompt.shape[1] > 1:
                self(prompt[:, :-1], caches)                       # fill the caches
        return prompt[:, -1], {"ids": prompt[:, :-1], "caches": caches}

    def step(self, y, state):
        """One token y (N,) -> logits (N, V) of the next one. With caches, only y is computed;
        once the sequence is longer than block_size (the cached keys were rotated by their
        positions from the start), every step re-reads the last block_size tokens, from position 0."""
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
        """Sample `num_tokens` more tokens (`decoding.sample`): idx (B, T) -> (B, T + num_tokens).
        temperature=0 (or top_k=1) is greedy decoding."""
        was_training = self.training
        self.eval()
        y0, state = self.start(idx, use_cache)
        tokens, _ = decoding.sample(self.step, y0, state, num_tokens, temperature, top_k, top_p,
                                    generator=generator)
        self.train(was_training)
        return torch.cat([idx, tokens], dim=1)

    # -- Hugging Face transformers' LlamaForCausalLM ----------------------------------------

    ROTATED = ("self_attn.q_proj.weight", "self_attn.k_proj.weight")   # rows permuted, see below
    SKIPPED = ("rotary_emb.inv_freq",)   # buffers of old checkpoints, recomputed from rope_base

    def _heads_of(self, name):
        return self.config.n_head if name.endswith("q_proj.weight") else self.config.n_kv_head

    @staticmethod
    def halves_to_pairs(w, n_heads):
        """Rows of a q or k projection (n_heads d_k, C) from Hugging Face's layout, where feature
        i of a head pairs with i + d_k/2 (`rotate_half`), to apply_rope's, where 2i pairs with
        2i + 1: our row 2i + c of a head is its row c d_k/2 + i (c = 0, 1)."""
        rows, C = w.shape
        return w.view(n_heads, 2, rows // n_heads // 2, C).transpose(1, 2).reshape(rows, C)

    @staticmethod
    def pairs_to_halves(w, n_heads):
        """The inverse of `halves_to_pairs` (Hugging Face's `permute` of Meta's weights)."""
        rows, C = w.shape
        return w.view(n_heads, rows // n_heads // 2, 2, C).transpose(1, 2).reshape(rows, C)

    @classmethod
    def from_hf(cls, state_dict, config):
        """A Llama holding the weights of a Hugging Face `LlamaForCausalLM`'s state dict.

        config: a LlamaConfig of the same sizes (`llama_config` reads one from a
        `transformers.LlamaConfig`). The names are the same; the rows of q_proj and k_proj are
        permuted into apply_rope's layout. A state dict with a key this config lacks (e.g. a
        layer more) or without one it needs is refused, naming the keys; with tied embeddings
        lm_head.weight may be left out (safetensors files store a tied matrix once).
        """
        model = cls(config)
        ours = model.state_dict()
        embed = state_dict.get("model.embed_tokens.weight")
        if config.tie_weights and "lm_head.weight" not in state_dict and embed is not None:
            state_dict = {**state_dict, "lm_head.weight": embed}   # files store a tied matrix once
        given = {name for name in state_dict if not name.endswith(cls.SKIPPED)}
        missing, extra = sorted(set(ours) - given), sorted(given - set(ours))
        problems = [f"lacks {_few(missing)}"] if missing else []
        problems += [f"has {_few(extra)}, which this model does not"] if extra else []
        if problems:
            raise ValueError(f"state_dict {' and '.join(problems)}: is it a LlamaForCausalLM's of "
                             f"n_layer={config.n_layer} and these sizes ({config})?")
        weights = {}
        for name in ours:
            w = state_dict[name]
            if w.shape != ours[name].shape:
                raise ValueError(f"{name}: the state dict's tensor has shape {tuple(w.shape)}, "
                                 f"this config expects {tuple(ours[name].shape)}")
            weights[name] = cls.halves_to_pairs(w, model._heads_of(name)) if name.endswith(cls.ROTATED) else w
        if config.tie_weights and not torch.equal(weights["lm_head.weight"],
                                                  weights["model.embed_tokens.weight"]):
            raise ValueError("config.tie_weights is True but the state dict's lm_head and "
                             "embed_tokens differ: use tie_weights=False")
        model.load_state_dict(weights)
        return model

    def to_hf(self):
        """This model's weights as a Hugging Face `LlamaForCausalLM` state dict (the inverse of
        `from_hf`): load it with `LlamaForCausalLM(config).load_state_dict(...)`."""
        return {name: self.pairs_to_halves(w, self._heads_of(name)) if name.endswith(self.ROTATED) else w
                for name, w in self.state_dict().items()}


def _few(names, n=4):
    """'[a, b, c, d] ...' for a message: the first n names of a list."""
    return f"{names[:n]}{' ...' if len(names) > n else ''}"


def llama_config(hf_config):
    """The LlamaConfig of a `transformers.LlamaConfig` (read by attribute: no import needed).

    What this model does not have is refused, naming the option and its value, rather than
    loaded into a different model: another model_type, an activation other than SiLU, biases,
    RoPE scaling or a partial rotation, a head size other than hidden_size / num_attention_heads,
    pretraining_tp, attention dropout (this model has one dropout rate for embeddings, attention
    and residual branches; Hugging Face's Llama drops attention weights only)."""
    model_type = getattr(hf_config, "model_type", None)
    if model_type != "llama":
        raise ValueError(f"course_lib.llama does not model model_type={model_type!r}: "
                         f"llama_config reads a transformers.LlamaConfig")
    refused = {}
    d_k = hf_config.hidden_size // hf_config.num_attention_heads
    checks = {"hidden_act": ("silu", "swish"), "attention_bias": (False,), "mlp_bias": (False,),
              "pretraining_tp": (1, None), "attention_dropout": (0, None), "sliding_window": (None,),
              "head_dim": (None, d_k)}     # name: the values this model has
    for name, allowed in checks.items():
        value = getattr(hf_config, name, None)
        if value not in allowed:
            refused[name] = value
    rope = dict(getattr(hf_config, "rope_parameters", None) or {})    # transformers 5
    if not rope:                                                      # transformers 4
        rope = {"rope_type": "default", "rope_theta": getattr(hf_config, "rope_theta", 10000.0)}
        if getattr(hf_config, "rope_scaling", None) is not None:
            refused["rope_scaling"] = hf_config.rope_scaling
    if rope.get("rope_type", "default") != "default" or set(rope) - {"rope_type", "rope_theta"}:
        refused["rope_parameters"] = rope
    if refused:
        said = ", ".join(f"{name}={value!r}" for name, value in refused.items())
        raise ValueError(f"course_lib.llama does not model {said}: refused rather than loaded into "
                         f"a model that computes something else")
    return LlamaConfig(vocab_size=hf_config.vocab_size, block_size=hf_config.max_position_embeddings,
                       n_layer=hf_config.num_hidden_layers, n_head=hf_config.num_attention_heads,
                       n_kv_head=hf_config.num_key_value_heads or hf_config.num_attention_heads,
                       n_embd=hf_config.hidden_size, ffn_hidden=hf_config.intermediate_size,
                       dropout=0.0, tie_weights=hf_config.tie_word_embeddings,
                       rope_base=float(rope.get("rope_theta", 10000.0)), norm_eps=hf_config.rms_norm_eps)
