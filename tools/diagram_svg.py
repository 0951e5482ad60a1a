"""The drawing kit of the book's architecture diagrams (tools/diagrams.py): one palette, one way of
setting text and maths, one SVG canvas, so that every diagram shares the pages' style and notation.

Colours are the Okabe–Ito palette the chapters' plots use, each kind of block always the same
colour:

    recurrent cell, state      blue          sigmoid gate        orange
    tanh layer                 green         attention           reddish purple
    linear layer, FFN          sky blue      add, layer norm     grey
    context vector (the bottleneck), mask   yellow
    gradient (backward pass)   vermillion, dashed
    no weights (an elementwise op, a product of two inputs, a scaling, an activation)   white

A colour always means a kind with learned weights (or the state, the context, the mask, the
gradient); an operation with no weights of its own is white, whatever it computes.

Annotations are never set below ``MIN_SIZE`` px, and sub- and superscripts are ``SUB_SCALE`` of
their base: the wide figures are shrunk to the article column (about 730 px) on the site.

Every SVG paints its own white background: it reads the same on the site in light and dark mode
(``_ext/static/course_site.css`` keeps the theme from dimming it), in the PDF, in JupyterLab's
dark theme and on GitHub. Text is SVG text (no embedded fonts): a sans-serif face for words, a
serif italic for variables, as MathJax sets them in the prose.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

SANS = "'DejaVu Sans', 'Helvetica Neue', Helvetica, Arial, sans-serif"
SERIF = "'DejaVu Serif', 'Times New Roman', Times, serif"
INK = "#222222"
LINE = "#3a3a3a"
GRAD = "#D55E00"
MUTED = "#6b6b6b"
MIN_SIZE = 13  # the smallest text, in px of the SVG
SUB_SCALE = 0.78  # the size of a sub- or superscript, relative to its base
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
            runs += _math_runs(arg, level + shift * scale, scale * SUB_SCALE)
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
            elif ch in ",;":
                ch += " "
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
        size = max(size, MIN_SIZE)
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
                self.text(cx, y, sub, size=max(size * 0.8, MIN_SIZE), color=MUTED)
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

    def op(self, cx, cy, sym, r=11, kind="plain", w=None, size=15):
        """An elementwise operation: a circle of radius r, or an ellipse of width w (for tanh)."""
        fill, stroke = KINDS[kind]
        rx = w / 2 if w else r
        self.front.append(
            f'<ellipse cx="{cx}" cy="{cy}" rx="{rx}" ry="{r}" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="1.6"/>'
            if w
            else f'<circle cx="{cx}" cy="{cy}" r="{r}" fill="{fill}" stroke="{stroke}" stroke-width="1.6"/>'
        )
        self.text(cx, cy + size / 3, sym, size=size)

    def bridge(self, x, y, vertical=False, r=6, color=LINE, width=1.7, under=LINE, under_width=1.7):
        """A hop where a line crosses another without joining it: the line along `vertical`
        (a vertical one if True, else a horizontal one) jumps over the other at (x, y). Call it
        after drawing both lines."""
        a, b = ((x, y - r), (x, y + r)) if vertical else ((x - r, y), (x + r, y))
        cut = f"M {a[0]} {a[1]} L {b[0]} {b[1]}"
        other = f"M {x - 5} {y} L {x + 5} {y}" if vertical else f"M {x} {y - 5} L {x} {y + 5}"
        arc = f"M {a[0]} {a[1]} A {r} {r} 0 0 {0 if vertical else 1} {b[0]} {b[1]}"
        self.back += [
            f'<path d="{cut}" stroke="#FFFFFF" stroke-width="{width + 3}"/>',
            f'<path d="{other}" stroke="{under}" stroke-width="{under_width}"/>',
            f'<path d="{arc}" fill="none" stroke="{color}" stroke-width="{width}"/>',
        ]

    def dot(self, x, y, color=LINE):
        self.front.append(f'<circle cx="{x}" cy="{y}" r="3.2" fill="{color}"/>')

    def line(self, *pts, color=LINE, width=1.7, dash=False, arrow=True, halo=True, head=None):
        """A polyline, with an arrowhead at its end; head: the arrowhead's length in px, whatever
        the line's width (by default it scales with the width)."""
        d = "M " + " L ".join(f"{x} {y}" for x, y in pts)
        if halo:
            self.back.append(
                f'<path d="{d}" fill="none" stroke="#FFFFFF" stroke-width="{width + 5}" '
                f'stroke-linejoin="round"/>'
            )
        extra = ' stroke-dasharray="6 4"' if dash else ""
        marker = f' marker-end="url(#{self._marker(color, head)})"' if arrow else ""
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

    def _marker(self, color, head=None):
        if not hasattr(self, "_markers"):
            self._markers = {}
        return self._markers.setdefault((color, head), f"arrow{len(self._markers)}")

    def render(self) -> str:
        markers = getattr(self, "_markers", {})
        defs = "".join(
            f'<marker id="{mid}" viewBox="0 0 10 10" refX="9" refY="5" '
            + (
                f'markerWidth="{head}" markerHeight="{head}" markerUnits="userSpaceOnUse" '
                if head
                else 'markerWidth="7" markerHeight="7" '
            )
            + f'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{color}"/></marker>'
            for (color, head), mid in markers.items()
        )
        body = "\n".join(self.back + self.front)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.w} {self.h}" '
            f'width="{self.w}" height="{self.h}" font-family="{SANS}" role="img">\n'
            f"<title>{escape(self.title)}</title>\n<defs>{defs}</defs>\n"
            f'<rect width="{self.w}" height="{self.h}" fill="#FFFFFF"/>\n'
            f'<g transform="translate(0 {-self.top})">\n{body}\n</g>\n</svg>\n'
        )
