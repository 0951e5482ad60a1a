"""Sequence to sequence with recurrent networks, with and without attention.

An encoder reads the source x_1..x_S into states h_1..h_S; a decoder writes the
target y_1..y_T one token at a time, each step fed the token it wrote before.

    encoder      h_j = RNN(embed(x_j), h_{j-1})                                  (B, S, H_enc)
    bridge       s_0 = tanh(W_init h_S)             the context vector starts the decoder
                 (Cho et al., 2014's form; Sutskever et al., 2014 copy the encoder's last state)

Three decoders differ in what a step t sees of the source:

    RNNDecoder (no attention, as in Sutskever et al., 2014 and Cho et al., 2014): only s_0.
        s_t = RNN(embed(y_{t-1}), s_{t-1});   p(y_t) = softmax(W_o s_t)

    BahdanauDecoder (Bahdanau et al., 2015): a fresh context, scored with the PREVIOUS
    state, read BEFORE the RNN step and fed INTO it.
        a_tj = softmax_j(score(s_{t-1}, h_j));   c_t = sum_j a_tj h_j
        s_t = RNN([embed(y_{t-1}); c_t], s_{t-1});   p(y_t) = softmax(W_o [s_t; c_t; embed(y_{t-1})])

    LuongDecoder (Luong et al., 2015): the RNN steps first; the CURRENT state scores the
    source; the context and the state make the "attentional hidden state" that feeds
    the output layer (and, with input feeding, the next step).
        s_t = RNN(embed(y_{t-1}) [; h~_{t-1}], s_{t-1})
        a_tj = softmax_j(score(s_t, h_j));   c_t = sum_j a_tj h_j
        h~_t = tanh(W_c [c_t; s_t]);   p(y_t) = softmax(W_s h~_t)
    Local attention (`local_weights`) looks at |j - p_t| <= D only: p_t = t or predicted.

Scores: `attention.make_score`. Recurrent parts: `course_lib.rnn`. Decoding: `course_lib.decoding`
over `Seq2Seq.start` (encode) and `.step` (one token); `translate`, `evaluate`: strings in and out.

Shapes: B batch, S source length, T target length, V target vocabulary, E embedding size,
H decoder hidden size, H_enc = D * hidden (D = 2 if bidirectional).
Padding: ids are right-padded with `pad_id`; `src_len` (B,) gives the true lengths.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import attention as A
from . import decoding, rnn
from ._checks import (check_bool, check_choice, check_decoder_step, check_int, check_local_inputs,
                      check_seq2seq_inputs, check_source)

__all__ = ["local_weights", "reverse_padded", "Memory", "Encoder", "RNNDecoder", "BahdanauDecoder",
           "LuongDecoder", "Seq2Seq", "build_model", "seq2seq_loss", "sequence_log_prob", "translate",
           "evaluate"]

CELLS = {"gru": (rnn.GRU, rnn.GRUCell), "lstm": (rnn.LSTM, rnn.LSTMCell)}


# ---------------------------------------------------------------------------
# 1. Luong's local attention: a window of the source
# ---------------------------------------------------------------------------

def local_weights(scores, mask, p, window, gaussian=True, check_inputs=True):
    """Luong's local attention: a softmax only over the window |j - p_t| <= D around p_t,

        a_tj = softmax_{|j' - p_t| <= D}(score_tj) * exp(-(j - p_t)^2 / (2 sigma^2)),  sigma = D / 2

    (the Gaussian factor with gaussian=True, as in local-p; local-m uses p_t = t without it).
    An empty window gives zero weights. check_inputs=False: no input check (Luong's decoder).

    scores: (B, T, S), mask: (B, S) bool (True = real position), p: (B, T) window centres
        ->  weights: (B, T, S)
    """
    if check_inputs:
        check_local_inputs(scores, mask, p)
    j = torch.arange(scores.shape[-1], device=scores.device)  # (S,)
    dist = j - p[..., None]  # (B, T, S): distance of each position from the centre
    allowed = mask[:, None, :] & (dist.abs() <= window)  # (B, T, S)
    weights = A._masked_softmax(scores, allowed)  # (B, T, S)
    if gaussian:
        sigma = max(window / 2, 0.5)
        weights = weights * torch.exp(-dist**2 / (2 * sigma**2))
    return weights


# ---------------------------------------------------------------------------
# 2. The encoder and what the decoder may read of it
# ---------------------------------------------------------------------------

def reverse_padded(x, lengths):
    """Reverse each sequence within its length, leaving the padding where it is.

    x: (B, S, ...), lengths: (B,)  ->  (B, S, ...) with out[b, j] = x[b, len_b - 1 - j] for j < len_b
    """
    B, S = x.shape[:2]
    j = torch.arange(S, device=x.device).expand(B, S)  # (B, S)
    lengths = lengths.to(x.device)[:, None]
    idx = torch.where(j < lengths, lengths - 1 - j, j)  # (B, S)
    return x.gather(1, idx.view(B, S, *([1] * (x.dim() - 2))).expand_as(x))


@dataclass
class Memory:
    """The encoder's output, as the decoder sees it.

    outputs: (B, S, H_enc) the states h_1..h_S (zero at padding)
    mask:    (B, S) bool, True at real source positions
    final:   (B, H_enc) the last state h_S of each sequence: the "context vector"
    lengths: (B,) source lengths
    """
    outputs: torch.Tensor
    mask: torch.Tensor
    final: torch.Tensor
    lengths: torch.Tensor


class Encoder(nn.Module):
    """Embedding + a GRU or LSTM (course_lib.rnn), optionally bidirectional.

    The backward direction reads each sequence from its own last token (not from
    the padding): it is a forward RNN run on `reverse_padded` input.

    forward(src (B, S) ids, src_len (B,)) -> Memory with outputs (B, S, D*hidden_size)
    """

    def __init__(self, vocab_size, embed_size, hidden_size, cell="gru", bidirectional=False, pad_id=0):
        super().__init__()
        check_choice("cell", cell, CELLS)
        layer = CELLS[cell][0]
        self.cell, self.pad_id = cell, pad_id
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.hidden_size = hidden_size
        self.output_size = hidden_size * (2 if bidirectional else 1)
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.rnn = layer(embed_size, hidden_size)
        self.rnn_backward = layer(embed_size, hidden_size) if bidirectional else None

    def forward(self, src, src_len):
        return self._forward(src, check_source(src, src_len))

    def _forward(self, src, src_len):
        """The encoder's arithmetic, inputs unchecked (`forward` and `Seq2Seq.forward` check them)."""
        mask = torch.arange(src.shape[1], device=src.device) < src_len[:, None]  # (B, S)
        x = self.embed(src)  # (B, S, E)
        outputs = self.rnn._forward(x)[0]  # (B, S, H)
        if self.bidirectional:
            backward = reverse_padded(self.rnn_backward._forward(reverse_padded(x, src_len))[0], src_len)
            outputs = torch.cat([outputs, backward], dim=-1)  # (B, S, 2H)
        outputs = outputs * mask[..., None]  # zero at padding
        last = (src_len - 1).view(-1, 1, 1).expand(-1, 1, self.hidden_size)
        final = outputs[..., : self.hidden_size].gather(1, last).squeeze(1)  # (B, H): forward h_S
        if self.bidirectional:
            final = torch.cat([final, outputs[:, 0, self.hidden_size:]], dim=-1)  # + backward h_1
        return Memory(outputs, mask, final, src_len)


# ---------------------------------------------------------------------------
# 3. Decoders: init_state(memory) -> state; step(y_prev, state) -> logits, state, weights
# ---------------------------------------------------------------------------

class _Decoder(nn.Module):
    """What the three decoders share: embedding, recurrent cell, bridge, state handling.

    A decoder state is a dict: "h" (and "c" for an LSTM) (B, H), the encoder's "memory",
    and what a decoder needs to carry (Luong's step "t" and input feeding "feed").
    """

    def __init__(self, vocab_size, embed_size, hidden_size, enc_size, rnn_input_size,
                 cell="gru", pad_id=0):
        super().__init__()
        check_choice("cell", cell, CELLS)
        self.cell_kind, self.hidden_size = cell, hidden_size
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.cell = CELLS[cell][1](rnn_input_size, hidden_size)
        self.bridge = nn.Linear(enc_size, hidden_size)  # s_0 = tanh(W_init h_S)

    def init_state(self, memory):
        h = torch.tanh(self.bridge(memory.final))  # (B, H)
        state = {"h": h, "memory": memory}
        if self.cell_kind == "lstm":
            state["c"] = torch.zeros_like(h)
        return state

    def _rnn(self, x, state):
        """One step of the recurrent cell (its unchecked `_forward`): returns the new state dict."""
        new = dict(state)
        if self.cell_kind == "lstm":
            new["h"], new["c"] = self.cell._forward(x, (state["h"], state["c"]))
        else:
            new["h"] = self.cell._forward(x, state["h"])
        return new

    def _unroll(self, x, state):
        """The RNN alone over inputs x (B, T, E_in) -> states (B, T, H), final state."""
        s = []
        for t in range(x.shape[1]):
            state = self._rnn(x[:, t], state)
            s.append(state["h"])
        return torch.stack(s, 1), state

    def step(self, y_prev, state):
        """Check y_prev (B,) and the state, then run `_step` (which the model's forward calls)."""
        check_decoder_step(y_prev, state, self.embed.num_embeddings, self.bridge.in_features)
        return self._step(y_prev, state)

    def forward(self, tgt_in, state):
        """Teacher forcing: tgt_in (B, T) -> logits (B, T, V), weights (B, T, S) or None."""
        logits, weights = [], []
        for t in range(tgt_in.shape[1]):
            step_logits, state, w = self._step(tgt_in[:, t], state)
            logits.append(step_logits)
            weights.append(w)
        return torch.stack(logits, 1), (None if weights[0] is None else torch.stack(weights, 1))


class RNNDecoder(_Decoder):
    """No attention (as in Sutskever et al., 2014): the source reaches the decoder only through
    s_0, here tanh(W_init h_S), Cho et al. (2014)'s start (Sutskever et al. copy h_S itself).

        s_t = RNN(embed(y_{t-1}), s_{t-1});   logits_t = W_o s_t
    """

    def __init__(self, vocab_size, embed_size, hidden_size, enc_size, cell="gru", pad_id=0):
        super().__init__(vocab_size, embed_size, hidden_size, enc_size, embed_size, cell, pad_id)
        self.out = nn.Linear(hidden_size, vocab_size)

    def _step(self, y_prev, state):
        state = self._rnn(self.embed(y_prev), state)  # (B, H)
        return self.out(state["h"]), state, None  # (B, V)

    def forward(self, tgt_in, state):
        s, _ = self._unroll(self.embed(tgt_in), state)  # (B, T, H), teacher forcing
        return self.out(s), None  # (B, T, V)


class BahdanauDecoder(_Decoder):
    """Bahdanau et al. (2015): score with the previous state, feed the context into the RNN.

        a_t = softmax(score(s_{t-1}, h_1..h_S));   c_t = sum_j a_tj h_j
        s_t = RNN([embed(y_{t-1}); c_t], s_{t-1})
        logits_t = W_o [s_t; c_t; embed(y_{t-1})]
    """

    def __init__(self, vocab_size, embed_size, hidden_size, enc_size, score="concat", cell="gru",
                 pad_id=0, max_src_len=None):
        super().__init__(vocab_size, embed_size, hidden_size, enc_size, embed_size + enc_size,
                         cell, pad_id)
        self.score = A.make_score(score, hidden_size, enc_size, hidden_size, max_src_len, check_inputs=False)
        self.out = nn.Linear(hidden_size + enc_size + embed_size, vocab_size)

    def _step(self, y_prev, state):
        memory = state["memory"]
        e = self.embed(y_prev)  # (B, E)
        scores = self.score(state["h"][:, None], memory.outputs)  # (B, 1, S), from s_{t-1}
        weights = A._masked_softmax(scores, memory.mask[:, None])  # (B, 1, S): softmax over real positions
        context = (weights @ memory.outputs).squeeze(1)  # (B, H_enc) = sum_j a_tj h_j
        state = self._rnn(torch.cat([e, context], -1), state)  # s_t: (B, H)
        logits = self.out(torch.cat([state["h"], context, e], -1))  # (B, V)
        return logits, state, weights.squeeze(1)  # weights: (B, S)


class LuongDecoder(_Decoder):
    """Luong et al. (2015): step first, score with the current state, attentional hidden state.

        s_t = RNN(embed(y_{t-1}) [; h~_{t-1} with input_feeding], s_{t-1})
        a_t = softmax(score(s_t, h_1..h_S))     (within |j - p_t| <= window if window)
        c_t = sum_j a_tj h_j;   h~_t = tanh(W_c [c_t; s_t]);   logits_t = W_s h~_t

    Without input feeding, the RNN does not depend on the attention, so teacher-forced
    training runs the RNN over all T steps first and attends for all of them at once.
    """

    def __init__(self, vocab_size, embed_size, hidden_size, enc_size, score="general", cell="gru",
                 pad_id=0, max_src_len=None, window=None, local="predictive", input_feeding=False):
        rnn_input = embed_size + (hidden_size if input_feeding else 0)
        super().__init__(vocab_size, embed_size, hidden_size, enc_size, rnn_input, cell, pad_id)
        self.window = None if window is None else check_int("window", window, minimum=0)
        self.local = check_choice("local", local, ("predictive", "monotonic"))
        self.input_feeding = check_bool("input_feeding", input_feeding)
        self.score = A.make_score(score, hidden_size, enc_size, hidden_size, max_src_len, check_inputs=False)
        self.W_c = nn.Linear(enc_size + hidden_size, hidden_size, bias=False)
        self.out = nn.Linear(hidden_size, vocab_size)  # W_s
        if window is not None and local == "predictive":
            self.W_p = nn.Linear(hidden_size, hidden_size, bias=False)
            self.v_p = nn.Linear(hidden_size, 1, bias=False)

    def init_state(self, memory):
        state = super().init_state(memory)
        state["t"] = torch.zeros_like(memory.lengths)  # (B,) the step, for local-m
        if self.input_feeding:
            state["feed"] = torch.zeros_like(state["h"])  # h~_0 = 0
        return state

    def attention(self, s, memory, t):
        """Attend from states s (B, T, H) at steps t (B, T) -> context (B, T, H_enc), weights (B, T, S)."""
        scores = self.score(s, memory.outputs)  # (B, T, S)
        if self.window is None:  # global attention
            weights = A._masked_softmax(scores, memory.mask[:, None, :])  # (B, T, S)
            return weights @ memory.outputs, weights
        if self.local == "monotonic":
            p = t.to(s.dtype)  # (B, T): p_t = t
        else:  # p_t = S * sigmoid(v_p^T tanh(W_p s_t)), S = the source length
            S = memory.lengths[:, None].to(s.dtype)  # (B, 1)
            p = S * torch.sigmoid(self.v_p(torch.tanh(self.W_p(s)))).squeeze(-1)  # (B, T)
        weights = local_weights(scores, memory.mask, p, self.window,
                                gaussian=self.local == "predictive", check_inputs=False)  # (B, T, S)
        return weights @ memory.outputs, weights

    def _output(self, context, s):
        h_tilde = torch.tanh(self.W_c(torch.cat([context, s], -1)))  # (..., H)
        return self.out(h_tilde), h_tilde

    def _step(self, y_prev, state):
        x = self.embed(y_prev)  # (B, E)
        if self.input_feeding:
            x = torch.cat([x, state["feed"]], -1)  # (B, E + H)
        state = self._rnn(x, state)  # s_t: (B, H)
        context, weights = self.attention(state["h"][:, None], state["memory"], state["t"][:, None])
        logits, h_tilde = self._output(context.squeeze(1), state["h"])  # (B, V), (B, H)
        state["t"] = state["t"] + 1
        if self.input_feeding:
            state["feed"] = h_tilde
        return logits, state, weights.squeeze(1)

    def forward(self, tgt_in, state):
        if self.input_feeding:
            return super().forward(tgt_in, state)  # sequential: step by step
        t = state["t"][:, None] + torch.arange(tgt_in.shape[1], device=tgt_in.device)  # (B, T)
        s, _ = self._unroll(self.embed(tgt_in), state)  # (B, T, H): the RNN alone
        context, weights = self.attention(s, state["memory"], t)  # all T steps at once
        return self._output(context, s)[0], weights


# ---------------------------------------------------------------------------
# 4. The model: training pass, decoding step; strings in, strings out
# ---------------------------------------------------------------------------

class Seq2Seq(nn.Module):
    """An encoder and a decoder.

    forward(src (B, S), src_len (B,), tgt_in (B, T)) -> logits (B, T, V), weights (B, T, S) or None
    start(src, src_len) -> state;  step(y (B,), state) -> logits (B, V), state: decoding's protocol.
    """

    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.max_src_len = getattr(getattr(decoder, "score", None), "T_k", None)  # location score's limit

    def encode(self, src, src_len):
        return self.encoder(src, src_len)

    def forward(self, src, src_len, tgt_in):
        src_len = check_seq2seq_inputs(src, src_len, tgt_in, self.max_src_len)  # the one check
        state = self.decoder.init_state(self.encoder._forward(src, src_len))  # s_0, the memory
        return self.decoder(tgt_in, state)  # teacher forcing: (B, T, V), (B, T, S) or None

    def start(self, src, src_len):
        """Encode the source once: the decoder's initial state, which holds the memory."""
        src_len = check_source(src, src_len, self.max_src_len)
        return self.decoder.init_state(self.encoder._forward(src, src_len))

    def step(self, y, state):
        """One decoding step from `start`'s state, unchecked (y: the model's own tokens)."""
        logits, state, _ = self.decoder._step(y, state)
        return logits, state


def build_model(src_vocab_size, tgt_vocab_size, attention=None, score=None, hidden_size=64,
                embed_size=32, cell="gru", bidirectional=False, pad_id=0, max_src_len=None,
                window=None, local="predictive", input_feeding=False):
    """A Seq2Seq model: attention=None (Sutskever), "bahdanau" or "luong".

    score: the score function (default: "concat" for Bahdanau, "general" for Luong).
    window, local, input_feeding: Luong's local attention and input feeding.
    """
    encoder = Encoder(src_vocab_size, embed_size, hidden_size, cell, bidirectional, pad_id)
    common = dict(vocab_size=tgt_vocab_size, embed_size=embed_size, hidden_size=hidden_size,
                  enc_size=encoder.output_size, cell=cell, pad_id=pad_id)
    check_choice("attention", attention, (None, "bahdanau", "luong"))
    if attention is None:
        if score is not None:
            raise ValueError(f"score={score!r} needs an attention decoder (attention='bahdanau' or 'luong')")
        decoder = RNNDecoder(**common)
    elif attention == "bahdanau":
        decoder = BahdanauDecoder(**common, score=score or "concat", max_src_len=max_src_len)
    else:
        decoder = LuongDecoder(**common, score=score or "general", max_src_len=max_src_len,
                               window=window, local=local, input_feeding=input_feeding)
    return Seq2Seq(encoder, decoder)


def seq2seq_loss(model, batch, pad_id=0):
    """Teacher-forced cross-entropy per target token (padding ignored); batch: the dict of
    `data.encode_pairs` (src, src_len, tgt_in, tgt_out)."""
    logits, _ = model(batch["src"], batch["src_len"], batch["tgt_in"])  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), batch["tgt_out"].flatten(), ignore_index=pad_id)


@torch.no_grad()
def sequence_log_prob(model, src, src_len, tgt_in, tgt_out, pad_id=0):
    """log p(y | x) of given targets, summed over their tokens: (B,)."""
    logits, _ = model(src, src_len, tgt_in)  # (B, T, V)
    logp = logits.log_softmax(-1).gather(-1, tgt_out.clamp_min(0)[..., None]).squeeze(-1)  # (B, T)
    return (logp * (tgt_out != pad_id)).sum(-1)


@torch.no_grad()
def translate(model, sources, src_vocab, tgt_vocab, max_len=None, beam_size=1, length_penalty=0.0,
              batch_size=1000, return_weights=False):
    """Decode source strings in eval mode: greedy (beam_size=1) or beam search
    (`course_lib.decoding`). -> output strings. With return_weights (greedy only): also the
    attention weights of each output, a list of (T_i, S_i) tensors (empty without attention),
    from a teacher-forced pass over the decoded tokens (the same computation as the steps).
    """
    from .data import pad_batch  # local import: data imports nothing from here

    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    max_len = max_len or 2 * max(len(s) for s in sources) + 2
    outputs, all_weights = [], []
    for i in range(0, len(sources), batch_size):
        chunk = sources[i:i + batch_size]
        src, src_len = pad_batch([src_vocab.encode(s) for s in chunk], src_vocab.pad_id)
        src, src_len = src.to(device), src_len.to(device)
        y0 = torch.full_like(src_len, tgt_vocab.bos_id)  # (B,)
        state = model.start(src, src_len)
        if beam_size == 1:
            tokens, _ = decoding.greedy(model.step, y0, state, max_len, tgt_vocab.eos_id)
        else:
            tokens = decoding.beam_search(model.step, y0, state, max_len, beam_size,
                                          tgt_vocab.eos_id, length_penalty)[0][:, 0]
        texts = [tgt_vocab.decode(row) for row in tokens.cpu()]
        outputs += texts
        if return_weights:
            tgt_in = torch.cat([y0[:, None], tokens[:, :-1]], dim=1)  # <bos> y_1 ... y_{L-1}
            _, weights = model(src, src_len, tgt_in)  # (B, L, S), None without attention
            all_weights += [] if weights is None else [weights[b, : len(text) + 1, : len(chunk[b])].cpu()
                                                       for b, text in enumerate(texts)]
    model.train(was_training)
    return (outputs, all_weights) if return_weights else outputs


def evaluate(model, pairs, src_vocab, tgt_vocab, beam_size=1):
    """Held-out metrics of (source, target) string pairs: exact match and per-position accuracy."""
    from .train import exact_match, position_accuracy

    predictions = translate(model, [s for s, _ in pairs], src_vocab, tgt_vocab,
                            max_len=max(len(t) for _, t in pairs) + 2, beam_size=beam_size)
    targets = [t for _, t in pairs]
    return {"exact_match": exact_match(predictions, targets),
            "position_accuracy": position_accuracy(predictions, targets)}
