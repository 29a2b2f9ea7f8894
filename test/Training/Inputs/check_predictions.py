"""Checks ampc-train's --predict output against the model it exported
(--export-onnx): the regressor y = x . w + b, with w and b read from the
exported ONNX file's initializers. Predictions went through f16 (autocast),
so they agree within 1e-2 relative. Prints "N predictions match the
exported model" or the first that does not (exit status 1)."""

import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    x_path, predictions_path, model_path = sys.argv[1:4]
    x = np.load(x_path)
    predictions = np.load(predictions_path)
    inits = {t.name: numpy_helper.to_array(t)
             for t in onnx.load(model_path).graph.initializer}
    want = x @ inits["w"] + inits["b"]
    if predictions.shape != want.shape or predictions.dtype != np.float32:
        print("predictions %s %s, expected %s float32" % (
            predictions.dtype, predictions.shape, want.shape))
        return 1
    bad = np.abs(predictions - want) > 1e-2 * np.abs(want) + 1e-3
    if bad.any():
        i = int(np.argmax(bad))
        print("prediction %d: %r, the exported model gives %r" % (
            i, float(predictions[i]), float(want[i])))
        return 1
    print("%d predictions match the exported model" % len(predictions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
