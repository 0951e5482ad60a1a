"""course_lib.bpe: the byte alphabet, the split, one merge, training by hand-counted examples,
encoding and decoding any text, and bad input."""

import math
import random
from itertools import pairwise

import pytest
import torch

from course_lib import data, train
from course_lib.bpe import (
    BPE,
    BYTE_ORDER,
    BYTE_SYMBOL,
    bits_per_char,
    chars_per_id,
    merge,
    pair_counts,
    pretokenize,
    train_bpe,
)

SENNRICH = " low" * 5 + " lower" * 2 + " newest" * 6 + " widest" * 3  # Sennrich et al. (2016), fig. 1


def test_the_256_bytes_are_numbered_like_gpt2():
    assert sorted(BYTE_ORDER) == list(range(256))
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    assert BYTE_ORDER[:188] == printable  # printable bytes first, in order
    assert BYTE_ORDER[188:] == [b for b in range(256) if b not in printable]
    assert BYTE_SYMBOL[ord(" ")] == "Ġ" and BYTE_SYMBOL[ord("\n")] == "Ċ" and BYTE_SYMBOL[ord("a")] == "a"
    assert len(set(BYTE_SYMBOL.values())) == 256


def test_pretokenize_keeps_the_space_with_the_word_that_follows():
    pieces = ["Hello", " world", ",", " it", "'s", " 2024", "!", "\n"]
    assert pretokenize("Hello world, it's 2024!\n") == pieces
    assert pretokenize("a  b") == ["a", " ", " b"]  # a run of spaces keeps its last one
    assert pretokenize("x = f(y)  \n") == ["x", " =", " f", "(", "y", ")", "  \n"]
    assert pretokenize("") == []
    text = "any text: \t 日本 🙂 it's 3.5\r\n"
    assert "".join(pretokenize(text)) == text  # the pieces cover the text


def test_merge_replaces_left_to_right_without_overlap():
    assert merge([5, 6, 5, 6, 6], (5, 6), 300) == [300, 300, 6]
    assert merge([7, 7, 7], (7, 7), 301) == [301, 7]
    assert merge([7, 7, 7, 7], (7, 7), 301) == [301, 301]
    assert merge([1, 2], (2, 1), 9) == [1, 2]
    assert merge([], (1, 2), 9) == []


def test_pair_counts_counts_overlapping_pairs_with_weights():
    assert pair_counts([7, 7, 7]) == {(7, 7): 2}
    counts = pair_counts([1, 2, 3], weight=4)
    pair_counts([2, 3], counts, weight=1)
    assert counts == {(1, 2): 4, (2, 3): 5}


def test_training_on_sennrich_example_by_hand():
    """Counts: 'es' and 'st' 9 each (newest 6 + widest 3), a tie that goes to the smaller ids
    ('e' < 's'); then 'est' 9; 'lo' and 'ow' 7, the tie goes to 'lo'; ' lo' 7; ' low' 7."""
    tok = train_bpe(SENNRICH, 5)
    assert [tok.decode([256 + k]) for k in range(5)] == ["es", "est", "lo", " lo", " low"]
    assert tok.tokens(" lowest newer") == [" low", "est", " ", "n", "e", "w", "e", "r"]
    assert len(tok) == 261


def test_the_first_merges_of_a_longer_run_are_a_shorter_run():
    rng = random.Random(0)
    text = " ".join("".join(rng.choice("abcd") for _ in range(rng.randint(1, 6))) for _ in range(300))
    long = train_bpe(text, 40)
    for k in (0, 1, 7, 25):
        assert train_bpe(text, k).merges == long.merges[:k]


def test_training_stops_when_every_piece_is_one_token():
    tok = train_bpe("aaaa aaaa", 100)
    assert tok.tokens("aaaa aaaa") == ["aaaa", " aaaa"]
    assert len(tok.merges) < 100


def naive_train(text, num_merges):
    """The algorithm without bookkeeping: recount every pair of every piece before each merge.
    -> the merges, and each piece's tokens when training ends."""
    pieces = {p: [BYTE_ORDER.index(b) for b in p.encode()] for p in pretokenize(text)}
    weight = {p: pretokenize(text).count(p) for p in pieces}
    merges = []
    for k in range(num_merges):
        counts = {}
        for p, ids in pieces.items():
            for pair in pairwise(ids):
                counts[pair] = counts.get(pair, 0) + weight[p]
        if not counts:
            break
        best = max(counts, key=lambda pair: (counts[pair], -pair[0], -pair[1]))
        merges.append(best)
        pieces = {p: merge(ids, best, 256 + k) for p, ids in pieces.items()}
    return merges, pieces


@pytest.mark.parametrize("seed", range(4))
def test_training_and_encoding_agree_with_the_algorithm_done_slowly(seed):
    """The same merges as recounting everything before each merge; and encoding a training
    piece with the merges gives the tokens training ended with."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("aabcdé") for _ in range(rng.randint(1, 7))) for _ in range(30)]
    text = " ".join(rng.choice(words) for _ in range(300)) + "\n" + SENNRICH
    merges, pieces = naive_train(text, 60)
    tok = train_bpe(text, 60)
    assert tok.merges == merges
    assert all(tok.encode(p) == ids for p, ids in pieces.items())


def test_every_text_round_trips_and_unseen_characters_fall_back_to_bytes():
    tok = train_bpe(SENNRICH * 4 + " the cat sat on the mat", 30)
    rng = random.Random(1)
    alphabet = "abc lowest\n\t日本語🙂é\x00\x7f'"
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert tok.decode(tok.encode(text)) == text
    ids = tok.encode("🙂")
    assert ids == [BYTE_ORDER.index(b) for b in "🙂".encode()] and len(ids) == 4
    assert tok.tokens("🙂") == ["<f0>", "<9f>", "<99>", "<82>"]  # a part of a character: its byte
    assert tok.decode(ids[:2]) == "�"  # half a character: replaced


def test_symbols_are_gpt2_strings():
    tok = train_bpe(SENNRICH, 5)
    assert tok.symbols(tok.encode(" low")[0]) == "Ġlow"
    assert repr(tok) == "BPE(5 merges, 261 tokens)"


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="num_merges must be an int >= 0, got -1"):
        train_bpe("abc", -1)
    with pytest.raises(TypeError, match="num_merges must be an int"):
        train_bpe("abc", 2.0)
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        train_bpe(b"abc", 2)
    with pytest.raises(TypeError, match="text must be a str, got list"):
        BPE([]).encode(["abc"])
    with pytest.raises(ValueError, match=r"ids must be ints in \[0, 256\), got \[256, -1\]"):
        BPE([]).decode([3, 256, -1])
    with pytest.raises(ValueError, match=r"merges\[1\] = \(0, 300\) uses an id that does not exist"):
        BPE([(1, 2), (0, 300)])


class Uniform(torch.nn.Module):
    """A language model that gives every token the same probability, 1 / V."""

    def __init__(self, V):
        super().__init__()
        self.V, self.anchor = V, torch.nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return torch.zeros(*x.shape, self.V) + self.anchor


def test_chars_per_id_counts_the_characters_of_any_text():
    tok = train_bpe(SENNRICH + " naïve café 🙂 日本", 20)
    chars = chars_per_id(tok)
    for text in ["naïve 🙂", " lowest café", "日本語 text", ""]:
        assert sum(chars[i] for i in tok.encode(text)) == len(text)


def test_bits_per_char_divides_the_bits_of_the_predicted_tokens_by_their_characters():
    tok = train_bpe(SENNRICH * 3, 10)
    text = SENNRICH + " 日本"
    ids, chars = torch.tensor(tok.encode(text)), torch.tensor(chars_per_id(tok))
    T = 4
    n = (len(ids) - 1) // T * T
    expected = math.log2(len(tok)) * n / chars[ids[1 : n + 1]].sum().item()
    assert bits_per_char(Uniform(len(tok)), ids, chars, T) == pytest.approx(expected, rel=1e-6)


def test_bits_per_char_of_characters_is_the_usual_measure():
    corpus = data.char_corpus(SENNRICH * 400)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Embedding(len(corpus.vocab), 8), torch.nn.Linear(8, len(corpus.vocab))
    )
    ones = torch.ones(len(corpus.vocab), dtype=torch.long)
    usual = train.bits_per_char(train.lm_heldout_loss(model, corpus.val, seq_len=16))
    assert bits_per_char(model, corpus.val, ones, 16) == pytest.approx(usual, rel=1e-6)
