"""Small untrained models that several test modules build the same way: seeded, no dropout."""

from __future__ import annotations

import torch

from course_lib.charlm import CharLM
from course_lib.data import Vocab
from course_lib.transformer import Transformer, TransformerConfig

TEXT = "the cat sat on the mat. the dog sat on the log. " * 20


def tiny_transformer(
    src_vocab_size: int = 9, tgt_vocab_size: int = 7, seed: int = 0, **options
) -> Transformer:
    """A Transformer with d_model 16, 4 heads, d_ff 32, 2 encoder and 2 decoder layers, no dropout,
    initialised from `seed`, in eval mode; `options` override any of its keyword arguments."""
    torch.manual_seed(seed)
    kwargs = dict(d_model=16, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=32, dropout=0.0)
    kwargs.update(options)
    return Transformer(TransformerConfig(src_vocab_size, tgt_vocab_size, **kwargs)).eval()


def tiny_char_lm(seed: int = 0) -> tuple[CharLM, Vocab, str]:
    """A GRU character LM (embedding 8, 16 units) over the characters of TEXT: (model, vocab, TEXT)."""
    vocab = Vocab.from_text(TEXT, specials=("<unk>",))
    torch.manual_seed(seed)
    return CharLM(len(vocab), "gru", embed_size=8, hidden_size=16), vocab, TEXT
