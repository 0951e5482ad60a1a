"""References of assignment 1: an attention encoder-decoder that evaluates arithmetic.

The solutions here are written from tensor operations and torch.nn layers, as a learner would
(the assignment refuses course_lib's seq2seq, rnn, attention and decoding modules); each
``_Mistake``-style keyword switch is one typical mistake of the record, in its order.
"""

from __future__ import annotations

import math
from functools import cache

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from course_lib.exercises import a1
from course_lib.exercises._data import build
from course_lib.exercises.seq2seq import _TableStep

from ..references import Case, GoalReference, Reference, load, register

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


# --------------------------------------------------------------------------------------
# Part 5: the masked loss and accuracies
# --------------------------------------------------------------------------------------
def sequence_loss(logits, tgt_out, pad_id, mistake=None):
    """-> (mean cross-entropy over the real targets, token accuracy over them, the share of
    sequences whose every real target is the argmax)."""
    real = tgt_out != pad_id  # (B, T)
    if mistake == "unstable":
        logp = torch.log(torch.exp(logits) / torch.exp(logits).sum(-1, keepdim=True))
    else:
        logp = logits - logits.logsumexp(-1, keepdim=True)  # (B, T, V)
    nll = -logp.gather(-1, tgt_out[..., None]).squeeze(-1)  # (B, T)
    if mistake == "all_positions":
        loss = nll.mean()
    elif mistake == "per_sequence":
        loss = ((nll * real).sum(1) / real.sum(1)).mean()
    else:
        loss = (nll * real).sum() / real.sum()
    right = logits.argmax(-1) == tgt_out  # (B, T)
    token_acc = right.float().mean() if mistake == "token_all" else (right & real).sum() / real.sum()
    whole = right.all(1) if mistake == "sequence_pads" else (right | ~real).all(1)
    return loss, token_acc, whole.float().mean()


def _loss_cases(g):
    def targets(lengths, T):
        t = torch.randint(3, V, (len(lengths), T), generator=g)
        for i, n in enumerate(lengths):
            t[i, n:] = PAD
        return t

    def nudged(logits, tgt, share):
        """Make the argmax right at a share of the positions (so that accuracies are not 0)."""
        right = torch.rand(tgt.shape, generator=g) < share
        boost = torch.zeros_like(logits).scatter(-1, tgt[..., None], 4.0) * right[..., None]
        return logits + boost

    t1 = targets([4, 2, 3, 1], 4)
    t2 = targets([3, 3, 1], 3)
    t3 = targets([2, 4], 4)
    l1 = nudged(torch.randn(4, 4, V, generator=g), t1, 0.85)
    l1[1, 2:] = torch.randn(2, V, generator=g)  # padding positions: anything
    return [
        Case("4 targets of lengths 4, 2, 3 and 1 (padded with 0)", l1, t1, PAD),
        Case(
            "large logits (a few hundred): exp overflows",
            nudged(torch.randn(3, 3, V, generator=g) * 300, t2, 0.7),
            t2,
            PAD,
        ),
        Case(
            "2 targets, every real token right",
            nudged(torch.randn(2, 4, V, generator=g), t3, 1.0) * 3,
            t3,
            PAD,
        ),
    ]


register(
    "check_a1_sequence_loss",
    Reference(
        seed=3605,
        cases=_loss_cases,
        solution=sequence_loss,
        mistakes=[
            lambda lg, t, p: sequence_loss(lg, t, p, "all_positions"),
            lambda lg, t, p: sequence_loss(lg, t, p, "per_sequence"),
            lambda lg, t, p: sequence_loss(lg, t, p, "unstable"),
            lambda lg, t, p: sequence_loss(lg, t, p, "token_all"),
            lambda lg, t, p: sequence_loss(lg, t, p, "sequence_pads"),
        ],
        shortcuts=[
            lambda lg, t, p: (
                nn.functional.cross_entropy(lg.flatten(0, 1), t.flatten(), ignore_index=p),
                *sequence_loss(lg, t, p)[1:],
            ),
            lambda lg, t, p: (
                nn.functional.nll_loss(torch.log_softmax(lg, -1).flatten(0, 1), t.flatten(), ignore_index=p),
                *sequence_loss(lg, t, p)[1:],
            ),
            lambda lg, t, p: (
                torch._C._nn.cross_entropy_loss(lg.flatten(0, 1), t.flatten(), None, 1, p, 0.0),
                *sequence_loss(lg, t, p)[1:],
            ),
        ],
    ),
)


# --------------------------------------------------------------------------------------
# Part 6: the training loop, with a schedule and gradient clipping of one's own
# --------------------------------------------------------------------------------------
def lr_at(step, steps, peak_lr, warmup, mistake=None):
    """Linear warm-up to peak_lr over the first `warmup` steps, then linear decay to 0."""
    if step < warmup:
        return peak_lr * (step if mistake == "warmup_from_zero" else step + 1) / warmup
    return peak_lr * (steps - step) / (steps - warmup)


def clip_gradients(parameters, max_norm, per_tensor=False):
    """Scale all gradients together by max_norm / (total norm + 1e-6) when that is below 1."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if per_tensor:
        for grad in grads:
            grad.mul_(min(1.0, max_norm / (float(grad.norm()) + 1e-6)))
        return
    total = math.sqrt(sum(float((grad**2).sum()) for grad in grads))
    scale = max_norm / (total + 1e-6)
    if scale < 1:
        for grad in grads:
            grad.mul_(scale)


def train(model, batches, steps, peak_lr, warmup, max_norm, mistake=None):
    """-> the training loss of each step (before its update)."""
    params = list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=peak_lr)
    losses = []
    model.train()
    for step in range(steps):
        if mistake != "lr_after_step":
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, steps, peak_lr, warmup, mistake)
        batch = batches[step % len(batches)]
        logits, _ = model(batch["src"], batch["src_len"], batch["tgt_in"])
        loss = sequence_loss(logits, batch["tgt_out"], PAD)[0]
        if mistake != "no_zero_grad":
            optimizer.zero_grad()
        loss.backward()
        if mistake != "no_clip":
            clip_gradients(params, max_norm, per_tensor=mistake == "per_tensor")
        optimizer.step()
        if mistake == "lr_after_step":
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, steps, peak_lr, warmup)
        losses.append(loss.item())
    return losses


def _train_cases(g):
    pairs = a1.make_pairs(48, seed=int(torch.randint(0, 10**6, (1,), generator=g)))
    batches = []
    for i in range(0, 48, 16):
        chunk = pairs[i : i + 16]
        src, src_len, _, tgt_in, tgt_out = make_batch([s for s, _ in chunk], [t for _, t in chunk])
        batches.append({"src": src, "src_len": src_len, "tgt_in": tgt_in, "tgt_out": tgt_out})
    model = build("exercises.a1.ToyModel", V, 8)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return [
        Case(
            "6 steps over 3 batches, warm-up 2, gradients clipped to norm 0.5",
            model,
            batches,
            6,
            0.05,
            2,
            0.5,
        ),
        Case(
            "5 steps, warm-up 3, a norm bound of 100 that never clips", model, batches[:2], 5, 0.02, 3, 100.0
        ),
    ]


def _train_by_library_clip(model, batches, steps, peak_lr, warmup, max_norm):
    optimizer = torch.optim.Adam(model.parameters(), lr=peak_lr)
    losses = []
    for step in range(steps):
        optimizer.param_groups[0]["lr"] = lr_at(step, steps, peak_lr, warmup)
        batch = batches[step % len(batches)]
        logits = model(batch["src"], batch["src_len"], batch["tgt_in"])[0]
        loss = sequence_loss(logits, batch["tgt_out"], PAD)[0]
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        losses.append(loss.item())
    return losses


def _train_by_scheduler(model, batches, steps, peak_lr, warmup, max_norm):
    optimizer = torch.optim.Adam(model.parameters(), lr=peak_lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(s, steps, 1.0, warmup))
    losses = []
    for step in range(steps):
        batch = batches[step % len(batches)]
        logits = model(batch["src"], batch["src_len"], batch["tgt_in"])[0]
        loss = sequence_loss(logits, batch["tgt_out"], PAD)[0]
        optimizer.zero_grad()
        loss.backward()
        clip_gradients(list(model.parameters()), max_norm)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return losses


register(
    "check_a1_train",
    Reference(
        seed=3606,
        cases=_train_cases,
        solution=train,
        mistakes=[
            lambda *a: train(*a, mistake="warmup_from_zero"),
            lambda *a: train(*a, mistake="lr_after_step"),
            lambda *a: train(*a, mistake="per_tensor"),
            lambda *a: train(*a, mistake="no_zero_grad"),
            lambda *a: train(*a, mistake="no_clip"),
        ],
        shortcuts=[_train_by_library_clip, _train_by_scheduler],
    ),
)


# --------------------------------------------------------------------------------------
# Part 7: beam search with length normalisation, one source at a time
# --------------------------------------------------------------------------------------
def beam_search(step, state, bos_id, eos_id, beam_size, max_len, alpha, mistake=None):
    """-> the best hypothesis's tokens (without bos and eos), by log p / |y|^alpha with |y|
    counting eos. The live hypotheses are extended by every token; the beam_size best
    candidates by log p are kept; those ending in eos are finished and leave the beam."""
    live = [[]]  # the tokens of each live hypothesis
    scores = torch.zeros(1)  # (k,) their log-probabilities
    y = torch.tensor([bos_id])
    finished = []  # (normalised score, tokens)
    for _ in range(max_len):
        logits, state = step(y, state)  # (k, V)
        logp = torch.log_softmax(logits.double(), -1)
        if mistake == "own_best":
            best, token = logp.max(-1)
            total, flat = (scores + best).sort(descending=True)
            tokens = token.tolist()
            cand = [(s, b, tokens[b]) for s, b in zip(total[:beam_size].tolist(), flat[:beam_size].tolist())]
        else:
            total = (scores[:, None] + logp).flatten()  # (k * V,)
            top, flat = total.topk(min(beam_size, total.numel()))
            V_ = logp.shape[-1]
            cand = [(s, i // V_, i % V_) for s, i in zip(top.tolist(), flat.tolist())]
        keep = []
        for s, b, tok in cand:
            if tok == eos_id and mistake != "eos_ordinary":
                n = len(live[b]) + (0 if mistake == "length_without_eos" else 1)
                norm = 1.0 if mistake == "no_normalisation" else max(n, 1) ** alpha
                finished.append((s / norm, live[b]))
            else:
                keep.append((s, b, tok))
        if not keep:
            break
        rows = torch.tensor([b for _, b, _ in keep])
        live = [live[b] + [tok] for _, b, tok in keep]
        scores = torch.tensor([s for s, _, _ in keep], dtype=torch.double)
        state, y = state[rows], torch.tensor([tok for _, _, tok in keep])
    else:
        for s, tokens in zip(scores.tolist(), live):
            norm = 1.0 if mistake == "no_normalisation" else len(tokens) ** alpha
            finished.append((s / norm, tokens))
    best = max(finished, key=lambda f: f[0])[1]
    if mistake == "eos_ordinary" and eos_id in best:
        best = best[: best.index(eos_id)]
    return best


_BEAM_MISTAKES = ("no_normalisation", "own_best", "length_without_eos", "eos_ordinary")


def _beam_cases(g):
    def table(T, V_, eos_bias):
        t = torch.randn(T, V_, V_, generator=g) * 2
        t[:, :, 2] += eos_bias
        return t

    # Random cases, kept while some typical mistake has not shown yet, and only if each mistake
    # that shows first on them gives a result of its own (the check names the first mistake
    # whose result equals the learner's, so an earlier mistake must not give the same).
    cases, pending = [], set(range(len(_BEAM_MISTAKES)))
    for trial in range(3000):
        if not pending:
            break
        K, alpha = (2, 3, 4)[trial % 3], (0.6, 1.0, 2.0)[(trial // 3) % 3]
        step = _TableStep(table(8, 6, (-1.0, 0.0, 0.5, 1.0)[trial % 4]))
        args = (step, torch.zeros(1, 3), 1, 2, K, 8, alpha)
        right = beam_search(*args)
        results = [beam_search(*args, mistake=m) for m in _BEAM_MISTAKES]
        showing = {i for i in pending if results[i] != right}
        if showing and all(results[i] not in results[:i] for i in showing):
            cases.append(Case(f"beam {K} over 6 tokens, alpha {alpha}", *args))
            pending -= showing
    if pending:
        raise RuntimeError("no telling cases for check_a1_beam_search")
    return [
        *cases,
        Case(
            "beam 2, eos rare: stop at max_len 5",
            _TableStep(table(6, 6, -6.0)),
            torch.zeros(1, 2),
            1,
            2,
            2,
            5,
            1.0,
        ),
        Case(
            "beam 5 over 8 tokens, alpha 0.8",
            _TableStep(table(9, 8, 0.0)),
            torch.zeros(1, 4),
            1,
            2,
            5,
            9,
            0.8,
        ),
    ]


def _beam_by_library(step, state, bos_id, eos_id, beam_size, max_len, alpha):
    tokens, _ = load("decoding.beam_search")(
        step, torch.tensor([bos_id]), state, max_len, beam_size, eos_id, alpha
    )
    best = tokens[0, 0].tolist()
    return best[: best.index(eos_id)] if eos_id in best else best


register(
    "check_a1_beam_search",
    Reference(
        seed=3607,
        cases=_beam_cases,
        solution=beam_search,
        mistakes=[
            *(lambda *a, m=m: beam_search(*a, mistake=m) for m in _BEAM_MISTAKES),
        ],
        shortcuts=[_beam_by_library],
    ),
)


# --------------------------------------------------------------------------------------
# Part 9: the goal, measured from a trained model
# --------------------------------------------------------------------------------------
def batches_of(pairs, batch_size):
    out = []
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i : i + batch_size]
        src, src_len, _, tgt_in, tgt_out = make_batch([s for s, _ in chunk], [t for _, t in chunk])
        out.append({"src": src, "src_len": src_len, "tgt_in": tgt_in, "tgt_out": tgt_out})
    return out


def train_reference(seed=0, steps=a1.TRAIN_STEPS):
    """The notebook's recipe with the reference parts (what a correct build hands in)."""
    torch.manual_seed(seed)
    pairs = a1.make_pairs(steps * a1.BATCH_SIZE, seed=seed * 7919 + 1)
    model = Seq2Seq(V, *a1.MODEL_SIZES)
    train(model, batches_of(pairs, a1.BATCH_SIZE), steps, a1.PEAK_LR, a1.WARMUP, a1.MAX_NORM)
    return model.eval()


@cache
def _trained():
    with torch.random.fork_rng(devices=[]):
        return train_reference(0)


def _untrained():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return Seq2Seq(V, *a1.MODEL_SIZES).eval()


register("check_a1_exact_match", GoalReference(passing=_trained, missing=_untrained))
