"""ampc from Python: compile a model (an ONNX file or a torch module) into a
library and train or run it through the runtime C API.

    import ampc
    model = ampc.compile(net, (x, y), "train.so", loss="cross_entropy")
    for x, y in batches:
        loss = model.train_step(x, y)          # numpy arrays or torch tensors
    net.load_state_dict({k: torch.from_numpy(v)
                         for k, v in model.state_dict().items()})
    model.save_checkpoint("run.ckpt"); model.export_onnx("trained.onnx")

Errors are `ampc.AmpcError` (a RuntimeError) carrying the runtime's or the
compiler's message. docs/python.md has a PyTorch AMP loop and the same loop
with ampc side by side.
"""
import os
import shutil
import subprocess
import tempfile

from .runtime import AMPC_OK, AmpcError, Model, TensorInfo, load_runtime  # noqa: F401

__all__ = ["compile", "export", "Model", "AmpcError", "find_compiler"]


def find_compiler():
    """The `ampc` executable: $AMPC, `ampc` on PATH, or bin/ampc beside the
    runtime named by $AMPC_RUNTIME."""
    if os.environ.get("AMPC"):
        return os.environ["AMPC"]
    found = shutil.which("ampc")
    if found:
        return found
    runtime = os.environ.get("AMPC_RUNTIME")
    if runtime:
        candidate = os.path.join(os.path.dirname(os.path.dirname(
            os.path.realpath(runtime))), "bin", "ampc")
        if os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError("no ampc: set AMPC, put ampc on PATH or set "
                            "AMPC_RUNTIME to an installed prefix's runtime")


def export(module, example_inputs, path, input_names=None,
           output_names=None, opset=17):
    """Exports a torch module with torch.onnx.export as ampc reads it for
    training: training mode (Dropout and BatchNorm as in training), no
    constant folding, so parameters keep their state_dict names. Returns
    `path`."""
    import torch
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    input_names = input_names or ["input%d" % i
                                  for i in range(len(example_inputs))]
    was_training = module.training
    torch.onnx.export(module, tuple(example_inputs), path,
                      input_names=list(input_names),
                      output_names=list(output_names or ["output"]),
                      opset_version=opset, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)
    module.train(was_training)
    return path


def _flag(name, value):
    name = "--" + name.replace("_", "-")
    if value is True:
        return [name]
    if value is False or value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [name + "=" + ",".join(str(v) for v in value)]
    return [name + "=" + str(value)]


def compile(model, example_inputs=None, output=None, *, target=None,
            mode="train", **options):
    """Compiles `model` (a path to an .onnx/.onnxtext file, or a torch
    module exported first with `export` on `example_inputs`, the model's
    inputs only) with ampc and loads the library. `options` are ampc's
    flags with '_' for '-' (precision="bf16", optimizer="sgd", lr=0.1,
    loss="mse", keep_fp32=["op:Softmax"], batch=32, ...); `target` None
    is ampc's default (cuda where a GPU and nvcc are, else cpu). `output` is the
    library's path (default: a temporary folder that lives as long as the
    process). Returns a `Model`; a compile error raises AmpcError with
    ampc's message."""
    folder = None
    if output is None:
        folder = tempfile.mkdtemp(prefix="ampc-python-")
        output = os.path.join(folder, "model.so")
    path = model
    if not isinstance(model, (str, os.PathLike)):
        if example_inputs is None:
            raise ValueError("compiling a torch module needs example_inputs")
        folder = folder or tempfile.mkdtemp(prefix="ampc-python-")
        path = export(model, example_inputs, os.path.join(folder, "model.onnx"))
    command = [find_compiler(), os.fspath(path), "-o", os.fspath(output),
               "--mode=" + mode] + _flag("target", target)
    for name, value in options.items():
        command += _flag(name, value)
    p = subprocess.run(command, capture_output=True, text=True)
    if p.returncode != 0:
        lines = [l for l in p.stderr.splitlines() if "error" in l]
        raise AmpcError(1, lines[0] if lines else p.stderr.strip() or
                        "ampc exited with status %d" % p.returncode)
    return Model(output)
