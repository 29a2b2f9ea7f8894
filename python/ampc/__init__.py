"""ampc from Python: compile a model (an ONNX file or a torch module) into a
library and train or run it through the runtime C API.

    import ampc
    model = ampc.compile(net, (x,), loss="cross_entropy")  # the model's inputs
    for x, y in batches:
        loss = model.train_step(x, y)          # numpy arrays or torch tensors
    net.load_state_dict({k: torch.from_numpy(v)
                         for k, v in model.state_dict().items()})
    model.save_checkpoint("run.ckpt"); model.export_onnx("trained.onnx")

A torch module trains what torch would train: parameters with
`requires_grad=False` and registered buffers are frozen (`--freeze`), and the
module is left as it was (the export's forward pass changes BatchNorm's
statistics; they are put back). The compiler's warnings and notes arrive as
`ampc.AmpcWarning`s; a failed compile raises `ampc.CompileError`, runtime
failures `ampc.AmpcError` (both RuntimeErrors) with the runtime's message.
docs/python.md has a PyTorch AMP loop and the same loop with ampc side by
side.
"""
from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from typing import (TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional,
                    Sequence, Tuple)

from .runtime import (AMPC_OK, AmpcError, AmpcWarning, Dtype,  # noqa: F401
                      Model, PathLike, Status, TensorInfo, load_runtime)

__all__ = ["compile", "compile_model", "export", "Model", "AmpcError",
           "CompileError", "Status", "Dtype", "compiler_version",
           "compiler_options", "compiler_option_table", "AmpcWarning",
           "find_compiler", "frozen_names"]


class CompileError(AmpcError):
    """ampc refused the model or failed to compile it; the message is the
    compiler's, naming the user's model (never a temporary file)."""


def find_compiler() -> str:
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


class CompilerVersion(NamedTuple):
    """What `ampc --version` says: the version ("0.3.0", CMakeLists.txt's
    project version) and the git revision it was built from."""
    version: str
    revision: str


_versions: Dict[str, CompilerVersion] = {}


def compiler_version(compiler: Optional[str] = None) -> CompilerVersion:
    """The version of `compiler` (default: `find_compiler()`, the ampc
    `compile` runs), read from its --version once per executable."""
    path = compiler or find_compiler()
    if path not in _versions:
        p = subprocess.run([path, "--version"], capture_output=True,
                           text=True)
        m = re.match(r"ampc (\S+) \(git (\S+)\)", p.stdout)
        if p.returncode != 0 or m is None:
            raise RuntimeError("%s --version printed no ampc version: %r" %
                               (path, (p.stdout + p.stderr)[:200]))
        _versions[path] = CompilerVersion(m.group(1), m.group(2))
    return _versions[path]


# ampc.__version__: the version of the ampc this module compiles with
# (compiler_version()), asked when first read, not at import: importing
# ampc runs nothing. Without a compiler there is no __version__
# (AttributeError saying why).
__version__: str

if not TYPE_CHECKING:
    def __getattr__(name):
        if name == "__version__":
            try:
                return compiler_version().version
            except (OSError, RuntimeError) as e:
                raise AttributeError("ampc.__version__ is the ampc "
                                     "compiler's, and %s" % e) from e
        raise AttributeError("module 'ampc' has no attribute %r" % name)


def _module_state(module: Any) -> Tuple[Dict[str, Any], Dict[str, bool]]:
    """What torch.onnx.export may change in `module`: every parameter's and
    buffer's value, and each submodule's `training` flag."""
    tensors = {name: t.detach().clone()
               for name, t in module.state_dict(keep_vars=True).items()}
    flags = {name: m.training for name, m in module.named_modules()}
    return tensors, flags


def _restore_module_state(module: Any,
                          saved: Tuple[Dict[str, Any], Dict[str, bool]]
                          ) -> None:
    import torch
    tensors, flags = saved
    with torch.no_grad():
        for name, t in module.state_dict(keep_vars=True).items():
            if name in tensors:
                t.copy_(tensors[name])
    for name, m in module.named_modules():
        if name in flags:
            m.training = flags[name]


def export(module: Any, example_inputs: Any, path: PathLike,
           input_names: Optional[Sequence[str]] = None,
           output_names: Optional[Sequence[str]] = None, opset: int = 17,
           dynamic_batch: bool = False) -> PathLike:
    """Exports a torch module with torch.onnx.export as ampc reads it for
    training: training mode (Dropout and BatchNorm as in training), no
    constant folding, so parameters keep their state_dict names. The module
    is left as it was: the export's forward pass updates BatchNorm's running
    statistics and counters, which are put back, and every `training` flag
    is restored. dynamic_batch: the leading dimension of every input and
    output is symbolic ("batch"), for ampc's --batch. Returns `path`."""
    import torch
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    input_names = input_names or ["input%d" % i
                                  for i in range(len(example_inputs))]
    output_names = list(output_names or ["output"])
    dynamic_axes = ({n: {0: "batch"} for n in list(input_names) + output_names}
                    if dynamic_batch else None)
    saved = _module_state(module)
    try:
        torch.onnx.export(module, tuple(example_inputs), path,
                          input_names=list(input_names),
                          output_names=output_names,
                          opset_version=opset, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING,
                          dynamic_axes=dynamic_axes)
    finally:
        _restore_module_state(module, saved)
    _restore_buffers_in_file(path, saved[0],
                             [n for n, _ in module.named_buffers()])
    return path


def _restore_buffers_in_file(path: PathLike, tensors: Dict[str, Any],
                             buffers: Sequence[str]) -> None:
    """torch.onnx.export writes the initializers after its forward pass in
    training mode, which moved BatchNorm's running statistics and counted
    a batch: a library compiled from the file would start from statistics
    the module never had. Puts the buffers' values from before the export
    back into the file's initializers of the same names (tensors kept in
    external data files are left alone: torch keeps small ones inline)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    model = onnx.load(os.fspath(path), load_external_data=False)
    wanted = set(buffers)
    changed = False
    for i, initializer in enumerate(model.graph.initializer):
        if (initializer.name not in wanted or initializer.name not in tensors
                or initializer.data_location == onnx.TensorProto.EXTERNAL):
            continue
        before = tensors[initializer.name].cpu().numpy()
        now = numpy_helper.to_array(initializer)
        if now.shape != before.shape or np.array_equal(now, before):
            continue
        model.graph.initializer[i].CopyFrom(numpy_helper.from_array(
            before.astype(now.dtype), initializer.name))
        changed = True
    if changed:
        onnx.save(model, os.fspath(path))


def frozen_names(module: Any) -> List[str]:
    """The state_dict names of `module` that torch's optimizers do not
    train: parameters with requires_grad=False and every buffer (BatchNorm's
    running statistics are buffers too; ampc updates those as torch does)."""
    names = [n for n, p in module.named_parameters() if not p.requires_grad]
    return names + [n for n, _ in module.named_buffers()]


def _glob_escape(name: str) -> str:
    # --freeze takes globs; a state_dict name is matched as it is.
    return re.sub(r"([*?\[\]\\{}])", r"\\\1", name)


def _initializer_names(path: PathLike) -> set[str]:
    import onnx
    return {t.name for t in onnx.load(os.fspath(path),
                                      load_external_data=False)
            .graph.initializer}


def _flag(name: str, value: Any) -> List[str]:
    name = "--" + name.replace("_", "-")
    if value is True:
        return [name]
    if value is False or value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [name + "=" + ",".join(str(v) for v in value)]
    return [name + "=" + str(value)]


def _param_group_flags(groups: Sequence[Dict[str, Any]]) -> List[str]:
    """torch-style param_groups ([{"params": [names or globs], "lr": X,
    "weight_decay": Y, "betas": (B1, B2), "eps": E, "momentum": M,
    "dampening": D}, ...], each setting optional) as ampc's --param-group
    flags, one per name, in order (the first group that names a parameter
    wins)."""
    flags: List[str] = []
    scalars = ("lr", "weight_decay", "eps", "momentum", "dampening")
    for group in groups:
        unknown = set(group) - {"params", "betas"} - set(scalars)
        if unknown:
            raise ValueError("param_groups: %s are not group settings ampc "
                             "takes (params, %s, betas)" %
                             (sorted(unknown), ", ".join(scalars)))
        pairs = [(k, group[k]) for k in scalars if k in group]
        if "betas" in group:
            betas = tuple(group["betas"])
            if len(betas) != 2:
                raise ValueError("param_groups: betas is a pair (beta1, "
                                 "beta2), got %r" % (group["betas"],))
            pairs += [("beta1", betas[0]), ("beta2", betas[1])]
        settings = ",".join("%s=%r" % (k, float(v)) for k, v in pairs)
        params = group.get("params", [])
        if isinstance(params, str):
            params = [params]
        for name in params:
            if not isinstance(name, str):
                raise ValueError("param_groups: 'params' holds names or "
                                 "globs (strings), got %r" % type(name))
            flags.append("--param-group=%s:%s" % (name, settings))
    return flags


# The keywords compile() takes besides ampc's flags, and the flags it
# passes itself (the output, --mode, --target).
_OWN_OPTIONS = frozenset({"param_groups"})
_SET_OPTIONS = frozenset({"mode", "target", "help", "help_hidden",
                          "help_list", "help_list_hidden", "version",
                          "list_options"})
_option_tables: Dict[str, List[Dict[str, Any]]] = {}
_known_options: Dict[str, frozenset[str]] = {}


def compiler_option_table(compiler: Optional[str] = None
                          ) -> List[Dict[str, Any]]:
    """The options `compiler` (default: `find_compiler()`) takes, as its
    `--list-options=json` prints them: one dict per option with "name"
    ("keep-fp32"), "pipeline" (declared once in the compiler's
    PipelineSettings, with "type", "list", "default" and "choices") and
    "help"; read once per executable."""
    path = compiler or find_compiler()
    if path not in _option_tables:
        p = subprocess.run([path, "--list-options=json"],
                           capture_output=True, text=True)
        try:
            table = json.loads(p.stdout) if p.returncode == 0 else None
        except ValueError:
            table = None
        if not table:
            raise RuntimeError("%s --list-options=json listed no options: "
                               "%r" % (path, (p.stdout + p.stderr)[:200]))
        _option_tables[path] = table
    return _option_tables[path]


def compiler_options(compiler: Optional[str] = None) -> frozenset[str]:
    """The options `compiler` (default: `find_compiler()`) takes, as
    compile()'s keywords ("keep_fp32" for --keep-fp32): the names of
    compiler_option_table(), read once per executable."""
    path = compiler or find_compiler()
    if path not in _known_options:
        _known_options[path] = frozenset(
            o["name"].replace("-", "_") for o in compiler_option_table(path))
    return _known_options[path]


def _check_options(options: Dict[str, Any]) -> None:
    """Raises TypeError, as Python does for an unexpected keyword, naming
    each keyword of `options` that is not an option of `compiler` (nor one
    compile() takes itself) and the close matches, before anything runs:
    a misspelled option never reaches the command line. Without
    options, nothing runs."""
    if not options:
        return
    known = (compiler_options() | _OWN_OPTIONS) - _SET_OPTIONS
    # The IR printer's --mlir-* options, which ampc --help says it accepts
    # without listing them.
    unknown = sorted(n for n in options
                     if n not in known and not n.startswith("mlir_"))
    if not unknown:
        return
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(known), n=3)
        parts.append("'%s'%s" % (name, " (did you mean %s?)" % ", ".join(
            "'%s'" % c for c in close) if close else ""))
    raise TypeError("compile() got %s: %s; the keywords are ampc's options "
                    "with '_' for '-' (ampc --help)" % (
                        "an unexpected keyword argument" if len(unknown) == 1
                        else "unexpected keyword arguments", ", ".join(parts)))


def compile_model(model: Any, example_inputs: Any = None,
                  output: Optional[PathLike] = None, *,
                  target: Optional[str] = None, mode: str = "train",
                  **options: Any) -> Model:
    """Compiles `model` (a path to an .onnx/.onnxtext file, or a torch
    module exported first with `export` on `example_inputs`, the model's
    inputs only) with ampc and loads the library. `options` are ampc's
    flags with '_' for '-' (precision="bf16", optimizer="sgd", lr=0.1,
    loss="mse", keep_fp32=["op:Softmax"], batch=32, freeze=["backbone.*"],
    ...; with a torch module, batch=N exports the batch dimension symbolic
    and compiles for N rows; param_groups=[{"params": ["head.*"],
    "lr": 1e-2}, {"params": [...], "weight_decay": 0.0}] as torch's
    param_groups, the parameters no group names taking lr and
    weight_decay); `target` None is ampc's default (cuda where a GPU and nvcc are,
    else cpu). For a torch module, the parameters with requires_grad=False
    and the buffers are frozen (added to `freeze`), and the module is left
    unchanged. `output` is the library's path (default: a temporary file,
    removed once loaded). Returns a `Model`. The compiler's warnings and
    notes are issued as AmpcWarning; a compile error raises CompileError
    with ampc's message. A keyword that is not an ampc option
    (`compiler_options()`) raises TypeError naming it and the close
    matches, before anything runs. `ampc.compile` is this function."""
    _check_options(options)
    if output is not None and b"\0" in os.fsencode(output):
        raise ValueError("compile: the output path %r holds a NUL byte" %
                         (output,))
    folder = tempfile.mkdtemp(prefix="ampc-python-")
    try:
        return _compile(model, example_inputs, output, folder, target, mode,
                        options)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ampc.compile: the name the module has always had (it shadows the builtin
# compile() in `from ampc import *` code; compile_model does not).
compile = compile_model


def _compile(model: Any, example_inputs: Any, output: Optional[PathLike],
             folder: str, target: Optional[str], mode: str,
             options: Dict[str, Any]) -> Model:
    # Without `output`, the library (whose name the runtime's messages use)
    # is named after the module's class or the model's file.
    stem = (type(model).__name__ if not isinstance(model, (str, os.PathLike))
            else os.path.basename(os.fspath(model)).split(".")[0])
    stem = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "model"
    library = output if output is not None else os.path.join(folder,
                                                            stem + ".so")
    path = model
    shown = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
    if shown is None:
        if example_inputs is None:
            raise ValueError("compiling a torch module needs example_inputs")
        # batch=N: the batch dimension is exported symbolic, so that ampc
        # can bind it to N (the example's own size otherwise).
        path = export(model, example_inputs,
                      os.path.join(folder, stem + ".onnx"),
                      dynamic_batch=options.get("batch") is not None)
        shown = "the %s module (exported to ONNX)" % type(model).__name__
        if mode == "train":
            present = _initializer_names(path)
            frozen = [_glob_escape(n) for n in frozen_names(model)
                      if n in present]
            if frozen:
                given = options.get("freeze") or []
                if isinstance(given, str):
                    given = [given]
                options = dict(options, freeze=list(given) + frozen)
    command = [find_compiler(), os.fspath(path), "-o", os.fspath(library),
               "--mode=" + mode] + _flag("target", target)
    options = dict(options)
    command += _param_group_flags(options.pop("param_groups", None) or [])
    for name, value in options.items():
        command += _flag(name, value)
    p = subprocess.run(command, capture_output=True, text=True)
    # The temporary folder is nobody's business: messages name the model.
    messages = [l.replace(os.fspath(path), shown).replace(folder, "<tmp>")
                for l in p.stderr.splitlines() if l.strip()]
    if p.returncode != 0:
        errors = [l for l in messages if l.startswith("error")]
        raise CompileError(Status.ERROR_INVALID_ARGUMENT,
                           "\n".join(errors) if errors else
                           "\n".join(messages) or
                           "ampc exited with status %d" % p.returncode)
    for line in messages:
        warnings.warn(line, AmpcWarning, stacklevel=3)
    loaded = Model(library)
    if not isinstance(model, (str, os.PathLike)):
        # The library starts from the module as the user has it (the ONNX
        # file holds BatchNorm statistics after the export's forward pass,
        # and no batch counters).
        loaded.load_state_dict(model.state_dict(), strict=False)
    return loaded
