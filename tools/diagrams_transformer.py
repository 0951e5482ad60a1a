"""The architecture diagrams of chapters 5 to 10 (attention and the Transformer): scaled
dot-product attention with its shapes, self- and cross-attention, multi-head attention, the
Transformer's encoder and decoder layers (post-LN) and the GPT's pre-LN block. tools/diagrams.py
writes them."""

from __future__ import annotations

from diagram_svg import MUTED, Svg

# ---------------------------------------------------------------------------------------------
# Chapters 5 to 7: scaled dot-product attention, self- and cross-attention, multi-head attention
# ---------------------------------------------------------------------------------------------


def scaled_dot_product() -> Svg:
    g = Svg(480, 560, "Scaled dot-product attention, with the shape of every tensor")
    x = 200  # the column of the scores
    for cx, name, shape in (
        (150, "$Q$", "$(T_q, d_k)$"),
        (250, "$K$", "$(T_k, d_k)$"),
        (400, "$V$", "$(T_k, d_v)$"),
    ):
        g.text(cx, 525, name, size=18)
        g.text(cx, 546, shape, size=13, color=MUTED)
    g.line((150, 508), (150, 472))
    g.line((250, 508), (250, 472))
    # no learned weights here: the products and the scaling are white (plain)
    g.box(x, 450, 150, 44, "$QK^\\top$", "plain", size=16, sub="matrix product")
    steps = [
        (368, "÷ $√d_k$", "plain", None, False),
        (290, "mask (optional)", "context", "−∞ where not allowed", True),
        (212, "softmax", "attn", "row by row", False),
    ]
    prev_y = 428
    for y, label, kind, sub, dash in steps:
        g.line((x, prev_y), (x, y + 20))
        g.text(x + 10, (prev_y + y + 20) / 2 + 5, "$(T_q, T_k)$", size=13, anchor="start", color=MUTED)
        g.box(x, y, 160, 40, label, kind, size=15, sub=sub, dash=dash)
        prev_y = y - 20
    g.line((x, prev_y), (x, 140), (290, 140), (290, 122))
    g.text(x + 10, 172, "$(T_q, T_k)$", size=13, anchor="start", color=MUTED)
    g.text(x - 10, 165, "$A$: each row sums to 1", size=13, anchor="end", color=MUTED)
    g.box(340, 100, 150, 44, "$AV$", "plain", size=16, sub="matrix product")
    g.line((400, 508), (400, 122))
    g.line((340, 78), (340, 42))
    g.text(340, 30, "$O$", size=18)
    g.text(350, 62, "$(T_q, d_v)$", size=13, anchor="start", color=MUTED)
    return g


def self_and_cross_attention() -> Svg:
    g = Svg(860, 470, "Self-attention and cross-attention: where the queries, keys and values come from")
    g.panel(20, 20, 390, 438, "self-attention")
    g.panel(450, 20, 390, 438, "cross-attention")
    attn = "$\\text{softmax}(QK^\\top / √d_k)\\, V$"
    yb = 70  # everything below the output projection is drawn yb lower than the panels' top

    def head_and_output(x0, weights, rows, n):
        """One head's attention, then the output projection W^O (as MultiHeadAttention does)."""
        g.box(x0, 140 + yb, 300, 52, attn, "attn", size=15, sub=f"weights {weights}")
        g.line((x0, 114 + yb), (x0, 148))
        g.text(x0 + 8, 172, "$(" + n + ", d_v)$", size=13, anchor="start", color=MUTED)
        g.box(x0, 128, 70, 40, "$W^O$", "linear", size=16)
        g.line((x0, 108), (x0, 88))
        g.text(x0, 76, f"output $({n}, d_\\text{{model}})$: {rows}", size=14)

    # self-attention: Q, K and V are projections of one sequence X
    x0 = 215
    g.text(x0, 352 + yb, "$X$  $(n, d_\\text{model})$", size=15)
    g.text(x0, 372 + yb, "one sequence", size=13, color=MUTED)
    for x, w, name in ((125, "$W^Q$", "$Q$"), (215, "$W^K$", "$K$"), (305, "$W^V$", "$V$")):
        g.line((x0, 338 + yb), (x0, 318 + yb), (x, 318 + yb), (x, 282 + yb))
        g.box(x, 262 + yb, 70, 40, w, "linear", size=16)
        g.line((x, 242 + yb), (x, 166 + yb))
        g.text(x + 8, 205 + yb, name, size=15, anchor="start")
    g.dot(x0, 318 + yb)
    head_and_output(x0, "$(n, n)$", "one row per token", "n")
    # cross-attention: queries from the decoder's states, keys and values from the encoder's
    g.text(555, 352 + yb, "$Y$  $(m, d_\\text{model})$", size=15)
    g.text(555, 372 + yb, "decoder states", size=13, color=MUTED)
    g.line((555, 338 + yb), (555, 282 + yb))
    g.box(555, 262 + yb, 70, 40, "$W^Q$", "linear", size=16)
    g.line((555, 242 + yb), (555, 166 + yb))
    g.text(563, 205 + yb, "$Q$", size=15, anchor="start")
    g.text(735, 352 + yb, "$X$  $(n, d_\\text{model})$", size=15)
    g.text(735, 372 + yb, "encoder states", size=13, color=MUTED)
    for x, w, name in ((690, "$W^K$", "$K$"), (780, "$W^V$", "$V$")):
        g.line((735, 338 + yb), (735, 318 + yb), (x, 318 + yb), (x, 282 + yb))
        g.box(x, 262 + yb, 70, 40, w, "linear", size=16)
        g.line((x, 242 + yb), (x, 166 + yb))
        g.text(x + 8, 205 + yb, name, size=15, anchor="start")
    g.dot(735, 318 + yb)
    head_and_output(665, "$(m, n)$", "one row per query", "m")
    return g


def multi_head() -> Svg:
    g = Svg(760, 560, "Multi-head attention: h heads side by side, concatenated, then W^O")
    x0 = 250
    g.text(x0, 545, "$X$  $(B, T, d_\\text{model})$", size=16)
    for x, w in ((130, "$W^Q$"), (250, "$W^K$"), (370, "$W^V$")):
        g.line((x0, 528), (x0, 505), (x, 505), (x, 482))
        g.box(x, 462, 90, 40, w, "linear", size=16)
        g.line((x, 442), (x, 400))
        g.box(x, 380, 110, 36, "split_heads", "plain", size=13)
        g.line((x, 362), (x, 298))
        g.text(x + 8, 345, w.replace("W^", "").replace("$", "").join("$$"), size=15, anchor="start")
    g.dot(x0, 505)
    g.text(475, 465, "$(B, T, d_\\text{model})$", size=13, color=MUTED, anchor="start")
    g.text(475, 385, "$(B, h, T, d_k)$, $d_k = d_\\text{model}/h$", size=13, color=MUTED, anchor="start")
    # h heads, drawn as a stack of cards
    for k in (2, 1, 0):
        dx = 16 * k
        g.front.append(
            f'<rect x="{100 + dx}" y="{206 - dx}" width="320" height="90" rx="8" fill="#F4DFEC" '
            f'stroke="#CC79A7" stroke-width="1.6"/>'
        )
    g.text(260, 238, "scaled dot-product attention", size=15)
    g.text(260, 260, "each head: its own $d_k$ columns of $Q$, $K$, $V$", size=13)
    g.text(110, 287, "head 1", size=13, color=MUTED, anchor="start")
    g.text(458, 186, "head $h$", size=13, color=MUTED, anchor="start")
    g.text(475, 250, "every head at once: weights $(B, h, T, T)$", size=13, color=MUTED, anchor="start")
    g.text(475, 268, "output $(B, h, T, d_k)$", size=13, color=MUTED, anchor="start")
    g.line((x0, 174), (x0, 150))
    g.box(x0, 130, 200, 38, "merge_heads (Concat)", "plain", size=13)
    g.text(475, 135, "$(B, T, h\\,d_k) = (B, T, d_\\text{model})$", size=13, color=MUTED, anchor="start")
    g.line((x0, 111), (x0, 88))
    g.box(x0, 68, 90, 40, "$W^O$", "linear", size=16)
    g.line((x0, 48), (x0, 28))
    g.text(x0, 18, "output  $(B, T, d_\\text{model})$", size=15)
    return g


# ---------------------------------------------------------------------------------------------
# Chapter 9: the Transformer's encoder and decoder layers; chapter 10: the GPT block
# ---------------------------------------------------------------------------------------------


def _sublayer(g, x, y_from, label, kind, sub, hb, w=200, gap=22):
    """A post-LN sub-layer: the stream splits, F, then Add & LayerNorm of the stream and F's
    output. Returns (the y where the stream leaves, the y of the Add & LayerNorm)."""
    ysplit = y_from - 14
    yb = ysplit - gap - hb / 2
    g.line((x, y_from), (x, yb + hb / 2))
    g.dot(x, ysplit)
    g.box(x, yb, w, hb, label, kind, size=14, sub=sub)
    ya = yb - hb / 2 - 32
    g.line((x, yb - hb / 2), (x, ya + 14))
    g.box(x, ya, w, 28, "Add & LayerNorm", "norm", size=13)
    g.line((x, ysplit), (x - w / 2 - 18, ysplit), (x - w / 2 - 18, ya), (x - w / 2, ya))
    return ya - 14, ya


def transformer_layers() -> Svg:
    g = Svg(860, 0, "The Transformer's encoder layer and decoder layer (post-LN)")
    ex, dx, dw = 220, 650, 260  # the columns; the decoder's boxes are wider (longer sub-labels)
    g.text(ex, 675, "source: $x$  $(B, S, d_\\text{model})$", size=14)
    top, ya1 = _sublayer(g, ex, 660, "multi-head\nself-attention", "attn", "self_attn; padding mask", 56)
    top, ya2 = _sublayer(g, ex, top, "feed-forward (FFN)", "linear", "linear1, ReLU, linear2", 46)
    g.panel(80, top - 12, 290, 664 - top, "encoder layer  × N", bottom=True)
    for ya, name in ((ya1, "norm1"), (ya2, "norm2")):
        g.text(ex + 106, ya + 4, name, size=12, anchor="start", color=MUTED)
    # after the N layers, the encoder's final norm: its output is the memory
    yen = top - 12 - 30
    g.line((ex, top), (ex, yen + 14))
    g.box(ex, yen, 200, 28, "LayerNorm (encoder.norm)", "norm", size=13)
    g.text(dx, 675, "target so far: $y$  $(B, T, d_\\text{model})$", size=14)
    top_d, yd1 = _sublayer(
        g, dx, 660, "masked multi-head\nself-attention", "attn", "self_attn; causal mask", 56, w=dw
    )
    # the memory, the output of the encoder's last layer and its norm, gives every decoder
    # layer's cross-attention its keys and values; the queries come from the decoder
    ycross = top_d - 14 - 44  # the bottom of the cross-attention box
    ym, ymem, xm = ycross + 18, yen - 40, 420
    g.line((ex, yen - 14), (ex, ymem), (xm, ymem), (xm, ym), (dx - 60, ym), (dx - 60, ycross))
    g.text(ex + 10, ymem - 8, "memory $(B, S, d_\\text{model})$", size=14, anchor="start")
    g.text(xm + 14, (ymem + ym) / 2, "keys, values", size=13, color=MUTED, rotate=-90)
    g.text(xm - 8, (ymem + ym) / 2, "to every decoder layer", size=13, color=MUTED, rotate=-90)
    g.text(dx + 8, ycross + 30, "queries", size=13, anchor="start", color=MUTED)
    top_d, yd2 = _sublayer(
        g,
        dx,
        top_d,
        "multi-head\ncross-attention",
        "attn",
        "multihead_attn; padding mask (source)",
        56,
        w=dw,
        gap=44,
    )
    g.bridge(dx - dw / 2 - 18, ym)  # the memory passes over the residual line
    top_d, yd3 = _sublayer(g, dx, top_d, "feed-forward (FFN)", "linear", "linear1, ReLU, linear2", 46, w=dw)
    g.panel(460, top_d - 12, 380, 664 - top_d, "decoder layer  × N", bottom=True)
    for ya, name in ((yd1, "norm1"), (yd2, "norm2"), (yd3, "norm3")):
        g.text(dx + dw / 2 + 6, ya + 4, name, size=12, anchor="start", color=MUTED)
    # after the N layers, the decoder's final norm
    ydn = top_d - 12 - 30
    g.line((dx, top_d), (dx, ydn + 14))
    g.box(dx, ydn, 200, 28, "LayerNorm (decoder.norm)", "norm", size=13)
    g.line((dx, ydn - 14), (dx, ydn - 40))
    g.text(dx, ydn - 50, "output $(B, T, d_\\text{model})$", size=14)
    g.top = ydn - 72
    g.h = 690 - g.top
    return g


def _prenorm(g, x, y_from, ln, label, kind, sub, hb, w=210):
    """A pre-LN sub-layer: the stream splits, LayerNorm, F, then F's output is added to the
    stream. Returns the y where the stream leaves."""
    ysplit = y_from - 14
    yln = ysplit - 36
    g.line((x, y_from), (x, yln + 14))
    g.dot(x, ysplit)
    g.box(x, yln, 170, 28, f"LayerNorm ({ln})", "norm", size=13)
    yb = yln - 14 - 20 - hb / 2
    g.line((x, yln - 14), (x, yb + hb / 2))
    g.box(x, yb, w, hb, label, kind, size=14, sub=sub)
    yplus = yb - hb / 2 - 30
    g.line((x, yb - hb / 2), (x, yplus + 11))
    g.op(x, yplus, "+")
    xr = x + w / 2 + 22
    g.line((x, ysplit), (xr, ysplit), (xr, yplus), (x + 11, yplus))
    return yplus - 11


def gpt_block() -> Svg:
    g = Svg(640, 0, "The decoder-only (GPT) model and its pre-LN block")
    x = 280
    g.text(x, 690, "token ids  $(B, T)$", size=14)
    g.line((x, 676), (x, 650))
    g.box(x, 628, 250, 44, "token + position embeddings", "token", size=14, sub="wte[idx] + wpe[0..T−1]")
    g.text(x + 135, 633, "$(B, T, d_\\text{model})$", size=13, anchor="start", color=MUTED)
    top = _prenorm(g, x, 606, "ln_1", "causal multi-head\nself-attention", "attn", "attn: c_attn, c_proj", 56)
    top = _prenorm(g, x, top, "ln_2", "MLP", "linear", "mlp: c_fc, GELU, c_proj", 46)
    g.panel(x - 150, top - 12, 330, 608 - top)
    g.text(x + 192, top + 8, "block  × $L$", size=14, anchor="start", color=MUTED)
    g.text(x + 192, top + 26, "(transformer.h)", size=13, anchor="start", color=MUTED)
    g.text(x + 134, 500, "residual", size=13, anchor="start", color=MUTED)
    g.line((x, top), (x, top - 44))
    g.box(x, top - 58, 170, 28, "LayerNorm (ln_f)", "norm", size=13)
    g.line((x, top - 72), (x, top - 96))
    g.box(x, top - 118, 250, 44, "lm_head", "linear", size=14, sub="tied to wte by default (tie_weights)")
    g.line((x, top - 140), (x, top - 172))
    g.text(x, top - 182, "logits $(B, T, V)$: the next token at every position", size=14)
    g.top = top - 206
    g.h = 705 - g.top
    return g
