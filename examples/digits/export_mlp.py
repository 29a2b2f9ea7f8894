#!/usr/bin/python3
"""Exports the digits demo model: an MLP 64-128-128-10 with ReLU.

    /usr/bin/python3 examples/digits/export_mlp.py OUT_DIR

Writes OUT_DIR/digits_mlp.onnx (opset 17) with a symbolic batch dimension
on input "pixels" and output "logits"; bind it when compiling, and train
it on prepare_digits.py's files (scripts/demo does both):
    ampc OUT_DIR/digits_mlp.onnx --batch 64 --lr 2e-3 -o train.so
    ampc-train train.so --inputs OUT_DIR/x_train.npy --labels OUT_DIR/y_train.npy \
        --eval-inputs OUT_DIR/x_test.npy --eval-labels OUT_DIR/y_test.npy --epochs 20
The weights are torch's default initialization under a fixed seed.
"""
import os
import sys

import torch


class DigitsMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 128)
        self.fc3 = torch.nn.Linear(128, 10)

    def forward(self, pixels):
        hidden = torch.relu(self.fc1(pixels))
        hidden = torch.relu(self.fc2(hidden))
        return self.fc3(hidden)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: export_mlp.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = DigitsMlp().eval()
    path = os.path.join(out, "digits_mlp.onnx")
    torch.onnx.export(model, torch.zeros(64, 64), path, opset_version=17,
                      input_names=["pixels"], output_names=["logits"],
                      dynamic_axes={"pixels": {0: "batch"},
                                    "logits": {0: "batch"}})
    print(path)


if __name__ == "__main__":
    main()
