"""course_lib.pages.alignment: the true alignments of the copy and date tasks, and alignment accuracy."""

import datetime
import random

import pytest
import torch

from course_lib import data
from course_lib import seq2seq as S
from course_lib.pages import alignment as L


def test_copy_sources():
    assert L.copy_sources("abc") == {0: (0,), 1: (1,), 2: (2,)}
    assert L.copy_sources("abc", reverse=True) == {0: (2,), 1: (1,), 2: (0,)}
    with pytest.raises(TypeError, match="reverse"):
        L.copy_sources("abc", reverse=1)


def test_date_sources_examples():
    assert L.date_sources("9 may 2018") == {2: (8,), 3: (9,), 5: (2, 3, 4), 6: (2, 3, 4), 8: (0,), 9: (0,)}
    assert L.date_sources("09/05/18") == {2: (6,), 3: (7,), 5: (3,), 6: (4,), 8: (0,), 9: (1,)}
    assert L.date_sources("9.11.2018") == {2: (7,), 3: (8,), 5: (2,), 6: (3,), 8: (0,), 9: (0,)}
    assert L.date_sources("2018-05-09") == {t: (t,) for t in (2, 3, 5, 6, 8, 9)}
    assert L.date_sources("the 21st of june 2040")[8] == (4,)
    assert L.date_sources("the 21st of june 2040")[6] == (12, 13, 14, 15)


@pytest.mark.parametrize("fmt", data.DATE_FORMATS)
def test_date_sources_point_at_the_right_characters_in_every_format(fmt):
    """Each scored ISO digit is (or comes from the field that holds) the source characters it
    points at, for random dates in every format of course_lib.data."""
    rng = random.Random(fmt)
    for _ in range(200):
        d = datetime.date(2000, 1, 1) + datetime.timedelta(days=rng.randint(0, 36524))
        source, iso = data._format_date(d, fmt), data._format_date(d, "iso")
        sources = L.date_sources(source)
        assert sorted(sources) == [2, 3, 5, 6, 8, 9]
        for t, positions in sources.items():
            chars = "".join(source[j] for j in positions)
            if (
                len(positions) == 1
                and chars.isdigit()
                and not (t in (5, 8) and iso[t] == "0" and chars != "0")
            ):
                assert chars == iso[t], (source, t, positions)
            elif chars.isalpha():
                assert t in (5, 6) and chars in (data.MONTHS[d.month - 1], data.MONTHS[d.month - 1][:3])
            else:  # the padding zero of a one-digit field comes from that field
                assert iso[t] == "0" and chars == str(int(iso[t : t + 2])), (source, t, positions)


def test_date_fields_rejects_other_text():
    with pytest.raises(ValueError, match="none of the date formats"):
        L.date_fields("yesterday")


def test_alignment_accuracy_and_offsets():
    w = torch.tensor(
        [
            [0.7, 0.2, 0.1],  # t=0 looks at 0: hit
            [0.1, 0.1, 0.8],  # t=1 looks at 2, should be 1: offset +1
            [0.6, 0.3, 0.1],
        ]
    )  # t=2 looks at 0, should be 2: offset -2
    sources = L.copy_sources("abc")
    assert L.alignment_accuracy([w], [sources]) == pytest.approx(1 / 3)
    assert L.argmax_offsets([w], [sources]) == [0, 1, -2]
    assert L.alignment_accuracy([w], [{1: (1, 2)}]) == 1.0  # a span: anywhere in it is a hit
    assert L.argmax_offsets([w], [{2: (0, 1)}]) == [0]
    with pytest.raises(ValueError, match="2 weight matrices for 1 source maps"):
        L.alignment_accuracy([w, w], [sources])
    with pytest.raises(ValueError, match="output position 5 has no row"):
        L.alignment_accuracy([w], [{5: (0,)}])
    with pytest.raises(ValueError, match="no output character to score"):
        L.alignment_accuracy([w], [{}])


def test_teacher_forced_weights_are_the_decoding_weights():
    torch.manual_seed(0)
    pairs = [("12 may 2020", "2020-05-12"), ("1.2.2003", "2003-02-01")]
    src = data.Vocab.from_text([s for s, _ in pairs])
    tgt = data.Vocab.from_text([t for _, t in pairs])
    model = S.build_model(
        len(src), len(tgt), attention="bahdanau", hidden_size=8, embed_size=4, bidirectional=True
    )
    weights = L.teacher_forced_weights(model, pairs, src, tgt)
    assert [tuple(w.shape) for w in weights] == [(10, 11), (10, 8)]
    assert all(torch.allclose(w.sum(-1), torch.ones(10)) for w in weights)
    batch = data.encode_pairs(pairs[1:], src, tgt)  # alone, without padding: the same rows
    _, alone = model.eval()(batch["src"], batch["src_len"], batch["tgt_in"])
    torch.testing.assert_close(weights[1], alone[0, :10])
    with pytest.raises(ValueError, match="no attention"):
        L.teacher_forced_weights(S.build_model(len(src), len(tgt)), pairs, src, tgt)
