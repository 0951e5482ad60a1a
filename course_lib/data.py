"""Data for the course's tasks: generated, or shipped with Python. Nothing is downloaded.

    Vocab                  tokens <-> ids, with <pad>, <bos>, <eos>, <unk>
    date_pairs             "saturday 9 may 2018" -> "2018-05-09" in many input formats
    copy_pairs             "abcd" -> "abcd" (or "dcba" with reverse=True), variable lengths
    encode_pairs           pairs of strings -> padded tensors for an encoder-decoder
    batches                shuffled mini-batches of a dict of tensors
    load_text, char_corpus real English text (CPython's pydoc_data) for character models
    lm_batch               random windows of a corpus for language modelling

Every generator is deterministic given its seed.
"""

from __future__ import annotations

import datetime
import random
from dataclasses import dataclass
from collections.abc import Iterable, Iterator, Sequence

import torch

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)


# ---------------------------------------------------------------------------
# Vocabulary
# ---------------------------------------------------------------------------

class Vocab:
    """A mapping between tokens (here: characters) and integer ids.

    The special tokens come first, so ``pad_id == 0`` and padding rows of an
    embedding are easy to spot. Unknown tokens map to ``<unk>``.
    """

    def __init__(self, tokens: Iterable[str], specials: Sequence[str] = SPECIALS):
        self.itos: list[str] = list(specials) + sorted(set(tokens) - set(specials))
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}
        self.specials = tuple(specials)

    @classmethod
    def from_text(cls, texts, specials: Sequence[str] = SPECIALS) -> Vocab:
        """A character vocabulary from one string or a list of strings."""
        if isinstance(texts, str):
            texts = [texts]
        return cls((ch for text in texts for ch in text), specials)

    def __len__(self) -> int:
        return len(self.itos)

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {''.join(self.itos[len(self.specials):])[:40]!r}...)"

    def _special_id(self, token):
        if token not in self.stoi:
            raise ValueError(f"this vocabulary has no {token} token (specials={self.specials})")
        return self.stoi[token]

    pad_id = property(lambda self: self._special_id(PAD))
    bos_id = property(lambda self: self._special_id(BOS))
    eos_id = property(lambda self: self._special_id(EOS))
    unk_id = property(lambda self: self._special_id(UNK))

    def encode(self, tokens: Iterable[str], bos: bool = False, eos: bool = False) -> list[int]:
        """Tokens (e.g. a string) -> ids, optionally wrapped in <bos> ... <eos>."""
        unk = self.stoi.get(UNK)
        ids = []
        for t in tokens:
            if t in self.stoi:
                ids.append(self.stoi[t])
            elif unk is not None:
                ids.append(unk)
            else:
                raise ValueError(f"token {t!r} is not in the vocabulary and it has no {UNK}")
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids: Iterable[int], skip_specials: bool = True) -> str:
        """Ids -> string. Stops at the first <eos>; drops <pad> and <bos> (if skip_specials)."""
        out = []
        eos = self.stoi.get(EOS)
        for i in (ids.tolist() if torch.is_tensor(ids) else ids):
            if i == eos and skip_specials:
                break
            token = self.itos[i]
            if skip_specials and token in self.specials:
                continue
            out.append(token)
        return "".join(out)


# ---------------------------------------------------------------------------
# Task 1: date normalisation
# ---------------------------------------------------------------------------

MONTHS = ["january", "february", "march", "april", "may", "june", "july",
          "august", "september", "october", "november", "december"]
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def _format_date(d: datetime.date, fmt: str) -> str:
    month, mon, day = MONTHS[d.month - 1], MONTHS[d.month - 1][:3], DAYS[d.weekday()]
    formats = {
        "iso": f"{d.year}-{d.month:02d}-{d.day:02d}",
        "long": f"{d.day} {month} {d.year}",                      # 9 may 2018
        "weekday_long": f"{day} {d.day} {month} {d.year}",        # saturday 9 may 2018
        "us_long": f"{month} {d.day}, {d.year}",                  # may 9, 2018
        "short": f"{d.day} {mon} {d.year}",                       # 9 may 2018 (abbreviated)
        "us_short": f"{mon} {d.day} {d.year}",                    # may 9 2018
        "weekday_short": f"{day[:3]}, {d.day} {mon} {d.year}",    # sat, 9 may 2018
        "dmy_slash": f"{d.day:02d}/{d.month:02d}/{d.year % 100:02d}",  # 09/05/18
        "dmy_dot": f"{d.day}.{d.month}.{d.year}",                 # 9.5.2018
        "ordinal": f"the {d.day}{_ordinal_suffix(d.day)} of {month} {d.year}",
    }
    if fmt not in formats:
        raise ValueError(f"unknown date format {fmt!r}; known: {sorted(formats)}")
    return formats[fmt]


def _ordinal_suffix(n: int) -> str:
    if 11 <= n % 100 <= 13:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


DATE_FORMATS = ["long", "weekday_long", "us_long", "short", "us_short", "weekday_short",
                "dmy_slash", "dmy_dot", "ordinal", "iso"]
"""Input formats of :func:`date_pairs`. Two-digit years (dmy_slash) mean 20yy, so dates
are drawn from 2000–2099 to keep every input unambiguous."""


def date_pairs(n: int, seed: int = 0, formats: Sequence[str] = DATE_FORMATS,
               start: datetime.date = datetime.date(2000, 1, 1),
               end: datetime.date = datetime.date(2099, 12, 31)) -> list[tuple[str, str]]:
    """n (input, target) pairs such as ("saturday 9 may 2018", "2018-05-09").

    Dates are uniform in [start, end], formats uniform over `formats`.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(seed)
    span = (end - start).days
    pairs = []
    for _ in range(n):
        d = start + datetime.timedelta(days=rng.randint(0, span))
        pairs.append((_format_date(d, rng.choice(list(formats))), _format_date(d, "iso")))
    return pairs


# ---------------------------------------------------------------------------
# Task 2: copy and reverse
# ---------------------------------------------------------------------------

def copy_pairs(n: int, seed: int = 0, min_len: int = 1, max_len: int = 10,
               alphabet: str = "abcdefghijklmnopqrstuvwxyz", reverse: bool = False
               ) -> list[tuple[str, str]]:
    """n (input, target) pairs: a random string and its copy (or its reversal)."""
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(min_len, max_len)))
        pairs.append((s, s[::-1] if reverse else s))
    return pairs


# ---------------------------------------------------------------------------
# Tensors and batches
# ---------------------------------------------------------------------------

def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int = 0, length: int | None = None
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id sequences into a (B, T) LongTensor; also return the lengths (B,)."""
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    T = int(lengths.max()) if length is None else length
    if len(seqs) and T < int(lengths.max()):  # noqa: SIM300 (T is a length, not a constant)
        raise ValueError(f"length={length} is shorter than the longest sequence ({int(lengths.max())})")
    out = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out, lengths


def encode_pairs(pairs: Sequence[tuple[str, str]], src_vocab: Vocab, tgt_vocab: Vocab
                 ) -> dict[str, torch.Tensor]:
    """(input, target) strings -> padded tensors for teacher-forced training.

    src:     (N, S)  input ids, right-padded
    src_len: (N,)    input lengths
    tgt_in:  (N, T)  <bos> y_1 ... y_n   (what the decoder reads)
    tgt_out: (N, T)  y_1 ... y_n <eos>   (what it must predict; pad = ignore)
    """
    src, src_len = pad_batch([src_vocab.encode(s) for s, _ in pairs], src_vocab.pad_id)
    targets = [tgt_vocab.encode(t) for _, t in pairs]
    tgt_in, _ = pad_batch([[tgt_vocab.bos_id] + t for t in targets], tgt_vocab.pad_id)
    tgt_out, _ = pad_batch([t + [tgt_vocab.eos_id] for t in targets], tgt_vocab.pad_id)
    return {"src": src, "src_len": src_len, "tgt_in": tgt_in, "tgt_out": tgt_out}


def batches(data: dict[str, torch.Tensor], batch_size: int, shuffle: bool = True,
            seed: int = 0) -> Iterator[dict[str, torch.Tensor]]:
    """Endless mini-batches of a dict of equally long tensors (reshuffled every epoch)."""
    n = len(next(iter(data.values())))
    if any(len(v) != n for v in data.values()):
        raise ValueError(
            f"all tensors need the same first dim; got {[tuple(v.shape) for v in data.values()]}")
    g = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(n, generator=g) if shuffle else torch.arange(n)
        for i in range(0, n - batch_size + 1 if n >= batch_size else 1, batch_size):
            idx = order[i:i + batch_size]
            yield {k: v[idx] for k, v in data.items()}


# ---------------------------------------------------------------------------
# Real text: CPython's documentation topics (about 0.5 MB of English prose)
# ---------------------------------------------------------------------------

def load_text() -> str:
    """The text of ``pydoc_data.topics`` (help() pages of Python), topics in sorted order.

    Its content differs slightly between Python versions.
    """
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key].strip() for key in sorted(topics))


def split_text(text: str, fractions: Sequence[float] = (0.9, 0.05, 0.05), block: int = 500
               ) -> tuple[str, ...]:
    """Train / validation / test pieces of a text that are alike (no overlap, no shuffling).

    The text is cut into blocks of about `block` characters, each ending at the end of a line
    (a text with no line end within 2 * `block` characters is cut at `block` characters),
    and the blocks are dealt out in order so that every piece gets its fraction of every part of
    the text: block i goes to the piece furthest behind its share (f_k * (i + 1) - blocks so far).
    With (0.9, 0.05, 0.05) one block in 20 goes to validation and one to test, spread evenly,
    so the held-out pieces hold the same mix of prose, code and tables as the training piece
    (a contiguous 5 % at the end would hold whatever that part of the text is about).
    """
    if abs(sum(fractions) - 1) > 1e-9 or any(f < 0 for f in fractions):
        raise ValueError(f"fractions must be >= 0 and sum to 1, got {fractions}")
    if block < 1:
        raise ValueError(f"block must be a positive number of characters, got {block}")
    pieces, counts, start = [[] for _ in fractions], [0] * len(fractions), 0
    while start < len(text):
        end = text.find("\n", start + block, start + 2 * block)
        end = min(len(text), start + block) if end < 0 else end + 1   # the block ends with its line
        i = sum(counts)
        k = max(range(len(fractions)), key=lambda k: fractions[k] * (i + 1) - counts[k])
        pieces[k].append(text[start:end])
        counts[k] += 1
        start = end
    return tuple("".join(p) for p in pieces)


@dataclass
class CharCorpus:
    """A character-level corpus: its vocabulary and the id tensors of each split."""
    vocab: Vocab
    train: torch.Tensor   # (N_train,) long
    val: torch.Tensor     # (N_val,) long
    test: torch.Tensor    # (N_test,) long


def char_corpus(text: str | None = None, fractions=(0.9, 0.05, 0.05)) -> CharCorpus:
    """The pydoc_data text (or `text`) split 90/5/5 by `split_text`, as character ids.

    The vocabulary comes from the training split only, plus <unk> for characters seen
    only in held-out text (no other specials: a language model needs none).
    """
    train, val, test = split_text(load_text() if text is None else text, fractions)
    vocab = Vocab.from_text(train, specials=(UNK,))
    ids = lambda s: torch.tensor(vocab.encode(s), dtype=torch.long)  # noqa: E731
    return CharCorpus(vocab, ids(train), ids(val), ids(test))


def lm_batch(ids: torch.Tensor, batch_size: int, seq_len: int,
             generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of a corpus for next-character prediction.

    ids: (N,) -> x: (B, seq_len), y: (B, seq_len) with y[:, t] = x[:, t + 1].
    """
    if ids.dim() != 1 or len(ids) <= seq_len:
        raise ValueError(f"ids must be 1-D and longer than seq_len={seq_len}, got shape {tuple(ids.shape)}")
    start = torch.randint(0, len(ids) - seq_len, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(seq_len + 1)                                               # (T+1,)
    windows = ids[start[:, None] + offsets]                                           # (B, T+1)
    return windows[:, :-1], windows[:, 1:]


# ---------------------------------------------------------------------------
# Batches of similar lengths (for recurrent encoder-decoders)
# ---------------------------------------------------------------------------

def length_batches(data: dict[str, torch.Tensor], batch_size: int, seed: int = 0,
                   pool: int = 20) -> Iterator[dict[str, torch.Tensor]]:
    """Endless mini-batches of `encode_pairs` tensors, grouped by source length and trimmed.

    Each epoch shuffles the examples, cuts them into pools of `pool` batches, sorts each
    pool by source length and cuts it into batches, whose order is shuffled again. Every
    batch is trimmed to its own longest source and target, so a recurrent network steps
    through fewer padding positions (the same examples, in a different grouping).
    """
    n = len(data["src"])
    if batch_size < 1 or n < batch_size:
        raise ValueError(f"need 1 <= batch_size <= number of examples ({n}), got {batch_size}")
    g = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(n, generator=g)
        groups = []
        for i in range(0, n, batch_size * pool):
            chunk = order[i:i + batch_size * pool]
            chunk = chunk[data["src_len"][chunk].argsort(stable=True)]
            groups += [chunk[j:j + batch_size] for j in range(0, len(chunk) - batch_size + 1, batch_size)]
        for k in torch.randperm(len(groups), generator=g).tolist():
            yield _trim({key: v[groups[k]] for key, v in data.items()})


def _trim(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Cut the padding columns that no example of the batch needs."""
    S = int(batch["src_len"].max())
    T = int((batch["tgt_out"] != 0).sum(1).max()) if "tgt_out" in batch else None
    out = dict(batch, src=batch["src"][:, :S])
    if T is not None:
        out["tgt_in"], out["tgt_out"] = batch["tgt_in"][:, :T], batch["tgt_out"][:, :T]
    return out
