"""course_lib.bpe is Hugging Face `tokenizers`' byte-level BPE (pinned 0.23.3), merge for merge.

Both are trained on the same text with the same settings (GPT-2's split without an added
space, all 256 bytes in the alphabet, vocab_size = 256 + num_merges, no special tokens). The
merges must come out the same and in the same order, every token must have the same id, and
both must encode and decode held-out text, and text neither has seen, to the same ids and text.
Small random texts with few distinct letters exercise the ties (pairs of equal count).
"""

import json
import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from course_lib import data
from course_lib.bpe import BYTE_SYMBOL, pretokenize, train_bpe

UNSEEN = [
    "Ünïcödé, 日本語のテキスト, and an emoji 🙂🚀 that the corpus never had.",
    "tabs\tand\r\nwindows line ends,   runs   of spaces  \n\n\n and trailing space ",
    "contractions: it's, we've, they'll, I'd, you're, I'm, don't; numbers 3.14159 and 1e-10",
    "",
    " ",
    "\x00\x01 control bytes \x7f and a lone combining mark \u0301 and a surrogate-free ሴ",
]


@pytest.fixture(scope="module")
def corpus():
    train, val, _ = data.split_text(data.load_text())
    return train, val


def hf_bpe(text, num_merges):
    """tokenizers' byte-level BPE trained on text with this module's settings."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=256 + num_merges, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([text], trainer)
    return tok


def hf_merges(tok):
    """tokenizers' merges as pairs of GPT-2 symbol strings ('Ġ' for a space), in order."""
    return [tuple(m) for m in json.loads(tok.to_str())["model"]["merges"]]


def assert_same(ours, theirs, texts):
    merges = [(ours.symbols(a), ours.symbols(b)) for a, b in ours.merges]
    assert merges == hf_merges(theirs)
    vocab = theirs.get_vocab()
    assert len(vocab) == len(ours)
    assert all(vocab[ours.symbols(i)] == i for i in range(len(ours)))
    for text in texts:
        ids = ours.encode(text)
        assert ids == theirs.encode(text).ids, text[:60]
        assert ours.decode(ids) == theirs.decode(ids) == text


@pytest.mark.parametrize("num_merges", [1, 256, 1792, 6000])
def test_same_merges_ids_and_text_on_the_course_corpus(corpus, num_merges):
    train, val = corpus
    ours, theirs = train_bpe(train, num_merges), hf_bpe(train, num_merges)
    assert len(ours.merges) == num_merges
    assert_same(ours, theirs, [val, *UNSEEN])
    print(
        f"{num_merges} merges: the same merges, ids of all {len(ours)} tokens, "
        f"{len(ours.encode(val))} ids of the held-out text"
    )


def test_same_until_every_piece_is_one_token(corpus):
    """Asked for more merges than there are pairs, both stop at the same place."""
    train, val = corpus
    ours, theirs = train_bpe(train, 50_000), hf_bpe(train, 50_000)
    assert len(ours.merges) < 50_000
    assert_same(ours, theirs, [val[:5000], *UNSEEN])


@pytest.mark.parametrize("seed", range(8))
def test_same_ties_on_small_random_texts(seed):
    """Few letters, short words: many pairs share a count, and the order of ties decides."""
    rng = random.Random(seed)
    letters = "abcé " if seed % 2 else "ab c\n"
    text = "".join(rng.choice(letters) for _ in range(rng.randint(20, 400)))
    for num_merges in (1, 5, 30):
        ours, theirs = train_bpe(text, num_merges), hf_bpe(text, num_merges)
        assert_same(ours, theirs, [text, "abc cab bac", *UNSEEN])


def test_the_same_pieces_as_the_byte_level_pre_tokenizer(corpus):
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False)
    for text in [corpus[1], *UNSEEN]:
        theirs = [piece for piece, _ in pre.pre_tokenize_str(text)]
        ours = ["".join(BYTE_SYMBOL[b] for b in p.encode("utf-8")) for p in pretokenize(text)]
        assert ours == theirs
