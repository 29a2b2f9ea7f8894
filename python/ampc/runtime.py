"""A ctypes binding of the ampc runtime C API (include/ampc/Runtime/ampc.h).

Loads libampc_runtime.so and wraps one compiled model library in a `Model`:

    with Model("train.so") as model:
        model.inputs, model.outputs, model.parameters  # [TensorInfo]
        outputs = model.infer([x, label])              # [numpy arrays]
        loss, grads = model.gradients([x, label])      # {name: array}
        w = model.get_parameter("fc.weight")
        model.set_parameter("fc.weight", w * 0.5)
        step = model.bind_train_step([x, label], loss)  # for timing loops

Every call that returns a status other than AMPC_OK raises `AmpcError`
carrying the status and `ampc_last_error()`. Tensors travel as numpy arrays;
their dtype is passed to the runtime as it is (never converted here), so the
runtime's own checks see what the caller gave. BF16 has no numpy type: its
elements are raw uint16 bits (a torch.bfloat16 tensor is taken as its
bits). An input compiled with --input-precision=auto may be float16 or
bf16: a float32 array for it is refused (dtype mismatch, naming the input),
not rounded here; round it yourself (`x.astype(np.float16)`, or torch's
`.to(torch.bfloat16)`), to nearest even as the step's own cast would.

The runtime library is, in order: the `runtime` argument, $AMPC_RUNTIME, or
lib/libampc_runtime.so beside the bin/ folder of the `ampc` on PATH (the
build tree's layout).
"""
from __future__ import annotations

import ctypes
import enum
import os
import shutil
import warnings
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List,
                    NamedTuple, Optional, Sequence, Tuple, Union)

import numpy as np

# A path as the calls take it.
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
# An array the calls read: a numpy array, a torch tensor (CPU, or CUDA for
# the *_device calls), a nested list.
ArrayLike = Any
# A numpy array. Only for the type checker: this file also runs alone, as
# the GPU packs' ampc_ctypes.py, beside numpy versions without numpy.typing.
if TYPE_CHECKING:
    import numpy.typing as npt
    Array = npt.NDArray[Any]

class AmpcWarning(UserWarning):
    """A warning or note of the compiler on a compile that succeeded (a
    --keep-fp32 rule that names no node, a folded BatchNorm, an initializer
    frozen because no gradient reaches it), or of the runtime on a load (a
    CPU model on OpenBLAS kernels older than the CPU)."""


# OpenBLAS kernel sets (openblas_get_corename) older than AVX2.
_PRE_AVX2_BLAS_CORES = {
    "katmai", "coppermine", "northwood", "prescott", "banias", "atom",
    "core2", "penryn", "dunnington", "nehalem", "sandybridge", "opteron",
    "opteron_sse3", "barcelona", "bobcat", "bulldozer", "piledriver",
    "steamroller", "excavator", "unknown"}


def _blas_core_for_cpu() -> str:
    """The OPENBLAS_CORETYPE the runtime would choose for this CPU
    (lib/Runtime/BlasCore.cpp), from /proc/cpuinfo's flags; "" if none."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = set()
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return ""
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return ""


_warned_blas_core = False


def _check_blas_core() -> None:
    """Warns once per process when the OpenBLAS a CPU model runs on chose
    kernels older than the CPU (OpenBLAS 0.3.21 does not know newer CPU
    models; NumPy loaded it before the runtime could choose: docs/design.md,
    "OpenBLAS's kernel set")."""
    global _warned_blas_core
    if _warned_blas_core:
        return
    try:
        blas = ctypes.CDLL("libopenblas.so.0",
                           mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        blas.openblas_get_corename.restype = ctypes.c_char_p
        core = blas.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return
    best = _blas_core_for_cpu()
    if not best or core.lower() not in _PRE_AVX2_BLAS_CORES:
        return
    _warned_blas_core = True
    warnings.warn(
        "OpenBLAS runs its %s kernels on a CPU that has %s: the CPU model's "
        "GEMMs run several times slower; set OPENBLAS_CORETYPE=%s in the "
        "environment before Python starts (OPENBLAS_CORETYPE is %s)" % (
            core, "AVX-512" if best != "Haswell" else "AVX2", best,
            os.environ.get("OPENBLAS_CORETYPE", "unset")),
        AmpcWarning, stacklevel=3)


class Status(enum.IntEnum):
    """ampc_status (include/ampc/Runtime/ampc.h): AMPC_<name>."""
    OK = 0
    ERROR_INVALID_ARGUMENT = 1
    ERROR_NOT_FOUND = 2
    ERROR_ABI_MISMATCH = 3
    ERROR_SHAPE_MISMATCH = 4
    ERROR_DTYPE_MISMATCH = 5
    ERROR_UNSUPPORTED = 6
    ERROR_EXECUTION = 7
    ERROR_IO = 8
    ERROR_CORRUPT = 9


class Dtype(enum.IntEnum):
    """ampc_dtype (include/ampc/Runtime/ampc.h): AMPC_DTYPE_<name>, the
    ONNX TensorProto codes."""
    F32 = 1
    U8 = 2
    I8 = 3
    U16 = 4
    I16 = 5
    I32 = 6
    I64 = 7
    BOOL = 9
    F16 = 10
    F64 = 11
    U32 = 12
    U64 = 13
    BF16 = 16


# The C names, for callers that used them (the values are Status's).
AMPC_OK = Status.OK
AMPC_ERROR_INVALID_ARGUMENT = Status.ERROR_INVALID_ARGUMENT
AMPC_ERROR_SHAPE_MISMATCH = Status.ERROR_SHAPE_MISMATCH
AMPC_ERROR_DTYPE_MISMATCH = Status.ERROR_DTYPE_MISMATCH
AMPC_ERROR_UNSUPPORTED = Status.ERROR_UNSUPPORTED

# The numpy dtype that holds the elements of each ampc_dtype.
_NUMPY_OF_DTYPE: Dict[int, "np.dtype[Any]"] = {
    Dtype.F32: np.dtype(np.float32),
    Dtype.U8: np.dtype(np.uint8),
    Dtype.I8: np.dtype(np.int8),
    Dtype.U16: np.dtype(np.uint16),
    Dtype.I16: np.dtype(np.int16),
    Dtype.I32: np.dtype(np.int32),
    Dtype.I64: np.dtype(np.int64),
    Dtype.BOOL: np.dtype(np.bool_),
    Dtype.F16: np.dtype(np.float16),
    Dtype.F64: np.dtype(np.float64),
    Dtype.U32: np.dtype(np.uint32),
    Dtype.U64: np.dtype(np.uint64),
    Dtype.BF16: np.dtype(np.uint16),  # bf16 bits
}
# A uint16 array is u16 unless the tensor it is for is bf16 (_TensorArray).
_DTYPE_OF_NUMPY = {v: Dtype(k) for k, v in sorted(_NUMPY_OF_DTYPE.items(),
                                                  reverse=True)}


class IncompatibleKeys(NamedTuple):
    """What `Model.load_state_dict(strict=False)` could not match."""
    missing_keys: List[str]
    unexpected_keys: List[str]


def _c_path(path: PathLike, call: str) -> bytes:
    """`path` as the bytes the C API takes. A NUL byte would end the C
    string early and name another file (ctypes passes "a\\0b" as "a"), so
    it is refused here, before ctypes sees it."""
    encoded = os.fsencode(path)
    if b"\0" in encoded:
        raise ValueError("%s: the path %r holds a NUL byte" % (call, path))
    return encoded


class AmpcError(RuntimeError):
    """A runtime call failed; `status` is its ampc_status, the message is
    ampc_last_error()."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        # A Status (an IntEnum: compares equal to the C value); an int the
        # runtime returned that ampc.h does not name stays an int.
        self.status: int = status
        try:
            self.status = Status(status)
        except ValueError:
            pass


# ampc_comm's functions (ampc.h). last_error returns a pointer the
# communicator keeps alive (a callback's c_char_p result would not be).
_COMM_START = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p,
                               ctypes.c_int32, ctypes.c_void_p,
                               ctypes.c_uint64, ctypes.c_int32)
_COMM_WAIT = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32)
_COMM_LAST_ERROR = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


class _Comm(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("rank", ctypes.c_int32),
                ("size", ctypes.c_int32),
                ("handle", ctypes.c_void_p),
                ("start", _COMM_START),
                ("wait", _COMM_WAIT),
                ("last_error", _COMM_LAST_ERROR)]


class _ModelOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("num_threads", ctypes.c_int32),
                ("cuda_stream", ctypes.c_void_p),
                ("comm", ctypes.POINTER(_Comm))]


class TorchComm:
    """The ampc_comm of a torch.distributed process group (issue 41): a
    data-parallel library's gradient buckets summed by
    `dist.all_reduce(..., async_op=True)` on a tensor over the library's
    buffer (no copy), waited for by the work's `wait()`. Rank and size are
    the group's. An exception in either becomes the step's error (one
    line naming the rank). torch's gloo backend does not sum BF16: a BF16
    bucket travels as FP32 and is rounded back to nearest even, which for
    two ranks gives the bits libampc_comm_mpi.so gives (each pair widened,
    added, rounded); FP16 is summed by gloo itself (the same rule). The
    library's buffers are host memory, so the group's backend must sum CPU
    tensors (gloo, mpi): an nccl group fails the step with a message."""

    def __init__(self, group: Any = None) -> None:
        import torch
        import torch.distributed as dist
        self._torch, self._dist, self.group = torch, dist, group
        self.backend = str(dist.get_backend(group))
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self._dtypes: Dict[int, Any] = {
            Dtype.F32: torch.float32, Dtype.F64: torch.float64,
            Dtype.F16: torch.float16, Dtype.BF16: torch.bfloat16}
        # request -> (work, the buffer's tensor, the FP32 tensor sent).
        self._pending: Dict[int, Tuple[Any, Any, Any]] = {}
        self._error = ctypes.create_string_buffer(1)
        self._callbacks = (_COMM_START(self._start), _COMM_WAIT(self._wait),
                           _COMM_LAST_ERROR(self._last_error))
        self.struct = _Comm(ctypes.sizeof(_Comm), self.rank, self.size, None,
                            *self._callbacks)

    def _fail(self, what: str, error: BaseException) -> int:
        text = str(error).strip().splitlines()
        self._error = ctypes.create_string_buffer((
            "torch.distributed (%s backend, %d ranks): %s: %s%s" % (
                self.backend, self.size, what,
                type(error).__name__, ": " + text[0] if text else ""))
            .encode(errors="replace"))
        return 1

    def _start(self, handle: Any, request: int, buffer: int, count: int,
               dtype: int) -> int:
        try:
            if self.backend == "nccl":
                raise ValueError(
                    "the library's gradients are in host memory and nccl "
                    "sums CUDA tensors only: give ampc.Model a gloo group "
                    "(process_group=dist.new_group(backend='gloo'))")
            if request in self._pending:
                raise ValueError("request %d started twice" % request)
            if dtype not in self._dtypes:
                raise ValueError("no torch dtype for ampc dtype %d" % dtype)
            kind = self._dtypes[dtype]
            width = self._torch.tensor([], dtype=kind).element_size()
            raw = (ctypes.c_uint8 * (count * width)).from_address(buffer)
            tensor = self._torch.frombuffer(raw, dtype=kind)
            sent = tensor
            if kind == self._torch.bfloat16 and self.backend == "gloo":
                sent = tensor.float()
            work = self._dist.all_reduce(sent, group=self.group,
                                         async_op=True)
            self._pending[request] = (work, tensor, sent)
            return 0
        except BaseException as error:  # a callback must not raise
            return self._fail("all_reduce of request %d" % request, error)

    def _wait(self, handle: Any, request: int) -> int:
        try:
            if request not in self._pending:
                raise ValueError("request %d never started" % request)
            work, tensor, sent = self._pending.pop(request)
            work.wait()
            if sent is not tensor:
                tensor.copy_(sent)  # FP32 to BF16, to nearest even
            return 0
        except BaseException as error:
            return self._fail("wait for request %d" % request, error)

    def _last_error(self, handle: Any) -> int:
        return ctypes.addressof(self._error)


def _process_group_comm(process_group: Any) -> Optional[TorchComm]:
    """The communicator `Model(process_group=...)` gives the runtime: the
    group's; for None the default group's when torch.distributed is
    initialized (torch is never imported here for it); for False none."""
    import sys
    if process_group is False:
        return None
    if process_group is None:
        dist = sys.modules.get("torch.distributed")
        if dist is None or not dist.is_available() or \
                not dist.is_initialized():
            return None
    return TorchComm(process_group)


class _ModelInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("target", ctypes.c_char_p),
                ("precision", ctypes.c_char_p),
                ("mode", ctypes.c_char_p),
                ("num_inputs", ctypes.c_int32),
                ("num_outputs", ctypes.c_int32),
                ("num_parameters", ctypes.c_int32)]


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("dtype", ctypes.c_int32),
                ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64))]


class _Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32),
                ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("data", ctypes.c_void_p),
                ("size_bytes", ctypes.c_size_t)]


# What a model says about one input, output or parameter. `dtype` is the
# numpy dtype that holds its elements, `ampc_dtype` the runtime's code.
class TensorInfo(NamedTuple):
    name: str
    # None for an ampc_dtype numpy has no type for.
    dtype: Any  # np.dtype
    ampc_dtype: int
    shape: Tuple[int, ...]


class ModelInfo(NamedTuple):
    name: str
    target: str
    precision: str
    mode: str


class _TrainingInfo(ctypes.Structure):
    _fields_ = [("optimizer", ctypes.c_char_p),
                ("hyperparameters", ctypes.c_char_p),
                ("loss_scaling", ctypes.c_char_p),
                ("num_labels", ctypes.c_int32)]


class _ScalerState(ctypes.Structure):
    _fields_ = [("scale", ctypes.c_float),
                ("growth_tracker", ctypes.c_int32),
                ("steps", ctypes.c_int64),
                ("skipped_steps", ctypes.c_int64)]


def _find_runtime() -> str:
    if os.environ.get("AMPC_RUNTIME"):
        return os.environ["AMPC_RUNTIME"]
    ampc = shutil.which("ampc")
    if not ampc:
        raise FileNotFoundError("no libampc_runtime.so: pass runtime=, set "
                                "AMPC_RUNTIME, or put ampc on PATH")
    bin_dir = os.path.dirname(os.path.realpath(ampc))
    return os.path.join(os.path.dirname(bin_dir), "lib",
                        "libampc_runtime.so")


_runtimes: Dict[str, ctypes.CDLL] = {}


def load_runtime(path: Optional[PathLike] = None) -> ctypes.CDLL:
    """The runtime library at `path` (see the module's docstring), loaded
    once, with the signatures of the calls this binding makes."""
    where = os.path.realpath(os.fsdecode(path or _find_runtime()))
    if where in _runtimes:
        return _runtimes[where]
    lib = ctypes.CDLL(where)
    status = ctypes.c_int32
    model_p = ctypes.c_void_p
    signatures: Dict[str, Tuple[Any, List[Any]]] = {
        "ampc_status_string": (ctypes.c_char_p, [status]),
        "ampc_last_error": (ctypes.c_char_p, []),
        "ampc_runtime_abi_version": (ctypes.c_uint32, []),
        "ampc_model_options_init": (None, [ctypes.POINTER(_ModelOptions)]),
        "ampc_model_load": (status, [ctypes.c_char_p,
                                     ctypes.POINTER(_ModelOptions),
                                     ctypes.POINTER(model_p)]),
        "ampc_model_load_entry": (status, [ctypes.c_char_p, ctypes.c_char_p,
                                           ctypes.POINTER(_ModelOptions),
                                           ctypes.POINTER(model_p)]),
        "ampc_model_release": (None, [model_p]),
        "ampc_model_describe": (status, [model_p,
                                         ctypes.POINTER(_ModelInfo)]),
        "ampc_model_input_info": (status, [model_p, ctypes.c_int32,
                                           ctypes.POINTER(_TensorInfo)]),
        "ampc_model_output_info": (status, [model_p, ctypes.c_int32,
                                            ctypes.POINTER(_TensorInfo)]),
        "ampc_model_parameter_info": (status, [model_p, ctypes.c_int32,
                                               ctypes.POINTER(_TensorInfo)]),
        "ampc_model_num_buffers": (status, [model_p,
                                            ctypes.POINTER(ctypes.c_int32)]),
        "ampc_model_buffer_info": (status, [model_p, ctypes.c_int32,
                                            ctypes.POINTER(_TensorInfo)]),
        "ampc_model_get_buffer": (status, [model_p, ctypes.c_int32,
                                           ctypes.POINTER(_Tensor)]),
        "ampc_model_set_buffer": (status, [model_p, ctypes.c_int32,
                                           ctypes.POINTER(_Tensor)]),
        "ampc_model_infer": (status, [model_p, ctypes.POINTER(_Tensor),
                                      ctypes.c_int32, ctypes.POINTER(_Tensor),
                                      ctypes.c_int32]),
        "ampc_model_get_parameter": (status, [model_p, ctypes.c_int32,
                                              ctypes.POINTER(_Tensor)]),
        "ampc_model_set_parameter": (status, [model_p, ctypes.c_int32,
                                              ctypes.POINTER(_Tensor)]),
        "ampc_model_num_gradients": (status, [model_p,
                                              ctypes.POINTER(ctypes.c_int32)]),
        "ampc_model_data_parallel": (status, [
            model_p, ctypes.POINTER(ctypes.c_int32),
            ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_uint64)]),
        "ampc_model_gradient_info": (status, [model_p, ctypes.c_int32,
                                              ctypes.POINTER(ctypes.c_int32)]),
        "ampc_model_gradients": (status, [model_p, ctypes.POINTER(_Tensor),
                                          ctypes.c_int32,
                                          ctypes.POINTER(_Tensor),
                                          ctypes.POINTER(_Tensor),
                                          ctypes.c_int32]),
        "ampc_model_train_step": (status, [model_p, ctypes.POINTER(_Tensor),
                                           ctypes.c_int32,
                                           ctypes.POINTER(_Tensor)]),
        "ampc_model_train_step_rows": (status, [
            model_p, ctypes.POINTER(_Tensor), ctypes.c_int32,
            ctypes.POINTER(_Tensor), ctypes.c_int64]),
        "ampc_model_synchronize": (status, [model_p]),
        "ampc_model_train_step_device": (status, [
            model_p, ctypes.POINTER(_Tensor), ctypes.c_int32,
            ctypes.POINTER(_Tensor)]),
        "ampc_model_train_step_rows_device": (status, [
            model_p, ctypes.POINTER(_Tensor), ctypes.c_int32,
            ctypes.POINTER(_Tensor), ctypes.c_int64]),
        "ampc_model_infer_device": (status, [
            model_p, ctypes.POINTER(_Tensor), ctypes.c_int32,
            ctypes.POINTER(_Tensor), ctypes.c_int32]),
        "ampc_model_wait_stream": (status, [model_p, ctypes.c_void_p]),
        "ampc_model_training_info": (status, [
            model_p, ctypes.POINTER(_TrainingInfo)]),
        "ampc_model_get_learning_rate": (status, [
            model_p, ctypes.POINTER(ctypes.c_float)]),
        "ampc_model_set_learning_rate": (status, [model_p, ctypes.c_float]),
        "ampc_model_get_scaler_state": (status, [
            model_p, ctypes.POINTER(_ScalerState)]),
        "ampc_model_set_scaler_state": (status, [
            model_p, ctypes.POINTER(_ScalerState)]),
        "ampc_model_save_checkpoint": (status, [model_p, ctypes.c_char_p]),
        "ampc_model_load_checkpoint": (status, [model_p, ctypes.c_char_p]),
        "ampc_model_export_onnx": (status, [model_p, ctypes.c_char_p]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    _runtimes[where] = lib
    return lib


def _host_numpy(a: ArrayLike) -> ArrayLike:
    """A torch CPU/CUDA tensor as a numpy array on the host (other values as
    they are). numpy has no bfloat16: a torch.bfloat16 tensor becomes its
    raw bits as uint16, the form the module takes bf16 in."""
    if not hasattr(a, "detach"):
        return a
    a = a.detach().cpu()
    import torch  # the caller already uses it
    if a.dtype == torch.bfloat16:
        return a.contiguous().view(torch.int16).numpy().view(np.uint16)
    return a.numpy()


def _shape_text(shape: Sequence[int]) -> str:
    return "[%s]" % ", ".join(str(d) for d in shape)


def _check_array(a: ArrayLike, info: TensorInfo, label: str) -> None:
    """Raises AmpcError as the runtime would when `a` (an array or a nested
    list) cannot be the tensor `info`; looks at the shape and dtype only,
    never copies."""
    shape = tuple(a.shape) if hasattr(a, "shape") else np.shape(a)
    if tuple(shape) != tuple(info.shape):
        raise AmpcError(Status.ERROR_SHAPE_MISMATCH, (
            "%s has shape %s, the model expects %s (shape mismatch)" %
            (label, _shape_text(shape), _shape_text(info.shape))))
    dtype = getattr(a, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype != info.dtype:
        raise AmpcError(Status.ERROR_DTYPE_MISMATCH, (
            "%s has dtype %s, the model expects %s (dtype mismatch)" %
            (label, dtype, info.dtype)))


def _converted(value: ArrayLike, info: TensorInfo, label: str,
               any_dtype: bool = False) -> Array:
    """`value` as an array of the tensor's dtype: a float array of another
    float dtype is converted (any dtype with `any_dtype`), others are left
    for the runtime to check. A finite value that the tensor's dtype cannot
    hold (2.7e40 in float32 is inf) is refused with its position rather than
    stored as inf."""
    source = np.asarray(_host_numpy(value))
    _check_array(source, info._replace(dtype=source.dtype), label)
    if source.dtype == info.dtype or not (
            any_dtype or (source.dtype.kind == "f" and info.dtype.kind == "f")):
        return source
    with np.errstate(over="ignore", invalid="ignore"):
        converted = source.astype(info.dtype, copy=False)
    if source.dtype.kind == "f" and info.dtype.kind == "f":
        lost = np.isfinite(source) & ~np.isfinite(converted)
        if lost.any():
            where = tuple(int(i) for i in np.argwhere(lost)[0])
            raise AmpcError(Status.ERROR_INVALID_ARGUMENT, (
                "%s: element %s (%r) does not fit %s (it would be %s)" %
                (label, list(where), float(source[where]), info.dtype,
                 float(converted[where]))))
    return converted


class _TensorArray:
    """ampc_tensor views of numpy arrays, kept alive with the arrays and
    shapes they point into."""

    def __init__(self, arrays: Iterable[ArrayLike],
                 infos: Iterable[TensorInfo] = (),
                 kind: str = "tensor") -> None:
        """`infos`: the TensorInfo of each array's tensor, where known; an
        array whose numpy dtype stores the tensor's dtype (uint16 for bf16)
        takes the tensor's dtype. An array with a known tensor is checked
        against it (shape, then dtype) before anything is copied: a
        broadcast view of billions of rows is refused, not made contiguous
        first. `kind` names the tensors in messages ("input", ...)."""
        infos = list(infos)
        arrays = [_host_numpy(a) for a in arrays]
        for i, (a, info) in enumerate(zip(arrays, infos)):
            _check_array(a, info, "%s %d ('%s')" % (kind, i, info.name))
        # np.require keeps rank 0 (np.ascontiguousarray makes it rank 1).
        self.arrays = [np.require(a, requirements="C") for a in arrays]
        self.shapes = [(ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
                       for a in self.arrays]
        self.tensors = (_Tensor * max(len(self.arrays), 1))()
        for i, (t, a, shape) in enumerate(zip(self.tensors, self.arrays,
                                              self.shapes)):
            if a.dtype not in _DTYPE_OF_NUMPY:
                raise TypeError("ampc has no dtype for numpy %s" % a.dtype)
            t.dtype = _DTYPE_OF_NUMPY[a.dtype]
            if i < len(infos) and \
                    _NUMPY_OF_DTYPE.get(infos[i].ampc_dtype) == a.dtype:
                t.dtype = infos[i].ampc_dtype
            t.rank = a.ndim
            t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
            t.data = a.ctypes.data
            t.size_bytes = a.nbytes

    def pointer(self, index: int = 0) -> Any:
        if not self.arrays:
            return None
        return ctypes.pointer(self.tensors[index])


def _on_device(x: Any) -> bool:
    """Whether `x` is a device array (a torch CUDA tensor, CuPy, Numba:
    anything with __cuda_array_interface__)."""
    return hasattr(x, "__cuda_array_interface__")


class _DeviceTensorArray:
    """ampc_tensor views of device arrays (__cuda_array_interface__,
    version 2 or 3), without a copy: each must be C-contiguous with the
    model's shape and dtype. `streams`: the producers' streams the
    interface names (version 3), which the model's stream must wait for."""

    def __init__(self, arrays: Iterable[Any], infos: Sequence[TensorInfo],
                 kind: str) -> None:
        self.arrays = list(arrays)  # kept alive until the call is done
        self.shapes: List[Any] = []
        self.streams: List[int] = []
        self.tensors = (_Tensor * max(len(self.arrays), 1))()
        for i, (a, info) in enumerate(zip(self.arrays, infos)):
            label = "%s %d ('%s')" % (kind, i, info.name)
            if not _on_device(a):
                raise AmpcError(Status.ERROR_INVALID_ARGUMENT, (
                    "%s is not a device array (no __cuda_array_interface__); "
                    "pass every tensor of the call on the device, or none"
                    % label))
            face = a.__cuda_array_interface__
            shape = tuple(face["shape"])
            if shape != tuple(info.shape):
                raise AmpcError(Status.ERROR_SHAPE_MISMATCH, (
                    "%s has shape %s, the model expects %s (shape mismatch)"
                    % (label, _shape_text(shape), _shape_text(info.shape))))
            dtype = np.dtype(face["typestr"])
            # torch gives no typestr for bfloat16: a bf16 device tensor
            # comes as its bits, t.view(torch.int16).
            if info.ampc_dtype == Dtype.BF16 and dtype == np.dtype(np.int16):
                dtype = info.dtype
            if dtype != info.dtype:
                raise AmpcError(Status.ERROR_DTYPE_MISMATCH, (
                    "%s has dtype %s, the model expects %s (dtype mismatch)"
                    % (label, dtype, info.dtype)))
            # Row-major strides; a dimension of one element may have any.
            strides = face.get("strides")
            dense = [dtype.itemsize] * len(shape)
            for k in range(len(shape) - 2, -1, -1):
                dense[k] = dense[k + 1] * shape[k + 1]
            if strides is not None and any(
                    s != d for s, d, n in zip(strides, dense, shape) if n > 1):
                raise AmpcError(Status.ERROR_INVALID_ARGUMENT, (
                    "%s is not C-contiguous (strides %s); make it "
                    "contiguous on the device first" % (label, tuple(strides))))
            stream = face.get("stream")
            if stream is not None and stream not in self.streams:
                self.streams.append(stream)
            shape_array = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            self.shapes.append(shape_array)
            t = self.tensors[i]
            t.dtype = info.ampc_dtype
            t.rank = len(shape)
            t.shape = ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64))
            t.data = face["data"][0]
            t.size_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize

    def pointer(self, index: int = 0) -> Any:
        if not self.arrays:
            return None
        return ctypes.pointer(self.tensors[index])


def _device_empty(like: Any, info: TensorInfo) -> Any:
    """A device array for `info` beside the device array `like`: a torch
    tensor on its device when `like` is one; None otherwise (the caller
    gives the buffer)."""
    if type(like).__module__.split(".")[0] != "torch":
        return None
    import torch  # only when the caller already uses it
    dtype = torch.from_numpy(np.empty(0, info.dtype)).dtype
    return torch.empty(info.shape, dtype=dtype, device=like.device)


class Model:
    """One loaded model library (one handle: its own parameters and state).

    `num_threads`: the threads a CPU library runs each call on (0: every
    core the process may run on; 1: the calling thread); the results are
    the same bits whatever the count. Ignored by CUDA libraries."""

    def __init__(self, path: PathLike, runtime: Optional[PathLike] = None,
                 num_threads: int = 0, cuda_stream: Optional[int] = None,
                 entry: Optional[str] = None,
                 process_group: Any = None) -> None:
        """`process_group`: a data-parallel library (--data-parallel)
        averages its gradients over this torch.distributed group
        (TorchComm); None, the default, takes the default group when
        torch.distributed is initialized (and otherwise mpirun's job, or
        none); False trains alone. A library compiled without
        --data-parallel ignores the default and refuses an explicit
        group of more than one rank."""
        self._lib = load_runtime(runtime)
        self._handle: Optional[ctypes.c_void_p] = None
        self._pending: List[Any] = []  # queued steps, their buffers kept alive
        options = _ModelOptions()
        self._lib.ampc_model_options_init(ctypes.byref(options))
        options.num_threads = num_threads
        # A CUDA model runs on this cudaStream_t (an int handle) instead of
        # its own.
        options.cuda_stream = cuda_stream
        # Kept with the model: the runtime calls it until `close`.
        self._comm = _process_group_comm(process_group)
        if self._comm is not None:
            options.comm = ctypes.pointer(self._comm.struct)
        handle = ctypes.c_void_p()
        # `entry`: one model of a library that holds several (ampc
        # --symbol-suffix); None: the library's only model.
        self._check(self._lib.ampc_model_load_entry(
            _c_path(path, "ampc_model_load"),
            entry.encode() if entry else None,
            ctypes.byref(options), ctypes.byref(handle)))
        self._handle = handle
        info = _ModelInfo()
        self._check(self._lib.ampc_model_describe(handle, ctypes.byref(info)))
        self.info = ModelInfo(info.name.decode(), info.target.decode(),
                              info.precision.decode(), info.mode.decode())
        if self.info.target == "cpu":
            _check_blas_core()
        self.inputs = self._describe(self._lib.ampc_model_input_info,
                                     info.num_inputs)
        self.outputs = self._describe(self._lib.ampc_model_output_info,
                                      info.num_outputs)
        self.parameters = self._describe(self._lib.ampc_model_parameter_info,
                                         info.num_parameters)
        # The model's buffers (BatchNorm's statistics and counters).
        count = ctypes.c_int32()
        self._check(self._lib.ampc_model_num_buffers(handle,
                                                     ctypes.byref(count)))
        self.buffers = self._describe(self._lib.ampc_model_buffer_info,
                                      count.value)
        # Which parameter each gradient belongs to; None for a library that
        # computes no gradients (compiled for inference).
        self.gradient_parameters = self._gradient_parameters()
        self._labels = self.num_labels()  # asked once, not per infer
        if process_group is not None and self._comm is not None \
                and self._comm.size > 1 and \
                self.data_parallel()["world_size"] == 1:
            self.close()
            raise ValueError(
                "'%s' was compiled without --data-parallel: it cannot train "
                "on the process group given (compile it with "
                "--data-parallel)" % os.fsdecode(path))

    # --- lifetime ---------------------------------------------------------

    def close(self) -> None:
        if self._handle is not None:
            self._lib.ampc_model_release(self._handle)
            self._handle = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_lib", None) is not None:
            self.close()

    # --- description ------------------------------------------------------

    def _check(self, status: int) -> None:
        if status != Status.OK:
            name = self._lib.ampc_status_string(status).decode()
            raise AmpcError(status, "%s (%s)" % (
                self._lib.ampc_last_error().decode(), name))

    def _describe(self, call: Any, count: int) -> List[TensorInfo]:
        result: List[TensorInfo] = []
        for i in range(count):
            info = _TensorInfo()
            self._check(call(self._handle, i, ctypes.byref(info)))
            shape = tuple(info.shape[d] for d in range(info.rank))
            result.append(TensorInfo(info.name.decode(),
                                     _NUMPY_OF_DTYPE.get(info.dtype),
                                     info.dtype, shape))
        return result

    def _gradient_parameters(self) -> Optional[List[int]]:
        count = ctypes.c_int32()
        status = self._lib.ampc_model_num_gradients(self._handle,
                                                    ctypes.byref(count))
        if status == Status.ERROR_UNSUPPORTED:
            # No gradients entry: an inference library, or one compiled
            # with an optimizer. The runtime's message says which.
            self._no_gradients = self._lib.ampc_last_error().decode() \
                .replace("ampc_model_num_gradients", "ampc_model_gradients")
            return None
        self._check(status)
        result = []
        for g in range(count.value):
            index = ctypes.c_int32()
            self._check(self._lib.ampc_model_gradient_info(
                self._handle, g, ctypes.byref(index)))
            result.append(index.value)
        return result

    @staticmethod
    def _index_in(infos: Sequence[TensorInfo], key: Union[int, str],
                  kind: str) -> int:
        """The index of a tensor of `infos` given by index or by name."""
        if isinstance(key, int):
            return key
        for i, info in enumerate(infos):
            if info.name == key:
                return i
        raise KeyError("the model has no %s '%s'" % (kind, key))

    def parameter_index(self, parameter: Union[int, str]) -> int:
        """The index of a parameter given by index or by name."""
        return self._index_in(self.parameters, parameter, "parameter")

    def _input_list(self, inputs: Any) -> List[ArrayLike]:
        """Inputs as a list in the model's order, from a list or a dict keyed
        by input name, or (from a call's arguments) a tuple of arrays or one
        list or dict. NumPy arrays and torch CPU tensors are passed without
        a copy when C-contiguous."""
        if isinstance(inputs, tuple) and len(inputs) == 1 and \
                isinstance(inputs[0], (list, tuple, dict)):
            inputs = inputs[0]
        if isinstance(inputs, dict):
            missing = [i.name for i in self.inputs if i.name not in inputs]
            if missing:
                raise KeyError("missing inputs: %s" % ", ".join(missing))
            return [inputs[i.name] for i in self.inputs]
        return list(inputs)

    @staticmethod
    def _empty(info: TensorInfo) -> Array:
        return np.empty(info.shape, info.dtype)

    # --- running ----------------------------------------------------------

    def infer(self, *arrays: Any) -> List[Any]:
        """The model's outputs on `inputs` (arrays in input order, a list of
        them, or a dict by name), as a list of numpy arrays, in eval mode. A
        training library given its data inputs only (no labels) returns the
        model's outputs without the loss (its labels are zeros). Device
        arrays (torch CUDA tensors) take `infer_device`."""
        inputs = self._input_list(arrays)
        if inputs and _on_device(inputs[0]) and \
                len(inputs) == len(self.inputs):
            return self.infer_device(inputs)
        labels = self._labels
        model_only = labels and len(inputs) == len(self.inputs) - labels
        rows = self._partial_batch(inputs)
        if rows is not None:
            if labels and not model_only:
                raise AmpcError(Status.ERROR_SHAPE_MISMATCH, (
                    "infer: a partial batch of %d rows with labels: the loss "
                    "would count the padding; pass the inputs without labels "
                    "for the outputs" % rows))
            inputs = [self._pad(x, info) for x, info in
                      zip(inputs, self.inputs)]
        if model_only:
            inputs = inputs + [np.zeros(i.shape, i.dtype)
                               for i in self.inputs[len(inputs):]]
        outputs = [self._empty(o) for o in self.outputs]
        self.bind_infer(inputs, outputs)()
        outputs = outputs[1:] if model_only else outputs
        if rows is not None:
            batch = self.inputs[0].shape[0]
            outputs = [o[:rows] if o.ndim and o.shape[0] == batch else o
                       for o in outputs]
        return outputs

    def _partial_batch(self, inputs: Sequence[ArrayLike]) -> Optional[int]:
        """The rows of a partial last batch: every given input has fewer
        rows than the model's batch (the leading dimension all inputs
        share) and otherwise the model's shape; None otherwise."""
        if not self.inputs or not self.inputs[0].shape:
            return None
        batch = self.inputs[0].shape[0]
        rows = set()
        for x, info in zip(inputs, self.inputs):
            shape = tuple(getattr(x, "shape", ()))
            if not info.shape or info.shape[0] != batch or not shape or \
                    shape[1:] != tuple(info.shape[1:]):
                return None
            rows.add(shape[0])
        if len(rows) != 1:
            return None
        (n,) = rows
        return n if 0 < n < batch else None

    @staticmethod
    def _pad(x: ArrayLike, info: TensorInfo, copy_first: bool = False
             ) -> Array:
        """`x` with rows appended up to the model's batch, zeros or (with
        `copy_first`, for training) copies of its first row; each output
        row depends on its own input row in eval mode (BatchNorm on its
        running statistics), so the padding is dropped from the outputs."""
        x = np.asarray(_host_numpy(x))
        count = info.shape[0] - x.shape[0]
        pad = np.repeat(x[:1], count, axis=0) if copy_first else \
            np.zeros((count,) + x.shape[1:], x.dtype)
        return np.ascontiguousarray(np.concatenate([x, pad]))

    def num_labels(self) -> int:
        """The label inputs of a training library (the last inputs); 0 for
        an inference library."""
        if self.info.mode != "train":
            return 0
        try:
            return self.training_info()[3]
        except AmpcError:
            return 0

    def bind_infer(self, inputs: Any, outputs: Sequence[Array]
                   ) -> Callable[[], None]:
        """ampc_model_infer on fixed arrays, as a function of no arguments
        that writes `outputs` (C-contiguous arrays, one per model output) in
        place: the runtime call alone, for a benchmark's timing loop."""
        ins = _TensorArray(self._input_list(inputs), self.inputs, "input")
        outs = _TensorArray(self._in_place(outputs), self.outputs, "output")

        def run() -> None:
            self._check(self._lib.ampc_model_infer(
                self._handle, ins.pointer(), len(ins.arrays), outs.pointer(),
                len(outs.arrays)))
        return run

    @staticmethod
    def _in_place(arrays: Sequence[Array]) -> Sequence[Array]:
        for a in arrays:
            if not a.flags.c_contiguous:
                raise ValueError("an array the runtime writes must be "
                                 "C-contiguous")
        return arrays

    def _read(self, call: Any, infos: Sequence[TensorInfo], index: int
              ) -> Array:
        out = _TensorArray([self._empty(infos[index])], [infos[index]])
        self._check(call(self._handle, index, out.pointer()))
        return out.arrays[0]

    def _write(self, call: Any, infos: Sequence[TensorInfo], index: int,
               value: ArrayLike, kind: str) -> None:
        label = "%s %d ('%s')" % (kind, index, infos[index].name)
        value = _TensorArray([_converted(value, infos[index], label)],
                             [infos[index]], kind)
        self._check(call(self._handle, index, value.pointer()))

    def get_parameter(self, parameter: Union[int, str]) -> Array:
        """The current value of a parameter (index or name)."""
        return self._read(self._lib.ampc_model_get_parameter, self.parameters,
                          self.parameter_index(parameter))

    def set_parameter(self, parameter: Union[int, str], value: ArrayLike
                      ) -> None:
        """Replaces a parameter's (index or name) value with `value`."""
        self._write(self._lib.ampc_model_set_parameter, self.parameters,
                    self.parameter_index(parameter), value, "parameter")

    def get_buffer(self, buffer: Union[int, str]) -> Array:
        """The current value of a buffer (index or name): BatchNorm's
        running statistics and batch counters, which the steps update."""
        return self._read(self._lib.ampc_model_get_buffer, self.buffers,
                          self._index_in(self.buffers, buffer, "buffer"))

    def set_buffer(self, buffer: Union[int, str], value: ArrayLike) -> None:
        """Replaces a buffer's (index or name) value with `value`."""
        self._write(self._lib.ampc_model_set_buffer, self.buffers,
                    self._index_in(self.buffers, buffer, "buffer"), value,
                    "buffer")

    def gradients(self, inputs: Any) -> Tuple[Array, Dict[str, Array]]:
        """Forward and backward on `inputs`: (loss, {parameter name:
        gradient}), the dict in the library's gradient order. The parameters
        are left unchanged."""
        if self.gradient_parameters is None:
            unsupported = Status.ERROR_UNSUPPORTED
            raise AmpcError(unsupported, "%s (%s)" % (
                self._no_gradients,
                self._lib.ampc_status_string(unsupported).decode()))
        ins = _TensorArray(self._input_list(inputs), self.inputs, "input")
        loss = _TensorArray([self._empty(self.outputs[0])], self.outputs,
                            "output")
        grads = _TensorArray([self._empty(self.parameters[p])
                              for p in self.gradient_parameters],
                             [self.parameters[p]
                              for p in self.gradient_parameters])
        self._check(self._lib.ampc_model_gradients(
            self._handle, ins.pointer(), len(ins.arrays), loss.pointer(),
            grads.pointer(), len(grads.arrays)))
        names = [self.parameters[p].name for p in self.gradient_parameters]
        return loss.arrays[0], dict(zip(names, grads.arrays))

    # --- training ---------------------------------------------------------

    def train_step(self, *arrays: Any, wait: bool = True) -> Any:
        """One training step on `inputs` (arrays in input order, labels
        last, a list of them, or a dict by name); the loss, a 0-d array.
        With wait=False on a CUDA model the step is only queued: the
        returned array holds the loss after `synchronize()`. Device arrays
        (torch CUDA tensors) take `train_step_device`, without a copy
        through the host; the loss is then a device array too."""
        inputs = self._input_list(arrays)
        if inputs and _on_device(inputs[0]):
            return self.train_step_device(inputs, wait=wait)
        loss = self._empty(self.outputs[0])
        rows = self._partial_batch(inputs)
        if rows is not None:
            # A partial last batch: padded with copies of its first row
            # (finite values) and trained as a batch of `rows` rows; the
            # runtime refuses a library whose rows are not independent
            # (BatchNorm's batch statistics), naming drop_last.
            inputs = [self._pad(x, info, copy_first=True)
                      for x, info in zip(inputs, self.inputs)]
        step = self.bind_train_step(inputs, loss, rows)
        step()
        # On a CUDA model the loss reaches its buffer with the stream.
        if wait:
            self.synchronize()
        else:
            self._pending.append(step)
        return loss

    def bind_train_step(self, inputs: Any, loss: Array,
                        rows: Optional[int] = None) -> Callable[[], None]:
        """ampc_model_train_step on fixed arrays, as a function of no
        arguments that writes the loss into `loss` (a C-contiguous array of
        the loss's shape) and does not wait for a CUDA model's stream: the
        runtime call alone, for a benchmark's timing loop. With `rows`, the
        inputs are a full batch of which the first `rows` rows are real
        (ampc_model_train_step_rows)."""
        ins = _TensorArray(self._input_list(inputs), self.inputs, "input")
        out = _TensorArray(self._in_place([loss]), self.outputs, "output")

        def run() -> None:
            if rows is None:
                self._check(self._lib.ampc_model_train_step(
                    self._handle, ins.pointer(), len(ins.arrays),
                    out.pointer()))
            else:
                self._check(self._lib.ampc_model_train_step_rows(
                    self._handle, ins.pointer(), len(ins.arrays),
                    out.pointer(), rows))
        return run

    def train_step_device(self, inputs: Any, loss: Any = None,
                          wait: bool = True, rows: Optional[int] = None
                          ) -> Any:
        """One training step on a batch on the model's device
        (ampc_model_train_step_device): `inputs` are device arrays
        (__cuda_array_interface__: torch CUDA tensors, CuPy), read without
        a copy through the host; the model's stream first waits for the
        streams they name. `loss`: a device array the loss is written to;
        None makes one beside torch inputs (else no loss is copied, and
        None is returned). With wait=False the step is only queued. With
        `rows`, the inputs are a full batch of which the first `rows` rows
        are real (ampc_model_train_step_rows_device): a partial last batch
        padded on the device by the caller with finite rows."""
        inputs = self._input_list(inputs)
        ins = _DeviceTensorArray(inputs, self.inputs, "input")
        if loss is None and inputs:
            loss = _device_empty(inputs[0], self.outputs[0])
        out = None if loss is None else \
            _DeviceTensorArray([loss], self.outputs[:1], "loss")
        self.wait_streams(ins.streams)
        if rows is None:
            self._check(self._lib.ampc_model_train_step_device(
                self._handle, ins.pointer(), len(ins.arrays),
                out.pointer() if out else None))
        else:
            self._check(self._lib.ampc_model_train_step_rows_device(
                self._handle, ins.pointer(), len(ins.arrays),
                out.pointer() if out else None, rows))
        if wait:
            self.synchronize()
        else:
            self._pending.append((ins, out))
        return loss

    def infer_device(self, inputs: Any, outputs: Optional[List[Any]] = None
                     ) -> List[Any]:
        """The model's outputs on device arrays (ampc_model_infer_device),
        written into `outputs` (device arrays) or, beside torch inputs,
        into new torch tensors on their device; returns the outputs."""
        inputs = self._input_list(inputs)
        ins = _DeviceTensorArray(inputs, self.inputs, "input")
        if outputs is None:
            outputs = [_device_empty(inputs[0], o) if inputs else None
                       for o in self.outputs]
            if any(o is None for o in outputs):
                raise ValueError("infer_device: give `outputs` (device "
                                 "arrays) for inputs that are not torch "
                                 "tensors")
        outs = _DeviceTensorArray(outputs, self.outputs, "output")
        self.wait_streams(ins.streams)
        self._check(self._lib.ampc_model_infer_device(
            self._handle, ins.pointer(), len(ins.arrays), outs.pointer(),
            len(outs.arrays)))
        return list(outputs)

    def wait_streams(self, streams: Iterable[int]) -> None:
        """Makes the model's stream wait, on the device, for the work
        queued so far on each cudaStream_t in `streams` (integers, as
        __cuda_array_interface__ gives them; ampc_model_wait_stream)."""
        for stream in streams:
            self._check(self._lib.ampc_model_wait_stream(
                self._handle, ctypes.c_void_p(stream)))

    def synchronize(self) -> None:
        """Waits for the model's queued work (ampc_model_synchronize)."""
        self._check(self._lib.ampc_model_synchronize(self._handle))
        self._pending = []

    def training_info(self) -> Tuple[str, str, str, int]:
        """(optimizer, hyperparameters, loss_scaling, num_labels)."""
        info = _TrainingInfo()
        self._check(self._lib.ampc_model_training_info(self._handle,
                                                       ctypes.byref(info)))
        return (info.optimizer.decode(), info.hyperparameters.decode(),
                info.loss_scaling.decode(), info.num_labels)

    @property
    def learning_rate(self) -> float:
        value = ctypes.c_float()
        self._check(self._lib.ampc_model_get_learning_rate(
            self._handle, ctypes.byref(value)))
        return value.value

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self._check(self._lib.ampc_model_set_learning_rate(self._handle,
                                                           value))

    def data_parallel(self) -> Dict[str, int]:
        """dict(rank, world_size, bytes_all_reduced): this instance's rank
        in the job its library averages gradients over (the process
        group's, or mpirun's; 0 of 1 alone) and the bytes its all-reduces
        have contributed so far (the library's buffers: a BF16 bucket that
        gloo carries as FP32 counts its BF16 bytes)."""
        rank, size = ctypes.c_int32(), ctypes.c_int32()
        sent = ctypes.c_uint64()
        self._check(self._lib.ampc_model_data_parallel(
            self._handle, ctypes.byref(rank), ctypes.byref(size),
            ctypes.byref(sent)))
        return {"rank": rank.value, "world_size": size.value,
                "bytes_all_reduced": sent.value}

    def scaler_state(self) -> Dict[str, Union[int, float]]:
        """dict(scale, growth_tracker, steps, skipped_steps)."""
        state = _ScalerState()
        self._check(self._lib.ampc_model_get_scaler_state(
            self._handle, ctypes.byref(state)))
        return {name: getattr(state, name) for name, _ in state._fields_}

    def set_scaler_state(self, scale: float, growth_tracker: int, steps: int,
                         skipped_steps: int) -> None:
        # ctypes keeps the low bits of an int too large for its field
        # (2**64 + 1 became 1): out of its C type, a value is refused here;
        # in it, the runtime checks the ranges.
        for name, value, bits in (("growth_tracker", growth_tracker, 32),
                                  ("steps", steps, 64),
                                  ("skipped_steps", skipped_steps, 64)):
            if not isinstance(value, (int, np.integer)) or \
                    isinstance(value, bool) or \
                    not -2 ** (bits - 1) <= int(value) < 2 ** (bits - 1):
                raise AmpcError(Status.ERROR_INVALID_ARGUMENT, (
                    "set_scaler_state: %s is %r, expected an int%d "
                    "(invalid argument)" % (name, value, bits)))
        state = _ScalerState(scale, growth_tracker, steps, skipped_steps)
        self._check(self._lib.ampc_model_set_scaler_state(
            self._handle, ctypes.byref(state)))

    def save_checkpoint(self, path: PathLike) -> None:
        self._check(self._lib.ampc_model_save_checkpoint(
            self._handle, _c_path(path, "ampc_model_save_checkpoint")))

    def load_checkpoint(self, path: PathLike) -> None:
        self._check(self._lib.ampc_model_load_checkpoint(
            self._handle, _c_path(path, "ampc_model_load_checkpoint")))

    def state_dict(self) -> Dict[str, Array]:
        """{name: numpy array}: every parameter (trained or frozen) and
        buffer (BatchNorm's running_mean, running_var, num_batches_tracked)
        by the names the ONNX model gave them: a torch module's state_dict
        names and dtypes when it was exported with torch.onnx.export."""
        state = {p.name: self.get_parameter(i)
                 for i, p in enumerate(self.parameters)}
        state.update({b.name: self.get_buffer(i)
                      for i, b in enumerate(self.buffers)})
        return state

    def load_state_dict(self, state: Dict[str, Any], strict: bool = True
                        ) -> IncompatibleKeys:
        """Sets parameters and buffers from {name: array or torch tensor},
        e.g. a torch module's state_dict(). As torch's: with strict, a
        missing or unexpected name raises RuntimeError (nothing is loaded);
        otherwise returns (missing_keys, unexpected_keys). A library without
        batch counters (compiled for inference, or without an optimizer)
        ignores torch's `num_batches_tracked` entries."""
        targets: Dict[str, Tuple[Callable[[Any, Any], None], TensorInfo]] = {
            p.name: (self.set_parameter, p) for p in self.parameters}
        targets.update({b.name: (self.set_buffer, b) for b in self.buffers})
        missing = [n for n in targets if n not in state]
        unexpected = [n for n in state if n not in targets and
                      not n.endswith("num_batches_tracked")]
        if strict and (missing or unexpected):
            errors = []
            if missing:
                errors.append("Missing key(s) in state_dict: %s. " %
                              ", ".join('"%s"' % k for k in missing))
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: %s. " %
                              ", ".join('"%s"' % k for k in unexpected))
            raise RuntimeError(
                "Error(s) in loading state_dict for %s:\n\t%s" %
                (self.info.name, "\n\t".join(errors)))
        for name, value in state.items():
            if name not in targets:
                continue
            if hasattr(value, "detach"):
                value = value.detach().cpu().numpy()
            setter, info = targets[name]
            setter(name, _converted(value, info, "'%s'" % name,
                                    any_dtype=True))
        return IncompatibleKeys(missing, unexpected)

    def export_onnx(self, path: PathLike) -> None:
        self._check(self._lib.ampc_model_export_onnx(
            self._handle, _c_path(path, "ampc_model_export_onnx")))
