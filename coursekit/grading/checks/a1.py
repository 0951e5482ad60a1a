"""References of assignment 1: an attention encoder-decoder that evaluates arithmetic. Here parts 1
to 4 (the batch, the bidirectional encoder, additive attention, the decoder); parts 5 to 9 (the
loss, the training loop, beam search, the goal) in ``a1_train.py``.

The solutions here are written from tensor operations and torch.nn layers, as a learner would
(the assignment refuses course_lib's seq2seq, rnn, attention and decoding modules); each
``_Mistake``-style keyword switch is one typical mistake of the record, in its order.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from course_lib.exercises import a1

from ..references import Case, Reference, load, register

PAD, BOS, EOS = a1.PAD_ID, a1.BOS_ID, a1.EOS_ID
V = len(a1.VOCAB)


def _ids(text):
    return [a1.TOKEN_ID[c] for c in text]


# --------------------------------------------------------------------------------------
# Part 1: a batch of strings -> padded tensors, shifted targets, the source mask
# --------------------------------------------------------------------------------------
def make_batch(sources, targets, left=False, swap=False, invert=False, drop_eos=False):
    """The keywords are the typical mistakes."""
    B = len(sources)
    S = max(len(s) for s in sources)
    T = max(len(t) for t in targets) + (0 if drop_eos else 1)
    src = torch.full((B, S), PAD, dtype=torch.long)
    tgt_in = torch.full((B, T), PAD, dtype=torch.long)
    tgt_out = torch.full((B, T), PAD, dtype=torch.long)
    for i, (s, t) in enumerate(zip(sources, targets)):
        ids = _ids(s)
        if left:
            src[i, S - len(ids) :] = torch.tensor(ids)
        else:
            src[i, : len(ids)] = torch.tensor(ids)
        y = _ids(t)
        inp, out = [BOS, *y][:T], [*y, EOS][:T]
        if swap:
            inp, out = out, inp
        tgt_in[i, : len(inp)] = torch.tensor(inp)
        tgt_out[i, : len(out)] = torch.tensor(out)
    src_len = torch.tensor([len(s) for s in sources])
    src_mask = torch.arange(S)[None, :] < src_len[:, None]
    if left:
        src_mask = src_mask.flip(1)
    if invert:
        src_mask = ~src_mask
    return src, src_len, src_mask, tgt_in, tgt_out


def _batch_cases(g):
    def draw(n, seed):
        return a1.make_pairs(n, seed=seed, split="train")

    seed = int(torch.randint(0, 10**6, (1,), generator=g))
    mixed = draw(5, seed)
    while len({len(s) for s, _ in mixed}) < 3 or len({len(t) for _, t in mixed}) < 2:
        seed += 1
        mixed = draw(5, seed)
    return [
        Case("5 expressions of different lengths", [s for s, _ in mixed], [t for _, t in mixed]),
        Case("one expression, nothing to pad", ["7+12-3"], ["16"]),
        Case("a negative result and a one-digit one", ["3-20", "20+5+9", "0+0"], ["-17", "34", "0"]),
    ]


def _by_pad_sequence(sources, targets):
    seqs = [torch.tensor(_ids(s)) for s in sources]
    src = nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD)
    rest = make_batch(sources, targets)
    return (src, *rest[1:])


def _by_library_pad(sources, targets):
    src, src_len = load("data.pad_batch")([_ids(s) for s in sources], PAD)
    rest = make_batch(sources, targets)
    return (src, src_len, *rest[2:])


register(
    "check_a1_make_batch",
    Reference(
        seed=3601,
        cases=_batch_cases,
        solution=make_batch,
        mistakes=[
            lambda s, t: make_batch(s, t, left=True),
            lambda s, t: make_batch(s, t, swap=True),
            lambda s, t: make_batch(s, t, invert=True),
            lambda s, t: make_batch(s, t, drop_eos=True),
        ],
        shortcuts=[_by_pad_sequence, _by_library_pad],
    ),
)


# --------------------------------------------------------------------------------------
# Part 2: the bidirectional encoder over a padded batch
# --------------------------------------------------------------------------------------
class Encoder(nn.Module):
    """memory (B, S, 2H) zero at padding; final (B, 2H) = [forward h at the last real token;
    backward h at position 0]. ``mistake``: "unpacked" (the GRU reads the padding), "last"
    (final taken at position S - 1), "zeroed" (unpacked, padding zeroed afterwards)."""

    mistake = None

    def __init__(self, vocab_size, emb_size, hidden_size):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_size, padding_idx=PAD)
        self.rnn = nn.GRU(emb_size, hidden_size, batch_first=True, bidirectional=True)

    def forward(self, src, src_len):
        x = self.embed(src)  # (B, S, E)
        if self.mistake in ("unpacked", "zeroed"):
            memory, h_n = self.rnn(x)
            if self.mistake == "zeroed":
                memory = memory * (torch.arange(src.shape[1])[None, :, None] < src_len[:, None, None])
            return memory, torch.cat([h_n[0], h_n[1]], -1)
        packed = pack_padded_sequence(x, src_len.cpu(), batch_first=True, enforce_sorted=False)
        out, h_n = self.rnn(packed)  # h_n (2, B, H)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        if self.mistake == "last":
            H = h_n.shape[-1]
            return memory, torch.cat([memory[:, -1, :H], memory[:, 0, H:]], -1)
        return memory, torch.cat([h_n[0], h_n[1]], -1)


def _variant(cls, mistake):
    return type(f"{cls.__name__}_{mistake}", (cls,), {"mistake": mistake})


def _scaled_state(module, g, scale):
    """The module's parameters redrawn N(0, scale^2) (the default init is too gentle for the
    mistakes to show): a state dict of plain tensors."""
    return {k: torch.randn(v.shape, generator=g) * scale for k, v in module.state_dict().items()}


def _padded_source(g, lengths, S=None):
    S = S or max(lengths)
    src = torch.randint(3, V, (len(lengths), S), generator=g)
    for i, n in enumerate(lengths):
        src[i, n:] = PAD
    return src, torch.tensor(lengths)


def _encoder_cases(g):
    cases = []
    for description, (E, H), lengths in [
        ("3 sources of lengths 6, 3 and 5, padded to 6", (5, 4), [6, 3, 5]),
        ("2 sources of lengths 2 and 7", (3, 6), [2, 7]),
        ("one source, no padding", (4, 3), [5]),
    ]:
        state = _scaled_state(Encoder(V, E, H), g, 0.6)
        cases.append(Case(description, (V, E, H), state, *_padded_source(g, lengths)))
    return cases


class _EncoderByLibrary(Encoder):
    """Right, but reverses the sequences with course_lib.seq2seq.reverse_padded."""

    def forward(self, src, src_len):
        reverse = load("seq2seq.reverse_padded")
        x = self.embed(src)
        H = self.rnn.hidden_size
        w = dict(self.rnn.named_parameters())
        fwd, bwd = nn.GRU(x.shape[-1], H, batch_first=True), nn.GRU(x.shape[-1], H, batch_first=True)
        with torch.no_grad():
            for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
                getattr(fwd, name).copy_(w[name])
                getattr(bwd, name).copy_(w[name + "_reverse"])
        mask = (torch.arange(src.shape[1])[None] < src_len[:, None])[..., None]
        f = fwd(x)[0] * mask
        b = reverse(bwd(reverse(x, src_len))[0], src_len) * mask
        last = f[torch.arange(len(src)), src_len - 1]
        return torch.cat([f, b], -1), torch.cat([last, b[:, 0]], -1)


register(
    "check_a1_encoder",
    Reference(
        seed=3602,
        cases=_encoder_cases,
        solution=Encoder,
        mistakes=[_variant(Encoder, "unpacked"), _variant(Encoder, "last"), _variant(Encoder, "zeroed")],
        shortcuts=[_EncoderByLibrary],
    ),
)


# --------------------------------------------------------------------------------------
# Part 3: additive attention over a masked source
# --------------------------------------------------------------------------------------
class AdditiveAttention(nn.Module):
    """score_j = v^T tanh(W_q q + W_k k_j); weights = softmax over the real j; context =
    sum_j weights_j k_j. ``mistake``: "unmasked", "zero_fill", "batch_dim", "no_tanh"."""

    mistake = None

    def __init__(self, query_size, key_size, attn_size):
        super().__init__()
        self.W_q = nn.Linear(query_size, attn_size, bias=False)
        self.W_k = nn.Linear(key_size, attn_size, bias=False)
        self.v = nn.Linear(attn_size, 1, bias=False)

    def scores(self, query, keys):
        pre = self.W_q(query)[:, None, :] + self.W_k(keys)  # (B, S, A)
        return self.v(pre if self.mistake == "no_tanh" else torch.tanh(pre)).squeeze(-1)  # (B, S)

    def forward(self, query, keys, mask):
        scores = self.scores(query, keys)
        if self.mistake == "zero_fill":
            scores = scores.masked_fill(~mask, 0.0)
        elif self.mistake != "unmasked":
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=0 if self.mistake == "batch_dim" else -1)  # (B, S)
        context = (weights[..., None] * keys).sum(1)  # (B, D_k)
        return context, weights


def _attention_cases(g):
    cases = []
    for description, (Dq, Dk, A), lengths in [
        ("3 rows with 5, 2 and 4 real keys of 5", (4, 6, 5), [5, 2, 4]),
        ("2 rows, query and key sizes differ, 1 and 6 real keys", (3, 8, 4), [1, 6]),
        ("one row, no padding", (5, 5, 3), [4]),
    ]:
        S = max(lengths)
        state = _scaled_state(AdditiveAttention(Dq, Dk, A), g, 0.8)
        query = torch.randn(len(lengths), Dq, generator=g)
        keys = torch.randn(len(lengths), S, Dk, generator=g) * 2  # real values at the padding too
        mask = torch.arange(S)[None] < torch.tensor(lengths)[:, None]
        cases.append(Case(description, (Dq, Dk, A), state, query, keys, mask))
    return cases


class _AttentionByLibrary(AdditiveAttention):
    def forward(self, query, keys, mask):
        weights = load("attention.masked_softmax")(self.scores(query, keys), mask)
        return (weights[..., None] * keys).sum(1), weights


class _AttentionBySdpa(AdditiveAttention):
    """The additive scores handed to scaled_dot_product_attention as a float mask (q.k = 0)."""

    def forward(self, query, keys, mask):
        scores = self.scores(query, keys).masked_fill(~mask, float("-inf"))  # (B, S)
        B, S, _ = keys.shape
        zeros_q, zeros_k = keys.new_zeros(B, 1, 1), keys.new_zeros(B, S, 1)
        context = nn.functional.scaled_dot_product_attention(
            zeros_q, zeros_k, keys, attn_mask=scores[:, None, :]
        )
        return context[:, 0], torch.softmax(scores, -1)


register(
    "check_a1_additive_attention",
    Reference(
        seed=3603,
        cases=_attention_cases,
        solution=AdditiveAttention,
        mistakes=[_variant(AdditiveAttention, m) for m in ("unmasked", "zero_fill", "batch_dim", "no_tanh")],
        shortcuts=[_AttentionByLibrary, _AttentionBySdpa],
    ),
)


# --------------------------------------------------------------------------------------
# Part 4: the decoder step and the teacher-forced forward pass
# --------------------------------------------------------------------------------------
class Seq2Seq(nn.Module):
    """Bahdanau's decoder over the bidirectional encoder:

        s_0 = tanh(W_b final);   c_t, a_t = attention(s_{t-1}, memory, mask)
        s_t = GRUCell([embed(y_{t-1}); c_t], s_{t-1});   logits_t = W_o [s_t; c_t; embed(y_{t-1})]

    ``mistake``: "order" (the output layer reads [c_t; s_t; e]), "zero_start" (s_0 = 0), "no_mask".
    """

    mistake = None
    encoder_class, attention_class = Encoder, AdditiveAttention

    def __init__(self, vocab_size, emb_size, hidden_size, attn_size):
        super().__init__()
        D = 2 * hidden_size
        self.encoder = self.encoder_class(vocab_size, emb_size, hidden_size)
        self.bridge = nn.Linear(D, D)
        self.attention = self.attention_class(D, D, attn_size)
        self.embed = nn.Embedding(vocab_size, emb_size, padding_idx=PAD)
        self.cell = nn.GRUCell(emb_size + D, D)
        self.out = nn.Linear(D + D + emb_size, vocab_size)

    def encode(self, src, src_len):
        memory, final = self.encoder(src, src_len)  # (B, S, D), (B, D)
        mask = torch.arange(src.shape[1])[None, :] < src_len[:, None]  # (B, S)
        if self.mistake == "no_mask":
            mask = torch.ones_like(mask)
        h = torch.zeros_like(final) if self.mistake == "zero_start" else torch.tanh(self.bridge(final))
        return memory, mask, h

    def step(self, y_prev, h, memory, mask):
        e = self.embed(y_prev)  # (B, E)
        context, weights = self.attention(h, memory, mask)  # from s_{t-1}
        h = self.cell(torch.cat([e, context], -1), h)  # s_t
        parts = [context, h, e] if self.mistake == "order" else [h, context, e]
        return self.out(torch.cat(parts, -1)), h, weights

    def forward(self, src, src_len, tgt_in):
        memory, mask, h = self.encode(src, src_len)
        logits, weights = [], []
        for t in range(tgt_in.shape[1]):
            step_logits, h, w = self.step(tgt_in[:, t], h, memory, mask)
            logits.append(step_logits)
            weights.append(w)
        return torch.stack(logits, 1), torch.stack(weights, 1)  # (B, T, V), (B, T, S)


def _seq2seq_cases(g):
    cases = []
    for description, (E, H, A), lengths, T in [
        ("3 sources of lengths 7, 3 and 5; 4 target steps", (6, 5, 7), [7, 3, 5], 4),
        ("2 sources of lengths 4 and 2; 2 target steps", (4, 3, 4), [4, 2], 2),
    ]:
        state = _scaled_state(Seq2Seq(V, E, H, A), g, 0.5)
        src, src_len = _padded_source(g, lengths)
        tgt_in = torch.randint(3, V, (len(lengths), T), generator=g)
        tgt_in[:, 0] = BOS
        cases.append(Case(description, (V, E, H, A), state, src, src_len, tgt_in))
    return cases


class _Seq2SeqByLibrary(Seq2Seq):
    attention_class = _AttentionByLibrary


register(
    "check_a1_seq2seq_forward",
    Reference(
        seed=3604,
        cases=_seq2seq_cases,
        solution=Seq2Seq,
        mistakes=[_variant(Seq2Seq, m) for m in ("order", "zero_start", "no_mask")],
        shortcuts=[_Seq2SeqByLibrary],
    ),
)
