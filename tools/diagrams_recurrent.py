"""The architecture diagrams of chapters 1 to 4 (the recurrent networks): the RNN unrolled with
backpropagation through time's paths, the LSTM and GRU cells, the encoder–decoder's bottleneck
and attention over the encoder's states. tools/diagrams.py writes them."""

from __future__ import annotations

from diagram_svg import GRAD, KINDS, MUTED, Svg

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
