#!/usr/bin/python3
"""Writes the digits demo data set as .npy files for ampc-train.

    /usr/bin/python3 examples/digits/prepare_digits.py OUT_DIR

scikit-learn's bundled copy of the UCI handwritten digits (1797 8x8 images,
no download), split 80/20 with a fixed seed: x_train.npy / x_test.npy
float32 (N, 64) scaled from 0..16 to [0, 1], y_train.npy / y_test.npy int64
(N,) class ids 0..9.
"""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SEED = 0


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: prepare_digits.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=SEED, stratify=y)
    for name, array in [("x_train", x_train), ("y_train", y_train),
                        ("x_test", x_test), ("y_test", y_test)]:
        np.save(os.path.join(out, name + ".npy"), np.ascontiguousarray(array))
    print(f"{out}: {len(x_train)} training and {len(x_test)} test samples")


if __name__ == "__main__":
    main()
