"""The book's architecture diagrams, written as SVG into ``book/figures/``.

    python tools/diagrams.py          # writes every diagram
    python tools/diagrams.py --check  # exits 1 if a committed SVG differs from what this writes

One source for every diagram, so that they share one style and one notation (the pages'):
x_t, h_t, c_t, W_hh for the recurrent cells; h_j (j = 1..S) for the encoder's states, s for the
decoder's, c for a context vector; Q, K, V, d_k, h heads, d_model for attention. Colours are the
Okabe–Ito palette the chapters' plots use, each kind of block always the same colour:

    recurrent cell, state      blue          sigmoid gate        orange
    tanh layer                 green         attention           reddish purple
    linear layer, FFN          sky blue      add, layer norm     grey
    context vector (the bottleneck), mask   yellow
    gradient (backward pass)   vermillion, dashed

Every SVG paints its own white background: it reads the same on the site in light and dark mode
(``_ext/static/course_site.css`` keeps the theme from dimming it), in the PDF, in JupyterLab's
dark theme and on GitHub. Text is SVG text (no embedded fonts): a sans-serif face for words, a
serif italic for variables, as MathJax sets them in the prose.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from xml.sax.saxutils import escape

OUT = Path(__file__).resolve().parent.parent / "book" / "figures"

SANS = "'DejaVu Sans', 'Helvetica Neue', Helvetica, Arial, sans-serif"
SERIF = "'DejaVu Serif', 'Times New Roman', Times, serif"
INK = "#222222"
LINE = "#3a3a3a"
GRAD = "#D55E00"
MUTED = "#6b6b6b"
KINDS = {  # fill, stroke
    "cell": ("#DCEAF7", "#0072B2"),
    "gate": ("#FDEBC8", "#E69F00"),
    "tanh": ("#D4EFE2", "#009E73"),
    "attn": ("#F4DFEC", "#CC79A7"),
    "linear": ("#DDF0FA", "#56B4E9"),
    "norm": ("#EEEEEE", "#7a7a7a"),
    "token": ("#FFFFFF", "#8a8a8a"),
    "context": ("#FBF4B8", "#B8A600"),
    "plain": ("#FFFFFF", "#3a3a3a"),
}


# ---------------------------------------------------------------------------------------------
# Text: "$...$" segments are maths (serif, letters italic, _ and ^ for sub- and superscripts,
# \text{...} upright); words of three letters or more (tanh, softmax) stay upright.
# ---------------------------------------------------------------------------------------------


def _math_runs(s: str, level: float = 0.0, scale: float = 1.0):
    """(text, italic, level, scale) runs of a maths string; level: baseline shift in em."""
    runs, i = [], 0
    while i < len(s):
        ch = s[i]
        if ch in "_^":
            i += 1
            if s[i] == "{":
                depth, j = 1, i + 1
                while depth:
                    depth += {"{": 1, "}": -1}.get(s[j], 0)
                    j += 1
                arg, i = s[i + 1 : j - 1], j
            elif s[i] == "\\":  # a command: ^\top
                j = i + 1
                while j < len(s) and s[j].isalpha():
                    j += 1
                if j < len(s) and s[j] == "{":  # ^\text{...}: the command and its argument
                    j = s.index("}", j) + 1
                arg, i = s[i:j], j
            else:
                arg, i = s[i], i + 1
            shift = 0.28 if ch == "_" else -0.42
            runs += _math_runs(arg, level + shift * scale, scale * 0.72)
        elif s.startswith("\\text{", i):
            j = s.index("}", i)
            runs.append((s[i + 6 : j], False, level, scale))
            i = j + 1
        elif s.startswith("\\top", i):
            runs.append(("\u22a4", False, level, scale))
            i += 4
        elif s.startswith("\\,", i):
            runs.append(("\u2006", False, level, scale))
            i += 2
        elif ch.isalpha() and ch.isascii():
            j = i
            while j < len(s) and s[j].isalpha() and s[j].isascii():
                j += 1
            word = s[i:j]
            runs.append((word, len(word) < 3, level, scale))
            i = j
        elif ch == " ":  # spaces in maths are ignored, as in TeX
            i += 1
        else:
            ch = "\u2212" if ch == "-" else ch
            if ch in "=+\u2212×" and level == 0 and i > 0:
                ch = f"\u2005{ch}\u2005"  # a medium space around a binary operator, as TeX sets it
            elif ch == ",":
                ch = ", "
            runs.append((ch, ch.isalpha() and ch not in "σΣ∂", level, scale))
            i += 1
    return runs


def rich(label: str, size: float):
    """tspans for a label with $maths$; returns the inner XML of a <text>."""
    out, level = [], 0.0
    for k, part in enumerate(label.split("$")):
        if not part:
            continue
        runs = _math_runs(part) if k % 2 else [(part, False, 0.0, 1.0)]
        for text, italic, lv, sc in runs:
            attrs = []
            if k % 2:
                attrs.append(f'font-family="{SERIF}"')
            if italic:
                attrs.append('font-style="italic"')
            if sc != 1.0:
                attrs.append(f'font-size="{size * sc:.1f}"')
            if lv != level:
                attrs.append(f'dy="{(lv - level) * size:.1f}"')
                level = lv
            out.append(f"<tspan {' '.join(attrs)}>{escape(text)}</tspan>" if attrs else escape(text))
    return "".join(out)


class Svg:
    def __init__(self, width: int, height: int, title: str):
        self.w, self.h, self.title = width, height, title
        self.top = 0  # the y drawn at the top edge (the drawing is shifted up by it)
        self.back: list[str] = []  # lines, drawn under the boxes
        self.front: list[str] = []

    # -- primitives -------------------------------------------------------------------------
    def text(self, x, y, label, size=14, anchor="middle", color=INK, weight=None, italic=False, rotate=0):
        style = f' font-weight="{weight}"' if weight else ""
        style += ' font-style="italic"' if italic else ""
        style += f' transform="rotate({rotate} {x} {y})"' if rotate else ""
        self.front.append(
            f'<text x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}" fill="{color}" '
            f'xml:space="preserve" style="white-space: pre"'
            f"{style}>{rich(label, size)}</text>"
        )

    def box(self, cx, cy, w, h, label="", kind="plain", size=14, rx=6, sub=None, dash=False):
        fill, stroke = KINDS[kind]
        d = ' stroke-dasharray="5 3"' if dash else ""
        self.front.append(
            f'<rect x="{cx - w / 2}" y="{cy - h / 2}" width="{w}" height="{h}" rx="{rx}" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="1.6"{d}/>'
        )
        lines = label.split("\n") if label else []
        if sub:
            lines.append(None)
        n = len(lines)
        for k, line in enumerate(lines):
            y = cy + (k - (n - 1) / 2) * size * 1.2 + size * 0.35
            if line is None:
                self.text(cx, y, sub, size=size * 0.8, color=MUTED)
            else:
                self.text(cx, y, line, size=size)

    def panel(self, x, y, w, h, label=None, size=13, bottom=False):
        self.back.insert(
            0,
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="10" fill="#F7F7F7" '
            f'stroke="#C8C8C8" stroke-width="1.2" stroke-dasharray="6 4"/>',
        )
        if label:
            ty = y + h - 8 if bottom else y + size + 6
            self.text(
                x + w - 10 if bottom else x + 10,
                ty,
                label,
                size=size,
                anchor="end" if bottom else "start",
                color=MUTED,
            )

    def op(self, cx, cy, sym, r=11, kind="plain"):
        fill, stroke = KINDS[kind]
        self.front.append(
            f'<circle cx="{cx}" cy="{cy}" r="{r}" fill="{fill}" stroke="{stroke}" stroke-width="1.6"/>'
        )
        self.text(cx, cy + 5, sym, size=15)

    def dot(self, x, y, color=LINE):
        self.front.append(f'<circle cx="{x}" cy="{y}" r="3.2" fill="{color}"/>')

    def line(self, *pts, color=LINE, width=1.7, dash=False, arrow=True, halo=True):
        d = "M " + " L ".join(f"{x} {y}" for x, y in pts)
        if halo:
            self.back.append(
                f'<path d="{d}" fill="none" stroke="#FFFFFF" stroke-width="{width + 5}" '
                f'stroke-linejoin="round"/>'
            )
        extra = ' stroke-dasharray="6 4"' if dash else ""
        marker = f' marker-end="url(#{self._marker(color)})"' if arrow else ""
        self.back.append(
            f'<path d="{d}" fill="none" stroke="{color}" stroke-width="{width}" '
            f'stroke-linejoin="round"{extra}{marker}/>'
        )

    def curve(self, d, color=LINE, width=1.7, dash=False, arrow=True):
        extra = ' stroke-dasharray="6 4"' if dash else ""
        marker = f' marker-end="url(#{self._marker(color)})"' if arrow else ""
        self.back.append(
            f'<path d="{d}" fill="none" stroke="{color}" stroke-width="{width}"{extra}{marker}/>'
        )

    _markers: dict

    def _marker(self, color):
        if not hasattr(self, "_markers"):
            self._markers = {}
        return self._markers.setdefault(color, f"arrow{len(self._markers)}")

    def render(self) -> str:
        markers = getattr(self, "_markers", {})
        defs = "".join(
            f'<marker id="{mid}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
            f'fill="{color}"/></marker>'
            for color, mid in markers.items()
        )
        body = "\n".join(self.back + self.front)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.w} {self.h}" '
            f'width="{self.w}" height="{self.h}" font-family="{SANS}" role="img">\n'
            f"<title>{escape(self.title)}</title>\n<defs>{defs}</defs>\n"
            f'<rect width="{self.w}" height="{self.h}" fill="#FFFFFF"/>\n'
            f'<g transform="translate(0 {-self.top})">\n{body}\n</g>\n</svg>\n'
        )


# ---------------------------------------------------------------------------------------------
# Chapter 1: the RNN unrolled in time, and backpropagation through time
# ---------------------------------------------------------------------------------------------


def rnn_unrolled() -> Svg:
    g = Svg(860, 405, "A vanilla RNN unrolled over T steps, with the paths of backpropagation through time")
    cy, bw, bh = 215, 86, 52
    xs = {1: 150, 2: 300, 3: 450, "T": 650}
    # forward: states along the chain
    g.text(40, cy + 5, "$h_0$", size=17)
    prev = 58
    for k, x in xs.items():
        g.box(x, cy, bw, bh, "tanh", "cell", size=15)
        if k == "T":
            g.text(545, cy + 5, "…", size=22)
            g.line((480 + bw / 2 - 30, cy), (530, cy), arrow=False)
            g.line((560, cy), (x - bw / 2, cy))
            g.text(586, cy - 9, "$h_{T-1}$", size=13)
        else:
            g.line((prev, cy), (x - bw / 2, cy))
            if k != 1:
                g.text((prev + x - bw / 2) / 2, cy - 8, f"$h_{k - 1}$", size=15)
        prev = x + bw / 2
        # input from below
        g.line((x, 350), (x, cy + bh / 2))
        g.text(x, 375, f"$x_{k}$", size=17)
        g.text(x + 8, 310, "$W_{ih}$", size=13, anchor="start", color=MUTED)
    # read-out and loss
    g.line((xs["T"] + bw / 2, cy), (770, cy))
    g.text(720, cy - 8, "$h_T$", size=15)
    g.box(800, cy, 56, 44, "$L$", "plain", size=17)
    # backward: the gradient flows from L back along the chain, one Jacobian per step (below
    # the forward arrows), and leaves each step's own term G_t of the gradient of W_hh (up)
    yb = cy + 15
    g.line((772, yb), (xs["T"] + bw / 2 + 2, yb), color=GRAD, dash=True, halo=False)
    g.line((xs["T"] - bw / 2, yb), (566, yb), color=GRAD, dash=True, halo=False)
    g.line((526, yb), (xs[3] + bw / 2 + 2, yb), color=GRAD, dash=True, halo=False)
    g.line((xs[3] - bw / 2, yb), (xs[2] + bw / 2 + 2, yb), color=GRAD, dash=True, halo=False)
    g.line((xs[2] - bw / 2, yb), (xs[1] + bw / 2 + 2, yb), color=GRAD, dash=True, halo=False)
    ys = 70
    g.box(430, ys, 600, 40, "", "plain")
    g.text(430, ys + 6, "$∂L/∂W_{hh} = G_1 + G_2 + G_3 + … + G_T$", size=16, color=GRAD)
    for k, x in xs.items():
        g.line((x, cy - bh / 2), (x, ys + 22), color=GRAD, width=1.4, dash=True, halo=False)
        g.text(x + 8, 135, f"$G_{k}$", size=14, anchor="start", color=GRAD)
    # legend
    g.line((30, 12 + 8), (62, 12 + 8), arrow=True, halo=False)
    g.text(70, 25, "forward", size=13, anchor="start", color=MUTED)
    g.line((150, 20), (182, 20), color=GRAD, dash=True, halo=False)
    g.text(
        190,
        25,
        "backward (gradient): each step back, $\\,× \\text{diag}(1 - h_t^2)\\,W_{hh}$",
        size=13,
        anchor="start",
        color=MUTED,
    )
    g.text(850, 398, "the same $W_{ih}, W_{hh}$, biases at every step", size=13, anchor="end", color=MUTED)
    return g


# ---------------------------------------------------------------------------------------------
# Chapter 2: the LSTM and GRU cells
# ---------------------------------------------------------------------------------------------


def lstm_cell() -> Svg:
    g = Svg(820, 400, "The LSTM cell")
    top, bus = 80, 318
    g.panel(95, 40, 600, 312)
    # cell state: the additive path
    g.text(40, top + 5, "$c_{t-1}$", size=17)
    g.line((62, top), (223, top))
    g.op(235, top, "×")
    g.line((247, top), (393, top))
    g.op(405, top, "+")
    g.line((417, top), (770, top))
    g.text(790, top + 5, "$c_t$", size=17)
    # inputs: h_{t-1} from the left, x_t from below, concatenated on a bus
    g.text(40, bus + 5, "$h_{t-1}$", size=17)
    g.line((66, bus), (500, bus), arrow=False)
    g.line((140, 385), (140, bus), arrow=False)
    g.dot(140, bus)
    g.text(140, 395, "$x_t$", size=17)
    gates = [(235, "σ", "gate"), (320, "σ", "gate"), (405, "tanh", "tanh"), (500, "σ", "gate")]
    gy = 250
    for x, fn, kind in gates:
        g.line((x, bus), (x, gy + 20))
        g.dot(x, bus)
        g.box(x, gy, 58 if fn == "tanh" else 44, 40, fn, kind, size=15)
    # f_t multiplies c_{t-1}
    g.line((235, gy - 20), (235, top + 11))
    g.text(243, 160, "$f_t$", size=15, anchor="start")
    # i_t ⊙ g_t is added
    g.op(405, 160, "×")
    g.line((320, gy - 20), (320, 160), (393, 160))
    g.text(328, 205, "$i_t$", size=15, anchor="start")
    g.line((405, gy - 20), (405, 172))
    g.text(413, 205, "$g_t$", size=15, anchor="start")
    g.line((405, 148), (405, top + 11))
    # h_t = o_t ⊙ tanh(c_t)
    g.line((600, top), (600, 120), arrow=True)
    g.dot(600, top)
    g.box(600, 138, 52, 32, "tanh", "tanh", size=14)
    g.line((600, 154), (600, 238))
    g.op(600, 250, "×")
    g.line((500, gy - 20), (500, 210), (560, 210), (560, 250), (588, 250))
    g.text(508, 200, "$o_t$", size=15, anchor="start")
    g.line((612, 250), (650, 250), (650, bus), (770, bus))
    g.text(790, bus + 5, "$h_t$", size=17)
    g.line((650, 250), (650, 22))
    g.dot(650, 250)
    g.text(664, 30, "$h_t$ (output)", size=14, anchor="start")
    # legend
    g.text(
        805, 372, "box: linear map of $[x_t, h_{t-1}]$, then σ or tanh", size=13, anchor="end", color=MUTED
    )
    g.text(805, 390, "circle: elementwise product (×) or sum (+)", size=13, anchor="end", color=MUTED)
    return g


def gru_cell() -> Svg:
    g = Svg(820, 400, "The GRU cell")
    top, hb, xb = 70, 290, 328
    g.panel(80, 35, 640, 315)
    g.text(36, top + 5, "$h_{t-1}$", size=17)
    g.line((62, top), (518, top))
    g.op(530, top, "×")
    g.line((542, top), (658, top))
    g.op(670, top, "+")
    g.line((682, top), (765, top))
    g.text(790, top + 5, "$h_t$", size=17)
    # h_{t-1} down to its bus; x_t on its own line below
    g.line((100, top), (100, hb), (350, hb), arrow=False)
    g.dot(100, top)
    g.text(62, 393, "$x_t$", size=17)
    g.line((62, 375), (62, xb), (470, xb), arrow=False, halo=False)
    # gates r (reset) and z (update) read [x_t, h_{t-1}]
    gy = 210
    for x in (170, 260):  # r, z
        g.line((x - 8, hb), (x - 8, gy + 20))
        g.dot(x - 8, hb)
        g.line((x + 8, xb), (x + 8, gy + 20))
        g.dot(x + 8, xb)
        g.box(x, gy, 46, 40, "σ", "gate", size=15)
    # candidate: the reset gate acts after the product with W_hn
    g.line((350, hb), (350, 232))
    g.box(350, 210, 76, 40, "$h_{t-1}W_{hn}^\\top$\n$+\\,b_{hn}$", "linear", size=13)
    g.line((350, 190), (350, 157))
    g.op(350, 145, "×")
    g.line((170, gy - 20), (170, 145), (338, 145))
    g.text(178, 170, "$r_t$", size=15, anchor="start")
    g.line((362, 145), (435, 145))
    g.box(465, 145, 58, 40, "tanh", "tanh", size=15)
    g.line((470, xb), (470, 165))
    g.dot(470, xb)
    g.text(478, 250, "$x_t W_{in}^\\top + b_{in}$", size=13, anchor="start", color=MUTED)
    # h_t = (1 - z_t) ⊙ n_t + z_t ⊙ h_{t-1}
    g.line((260, gy - 20), (260, 105), (530, 105), (530, top + 11))
    g.text(268, 125, "$z_t$", size=15, anchor="start")
    g.dot(530, 105)
    g.line((530, 105), (610, 105), (610, 121))
    g.op(610, 134, "1−", r=13)
    g.line((610, 147), (610, 188))
    g.op(610, 200, "×")
    g.line((494, 145), (520, 145), (520, 200), (598, 200))
    g.text(505, 138, "$n_t$", size=15, anchor="start")
    g.line((622, 200), (670, 200), (670, top + 11))
    # legend
    g.text(805, 372, "box: linear map of its inputs, then σ or tanh", size=13, anchor="end", color=MUTED)
    g.text(805, 390, "circle: elementwise product (×), sum (+), 1 − z", size=13, anchor="end", color=MUTED)
    return g


# ---------------------------------------------------------------------------------------------
# Chapter 3: the encoder–decoder and its bottleneck
# ---------------------------------------------------------------------------------------------


def seq2seq_bottleneck() -> Svg:
    g = Svg(930, 330, "The RNN encoder-decoder: the whole input passes through one context vector")
    cy = 170
    g.panel(20, 60, 380, 250, "encoder (GRU)")
    g.panel(570, 60, 350, 250, "decoder (GRU)")
    for x, xin in ((80, "$x_1$"), (180, "$x_2$"), (340, "$x_S$")):
        g.box(x, cy, 64, 46, "GRU", "cell", size=14)
        g.line((x, 290), (x, cy + 23))
        g.text(x, 305, xin, size=16)
    g.line((112, cy), (148, cy))
    g.line((212, cy), (240, cy), arrow=False)
    g.text(262, cy + 7, "…", size=22)
    g.line((282, cy), (308, cy))
    g.text(130, cy - 8, "$h_1$", size=14)
    g.text(230, cy - 8, "$h_2$", size=14)
    # the context vector: the decoder's only view of the input
    g.line((372, cy), (438, cy))
    g.text(405, cy - 8, "$h_S$", size=14)
    g.box(450, cy, 22, 92, "", "context")
    g.text(450, cy - 60, "$c = h_S$", size=16)
    g.text(450, cy + 66, "one vector,", size=13, color=MUTED)
    g.text(450, cy + 81, "fixed size", size=13, color=MUTED)
    g.line((461, cy), (598, cy))
    g.text(528, cy - 9, "$s_0 = \\text{tanh}(W_{\\text{init}}\\,c)$", size=13)
    dec = [(630, "⟨bos⟩", "$y_1$"), (745, "$y_1$", "$y_2$"), (860, "$y_2$", "⟨eos⟩")]
    for k, (x, yin, yout) in enumerate(dec):
        g.box(x, cy, 64, 46, "GRU", "cell", size=14)
        g.line((x, 290), (x, cy + 23))
        g.text(x, 305, yin, size=15)
        g.line((x, cy - 23), (x, 112))
        g.box(x, 100, 70, 24, "softmax", "linear", size=12)
        g.line((x, 88), (x, 42))
        g.text(x, 32, yout, size=15)
        if k:
            g.line((dec[k - 1][0] + 32, cy), (x - 32, cy))
            g.text((dec[k - 1][0] + x) / 2, cy - 8, f"$s_{k}$", size=14)
    return g


# ---------------------------------------------------------------------------------------------
# Chapter 4: attention over the encoder's states
# ---------------------------------------------------------------------------------------------


def attention_over_encoder() -> Svg:
    g = Svg(900, 450, "A decoder step attends over all encoder states")
    ye, sx, sy = 360, 300, 190
    weights = [0.06, 0.12, 0.64, 0.12, 0.06]
    xs = [100, 200, 300, 400, 500]
    names = ["1", "2", "3", "4", "S"]
    g.panel(50, 318, 540, 124)
    g.text(580, 437, "encoder", size=13, anchor="end", color=MUTED)
    purple = KINDS["attn"][1]
    for x, w, n in zip(xs, weights, names):
        g.box(x, ye, 60, 40, f"$h_{n}$", "cell", size=16)
        g.text(x, 428, f"$x_{n}$", size=14)
        g.line((x, 412), (x, ye + 20), halo=False)
        # the weighted sum: line width follows the weight
        g.line((x, ye - 20), (sx, sy + 14), color=purple, width=1 + 9 * w, arrow=False, halo=False)
        t = 0.3
        g.text(
            x + (sx - x) * t + (-10 if x < sx else 10),
            ye - 20 + (sy + 14 - ye + 20) * t,
            f"$α_{{t{n}}}$",
            size=14,
            anchor="end" if x < sx else "start",
        )
    for x in xs[:-1]:
        g.line((x + 30, ye), (x + 70, ye), halo=False)
    g.op(sx, sy, "Σ", r=14, kind="attn")
    g.text(sx - 24, sy - 6, "$c_t = Σ_j α_{tj}\\, h_j$", size=15, anchor="end")
    # the weights: score the decoder's previous state against every encoder state
    g.box(sx, 60, 360, 44, "$α_{tj} = \\text{softmax}_j\\, \\text{score}(s_{t-1}, h_j)$", "attn", size=15)
    g.line((sx, 82), (sx, sy - 14), color=purple, dash=True)
    g.text(sx + 8, 135, "weights $α_{t1}, …, α_{tS}$", size=13, anchor="start", color=MUTED)
    g.line((60, ye), (60, 60), (sx - 180, 60), color=purple, dash=True)
    g.text(68, 210, "all $h_j$", size=13, anchor="start", color=MUTED)
    # the decoder's step t (Bahdanau: the previous state asks, the context enters the GRU)
    dx = 770
    g.panel(600, 30, 290, 300, "decoder, step $t$")
    g.box(dx, sy, 72, 50, "GRU", "cell", size=15)
    g.line((sx + 14, sy), (dx - 36, sy))
    g.text(540, sy - 8, "$c_t$", size=15)
    g.line((680, 280), (dx - 16, 280), (dx - 16, sy + 25))
    g.text(650, 285, "$s_{t-1}$", size=15)
    g.line((dx + 16, 300), (dx + 16, sy + 25))
    g.text(dx + 16, 318, "$e(y_{t-1})$", size=14)
    g.line((dx, sy - 25), (dx, 112))
    g.text(dx, 100, "$s_t$", size=15)
    g.line((650, 268), (650, 60), (sx + 180, 60), color=purple, dash=True)
    g.text(560, 52, "$s_{t-1}$", size=13, color=MUTED)
    g.text(606, 400, "line width: $α_{tj}$", size=13, anchor="start", color=MUTED)
    return g


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
    g.box(x, 450, 150, 44, "$QK^\\top$", "linear", size=16, sub="matrix product")
    steps = [
        (368, "÷ $√d_k$", "linear", None, False),
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
    g.box(340, 100, 150, 44, "$AV$", "linear", size=16, sub="matrix product")
    g.line((400, 508), (400, 122))
    g.line((340, 78), (340, 42))
    g.text(340, 30, "$O$", size=18)
    g.text(350, 62, "$(T_q, d_v)$", size=13, anchor="start", color=MUTED)
    return g


def self_and_cross_attention() -> Svg:
    g = Svg(860, 400, "Self-attention and cross-attention: where the queries, keys and values come from")
    g.panel(20, 20, 390, 368, "self-attention")
    g.panel(450, 20, 390, 368, "cross-attention")
    attn = "$\\text{softmax}(QK^\\top / √d_k)\\, V$"
    # self-attention: Q, K and V are projections of one sequence X
    x0 = 215
    g.text(x0, 352, "$X$  $(n, d_\\text{model})$", size=15)
    g.text(x0, 372, "one sequence", size=13, color=MUTED)
    for x, w, name in ((125, "$W^Q$", "$Q$"), (215, "$W^K$", "$K$"), (305, "$W^V$", "$V$")):
        g.line((x0, 338), (x0, 318), (x, 318), (x, 282))
        g.box(x, 262, 70, 40, w, "linear", size=16)
        g.line((x, 242), (x, 166))
        g.text(x + 8, 205, name, size=15, anchor="start")
    g.dot(x0, 318)
    g.box(x0, 140, 300, 52, attn, "attn", size=15, sub="weights $(n, n)$")
    g.line((x0, 114), (x0, 80))
    g.text(x0, 68, "output $(n, d_v)$: one row per token", size=14)
    # cross-attention: queries from the decoder's states, keys and values from the encoder's
    g.text(555, 352, "$Y$  $(m, d_\\text{model})$", size=15)
    g.text(555, 372, "decoder states", size=13, color=MUTED)
    g.line((555, 338), (555, 282))
    g.box(555, 262, 70, 40, "$W^Q$", "linear", size=16)
    g.line((555, 242), (555, 166))
    g.text(563, 205, "$Q$", size=15, anchor="start")
    g.text(735, 352, "$X$  $(n, d_\\text{model})$", size=15)
    g.text(735, 372, "encoder states", size=13, color=MUTED)
    for x, w, name in ((690, "$W^K$", "$K$"), (780, "$W^V$", "$V$")):
        g.line((735, 338), (735, 318), (x, 318), (x, 282))
        g.box(x, 262, 70, 40, w, "linear", size=16)
        g.line((x, 242), (x, 166))
        g.text(x + 8, 205, name, size=15, anchor="start")
    g.dot(735, 318)
    g.box(665, 140, 300, 52, attn, "attn", size=15, sub="weights $(m, n)$")
    g.line((665, 114), (665, 80))
    g.text(665, 68, "output $(m, d_v)$: one row per query", size=14)
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
    g.text(455, 465, "$(B, T, d_\\text{model})$", size=13, color=MUTED, anchor="start")
    g.text(455, 385, "$(B, h, T, d_k)$, $d_k = d_\\text{model}/h$", size=13, color=MUTED, anchor="start")
    # h heads, drawn as a stack of cards
    for k in (2, 1, 0):
        dx = 16 * k
        g.front.append(
            f'<rect x="{110 + dx}" y="{206 - dx}" width="290" height="90" rx="8" fill="#F4DFEC" '
            f'stroke="#CC79A7" stroke-width="1.6"/>'
        )
    g.text(255, 246, "scaled dot-product attention", size=15)
    g.text(255, 268, "head 1", size=13, color=MUTED)
    g.text(440, 186, "head $h$", size=13, color=MUTED, anchor="start")
    g.text(455, 250, "every head at once: weights $(B, h, T, T)$", size=13, color=MUTED, anchor="start")
    g.text(455, 268, "output $(B, h, T, d_k)$", size=13, color=MUTED, anchor="start")
    g.line((x0, 174), (x0, 150))
    g.box(x0, 130, 200, 38, "merge_heads (Concat)", "plain", size=13)
    g.text(455, 135, "$(B, T, h\\,d_k) = (B, T, d_\\text{model})$", size=13, color=MUTED, anchor="start")
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
    ex, dx = 220, 620
    g.text(ex, 675, "source: $x$  $(B, S, d_\\text{model})$", size=14)
    top, ya1 = _sublayer(g, ex, 660, "multi-head\nself-attention", "attn", "self_attn; padding mask", 56)
    top, ya2 = _sublayer(g, ex, top, "feed-forward (FFN)", "linear", "linear1, ReLU, linear2", 46)
    g.panel(80, top - 12, 290, 664 - top, "encoder layer  × N", bottom=True)
    for ya, name in ((ya1, "norm1"), (ya2, "norm2")):
        g.text(ex + 106, ya + 4, name, size=12, anchor="start", color=MUTED)
    g.text(dx, 675, "target so far: $y$  $(B, T, d_\\text{model})$", size=14)
    top_d, yd1 = _sublayer(
        g, dx, 660, "masked multi-head\nself-attention", "attn", "self_attn; causal mask", 56
    )
    # the encoder's output, the memory, gives every decoder layer's cross-attention its keys
    # and values; the queries come from the decoder
    ycross = top_d - 14 - 44  # the bottom of the cross-attention box
    ym = ycross + 18
    g.line((ex, top), (ex, top - 40), (420, top - 40), (420, ym), (dx - 60, ym), (dx - 60, ycross))
    g.text(ex - 8, top - 36, "memory $(B, S, d_\\text{model})$", size=14, anchor="end")
    g.text(434, (top - 40 + ym) / 2, "keys, values", size=13, color=MUTED, rotate=-90)
    g.text(dx + 8, ycross + 30, "queries", size=13, anchor="start", color=MUTED)
    top_d, yd2 = _sublayer(g, dx, top_d, "multi-head\ncross-attention", "attn", "multihead_attn", 56, gap=44)
    top_d, yd3 = _sublayer(g, dx, top_d, "feed-forward (FFN)", "linear", "linear1, ReLU, linear2", 46)
    g.panel(460, top_d - 12, 320, 664 - top_d, "decoder layer  × N", bottom=True)
    for ya, name in ((yd1, "norm1"), (yd2, "norm2"), (yd3, "norm3")):
        g.text(dx + 106, ya + 4, name, size=12, anchor="start", color=MUTED)
    g.line((dx, top_d), (dx, top_d - 44))
    g.text(dx, top_d - 54, "output $(B, T, d_\\text{model})$", size=14)
    g.top = top_d - 76
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
    g.box(x, top - 118, 250, 44, "lm_head", "linear", size=14, sub="tied: the same matrix as wte")
    g.line((x, top - 140), (x, top - 172))
    g.text(x, top - 182, "logits $(B, T, V)$: the next token at every position", size=14)
    g.top = top - 206
    g.h = 705 - g.top
    return g


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
