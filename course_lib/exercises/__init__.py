"""Auto-checks for the exercises.

Each ``check_*(fn)`` runs the learner's function on a few seeded inputs (edge cases included),
compares the result with the library's reference implementation and reports:

* success: prints ``✓ check_x: all N cases passed`` and returns a :class:`CheckResult`
  (truthy; it displays nothing by itself, so a check as the last line of a cell prints once);
* the learner's function still raises ``NotImplementedError`` (the student-edition stub):
  raises :class:`ExerciseNotAttempted`, which is both an :class:`ExerciseFailure` and a
  ``NotImplementedError``;
* a wrong answer, a wrong shape or dtype, or an exception from the learner's code: raises
  :class:`ExerciseFailure` (an ``AssertionError``) whose message names the failing case, its
  input shapes, the expected vs. the received result, a likely cause when the mistake is a
  common one, and a hint. Messages never show the reference implementation.

Usage in a notebook::

    from course_lib.exercises import check_scaled_dot_score
    check_scaled_dot_score(my_scaled_dot_score)

One module per topic (``attention.py``, ...) holds that chapter's checks; this package
re-exports them all. To write a new check: describe the cases (:class:`Case`), pick a
comparison (``_compare`` handles tensors and tuples of tensors) and, optionally, a function
that recognises common mistakes; then call :func:`_run_cases` (all in ``_engine.py``).
"""

from ._engine import Case, CheckResult, ExerciseFailure, ExerciseNotAttempted  # noqa: F401
from .attention import (check_attention, check_causal_mask, check_masked_softmax,  # noqa: F401
                        check_scaled_dot_score)
from .multihead import (check_attention_flops, check_cross_attention,  # noqa: F401
                        check_key_padding_mask, check_merge_heads, check_multihead_forward,
                        check_self_attention, check_split_heads)
from .positional import check_alibi_bias, check_shift_matrix, check_sinusoidal_encoding  # noqa: F401
from .rnn import (check_bidirectional, check_bptt_jacobian, check_clip_grad_norm,  # noqa: F401
                  check_cosine_similarity, check_gru_cell, check_rnn_forward, check_sample_next,
                  check_set_forget_bias)
from .seq2seq import (check_additive_score, check_beam_step, check_greedy_search,  # noqa: F401
                      check_local_weights, check_luong_step, check_sequence_loss)
from .transformer import (check_bits_per_char, check_decoder_layer, check_greedy_decode,  # noqa: F401
                          check_kv_cache_step, check_shift_right, check_temperature_probs)
