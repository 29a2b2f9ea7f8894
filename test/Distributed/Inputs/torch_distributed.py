"""Data parallel inside a torch.distributed job (issue 41): the MLP of
data_parallel.py compiled with --data-parallel, trained by 2 ranks x batch B
in a gloo process group on the CPU, each `ampc.Model(library)` taking the
default group, against the library without the flag at batch 2B in one
process. The ranks are started by torch.multiprocessing with a file://
rendezvous in WORK (Debian's torchrun of torch 1.13 fails on Python 3.12
before starting any: its `redirects` default is None).

    torch_distributed.py compile WORK     compile the libraries
    torch_distributed.py ranks WORK       the 2 ranks' runs
    torch_distributed.py compare WORK     the reference runs and the checks

Besides the training runs each rank checks that a library compiled without
--data-parallel refuses an explicit group, and that a failing all_reduce
(the group destroyed) fails the step with torch's message.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_parallel as dp  # noqa: E402

NAMES = ("fp32", "fp16", "bf16")


def compile_all(work):
    with open(os.path.join(work, "mlp.onnxtext"), "w") as f:
        f.write(dp.MLP)
    for name in NAMES:
        dp.ampc_compile(work, name, dp.B, True, "dp")
        dp.ampc_compile(work, name, 2 * dp.B, False, "one")


def rank(r, work):
    import torch.distributed as dist
    import ampc
    dist.init_process_group(
        "gloo", init_method="file://" + os.path.join(work, "rendezvous"),
        rank=r, world_size=2)
    results = {}
    for name in NAMES:
        results["%s-rank%d" % (name, r)] = dp.train(
            name, os.path.join(work, name + "-dp.so"),
            slice(r * dp.B, r * dp.B + dp.B))
    checks = {}
    try:
        ampc.Model(os.path.join(work, "fp32-one.so"),
                   process_group=dist.group.WORLD)
        checks["refused"] = "not refused"
    except ValueError as error:
        checks["refused"] = str(error).replace(work, "WORK")
    model = ampc.Model(os.path.join(work, "fp32-dp.so"))
    dist.destroy_process_group()
    x = np.zeros((dp.B, dp.FEATURES), np.float32)
    y = np.zeros(dp.B, np.int64)
    try:
        model.train_step(x, y)
        checks["failure"] = "no failure"
    except ampc.AmpcError as error:
        checks["failure"] = str(error).splitlines()[0]
    results["checks-rank%d" % r] = checks
    for key, result in results.items():
        with open(os.path.join(work, key + ".json"), "w") as f:
            json.dump(result, f)


def compare(work):
    for name in NAMES:
        reference = dp.train(name, os.path.join(work, name + "-one.so"),
                             slice(0, 2 * dp.B))
        r0, r1 = (dp.load_target(work, name, "rank0"),
                  dp.load_target(work, name, "rank1"))
        assert (r0["rank"], r0["world_size"], r1["rank"],
                r1["world_size"]) == (0, 2, 1, 2), r0
        assert dp.difference(r0, r1) == 0, "ranks differ"
        d = dp.difference(r0, reference)
        mean_loss = np.mean([r0["losses"], r1["losses"]], axis=0)
        dl = float(np.max(np.abs(mean_loss - np.asarray(reference["losses"]))))
        tolerance = {"fp32": 1e-6, "fp16": 2e-3, "bf16": 1e-2}[name]
        assert d <= tolerance and dl <= tolerance, (name, d, dl)
        assert r0["skipped"] == reference["skipped"], (r0, reference)
        print("%s: 2 ranks x %d (torch.distributed, gloo) against 1 x %d, %d AdamW "
              "steps: parameters within %.1e (tolerance %.0e), mean loss "
              "within %.1e; ranks bit-identical; %d bytes all-reduced per "
              "rank per step"
              % (name, dp.B, 2 * dp.B, dp.STEPS, d, tolerance, dl,
                 r0["bytes_all_reduced"] // dp.STEPS))
    for r in (0, 1):
        with open(os.path.join(work, "checks-rank%d.json" % r)) as f:
            checks = json.load(f)
        print("rank %d: %s" % (r, checks["refused"]))
        print("rank %d: %s" % (r, checks["failure"]))


def ranks(work):
    import torch.multiprocessing as mp
    mp.spawn(rank, args=(work,), nprocs=2)


def main():
    mode, work = sys.argv[1], sys.argv[2]
    {"compile": compile_all, "ranks": ranks, "compare": compare}[mode](work)


if __name__ == "__main__":
    main()
