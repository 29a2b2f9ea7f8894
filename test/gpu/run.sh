#!/bin/bash
# The GPU test of the CUDA target, run on the GPU machine inside the pack
# that test/gpu/pack.py built (it needs CUDA's runtime and cuBLASLt, PyTorch
# with CUDA and numpy; no LLVM/MLIR, no ampc compiler).
#   ./run.sh                 # prints one line per check, exits 1 on a failure
set -u
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
# The libraries must resolve here: report every one that does not.
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
exec "$PYTHON" check.py "$@"
