"""course_lib.data: vocabularies, the generated tasks, batching, the real-text corpus."""

import datetime

import pytest
import torch

from course_lib import data
from course_lib.data import (
    DATE_FORMATS,
    Vocab,
    batches,
    char_corpus,
    copy_pairs,
    date_pairs,
    encode_pairs,
    lm_batch,
    pad_batch,
    split_text,
)


def test_vocab_round_trip_and_specials():
    v = Vocab.from_text(["hello", "world"])
    assert v.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"] and v.pad_id == 0
    ids = v.encode("hold", bos=True, eos=True)
    assert ids[0] == v.bos_id and ids[-1] == v.eos_id
    assert v.decode(ids) == "hold"
    assert v.decode(v.encode("hq")) == "h"  # q is unknown -> <unk>, dropped by decode
    assert v.decode(v.encode("ab") + [v.eos_id] + v.encode("lo")) == ""  # stops at <eos>
    assert v.decode(v.encode("lo") + [v.eos_id] + v.encode("ld")) == "lo"
    assert len(v) == 4 + len(set("helloworld"))


def test_vocab_without_unk_rejects_unknown_tokens():
    v = Vocab("ab", specials=())
    with pytest.raises(ValueError, match="'c' is not in the vocabulary"):
        v.encode("abc")
    with pytest.raises(ValueError, match="no <pad>"):
        _ = v.pad_id


def test_date_pairs_are_correct_deterministic_and_varied():
    pairs = date_pairs(500, seed=1)
    assert pairs == date_pairs(500, seed=1) and pairs != date_pairs(500, seed=2)
    for src, tgt in pairs:
        d = datetime.date.fromisoformat(tgt)
        assert str(d.year) in src or f"{d.year % 100:02d}" in src
    sources = {fmt: data._format_date(datetime.date(2018, 5, 9), fmt) for fmt in DATE_FORMATS}
    assert sources["weekday_long"] == "wednesday 9 may 2018"
    assert sources["dmy_slash"] == "09/05/18"
    assert sources["us_long"] == "may 9, 2018"
    assert sources["ordinal"] == "the 9th of may 2018"
    assert data._format_date(datetime.date(2011, 11, 12), "ordinal") == "the 12th of november 2011"
    assert data._format_date(datetime.date(2021, 3, 22), "ordinal") == "the 22nd of march 2021"
    # every format appears, and inputs are unambiguous: one input -> one target
    assert len({src for src, _ in date_pairs(5000, seed=0)}) > 4000
    mapping = {}
    for src, tgt in date_pairs(20000, seed=3):
        assert mapping.setdefault(src, tgt) == tgt


def test_date_pairs_bad_format():
    with pytest.raises(ValueError, match="unknown date format 'julian'"):
        date_pairs(3, formats=["julian"])


def test_copy_and_reverse_pairs():
    pairs = copy_pairs(100, seed=0, min_len=3, max_len=5, alphabet="xyz", reverse=True)
    assert all(t == s[::-1] and 3 <= len(s) <= 5 and set(s) <= set("xyz") for s, t in pairs)
    assert {len(s) for s, _ in pairs} == {3, 4, 5}
    with pytest.raises(ValueError, match="min_len"):
        copy_pairs(1, min_len=4, max_len=2)


def test_pad_batch_and_encode_pairs():
    x, lengths = pad_batch([[5, 6, 7], [8]], pad_id=0)
    assert x.tolist() == [[5, 6, 7], [8, 0, 0]] and lengths.tolist() == [3, 1]
    with pytest.raises(ValueError, match="shorter than the longest"):
        pad_batch([[1, 2, 3]], length=2)
    src_v, tgt_v = Vocab.from_text("abc"), Vocab.from_text("0123456789-")
    t = encode_pairs([("ab", "12"), ("abc", "3")], src_v, tgt_v)
    assert t["src"].shape == (2, 3) and t["src_len"].tolist() == [2, 3]
    assert t["tgt_in"][:, 0].tolist() == [tgt_v.bos_id] * 2
    assert tgt_v.decode(t["tgt_out"][0]) == "12" and t["tgt_out"][1, 1] == tgt_v.eos_id
    assert (t["tgt_in"][:, 1:2] == t["tgt_out"][:, 0:1]).all()  # shifted right by one


def test_batches_cover_every_example_each_epoch():
    d = {"a": torch.arange(10), "b": torch.arange(10) * 2}
    it = batches(d, batch_size=5, seed=0)
    first_epoch = torch.cat([next(it)["a"] for _ in range(2)])
    assert sorted(first_epoch.tolist()) == list(range(10))
    batch = next(it)
    assert (batch["b"] == 2 * batch["a"]).all()
    with pytest.raises(ValueError, match="same first dim"):
        next(batches({"a": torch.arange(3), "b": torch.arange(4)}, 2))


def test_split_text_deals_out_whole_lines_in_proportion():
    lines = [f"line {i:04d} " + "x" * (i % 37) + "\n" for i in range(2000)]
    text = "".join(lines)
    parts = split_text(text, (0.8, 0.1, 0.1), block=200)
    kept = sorted(line for part in parts for line in part.splitlines(keepends=True))
    assert kept == sorted(lines)  # every line once: no overlap, nothing lost, none cut
    shares = [len(p) / len(text) for p in parts]
    assert all(abs(s - f) < 0.01 for s, f in zip(shares, (0.8, 0.1, 0.1))), shares
    # spread out: each tenth of the text gives the held-out pieces their share
    for part in parts[1:]:
        first = [int(line[5:9]) for line in part.splitlines()]
        assert max(first) > 1800 and min(first) < 200
    assert split_text(text, (1.0, 0.0, 0.0))[0] == text
    one_line = "the cat sat on the mat. " * 400  # no line ends at all
    parts = split_text(one_line, (0.9, 0.05, 0.05), block=100)
    assert "".join(parts) != one_line and sum(map(len, parts)) == len(one_line)
    assert [len(p) for p in parts] == [8600, 500, 500]  # 96 blocks of 100: 86 / 5 / 5
    with pytest.raises(ValueError, match="sum to 1"):
        split_text(text, (0.5, 0.1))
    with pytest.raises(ValueError, match="block must be a positive"):
        split_text(text, block=0)


def test_char_corpus_held_out_text_is_like_the_training_text():
    """The splits hold the same mix of prose and ASCII tables (a contiguous test split at the
    end of the text was about 10 % table characters |-+= against 3 % in training)."""
    corpus = char_corpus()
    assert len(corpus.train) > 300_000 and len(corpus.val) > 10_000 and len(corpus.test) > 10_000
    assert 60 < len(corpus.vocab) < 200
    assert corpus.vocab.decode(corpus.train[:200]) == data.load_text()[:200]

    def table_share(ids):
        text = corpus.vocab.decode(ids)
        return sum(c in "|-+=" for c in text) / len(text)

    train, val, test = (table_share(ids) for ids in (corpus.train, corpus.val, corpus.test))
    print(f"table characters: train {train:.3f}, val {val:.3f}, test {test:.3f}")
    assert abs(val - train) < 0.01 and abs(test - train) < 0.01


def test_lm_batch_targets_are_inputs_shifted():
    ids = torch.arange(100)
    x, y = lm_batch(ids, 4, 10, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 10) and (y == x + 1).all()
    with pytest.raises(ValueError, match="longer than seq_len=10"):
        lm_batch(torch.arange(5), 2, 10)


def test_length_batches_group_similar_lengths_and_trim_padding():
    pairs = data.copy_pairs(400, seed=0, min_len=1, max_len=30)
    vocab = Vocab.from_text("abcdefghijklmnopqrstuvwxyz")
    tensors = encode_pairs(pairs, vocab, vocab)
    it = data.length_batches(tensors, 20, seed=0, pool=5)
    seen, spreads = [], []
    for _ in range(20):  # one epoch: 400 / 20 batches
        b = next(it)
        S, T = b["src"].shape[1], b["tgt_in"].shape[1]
        assert int(b["src_len"].max()) == S and T == S + 1  # copy: target = source + <eos>
        assert b["tgt_out"].shape == (20, T) and (b["tgt_out"] != 0).sum(1).max() == T
        spreads.append(int(b["src_len"].max() - b["src_len"].min()))
        for src, n in zip(b["src"].tolist(), b["src_len"].tolist()):
            seen.append(vocab.decode(src[:n]))
    assert sorted(seen) == sorted(s for s, _ in pairs)  # every example once per epoch
    assert sum(spreads) / len(spreads) < 10  # random batches of lengths 1..30 spread ~27
    with pytest.raises(ValueError, match="batch_size"):
        next(data.length_batches(tensors, 500))
