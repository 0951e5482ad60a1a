"""course_lib.seq2seq: encoder, the three decoders, decoding through course_lib.decoding, training."""

import itertools

import pytest
import torch

from course_lib import attention as A
from course_lib import data, decoding, train
from course_lib import seq2seq as S

V_SRC, V_TGT = 9, 7


def _batch(B=3, S_max=6, T=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    src_len = torch.tensor([S_max, 2, 4][:B] + [S_max] * max(B - 3, 0))
    src = torch.randint(4, V_SRC, (B, S_max), generator=g)
    src[torch.arange(S_max) >= src_len[:, None]] = 0  # right padding
    tgt_in = torch.randint(4, V_TGT, (B, T), generator=g)
    tgt_in[:, 0] = 1  # <bos>
    return src, src_len, tgt_in


def _model(attention, score=None, cell="gru", bidirectional=False, seed=0, **kw):
    torch.manual_seed(seed)
    model = S.build_model(
        V_SRC,
        V_TGT,
        attention=attention,
        score=score,
        hidden_size=16,
        embed_size=8,
        cell=cell,
        bidirectional=bidirectional,
        max_src_len=8,
        **kw,
    )
    return model.eval()


ALL_MODELS = [
    dict(attention=None),
    dict(attention="bahdanau"),
    dict(attention="bahdanau", score="dot"),
    dict(attention="luong", score="dot"),
    dict(attention="luong", score="scaled_dot"),
    dict(attention="luong", score="general"),
    dict(attention="luong", score="concat"),
    dict(attention="luong", score="location"),
    dict(attention="luong", score="cosine"),
    dict(attention="luong", score="general", input_feeding=True),
    dict(attention="luong", score="general", window=1, local="monotonic"),
    dict(attention="luong", score="general", window=2, local="predictive"),
    dict(attention="luong", score="general", cell="lstm"),
    dict(attention="bahdanau", cell="lstm", bidirectional=True),
    dict(attention=None, cell="lstm"),
]


def _id(kw):
    return "-".join(f"{v}" for v in kw.values())


# ---------------------------------------------------------------------------
# Score functions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(A.SCORES) + ["additive"])
def test_make_score_shapes_and_reuses_course_lib_attention(name):
    score = A.make_score(name, 6, 6, d_hidden=5, max_src_len=10)
    q, k = torch.randn(2, 3, 6), torch.randn(2, 7, 6)
    assert score(q, k).shape == (2, 3, 7)
    expected_type = {
        "general": A.GeneralScore,
        "concat": A.AdditiveScore,
        "additive": A.AdditiveScore,
        "location": A.LocationScore,
        "cosine": A.CosineScore,
    }.get(name)
    if expected_type:
        assert isinstance(score, expected_type)
    if name == "dot":
        assert torch.allclose(score(q, k), A.dot_score(q, k))
    if name == "scaled_dot":
        assert torch.allclose(score(q, k), A.scaled_dot_score(q, k))
    if name == "cosine":
        assert torch.allclose(score(q, k), A.cosine_score(q, k, scale=5.0), atol=1e-5)


def test_make_score_bad_input():
    with pytest.raises(ValueError, match="unknown score 'bilinear'"):
        A.make_score("bilinear", 4, 4)
    with pytest.raises(ValueError, match="d_q=4, d_k=8"):
        A.make_score("dot", 4, 8)
    with pytest.raises(ValueError, match="max_src_len"):
        A.make_score("location", 4, 4)
    assert A.make_score("general", 4, 8)(torch.randn(1, 2, 4), torch.randn(1, 3, 8)).shape == (1, 2, 3)


def test_location_score_ignores_the_keys_contents():
    score = A.make_score("location", 4, 4, max_src_len=6)
    q = torch.randn(2, 3, 4)
    assert torch.equal(score(q, torch.randn(2, 5, 4)), score(q, torch.randn(2, 5, 4)))


# ---------------------------------------------------------------------------
# Encoder
# ---------------------------------------------------------------------------


def test_reverse_padded():
    x = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])
    out = S.reverse_padded(x, torch.tensor([3, 2]))
    assert out.tolist() == [[3, 2, 1, 0], [5, 4, 0, 0]]
    y = torch.randn(2, 4, 3)
    lengths = torch.tensor([4, 1])
    assert torch.equal(S.reverse_padded(S.reverse_padded(y, lengths), lengths), y)


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_encoder_ignores_padding_and_matches_torch(cell, bidirectional):
    torch.manual_seed(0)
    enc = S.Encoder(V_SRC, 8, 16, cell=cell, bidirectional=bidirectional)
    src, src_len, _ = _batch()
    memory = enc(src, src_len)
    H = 16
    assert memory.outputs.shape == (3, 6, enc.output_size) and enc.output_size == H * (1 + bidirectional)
    assert memory.mask.tolist() == (torch.arange(6) < src_len[:, None]).tolist()
    # the same numbers as torch's own layer (state dicts are interchangeable), per sequence, no padding
    layer = {"gru": torch.nn.GRU, "lstm": torch.nn.LSTM}[cell]
    theirs = layer(8, H, batch_first=True, bidirectional=bidirectional)
    state = dict(enc.rnn.state_dict().items())
    if bidirectional:
        state.update({f"{k}_reverse": v for k, v in enc.rnn_backward.state_dict().items()})
    theirs.load_state_dict(state)
    for b in range(3):
        n = int(src_len[b])
        expected, _ = theirs(enc.embed(src[b : b + 1, :n]))
        assert torch.allclose(memory.outputs[b, :n], expected[0], atol=1e-5)
        assert torch.all(memory.outputs[b, n:] == 0)
        final = (
            torch.cat([expected[0, n - 1, :H], expected[0, 0, H:]]) if bidirectional else expected[0, n - 1]
        )
        assert torch.allclose(memory.final[b], final, atol=1e-5)


def test_encoder_bad_input():
    enc = S.Encoder(V_SRC, 8, 16)
    src, src_len, _ = _batch()
    with pytest.raises(
        TypeError, match=r"src must hold integer token ids \(torch.long\), got dtype torch.float32"
    ):
        enc(src.float(), src_len)
    with pytest.raises(ValueError, match=r"src must be a \(B, T\) tensor of token ids, got shape \(18,\)"):
        enc(src.flatten(), src_len)
    with pytest.raises(ValueError, match=r"src_len must have shape \(B,\) = \(3,\)"):
        enc(src, src_len[:2])
    with pytest.raises(ValueError, match=r"src_len must lie in 1..6, got \[7, 2, 1\]"):
        enc(src, torch.tensor([7, 2, 1]))
    with pytest.raises(TypeError, match="src must be a torch.Tensor"):
        enc(src.tolist(), src_len)
    with pytest.raises(ValueError, match="cell must be one of"):
        S.Encoder(V_SRC, 8, 16, cell="rnn")


# ---------------------------------------------------------------------------
# Decoders
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kw", ALL_MODELS, ids=_id)
def test_teacher_forcing_equals_step_by_step(kw):
    model = _model(**kw)
    src, src_len, tgt_in = _batch()
    logits, weights = model(src, src_len, tgt_in)
    assert logits.shape == (3, 5, V_TGT)
    state = model.start(src, src_len)
    memory = state["memory"]
    for t in range(tgt_in.shape[1]):
        step_logits, state, w = model.decoder.step(tgt_in[:, t], state)
        assert torch.allclose(step_logits, logits[:, t], atol=1e-5)
        if kw["attention"] is None:
            assert w is None and weights is None
        else:
            assert torch.allclose(w, weights[:, t], atol=1e-6)
    if weights is not None:
        assert weights.shape == (3, 5, 6)
        pad = ~memory.mask[:, None, :].expand_as(weights)
        assert torch.all(weights[pad] == 0)  # never attends to padding
        if kw.get("window") is None:
            assert torch.allclose(weights.sum(-1), torch.ones(3, 5), atol=1e-5)


@pytest.mark.slow
def test_padding_does_not_change_the_output():
    """A sequence gives the same logits alone or padded in a batch with a longer one."""
    for kw in ALL_MODELS:
        model = _model(**kw)
        src, src_len, tgt_in = _batch()
        logits, _ = model(src, src_len, tgt_in)
        n = int(src_len[1])
        alone, _ = model(src[1:2, :n], src_len[1:2], tgt_in[1:2])
        assert torch.allclose(alone[0], logits[1], atol=1e-5), kw


def test_bahdanau_scores_with_the_previous_state_luong_with_the_current_one():
    src, src_len, tgt_in = _batch()
    other = tgt_in.clone()
    other[:, 0] = 5  # a different first input token
    bahdanau, luong = _model("bahdanau"), _model("luong", "general")
    w_b, w_b2 = bahdanau(src, src_len, tgt_in)[1], bahdanau(src, src_len, other)[1]
    # Bahdanau's first weights come from s_0, before the first input is read
    assert torch.allclose(w_b[:, 0], w_b2[:, 0])
    assert not torch.allclose(w_b[:, 1], w_b2[:, 1])
    w_l, w_l2 = luong(src, src_len, tgt_in)[1], luong(src, src_len, other)[1]
    assert not torch.allclose(w_l[:, 0], w_l2[:, 0])  # Luong's come from s_1, after it


def test_luong_output_is_the_attentional_hidden_state():
    """logits_t = W_s tanh(W_c [c_t; s_t]), with c_t = sum_j a_tj h_j."""
    model = _model("luong", "general")
    src, src_len, tgt_in = _batch()
    memory = model.encode(src, src_len)
    dec = model.decoder
    state = dec.init_state(memory)
    logits, state, weights = dec.step(tgt_in[:, 0], state)
    s = state["h"]  # (B, H)
    scores = dec.score(s[:, None], memory.outputs).squeeze(1).masked_fill(~memory.mask, float("-inf"))
    a = torch.softmax(scores, -1)
    assert torch.allclose(a, weights, atol=1e-6)
    c = (a[..., None] * memory.outputs).sum(1)
    expected = dec.out(torch.tanh(dec.W_c(torch.cat([c, s], -1))))
    assert torch.allclose(logits, expected, atol=1e-5)


def test_bahdanau_feeds_the_context_into_the_rnn():
    model = _model("bahdanau")
    dec = model.decoder
    assert dec.cell.input_size == 8 + 16  # embedding + context
    src, src_len, tgt_in = _batch()
    memory = model.encode(src, src_len)
    state = dec.init_state(memory)
    _, new, weights = dec.step(tgt_in[:, 0], state)
    c = (weights[..., None] * memory.outputs).sum(1)
    expected = dec.cell(torch.cat([dec.embed(tgt_in[:, 0]), c], -1), state["h"])
    assert torch.allclose(new["h"], expected, atol=1e-6)


def test_local_attention_stays_in_its_window():
    src, src_len, tgt_in = _batch(B=1, S_max=8, T=6)
    src_len = torch.tensor([8])
    src[:] = torch.randint(4, V_SRC, (1, 8))
    model = _model("luong", "general", window=1, local="monotonic")
    _, weights = model(src, src_len, tgt_in)  # (1, T, S)
    j = torch.arange(8)
    for t in range(6):
        outside = (j - t).abs() > 1  # p_t = t
        assert torch.all(weights[0, t, outside] == 0)
        assert torch.isclose(weights[0, t].sum(), torch.tensor(1.0), atol=1e-5)
    pred = _model("luong", "general", window=2, local="predictive")
    _, weights = pred(src, src_len, tgt_in)
    assert torch.all(weights.sum(-1) <= 1 + 1e-5)  # softmax in the window times a Gaussian
    assert torch.all((weights > 0).sum(-1) <= 5)  # at most 2D + 1 positions


def test_build_model_bad_input():
    with pytest.raises(ValueError, match=r"attention must be one of \[None, 'bahdanau', 'luong'\]"):
        S.build_model(5, 5, attention="transformer")
    with pytest.raises(ValueError, match="needs an attention decoder"):
        S.build_model(5, 5, score="dot")
    with pytest.raises(ValueError, match="window must be an int >= 0, got -1"):
        S.build_model(5, 5, attention="luong", window=-1)
    with pytest.raises(ValueError, match="local must be"):
        S.build_model(5, 5, attention="luong", window=2, local="gaussian")
    with pytest.raises(ValueError, match="d_q=16, d_k=32"):
        S.build_model(5, 5, attention="luong", score="dot", hidden_size=16, bidirectional=True)
    model = S.build_model(5, 5)
    src, src_len, tgt_in = _batch()
    with pytest.raises(ValueError, match="same batch size"):
        model(src, src_len, tgt_in[:2])


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------


def _greedy(model, src, src_len, max_len):
    return decoding.greedy(model.step, torch.ones_like(src_len), model.start(src, src_len), max_len, eos_id=2)


def _beam(model, src, src_len, max_len, beam_size):
    return decoding.beam_search(
        model.step, torch.ones_like(src_len), model.start(src, src_len), max_len, beam_size, eos_id=2
    )


@pytest.mark.parametrize("kw", ALL_MODELS[:4] + ALL_MODELS[-3:], ids=_id)
def test_beam_of_one_is_greedy(kw):
    model = _model(**kw)
    src, src_len, _ = _batch()
    tokens, log_prob = _greedy(model, src, src_len, max_len=6)
    beam_tokens, beam_scores = _beam(model, src, src_len, max_len=6, beam_size=1)
    n = tokens.shape[1]
    assert torch.equal(beam_tokens[:, 0, :n], tokens)
    assert torch.allclose(beam_scores[:, 0], log_prob, atol=1e-5)
    # the log-probability greedy reports is the model's log p(y | x) of what it wrote
    # (an untrained model may write <pad> = 0, so tokens after eos are marked -100 instead)
    after_eos = (tokens == 2).cumsum(1) - (tokens == 2).long() > 0
    tgt_out = tokens.masked_fill(after_eos, -100)
    tgt_in = torch.cat([torch.ones(3, 1, dtype=torch.long), tokens[:, :-1]], 1)
    log_p = S.sequence_log_prob(model, src, src_len, tgt_in, tgt_out, pad_id=-100)
    assert torch.allclose(log_p, log_prob, atol=1e-5)


def _brute_force_best(model, src, src_len, max_len, V, eos_id=2):
    """The most likely output of at most max_len tokens (ending at its first eos), by enumeration."""
    best, best_score = None, -float("inf")
    for seq in itertools.product(range(V), repeat=max_len):
        seq = list(seq)
        if eos_id in seq:
            seq = seq[: seq.index(eos_id) + 1]
        tgt_out = torch.tensor([seq])
        tgt_in = torch.tensor([[1] + seq[:-1]])
        score = S.sequence_log_prob(model, src, src_len, tgt_in, tgt_out, pad_id=-100).item()
        if score > best_score + 1e-9:
            best, best_score = seq, score
    return best, best_score


@pytest.mark.parametrize("attention", [None, "bahdanau", "luong"])
def test_exhaustive_beam_finds_the_most_likely_output(attention):
    V, max_len = 4, 3
    torch.manual_seed(3)
    model = S.build_model(6, V, attention=attention, hidden_size=8, embed_size=4).eval()
    src, src_len = torch.tensor([[4, 5, 3]]), torch.tensor([3])
    best, best_score = _brute_force_best(model, src, src_len, max_len, V)
    tokens, scores = _beam(model, src, src_len, max_len, beam_size=V**max_len)
    assert abs(scores[0, 0].item() - best_score) < 1e-5
    assert tokens[0, 0, : len(best)].tolist() == best
    assert torch.all(scores[0, :-1] >= scores[0, 1:])  # ranked best first
    greedy_score = _greedy(model, src, src_len, max_len)[1].item()
    assert best_score >= greedy_score - 1e-6


def test_beam_search_decodes_each_sequence_independently():
    model = _model("luong", "general")
    src, src_len, _ = _batch()
    tokens, scores = _beam(model, src, src_len, max_len=5, beam_size=3)
    for b in range(3):
        n = int(src_len[b])
        alone, alone_scores = _beam(model, src[b : b + 1, :n], src_len[b : b + 1], 5, 3)
        assert torch.equal(alone[0], tokens[b]) and torch.allclose(alone_scores[0], scores[b], atol=1e-5)
    with pytest.raises(ValueError, match="beam_size must be a positive int, got 0"):
        _beam(model, src, src_len, 5, beam_size=0)


def test_translate_weights_are_those_of_the_decoding_steps():
    """translate(return_weights=True) recomputes the weights by teacher forcing the decoded
    tokens: they equal the weights of the greedy steps themselves."""
    model = _model("luong", "general")
    vocab = data.Vocab.from_text("abcdef")
    model = S.build_model(len(vocab), len(vocab), attention="bahdanau", hidden_size=8, embed_size=4).eval()
    outputs, weights = S.translate(model, ["abc", "fedcb"], vocab, vocab, max_len=6, return_weights=True)
    src, src_len = data.pad_batch([vocab.encode(s) for s in ["abc", "fedcb"]])
    state = model.start(src, src_len)
    y = torch.full((2,), vocab.bos_id)
    for t in range(len(outputs[0]) + 1):
        logits, state, w = model.decoder.step(y, state)
        y = logits.argmax(-1)
        assert torch.allclose(w[0, :3], weights[0][t], atol=1e-6)


# ---------------------------------------------------------------------------
# Training on tiny tasks
# ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("attention,score", [(None, None), ("bahdanau", "concat"), ("luong", "dot")])
def test_learns_to_copy_short_strings(attention, score, one_thread):
    train.seed_everything(0)
    pairs = data.copy_pairs(2000, seed=0, min_len=1, max_len=4, alphabet="abcdef")
    held_out = data.copy_pairs(200, seed=1, min_len=1, max_len=4, alphabet="abcdef")
    vocab = data.Vocab.from_text("abcdef")
    batches = data.batches(data.encode_pairs(pairs, vocab, vocab), 64)
    model = S.build_model(
        len(vocab), len(vocab), attention=attention, score=score, hidden_size=32, embed_size=16
    )
    train.fit(model, S.seq2seq_loss, lambda step: next(batches), steps=300, lr=1e-2, progress=False)
    metrics = S.evaluate(model, held_out, vocab, vocab)
    assert metrics["exact_match"] > 0.9, metrics
    beam = S.evaluate(model, held_out, vocab, vocab, beam_size=3)
    assert beam["exact_match"] > 0.9, beam
    outputs, weights = S.translate(model, ["abc", "fedcb"], vocab, vocab, return_weights=True)
    assert len(outputs) == 2
    if attention is None:
        assert weights == []
    else:
        assert [tuple(w.shape) for w in weights] == [(len(outputs[0]) + 1, 3), (len(outputs[1]) + 1, 5)]
