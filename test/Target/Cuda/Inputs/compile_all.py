"""Compiles every test model for the CUDA target with nvcc (no GPU needed).

For each model: the training library (the default --mode=train); a model
whose first output cannot take the default loss (the CPU target refuses the
training mode) is compiled with --mode=infer. A file that split-file splits
(the gradient checks) counts each of its .onnxtext parts. A model the CPU
target compiles in neither mode is a failure, as is any CUDA compile that
fails. Prints one line per model and ends with "N compiled, N failed, N
unsupported" where unsupported means the CUDA target refused an op it does
not have yet (the op is named); exit status 1 when one failed.
"""

import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    errors = [l for l in p.stderr.splitlines() if "error" in l]
    return p.returncode, errors[0] if errors else p.stderr.strip()


def compile_model(ampc, path, arch, out):
    base = os.path.join(out, os.path.basename(os.path.dirname(path)) + "_" +
                        os.path.splitext(os.path.basename(path))[0])
    cpu_errors = []
    for mode in ("train", "infer"):
        rc, err = run([ampc, path, "--mode=" + mode, "--target=cpu",
                       "--emit=mlir", "-o", os.devnull])
        if rc != 0:
            cpu_errors.append(err)
            continue  # this mode does not apply to the model
        rc, err = run([ampc, path, "--mode=" + mode, "--target=cuda",
                       "--gpu-arch=" + arch, "-o", base + "." + mode + ".so"])
        if rc == 0:
            return "compiled", mode, ""
        if "cannot compile" in err and "CUDA target" in err:
            return "unsupported", mode, err
        return "failed", mode, err
    return "failed", "", "the CPU target compiles it in neither mode: " + \
        cpu_errors[-1]


def parts(path, out):
    """The models in `path`: the file itself, or, for a file split-file
    splits (`#--- NAME` lines), each of its .onnxtext parts written to
    `out`."""
    with open(path) as f:
        lines = f.read().splitlines(keepends=True)
    if not any(l.startswith("#--- ") for l in lines):
        return [path]
    stem = os.path.splitext(os.path.basename(path))[0]
    models, current = [], None
    for line in lines:
        if line.startswith("#--- "):
            name = line[5:].strip()
            current = None
            if name.endswith(".onnxtext"):
                folder = os.path.join(out, "parts", stem)
                os.makedirs(folder, exist_ok=True)
                current = open(os.path.join(folder, name), "w")
                models.append(current.name)
        elif current:
            current.write(line)
    return models


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ampc", default="ampc")
    p.add_argument("--arch", default="sm_90a")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("models", nargs="+")
    args = p.parse_args()
    counts = {"compiled": 0, "failed": 0, "unsupported": 0}
    with tempfile.TemporaryDirectory() as out:
        models = []
        for path in sorted(args.models):
            models += [(path, m) for m in parts(path, out)]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(
                lambda pm: (pm, compile_model(args.ampc, pm[1], args.arch, out)),
                models))
    for (path, model), (status, mode, err) in results:
        counts[status] += 1
        name = os.path.relpath(path) + (
            "" if model == path else ":" + os.path.basename(model))
        print(f"{status.upper()}: {name}" + (f" ({mode})" if mode else "") +
              (f": {err}" if err else ""))
    print(f"{counts['compiled']} compiled, {counts['failed']} failed, "
          f"{counts['unsupported']} unsupported")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
