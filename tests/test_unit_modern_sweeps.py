"""Chapter 12's declared sweeps (benchmarks/bench_modern.py; the race's in bench_race.py): each
ablation variant makes the one change it names, the LSTM is chapter 10's at matched size with
dropout where Zaremba et al. put it, and the run functions run end to end for a few steps. The
race's two stages and its declared rule: tests/test_unit_race_design.py."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_gpt  # noqa: E402 (benchmarks/, after the sys.path line)
import bench_modern as bm  # noqa: E402
import bench_race as br  # noqa: E402
import provenance  # noqa: E402
import sweep_run as runner  # noqa: E402
from common import SweepSpec  # noqa: E402

from course_lib import llama, train  # noqa: E402
from course_lib.charlm import CharLM  # noqa: E402
from course_lib.gpt import GPT  # noqa: E402
from course_lib.positional import apply_rope  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # one torch thread, as the sweeps run (conftest.py)

DECLARED = ("modern_ablation", "race_bpe2048_grid", "race_chars_grid")  # the race's stage 2: by rule
COMMITTED = ("modern_gqa_cache",)


def built(variant, vocab_size=104, seed=0, **kwargs):
    torch.manual_seed(seed)
    if variant in br.RACE_MODELS:
        return br.race_model(variant, vocab_size, **kwargs)
    return bm.decoder(variant, vocab_size, **kwargs)


def test_the_sweeps_are_declared_with_margins_and_registered_once_committed():
    planned, registered = runner.planned_sweeps(), runner.registered_sweeps()
    print("planned here:", sorted(planned), "registered:", sorted(registered))
    for name in DECLARED:  # in PLANNED until its file is committed, then in SWEEPS
        committed = (runner.SWEEP_DIR / f"{name}.json").is_file()
        assert (name in registered, name in planned) == (committed, not committed), name
    assert set(COMMITTED) <= set(registered) and not set(COMMITTED) & set(planned)
    for name in DECLARED:
        spec = {**planned, **registered}[name]
        assert isinstance(spec, SweepSpec) and spec.margins, name
        assert len(spec.seeds) >= 3 or (spec.selection_for and spec.seeds == [0]), name
        assert "Declared before the run" in spec.description and "CPU-hours" in spec.description, name
        for point in spec.points:
            runner.smoke_inputs(spec, point)  # every smoke override names a point or config key
        assert len({tuple(sorted(p.items())) for p in spec.points}) == len(spec.points), (
            f"{name}: a point twice"
        )


def test_the_race_grids_and_budgets_are_the_declared_ones():
    for name, tokenizer in (("race_chars_grid", "chars"), ("race_bpe2048_grid", "bpe-2048")):
        points = {**br.PLANNED, **br.SWEEPS}[name].points
        assert len(points) == 3 * 3 * 3, name  # models x dropouts x rates
        assert {p["dropout"] for p in points} == {0.0, 0.1, 0.2}
        assert {p["steps"] for p in points} == {br.RACE_STEPS[tokenizer]}
    assert all(steps % bm.EVALS == 0 for steps in [*br.RACE_STEPS.values(), bm.ABLATION_STEPS])


def test_gpt2_and_its_changes_differ_by_the_module_they_name():
    gpt2, rms, rope, swiglu, nobias, gqa = (
        built(v) for v in ("gpt2", "gpt2+rmsnorm", "gpt2+rope", "gpt2+swiglu", "gpt2-bias", "gpt2+gqa")
    )
    assert isinstance(gpt2, GPT) and gpt2.config.bias and not nobias.config.bias
    kinds = lambda m: [type(x).__name__ for x in m.modules()]  # noqa: E731
    base = kinds(gpt2)
    assert kinds(rms) == [("RMSNorm" if k == "LayerNorm" else k) for k in base]
    assert "wpe.weight" not in dict(rope.transformer.named_parameters())
    assert all(isinstance(b.attn, llama.Attention) and b.attn.n_kv_head == 4 for b in rope.transformer.h)
    assert all(
        isinstance(b.mlp, llama.MLP) and b.mlp.up_proj.out_features == 341 for b in swiglu.transformer.h
    )
    assert all(b.attn.n_kv_head == 2 and b.attn.k_proj.out_features == 64 for b in gqa.transformer.h)
    # the one change: every other parameter keeps its name and shape
    for model, changed in ((rms, ("ln_",)), (rope, ("attn.", "wpe")), (swiglu, ("mlp.",)), (gqa, ("attn.",))):
        kept = {n: p.shape for n, p in gpt2.named_parameters() if not any(c in n for c in changed)}
        theirs = {n: p.shape for n, p in model.named_parameters() if not any(c in n for c in changed)}
        assert kept == theirs
    # biases kept in the swapped modules (only the change named), zero at the start
    assert swiglu.transformer.h[0].mlp.gate_proj.bias.abs().max().item() == 0
    assert rope.transformer.h[0].attn.q_proj.bias is not None


def test_the_swapped_modules_get_gpt2s_initialisation():
    model = built("gpt2+swiglu")
    mlp = model.transformer.h[0].mlp
    up, down = mlp.up_proj.weight.std().item(), mlp.down_proj.weight.std().item()
    print(f"std up_proj {up:.4f} (0.02), down_proj {down:.4f} ({0.02 / 8**0.5:.4f})")
    assert abs(up - 0.02) < 0.002 and abs(down - 0.02 / 8**0.5) < 0.001


def test_grouped_attention_without_rope_is_llamas_before_rotation():
    att = built("gpt2+gqa").transformer.h[0].attn
    x = torch.randn(2, 7, 128)
    q, k, v = att.qkv(x)
    q2, k2, v2 = llama.Attention.qkv(att, x)
    diff = max((apply_rope(q) - q2).abs().max().item(), (apply_rope(k) - k2).abs().max().item())
    print("rotated - llama's:", diff)
    assert diff < 1e-6 and torch.equal(v, v2) and not torch.allclose(q, q2)


def test_rope_variant_adds_no_positions():
    model = built("gpt2+rope")
    pos = torch.arange(5)
    assert torch.equal(model.transformer.wpe(pos), torch.zeros(5, 128))


def test_the_llamas_and_the_capstone_gpt():
    assert isinstance(built("llama"), llama.Llama) and built("llama").config.n_kv_head == 2
    assert built("llama_mqa").config.n_kv_head == 1 and built("modern").config.n_kv_head == 4
    torch.manual_seed(0)
    capstone = bench_gpt.build("gpt", 104)
    ours = built("gpt")
    assert all(torch.equal(a, b) for a, b in zip(capstone.state_dict().values(), ours.state_dict().values()))


def test_the_race_decoders_are_the_ablations_gpt2_bias_and_llama_mha():
    for race, ablation in (("gpt", "gpt2-bias"), ("modern", "llama_mha")):
        a, b = built(race, 2048, dropout=0.0), built(ablation, 2048)
        assert type(a) is type(b) and a.config == b.config
        assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_each_sweep_reaches_only_what_its_own_smoke_runs_execute():
    """tests/test_evidence_sweeps checks that every definition a committed sweep's run function can
    reach is traced by some committed sweep: whichever of the ablation and the race is committed
    first, its run function must not reach the other's models (branches its smoke never takes)."""
    key, race_key = "benchmarks/bench_modern.py:", "benchmarks/bench_race.py:"
    ablation = provenance.reachable(key + "ablation_run")
    race = provenance.reachable(race_key + "race_tokens_run")
    print(len(ablation), "definitions reachable from the ablation,", len(race), "from the race")
    assert key + "decoder" in ablation and not {race_key + "lstm", race_key + "DropoutLSTM"} & ablation
    assert (
        race_key + "lstm" in race and not {key + "decoder", key + "NoPositions", key + "with_biases"} & race
    )


def test_the_lstm_is_chapter_10s_at_matched_size():
    torch.manual_seed(0)
    chapter10 = bench_gpt.build("lstm", 104)
    ours = built("lstm")
    assert ours.lm.rnn.hidden_size == 243
    assert all(
        torch.equal(a, b) for a, b in zip(chapter10.state_dict().values(), ours.lm.state_dict().values())
    )
    for vocab in (104, 2048):
        gpt, lstm = train.count_parameters(built("gpt", vocab)), train.count_parameters(built("lstm", vocab))
        print(f"vocabulary {vocab}: GPT {gpt}, LSTM {lstm} ({lstm / gpt - 1:+.2%})")
        assert (
            br.gpt_params(vocab) == gpt
            and br.lstm_params(vocab, built("lstm", vocab).lm.rnn.hidden_size) == lstm
        )
        assert abs(lstm / gpt - 1) < 0.005


def test_dropout_lstm_is_charlms_function_without_dropout_and_drops_in_training_only():
    x = torch.randint(0, 104, (2, 8))
    plain = built("lstm")
    lm = CharLM(104, "lstm", 64, 243, 2)
    lm.load_state_dict(plain.lm.state_dict())  # the course's LSTM, the same weights
    diff = (plain(x) - lm(x)).abs().max().item()
    print("fused + wrapper vs CharLM:", diff)
    assert diff < 1e-5
    dropped = built("lstm", dropout=0.2)
    assert dropped.lm.rnn.dropout == 0.2
    dropped.train()
    assert not torch.allclose(dropped(x), plain(x))
    dropped.eval()
    assert torch.equal(dropped(x), plain.eval()(x))


def test_dropout_reaches_every_model():
    for variant in ("gpt", "modern", "gpt2+rope", "gpt2+swiglu"):
        model = built(variant, dropout=0.1)
        rates = {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}
        assert rates == {0.1}, (variant, rates)


@pytest.mark.slow  # 10-30 s each on a loaded 2-core machine: 8 steps, then 10 passes over held-out text
@pytest.mark.parametrize(
    "point",
    [
        {"model": "modern", "tokenizer": "chars", "dropout": 0.1, "lr": 2e-3, "steps": 8},
        {"model": "lstm", "tokenizer": "chars", "dropout": 0.2, "lr": 5e-3, "steps": 8},
        {"model": "gpt2+rope", "tokenizer": "chars", "lr": 4e-3, "steps": 8},
    ],
)
def test_a_run_goes_end_to_end_and_returns_every_metric(point):
    run = br.race_tokens_run if point["model"] in br.RACE_MODELS else bm.ablation_run
    results = run(point, 0, bm.RUN_CONFIG)
    print({k: round(v, 3) for k, v in results.items()})
    assert set(results) == set(bm.run_metrics())
    assert results["val_bpc"] == results["val_bpc_8"] and 0 < results["test_bpc"] < 8


def test_gqa_cache_holds_n_kv_head_over_n_head_of_full_attentions_bytes_and_has_a_canary():
    """The smoke run (traced as sweep.py traces it) records losses: a committed sweep's canary needs
    them (test_evidence_sweeps), and a run that only timed generation would have none."""
    spec = bm.SWEEPS["modern_gqa_cache"]
    point, config = runner.smoke_inputs(spec, spec.points[1])
    ran = provenance.trace_run(bm.gqa_cache_run, dict(point, batch=2), 0, config)
    print(ran.result, "losses:", ran.losses)
    full = 2 * 4 * 128 * 4  # keys and values, 4 blocks, width 128, float32
    assert ran.result["cache_bytes_per_token_kv4"] == full
    assert ran.result["cache_bytes_per_token_kv2"] == full / 2
    assert ran.result["cache_bytes_per_token_kv1"] == full / 4
    assert set(ran.result) == set(spec.metrics) and all(v > 0 for v in ran.result.values())
    assert len(ran.losses) == 3 and "course_lib/llama.py:Attention.forward" in ran.definitions
