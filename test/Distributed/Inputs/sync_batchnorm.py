"""--sync-batchnorm (issue 41): a small CNN with BatchNorm, 2 ranks x batch B
with --data-parallel --sync-batchnorm against 1 rank x batch 2B without
either, 20 AdamW steps.

    sync_batchnorm.py compile WORK     export the CNN, compile the libraries
    sync_batchnorm.py rank WORK        one rank's runs (mpirun -np 2)
    sync_batchnorm.py reference WORK   the one-process runs and torch's
    sync_batchnorm.py compare WORK     the checks; one line each

Each rank trains on its half of every batch of 2B images (rank r takes rows
r*B..r*B+B-1). Compared: every parameter and running statistic of the
state_dict (running_mean, running_var; num_batches_tracked exactly). The
libraries: "sync" (--data-parallel --sync-batchnorm, batch B), "one" (no
flag, batch 2B), "plain" (no flag, batch B: the sync library run alone must
equal it bit for bit) and, at fp32, "ddp" (--data-parallel alone, each
rank's own statistics as DDP keeps them: it must differ from the reference,
or the test would not see a missing synchronisation). The torch reference
is the same module trained in one process at batch 2B with plain
BatchNorm2d: what torch.nn.SyncBatchNorm over 2 ranks of B computes by
definition (torch 1.13's SyncBatchNorm itself runs on CUDA tensors only).
"""
import concurrent.futures
import os
import subprocess
import sys

import numpy as np

import ampc_testing

STEPS = 20
B = 4
CHANNELS, SIZE, CLASSES = 2, 4, 3
NAMES = ("fp32", "fp16", "bf16")
TOLERANCE = {"fp32": 1e-6, "fp16": 2e-3, "bf16": 1e-2}
# torch's kernels against ampc's, both FP32 (different summation orders).
TORCH_TOLERANCE = 1e-6


def net():
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            # No bias before BatchNorm (its gradient is 0 up to rounding,
            # which AdamW's normalisation would turn into steps of lr).
            self.conv = torch.nn.Conv2d(CHANNELS, 4, 3, padding=1,
                                        bias=False)
            self.bn = torch.nn.BatchNorm2d(4)
            self.fc = torch.nn.Linear(4 * SIZE * SIZE, CLASSES)

        def forward(self, x):
            return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))

    torch.manual_seed(3)
    return Net()


def batches():
    rng = np.random.default_rng(11)
    for _ in range(STEPS):
        # Channels of different means and spreads on the two halves, so
        # each rank's statistics differ from the whole batch's.
        x = rng.standard_normal((2 * B, CHANNELS, SIZE, SIZE)).astype(
            np.float32)
        x[B:] = x[B:] * 2.0 + 0.5
        y = rng.integers(0, CLASSES, 2 * B).astype(np.int64)
        yield x, y


def library(work, name, kind):
    return os.path.join(work, "%s-%s.so" % (name, kind))


def compile_all(work):
    import torch
    import ampc
    ampc.export(net(), (torch.zeros(B, CHANNELS, SIZE, SIZE),),
                os.path.join(work, "cnn.onnx"), input_names=["x"],
                output_names=["logits"], dynamic_batch=True)
    kinds = {"sync": (B, ["--data-parallel", "--sync-batchnorm"]),
             "one": (2 * B, []), "plain": (B, []),
             "ddp": (B, ["--data-parallel"])}
    commands = [["ampc", os.path.join(work, "cnn.onnx"), "-o",
                 library(work, name, kind), "--batch", str(batch),
                 "--precision=" + name, "--optimizer=adamw",
                 "--target=cpu"] + flags
                for name in NAMES for kind, (batch, flags) in kinds.items()
                if name == "fp32" or kind in ("sync", "one")]
    # Several at once where there are cores for them.
    with concurrent.futures.ThreadPoolExecutor(
            min(4, os.cpu_count() or 1)) as pool:
        for done in pool.map(lambda c: subprocess.run(c, check=True),
                             commands):
            pass


def train(path, rows):
    import ampc
    model = ampc.Model(path)
    losses = []
    for x, y in batches():
        losses.append(float(np.asarray(model.train_step(x[rows], y[rows]))))
    result = {k: np.asarray(v).tolist() for k, v in model.state_dict().items()}
    result["losses"] = losses
    result.update(model.data_parallel())
    return result


def train_torch(work):
    """The torch module from the state the ONNX file holds: torch 1.13's
    training-mode export traces a forward that moves the running
    statistics before they are written (running_var 0.9 after the zero
    example batch), so the file's start is not the module's."""
    import torch
    import ampc
    start = ampc.Model(library(work, "fp32", "one")).state_dict()
    model = net()
    model.load_state_dict({k: torch.from_numpy(np.array(v))
                           for k, v in start.items()})
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3,
                                  weight_decay=0.01)
    losses = []
    for x, y in batches():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)),
                                                 torch.from_numpy(y))
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    result = {k: v.detach().numpy().tolist()
              for k, v in model.state_dict().items()}
    result["losses"] = losses
    return result


save, load = ampc_testing.save_results, ampc_testing.load_result


def tensors(result):
    return {k: np.asarray(v, np.float64) for k, v in result.items()
            if k not in ("losses", "rank", "world_size", "bytes_all_reduced")}


def difference(a, b, which=None):
    """The largest difference over the entries named `which` (a predicate
    on the name; every entry by default) of the state_dicts."""
    ta, tb = tensors(a), tensors(b)
    assert ta.keys() == tb.keys(), (sorted(ta), sorted(tb))
    return max(float(np.max(np.abs(ta[k] - tb[k]))) for k in ta
               if which is None or which(k))


def running(key):
    return "running_" in key


def compare(work):
    reference_torch = load(work, "torch")
    for name in NAMES:
        r0, r1 = load(work, name + "-rank0"), load(work, name + "-rank1")
        reference = load(work, name + "-reference")
        assert (r0["rank"], r0["world_size"], r1["rank"]) == (0, 2, 1), r0
        assert difference(r0, r1) == 0 and tensors(r0).keys() == \
            tensors(r1).keys(), "ranks differ"
        assert any(running(k) for k in tensors(r0)), sorted(tensors(r0))
        tolerance = TOLERANCE[name]
        d = difference(r0, reference)
        dr = difference(r0, reference, running)
        assert d <= tolerance, (name, d)
        line = ("%s: 2 ranks x %d --sync-batchnorm against 1 x %d, %d AdamW "
                "steps: parameters and running statistics within %.1e "
                "(running statistics %.1e; tolerance %.0e); ranks "
                "bit-identical" % (name, B, 2 * B, STEPS, d, dr, tolerance))
        if name == "fp32":
            alone, plain = load(work, "fp32-alone"), load(work, "fp32-plain")
            assert difference(alone, plain) == 0 and \
                alone["losses"] == plain["losses"], "alone differs"
            assert alone["world_size"] == 1 and \
                alone["bytes_all_reduced"] == 0, alone
            line += ("; alone bit-identical to the library without "
                     "--data-parallel")
            dt = difference(reference_torch, reference)
            ds = difference(reference_torch, r0)
            assert dt <= TORCH_TOLERANCE and ds <= TORCH_TOLERANCE, (dt, ds)
            line += ("; torch BatchNorm2d at %d within %.1e (tolerance %.0e)"
                     % (2 * B, ds, TORCH_TOLERANCE))
        print(line)
    d0, d1 = load(work, "fp32-ddp-rank0"), load(work, "fp32-ddp-rank1")
    reference = load(work, "fp32-reference")
    dd = difference(d0, reference, running)
    assert dd > 100 * TOLERANCE["fp32"], dd
    assert difference(d0, d1, running) > 0
    print("fp32 without --sync-batchnorm (per-rank statistics): running "
          "statistics %.1e from the reference, the ranks' differ" % dd)
    sync, ddp = load(work, "fp32-rank0"), load(work, "fp32-ddp-rank0")
    extra = (sync["bytes_all_reduced"] - ddp["bytes_all_reduced"]) // STEPS
    # One BatchNorm of 4 channels: forward (mean, M2) and backward (two
    # sums), each gathered from 2 ranks in FP32.
    print("bytes all-reduced per rank per step for the BatchNorm: %d" % extra)


def main():
    mode, work = sys.argv[1], sys.argv[2]
    if mode == "compile":
        compile_all(work)
        return
    if mode == "compare":
        compare(work)
        return
    results = {}
    if mode == "rank":
        rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
        rows = slice(rank * B, rank * B + B)
        for name in NAMES:
            results["%s-rank%d" % (name, rank)] = train(
                library(work, name, "sync"), rows)
        results["fp32-ddp-rank%d" % rank] = train(
            library(work, "fp32", "ddp"), rows)
    elif mode == "reference":
        for name in NAMES:
            results[name + "-reference"] = train(library(work, name, "one"),
                                                 slice(0, 2 * B))
        results["fp32-alone"] = train(library(work, "fp32", "sync"),
                                      slice(0, B))
        results["fp32-plain"] = train(library(work, "fp32", "plain"),
                                      slice(0, B))
        results["torch"] = train_torch(work)
    else:
        raise SystemExit("unknown mode " + mode)
    save(work, results)


if __name__ == "__main__":
    main()
