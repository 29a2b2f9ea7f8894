"""ampc-pad-channels under the CUDA execution on the CPU (issue 39).

For two CNNs -- test/Gradcheck/cnn.onnxtext (C 2 and 3, M 3 and 4: both
counts padded to 8) and a torch-exported stride-2 first layer on RGB
images (C 3 padded to 4) -- at fp16 and bf16: the library compiled with
--pad-channels=on (the default) and =off, 3 AdamW training steps on the
same data. The padded terms are exact zeros, so the losses, every
parameter and every state tensor must be the same bits; the report must
say which counts were padded.

Usage: pad_channels.py WORKDIR
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# The training loop channels-last-sim.test compares layouts with (it puts
# the Python module and the checkpoint reader on the path).
from channels_last import train_steps  # noqa: E402


def first_layer_model(path):
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.fc = torch.nn.Linear(8 * 4 * 4, 3)

        def forward(self, x):
            y = torch.relu(self.bn(self.conv(x)))
            return self.fc(torch.flatten(y, 1))

    torch.manual_seed(0)
    torch.onnx.export(Net(), torch.randn(2, 3, 8, 8), path,
                      input_names=["x"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)


def main():
    work = sys.argv[1]
    cnn = os.path.join(work, "cnn.onnxtext")
    text = open(os.path.join(HERE, "..", "..", "..", "Gradcheck",
                             "cnn.onnxtext")).read()
    with open(cnn, "w") as f:
        f.write(text.split("#--- cnn.onnxtext\n", 1)[1])
    first = os.path.join(work, "first.onnx")
    first_layer_model(first)
    failed = False
    for name, model in (("cnn", cnn), ("first", first)):
        for precision in ("fp16", "bf16"):
            results, padded = {}, []
            for pad in ("on", "off"):
                lib = os.path.join(work, "%s-%s-%s.so" % (name, precision, pad))
                report = lib + ".json"
                subprocess.run(["ampc", model, "--target=cuda-sim",
                                "--precision=" + precision,
                                "--pad-channels=" + pad, "--report=" + report,
                                "-o", lib], check=True)
                shapes = json.load(open(report)).get("gemm_shapes", [])
                if pad == "on":
                    padded = sorted(set(
                        part.split(" (X")[0].split(" (the")[0].strip()
                        for s in shapes for part in s.split("; ")
                        if " padded to " in part))
                results[pad] = train_steps(lib, lib + ".ckpt")
            on, off = results["on"], results["off"]
            differ = [k for k in off[1] if on[1].get(k) != off[1][k]] + \
                [k for k in off[2] if on[2].get(k) != off[2][k]]
            ok = bool(padded) and on[0] == off[0] and not differ and \
                set(on[2]) == set(off[2])
            print("%s %s: %s; 3 steps' losses %s, %d parameters and %d state "
                  "tensors %s %s" % (
                      name, precision, ", ".join(padded) or "nothing padded",
                      "equal" if on[0] == off[0] else "DIFFER", len(off[1]),
                      len(off[2]),
                      "bit-identical" if not differ
                      else "differ: " + ", ".join(differ),
                      "ok" if ok else "FAILED"))
            failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
