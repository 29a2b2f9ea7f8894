"""GEMM algorithms timed (issue 37, item 3) under the CUDA execution on the
CPU: a --target=cuda-sim training library trained 3 steps with tuning on
(the default), off (AMPC_CUDA_GEMM_TUNING=0), and with the heuristic's
candidates made to fail (AMPC_CUDA_SIM_FAILING_ALGO, read at each
cublasLtMatmul; the CUDA execution offers 3 candidates per GEMM that compute
the same bits). Prints one line per run: the cuBLASLt GEMMs and CUDA graph
launches each step ran (the CUDA execution's counters), whether its losses
and parameters are the tuned run's bit for bit; or the error.

    gemm_tuning.py LIBRARY
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from launch_count import read_counters, simulator  # noqa: E402
from sim_vs_cpu import inputs_for  # noqa: E402


def run(path, tuning, failing):
    from ampc.runtime import AmpcError, Model
    os.environ["AMPC_CUDA_GEMM_TUNING"] = "1" if tuning else "0"
    os.environ["AMPC_CUDA_SIM_FAILING_ALGO"] = failing
    with Model(path) as model:
        lib = simulator()
        inputs = inputs_for(model, 7)
        steps, losses = [], []
        try:
            for _ in range(3):
                lib.ampc_cudasim_counters_reset()
                losses.append(float(model.train_step(inputs)))
                counts = read_counters(lib)
                steps.append("%d gemms %d graphs" % tuple(
                    sum(c for (k, _), c in counts.items() if k == kind)
                    for kind in ("gemm", "graph")))
        except AmpcError as e:
            return None, str(e)
        params = [model.get_parameter(p.name).tobytes()
                  for p in model.parameters]
    return (losses, params), ", ".join(steps)


def main():
    path = sys.argv[1]
    reference, _ = run(path, True, "")
    for tuning in (True, False):
        for failing in ("", "0", "1,2", "0,1,2"):
            result, text = run(path, tuning, failing)
            if result is not None:
                text += "; " + ("bit-identical" if result == reference
                                else "DIFFERENT")
            print("tuning %s, failing '%s': %s" % (
                "on" if tuning else "off", failing, text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
