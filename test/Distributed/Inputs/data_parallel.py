"""Data-parallel training (issue 41): 2 ranks x batch B against 1 rank x 2B.

    data_parallel.py compile WORK [TARGET...]    compile the libraries
    data_parallel.py rank WORK [TARGET...]       one rank's runs (mpirun -np 2)
    data_parallel.py reference WORK [TARGET...]  the one-process runs
    data_parallel.py compare WORK [TARGET...]    the checks; one line each

TARGET: cpu (the default), cuda-sim or cuda-sim-nccl, each run the same
way; with cpu and another, compare also checks that the other's ranks
computed the CPU target's bits (data-parallel-cuda.test). A cuda-sim
library's ranks all-reduce through libampc_comm_mpi.so (AMPC_COMM_LIBRARY):
its device memory is host memory. cuda-sim-nccl is the same libraries on
the communicator the runtime picks for them, libampc_comm_nccl_sim.so (the
NCCL communicator built against the CUDA execution's NCCL; each rank on
its own simulated device); its one-process runs are cuda-sim's.

Runs are named by precision (fp32, fp16, bf16) and "overflow" (fp16, rank
1's batch at step 5 overflows, so both ranks must skip it). Each rank trains STEPS
AdamW steps of an MLP on its half of every batch of 2B rows (rank r takes
rows r*B..r*B+B-1, the shard DistributedSampler's contiguous split gives),
and saves its parameters, losses, scaler state and the bytes its
all-reduces sent. The reference is the library compiled without
--data-parallel at batch 2B, trained on the whole batches in one process;
the data-parallel library run alone must equal, bit for bit, the one
compiled without the flag at batch B.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

STEPS = 20
B = 4
FEATURES, CLASSES = 4, 3

MLP = """<ir_version: 8, opset_import: ["" : 17]>
mlp (float[batch,4] features) => (float[batch,3] logits) <
  float[8,4] fc1_weight = {0.1,-0.2,0.3,0.05,-0.1,0.2,0.0,0.4,0.3,0.1,-0.3,0.2,0.25,-0.5,0.1,0.1,-0.2,0.3,0.1,-0.1,0.05,0.1,0.2,-0.3,0.4,-0.1,0.3,0.2,-0.25,0.15,0.1,0.05},
  float[8] fc1_bias = {0.0,0.1,-0.1,0.0,0.2,0.0,-0.2,0.1},
  float[3,8] fc2_weight = {0.2,-0.1,0.3,0.0,0.1,-0.2,0.25,0.05,-0.3,0.2,0.1,0.4,-0.1,0.0,0.1,0.2,0.1,0.3,-0.2,0.1,0.2,-0.1,0.0,0.3},
  float[3] fc2_bias = {0.01,-0.02,0.03}
> {
  h = Gemm <transB = 1> (features, fc1_weight, fc1_bias)
  r = Relu (h)
  logits = Gemm <transB = 1> (r, fc2_weight, fc2_bias)
}
"""

PRECISION = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16",
             "overflow": "fp16"}


def batches():
    rng = np.random.default_rng(7)
    for _ in range(STEPS):
        x = rng.standard_normal((2 * B, FEATURES)).astype(np.float32)
        y = rng.integers(0, CLASSES, 2 * B).astype(np.int64)
        yield x, y


def suffix(target):
    """What names a target's files: nothing for the CPU target."""
    return "" if target == "cpu" else "-" + target


# The communicator plugin (AMPC_COMM_LIBRARY) of each target's ranks;
# None: the runtime's choice (MPI for the CPU target, for a cuda-sim
# library the NCCL communicator on the CUDA execution's NCCL). cuda-sim
# runs its libraries on MPI's instead; cuda-sim-nccl is cuda-sim's
# libraries (compiled, and run alone, once) on the runtime's choice.
COMM = {"cpu": None, "cuda-sim": "libampc_comm_mpi.so", "cuda-sim-nccl": None}
VARIANTS = {"cuda-sim-nccl": "cuda-sim"}


def compiled(target):
    return VARIANTS.get(target, target)


def comm_library(target):
    """AMPC_COMM_LIBRARY for `target`'s ranks, or None (the runtime's)."""
    if not COMM[target]:
        return None
    bin_dir = os.path.dirname(shutil.which("ampc"))
    return os.path.join(bin_dir, "..", "lib", COMM[target])


def ampc_compile(work, name, batch, data_parallel, kind, target="cpu"):
    command = ["ampc", os.path.join(work, "mlp.onnxtext"),
               "-o", os.path.join(work, "%s-%s%s.so" % (name, kind,
                                                        suffix(target))),
               "--target=" + target, "--batch", str(batch),
               "--precision=" + PRECISION[name], "--optimizer=adamw"]
    if data_parallel:
        command.append("--data-parallel")
    subprocess.run(command, check=True)


def train(name, library, rows):
    """STEPS steps on `rows` of every batch; the overflow run puts a huge
    feature in rank 1's rows of step 5 (rows B.. of the batch)."""
    import ampc
    model = ampc.Model(library)
    losses = []
    for step, (x, y) in enumerate(batches()):
        if name == "overflow" and step == 5:
            x = x.copy()
            x[B + 1, 0] = np.float32(1e30)
        loss = model.train_step(x[rows], y[rows])
        losses.append(float(np.asarray(loss)))
    result = {p: np.asarray(model.get_parameter(p)).tolist()
              for p in ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias")}
    result["losses"] = losses
    result["skipped"] = (model.scaler_state()["skipped_steps"]
                         if PRECISION[name] == "fp16" else 0)
    result.update(model.data_parallel())
    return result


def load_target(work, name, kind, target="cpu"):
    with open(os.path.join(work, "%s-%s%s.json" % (name, kind,
                                                   suffix(target)))) as f:
        return json.load(f)


PARAMETERS = ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias")


def difference(a, b):
    return max(float(np.max(np.abs(np.asarray(a[p], np.float64) -
                                   np.asarray(b[p], np.float64))))
               for p in PARAMETERS)


def compare(work, target):
    def load(work, name, kind):
        return load_target(work, name, kind,
                           target if kind.startswith("rank") else
                           compiled(target))
    if target != "cpu":
        print(target + ":")
    for name in ("fp32", "fp16", "bf16"):
        r0, r1 = load(work, name, "rank0"), load(work, name, "rank1")
        reference = load(work, name, "reference")
        alone, plain = load(work, name, "alone"), load(work, name, "plain")
        assert (r0["rank"], r0["world_size"], r1["rank"]) == (0, 2, 1), r0
        assert difference(r0, r1) == 0, "ranks differ"
        d = difference(r0, reference)
        mean_loss = np.mean([r0["losses"], r1["losses"]], axis=0)
        dl = float(np.max(np.abs(mean_loss - np.asarray(reference["losses"]))))
        tolerance = {"fp32": 1e-6, "fp16": 2e-3, "bf16": 1e-2}[name]
        assert d <= tolerance and dl <= tolerance, (name, d, dl)
        assert r0["skipped"] == reference["skipped"], (r0, reference)
        assert difference(alone, plain) == 0 and \
            alone["losses"] == plain["losses"], "alone differs"
        assert alone["world_size"] == 1 and alone["bytes_all_reduced"] == 0
        print("%s: 2 ranks x %d against 1 x %d, %d AdamW steps: parameters "
              "within %.1e (tolerance %.0e), mean loss within %.1e; ranks "
              "bit-identical; %d skipped steps as the reference; alone "
              "bit-identical to the library without --data-parallel"
              % (name, B, 2 * B, STEPS, d, tolerance, dl, r0["skipped"]))
    b32 = load(work, "fp32", "rank0")["bytes_all_reduced"]
    b16 = load(work, "fp16", "rank0")["bytes_all_reduced"]
    bbf = load(work, "bf16", "rank0")["bytes_all_reduced"]
    assert b16 * 2 == b32 and bbf * 2 == b32, (b32, b16, bbf)
    print("bytes all-reduced per rank per step: fp32 %d, fp16 %d, bf16 %d"
          % (b32 // STEPS, b16 // STEPS, bbf // STEPS))
    r0, r1 = load(work, "overflow", "rank0"), load(work, "overflow", "rank1")
    assert r0["skipped"] == 1 and r1["skipped"] == 1, (r0, r1)
    assert difference(r0, r1) == 0
    print("overflow on rank 1 only at step 5: skipped on both ranks (%d, %d),"
          " ranks bit-identical" % (r0["skipped"], r1["skipped"]))


def compare_targets(work, target):
    """The CUDA execution's ranks against the CPU target's, bit for bit."""
    for name in ("fp32", "fp16", "bf16", "overflow"):
        for rank in ("rank0", "rank1"):
            a = load_target(work, name, rank, "cpu")
            b = load_target(work, name, rank, target)
            assert difference(a, b) == 0 and a["losses"] == b["losses"] and \
                a["skipped"] == b["skipped"], (name, rank, difference(a, b))
    print("%s ranks bit-identical to the CPU target's ranks (fp32, fp16, "
          "bf16, overflow)" % target)


def main():
    mode, work = sys.argv[1], sys.argv[2]
    targets = sys.argv[3:] or ["cpu"]
    if mode == "compile":
        with open(os.path.join(work, "mlp.onnxtext"), "w") as f:
            f.write(MLP)
        for target in dict.fromkeys(compiled(t) for t in targets):
            for name in ("fp32", "fp16", "bf16", "overflow"):
                ampc_compile(work, name, B, True, "dp", target)
                if name != "overflow":
                    ampc_compile(work, name, 2 * B, False, "one", target)
                    ampc_compile(work, name, B, False, "plain", target)
        return
    if mode == "compare":
        for target in targets:
            compare(work, target)
        for target in targets:
            if target != "cpu" and "cpu" in targets:
                compare_targets(work, target)
        return
    # Each rank of a job on one host binds the device of its local rank.
    os.environ["AMPC_CUDA_SIM_DEVICES"] = "2"
    results = {}
    for target in targets:
        def library(name, kind):
            return os.path.join(work, "%s-%s%s.so" % (
                name, kind, suffix(compiled(target))))
        if comm_library(target):
            os.environ["AMPC_COMM_LIBRARY"] = comm_library(target)
        else:
            os.environ.pop("AMPC_COMM_LIBRARY", None)
        if mode == "reference" and target in VARIANTS:
            continue
        if mode == "rank":
            rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
            for name in ("fp32", "fp16", "bf16", "overflow"):
                results["%s-rank%d%s" % (name, rank, suffix(target))] = train(
                    name, library(name, "dp"), slice(rank * B, rank * B + B))
        elif mode == "reference":
            for name in ("fp32", "fp16", "bf16"):
                results[name + "-reference" + suffix(target)] = train(
                    name, library(name, "one"), slice(0, 2 * B))
                results[name + "-alone" + suffix(target)] = train(
                    name, library(name, "dp"), slice(0, B))
                results[name + "-plain" + suffix(target)] = train(
                    name, library(name, "plain"), slice(0, B))
        else:
            raise SystemExit("unknown mode " + mode)
    for key, result in results.items():
        with open(os.path.join(work, key + ".json"), "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
