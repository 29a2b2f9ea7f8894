"""ZeRO-1's collectives on the MPI communicator (libampc_comm_mpi.so, issue
41, item 3): its `reduce_scatter` and `all_gather` called through ctypes on
every rank of a job (mpirun -np 2). Rank 0 prints one line per check, after
every rank has asserted its own results:

    mpi_collectives.py LIBDIR
"""
import ctypes
import os
import sys

import numpy as np

AMPC_DTYPE_F32, AMPC_DTYPE_INT32, AMPC_DTYPE_F16, AMPC_DTYPE_F64 = 1, 6, 10, 11
AMPC_DTYPE_BF16 = 16

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nccl_sim_checks import Comm, comm_plugin  # noqa: E402


def bf16_round(x):
    """FP32 values rounded to BF16 (nearest even), as bits."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return bits.astype(np.uint16)


def bf16_widen(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def rank_values(rank, count, dtype):
    """Rank `rank`'s buffer: values whose 16-bit sums round."""
    rng = np.random.default_rng(100 + rank)
    x = rng.standard_normal(count).astype(np.float32) * 3
    if dtype == AMPC_DTYPE_F16:
        return x.astype(np.float16).view(np.uint16)
    if dtype == AMPC_DTYPE_BF16:
        return bf16_round(x)
    if dtype == AMPC_DTYPE_F64:
        return x.astype(np.float64)
    return x


def pairwise_sum(buffers, dtype):
    """The sum of the ranks' buffers as the communicator computes it: each
    pair widened to FP32, added, rounded (2 ranks: one addition)."""
    if dtype == AMPC_DTYPE_F16:
        total = buffers[0].view(np.float16)
        for b in buffers[1:]:
            total = (total.astype(np.float32) +
                     b.view(np.float16).astype(np.float32)).astype(np.float16)
        return total.view(np.uint16)
    if dtype == AMPC_DTYPE_BF16:
        total = buffers[0]
        for b in buffers[1:]:
            total = bf16_round(bf16_widen(total) + bf16_widen(b))
        return total
    total = buffers[0].copy()
    for b in buffers[1:]:
        total = total + b
    return total


def main():
    lib = sys.argv[1]
    plugin = comm_plugin(os.path.join(lib, "libampc_comm_mpi.so"),
                         "ampc_comm_mpi")
    error = ctypes.create_string_buffer(512)
    comm = plugin.ampc_comm_mpi_create(error, 512)
    assert comm, error.value
    c = comm.contents
    rank, size = c.rank, c.size
    lines = []

    def say(line):
        if rank == 0:
            lines.append(line)

    assert c.struct_size >= ctypes.sizeof(Comm), c.struct_size
    say("created: rank %d of %d, reduce_scatter %s, all_gather %s, on_stream "
        "%s" % (rank, size, "set" if c.reduce_scatter else "NULL",
                "set" if c.all_gather else "NULL",
                "NULL" if not c.reduce_scatter_on_stream and
                not c.all_gather_on_stream else "set"))

    def run(call, request, array, dtype):
        code = call(c.handle, request, array.ctypes.data, array.size, dtype)
        if code == 0:
            code = c.wait(c.handle, request)
        return code

    block = 5
    count = block * size
    names = {AMPC_DTYPE_F32: "fp32", AMPC_DTYPE_F16: "fp16",
             AMPC_DTYPE_BF16: "bf16", AMPC_DTYPE_F64: "fp64"}
    for dtype in (AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16,
                  AMPC_DTYPE_F64):
        buffers = [rank_values(r, count, dtype) for r in range(size)]
        mine = buffers[rank].copy()
        assert run(c.reduce_scatter, 0, mine, dtype) == 0, \
            c.last_error(c.handle)
        expected = pairwise_sum(buffers, dtype)
        own = slice(rank * block, rank * block + block)
        assert mine[own].tobytes() == expected[own].tobytes(), (
            dtype, mine[own], expected[own])
        # The all-reduce gives every rank the same bits in its block.
        whole = buffers[rank].copy()
        assert run(c.start, 1, whole, dtype) == 0, c.last_error(c.handle)
        assert whole[own].tobytes() == mine[own].tobytes()
        # Each rank's block to every rank.
        gathered = np.zeros_like(mine)
        gathered[own] = mine[own]
        assert run(c.all_gather, 2, gathered, dtype) == 0, \
            c.last_error(c.handle)
        assert gathered.tobytes() == expected.tobytes(), (dtype, gathered)
        say("%s: reduce-scatter of %d elements: each rank's block the "
            "all-reduce's bits; all-gather: every rank has every block"
            % (names[dtype], count))
    before = plugin.ampc_comm_mpi_bytes(comm)
    x = np.ones(count, np.float32)
    assert run(c.reduce_scatter, 0, x, AMPC_DTYPE_F32) == 0
    assert run(c.all_gather, 0, x, AMPC_DTYPE_F32) == 0
    say("bytes: reduce-scatter of %d floats %d, all-gather %d" % (
        count, 4 * count, plugin.ampc_comm_mpi_bytes(comm) - before - 4 * count))
    odd = np.zeros(count + 1, np.float32)
    assert c.reduce_scatter(c.handle, 3, odd.ctypes.data, odd.size,
                            AMPC_DTYPE_F32) != 0
    say("odd count: " + c.last_error(c.handle).decode())
    ints = np.zeros(count, np.int32)
    assert c.all_gather(c.handle, 3, ints.ctypes.data, ints.size,
                        AMPC_DTYPE_INT32) != 0
    say("int32: " + c.last_error(c.handle).decode())
    plugin.ampc_comm_mpi_release(comm)
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
