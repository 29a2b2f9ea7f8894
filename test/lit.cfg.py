# -*- Python -*-
import os
import shutil
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "ampc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtext", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.ampc_obj_root, "test")

llvm_config.use_default_substitutions()
# Debian's torch, onnx and numpy live with /usr/bin/python3, not with
# whatever python3 comes first on PATH. In a sanitized build (scripts/
# sanitize-check) the runtime a test loads into Python needs the ASan
# runtime loaded first; Python's own allocations are not ours to leak-check.
python = "/usr/bin/python3"
if getattr(config, "ampc_asan_runtime", ""):
    options = os.environ.get("ASAN_OPTIONS", "")
    python = "env LD_PRELOAD=%s ASAN_OPTIONS=%s /usr/bin/python3" % (
        config.ampc_asan_runtime,
        (options + ":" if options else "") + "detect_leaks=0")
# (use_default_substitutions already defined %python as lit's own Python,
# and the first definition would win.)
config.substitutions = [s for s in config.substitutions if s[0] != "%python"]
config.substitutions.append(("%python", python))
# OpenBLAS's kernel set (docs/design.md, "OpenBLAS's kernel set"): every
# process of a test runs the one the runtime chooses for this CPU, whoever
# loads OpenBLAS first (NumPy in a Python harness, the runtime in a C tool),
# so that results compared bit for bit across processes come from the same
# kernels; the user's OPENBLAS_CORETYPE, when set, is passed on instead.
# test/Target/Cpu/blas-core.test unsets it to check the runtime's choice.
cpu_flags = set()
try:
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("flags"):
                cpu_flags = set(line.split(":", 1)[1].split())
                break
except OSError:
    pass
if {"avx2", "fma"} <= cpu_flags:
    config.available_features.add("cpu-avx2")
if os.environ.get("OPENBLAS_CORETYPE"):
    config.environment["OPENBLAS_CORETYPE"] = os.environ["OPENBLAS_CORETYPE"]
elif {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= cpu_flags:
    config.environment["OPENBLAS_CORETYPE"] = (
        "Cooperlake" if "avx512_bf16" in cpu_flags else "SkylakeX")
elif {"avx2", "fma"} <= cpu_flags:
    config.environment["OPENBLAS_CORETYPE"] = "Haswell"
config.substitutions.append(("%ampc_src", config.ampc_src_root))
config.substitutions.append(("%ampc_obj_root", config.ampc_obj_root))
config.substitutions.append(
    ("%node_tests", "/usr/share/libonnx-testdata/data/node"))
# A command under a 500 MB address-space limit, for tests that a hostile
# model is refused before it makes gigabytes. ASan reserves terabytes of
# address space for its shadow, so the sanitized build runs it unlimited
# (the test still checks the refusal).
config.substitutions.append(
    ("%limit-memory",
     "" if getattr(config, "ampc_asan_runtime", "") else
     "prlimit --as=500000000"))
# Models torch exported at opset 6 with ONNX IR version 3 (initializers
# listed as graph inputs), from libonnx-testdata.
config.substitutions.append(
    ("%old_torch_tests", "/usr/share/libonnx-testdata/data"))
# The lit running this suite, for tests that ask lit what it discovers.
config.substitutions.append(
    ("%lit", sys.executable + " " + os.path.abspath(sys.argv[0])))

tool_dirs = [config.ampc_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["ampc", "ampc-opt", "ampc-translate", "ampc-embed", "ampc-conformance",
     "ampc-import-sweep"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.ampc_tools_dir, append_path=True)
# The compilers' precompiled headers and code objects (ampc's compile
# cache) live in the build folder: tests neither read nor fill the user's.
config.environment["AMPC_CACHE_DIR"] = os.path.join(
    config.ampc_obj_root, "ampc-cache")
# The Python modules shared by the tests' scripts and the benchmarks
# (ampc_testing; ampc_ctypes, the runtime binding's name in the GPU packs):
# every script imports them from here.
llvm_config.with_environment(
    "PYTHONPATH", os.path.join(config.ampc_src_root, "utils", "python"),
    append_path=True)
# The Python module (python/ampc).
llvm_config.with_environment(
    "PYTHONPATH", os.path.join(config.ampc_src_root, "python"),
    append_path=True)

# The order the CUDA execution runs threads and blocks in (docs/testing.md):
# `AMPC_CUDA_SIM_SEED=N lit ...` runs the cuda-sim tests under a random
# order of seed N.
if os.environ.get("AMPC_CUDA_SIM_SEED"):
    config.environment["AMPC_CUDA_SIM_SEED"] = os.environ["AMPC_CUDA_SIM_SEED"]
# `AMPC_CUDA_SIM_RACECHECK=1 lit ...` compiles every cuda-sim library with
# the race detector's instrumentation (docs/testing.md).
if os.environ.get("AMPC_CUDA_SIM_RACECHECK"):
    config.environment["AMPC_CUDA_SIM_RACECHECK"] = \
        os.environ["AMPC_CUDA_SIM_RACECHECK"]

# The CUDA execution's strict memory mode (docs/testing.md): a model's
# planned buffers are not zeroed at init, so a kernel that reads one before
# it is written turns to NaN. On unless AMPC_CUDA_SIM_STRICT_MEMORY=0.
config.environment["AMPC_CUDA_SIM_STRICT_MEMORY"] = os.environ.get(
    "AMPC_CUDA_SIM_STRICT_MEMORY", "1")

# `cuda-target`: the build has the CUDA target and the CUDA execution on the
# CPU (CUDA's headers were found when it was configured). A CPU-only build
# (docs/testing.md) has neither: the tests that compile a CUDA library
# (--target=cuda or cuda-sim, nvcc) say `REQUIRES: cuda-target` and are
# UNSUPPORTED there; the ones that only write CUDA source still run.
if getattr(config, "ampc_have_cuda", "ON").upper() in ("ON", "1", "TRUE",
                                                        "YES"):
    config.available_features.add("cuda-target")
# A second configure of this source tree (Tools/cpu-only-configure.test).
config.substitutions.append(("%cmake", getattr(config, "cmake_command",
                                               "cmake")))
config.substitutions.append(("%mlir_dir", getattr(config, "mlir_dir", "")))

# The CUDA target's tests compile with nvcc; they need no GPU. Without nvcc
# they fail (ampc: "no nvcc found"), they are never skipped: "every test
# model compiles with nvcc" needs the compiles. ampc finds nvcc as this does:
# $NVCC, then PATH, then /usr/local/cuda/bin/nvcc.
if os.environ.get("NVCC"):
    config.environment["NVCC"] = os.environ["NVCC"]
nvcc = (os.environ.get("NVCC") or shutil.which("nvcc") or
        "/usr/local/cuda/bin/nvcc")
# Always present, so that a test that still says `REQUIRES: nvcc` runs (and
# fails without nvcc) instead of being skipped.
config.available_features.add("nvcc")
# For tests that compile a translation unit with nvcc themselves.
config.substitutions.append(("%nvcc", nvcc))
if (not os.access(nvcc, os.X_OK) and
        "cuda-target" in config.available_features):
    lit_config.warning(
        "no nvcc ($NVCC, PATH, /usr/local/cuda/bin/nvcc): the CUDA target's "
        "tests (Target/Cuda, gpu/pack.test) will fail; install CUDA or set "
        "NVCC")
# `mpi`: the build has the MPI communicator (libampc_comm_mpi.so, issue 41)
# and mpirun runs here; %mpirun allows root (CI's containers run as root)
# and more ranks than cores.
if (getattr(config, "ampc_have_mpi", "").upper() in ("ON", "1", "TRUE",
                                                     "YES") and
        shutil.which("mpirun")):
    config.available_features.add("mpi")
# `nccl-sim`: the NCCL communicator built against the CUDA execution's NCCL
# (libampc_comm_nccl_sim.so: CUDA's headers with nccl.h, and MPI).
if ("mpi" in config.available_features and os.path.exists(
        os.path.join(config.ampc_obj_root, "lib", "libampc_comm_nccl_sim.so"))):
    config.available_features.add("nccl-sim")
config.substitutions.append((
    "%mpirun", "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
    "OMPI_MCA_rmaps_base_oversubscribe=1 mpirun"))
# strace: tests that count the files a run opens (Driver/model-read-once).
if shutil.which("strace"):
    config.available_features.add("strace")
# A CUDA driver: CUDA libraries can run here (given a device). The same
# test as ampc's default target: libcuda.so.1 loads.
import ctypes
try:
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass
