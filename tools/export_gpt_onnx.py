"""Export chapter 10's trained GPT to ONNX, for the explorer that runs it in the reader's browser.

    python tools/export_gpt_onnx.py    # course_lib/static/gpt_capstone.pt -> _build/gpt/gpt_capstone.onnx
    make gpt-onnx                      # the same

The graph takes `idx` (B, T) int64 token ids, 1 <= T <= 64, and returns
    logits     (B, T, V)                   the next-token scores after every position (GPT.forward)
    attention  (n_layer, B, n_head, T, T)  the softmax weights of every block and head
                                           (GPT.attention_weights(), stacked)

Exporter: torch.onnx.export with dynamo=False, the TorchScript-based tracer (torch 2.13's default,
the torch.export-based exporter, needs the onnxscript package, which this environment does not
pin; the tracer, which torch now calls legacy and warns about, needs only torch), opset 17, batch
and length dynamic. `AttentionGPT` below is GPT.forward itself:
it calls the course_lib.gpt.GPT it wraps and stacks the weights that GPT's attention layers
keep from that same call (`last_weights`), so the arithmetic is gpt.py's, unchanged
(tests/test_unit_gpt_onnx.py checks logits and weights against GPT's, and onnxruntime's against
torch's). Float32: the file is about 3.3 MB. Float16 weights would halve it but move the
logits by up to 4.4e-3 and the attention weights by 1.2e-3 (measured on a 55-character
sentence), past the 1e-4 the browser test holds, so the file stays float32.

The export is reproducible: the same weights give the same bytes (the test checks it).
"""

from __future__ import annotations

import argparse
import io
import sys
import warnings
from pathlib import Path

import torch
import torch.nn as nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib.gpt import GPT, GPTConfig  # noqa: E402

WEIGHTS = ROOT / "course_lib" / "static" / "gpt_capstone.pt"
ONNX_OUT = ROOT / "_build" / "gpt" / "gpt_capstone.onnx"
OPSET = 17


class AttentionGPT(nn.Module):
    """A GPT whose forward also returns its attention weights: idx (B, T) ->
    (logits (B, T, V), attention (n_layer, B, n_head, T, T)). No arithmetic of its own."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, idx):
        logits = self.gpt(idx)  # (B, T, V)
        return logits, torch.stack(self.gpt.attention_weights())  # (n_layer, B, h, T, T)


def load_gpt(path=WEIGHTS):
    """-> (the trained GPT in eval mode, its vocabulary: a list of characters by id, the saved record)."""
    saved = torch.load(path, weights_only=True)
    model = GPT(GPTConfig(**saved["config"]))
    model.load_state_dict(saved["state_dict"])
    return model.eval(), saved["vocab"], saved


def export_bytes(model):
    """The ONNX file of AttentionGPT(model), as bytes."""
    wrapped = AttentionGPT(model).eval()
    example = torch.zeros(1, 8, dtype=torch.long)  # (B, T): any ids, any length
    buffer = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        # the tracer warns that GPT.forward's checks of idx (Python ifs on its values) are not
        # recorded in the graph: the page's front end only sends ids in range and T <= 64
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(
            wrapped,
            (example,),
            buffer,
            dynamo=False,
            opset_version=OPSET,
            input_names=["idx"],
            output_names=["logits", "attention"],
            dynamic_axes={
                "idx": {0: "batch", 1: "length"},
                "logits": {0: "batch", 1: "length"},
                "attention": {1: "batch", 3: "length", 4: "length"},
            },
        )
    return buffer.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--weights", type=Path, default=WEIGHTS)
    parser.add_argument("--out", type=Path, default=ONNX_OUT)
    args = parser.parse_args(argv)
    import onnx  # the checker; only the export needs the package

    model, _, _ = load_gpt(args.weights)
    data = export_bytes(model)
    onnx.checker.check_model(onnx.load_from_string(data))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out} ({len(data) / 1e6:.2f} MB, opset {OPSET}, TorchScript exporter)")


if __name__ == "__main__":
    main()
