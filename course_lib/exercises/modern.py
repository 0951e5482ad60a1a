"""Checks for chapter 12, "The modern decoder"."""

from __future__ import annotations

from ._compare import within
from ._engine import Check, Mistake, Prediction
from ._forbid import Forbidden
from .attention import SDPA

# --------------------------------------------------------------------------------------
# Grouped-query attention
# --------------------------------------------------------------------------------------
check_grouped_attention = Check(
    "check_grouped_attention",
    "fn(q (B, h, T, d_k), k (B, h_kv, T, d_k), v (B, h_kv, T, d_k)) -> (B, h, T, d_k): causal "
    "scaled dot-product attention in which query head i reads key/value head i // (h / h_kv)",
    params=("q", "k", "v"),
    mistakes=[
        Mistake("query head i reads key/value head i % h_kv: the key/value heads were repeated as "
                "a block (repeat, or the copies stacked in front of the heads). A group is h / h_kv "
                "NEIGHBOURING query heads, so query head i reads key/value head i // (h / h_kv): "
                "repeat each head in place (repeat_interleave along the head dim)."),
        Mistake("a query sees later positions: mask the scores where the key comes after the "
                "query (set them to -inf before the softmax)."),
        Mistake("the scores are not scaled: divide q k^T by sqrt(d_k)."),
        Mistake("the weights sum to 1 over the queries: take the softmax over the keys (the last "
                "dim)."),
    ],
    hints=["Give every query head the keys and values of its group first: tensors of shape "
           "(B, h, T, d_k) whose head i is key/value head i // (h / h_kv). Which torch function "
           "repeats each head in place, rather than the whole stack of heads?",
           "Test the grouping with h = 4, h_kv = 2: query heads 0 and 1 must read key/value head "
           "0, heads 2 and 3 head 1.",
           "Then it is causal attention in every head at once: scaled scores (B, h, T, T), the "
           "future masked, the softmax over the keys, times the values."],
    forbidden=(Forbidden("course_lib.llama"), *SDPA),
)


# --------------------------------------------------------------------------------------
# The bytes of a grouped key/value cache
# --------------------------------------------------------------------------------------
check_gqa_cache_bytes = Check(
    "check_gqa_cache_bytes",
    "fn(n_layer, n_head, n_kv_head, d_k, tokens, bytes_per_number) -> int: the bytes the "
    "key/value caches of all the blocks of a decoder with n_kv_head key/value heads of d_k hold "
    "once they have cached `tokens` tokens (all sequences together)",
    params=("n_layer", "n_head", "n_kv_head", "d_k", "tokens", "bytes_per_number"),
    mistakes=[
        Mistake("only the keys (or only the values) are counted: the cache holds both, a factor 2."),
        Mistake("the query heads are counted: the cache holds the key/value heads only "
                "(n_kv_head of them, each shared by n_head / n_kv_head query heads)."),
        Mistake("this is one block's cache: every block keeps its own keys and values."),
        Mistake("this counts bits: bytes_per_number is already the size of a number in bytes, "
                "so there is no factor 8."),
    ],
    hints=["What does one block keep for one token? Count the numbers: how many heads does the "
           "cache store, and how many numbers does each hold?",
           "Then multiply by what repeats it: the tokens, the blocks and the size of a number. "
           "One of the six arguments does not change the answer."],
    no_shortcut="a count of bytes: no library function gives it",
)


# --------------------------------------------------------------------------------------
# Predict, then measure: what one key/value head buys in generation
# --------------------------------------------------------------------------------------
check_gqa_speed_prediction = Prediction(
    "check_gqa_speed_prediction",
    "your prediction of how many times faster the chapter's Llama generates a token with 1 "
    "key/value head than with 4 (8 sequences up to a context of 1024, one CPU thread), against "
    "the committed sweep modern_gqa_cache",
    quantity="the ratio of the milliseconds per generated token with 4 key/value heads to those "
    "with 1 (mean of the sweep's 3 seeds, context 1024, 8 sequences)",
    tolerance=within(rel=0.3), example=2.3,
    explanation=(
        "Generating a token runs one query per sequence against the whole cache: every cached "
        "key and value is read, and each number read takes part in one multiply-add per query "
        "head that reads it. With 4 key/value heads each number serves 1 query head, with 1 it "
        "serves all 4: the multiply-adds with the cache are the same, the bytes read 4 times "
        "fewer. This course's KVCache also grows by torch.cat, which copies the whole cache into a new "
        "tensor at every step: 4 times fewer bytes to copy too. That is the part of a step that "
        "grouping shrinks. The rest does not change: the query and output projections, the "
        "SwiGLU MLP, the output layer over a vocabulary of 2048 and the fixed cost of running "
        "a step's operations (the key and value projections shrink, but they are small). So the "
        "speed-up is well below 4: nearer 4 the more the cache's share dominates (a longer "
        "context enlarges it; more sequences only spread a step's fixed cost, the projections "
        "and the MLP growing with them), near 1 when it is small (at 64 tokens of one sequence "
        "the sweep's three models take about the same time per token). The sweep times whole steps: "
        "it does not say how much of the saving comes from reading less and how much from "
        "copying less."),
    mistakes=[
        Mistake("4 times smaller is the cache, not the step: only the work that touches the cache "
                "shrinks with it. The projections, the SwiGLU MLP, the output layer and the "
                "fixed cost of a step's operations are the same with 1 key/value head as with 4, "
                "so the whole step gains less.",
                lambda measured: 4.0),
        Mistake("the multiply-adds are indeed the same (every query head still takes a dot "
                "product with every cached key and value), but counting them is not counting "
                "the time: a new token's queries use each number of the cache they read in only "
                "one multiply-add per query head sharing it, so reading (and, here, copying) the "
                "cache costs time of its own; with 1 key/value head the 4 query heads share "
                "every key and value read: 4 times fewer bytes.",
                lambda measured: 1.0),
    ],
    hints=["Which work of a generation step grows with the context, and which does not? Which "
           "of the two does the number of key/value heads change?",
           "Per generated token and per block, count the multiply-adds of the attention with the "
           "cache and the bytes of cache it reads, with 4 and with 1 key/value head. Which of "
           "the two does grouping change?",
           "Then add what does not change: the projections, the MLP and the output layer over a "
           "vocabulary of 2048 for 8 sequences."],
)
