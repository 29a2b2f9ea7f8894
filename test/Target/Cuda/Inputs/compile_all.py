"""Compiles every test model for the CUDA target with nvcc (no GPU needed).

For each model: the training library (the default --mode=train); a model
whose first output cannot take the default loss (the CPU target refuses the
training mode) is compiled with --mode=infer. A file that split-file splits
(the gradient checks) counts each of its .onnxtext parts. A model the CPU
target compiles in neither mode is a failure, as is any CUDA compile that
fails. The models' sources compile 25 to a library (--per-library), each
in a namespace of its own, a library that fails one model at a time.
Prints one line per model and ends with "N compiled, N failed, N
unsupported" where unsupported means the CUDA target refused an op it does
not have yet (the op is named); exit status 1 when one failed. A model
whose source gives one thread a loop over a whole row or column
(parallelism_check.py) fails too.
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


def emit_model(ampc, path, index, out):
    """The CUDA source of one model, its symbols suffixed `_m<index>` so that
    many compile together: (status, mode, error, source path)."""
    cpu_errors = []
    for mode in ("train", "infer"):
        rc, err = run([ampc, path, "--mode=" + mode, "--target=cpu",
                       "--emit=mlir", "-o", "-"])
        if rc != 0:
            cpu_errors.append(err)
            continue  # this mode does not apply to the model
        source = os.path.join(out, f"m{index}.cu")
        rc, err = run([ampc, path, "--mode=" + mode, "--target=cuda",
                       "--emit=cuda", f"--symbol-suffix=_m{index}",
                       "-o", source])
        if rc == 0:
            return "compiled", mode, "", source
        if "cannot compile" in err and "CUDA target" in err:
            return "unsupported", mode, err, None
        return "failed", mode, err, None
    return "failed", "", "the CPU target compiles it in neither mode: " + \
        cpu_errors[-1], None


def compile_sources(ampc, sources, library, flags):
    """Compiles generated sources (each with its own --symbol-suffix) into
    one library with `ampc SOURCE -o LIBRARY` (the compiler as ampc runs
    it): each source in a namespace of its own, their #include lines first,
    so that the compiler parses the kernel headers once for all of them.
    Returns (rc, error)."""
    includes, bodies = [], []
    for source in sources:
        namespace = "ampc_" + os.path.splitext(os.path.basename(source))[0]
        bodies.append(f"namespace {namespace} {{\n")
        with open(source) as f:
            for line in f:
                # ampc compiles a source's code, data and pieces apart at
                # its marker lines, which would cut the namespace: one
                # source alone has one data marker, and ampc would split it.
                if line.startswith("// ---- ampc: "):
                    continue
                if line.startswith("#include"):
                    if line not in includes:
                        includes.append(line)
                else:
                    bodies.append(line)
        bodies.append(f"}} // namespace {namespace}\n")
    combined = os.path.splitext(library)[0] + os.path.splitext(sources[0])[1]
    with open(combined, "w") as f:
        f.writelines(includes + ["\n"] + bodies)
    return run([ampc, combined, "-o", library] + flags)


def compile_batches(ampc, sources, per_library, flags, prefix, pool):
    """Compiles {key: source} into libraries of up to `per_library` sources
    each, on `pool`; a library that fails is compiled again one source at a
    time, so that the failure is the source's own. Returns {key: (library,
    error)}, error "" where it compiled."""
    keys = list(sources)
    batches = [keys[k:k + per_library] for k in range(0, len(keys), per_library)]
    result = {}

    def one(numbered):
        number, batch = numbered
        library = f"{prefix}{number}.so"
        rc, err = compile_sources(ampc, [sources[k] for k in batch], library,
                                  flags)
        if rc == 0:
            return [(k, (library, "")) for k in batch]
        if len(batch) == 1:
            return [(batch[0], (None, err))]
        done = []
        for k in batch:
            alone = os.path.splitext(sources[k])[0] + ".alone.so"
            rc, err = compile_sources(ampc, [sources[k]], alone, flags)
            done.append((k, (alone, "") if rc == 0 else (None, err)))
        return done
    for pairs in pool.map(one, enumerate(batches)):
        result.update(pairs)
    return result, len(batches)


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
    p.add_argument("--per-library", type=int, default=25,
                   help="models compiled into one library (1: each alone)")
    p.add_argument("models", nargs="+")
    args = p.parse_args()
    counts = {"compiled": 0, "failed": 0, "unsupported": 0}
    with tempfile.TemporaryDirectory() as out:
        models = []
        for path in sorted(args.models):
            models += [(path, m) for m in parts(path, out)]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            emitted = list(pool.map(
                lambda im: emit_model(args.ampc, im[1][1], im[0], out),
                enumerate(models)))
            results = [[status, mode, err] for status, mode, err, _ in emitted]
            # No kernel gives one thread a whole row (issue 37, item 9):
            # parallelism_check.py's rule, on the sources just emitted.
            import parallelism_check
            for index, e in enumerate(emitted):
                if e[0] == "compiled":
                    offences, _ = parallelism_check.check(e[3])
                    if offences:
                        results[index][0] = "failed"
                        results[index][2] = "serial row work: " + offences[0]
            ready = {i: e[3] for i, e in enumerate(emitted)
                     if e[0] == "compiled"}
            compiled, libraries = compile_batches(
                args.ampc, ready, args.per_library,
                ["--target=cuda", "--gpu-arch=" + args.arch],
                os.path.join(out, "b"), pool)
            for index, (_, err) in compiled.items():
                if err:
                    results[index][0] = "failed"
                    results[index][2] = err
        results = list(zip(models, results))
        print(f"{libraries} libraries")
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
