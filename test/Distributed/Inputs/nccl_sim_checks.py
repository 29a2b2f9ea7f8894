"""The CUDA execution's NCCL (lib/Runtime/CudaSim/Nccl.cpp) and the NCCL
communicator built against it (libampc_comm_nccl_sim.so), called directly
through ctypes in a job of one rank (mpirun -np 1). One line per check:

    nccl_sim_checks.py LIBDIR
"""
import ctypes
import os
import sys

import numpy as np

AMPC_DTYPE_F32, AMPC_DTYPE_INT32, AMPC_DTYPE_F16 = 1, 6, 10
NCCL_FLOAT32, NCCL_SUM, NCCL_MAX = 7, 0, 2
NCCL_SUCCESS, NCCL_INVALID_ARGUMENT, NCCL_INVALID_USAGE = 0, 4, 5


# ampc_abi_comm's host collectives and their `_on_stream` forms.
HOST_CALL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32,
                             ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int32)
STREAM_CALL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p,
                               ctypes.c_int32, ctypes.c_void_p,
                               ctypes.c_uint64, ctypes.c_int32,
                               ctypes.c_void_p)


class Comm(ctypes.Structure):
    """ampc_abi_comm (include/ampc/Runtime/ModelAbi.h)."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("rank", ctypes.c_int32),
        ("size", ctypes.c_int32),
        ("handle", ctypes.c_void_p),
        ("start", HOST_CALL),
        ("wait", ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p,
                                  ctypes.c_int32)),
        ("last_error", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)),
        ("start_on_stream", STREAM_CALL),
        # ZeRO-1's (appended).
        ("reduce_scatter", HOST_CALL),
        ("all_gather", HOST_CALL),
        ("reduce_scatter_on_stream", STREAM_CALL),
        ("all_gather_on_stream", STREAM_CALL),
    ]


def comm_plugin(path, prefix):
    """A communicator plugin's PREFIX_create, _bytes and _release typed."""
    plugin = ctypes.CDLL(path)
    create = getattr(plugin, prefix + "_create")
    create.restype = ctypes.POINTER(Comm)
    create.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    getattr(plugin, prefix + "_bytes").restype = ctypes.c_uint64
    getattr(plugin, prefix + "_bytes").argtypes = [ctypes.POINTER(Comm)]
    getattr(plugin, prefix + "_release").argtypes = [ctypes.POINTER(Comm)]
    return plugin


def main():
    lib = sys.argv[1]
    sim = ctypes.CDLL(os.path.join(lib, "libampc_cudasim.so"),
                      mode=ctypes.RTLD_GLOBAL)
    nccl = ctypes.CDLL(os.path.join(lib, "libampc_cudasim_nccl.so"),
                       mode=ctypes.RTLD_GLOBAL)
    plugin = comm_plugin(os.path.join(lib, "libampc_comm_nccl_sim.so"),
                         "ampc_comm_nccl")
    nccl.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_size_t, ctypes.c_int,
                                   ctypes.c_int, ctypes.c_void_p,
                                   ctypes.c_void_p]
    nccl.ncclGetErrorString.restype = ctypes.c_char_p

    error = ctypes.create_string_buffer(512)
    comm = plugin.ampc_comm_nccl_create(error, 512)
    assert comm, error.value
    c = comm.contents
    print("created: rank %d of %d, start_on_stream %s" %
          (c.rank, c.size, "set" if c.start_on_stream else "NULL"))

    def message():
        return c.last_error(c.handle).decode()

    # Device memory: a sum over one rank leaves it as it is.
    device = ctypes.c_void_p()
    assert sim.cudaMalloc(ctypes.byref(device), ctypes.c_size_t(64)) == 0
    values = np.arange(16, dtype=np.float32)
    assert sim.cudaMemcpy(device, values.ctypes.data, ctypes.c_size_t(64),
                          1) == 0  # cudaMemcpyHostToDevice
    assert c.start_on_stream(c.handle, 0, device, 16, AMPC_DTYPE_F32,
                             None) == 0, message()
    back = np.zeros(16, dtype=np.float32)
    assert sim.cudaMemcpy(back.ctypes.data, device, ctypes.c_size_t(64),
                          2) == 0  # cudaMemcpyDeviceToHost
    assert (back == values).all(), back
    print("sum of 16 floats on one rank: unchanged; bytes %d" %
          plugin.ampc_comm_nccl_bytes(comm))

    # The communicator's own refusals, each naming the rank.
    assert c.start_on_stream(c.handle, 1, device, 16, AMPC_DTYPE_INT32,
                             None) == 1
    print("int32: " + message())
    # Host memory (the runtime's library check at load): through a device
    # copy, finished when start returns.
    host = values.copy()
    assert c.start(c.handle, 0, host.ctypes.data, 16, AMPC_DTYPE_F32) == 0, \
        message()
    assert c.wait(c.handle, 0) == 0, message()
    assert (host == values).all(), host
    print("host start of 16 floats on one rank: unchanged; bytes %d" %
          plugin.ampc_comm_nccl_bytes(comm))
    assert c.start(c.handle, 1, host.ctypes.data, 16, AMPC_DTYPE_INT32) == 1
    print("host int32: " + message())
    # The execution's: host memory, a buffer too short, a dead
    # communicator, an operation it does not sum.
    assert c.start_on_stream(c.handle, 0, values.ctypes.data, 16,
                             AMPC_DTYPE_F32, None) == 1
    print("host buffer: " + message())
    assert c.start_on_stream(c.handle, 0, device, 17, AMPC_DTYPE_F32,
                             None) == 1
    print("17 floats in 64 bytes: " + message())
    r = nccl.ncclAllReduce(device, device, 16, NCCL_FLOAT32, NCCL_SUM,
                           ctypes.c_void_p(0x1000), None)
    print("dead communicator: %d %s" % (r, nccl.ncclGetErrorString(r).decode()))
    # ZeRO-1's collectives (ncclReduceScatter, ncclAllGather in place): on
    # one rank each leaves the buffer as it is; the host forms are NULL.
    before = plugin.ampc_comm_nccl_bytes(comm)
    assert c.reduce_scatter_on_stream(c.handle, 0, device, 16,
                                      AMPC_DTYPE_F32, None) == 0, message()
    assert c.all_gather_on_stream(c.handle, 0, device, 16, AMPC_DTYPE_F32,
                                  None) == 0, message()
    assert sim.cudaMemcpy(back.ctypes.data, device, ctypes.c_size_t(64),
                          2) == 0
    assert (back == values).all(), back
    print("reduce-scatter and all-gather of 16 floats on one rank: unchanged;"
          " bytes %d; host forms %s" % (
              plugin.ampc_comm_nccl_bytes(comm) - before,
              "NULL" if not c.reduce_scatter and not c.all_gather else "set"))
    assert c.all_gather_on_stream(c.handle, 0, device, 17, AMPC_DTYPE_F32,
                                  None) == 1
    print("all-gather of 17 floats in 64 bytes: " + message())
    plugin.ampc_comm_nccl_release(comm)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
