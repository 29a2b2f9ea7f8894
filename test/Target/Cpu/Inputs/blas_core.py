"""Which OpenBLAS kernels a CPU model library runs on when the runtime is
the first to bring OpenBLAS into the process (lib/Runtime/BlasCore.cpp).
No numpy here: importing it would load OpenBLAS first.

    blas_core.py load RUNTIME LIBRARY

prints the kernel set OpenBLAS chose, the one this CPU's flags call for,
and OPENBLAS_CORETYPE as the process sees it after the load;

    blas_core.py python LIBRARY

imports numpy (which loads OpenBLAS), then loads LIBRARY twice with the
Python module (its warnings go to stderr)."""
import ctypes
import os
import sys


def core_for_cpu():
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return "(OpenBLAS's own)"


def load(runtime_path, library):
    runtime = ctypes.CDLL(runtime_path)
    try:
        ctypes.CDLL("libopenblas.so.0", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        print("OpenBLAS was loaded before the model")
    except OSError:
        pass
    handle = ctypes.c_void_p()
    status = runtime.ampc_model_load(library.encode(), None,
                                     ctypes.byref(handle))
    if status != 0:
        runtime.ampc_last_error.restype = ctypes.c_char_p
        sys.exit("load failed: %s" % runtime.ampc_last_error().decode())
    blas = ctypes.CDLL("libopenblas.so.0", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    blas.openblas_get_corename.restype = ctypes.c_char_p
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    variable = libc.getenv(b"OPENBLAS_CORETYPE")
    chosen = blas.openblas_get_corename().decode()
    wanted = core_for_cpu()
    print("chosen: %s" % chosen)
    print("for this CPU: %s" % wanted)
    print("the CPU's kernels" if chosen == wanted else "other kernels")
    print("OPENBLAS_CORETYPE after the load: %s" % (
        variable.decode() if variable else "unset"))
    runtime.ampc_model_release(handle)


def python(library):
    import numpy  # noqa: F401
    import ampc
    ampc.Model(library)
    ampc.Model(library)


if sys.argv[1] == "load":
    load(sys.argv[2], sys.argv[3])
else:
    python(sys.argv[2])
