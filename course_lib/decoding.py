"""Decoding: turning a model that scores the next token into an output sequence.

Every model of the course that writes one token at a time (the character-level RNN, the
seq2seq decoders, the Transformer's decoder, the GPT) offers the same step:

    logits, state = step(y, state)        y: (N,) the last token of each row -> logits: (N, V)

`state` is whatever the model carries from one step to the next (an RNN's hidden state, the
encoder's memory, a key/value cache): tensors with the batch in dim 0, possibly inside dicts,
tuples, lists or dataclasses, so that `select_rows` can reorder the rows for beam search.
Decoding starts from y0 (N,), the first token to feed (<bos>, or a prompt's last token).
On that one step this module builds three decoders:

    greedy       y_t = argmax_v p(v | y_<t)
    sample       y_t ~ softmax(logits_t / temperature), optionally only among the k most likely
                 tokens (top-k) or the smallest set whose probability reaches p (top-p, nucleus)
    beam_search  keep the K most likely prefixes; rank the finished ones by log p / length^alpha

Greedy decoding is a beam of one, and sampling at temperature 0 is greedy decoding.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from ._checks import check_int

__all__ = ["select_rows", "top_k_filter", "top_p_filter", "sample_next", "decode", "greedy",
           "sample", "beam_step", "beam_search"]


def select_rows(state, idx):
    """The state with every tensor indexed by `idx` along dim 0 (rows reordered or repeated).

    Tensors, and tensors inside dicts, lists, tuples and dataclasses, are indexed; anything
    else (an int position, None) is shared by all rows and returned as is.
    """
    if isinstance(state, torch.Tensor):
        return state[idx]
    if isinstance(state, dict):
        return {key: select_rows(value, idx) for key, value in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(select_rows(value, idx) for value in state)
    if dataclasses.is_dataclass(state):
        return dataclasses.replace(state, **{f.name: select_rows(getattr(state, f.name), idx)
                                             for f in dataclasses.fields(state)})
    return state


# ---------------------------------------------------------------------------
# Choosing the next token
# ---------------------------------------------------------------------------

def top_k_filter(logits, k):
    """Keep the k largest logits of each row and set the others to -inf.  (N, V) -> (N, V)"""
    check_int("top_k", k)
    k = min(k, logits.shape[-1])
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]  # (N, 1)
    return logits.masked_fill(logits < kth_largest, -math.inf)


def top_p_filter(logits, p):
    """Nucleus filtering (Holtzman et al., 2020): keep the smallest set of most likely tokens
    whose probabilities sum to at least p, set the others to -inf.  (N, V) -> (N, V)

    The most likely token is always kept, so p -> 0 gives greedy decoding and p = 1 keeps all.
    """
    if not 0 < p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {p!r}")
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (N, V), most likely first
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # (N, V): probability of the tokens ranked above
    sorted_logits = sorted_logits.masked_fill(mass_before >= p, -math.inf)
    return torch.empty_like(logits).scatter_(-1, order, sorted_logits)  # back to vocabulary order


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Draw one token per row from softmax(logits / temperature), after top-k / top-p filtering.

    temperature 1 samples the model's own distribution; below 1 sharpens it (towards the most
    likely token), above 1 flattens it (towards uniform); 0 is the limit: the argmax.

    logits: (N, V) -> ids: (N,) long
    """
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature < 0:
        raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (N, V), got shape {tuple(logits.shape)}")
    if temperature == 0:
        return logits.argmax(dim=-1)  # (N,)
    logits = logits / temperature
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = torch.softmax(logits, dim=-1)  # (N, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (N,)


# ---------------------------------------------------------------------------
# Left to right, one token per step: greedy decoding and sampling
# ---------------------------------------------------------------------------

@torch.no_grad()
def decode(step, y0, state, max_len, choose, eos_id=None):
    """The loop that greedy decoding and sampling share: feed y, choose the next token from the
    logits, feed it back; a row that wrote eos_id is finished (eos_id after it).

    step(y (N,), state) -> (logits (N, V), state);  choose(logits (N, V)) -> (N,) ids
    -> tokens (N, L), L <= max_len, and log_prob (N,): sum of log p of each row's tokens up to
       and including its first eos.
    """
    check_int("max_len", max_len)
    y, tokens = y0, []
    done = torch.zeros_like(y0, dtype=torch.bool)
    log_prob = torch.zeros(y0.shape[0], device=y0.device)
    for _ in range(max_len):
        logits, state = step(y, state)  # (N, V)
        y = choose(logits)  # (N,)
        logp = logits.float().log_softmax(-1).gather(-1, y[:, None]).squeeze(-1)  # (N,)
        log_prob += logp.masked_fill(done, 0.0)
        if eos_id is not None:
            y = y.masked_fill(done, eos_id)
            done |= y == eos_id
        tokens.append(y)
        if bool(done.all()):
            break
    return torch.stack(tokens, dim=1), log_prob


def greedy(step, y0, state, max_len, eos_id=None):
    """Greedy decoding: y_t = argmax_v p(v | y_<t).  -> tokens (N, L), log_prob (N,)"""
    return decode(step, y0, state, max_len, lambda logits: logits.argmax(-1), eos_id)


def sample(step, y0, state, max_len, temperature=1.0, top_k=None, top_p=None, eos_id=None,
           generator=None):
    """Sampling: y_t ~ softmax(logits_t / temperature) (after top-k / top-p filtering).
    -> tokens (N, L), log_prob (N,) under the model's own distribution."""
    def choose(logits):
        return sample_next(logits, temperature, top_k, top_p, generator)
    return decode(step, y0, state, max_len, choose, eos_id)


# ---------------------------------------------------------------------------
# Beam search
# ---------------------------------------------------------------------------

def beam_step(scores, logp, beam_size):
    """One step of beam search: extend every beam by every token, keep the best `beam_size`.

        candidate (k, v) scores  scores[k] + log p(v | beam k)

    scores: (B, K) log-probabilities of the beams so far, logp: (B, K, V) of the next token
        ->  new scores (B, beam_size), beam (B, beam_size) which beam each survivor extends,
            token (B, beam_size) the token it appends; best first.
    """
    B, K, V = logp.shape
    candidates = (scores[..., None] + logp).reshape(B, K * V)  # (B, K*V)
    new_scores, idx = candidates.topk(beam_size, dim=-1)  # (B, beam_size)
    return new_scores, idx // V, idx % V


@torch.no_grad()
def beam_search(step, y0, state, max_len, beam_size=4, eos_id=None, length_penalty=0.0):
    """Keep the `beam_size` most likely prefixes of each row at every step.

    Every beam is extended by every token and the K best of the K*V candidates survive, by
    summed log-probability. A finished beam (it wrote eos_id) keeps its score and may only be
    extended by eos, at no cost. At the end the beams are ranked by

        log p(y) / |y|^length_penalty      (|y| counts the tokens up to and including eos)

    length_penalty 0 ranks by log p, which favours short outputs (every token costs log p < 0);
    1 ranks by the mean log-probability per token. beam_size=1 is greedy decoding.

    -> tokens (N, K, L) best first (eos after the end), log_prob (N, K) (before the penalty)
    """
    check_int("beam_size", beam_size)
    check_int("max_len", max_len)
    N, K, device = y0.shape[0], beam_size, y0.device
    rows = torch.arange(N, device=device).repeat_interleave(K)  # (N*K,): beam -> its row
    state, y = select_rows(state, rows), y0[rows]
    scores = torch.full((N, K), -math.inf, device=device)
    scores[:, 0] = 0.0  # one live beam at the start
    done = torch.zeros(N, K, dtype=torch.bool, device=device)
    lengths = torch.zeros(N, K, device=device)
    tokens = torch.zeros(N, K, 0, dtype=torch.long, device=device)
    for _ in range(max_len):
        logits, state = step(y, state)  # (N*K, V)
        logp = logits.float().log_softmax(-1).view(N, K, -1)  # (N, K, V)
        if eos_id is not None:
            only_eos = torch.full_like(logp[0, 0], -math.inf)
            only_eos[eos_id] = 0.0
            logp = torch.where(done[..., None], only_eos, logp)  # finished: eos, free
        scores, beam, token = beam_step(scores, logp, K)  # (N, K) each
        tokens = torch.cat([tokens.gather(1, beam[..., None].expand_as(tokens)), token[..., None]], -1)
        lengths = lengths.gather(1, beam) + (~done.gather(1, beam)).float()
        done = done.gather(1, beam) | (token == eos_id if eos_id is not None else False)
        flat = (torch.arange(N, device=device)[:, None] * K + beam).view(-1)  # (N*K,)
        state, y = select_rows(state, flat), token.view(-1)
        if bool(done.all()):
            break
    ranked = scores / lengths.clamp_min(1) ** length_penalty
    order = ranked.argsort(dim=-1, descending=True)  # (N, K)
    return tokens.gather(1, order[..., None].expand_as(tokens)), scores.gather(1, order)
