"""Chapter 11 (tokens): the capstone's GPT trained on BPE tokens against characters, at equal
steps, compared in bits per character of held-out text (book/11_tokens.ipynb reads the two
sweeps below: tokens_gpt, and tokens_gpt_lr8, which extends its grid of learning rates).

    python benchmarks/sweep.py tokens_gpt --jobs 2        # 36 runs, 53 min on 2 cores
    python benchmarks/sweep.py tokens_gpt_lr8 --jobs 2    # 12 runs, 21 min on 2 cores

Equal steps: the same model body (the capstone's GPTConfig: 4 blocks, 4 heads, width 128,
context 64 tokens), the same recipe (train.GPT_RECIPE: batches of 12 windows of 64 tokens,
AdamW, warm-up and cosine decay) and the same number of steps, so every run reads the same
number of tokens and does the same work in its blocks (not the same work in all: the output
layer of a larger vocabulary costs more, +14 % multiply-adds per token at 1024, +29 % at 2048).
What differs is what a token is: a character (the capstone's vocabulary, data.char_corpus), or a
byte-level BPE token learned on the training split (course_lib.bpe) with a vocabulary of 512,
1024 or 2048. A BPE token holds several characters, so at equal steps the BPE model reads more
text per step and sees a longer context in characters; it pays with a larger embedding and
output layer (V x 128 numbers each, tied) and rarer tokens. Each run is scored in bits per
character (bpe.bits_per_char) on the validation and the test split, read in windows of 64
tokens.
"""

import dataclasses

import torch
from common import SweepSpec

from course_lib import bpe, data, train
from course_lib.gpt import GPT, GPTConfig

TOKENIZERS = ["chars", "bpe-512", "bpe-1024", "bpe-2048"]
METRICS = {
    "val_bpc": {"unit": "bits/char", "higher_is_better": False},
    "test_bpc": {"unit": "bits/char", "higher_is_better": False},
    "chars_per_token": {"unit": "chars/token", "higher_is_better": True},
    "epochs": {"unit": "passes over the training text", "higher_is_better": False},
    "params": {"unit": "parameters", "higher_is_better": False},
    "train_seconds": {"unit": "s", "higher_is_better": False},
}


def token_corpus(tokenizer):
    """The course's text, split as data.char_corpus splits it, as ids of `tokenizer` ("chars" or
    "bpe-V", BPE trained on the training split) -> (corpus with .train/.val/.test id tensors,
    vocabulary size, characters per id (V,))."""
    if tokenizer == "chars":
        corpus = data.char_corpus()
        return corpus, len(corpus.vocab), torch.ones(len(corpus.vocab), dtype=torch.long)
    train_text, val_text, test_text = data.split_text(data.load_text())
    tok = bpe.train_bpe(train_text, int(tokenizer.split("-")[1]) - 256)
    ids = lambda text: torch.tensor(tok.encode(text), dtype=torch.long)  # noqa: E731
    corpus = data.CharCorpus(vocab=None, train=ids(train_text), val=ids(val_text), test=ids(test_text))
    return corpus, len(tok), torch.tensor(bpe.chars_per_id(tok))


def tokens_run(point, seed, config):
    """One GPT trained `steps` steps on the point's tokens at its learning rate: held-out bits
    per character on the validation and test splits, and what the tokens cost."""
    corpus, vocab_size, chars = token_corpus(point["tokenizer"])
    context = config["context"]
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=vocab_size, block_size=context))
    recipe = dataclasses.replace(train.GPT_RECIPE, lr=point["lr"], seq_len=context)
    history = train.train_lm(
        model,
        corpus,
        point["steps"],
        recipe,
        seed=seed,
        progress=False,
        eval_fn=lambda m: bpe.bits_per_char(m, corpus.val, chars, context),
    )
    train_chars = chars[corpus.train].sum().item()
    return {
        "val_bpc": history.evals[-1][1],
        "test_bpc": bpe.bits_per_char(model, corpus.test, chars, context),
        "chars_per_token": train_chars / len(corpus.train),
        "epochs": point["steps"] * recipe.batch_size * context / len(corpus.train),
        "params": train.count_parameters(model),
        "train_seconds": history.seconds,
    }


LEARNING_RATES = [1e-3, 2e-3, 4e-3]

SWEEPS = {
    "tokens_gpt": SweepSpec(
        title="The capstone GPT on characters and on BPE tokens (vocabularies 512, 1024, 2048), "
        "1350 steps of 12 windows of 64 tokens, learning rates 0.001, 0.002 and 0.004",
        run=tokens_run,
        points=[{"tokenizer": t, "lr": lr, "steps": 1350} for t in TOKENIZERS for lr in LEARNING_RATES],
        config={"context": 64},
        smoke={"steps": 8},
        margins={"test_bpc": 0.05},
        metrics=METRICS,
        records=[("test_bpc", "tokens_gpt_test_bpc/{tokenizer}/lr{lr}")],
        description="Equal steps: the same GPT body (GPTConfig's defaults: 4 blocks, 4 heads, "
        "width 128, tied embeddings), a context of 64 tokens, GPT_RECIPE, 1350 steps (the capstone's "
        "budget on one thread when this sweep ran); each tokenizer at three learning rates a factor "
        "of 2 apart (each tokenizer's best "
        "is chosen on the validation split and reported on the test split). Bits per character of "
        "held-out text (bpe.bits_per_char). Margin declared before the run: a claim that one "
        "tokenizer beats another on test bits per character needs a gap of 0.05 between the worst "
        "seed of one and the best seed of the other. Cost, measured before the run: 105-150 ms a "
        "step on one thread (the larger vocabularies' output layer does not show above the "
        "noise of a shared machine), so 36 runs of 1350 steps take about 1.7 CPU-core-hours. "
        "3 seeds.",
    ),
}
SWEEPS["tokens_gpt_lr8"] = dataclasses.replace(
    SWEEPS["tokens_gpt"],
    title="tokens_gpt's grid extended: every tokenizer at learning rate 0.008, "
    "1350 steps of 12 windows of 64 tokens",
    points=[{"tokenizer": t, "lr": 8e-3, "steps": 1350} for t in TOKENIZERS],
    description="Declared while tokens_gpt ran, once its character and BPE-512 runs were "
    "best at 0.004, the largest rate of its grid: one more rate, 0.008, for every tokenizer, "
    "same runs otherwise (tokens_run), so that each tokenizer's rate is chosen on the "
    "validation split from 0.001 to 0.008 and none is held back by the grid's edge. Same "
    "margin as tokens_gpt: 0.05 bits per character on the test split, worst seed against "
    "best seed. 3 seeds.",
)
