"""The architecture diagrams of chapters 1 to 4 (the recurrent networks): the RNN unrolled with
backpropagation through time's paths, the LSTM and GRU cells, the encoder–decoder's bottleneck
and attention over the encoder's states. tools/diagrams.py writes them."""

from __future__ import annotations

import itertools

from diagram_svg import GRAD, KINDS, MUTED, Svg

# ---------------------------------------------------------------------------------------------
# Chapter 1: the RNN unrolled in time, and backpropagation through time
# ---------------------------------------------------------------------------------------------


def rnn_unrolled() -> Svg:
    g = Svg(860, 415, "A vanilla RNN unrolled over T steps, with the paths of backpropagation through time")
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
            g.text(586, cy - 30, "$W_{hh}$", size=13, color=MUTED)
        else:
            g.line((prev, cy), (x - bw / 2, cy))
            xm = (prev + x - bw / 2) / 2
            if k != 1:  # the state passed on, and the recurrent weights it meets (W_hh, grey)
                g.text(xm, cy - 8, f"$h_{k - 1}$", size=15)
                g.text(xm, cy - 30, "$W_{hh}$", size=13, color=MUTED)
            else:  # h_0 is named at the left: W_hh just above its arrow
                g.text(xm + 4, cy - 14, "$W_{hh}$", size=13, color=MUTED)
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
    g.line((14, 20), (44, 20), arrow=True, halo=False)
    g.text(52, 25, "forward", size=13, anchor="start", color=MUTED)
    g.line((118, 20), (148, 20), color=GRAD, dash=True, halo=False)
    g.text(
        156,
        25,
        "backward (gradient): each step back, $\\,× \\text{diag}(1 - h_t^2)\\,W_{hh}$ "
        "(row-vector gradient, multiplied on the right)",
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
    g = Svg(820, 425, "The LSTM cell")
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
    # inputs: h_{t-1} from the left, x_t from below, concatenated, then one bus to the four boxes
    g.text(40, bus + 5, "$h_{t-1}$", size=17)
    g.line((66, bus), (126, bus))
    g.line((150, 382), (150, bus + 12))
    g.text(150, 400, "$x_t$", size=17)
    g.box(150, bus, 48, 24, "[ , ]", "plain", size=13, rx=12)
    g.line((174, bus), (500, bus), arrow=False)
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
    # h_t = o_t ⊙ tanh(c_t): tanh elementwise, no weights
    g.line((600, top), (600, 125), arrow=True)
    g.dot(600, top)
    g.op(600, 138, "tanh", r=13, w=50, size=14)
    g.line((600, 151), (600, 238))
    g.op(600, 250, "×")
    g.line((500, gy - 20), (500, 210), (560, 210), (560, 250), (588, 250))
    g.text(508, 200, "$o_t$", size=15, anchor="start")
    g.line((612, 250), (650, 250), (650, bus), (770, bus))
    g.text(790, bus + 5, "$h_t$", size=17)
    # the output to the next layer leaves to the right, below the cell state
    g.line((650, 250), (650, 190), (730, 190))
    g.dot(650, 250)
    g.text(742, 186, "$h_t$", size=15, anchor="start")
    g.text(742, 204, "(output)", size=13, anchor="start", color=MUTED)
    # legend
    g.text(
        805, 376, "box: linear map of $[x_t, h_{t-1}]$, then σ or tanh", size=13, anchor="end", color=MUTED
    )
    g.text(805, 394, "circle: elementwise product (×), sum (+) or tanh", size=13, anchor="end", color=MUTED)
    g.text(805, 412, "[ , ]: concatenation", size=13, anchor="end", color=MUTED)
    return g


def gru_cell() -> Svg:
    g = Svg(820, 440, "The GRU cell")
    top, nb, hb, xb = 70, 290, 340, 375  # the state; the bus of [x_t, h_{t-1}]; h_{t-1}'s; x_t's
    g.panel(80, 35, 680, 320)
    g.text(36, top + 5, "$h_{t-1}$", size=17)
    g.line((62, top), (548, top))
    g.op(560, top, "×")
    g.line((572, top), (708, top))
    g.op(720, top, "+")
    g.line((732, top), (775, top))
    g.text(795, top + 5, "$h_t$", size=17)
    # h_{t-1} down into the concatenation and on to W_hn; x_t from below into both and to W_in
    g.line((100, top), (100, hb), (390, hb), (390, 240))
    g.dot(100, top)
    g.line((100, nb), (126, nb))
    g.dot(100, nb)
    g.box(150, nb, 48, 24, "[ , ]", "plain", size=13, rx=12)
    g.text(150, 428, "$x_t$", size=17)
    g.line((150, 410), (150, nb + 12))
    g.bridge(150, hb, vertical=True)
    g.line((150, xb), (470, xb), (470, 240))
    g.dot(150, xb)
    # the gates z (update) and r (reset) read [x_t, h_{t-1}]
    gy = 210
    g.line((174, nb), (290, nb), arrow=False)
    for x in (200, 290):  # z, r
        g.line((x, nb), (x, gy + 20))
        g.dot(x, nb)
        g.box(x, gy, 46, 40, "σ", "gate", size=15)
    # candidate: n_t = tanh(x_t W_in + b_in + r_t ⊙ (h_{t-1} W_hn + b_hn)); r_t acts after W_hn
    g.box(390, 220, 76, 40, "$h_{t-1}W_{hn}^\\top$\n$+\\,b_{hn}$", "linear", size=13)
    g.line((390, 200), (390, 157))
    g.op(390, 145, "×")
    g.line((290, gy - 20), (290, 145), (378, 145))
    g.text(298, 172, "$r_t$", size=15, anchor="start")
    g.box(470, 220, 66, 40, "$x_tW_{in}^\\top$\n$+\\,b_{in}$", "linear", size=13)
    g.line((402, 145), (459, 145))
    g.line((470, 200), (470, 157))
    g.op(470, 145, "+")
    g.line((481, 145), (514, 145))
    g.op(540, 145, "tanh", r=13, w=50, size=14)
    # h_t = (1 - z_t) ⊙ n_t + z_t ⊙ h_{t-1}
    g.line((200, gy - 20), (200, 105), (560, 105), (560, top + 11))
    g.text(208, 150, "$z_t$", size=15, anchor="start")
    g.dot(560, 105)
    g.line((560, 105), (650, 105), (650, 121))
    g.op(650, 134, "1−", r=13)
    g.line((650, 147), (650, 198))
    g.op(650, 210, "×")
    g.line((565, 145), (600, 145), (600, 210), (638, 210))
    g.text(577, 138, "$n_t$", size=15, anchor="start")
    g.line((662, 210), (720, 210), (720, top + 11))
    # legend
    g.text(805, 396, "orange box: σ of a linear map of $[x_t, h_{t-1}]$", size=13, anchor="end", color=MUTED)
    g.text(805, 414, "sky-blue box: linear map only", size=13, anchor="end", color=MUTED)
    g.text(
        805,
        432,
        "circle: elementwise (×, +, 1 − z, tanh); [ , ]: concatenation",
        size=13,
        anchor="end",
        color=MUTED,
    )
    return g


# ---------------------------------------------------------------------------------------------
# Chapter 3: the encoder–decoder and its bottleneck
# ---------------------------------------------------------------------------------------------


def seq2seq_bottleneck() -> Svg:
    g = Svg(930, 330, "The RNN encoder-decoder: the whole input passes through one context vector")
    cy = 170
    g.panel(20, 40, 380, 270, "encoder (GRU)")
    g.panel(580, 40, 340, 270, "decoder (GRU)")
    # every GRU reads a token's embedding e(.)
    for x, xin in ((80, "$e(x_1)$"), (180, "$e(x_2)$"), (340, "$e(x_S)$")):
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
    g.line((461, cy), (608, cy))
    g.text(518, cy - 26, "$s_0 =$", size=13)
    g.text(518, cy - 9, "$\\text{tanh}(W_{\\text{init}}\\,c)$", size=13)
    # the output layer: softmax(W_o s_t) over the vocabulary
    dec = [(640, "$e($⟨bos⟩$)$", "$y_1$"), (750, "$e(y_1)$", "$y_2$"), (860, "$e(y_2)$", "⟨eos⟩")]
    for k, (x, yin, yout) in enumerate(dec):
        g.box(x, cy, 64, 46, "GRU", "cell", size=14)
        g.line((x, 290), (x, cy + 23))
        g.text(x, 305, yin, size=15)
        g.line((x, cy - 23), (x, 121))
        g.box(x, 102, 84, 38, f"softmax\n$(W_o s_{k + 1})$", "linear", size=13)
        g.line((x, 83), (x, 34))
        g.text(x, 24, yout, size=15)
        if k:
            g.line((dec[k - 1][0] + 32, cy), (x - 32, cy))
            g.text((dec[k - 1][0] + x) / 2, cy - 8, f"$s_{k}$", size=14)
    return g


# ---------------------------------------------------------------------------------------------
# Chapter 4: attention over the encoder's states
# ---------------------------------------------------------------------------------------------


def attention_over_encoder() -> Svg:
    g = Svg(900, 462, "A decoder step attends over all encoder states")
    ye, sx, sy, r = 370, 300, 190, 14
    weights = [0.06, 0.12, 0.64, 0.12, 0.06]
    xs = [100, 200, 300, 400, 530]
    names = ["1", "2", "3", "4", "S"]
    purple = KINDS["attn"][1]
    # the encoder: bidirectional, h_j = [forward h_j; backward h_j], one state per input
    g.panel(50, 324, 540, 130)
    g.text(606, 384, "encoder", size=13, anchor="start", color=MUTED)
    g.text(606, 401, "(bidirectional GRU)", size=13, anchor="start", color=MUTED)
    for x, n in zip(xs, names):
        g.box(x, ye, 56, 40, f"$h_{n}$", "cell", size=16)
        g.text(x, 440, f"$x_{n}$", size=14)
        g.line((x, 422), (x, ye + 20), halo=False)
    for a, b in itertools.pairwise(xs):
        if b == xs[-1]:  # h_4 ... h_S
            g.text((a + b) / 2, ye + 6, "…", size=18)
            for y, (p0, p1) in ((ye - 8, (a + 28, b - 28)), (ye + 8, (b - 28, a + 28))):
                g.line((p0, y), (p0 + (p1 - p0) * 0.3, y), arrow=False, halo=False)
                g.line((p0 + (p1 - p0) * 0.7, y), (p1, y), halo=False)
        else:
            g.line((a + 28, ye - 8), (b - 28, ye - 8), halo=False)
            g.line((b - 28, ye + 8), (a + 28, ye + 8), halo=False)
    # every h_j, gathered: the keys that the score reads
    g.back.append(
        f'<rect x="64" y="343" width="502" height="54" rx="8" fill="none" stroke="{purple}" '
        f'stroke-width="1.6" stroke-dasharray="6 4"/>'
    )
    g.line((78, 343), (78, 60), (sx - 180, 60), color=purple, dash=True)
    g.text(86, 240, "all $h_j$", size=13, anchor="start", color=MUTED)
    # the weighted sum: line width follows the weight; the arrows meet on the Σ circle
    for x, w, n in zip(xs, weights, names):
        dx, dy = x - sx, ye - 20 - sy
        end = (sx + r * dx / (dx * dx + dy * dy) ** 0.5, sy + r * dy / (dx * dx + dy * dy) ** 0.5)
        g.line((x, ye - 20), end, color=purple, width=1 + 9 * w, halo=False, head=11)
        t = 0.3
        g.text(
            x + (sx - x) * t + (-10 if x < sx else 10),
            ye - 20 + (sy + 14 - ye + 20) * t,
            f"$α_{{t{n}}}$",
            size=14,
            anchor="end" if x < sx else "start",
        )
    g.op(sx, sy, "Σ", r=r, kind="attn")
    g.text(sx - 24, sy - 6, "$c_t = Σ_j α_{tj}\\, h_j$", size=15, anchor="end")
    # the weights: score the decoder's previous state against every encoder state
    g.box(sx, 60, 360, 44, "$α_{tj} = \\text{softmax}_j\\, \\text{score}(s_{t-1}, h_j)$", "attn", size=15)
    g.line((sx, 82), (sx, sy - 14), color=purple, dash=True)
    g.text(sx + 8, 135, "weights $α_{t1}, …, α_{tS}$", size=13, anchor="start", color=MUTED)
    # the decoder's step t (Bahdanau: the previous state asks, the context enters the GRU and
    # the output layer, with the previous token's embedding)
    dx, yo = 755, 95
    g.panel(610, 20, 280, 315, "decoder, step $t$")
    g.box(dx, sy, 72, 50, "GRU", "cell", size=15)
    g.line((sx + r, sy), (dx - 36, sy))
    g.text(540, sy - 8, "$c_t$", size=15)
    g.line((665, sy), (665, yo + 22))
    g.dot(665, sy)
    g.text(600, 285, "$s_{t-1}$", size=15, anchor="end")
    g.line((606, 280), (dx - 16, 280), (dx - 16, sy + 25))
    g.line((dx + 16, 302), (dx + 16, sy + 25))
    g.text(dx + 16, 320, "$e(y_{t-1})$", size=14)
    g.line((dx + 16, 255), (850, 255), (850, yo + 22))
    g.dot(dx + 16, 255)
    g.line((dx, sy - 25), (dx, yo + 22))
    g.text(dx + 8, 145, "$s_t$", size=15, anchor="start")
    g.box(dx, yo, 230, 44, "softmax$(W_o[s_t; c_t; e(y_{t-1})])$", "linear", size=13)
    g.line((dx, yo - 22), (dx, 52))
    g.text(dx, 44, "$y_t$", size=15)
    # s_{t-1} also asks: up to the score box, over the context's line
    g.line((630, 280), (630, 60), (sx + 180, 60), color=purple, dash=True)
    g.dot(630, 280)
    g.bridge(630, sy, vertical=True, color=purple)
    g.text(560, 52, "$s_{t-1}$", size=13, color=MUTED)
    g.text(606, 440, "line width: $α_{tj}$", size=13, anchor="start", color=MUTED)
    return g
