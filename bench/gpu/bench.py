"""The GPU benchmark (issue 8), run by run.sh in a pack bench/gpu/pack.py
built: for each model, ampc's CUDA train_step against PyTorch eager AMP
(torch.autocast FP16, GradScaler, fused AdamW, zero_grad(set_to_none=True),
channels_last for the CNN) and torch.compile(mode="reduce-overhead") with
the same optimizer, from the same initial weights (read out of the ampc
library) on the same batch, on the device for all three (ampc's
train_step_device reads the torch CUDA tensors where they are; issue 37,
item 2); ampc's step from the host batch (packed into pinned staging and
copied on a copy stream) is timed too ("ampc host ms"). Each is warmed up,
then timed with CUDA events
around every step on one stream (ampc runs on that stream too): the median
of --steps steps. MFU = model FLOPs per step / (time x peak FP16 tensor
rate; --peak, default the H100/H200's 989.4 TFLOP/s). Peak memory: PyTorch's
max_memory_allocated (and reserved); ampc's the device memory its model
took (free memory before loading minus free memory after the steps).
Prints a table, writes --json.
"""
import argparse
import json
import os
import statistics
import sys

# The pack has this script, models.py, ampc_testing.py and ampc_ctypes.py in
# one folder.
HERE = os.path.dirname(os.path.abspath(__file__))


def timed(step, stream, warmup, steps):
    import torch
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    events = []
    for _ in range(steps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record(stream)
        step()
        b.record(stream)
        events.append((a, b))
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in events)


def main():
    import numpy as np
    import torch
    import models as bm
    from ampc_ctypes import Model
    from ampc_testing import amp_step

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=None)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--peak", type=float, default=989.4e12)
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--json", default=os.path.join(HERE, "results.json"))
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("SKIPPED: no CUDA device visible; nothing was measured")
        return 0
    runtime = os.path.join(HERE, "libampc_runtime.so")
    names = bm.packed(HERE, args.models)
    print("device: %s; torch %s (CUDA %s)" % (torch.cuda.get_device_name(0),
                                              torch.__version__,
                                              torch.version.cuda))
    stream = torch.cuda.Stream()
    rows = []
    for name in names:
        x, label = bm.example(name)
        torch.cuda.synchronize()
        free_before, _ = torch.cuda.mem_get_info()
        model = Model(bm.library(HERE, name), runtime,
                      cuda_stream=stream.cuda_stream)
        inputs = {"input": x.numpy(), "label": label.numpy()}
        if os.path.exists(os.path.join(HERE, name + ".zero-weights")):
            # Packed with zero weights (pack.py --zero-weights): PyTorch's
            # initial weights go into the library first.
            torch.manual_seed(0)
            for k, v in bm.module(name).state_dict().items():
                if k in {p.name for p in model.parameters}:
                    model.set_parameter(k, v.numpy())
        initial = {p.name: model.get_parameter(p.name) for p in model.parameters}
        with torch.cuda.stream(stream):
            on_device = [x.cuda(), label.cuda()]
            loss = torch.empty((), device="cuda")
            ampc_ms = timed(lambda: model.train_step_device(
                on_device, loss=loss, wait=False), stream, args.warmup,
                args.steps)
            ampc_host_ms = timed(lambda: model.train_step(inputs, wait=False),
                                 stream, args.warmup, args.steps)
        model.synchronize()
        free_after, _ = torch.cuda.mem_get_info()
        ampc_bytes = free_before - free_after
        model.close()

        def torch_run(compiled):
            m = bm.module(name)
            state = m.state_dict()
            for k, v in initial.items():
                state[k] = torch.from_numpy(np.array(v))
            m.load_state_dict(state)
            m = m.cuda().train()
            if name in bm.CNNS:
                m = m.to(memory_format=torch.channels_last)
            opt = torch.optim.AdamW(m.parameters(), fused=True, **bm.ADAMW)
            scaler = torch.amp.GradScaler("cuda")
            xd, yd = x.cuda(), label.cuda()
            if name in bm.CNNS:
                xd = xd.to(memory_format=torch.channels_last)
            forward = torch.compile(m, mode="reduce-overhead") if compiled else m

            def step():
                amp_step(forward, opt, scaler, xd, yd, bm.LOSS[name])

            torch.cuda.reset_peak_memory_stats()
            with torch.cuda.stream(stream):
                ms = timed(step, stream, args.warmup, args.steps)
            return (ms, torch.cuda.max_memory_allocated(),
                    torch.cuda.max_memory_reserved(), m)

        eager_ms, eager_alloc, eager_reserved, m = torch_run(False)
        flops = bm.step_flops(name, m)
        compile_ms = None
        if not args.no_compile:
            try:
                compile_ms = torch_run(True)[0]
            except Exception as e:  # report, do not hide
                print("%s: torch.compile failed: %s" % (name, str(e)[:200]))
        torch.cuda.empty_cache()
        rows.append(dict(model=name, ampc_ms=ampc_ms,
                         ampc_host_ms=ampc_host_ms, eager_ms=eager_ms,
                         compile_ms=compile_ms, flops=flops,
                         ampc_mfu=flops / (ampc_ms * 1e-3) / args.peak,
                         eager_mfu=flops / (eager_ms * 1e-3) / args.peak,
                         ampc_bytes=ampc_bytes, eager_allocated=eager_alloc,
                         eager_reserved=eager_reserved))
    print("| model | ampc ms | ampc host ms | eager AMP ms | compile ms | "
          "ampc/eager | "
          "ampc/compile | MFU ampc | MFU eager | ampc MiB | eager MiB "
          "(allocated / reserved) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        c = r["compile_ms"]
        print("| %s | %.3f | %.3f | %.3f | %s | %.2f | %s | %.1f%% | %.1f%% | "
              "%.0f | %.0f / %.0f |" % (
                  r["model"], r["ampc_ms"], r["ampc_host_ms"], r["eager_ms"],
                  "%.3f" % c if c else "n/a", r["ampc_ms"] / r["eager_ms"],
                  "%.2f" % (r["ampc_ms"] / c) if c else "n/a",
                  100 * r["ampc_mfu"], 100 * r["eager_mfu"],
                  r["ampc_bytes"] / 2**20, r["eager_allocated"] / 2**20,
                  r["eager_reserved"] / 2**20))
    with open(args.json, "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(0),
                       torch=torch.__version__, rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
