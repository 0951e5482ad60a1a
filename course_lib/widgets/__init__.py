"""Explorers: interactive figures that also work on the static site.

Every explorer is an anywidget widget rendered by one shared front end,
``course_lib/static/explorer.js``. Python computes a *frame* (the data of every
panel) for each combination of the control values, and the page switches between
frames, so the explorer reacts with no kernel. With a kernel (Jupyter, Colab),
moving a control also sets the matching trait in Python::

    ex = DkExplorer()
    ex                  # shows the explorer
    ex.d_k, ex.scaled   # the values the learner picked
    ex.frame()          # the numbers behind the current picture

Each explorer also draws a static matplotlib figure (``ex.figure(...)``) for
print, PDF and readers without JavaScript.

The base class lives in ``base.py``; each chapter's explorers in a module named
after the chapter's topic (``attention.py``, ...), all re-exported here.
"""

from .attention import D_K_OPTIONS, DkExplorer, dk_frame, softmax_gradient_norm  # noqa: F401
from .base import STATIC, Explorer, frame_key  # noqa: F401
from .multihead import MASK_SENTENCES, HeadsExplorer, MasksExplorer, masks_frame  # noqa: F401
from .positional import PositionsExplorer, positions_frame  # noqa: F401
from .rnn import (  # noqa: F401
                  FORGET_BIAS_OPTIONS,
                  GAIN_OPTIONS,
                  NONLINEARITY_OPTIONS,
                  TEMPERATURE_OPTIONS,
                  ForgetBiasExplorer,
                  GradientFlowExplorer,
                  TemperatureExplorer,
                  gradient_reach,
                  hidden_jacobians,
                  jacobian_norms,
)
from .seq2seq import AlignmentExplorer, ScoreExplorer, alignment_frame, toy_score_frame  # noqa: F401
from .transformer import LayerHeadExplorer, pattern_scores  # noqa: F401
from .tokens import MERGE_OPTIONS, SENTENCES, TokensExplorer, chars_per_token, tokens_frame  # noqa: F401
from .gpt_explorer import GPTExplorer, load_capstone  # noqa: F401
from .gqa import CONTEXT_OPTIONS, KV_HEAD_OPTIONS, GQAExplorer, cache_bytes_per_token, kv_head_of  # noqa: F401
