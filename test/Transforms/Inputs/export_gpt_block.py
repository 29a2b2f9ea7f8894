"""Exports bench/gpu/models.py's GptBlock (its mask a triu(-inf, 1) buffer)
at a small size, in training mode: usage export_gpt_block.py SRC OUT.onnx
[d heads batch seq]."""
import os
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.join(sys.argv[1], "bench", "gpu"))
sys.path.insert(0, os.path.join(sys.argv[1], "utils", "python"))
import models  # noqa: E402
from ampc_testing import export_onnx  # noqa: E402

d, heads, batch, seq = (int(v) for v in (sys.argv[3:] or [32, 2, 2, 13]))
torch.manual_seed(0)
block = models.GptBlock(d=d, heads=heads, batch=batch, seq=seq)
export_onnx(block, torch.randn(batch, seq, d), sys.argv[2], training=True)
