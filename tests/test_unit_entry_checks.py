"""One input check where a learner calls in, plain arithmetic inside (issue 40 item 1).

A public model or function checks its inputs once and then runs unchecked code: a stack calls
its layers' `_forward`, a layer its attentions' `_forward`, multi-head attention the unchecked
`attention._masked_softmax`. Counted at run time, as the review of issue 40 counted:
`sys.setprofile` sees every Python call into `course_lib/_checks.py` during one forward.

- entries: calls into `_checks.py` from the model's code, i.e. the check calls a forward makes;
- frames: every Python frame run in `_checks.py`, helpers called by a check included.

Before this change one forward of chapter 9's Transformer (2 + 2 layers) ran 135 frames in 39
check calls, MultiHeadAttention 19 frames. A learner who calls a layer directly must still get an
error naming the argument and its shape: the last tests pass bad input to the inner layers.
"""

import inspect
import sys

import pytest
import torch

from course_lib import _checks
from course_lib import attention as A
from course_lib import seq2seq as S
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
    return S.build_model(20, 20, hidden_size=16, embed_size=8, **kw).eval()


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


@pytest.mark.parametrize("attention", [None, "luong"])
def test_seq2seq_checks_do_not_grow_with_the_target(attention):
    """The decoders no longer re-check at every step: the count of a teacher-forced forward is
    the same for 3 and 12 target tokens. Not yet <= 3: the encoder (shown whole by chapter 3)
    checks src and src_len and its GRU checks x, and Bahdanau's step (shown by chapter 4) checks
    its scores at every step; changing that code means re-executing those pages."""
    model = _seq2seq(attention=attention)
    src, src_len = torch.randint(3, 20, (2, 10)), torch.tensor([10, 7])
    short, long = torch.randint(3, 20, (2, 3)), torch.randint(3, 20, (2, 12))
    n_short, n_long = (
        count_checks(lambda: model(src, src_len, short)),
        count_checks(lambda: model(src, src_len, long)),
    )
    print(
        f"  seq2seq attention={attention}: {n_short[0]} check calls for 3 target tokens, {n_long[0]} for 12"
    )
    assert n_short == n_long


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
