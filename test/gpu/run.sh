#!/bin/bash
# Runs a GPU pack on the GPU machine: the GPU test (check.py, in the pack
# test/gpu/pack.py builds: one line per check, exit 1 on a failure) or the
# GPU benchmark (bench.py, in the pack bench/gpu/pack.py builds: the table).
# Needs CUDA's runtime and cuBLASLt, PyTorch with CUDA and numpy; no
# LLVM/MLIR, no ampc compiler.
#   [GPU_SCRIPT=sanitize.py] [GPU_WRAP=TOOL] ./run.sh [options of the pack's script]
set -u
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
# The libraries need CUDA 13's libcudart and libcublasLt: where the loader
# does not find them, look in CUDA's folder and in the NVIDIA wheels that
# PyTorch brings.
unresolved() { for lib in *.so; do ldd "$lib" | grep -q "not found" && return 0; done; return 1; }
if unresolved; then
  extra=$("$PYTHON" - <<'PY' 2>/dev/null
import glob, os
dirs = ["/usr/local/cuda/lib64", "/usr/local/cuda/lib"]
try:
    import nvidia
    for root in nvidia.__path__:
        dirs += glob.glob(os.path.join(root, "*", "lib"))
except ImportError:
    pass
print(":".join(d for d in dirs if os.path.isdir(d)))
PY
)
  export LD_LIBRARY_PATH="${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# The libraries must resolve now: report every one that does not.
missing=0
for lib in *.so; do
  if ldd "$lib" | grep -q "not found"; then
    echo "FAIL: $lib: $(ldd "$lib" | grep "not found" | tr -s ' \t' ' ')"
    missing=1
  fi
done
if [ "$missing" != 0 ]; then
  echo "the CUDA libraries need CUDA 13's libcudart and libcublasLt on the"
  echo "loader's path (LD_LIBRARY_PATH)"
  exit 1
fi
# GPU_SCRIPT picks another script of the pack (sanitize.py: a few steps of
# every library, for compute-sanitizer); GPU_WRAP runs it under a tool
# (GPU_WRAP="compute-sanitizer --tool memcheck --error-exitcode 9").
script=${GPU_SCRIPT:-check.py}
[ -f "$script" ] || script=bench.py
exec ${GPU_WRAP:-} "$PYTHON" "$script" "$@"
