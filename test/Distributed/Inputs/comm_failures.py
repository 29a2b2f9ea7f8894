"""Data-parallel failures (issue 41): mismatched libraries, a missing rank.

    comm_failures.py load LIB0 LIB1 ...  rank r loads LIBr (mpirun -np N);
                                         prints the load's result
    comm_failures.py stall LIB           2 ranks train; rank 1 stops before
                                         step 2 (sleeps 300 s); rank 0
                                         prints its step's error, the time
                                         it took and the next step's error
    comm_failures.py idle LIB            loads LIB, then sleeps 300 s
    comm_failures.py launch TIMEOUT CMD  runs CMD (the mpirun of `stall`)
                                         and prints how it ended: well before
                                         rank 1 wakes, or a hang
"""
import os
import subprocess
import sys
import time

import numpy as np


def rank():
    return int(os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ["RANK"])


def load(libraries):
    import ampc
    r = rank()
    try:
        ampc.Model(libraries[r])
        print("rank %d: loaded" % r, flush=True)
    except RuntimeError as error:
        print("rank %d: %s" % (r, error), flush=True)


def stall(library):
    import ampc
    r = rank()
    model = ampc.Model(library)
    x = np.ones((4, 4), np.float32)
    y = np.zeros(4, np.int64)
    for step in range(5):
        if r == 1 and step == 2:
            time.sleep(300)
        start = time.monotonic()
        try:
            model.train_step(x, y)
        except RuntimeError as error:
            seconds = time.monotonic() - start
            print("rank %d: step %d failed after %s: %s"
                  % (r, step, "2 to 10 s" if 2 <= seconds < 10 else
                     "%.1f s" % seconds, error), flush=True)
            try:
                model.train_step(x, y)
            except RuntimeError as again:
                print("rank %d: the next step: %s" % (r, again), flush=True)
            sys.exit(1)
    print("rank %d: trained" % r)


def launch(limit, command):
    start = time.monotonic()
    try:
        result = subprocess.run(command, timeout=float(limit),
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    except subprocess.TimeoutExpired as expired:
        print(expired.output or "")
        print("the job hung: still running after %s s" % limit)
        return 1
    sys.stdout.write(result.stdout)
    seconds = time.monotonic() - start
    print("the job ended with status %s after %s" % (
        "non-zero" if result.returncode else "0",
        "less than %s s" % limit if seconds < float(limit) else
        "%.0f s" % seconds))
    return 0


def main():
    mode = sys.argv[1]
    if mode == "load":
        load(sys.argv[2:])
    elif mode == "stall":
        stall(sys.argv[2])
    elif mode == "idle":
        import ampc
        ampc.Model(sys.argv[2])
        time.sleep(300)
    elif mode == "launch":
        sys.exit(launch(sys.argv[2], sys.argv[3:]))
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
