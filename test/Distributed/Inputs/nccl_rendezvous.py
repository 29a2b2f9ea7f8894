"""The NCCL communicator's TCP rendezvous (lib/Runtime/Rendezvous.h), the
way torchrun launches a job: RANK, WORLD_SIZE, MASTER_ADDR and a port in
the environment, no mpirun. Runs against libampc_comm_nccl_sim.so, whose
NCCL (the CUDA execution's) needs MPI for the sums themselves: so the two
ranks exchange NCCL's unique id over TCP and then stop at
ncclCommInitRank, which says MPI is not initialized; that they reached it
shows the rendezvous finished.

    nccl_rendezvous.py pair LIBDIR     two ranks, one process each
    nccl_rendezvous.py alone LIBDIR    rank 0 of 2 without rank 1
    nccl_rendezvous.py noport LIBDIR   MASTER_ADDR without a port
    nccl_rendezvous.py rank LIBDIR     one rank (the environment says which)
"""
import ctypes
import os
import socket
import subprocess
import sys


def create(libdir):
    plugin = ctypes.CDLL(os.path.join(libdir, "libampc_comm_nccl_sim.so"))
    plugin.ampc_comm_nccl_create.restype = ctypes.c_void_p
    plugin.ampc_comm_nccl_create.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    error = ctypes.create_string_buffer(512)
    made = plugin.ampc_comm_nccl_create(error, 512)
    return "made" if made else error.value.decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(rank, size, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMI_", "PMIX_"))}
    env.update(RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK="0",
               MASTER_ADDR="127.0.0.1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_ranks(libdir, envs):
    procs = [subprocess.Popen([sys.executable, __file__, "rank", libdir],
                              env=env, stdout=subprocess.PIPE, text=True)
             for env in envs]
    for env, p in zip(envs, procs):
        out, _ = p.communicate(timeout=120)
        print("process of RANK %s: %s" % (env["RANK"], out.strip()))


def main():
    mode, libdir = sys.argv[1], sys.argv[2]
    if mode == "rank":
        print(create(libdir))
    elif mode == "pair":
        port = free_port()
        run_ranks(libdir, [environment(r, 2, AMPC_RENDEZVOUS_PORT=port,
                                       AMPC_COMM_TIMEOUT=60)
                           for r in (1, 0)][::-1])
    elif mode == "alone":
        run_ranks(libdir, [environment(0, 2, AMPC_RENDEZVOUS_PORT=free_port(),
                                       AMPC_COMM_TIMEOUT=1)])
    elif mode == "noport":
        env = environment(1, 2)
        env.pop("MASTER_PORT", None)
        env.pop("AMPC_RENDEZVOUS_PORT", None)
        run_ranks(libdir, [env])


main()
