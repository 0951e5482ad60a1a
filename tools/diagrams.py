"""The book's architecture diagrams, written as SVG into ``book/figures/``.

    python tools/diagrams.py          # writes every diagram
    python tools/diagrams.py --check  # exits 1 if a committed SVG differs from what this writes

One source for every diagram, so that they share one style and one notation (the pages'):
x_t, h_t, c_t, W_hh for the recurrent cells; h_j (j = 1..S) for the encoder's states, s for the
decoder's, c for a context vector; Q, K, V, d_k, h heads, d_model for attention. The palette, the
text and maths setting and the SVG canvas are tools/diagram_svg.py's; the drawings of chapters 1
to 4 are tools/diagrams_recurrent.py's, those of chapters 5 to 10 tools/diagrams_transformer.py's,
chapter 12's tools/diagrams_modern.py's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from diagrams_modern import modern_block
from diagrams_recurrent import attention_over_encoder, gru_cell, lstm_cell, rnn_unrolled, seq2seq_bottleneck
from diagrams_transformer import (
    gpt_block,
    multi_head,
    scaled_dot_product,
    self_and_cross_attention,
    transformer_layers,
)

OUT = Path(__file__).resolve().parent.parent / "book" / "figures"

DIAGRAMS = {
    "rnn_unrolled_bptt": rnn_unrolled,
    "lstm_cell": lstm_cell,
    "gru_cell": gru_cell,
    "seq2seq_bottleneck": seq2seq_bottleneck,
    "attention_over_encoder_states": attention_over_encoder,
    "scaled_dot_product_attention": scaled_dot_product,
    "self_and_cross_attention": self_and_cross_attention,
    "multi_head_attention": multi_head,
    "transformer_layers": transformer_layers,
    "gpt_block": gpt_block,
    "modern_block": modern_block,
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    stale = []
    for name, draw in DIAGRAMS.items():
        path = args.out / f"{name}.svg"
        svg = draw().render()
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != svg:
                stale.append(path.name)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(svg, encoding="utf-8")
    if stale:
        print("out of date (run python tools/diagrams.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
