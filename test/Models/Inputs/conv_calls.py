"""How a torchvision model's convolutions run on the CUDA target (issue 39,
item 2): exports each model as torchvision_models.py builds it (10
classes, batch 2, training mode), emits its CUDA source
(--target=cuda-sim --emit=cuda) and counts, in the source of every entry
(the step and the forward),

  cudnn      the convolution calls (ampc::cuda::convolution: one cuDNN call
             per convolution and direction), against the convolution ops
             of the IR (--emit=mlir: ampc.conv, conv_backward_data,
             conv_backward_weight), which must be as many
  im2col     im2col / col2im launches (the path cuDNN's legacy API cannot
             take)
  loops      host loops over the images of the batch or the groups of a
             convolution

and prints one line per model:

  NAME: cudnn N of N convolution ops, im2col N, loops N

    /usr/bin/python3 test/Models/Inputs/conv_calls.py OUT --models NAME ...
        [--image-size 64] [--ampc ampc]

Exit 1 when a convolution op is not a cuDNN call or a model has an im2col
launch or a loop (the acceptance: one call per convolution and direction,
no per-image or per-group loop).
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torchvision_models as tv  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--models", nargs="+", required=True)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--ampc", default="ampc")
    args = p.parse_args()
    import torch
    from ampc_testing import export_onnx
    os.makedirs(args.out, exist_ok=True)
    failed = False
    for name in args.models:
        onnx_path = os.path.join(args.out, name + ".onnx")
        source = os.path.join(args.out, name + ".cu")
        g = torch.Generator().manual_seed(1)
        size = max(args.image_size, 80) if name == "inception_v3" else \
            args.image_size
        export_onnx(tv.build(name), torch.randn(2, 3, size, size,
                                                generator=g),
                    onnx_path, training=True)
        subprocess.run([args.ampc, onnx_path, "--target=cuda-sim",
                        "--emit=cuda", "-o", source], check=True)
        mlir = os.path.join(args.out, name + ".mlir")
        subprocess.run([args.ampc, onnx_path, "--target=cuda-sim",
                        "--emit=mlir", "-o", mlir], check=True)
        with open(mlir) as f:
            ops = len(re.findall(
                r"= ampc\.(conv|conv_backward_data|conv_backward_weight) ",
                f.read()))
        with open(source) as f:
            text = f.read()
        cudnn = len(re.findall(r"ampc::cuda::convolution\(", text))
        im2col = len(re.findall(r"ampc::cuda::(im2col|col2im)<", text))
        loops = len(re.findall(r"for \(int64_t (image|group)\b", text))
        print("%s: cudnn %d of %d convolution ops, im2col %d, loops %d" %
              (name, cudnn, ops, im2col, loops))
        failed |= im2col > 0 or loops > 0 or cudnn != ops or ops == 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
