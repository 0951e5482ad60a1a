"""The architecture diagram of chapter 12 (the modern decoder): GPT-2's block beside Llama's,
the five changes numbered (1-3 and 5 on both sides, 4, no biases, between the columns).
tools/diagrams.py writes it."""

from __future__ import annotations

from diagram_svg import GRAD, KINDS, MUTED, Svg

# ---------------------------------------------------------------------------------------------
# Chapter 12: the modern decoder. A change is marked by its number in a vermillion ring on both
# sides and, on the right, a vermillion outline around the new part; the gutter says old -> new.
# (Vermillion is the gradient's colour in chapters 1 to 4; no gradient is drawn here.)
# ---------------------------------------------------------------------------------------------

CHANGED, CHANGED_FILL = GRAD, "#FBE3D6"


def _badge(g, x, y, n):
    """A change's number in a vermillion ring, centred at (x, y)."""
    g.front.append(
        f'<circle cx="{x}" cy="{y}" r="9.5" fill="{CHANGED_FILL}" stroke="{CHANGED}" stroke-width="1.8"/>'
    )
    g.text(x, y + 4.5, str(n), size=12.5, weight="bold")


def _outline(g, cx, cy, w, h, n=None):
    """The vermillion outline of a new part, its change's number at the top left corner."""
    g.outlines.append(  # laid over the cards and under the lines (whose halos cut it) by _layer
        f'<rect x="{cx - w / 2 - 4}" y="{cy - h / 2 - 4}" width="{w + 8}" height="{h + 8}" rx="9" '
        f'fill="none" stroke="{CHANGED}" stroke-width="2.2"/>'
    )
    if n is not None:
        _badge(g, cx - w / 2 - 4, cy - h / 2 - 4, n)


def _layer(g):
    """Put the outlines above the panels and cards (the first items of g.back), below the lines."""
    k = next(i for i, item in enumerate(g.back) if not item.startswith("<rect"))
    g.back[k:k] = g.outlines


def _frame(g, x, top, bottom, w, kind, label, name):
    """A sub-layer drawn open: a white card edged in its kind's colour, titled top left."""
    g.back.insert(
        0,
        f'<rect x="{x - w / 2}" y="{top}" width="{w}" height="{bottom - top}" rx="8" fill="#FFFFFF" '
        f'stroke="{KINDS[kind][1]}" stroke-width="1.6"/>',
    )
    g.text(x - w / 2 + 10, top + 18, label, size=13, anchor="start")
    g.text(x + w / 2 - 10, top + 18, name, size=12, anchor="end", color=MUTED)


def modern_block() -> Svg:
    g = Svg(912, 1190, "GPT-2's block beside Llama's (the modern decoder), the five changes numbered")
    g.outlines = []
    W = 280  # the width of the open sub-layers (the MLP, attention)
    xg, xl = 194, 718  # the two columns: GPT-2's, Llama's
    rg, rl = xg - W / 2 - 18, xl + W / 2 + 18  # the residual lines: GPT-2's on the left, Llama's right
    # the rows (y): the final norm, the second +, norm 2, its split, the first +, norm 1, its split
    y_f, y_p2, y_n2, y_s2, y_p1, y_n1, y_s1 = 148, 201, 502, 540, 566, 948, 988

    def note(y, n, lines):
        """A change in the gutter between the two columns: its number, then old -> new."""
        _badge(g, 365, y - 4.5, n)
        for k, line in enumerate(lines):
            g.text(382, y + 17 * k, line, size=13, anchor="start")

    def norms(y, gpt, llama):
        """One row's two norms, the new one outlined."""
        for x, label, sub in ((xg, gpt, "$(x - μ) / σ · g + b$"), (xl, llama, "$x / \\text{rms}(x) · g$")):
            g.box(x, y, 264, 40, label, "norm", size=13, sub=sub)
        _badge(g, xg - 132 - 4, y - 24, 1)
        _outline(g, xl, y, 264, 40, 1)
        note(y + 4, 1, ["LayerNorm → RMSNorm"])

    for x, name, sub in (
        (xg, "GPT-2", "course_lib.gpt, bias=True"),
        (xl, "Llama: the modern decoder", "course_lib.llama, n_kv_head=2"),
    ):
        g.text(x, 26, name, size=16)
        g.text(x, 45, sub, size=12, color=MUTED)

    # -- from the top: the logits, the final norm ------------------------------------------
    for x in (xg, xl):
        g.text(x, 80, "lm_head → logits  $(B, T, V)$", size=14)
        g.line((x, y_f - 20), (x, 92))
        g.line((x, y_p2 - 11), (x, y_f + 20))
        g.op(x, y_p2, "+")
    norms(y_f, "LayerNorm (ln_f)", "RMSNorm (norm)")

    # -- the MLP: GELU of width 4C, or SwiGLU of width H ------------------------------------
    m_top, m_bot = 226, 462
    y_out, y_mul, y_act, y_in, y_split = 272, 318, 358, 408, 448
    _frame(g, xg, m_top, m_bot, W, "linear", "MLP, width $4C$", "mlp")
    _frame(g, xl, m_top, m_bot, W, "linear", "SwiGLU, width $H$", "mlp")
    g.line((xg, y_out - 20), (xg, y_p2 + 11))
    g.box(xg, y_out, 170, 40, "c_proj", "linear", size=14, sub="$4C$ → $C$, bias")
    g.line((xg, y_act - 13), (xg, y_out + 20))
    g.box(xg, y_act, 90, 26, "GELU", "plain", size=13)  # no weights: white
    g.line((xg, y_in - 20), (xg, y_act + 13))
    g.box(xg, y_in, 170, 40, "c_fc", "linear", size=14, sub="$C$ → $4C$, bias")
    g.line((xg, y_n2 - 20), (xg, y_in + 20))
    _badge(g, xg - W / 2, m_top, 3)
    xa, xb = xl - 66, xl + 66  # SiLU(gate_proj(x)) * up_proj(x), then down_proj
    g.line((xl, y_out - 20), (xl, y_p2 + 11))
    g.box(xl, y_out, 170, 40, "down_proj", "linear", size=14, sub="$H$ → $C$")
    g.line((xl, y_mul - 11), (xl, y_out + 20))
    g.op(xl, y_mul, "×")
    g.line((xa, y_act - 13), (xa, y_mul), (xl - 11, y_mul))
    g.line((xb, y_in - 20), (xb, y_mul), (xl + 11, y_mul))
    g.box(xa, y_act, 80, 26, "SiLU", "plain", size=13)
    g.line((xa, y_in - 20), (xa, y_act + 13))
    g.box(xa, y_in, 116, 40, "gate_proj", "linear", size=14, sub="$C$ → $H$")
    g.box(xb, y_in, 116, 40, "up_proj", "linear", size=14, sub="$C$ → $H$")
    g.line((xl, y_n2 - 20), (xl, y_split), arrow=False)
    g.line((xl, y_split), (xa, y_split), (xa, y_in + 20))
    g.line((xl, y_split), (xb, y_split), (xb, y_in + 20))
    g.dot(xl, y_split)
    _outline(g, xl, (m_top + m_bot) / 2, W, m_bot - m_top, 3)
    note(316, 3, ["GELU MLP, two matrices", "of width $4C$ → SwiGLU,", "three of width", "$H = ⅔ · 4C$"])

    # -- norm 2, then attention: heads, projections, rotary positions -----------------------
    for x in (xg, xl):
        g.line((x, y_p1 - 11), (x, y_n2 + 20))
        g.dot(x, y_s2)
        g.op(x, y_p1, "+")
    norms(y_n2, "LayerNorm (ln_2)", "RMSNorm (post_attention_layernorm)")
    a_top, a_bot = 592, 906
    y_o, y_heads, y_rope, y_proj, y_split = 638, 724, 806, 854, 894
    _frame(g, xg, a_top, a_bot, W, "attn", "causal attention", "attn")
    _frame(g, xl, a_top, a_bot, W, "attn", "causal attention", "self_attn")
    hw, hh = 260, 92  # the heads: which key/value head each query head reads
    for x, name, sub, n_kv in ((xg, "c_proj", "$C$ → $C$, bias", 4), (xl, "o_proj", "$C$ → $C$", 2)):
        g.line((x, y_o - 20), (x, y_p1 + 11))
        g.box(x, y_o, 170, 40, name, "linear", size=14, sub=sub)
        g.line((x, y_heads - hh / 2), (x, y_o + 20))
        g.box(x, y_heads, hw, hh, "", "attn")
        g.text(x, y_heads - 24, "softmax($q k^\\top / √d_k$ + mask) $v$", size=12.5)
        yq, ykv = y_heads + 2, y_heads + 32
        g.text(x - hw / 2 + 10, yq + 4, "4 query heads", size=12, anchor="start")
        g.text(x - hw / 2 + 10, ykv + 4, f"{n_kv} key/value heads", size=12, anchor="start")
        qs = [x + 16 + 30 * i for i in range(4)]
        kvs = qs if n_kv == 4 else [(qs[0] + qs[1]) / 2, (qs[2] + qs[3]) / 2]
        for i, xq in enumerate(qs):  # over the box, so in front
            g.front.append(
                f'<path d="M {kvs[i * n_kv // 4]} {ykv - 7} L {xq} {yq + 7}" fill="none" '
                f'stroke="#3a3a3a" stroke-width="1.4"/>'
            )
        for xs, ys, fill in ((qs, yq, "#FFFFFF"), (kvs, ykv, "#CC79A7")):
            for xh in xs:
                g.front.append(
                    f'<rect x="{xh - 10}" y="{ys - 7}" width="20" height="14" rx="3" fill="{fill}" '
                    f'stroke="#CC79A7" stroke-width="1.4"/>'
                )
    _badge(g, xg - hw / 2, y_heads - hh / 2, 5)
    _outline(g, xl, y_heads, hw, hh, 5)
    note(
        y_heads - 16,
        5,
        ["full multi-head →", "grouped-query attention:", "4 query heads share", "2 key/value heads"],
    )
    g.box(xg, y_proj, 256, 40, "c_attn", "linear", size=14, sub="$C$ → $3C$ ($q, k, v$), bias")
    for dx, name in zip((-88, 0, 88), "qkv"):
        g.line((xg + dx, y_proj - 20), (xg + dx, y_heads + hh / 2))
        g.text(xg + dx + 8, y_rope + 5, f"${name}$", size=14, anchor="start")
    for dx, name, sub in zip(
        (-88, 0, 88), ("q_proj", "k_proj", "v_proj"), ("$C$ → $C$", "$C$ → $C/2$", "$C$ → $C/2$")
    ):
        g.box(xl + dx, y_proj, 80, 40, name, "linear", size=13, sub=sub)
        if name == "v_proj":
            g.line((xl + dx, y_proj - 20), (xl + dx, y_heads + hh / 2))
        else:  # rotary positions: q and k rotated by their position
            g.line((xl + dx, y_proj - 20), (xl + dx, y_rope + 13))
            g.box(xl + dx, y_rope, 64, 26, "RoPE", "token", size=13)
            g.line((xl + dx, y_rope - 13), (xl + dx, y_heads + hh / 2))
            _outline(g, xl + dx, y_rope, 64, 26, 2 if name == "q_proj" else None)
    note(y_rope - 4, 2, ["rotary positions: $q$ and $k$", "rotated by their position"])
    g.line((xg, y_n1 - 20), (xg, y_proj + 20))
    g.line((xl, y_n1 - 20), (xl, y_split), arrow=False)
    for dx in (-88, 0, 88):
        g.line((xl, y_split), (xl + dx, y_split), (xl + dx, y_proj + 20))
    g.dot(xl, y_split)
    note(y_o - 4, 4, ["biases → none", "(every Linear, every norm)"])

    # -- norm 1, the residual lines, the blocks' panels ------------------------------------
    for x in (xg, xl):
        g.dot(x, y_s1)
    norms(y_n1, "LayerNorm (ln_1)", "RMSNorm (input_layernorm)")
    for ys, yp in ((y_s1, y_p1), (y_s2, y_p2)):
        g.line((xg, ys), (rg, ys), (rg, yp), (xg - 11, yp))
        g.line((xl, ys), (rl, ys), (rl, yp), (xl + 11, yp))
    g.text(rg - 7, 384, "residual", size=13, color=MUTED, rotate=-90)
    g.text(rl + 7, 384, "residual", size=13, color=MUTED, rotate=90)
    p_top, p_bot = 176, 1000
    g.panel(rg - 24, p_top, xg + W / 2 + 12 - (rg - 24), p_bot - p_top)
    g.panel(xl - W / 2 - 12, p_top, rl + 24 - (xl - W / 2 - 12), p_bot - p_top)
    for x, anchor, name in (
        (xg + W / 2 + 4, "end", "transformer.h"),
        (xl - W / 2 + 16, "start", "model.layers"),  # right of the badge of change 3
    ):
        g.text(x, p_top + 18, "block × $L$", size=14, anchor=anchor, color=MUTED)
        g.text(x, p_top + 35, f"({name})", size=13, anchor=anchor, color=MUTED)

    # -- the embeddings: a learned position table added, or none ---------------------------
    y_e, y_ids = 1058, 1114
    for x in (xg, xl):
        g.line((x, y_e - 22), (x, y_n1 + 20))
        g.line((x, y_ids - 14), (x, y_e + 22))
        g.text(x, y_ids, "token ids  $(B, T)$", size=14)
    g.box(xg, y_e, 280, 44, "token + position embeddings", "token", size=14, sub="wte[idx] + wpe[0..T−1]")
    g.box(xl, y_e, 280, 44, "token embedding", "token", size=14, sub="embed_tokens[idx], no position table")
    _badge(g, xg - 140 - 4, y_e - 26, 2)
    _outline(g, xl, y_e, 280, 44, 2)
    note(y_e - 4, 2, ["learned position table", "(wpe) added → none"])

    # -- the key ---------------------------------------------------------------------------
    _badge(g, 30, 1150 - 4.5, "n")
    g.text(
        48,
        1150,
        "a change, numbered on both sides and its new part outlined on the right (change 4: "
        "numbered in the middle only)",
        size=13,
        anchor="start",
    )
    g.text(
        21,
        1174,
        "$C$: the width of the residual stream ($d_\\text{model}$).   $H = ⅔ · 4C$ (rounded): "
        "three $C × H$ matrices hold as many numbers as two $C × 4C$.",
        size=13,
        anchor="start",
    )
    _layer(g)
    return g
