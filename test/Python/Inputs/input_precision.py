"""FP16/BF16 inputs (--input-precision=auto; issue 37, item 2).

usage: input_precision.py TARGET OUT_DIR

The MLP of test/Target/Cuda/Inputs (x -> Gemm -> Relu -> Gemm: x's only
use is the first GEMM's autocast) compiled for TARGET (cpu or cuda-sim)
twice, with --input-precision=fp32 and auto. The auto library takes x in
FP16 (BF16 at --precision=bf16, on cpu); given the round-to-nearest-even
rounding of the data the FP32 library is given, it trains to the same bits:
losses, parameters after three steps, a partial last batch, the outputs of
infer. On cuda-sim the same from device memory (the _device calls). FP32
data for the FP16 input is refused, by the module and by the C API,
naming the input. Prints one line per check and PASSED; a failed check
raises.
"""

import ctypes
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA_INPUTS = os.path.join(HERE, "..", "..", "Target", "Cuda", "Inputs")
sys.path.insert(0, CUDA_INPUTS)

import ampc  # noqa: E402
from ampc.runtime import AmpcError, _DeviceTensorArray, _TensorArray  # noqa: E402,E501

MLP = os.path.join(CUDA_INPUTS, "mlp.onnxtext")
BATCH, FEATURES, CLASSES = 8, 4, 3


def batches(count):
    rng = np.random.default_rng(7)
    # Values that f16 cannot hold exactly, so the rounding matters.
    return [(rng.standard_normal((BATCH, FEATURES)).astype(np.float32),
             rng.integers(0, CLASSES, BATCH).astype(np.int64))
            for _ in range(count)]


def dtypes(model):
    names = {1: "f32", 7: "i64", 10: "f16", 16: "bf16"}
    return ", ".join("%s %s" % (i.name, names[i.ampc_dtype])
                     for i in model.inputs)


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and \
        a.tobytes() == b.tobytes()


def same_parameters(a, b):
    return all(same(a.get_parameter(p), b.get_parameter(p))
               for p in range(len(a.parameters)))


def refused(call):
    try:
        call()
    except AmpcError as e:
        return str(e)
    raise AssertionError("not refused")


def compile_pair(target, out, precision):
    return [ampc.compile(MLP, output=os.path.join(
        out, "mlp-%s-%s-%s.so" % (target, precision, inputs)),
        target=target, precision=precision, input_precision=inputs)
        for inputs in ("fp32", "auto")]


def check(target, out, precision, rounded):
    """Three steps of the FP32-input library on FP32 data against the auto
    library on `rounded(data)`."""
    wide, narrow = compile_pair(target, out, precision)
    data = batches(3)
    print("%s %s: inputs %s; with auto %s" % (
        target, precision, dtypes(wide), dtypes(narrow)))
    want = [float(wide.train_step([x, y])) for x, y in data]
    got = [float(narrow.train_step([rounded(x), y])) for x, y in data]
    assert want == got, (want, got)
    assert same_parameters(wide, narrow)
    print("%s %s: 3 steps: losses and parameters bit for bit" %
          (target, precision))
    x, y = data[0]
    assert all(same(a, b) for a, b in zip(wide.infer([x, y]),
                                          narrow.infer([rounded(x), y])))
    want = float(wide.train_step([x[:5], y[:5]]))
    got = float(narrow.train_step([rounded(x)[:5], y[:5]]))
    assert want == got and same_parameters(wide, narrow), (want, got)
    print("%s %s: infer, and a partial batch of 5 rows: bit for bit" %
          (target, precision))
    return wide, narrow, data


def main(target, out):
    f16 = lambda x: x.astype(np.float16)  # round to nearest even
    wide, narrow, data = check(target, out, "fp16", f16)
    x, y = data[0]

    # FP32 data for the FP16 input: the module refuses it (it converts
    # nothing), and so does the C API when the module's check is skipped.
    print("module: " + refused(lambda: narrow.train_step([x, y])))
    ins = _TensorArray([x, y])  # no infos: the dtypes as given
    loss = np.empty((), np.float32)
    outs = _TensorArray([loss])
    print("C API: " + refused(lambda: narrow._check(
        narrow._lib.ampc_model_train_step(narrow._handle, ins.pointer(), 2,
                                          outs.pointer()))))
    print("C API rows: " + refused(lambda: narrow._check(
        narrow._lib.ampc_model_train_step_rows(
            narrow._handle, ins.pointer(), 2, outs.pointer(), 5))))

    if target == "cuda-sim":
        # From device memory: the auto library's device step on FP16 device
        # arrays is its host step, bit for bit; FP32 device data is refused.
        from device_batches import DeviceArray
        from launch_count import simulator
        sim = simulator()
        sim.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.c_size_t]
        sim.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_size_t, ctypes.c_int]
        path = os.path.join(out, "mlp-%s-fp16-auto.so" % target)
        host, device = ampc.runtime.Model(path), ampc.runtime.Model(path)
        for x, y in batches(3):
            want = float(host.train_step([f16(x), y]))
            loss = DeviceArray(sim, (), np.float32)
            device.train_step_device([DeviceArray.of(sim, f16(x)),
                                      DeviceArray.of(sim, y)], loss=loss)
            assert float(loss.get()) == want, (float(loss.get()), want)
        assert same_parameters(host, device)
        x, y = batches(1)[0]
        want = float(host.train_step([f16(x)[:5], y[:5]]))
        got = device.train_step_device(
            [DeviceArray.of(sim, f16(x)), DeviceArray.of(sim, y)],
            loss=DeviceArray(sim, (), np.float32), rows=5)
        assert float(got.get()) == want and same_parameters(host, device)
        print("device: 3 steps and a partial batch: the host steps' bits")
        # One step: the input's cast kernel is gone; the copies are the
        # same (the staged bytes are half).
        from launch_count import one_step
        counts = [one_step(os.path.join(out, "mlp-%s-fp16-%s.so" % (
            target, inputs))) for inputs in ("fp32", "auto")]
        kernels, copies = [[sum(c for (k, _), c in step.items() if k == kind)
                            for step in counts] for kind in ("kernel", "copy")]
        print("one step: %d kernel(s) fewer, %d copies more" % (
            kernels[0] - kernels[1], copies[1] - copies[0]))
        # BF16 from device memory as torch gives it, the bits as int16
        # (torch has no __cuda_array_interface__ for bfloat16).
        import torch
        path = os.path.join(out, "mlp-%s-bf16-auto.so" % target)
        ampc.compile(MLP, output=path, target=target, precision="bf16",
                     input_precision="auto")
        bf16_host, bf16_device = (ampc.runtime.Model(path),
                                  ampc.runtime.Model(path))
        bits = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16)
        want = float(bf16_host.train_step([bits.numpy().view(np.uint16), y]))
        loss = DeviceArray(sim, (), np.float32)
        bf16_device.train_step_device([DeviceArray.of(sim, bits.numpy()),
                                       DeviceArray.of(sim, y)], loss=loss)
        assert float(loss.get()) == want and \
            same_parameters(bf16_host, bf16_device)
        print("device bf16 (int16 bits): the host step's bits")
        wrong = [DeviceArray.of(sim, x), DeviceArray.of(sim, y)]
        print("device: " + refused(lambda: device.train_step_device(wrong)))
        # The C API's device calls, past the module's check: the tensor
        # says f32 (and has the f32 bytes).
        ins = _DeviceTensorArray(
            wrong, [device.inputs[0]._replace(dtype=np.dtype(np.float32)),
                    device.inputs[1]], "input")
        ins.tensors[0].dtype = 1
        for call, extra in (("ampc_model_train_step_device", ()),
                            ("ampc_model_train_step_rows_device", (5,))):
            print("C API device: " + refused(lambda: device._check(
                getattr(device._lib, call)(device._handle, ins.pointer(), 2,
                                           None, *extra))))
    else:
        # BF16 inputs at --precision=bf16: a torch.bfloat16 tensor (torch
        # rounds to nearest even) is taken as its bits.
        import torch
        check(target, out, "bf16",
              lambda x: torch.from_numpy(x).to(torch.bfloat16))
    print("PASSED")


if __name__ == "__main__":
    main(*sys.argv[1:3])
