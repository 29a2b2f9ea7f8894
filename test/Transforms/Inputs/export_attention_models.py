"""Exports the attention patterns of issue 38 as torch writes them, small
(d_model 32, 2 heads of 16, sequence 8, batch 2), in training mode, all in
one run: usage export_attention_models.py SRC OUTDIR [--long SEQ].

  encoder.onnx         nn.TransformerEncoderLayer (batch_first, dropout 0)
  encoder_causal.onnx  the same with src_mask = its causal
                       generate_square_subsequent_mask, a buffer "mask"
  encoder_dropout.onnx the encoder with dropout 0.1 (in training mode a
                       Dropout on the attention's probabilities too)
  mha.onnx             nn.MultiheadAttention alone (self-attention,
                       need_weights=False)
  sdpa.onnx            scaled_dot_product_attention(q, k, v)
  sdpa_causal.onnx     the same, is_causal=True
  sdpa_mask.onnx       the same with a float attn_mask, a second input "mask"
  weights.onnx         a near miss: the probabilities are a second output
  learned_scale.onnx   a near miss: the scores scaled by a parameter
  long_SEQ.onnx        with --long SEQ, only this: sdpa_causal at batch 1,
                       one head of 16, sequence SEQ

torch 1.13 (the one installed) has scaled_dot_product_attention only as
the private F._scaled_dot_product_attention and no ONNX symbolic for it;
`sdpa_symbolic` writes the graph torch 2.x's exporter writes for
F.scaled_dot_product_attention (symbolic_opset14): the scale 1/sqrt(E)
from Shape, Slice, Cast and Sqrt; Q and Kᵀ each multiplied by sqrt(scale);
the causal mask from Expand(1, [L, S]), Trilu and Where(x == 0, -inf, 0);
Add of the mask, Softmax(-1), MatMul with V."""
import os
import sys
import warnings

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.join(sys.argv[1], "utils", "python"))
from ampc_testing import export_onnx  # noqa: E402

D, HEADS, SEQ, BATCH = 32, 2, 8, 2
OUT = sys.argv[2]


def sdpa_symbolic(g, query, key, value, attn_mask, dropout_p,
                  need_attn_weights, is_causal):
    from torch.onnx import symbolic_helper as sh

    def const(values, dtype=torch.float):
        return g.op("Constant", value_t=torch.tensor(values, dtype=dtype))

    causal = sh._maybe_get_const(is_causal, "b")
    last, end = const([-1], torch.int64), const([2 ** 62], torch.int64)
    shape = g.op("Shape", query)
    size = g.op("Slice", shape, last, end)
    embedding = g.op("Cast", size, to_i=1)  # FLOAT
    scale = g.op("Div", const([1.0]), g.op("Sqrt", embedding))
    if causal:
        length = g.op("Slice", shape, const([-2], torch.int64), last)
        source = g.op("Slice", g.op("Shape", key), const([-2], torch.int64), last)
        ones = g.op("Expand", const([1.0]),
                    g.op("Concat", length, source, axis_i=0))
        lower = g.op("Trilu", ones, upper_i=0)
        attn_mask = g.op("Where", g.op("Equal", lower, const([0.0])),
                         const([-float("inf")]), const([0.0]))
    rank = sh._get_tensor_rank(key)
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    kt = g.op("Transpose", key, perm_i=perm)
    q_scaled = g.op("Mul", query, g.op("Sqrt", scale))
    kt_scaled = g.op("Mul", kt, g.op("Sqrt", scale))
    scores = g.op("MatMul", q_scaled, kt_scaled)
    if not sh._is_none(attn_mask):
        scores = g.op("Add", scores, attn_mask)
    weights = g.op("Softmax", scores, axis_i=-1)
    return g.op("MatMul", weights, value), weights


torch.onnx.register_custom_op_symbolic(
    "aten::_scaled_dot_product_attention", sdpa_symbolic, 14)


class Encoder(torch.nn.Module):
    def __init__(self, causal, dropout=0.0):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(
            D, HEADS, dim_feedforward=2 * D, dropout=dropout, batch_first=True)
        self.causal = causal
        self.register_buffer(
            "mask", torch.nn.Transformer.generate_square_subsequent_mask(SEQ))

    def forward(self, x):
        return self.layer(x, src_mask=self.mask if self.causal else None)


class Mha(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(D, HEADS, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


class Sdpa(torch.nn.Module):
    """q, k, v projections split into heads, the attention, the heads
    merged; `kind` is "none", "causal", "mask" (a float mask input),
    "weights" (the probabilities also returned) or "scale" (the scores
    multiplied by a trained scalar)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.scale = torch.nn.Parameter(torch.tensor(0.25))

    def forward(self, x, mask=None):
        b, s, _ = x.shape
        q, k, v = (t.reshape(b, s, HEADS, D // HEADS).transpose(1, 2)
                   for t in self.qkv(x).split(D, dim=-1))
        if self.kind == "weights" or self.kind == "scale":
            scores = q @ k.transpose(-2, -1)
            scores = scores * (self.scale if self.kind == "scale"
                               else (D // HEADS) ** -0.5)
            p = torch.softmax(scores, dim=-1)
            y = (p @ v).transpose(1, 2).reshape(b, s, D)
            return (y, p) if self.kind == "weights" else y
        y = F._scaled_dot_product_attention(q, k, v, mask, 0.0, False,
                                            self.kind == "causal")[0]
        return y.transpose(1, 2).reshape(b, s, D)


def export(model, name, inputs=None, outputs=None, extra=()):
    torch.manual_seed(0)
    x = torch.randn(BATCH, SEQ, D)
    path = os.path.join(OUT, name + ".onnx")
    if inputs is None:
        export_onnx(model, x, path, training=True)
        return
    model.train(True)
    torch.onnx.export(model, (x,) + tuple(extra), path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=inputs,
                      output_names=outputs or ["output"])


if len(sys.argv) > 3:
    # --long SEQ: only long_SEQ.onnx, the causal SDPA model at batch 1,
    # one head of 16 (d_model 16).
    D, HEADS, SEQ, BATCH = 16, 1, int(sys.argv[4]), 1
    export(Sdpa("causal"), "long_%d" % SEQ)
    sys.exit(0)
torch.manual_seed(0)
export(Encoder(False), "encoder")
export(Encoder(True), "encoder_causal")
export(Encoder(False, dropout=0.1), "encoder_dropout")
export(Mha(), "mha")
export(Sdpa("none"), "sdpa")
export(Sdpa("causal"), "sdpa_causal")
export(Sdpa("mask"), "sdpa_mask", ["input", "mask"],
       extra=(torch.randn(SEQ, SEQ),))
export(Sdpa("weights"), "weights", ["input"], ["output", "probabilities"])
export(Sdpa("scale"), "learned_scale")
