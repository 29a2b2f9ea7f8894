"""bench/cpu_train.py's OpenBLAS kernel set: choose_blas_core picks what
the runtime would (ampc.runtime._blas_core_for_cpu), leaves a user's
OPENBLAS_CORETYPE alone, and, called before torch is imported, is the
kernel set the process's OpenBLAS runs (torch loads OpenBLAS first, so
the runtime cannot choose for the benchmark)."""
import ctypes
import os
import sys

src = sys.argv[1]
sys.path.insert(0, os.path.join(src, "bench"))
import cpu_train  # noqa: E402

user = {"OPENBLAS_CORETYPE": "Haswell"}
cpu_train.choose_blas_core(user)
print("user's choice kept:", user["OPENBLAS_CORETYPE"] == "Haswell")

environ = {}
cpu_train.choose_blas_core(environ)
chosen = environ.get("OPENBLAS_CORETYPE", "")
os.environ.pop("OPENBLAS_CORETYPE", None)
cpu_train.choose_blas_core(os.environ)
import torch  # noqa: E402,F401  (loads OpenBLAS through NumPy)
sys.path.insert(0, os.path.join(src, "python"))
from ampc.runtime import _blas_core_for_cpu  # noqa: E402
print("the runtime's choice:", chosen == _blas_core_for_cpu())
blas = ctypes.CDLL("libopenblas.so.0")
blas.openblas_get_corename.restype = ctypes.c_char_p
core = blas.openblas_get_corename().decode()
print("OpenBLAS runs it:", not chosen or core.lower() == chosen.lower())
