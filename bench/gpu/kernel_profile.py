"""Where ampc's CUDA training step spends its device time, run by run.sh in
a pack bench/gpu/pack.py built (GPU_SCRIPT=kernel_profile.py; a file named
profile.py in the pack would hide Python's own profile module from torch):
for each model's library, warm up, then torch.profiler (CUPTI: it sees
every kernel and copy the library launches, not only PyTorch's) over
--steps steps; prints each
kernel's device time per step, its calls per step and its share, largest
first, and the step's device time and launch count. The numbers say what to
make faster next (docs/benchmarks.md).

    GPU_SCRIPT=kernel_profile.py OUT/run.sh [--models gpt] [--steps 5] [--top 25]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    import torch
    import models as bm
    from ampc_ctypes import Model

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=None)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("SKIPPED: no CUDA device visible; nothing was profiled")
        return 0
    runtime = os.path.join(HERE, "libampc_runtime.so")
    names = bm.packed(HERE, args.models)
    stream = torch.cuda.Stream()
    for name in names:
        x, label = bm.example(name)
        model = Model(bm.library(HERE, name), runtime,
                      cuda_stream=stream.cuda_stream)
        inputs = {"input": x.numpy(), "label": label.numpy()}
        for _ in range(args.warmup):
            model.train_step(inputs, wait=False)
        model.synchronize()
        activities = [torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(args.steps):
                model.train_step(inputs, wait=False)
            model.synchronize()
        model.close()
        rows = []
        for e in prof.key_averages():
            t = getattr(e, "device_time_total", None)
            if t is None:
                t = e.cuda_time_total
            if t > 0:
                rows.append((t / args.steps / 1e3, e.count / args.steps, e.key))
        rows.sort(reverse=True)
        total = sum(r[0] for r in rows)
        launches = sum(r[1] for r in rows)
        print("## %s: %.3f ms of device time per step, %.0f kernels and "
              "copies per step" % (name, total, launches))
        print("| kernel or copy | ms/step | calls/step | share |")
        print("|---|---|---|---|")
        for ms, calls, key in rows[:args.top]:
            print("| %s | %.3f | %.0f | %.1f%% |" % (key[:90], ms, calls,
                                                    100 * ms / total))
        rest = rows[args.top:]
        if rest:
            print("| (%d others) | %.3f | %.0f | %.1f%% |" % (
                len(rest), sum(r[0] for r in rest), sum(r[1] for r in rest),
                100 * sum(r[0] for r in rest) / total))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
