# A caller's mistake that mypy finds through the installed package's
# annotations (typed.test): a checkpoint path is a path, not an int.
import ampc

model: ampc.Model = ampc.compile_model("model.onnx")
model.save_checkpoint(3)
