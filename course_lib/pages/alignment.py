"""Where attention looks, measured on tasks whose true alignment is known.

For some tasks we know which source characters each output character comes from: in the
copy task y_t = x_t; in date normalisation the ISO month comes from the month in the input,
wherever the format puts it. An attention row a_t (weights over the source) **hits** when its
largest weight lands on one of those characters:

    alignment accuracy = (1/N) sum over the N (output t, allowed positions A_t) pairs of
                         [argmax_j a_tj in A_t]

    copy_sources(source, reverse)    {t: (position,)}: output t copies source t (or S - 1 - t)
    date_fields(source)              {"year" | "month" | "day": (start, end)} in a date input
    date_sources(source)             {t: positions}: the ISO characters that depend on the input
    teacher_forced_weights(...)      the attention row of each target character of each pair
    alignment_accuracy(weights, sources)   the fraction of hits
    argmax_offsets(weights, sources)       argmax_j a_tj minus the nearest allowed position

Only output characters that depend on the source are scored: in an ISO date "yyyy-mm-dd" the
dashes and the century "20" are the same for every date of `data.date_pairs` (2000-2099), so
a decoder can write them without looking anywhere.
"""

from __future__ import annotations

import re

import torch

from .._checks import check_bool

__all__ = ["copy_sources", "date_fields", "date_sources", "teacher_forced_weights",
           "alignment_accuracy", "argmax_offsets"]


def copy_sources(source, reverse=False):
    """The copy task (`data.copy_pairs`): output t comes from source position t, or from
    S - 1 - t when the target is the reversed source."""
    check_bool("reverse", reverse)
    S = len(source)
    return {t: ((S - 1 - t) if reverse else t,) for t in range(S)}


# One pattern per family of `data.DATE_FORMATS` (fullmatch, lower case as generated).
_DATE_PATTERNS = {
    "iso": r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})",
    "long, short, weekday_long": r"(?:[a-z]+ )?(?P<day>\d{1,2}) (?P<month>[a-z]+) (?P<year>\d{4})",
    "us_long, us_short": r"(?P<month>[a-z]+) (?P<day>\d{1,2}),? (?P<year>\d{4})",
    "weekday_short": r"[a-z]{3}, (?P<day>\d{1,2}) (?P<month>[a-z]+) (?P<year>\d{4})",
    "dmy_slash": r"(?P<day>\d{2})/(?P<month>\d{2})/(?P<year>\d{2})",
    "dmy_dot": r"(?P<day>\d{1,2})\.(?P<month>\d{1,2})\.(?P<year>\d{4})",
    "ordinal": r"the (?P<day>\d{1,2})(?:st|nd|rd|th) of (?P<month>[a-z]+) (?P<year>\d{4})",
}


def date_fields(source):
    """Where the year, month and day are in an input of `data.date_pairs`:
    {"year": (start, end), "month": ..., "day": ...}, end exclusive."""
    for pattern in _DATE_PATTERNS.values():
        found = re.fullmatch(pattern, source)
        if found:
            return {name: found.span(name) for name in ("year", "month", "day")}
    raise ValueError(f"source={source!r} is in none of the date formats of course_lib.data "
                     f"({', '.join(_DATE_PATTERNS)})")


def _field_sources(span, first, width):
    """Output positions first..first+width-1 of one ISO field -> the source positions they come from.

    A numeric field as wide as the ISO field maps digit to digit; a shorter one (the "9" of
    "9 may", the "18" of the year in "09/05/18") is right-aligned with the ISO digits, and an
    ISO digit with no counterpart (the padding "0" of "09") comes from the whole field, as
    does every digit of a month written as a name.
    """
    start, end = span
    if end - start > width:
        raise ValueError(f"a field of {end - start} characters cannot fill {width} ISO digits")
    out = {}
    for i in range(width):
        j = end - width + i  # the right-aligned source position of ISO digit i
        out[first + i] = (j,) if j >= start else tuple(range(start, end))
    return out


def date_sources(source):
    """ISO output position t -> the source positions that ISO character comes from, for the
    characters that depend on the input: the year's last two digits (2, 3), the month (5, 6)
    and the day (8, 9). A month name counts as a whole: both month digits come from all of it.

    date_sources("9 may 2018") == {2: (8,), 3: (9,), 5: (2, 3, 4), 6: (2, 3, 4), 8: (0,), 9: (0,)}
    """
    fields = date_fields(source)
    _, year_end = fields["year"]
    out = _field_sources((year_end - 2, year_end), 2, 2)  # "yy" of yyyy (or of a 2-digit year)
    month_start, month_end = fields["month"]
    if source[month_start].isalpha():
        out.update({5: tuple(range(month_start, month_end)), 6: tuple(range(month_start, month_end))})
    else:
        out.update(_field_sources(fields["month"], 5, 2))
    out.update(_field_sources(fields["day"], 8, 2))
    return out


@torch.no_grad()
def teacher_forced_weights(model, pairs, src_vocab, tgt_vocab, batch_size=500):
    """The attention weights of a seq2seq model fed the true targets (teacher forcing):
    a list of (T_i, S_i) tensors, row t = the weights with which target character t is written
    (the <eos> row left out). The model is run in eval mode."""
    from ..data import encode_pairs  # local imports: data and seq2seq need nothing from here

    was_training = model.training
    model.eval()
    out = []
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i:i + batch_size]
        batch = encode_pairs(chunk, src_vocab, tgt_vocab)
        _, weights = model(batch["src"], batch["src_len"], batch["tgt_in"])  # (B, T, S)
        if weights is None:
            raise ValueError("the model has no attention (attention=None): it has no weights to score")
        out += [weights[b, :len(t), :len(s)].cpu() for b, (s, t) in enumerate(chunk)]
    model.train(was_training)
    return out


def _scored(weights, sources):
    if len(weights) != len(sources):
        raise ValueError(f"{len(weights)} weight matrices for {len(sources)} source maps")
    for w, allowed in zip(weights, sources):
        for t, positions in allowed.items():
            if t >= w.shape[0]:
                raise ValueError(f"output position {t} has no row in weights of shape {tuple(w.shape)}")
            yield int(w[t].argmax()), positions


def alignment_accuracy(weights, sources):
    """The fraction of scored output characters whose largest attention weight lands on a
    source position they come from.

    weights: list of (T_i, S_i) attention rows; sources: list of {t: allowed positions}
    (`copy_sources`, `date_sources`) -> float in [0, 1]
    """
    hits = [argmax in allowed for argmax, allowed in _scored(weights, sources)]
    if not hits:
        raise ValueError("no output character to score (every source map is empty)")
    return sum(hits) / len(hits)


def argmax_offsets(weights, sources):
    """For each scored output character: the position of its largest weight minus the nearest
    allowed position (0 = a hit, +1 = one character to the right, ...): a list of ints."""
    return [min((argmax - j for j in allowed), key=abs) for argmax, allowed in _scored(weights, sources)]
