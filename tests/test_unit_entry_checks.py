"""One input check where a learner calls in, plain arithmetic inside (issue 40 item 1).

A public model or function checks its inputs once and then runs unchecked code: a stack calls
its layers' `_forward`, a layer its attentions' `_forward`, multi-head attention the unchecked
`attention._masked_softmax`. Counted at run time, as the review of issue 40 counted:
`sys.setprofile` sees every Python call into `course_lib/_checks.py` during one forward.

- entries: calls into `_checks.py` from the model's code, i.e. the check calls a forward makes;
- frames: every Python frame run in `_checks.py`, helpers called by a check included.

Before this change one forward of chapter 9's Transformer (2 + 2 layers) ran 135 frames in 39
check calls, MultiHeadAttention 19 frames. The seq2seq models (9 target tokens) made 5 (no
attention), 8 (Luong), 10 (Luong local) and 50 (Bahdanau) check calls, MaskedLM 5: now the
encoder, the RNN cells and layers, the decoders' `_step` and their scores (built with
check_inputs=False) run unchecked inside a forward. A learner who calls a layer directly must
still get an error naming the argument and its shape: the last tests pass bad input to the inner
layers.
"""

import inspect
import sys

import pytest
import torch

from course_lib import _checks, decoding, rnn
from course_lib import attention as A
from course_lib import seq2seq as S
from course_lib.mlm import MaskedLM
from course_lib.multihead import KVCache, MultiHeadAttention
from course_lib.transformer import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    Transformer,
    TransformerConfig,
)

CHECKS_FILE = inspect.getsourcefile(_checks)
D, H = 16, 4  # d_model, heads


def count_checks(fn):
    """(entries, frames): the calls into _checks.py from outside it, and every frame run there."""
    entries = frames = 0

    def profile(frame, event, arg):
        nonlocal entries, frames
        if event == "call" and frame.f_code.co_filename == CHECKS_FILE:
            frames += 1
            caller = frame.f_back
            entries += caller is None or caller.f_code.co_filename != CHECKS_FILE

    sys.setprofile(profile)
    try:
        with torch.no_grad():
            fn()
    finally:
        sys.setprofile(None)
    return entries, frames


def _transformer(norm_first=False):
    config = TransformerConfig(20, 20, d_model=32, num_heads=4, d_ff=64, dropout=0.0, norm_first=norm_first)
    torch.manual_seed(0)
    return Transformer(config).eval()


def _seq2seq(**kw):
    torch.manual_seed(0)
    return S.build_model(20, 20, hidden_size=16, embed_size=8, max_src_len=12, **kw).eval()


SEQ2SEQ = {  # the models whose forward checks its inputs once: <= 3 check calls, whatever the target
    "Seq2Seq, no attention (GRU)": dict(attention=None),
    "Seq2Seq, no attention (LSTM, bidirectional)": dict(attention=None, cell="lstm", bidirectional=True),
    "Seq2Seq, Luong global": dict(attention="luong"),
    "Seq2Seq, Luong global, location score": dict(attention="luong", score="location"),
    "Seq2Seq, Luong local-p": dict(attention="luong", window=2),
    "Seq2Seq, Luong local-m (LSTM)": dict(attention="luong", window=2, local="monotonic", cell="lstm"),
    "Seq2Seq, Bahdanau": dict(attention="bahdanau"),
    "Seq2Seq, Bahdanau (LSTM, bidirectional)": dict(attention="bahdanau", cell="lstm", bidirectional=True),
    "Seq2Seq, Bahdanau, cosine score": dict(attention="bahdanau", score="cosine"),
    "Seq2Seq, Luong feeding, scaled dot": dict(attention="luong", input_feeding=True, score="scaled_dot"),
    "Seq2Seq, Luong local-p, input feeding": dict(attention="luong", window=2, input_feeding=True),
}


def _cases():
    """name -> (a call of one forward, whether every frame counts: the models forward_checks.py counts)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(2, 3, 5, 8, generator=g),
        torch.randn(2, 3, 6, 8, generator=g),
        torch.randn(2, 3, 6, 4, generator=g),
    )
    scores, bool_mask = torch.randn(2, 3, 5, 6, generator=g), torch.rand(2, 1, 5, 6, generator=g) > 0.3
    x, memory = torch.randn(2, 5, D, generator=g), torch.randn(2, 7, D, generator=g)
    padding, causal = A.padding_mask([7, 4]), A.causal_mask(5)
    mha, enc_layer, dec_layer = MultiHeadAttention(D, H), EncoderLayer(D, H, 32), DecoderLayer(D, H, 32)
    encoder, decoder = Encoder(2, D, H, 32), Decoder(2, D, H, 32)
    src, tgt_in = torch.randint(3, 20, (2, 10), generator=g), torch.randint(3, 20, (2, 9), generator=g)
    post_ln, pre_ln = _transformer(), _transformer(norm_first=True)
    src_len = torch.tensor([10, 7])
    seq2seq = {name: _seq2seq(**kw) for name, kw in SEQ2SEQ.items()}
    cells = {cls: cls(D, 8) for cls in (rnn.RNNCell, rnn.GRUCell, rnn.LSTMCell)}
    layers = {cls: cls(D, 8, num_layers=2, bidirectional=True) for cls in (rnn.RNN, rnn.GRU, rnn.LSTM)}
    h0, hx = torch.randn(2, 8, generator=g), torch.randn(4, 2, 8, generator=g)
    mlm = MaskedLM(19, d_model=D, num_heads=H, num_layers=4, d_ff=32, max_len=20).eval()

    def cached_attention():
        cache = KVCache()
        mha(x[:, :3], x[:, :3], x[:, :3], A.causal_mask(3), cache)
        return lambda: mha(x[:, 3:4], x[:, 3:4], x[:, 3:4], None, cache)

    return {
        "dot_score": (lambda: A.dot_score(q, k), False),
        "scaled_dot_score": (lambda: A.scaled_dot_score(q, k), False),
        "cosine_score": (lambda: A.cosine_score(q, k), False),
        "masked_softmax": (lambda: A.masked_softmax(scores, bool_mask), True),
        "attend": (lambda: A.attend(scores, v, bool_mask), False),
        "scaled_dot_product_attention": (lambda: A.scaled_dot_product_attention(q, k, v, bool_mask), False),
        "MultiHeadAttention": (lambda: mha(x, x, x), True),
        "MultiHeadAttention, cross, mask": (lambda: mha(x, memory, memory, padding), True),
        "MultiHeadAttention, cache": (cached_attention(), True),
        "EncoderLayer": (lambda: enc_layer(memory, padding), True),
        "DecoderLayer": (lambda: dec_layer(x, memory, causal, padding), True),
        "Encoder (2 layers)": (lambda: encoder(memory, padding), True),
        "Decoder (2 layers)": (lambda: decoder(x, memory, causal, padding), True),
        "Transformer (2 + 2 layers, post-LN)": (lambda: post_ln(src, tgt_in), True),
        "Transformer (2 + 2 layers, pre-LN)": (lambda: pre_ln(src, tgt_in), True),
        "Transformer.start": (lambda: post_ln.start(src), True),
        **{name: (lambda m=m: m(src, src_len, tgt_in), False) for name, m in seq2seq.items()},
        "Seq2Seq.start": (lambda: seq2seq["Seq2Seq, Luong global"].start(src, src_len), False),
        "Encoder": (lambda: seq2seq["Seq2Seq, Luong global"].encoder(src, src_len), False),
        "RNNCell, hx": (lambda: cells[rnn.RNNCell](x[:, 0], h0), False),
        "GRUCell, hx": (lambda: cells[rnn.GRUCell](x[:, 0], h0), False),
        "LSTMCell, (h, c)": (lambda: cells[rnn.LSTMCell](x[:, 0], (h0, h0)), False),
        "RNN (2 layers, bidirectional), hx": (lambda: layers[rnn.RNN](x, hx), False),
        "GRU (2 layers, bidirectional), hx": (lambda: layers[rnn.GRU](x, hx), False),
        "LSTM (2 layers, bidirectional), (h, c)": (lambda: layers[rnn.LSTM](x, (hx, hx)), False),
        "MaskedLM (4 layers)": (lambda: mlm(src), True),
    }


def test_one_check_per_entry_point():
    """At most 3 check calls per forward of every public model; the Transformer's stacks and
    layers and multi-head attention run no check helper but those (every frame counted)."""
    counts = {}
    for name, (forward, flat) in _cases().items():
        forward()  # warm up (lazy imports, caches)
        counts[name] = count_checks(forward), flat
    for name, ((entries, frames), _) in counts.items():
        print(f"  {name}: {entries} check calls per forward ({frames} frames in _checks.py)")
    assert all(entries <= 3 for (entries, _), _ in counts.values()), counts
    assert all(frames <= 3 for (_, frames), flat in counts.values() if flat), counts
    assert counts["Transformer (2 + 2 layers, post-LN)"][0] == (3, 3)  # src, tgt_in, same batch


def _seq2seq_counts(model, lengths=(3, 12)):
    src, src_len = torch.randint(3, 20, (2, 10)), torch.tensor([10, 7])
    targets = [torch.randint(3, 20, (2, T)) for T in lengths]
    return [count_checks(lambda tgt=tgt: model(src, src_len, tgt))[0] for tgt in targets]


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_seq2seq_checks_once_whatever_the_target(name):
    """The encoder and the decoders run unchecked inside a forward (`Encoder._forward`, the cells'
    `_forward`, the decoders' `_step`): the count is the same for 3 and 12 target tokens."""
    short, long = _seq2seq_counts(_seq2seq(**SEQ2SEQ[name]))
    print(f"  {name}: {short} check calls for 3 target tokens, {long} for 12")
    assert short == long <= 3


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_decoding_checks_the_source_once(name):
    """Decoding checks the source once (`start`); `Seq2Seq.step` runs the decoder's `_step`."""
    model = _seq2seq(**SEQ2SEQ[name])
    src, src_len, y0 = torch.randint(3, 20, (2, 10)), torch.tensor([10, 7]), torch.ones(2, dtype=torch.long)

    def greedy(n):
        return lambda: decoding.greedy(model.step, y0, model.start(src, src_len), n)

    def beam(n):
        return lambda: decoding.beam_search(model.step, y0, model.start(src, src_len), n, 3)

    assert count_checks(greedy(3)) == count_checks(greedy(12))
    assert count_checks(beam(3)) == count_checks(beam(12))
    assert count_checks(greedy(12))[0] <= 3 and count_checks(beam(12))[0] <= 3


@pytest.mark.parametrize("name", list(A.SCORES))
def test_a_decoders_score_runs_unchecked_with_the_same_numbers(name):
    """The decoders build their score with check_inputs=False (they check their inputs once and
    call the score at every step, as a module: chapter 4 and bench_seq2seq hook it). The same
    numbers as the checked module with the same weights; a learner's score still checks."""
    torch.manual_seed(0)
    checked = A.make_score(name, 6, 6, d_hidden=5, max_src_len=10)
    unchecked = A.make_score(name, 6, 6, d_hidden=5, max_src_len=10, check_inputs=False)
    unchecked.load_state_dict(checked.state_dict())
    q, k = torch.randn(2, 3, 6), torch.randn(2, 7, 6)
    assert torch.equal(checked(q, k), unchecked(q, k))
    assert count_checks(lambda: unchecked(q, k)) == (0, 0)
    assert count_checks(lambda: checked(q, k))[0] == 1
    with pytest.raises(ValueError, match="q of shape"):
        checked(torch.randn(2, 3, 4), k)


@pytest.mark.parametrize("attention", [None, "bahdanau", "luong"])
def test_the_unchecked_step_gives_the_checked_steps_numbers(attention):
    """`step` (checked) and `_step` (what the forward and decoding run) compute the same thing."""
    model = _seq2seq(attention=attention)
    src, src_len, y = torch.randint(3, 20, (2, 10)), torch.tensor([10, 7]), torch.tensor([1, 5])
    with torch.no_grad():
        checked = model.decoder.step(y, model.start(src, src_len))
        unchecked = model.decoder._step(y, model.start(src, src_len))
    assert torch.equal(checked[0], unchecked[0]) and torch.equal(checked[1]["h"], unchecked[1]["h"])


def test_the_stacks_unchecked_route_is_the_layers_arithmetic():
    """Encoder and Decoder call their layers' _forward: the same numbers as calling the layers."""
    torch.manual_seed(0)
    encoder, decoder = Encoder(2, D, H, 32, dropout=0.0), Decoder(2, D, H, 32, dropout=0.0)
    x, memory, mask = torch.randn(2, 5, D), torch.randn(2, 7, D), A.padding_mask([7, 4])
    by_layers = encoder.norm(encoder.layers[1](encoder.layers[0](memory, mask), mask))
    assert torch.equal(encoder(memory, mask), by_layers)
    y = decoder.layers[0](x, memory, A.causal_mask(5), mask)
    assert torch.equal(
        decoder(x, memory, A.causal_mask(5), mask),
        decoder.norm(decoder.layers[1](y, memory, A.causal_mask(5), mask)),
    )


# ---------------------------------------------------------------------------
# A learner calling an inner layer directly still gets a clear error
# ---------------------------------------------------------------------------

_S2S = _seq2seq(attention="bahdanau")
_SRC, _SRC_LEN = torch.randint(3, 20, (2, 10)), torch.tensor([10, 7])


def _swapped_memory(**changes):
    import dataclasses

    state = _S2S.start(_SRC, _SRC_LEN)
    state["memory"] = dataclasses.replace(state["memory"], **changes)
    return state


ENC, DEC, MHA = EncoderLayer(D, H, 32), DecoderLayer(D, H, 32), MultiHeadAttention(D, H)
X, MEMORY = torch.randn(2, 5, D), torch.randn(2, 7, D)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: ENC(torch.randn(2, 5, 8)),
            ValueError,
            r"x must be \(B, T, d_model=16\), got shape \(2, 5, 8\)",
        ),
        (
            lambda: ENC(X, torch.ones(3, 5, 5, dtype=torch.bool)),
            ValueError,
            r"mask of shape \(3, 5, 5\) does not broadcast to the scores' shape \(2, 4, 5, 5\)",
        ),
        (
            lambda: ENC(
                X[:, :1],
                A.causal_mask(1, 3),
                KVCache(torch.zeros(2, H, 3, D // H), torch.zeros(2, H, 3, D // H)),
            ),
            ValueError,
            r"mask of shape \(1, 3\) does not broadcast to the scores' shape \(2, 4, 1, 4\)",
        ),
        (
            lambda: DEC(X, torch.randn(2, 7)),
            ValueError,
            r"memory must be \(B, T, d_model=16\), got shape \(2, 7\)",
        ),
        (
            lambda: DEC(X, torch.randn(3, 7, D)),
            ValueError,
            r"x of shape \(2, 5, 16\) and memory of shape \(3, 7, 16\) need the same batch size",
        ),
        (
            lambda: DEC(X, MEMORY, torch.ones(5, 5, dtype=torch.int64)),
            TypeError,
            r"self_mask must be bool \(True = allowed\) or floating-point",
        ),
        (
            lambda: DEC(X, MEMORY, None, A.padding_mask([5, 4])),
            ValueError,
            r"memory_mask of shape \(2, 1, 1, 5\) does not broadcast to the scores' shape \(2, 4, 5, 7\)",
        ),
        (lambda: Encoder(2, D, H, 32)(torch.randn(5, D)), ValueError, r"x must be \(B, T, d_model=16\)"),
        (
            lambda: Decoder(2, D, H, 32)(X, MEMORY, A.causal_mask(4)),
            ValueError,
            r"self_mask of shape \(4, 4\) does not broadcast to the scores' shape \(2, 4, 5, 5\)",
        ),
        (lambda: MHA(X, MEMORY, X), ValueError, r"key and value need the same \(B, S\)"),
        (lambda: MHA(X, X, X, "causal"), TypeError, r"mask must be a bool or float torch.Tensor, got str"),
        (
            lambda: A.scaled_dot_product_attention(X, X, X, torch.ones(4, 4, dtype=torch.bool)),
            ValueError,
            r"mask of shape \(4, 4\) does not broadcast to the scores' shape \(2, 5, 5\)",
        ),
        (lambda: A.attend(torch.randn(2, 5, 7), X), ValueError, r"scores of shape \(2, 5, 7\) weigh 7 keys"),
        (
            lambda: _S2S.decoder.step(torch.tensor([[1], [2]]), _S2S.start(_SRC, _SRC_LEN)),
            ValueError,
            r"y_prev must be a \(B,\) tensor of token ids, got shape \(2, 1\)",
        ),
        (
            lambda: _S2S.decoder.step(torch.tensor([1, 20]), _S2S.start(_SRC, _SRC_LEN)),
            ValueError,
            r"y_prev has ids outside \[0, 20\)",
        ),
        (
            lambda: _S2S.decoder.step(torch.tensor([1, 2]), _swapped_memory(mask=torch.ones(2, 11).bool())),
            ValueError,
            r"memory.mask must be a bool tensor \(B, S\) = \(2, 10\) .* got \(2, 11\)",
        ),
        (
            lambda: _S2S.decoder.step(torch.tensor([1, 2]), _swapped_memory(mask=torch.ones(2, 10))),
            ValueError,
            r"memory.mask must be a bool tensor .* got \(2, 10\) torch.float32",
        ),
        (
            lambda: _S2S.decoder.step(torch.tensor([1, 2]), _swapped_memory(outputs=torch.randn(2, 10, 8))),
            ValueError,
            r"memory.outputs must be \(B, S, H_enc\) = \(2, S, 16\) .* got \(2, 10, 8\)",
        ),
        (
            lambda: S.local_weights(torch.randn(2, 3, 9), torch.ones(9).bool(), torch.zeros(2, 3), 2),
            ValueError,
            r"mask \(B, S\) bool and p \(B, T\); got scores \(2, 3, 9\), mask \(9,\)",
        ),
        (lambda: _S2S(_SRC, _SRC_LEN[:1], _SRC), ValueError, r"src_len must have shape \(B,\) = \(2,\)"),
        (lambda: _S2S(_SRC, _SRC_LEN, _SRC[:1]), ValueError, r"src of shape \(2, 10\) and tgt_in of shape"),
    ],
)
def test_an_inner_layer_called_directly_names_the_bad_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_mask_over_the_cached_keys_passes_the_check():
    """With 3 cached positions a new token's mask is (1, 4): the check counts the cache's keys."""
    cache = KVCache(torch.zeros(2, H, 3, D // H), torch.zeros(2, H, 3, D // H))
    assert ENC(X[:, :1], torch.ones(1, 4, dtype=torch.bool), cache).shape == (2, 1, D)
    assert len(cache) == 4


def test_a_source_longer_than_the_location_score_allows_is_refused_once_by_name():
    """Luong's location score is built for at most max_src_len positions: the model's one check
    says so (forward and start), instead of a broadcasting error deep inside the decoder."""
    model = S.build_model(10, 10, attention="luong", score="location", max_src_len=12)
    src, tgt = torch.randint(4, 10, (2, 14)), torch.randint(4, 10, (2, 5))
    for call in (
        lambda: model(src, torch.tensor([14, 10]), tgt),
        lambda: model.start(src, torch.tensor([14, 10])),
    ):
        with pytest.raises(
            ValueError, match=r"src of shape \(2, 14\) has 14 positions.*max_src_len = 12"
        ) as err:
            call()
        print(err.value)
    logits, _ = model(src[:, :12], torch.tensor([12, 10]), tgt)
    assert logits.shape == (2, 5, 10)
