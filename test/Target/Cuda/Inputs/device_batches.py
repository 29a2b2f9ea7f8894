"""Batches on the device (issue 37, item 2), under the CUDA execution on the
CPU: a --target=cuda-sim training library run from device memory
(ampc_model_train_step_device, ampc_model_infer_device) against the same
library run from host memory.

usage: device_batches.py CUDA_SIM_LIB CPU_LIB

Device memory here is the CUDA execution's own (cudaMalloc of the
libampc_cudasim the model runs on), wrapped as __cuda_array_interface__
arrays, as a torch CUDA tensor is on a GPU. Prints one line per check and
"PASSED" at the end; a failed check raises.
"""

import ctypes
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from ampc.runtime import AmpcError, Model, _Tensor  # noqa: E402
from launch_count import read_counters, simulator  # noqa: E402
from sim_vs_cpu import inputs_for  # noqa: E402

H2D, D2H, D2D = 1, 2, 3  # cudaMemcpyKind


class DeviceArray:
    """An array in the CUDA execution's device memory, seen through
    __cuda_array_interface__ (version 3) as a torch CUDA tensor is."""

    def __init__(self, sim, shape, dtype, stream=None):
        self.sim, self.shape, self.dtype = sim, tuple(shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * \
            self.dtype.itemsize
        pointer = ctypes.c_void_p()
        assert sim.cudaMalloc(ctypes.byref(pointer),
                              max(self.nbytes, 1)) == 0
        self.pointer = pointer.value
        self.stream = stream

    @classmethod
    def of(cls, sim, array, stream=1):
        """A copy of `array` on the device. cudaMemcpy from pageable memory
        may return before the data is there (CUDA's documented behaviour,
        which the CUDA execution keeps): the copy is on the legacy stream
        (1), which the interface names, so the model's stream waits for
        it."""
        a = np.ascontiguousarray(array)
        d = cls(sim, a.shape, a.dtype, stream)
        assert sim.cudaMemcpy(ctypes.c_void_p(d.pointer),
                              ctypes.c_void_p(a.ctypes.data), a.nbytes,
                              H2D) == 0
        return d

    def get(self):
        out = np.empty(self.shape, self.dtype)
        assert self.sim.cudaMemcpy(ctypes.c_void_p(out.ctypes.data),
                                   ctypes.c_void_p(self.pointer),
                                   self.nbytes, D2H) == 0
        return out

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str,
                "data": (self.pointer, False), "version": 3,
                "strides": None, "stream": self.stream}


class HostArray:
    """Host memory that claims to be a device array: what a confused
    caller passes."""

    def __init__(self, array):
        self.array = np.ascontiguousarray(array)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.array.shape, "typestr": self.array.dtype.str,
                "data": (self.array.ctypes.data, False), "version": 3,
                "strides": None}


def expect_error(what, call, status_name, text):
    try:
        call()
    except AmpcError as e:
        message = str(e)
        if text not in message:
            raise AssertionError("%s: the message %r does not say %r" %
                                 (what, message, text))
        print("%s: refused: %s" % (what, message))
        return
    raise AssertionError("%s: not refused" % what)


def main():
    sim_path, cpu_path = sys.argv[1:3]
    with Model(sim_path) as host, Model(sim_path) as device:
        sim = simulator()
        sim.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.c_size_t]
        sim.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_size_t, ctypes.c_int]
        batches = [inputs_for(host, seed) for seed in (1, 2, 3)]
        loss_info = host.outputs[0]

        # Three steps each way: the same losses and parameters, bit for bit.
        host_losses, device_losses = [], []
        for batch in batches:
            host_losses.append(float(host.train_step(batch)))
            on_device = [DeviceArray.of(sim, x) for x in batch]
            loss = DeviceArray(sim, loss_info.shape, loss_info.dtype)
            assert device.train_step_device(on_device, loss=loss) is loss
            device_losses.append(float(loss.get()))
        assert host_losses == device_losses, (host_losses, device_losses)
        print("losses: host %s, device %s" % (host_losses, device_losses))
        for p in range(len(host.parameters)):
            a, b = host.get_parameter(p), device.get_parameter(p)
            assert np.array_equal(a, b), host.parameters[p].name
        print("parameters after 3 steps: %d identical" % len(host.parameters))

        # Host batches are packed into two alternating pinned buffers and
        # copied on a copy stream: five steps queued without waiting, each
        # from the same host arrays overwritten right after the call, train
        # on their own batches (the losses of steps taken one at a time). A
        # slot refilled before its queued copy ran (the CUDA execution runs
        # queued work late) would train a step on a later batch.
        with Model(sim_path) as queued, Model(sim_path) as waited:
            batches5 = [inputs_for(host, seed) for seed in (4, 5, 6, 7, 8)]
            want = [float(waited.train_step(b)) for b in batches5]
            scratch = [np.empty_like(x) for x in batches5[0]]
            losses = []
            for b in batches5:
                for s, x in zip(scratch, b):
                    s[...] = x
                losses.append(queued.train_step(scratch, wait=False))
                for s in scratch:
                    s.fill(0)
            queued.synchronize()
            got = [float(l) for l in losses]
            assert got == want, (got, want)
            print("5 queued host steps: the losses of 5 waited steps")

        # Inference from and into device memory.
        want = host.infer(batches[0])
        outs = [DeviceArray(sim, o.shape, o.dtype) for o in device.outputs]
        device.infer_device([DeviceArray.of(sim, x) for x in batches[0]],
                            outputs=outs)
        assert all(np.array_equal(w, o.get()) for w, o in zip(want, outs))
        print("infer_device: %d outputs identical" % len(outs))

        # A partial last batch from device memory (the first 5 of 8 rows
        # real, the rest padding the caller wrote on the device): the host
        # call's step bit for bit, and not the full batch's step.
        with Model(sim_path) as part_host, Model(sim_path) as part_device, \
                Model(sim_path) as full:
            batch = batches[1]
            want = float(part_host.train_step([x[:5] for x in batch]))
            padded = [DeviceArray.of(sim, x) for x in batch]
            got = part_device.train_step_device(padded, loss=DeviceArray(
                sim, loss_info.shape, loss_info.dtype), rows=5)
            got = float(got.get())
            whole = float(full.train_step(batch))
            assert got == want and got != whole, (got, want, whole)
            for p in range(len(host.parameters)):
                assert np.array_equal(part_host.get_parameter(p),
                                      part_device.get_parameter(p))
            print("5 of 8 rows from device memory: the host partial step's "
                  "loss and parameters, bit for bit (%s; the full batch %s)"
                  % (got, whole))
            expect_error("9 of 8 rows from device memory",
                         lambda: part_device.train_step_device(
                             padded, loss=None, rows=9),
                         "AMPC_ERROR_INVALID_ARGUMENT", "rows is 9")

        # What one step moves: inputs device to device, the loss device to
        # device (NULL: not at all), no host function.
        on_device = [DeviceArray.of(sim, x) for x in batches[0]]
        loss = DeviceArray(sim, loss_info.shape, loss_info.dtype)
        for label, out in (("loss on the device", loss), ("no loss", None)):
            device.train_step_device(on_device, loss=loss)
            sim.ampc_cudasim_counters_reset()
            if out is None:
                device.train_step_device(on_device, loss=None, wait=False)
            else:
                device.train_step_device(on_device, loss=out, wait=False)
            device.synchronize()
            counts = read_counters(sim)
            moves = sorted("%s %d" % (n, c) for (k, n), c in counts.items()
                           if k in ("copy", "host_function"))
            print("%s: %s" % (label, ", ".join(moves)))
        steps = device.scaler_state()["steps"]
        print("steps taken: %d" % steps)


        # Memory of the wrong kind is refused before anything runs.
        expect_error("host memory to the device call",
                     lambda: device.train_step_device(
                         [HostArray(x) for x in batches[0]], loss=loss),
                     "INVALID_ARGUMENT", "is host memory")
        lib = device._lib
        tensors = (_Tensor * len(on_device))()
        shapes = []
        for t, d, info in zip(tensors, on_device, device.inputs):
            shapes.append((ctypes.c_int64 * max(len(d.shape), 1))(*d.shape))
            t.dtype, t.rank = info.ampc_dtype, len(d.shape)
            t.shape = ctypes.cast(shapes[-1], ctypes.POINTER(ctypes.c_int64))
            t.data, t.size_bytes = d.pointer, d.nbytes
        host_loss = np.zeros(loss_info.shape, loss_info.dtype)
        out = _Tensor()
        out.dtype, out.rank = device.outputs[0].ampc_dtype, 0
        out.data, out.size_bytes = host_loss.ctypes.data, host_loss.nbytes
        expect_error("device memory to the host call",
                     lambda: device._check(lib.ampc_model_train_step(
                         device._handle, tensors, len(on_device),
                         ctypes.byref(out))),
                     "INVALID_ARGUMENT", "is device memory")
        expect_error("a host loss buffer to the device call",
                     lambda: device._check(lib.ampc_model_train_step_device(
                         device._handle, tensors, len(on_device),
                         ctypes.byref(out))),
                     "INVALID_ARGUMENT", "is host memory")
        # Another device's memory (AMPC_CUDA_SIM_DEVICES=2; the model is on
        # device 0).
        count = ctypes.c_int()
        assert sim.cudaGetDeviceCount(ctypes.byref(count)) == 0
        if count.value >= 2:
            assert sim.cudaSetDevice(1) == 0
            elsewhere = [DeviceArray.of(sim, x) for x in batches[0]]
            assert sim.cudaSetDevice(0) == 0
            expect_error("device 1's memory to a model on device 0",
                         lambda: device.train_step_device(elsewhere,
                                                          loss=loss),
                         "INVALID_ARGUMENT", "another device")
        if device.scaler_state()["steps"] != steps:
            raise AssertionError("a refused call ran a step")
        print("refused calls ran no step")

    # The wait matters: a batch whose interface names no stream while its
    # copy is still queued on the legacy stream is read before it is there
    # (the cudaMalloc fill: labels out of range).
    with Model(sim_path) as fresh:
        unsynced = [DeviceArray.of(sim, x, stream=None) for x in batches[0]]
        expect_error("a batch still being copied, its stream not named",
                     lambda: fresh.train_step_device(unsynced, loss=loss),
                     "EXECUTION", "out of range")

    with Model(cpu_path) as cpu:
        expect_error("the CPU target's device call",
                     lambda: cpu.train_step_device(
                         [HostArray(x) for x in inputs_for(cpu, 1)]),
                     "UNSUPPORTED", "runs on the host")
    print("PASSED")


if __name__ == "__main__":
    main()
