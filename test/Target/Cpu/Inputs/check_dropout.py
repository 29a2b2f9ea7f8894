"""Checks ampc's Dropout in training mode (dropout-training.test): the
eval-mode library's identity, the training-mode inference library's mask
and scaling, the gradient library's fixed mask and
the training library's per-step masks. Usage: check_dropout.py FOLDER
[--expect-scale S] (S defaults to 1 / (1 - 0.25))."""

import argparse
import os
import sys

import numpy as np

from ampc.runtime import Model


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--expect-scale", type=float, default=1.0 / 0.75)
    args = parser.parse_args()
    x = np.random.default_rng(0).uniform(1.0, 2.0, (64, 64)).astype(np.float32)

    # Eval mode (the default): Dropout is the identity.
    y, mask = Model(os.path.join(args.folder, "eval.so")).infer([x])
    if not np.array_equal(y, x) or not mask.all():
        fail("eval: Dropout is not the identity")
    print("eval: the identity, mask all true")

    infer = Model(os.path.join(args.folder, "infer.so"))
    y, mask = infer.infer([x])
    y2, mask2 = infer.infer([x])
    kept = mask.mean()
    if not 0.73 <= kept <= 0.77:
        fail("infer: kept fraction %.4f, expected about 0.75" % kept)
    expected = np.where(mask, x * np.float32(args.expect_scale), 0)
    if not np.array_equal(y, expected.astype(np.float32)):
        fail("infer: kept values are not x / (1 - ratio)")
    if not np.array_equal(mask, mask2):
        fail("infer: the mask changed between two calls")
    print("infer: kept fraction %.4f, scaled values exact, same mask twice"
          % kept)

    label = np.zeros((64, 64), np.float32)
    grad = Model(os.path.join(args.folder, "grad.so"))
    first = grad.infer([x, label])[2]
    second = grad.infer([x, label])[2]
    if not np.array_equal(first, second):
        fail("gradients: the mask changed between calls")
    print("gradients: same mask on every call")

    train = Model(os.path.join(args.folder, "train.so"))
    masks = []
    for _ in range(3):
        masks.append(train.infer([x, label])[2])
        train.train_step([x, label])
    if any(np.array_equal(masks[i], masks[i + 1]) for i in range(2)):
        fail("train: the mask did not change between steps")
    print("train: new mask each step")


if __name__ == "__main__":
    main()
