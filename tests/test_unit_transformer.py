"""Unit tests of course_lib.transformer: shapes, masks, causality, decoding, bad input."""

import math

import pytest
import torch

from course_lib.attention import causal_mask, padding_mask
from course_lib.gpt import GPT, GPTConfig
from course_lib.train import count_parameters
from course_lib.transformer import (
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    Transformer,
    TransformerConfig,
    beam_search,
    greedy_decode,
    shift_right,
)
from tiny_models import tiny_transformer

BOS, EOS, PAD = 1, 2, 0


def test_layers_keep_the_shape_and_store_every_heads_weights():
    enc, dec = EncoderLayer(16, 4, 32).eval(), DecoderLayer(16, 4, 32).eval()
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    assert enc(x).shape == (2, 5, 16)
    assert enc.last_weights.shape == (2, 4, 5, 5)
    assert dec(x, memory).shape == (2, 5, 16)
    assert dec.last_self_weights.shape == (2, 4, 5, 5) and dec.last_cross_weights.shape == (2, 4, 5, 7)
    torch.testing.assert_close(dec.last_cross_weights.sum(-1), torch.ones(2, 4, 5))
    assert not enc.last_weights.requires_grad


def test_padding_mask_gives_padded_keys_zero_weight_and_no_influence():
    enc = EncoderLayer(16, 4, 32, dropout=0.0).eval()
    x = torch.randn(1, 6, 16)
    mask = padding_mask(torch.tensor([4]), 6)
    out = enc(x, mask)
    assert enc.last_weights[..., 4:].abs().max() == 0
    x2 = x.clone()
    x2[:, 4:] = torch.randn(1, 2, 16) * 10  # change the padding: real outputs must not move
    torch.testing.assert_close(enc(x2, mask)[:, :4], out[:, :4])


def test_decoder_is_causal_in_its_target():
    model = tiny_transformer()
    src = torch.tensor([[3, 4, 5, 6]])
    tgt = torch.tensor([[BOS, 3, 4, 5, 6]])
    logits = model(src, tgt)
    changed = tgt.clone()
    changed[0, 3] = 3  # change position 3 (was 5)
    logits2 = model(src, changed)
    torch.testing.assert_close(logits[:, :3], logits2[:, :3])  # positions < 3 unaffected
    assert not torch.allclose(logits[:, 3:], logits2[:, 3:])
    weights = model.attention_weights()
    assert len(weights["encoder"]) == len(weights["decoder_self"]) == len(weights["cross"]) == 2
    assert torch.all(weights["decoder_self"][0].triu(1) == 0)


def test_source_padding_does_not_change_the_output():
    model = tiny_transformer()
    tgt = torch.tensor([[BOS, 3, 4]])
    short = model(torch.tensor([[3, 4, 5]]), tgt)
    padded = model(torch.tensor([[3, 4, 5, PAD, PAD]]), tgt)
    torch.testing.assert_close(short, padded, atol=1e-5, rtol=1e-5)


def test_norm_first_changes_the_function_not_the_parameters():
    post, pre = tiny_transformer(norm_first=False), tiny_transformer(norm_first=True)
    assert count_parameters(post) == count_parameters(pre)
    pre.load_state_dict(post.state_dict())
    src, tgt = torch.tensor([[3, 4, 5]]), torch.tensor([[BOS, 3]])
    assert not torch.allclose(post(src, tgt), pre(src, tgt))


def test_feed_forward_is_position_wise():
    ffn = FeedForward(8, 16)
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(ffn(x)[:, 2], ffn(x[:, 2:3])[:, 0])


def test_shift_right():
    tgt = torch.tensor([[5, 6, EOS], [7, EOS, PAD]])
    assert shift_right(tgt, BOS).tolist() == [[BOS, 5, 6], [BOS, 7, EOS]]
    with pytest.raises(ValueError, match="tgt"):
        shift_right(torch.tensor([1, 2]), BOS)


class Scripted(torch.nn.Module):
    """A stand-in Transformer whose next-token distribution is a fixed table of the prefix
    length, for exact tests of greedy and beam search (decoding uses Transformer's own
    start and step, over this model's encode and decode)."""

    start, step = Transformer.start, Transformer.step

    def __init__(self, table, vocab_size=5, max_len=16):
        super().__init__()
        self.table = table  # step -> log-probabilities (V,)
        self.src_embed = torch.nn.Embedding(vocab_size, 1)
        self.max_len = max_len

    def encode(self, src):
        return torch.zeros(src.shape[0], src.shape[1], 1)

    def decode(self, ys, memory, src):
        B, T = ys.shape
        rows = []
        for b in range(B):
            prefix = tuple(ys[b, 1:].tolist())
            rows.append(torch.stack([self.table(prefix[:t]) for t in range(T)]))
        return torch.stack(rows)


def test_beam_search_finds_a_better_sequence_than_greedy():
    # step 0: token 3 (p=.5) or 4 (p=.4); after 3 every continuation is poor, after 4 <eos> is sure.
    def table(prefix):
        if prefix == ():
            p = [0, 0, 0.1, 0.5, 0.4]
        elif prefix[0] == 3:
            p = [0, 0, 0.3, 0.35, 0.35]
        else:
            p = [0, 0, 1.0, 0, 0]
        return torch.tensor(p).clamp_min(1e-9).log()

    model = Scripted(table)
    src = torch.tensor([[3, 3]])
    greedy = greedy_decode(model, src, max_len=4, bos_id=BOS, eos_id=EOS)
    assert greedy[0, 0].item() == 3
    tokens, scores = beam_search(model, src, max_len=4, bos_id=BOS, eos_id=EOS, beam_size=2)
    assert tokens[0, 0, :2].tolist() == [4, EOS]
    assert math.isclose(scores[0, 0].item(), math.log(0.4), rel_tol=1e-5)


def test_beam_of_one_is_greedy_on_a_random_model():
    model = tiny_transformer(seed=3)
    src = torch.tensor([[3, 4, 5, 6, 7], [8, 7, 6, PAD, PAD]])
    greedy = greedy_decode(model, src, max_len=6, bos_id=BOS, eos_id=EOS)
    beams, _ = beam_search(model, src, max_len=6, bos_id=BOS, eos_id=EOS, beam_size=1)
    assert torch.equal(beams[:, 0, : greedy.shape[1]], greedy)


def test_greedy_decode_pads_finished_rows_with_eos_and_restores_the_mode():
    model = tiny_transformer(seed=1).train()
    out = greedy_decode(model, torch.tensor([[3, 4, 5]]), max_len=5, bos_id=BOS, eos_id=EOS)
    assert out.shape[0] == 1 and out.shape[1] <= 5
    row = out[0].tolist()
    if EOS in row:
        assert all(t == EOS for t in row[row.index(EOS) :])
    assert model.training


def test_gpt_is_causal_and_generates():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=4, n_embd=16)).eval()
    idx = torch.randint(0, 11, (2, 6))
    logits = gpt(idx)
    assert logits.shape == (2, 6, 11)
    changed = idx.clone()
    changed[:, 4] = (changed[:, 4] + 1) % 11
    torch.testing.assert_close(gpt(changed)[:, :4], logits[:, :4])
    assert [w.shape for w in gpt.attention_weights()] == [(2, 4, 6, 6)] * 2
    out = gpt.generate(idx, 5, generator=torch.Generator().manual_seed(0))
    assert out.shape == (2, 11) and torch.equal(out[:, :6], idx)  # reads the last max_len tokens


def test_encoder_stack_has_torch_names():
    names = set(Encoder(2, 16, 4, 32).state_dict())
    assert {"layers.0.self_attn.in_proj_weight", "layers.1.linear2.bias", "norm.weight"} <= names


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: EncoderLayer(10, 4, 32), "divisible"),
        (lambda: EncoderLayer(16, 4, 0), "d_ff"),
        (lambda: Encoder(0, 16, 4, 32), "num_layers"),
        (lambda: TransformerConfig(0, 5), "src_vocab_size"),
        (lambda: GPTConfig(vocab_size=10, n_layer=-1), "n_layer"),
    ],
)
def test_bad_sizes_raise(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_inputs_raise_with_names_and_shapes():
    enc, dec = EncoderLayer(16, 4, 32), DecoderLayer(16, 4, 32)
    with pytest.raises(ValueError, match=r"x must be \(B, T, d_model=16\), got shape \(2, 5, 8\)"):
        enc(torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match="memory"):
        dec(torch.randn(2, 5, 16), torch.randn(2, 5))
    with pytest.raises(ValueError, match="batch size"):
        dec(torch.randn(2, 5, 16), torch.randn(3, 5, 16))
    model = tiny_transformer(max_len=32)
    with pytest.raises(ValueError, match="src must be a"):
        model(torch.tensor([3, 4]), torch.tensor([[BOS]]))
    with pytest.raises(TypeError, match="integer"):
        model(torch.rand(1, 3), torch.tensor([[BOS]]))
    with pytest.raises(ValueError, match=r"tgt_in has ids outside \[0, 7\)"):
        model(torch.tensor([[3]]), torch.tensor([[BOS, 9]]))
    with pytest.raises(ValueError, match="max_len=32"):
        model(torch.ones(1, 33, dtype=torch.long), torch.tensor([[BOS]]))
    with pytest.raises(ValueError, match="same batch size"):
        model(torch.ones(2, 3, dtype=torch.long), torch.tensor([[BOS]]))
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, torch.tensor([[3]]), 3, BOS, EOS, beam_size=0)
    with pytest.raises(ValueError, match="mask"):
        enc(torch.randn(2, 5, 16), torch.ones(3, 5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="max_len=8"):
        GPT(GPTConfig(vocab_size=11, block_size=8, n_head=4, n_embd=16))(torch.zeros(1, 9, dtype=torch.long))
    assert causal_mask(3).shape == (3, 3)


def test_inverse_sqrt_warmup_rises_linearly_then_decays_as_inverse_sqrt():
    from course_lib.transformer_train import inverse_sqrt_warmup

    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=0.5)
    scheduler = inverse_sqrt_warmup(optimizer, warmup=4)
    rates = []
    for _ in range(16):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates[:4] == pytest.approx([0.125, 0.25, 0.375, 0.5])  # linear to the peak
    assert max(rates) == pytest.approx(0.5)  # peak = the set rate
    assert rates[15] == pytest.approx(0.5 * (4 / 16) ** 0.5)  # then 1/sqrt(step)
    with pytest.raises((TypeError, ValueError)):
        inverse_sqrt_warmup(optimizer, warmup=2.5)


def test_train_transformer_takes_the_papers_schedule_and_refuses_others():
    from course_lib import data
    from course_lib.transformer_train import TransformerRecipe, train_transformer

    pairs = [("ab", "ba"), ("abc", "cba"), ("ca", "ac")]
    vocab = data.Vocab.from_text([s for s, _ in pairs])
    model = tiny_transformer(len(vocab), len(vocab))
    paper = TransformerRecipe(
        batch_size=2, schedule="inverse_sqrt", betas=(0.9, 0.98), adam_eps=1e-9, label_smoothing=0.1
    )
    history = train_transformer(model, pairs, vocab, vocab, 3, paper, progress=False)
    assert len(history.train_loss) == 3
    with pytest.raises(ValueError, match="schedule"):
        TransformerRecipe(schedule="noam")
    with pytest.raises(TypeError, match="TransformerRecipe"):
        train_transformer(model, pairs, vocab, vocab, 3, {"lr": 1e-3}, progress=False)
    with pytest.raises(TypeError, match="TransformerConfig"):
        Transformer(len(vocab))  # sizes go in a TransformerConfig
