"""NumPy reference of ampc's FP8 numerics (include/ampc/Kernels/Common/Float8.h).

Written from the formats' definitions, not from Float8.h and not with
ml_dtypes:

  decode   (-1)^s * 2^(e - bias) * (1 + m / 2^M), subnormals m * 2^(1-bias-M),
           E4M3 (FN): S.1111.111 NaN, no infinity; E5M2: exponent 31 is
           infinity (m = 0) or NaN.
  encode   the nearest of the sorted finite FP8 magnitudes, by comparing the
           FP32 value (exact in float64) with the exact float64 midpoint of
           its two neighbours; a tie goes to the even code. One magnitude
           past the largest finite one (the next value if the exponent range
           went on: 480 in E4M3, 65536 in E5M2) stands for overflow:
           saturating gives +-max (an infinity too), non-saturating NaN
           (E4M3) or infinity (E5M2). NaN gives the quiet NaN (0x7F E4M3,
           0x7E E5M2) with its sign; zero keeps its sign.
  recipe   Transformer Engine's delayed scaling in the order docs/precision.md
           states, in NumPy float32 arithmetic (np.roll, np.nanmax).

Usage: fp8_reference.py TABLES numerics|recipe [--steps N]
TABLES is the compiled test/Target/Cpu/Inputs/fp8_tables.cpp.
"""

import argparse
import subprocess
import sys

import numpy as np

FORMATS = {
    # name: mantissa bits, bias, largest finite code, NaN code, overflow code
    "e4m3": dict(M=3, bias=7, max_code=0x7E, nan=0x7F, overflow=0x7F),
    "e5m2": dict(M=2, bias=15, max_code=0x7B, nan=0x7E, overflow=0x7C),
}


def formula(code, f):
    """The magnitude a code's bits stand for, ignoring NaN/infinity codes."""
    e = (code & 0x7F) >> f["M"]
    m = code & ((1 << f["M"]) - 1)
    if e == 0:
        return m * 2.0 ** (1 - f["bias"] - f["M"])
    return 2.0 ** (e - f["bias"]) * (1 + m / 2.0 ** f["M"])


def decode(code, f):
    magnitude = code & 0x7F
    sign = -1.0 if code & 0x80 else 1.0
    if magnitude > f["max_code"]:
        if magnitude == f["overflow"] and f["overflow"] != f["nan"]:
            return sign * np.inf
        return np.nan if sign > 0 else -np.nan
    return sign * formula(code, f)


def magnitudes(f):
    """Finite magnitudes by code 0..max_code, then the overflow stand-in."""
    return np.array([formula(c, f) for c in range(f["max_code"] + 2)],
                    dtype=np.float64)


def encode(values32, f, saturate):
    table = magnitudes(f)
    out = np.empty(len(values32), dtype=np.int64)
    for k, v in enumerate(values32):
        sign = 0x80 if np.signbit(v) else 0
        if np.isnan(v):
            out[k] = sign | f["nan"]
            continue
        a = abs(float(v))
        overflow = sign | (f["max_code"] if saturate else f["overflow"])
        if np.isinf(v) or a > table[-1]:
            out[k] = overflow
            continue
        i = int(np.searchsorted(table, a, side="right")) - 1
        if table[i] != a:
            mid = (table[i] + table[i + 1]) / 2  # exact: few significant bits
            if a > mid or (a == mid and i % 2 == 1):
                i += 1
        out[k] = overflow if i > f["max_code"] else sign | i
    return out


def bits32(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def sweep():
    """FP32 values around every representable FP8 neighbourhood."""
    values = []
    for f in FORMATS.values():
        t = magnitudes(f)
        mids = (t[:-1] + t[1:]) / 2
        for group in (t, mids):
            g = group.astype(np.float32)
            values += [g, np.nextafter(g, np.float32(np.inf)),
                       np.nextafter(g, np.float32(0))]
    special = np.array([0.0, np.inf, np.nan, 1e-45, 1.17549435e-38, 1e-38,
                        1e-10, 448 * 1.5, 1e6, 3.4028235e38, 61439.996,
                        61440, 65536, 464, 480, 1e-3, 2.0 ** -9, 2.0 ** -10,
                        2.0 ** -16, 2.0 ** -17, 3 * 2.0 ** -18],
                       dtype=np.float32)
    values.append(special)
    rng = np.random.default_rng(42)
    # Random bit patterns (every exponent, NaN payloads included) and random
    # values across the FP8 range.
    values.append(rng.integers(0, 2 ** 32, 20000, dtype=np.uint64)
                  .astype(np.uint32).view(np.float32))
    values.append((2.0 ** rng.uniform(-20, 17, 20000)).astype(np.float32))
    v = np.concatenate(values).astype(np.float32)
    return np.concatenate([v, -v])


def run(tables, args, stdin=""):
    return subprocess.run([tables] + args, input=stdin, capture_output=True,
                          text=True, check=True).stdout.split("\n")[:-1]


def check_numerics(tables):
    ok = True
    lines = run(tables, ["decode"])
    assert len(lines) == 256, len(lines)
    for col, name in ((1, "e4m3"), (2, "e5m2")):
        f = FORMATS[name]
        bad, nans, infs = [], 0, 0
        for code, line in enumerate(lines):
            got = np.uint32(int(line.split()[col], 16)).view(np.float32)
            want = np.float32(decode(code, f))
            if np.isnan(want):
                nans += 1
                good = np.isnan(got) and np.signbit(got) == bool(code & 0x80)
            else:
                infs += int(np.isinf(want))
                good = bits32(got) == bits32(want)
            if not good:
                bad.append("code %02x: got %r, want %r" % (code, got, want))
        print("decode %s: 256 codes (%d NaN, %d inf), %s" %
              (name, nans, infs, "IDENTICAL" if not bad else
               "%d DIFFER: %s" % (len(bad), "; ".join(bad[:5]))))
        ok &= not bad
    values = sweep()
    stdin = "\n".join("%08x" % b for b in bits32(values)) + "\n"
    lines = run(tables, ["encode"], stdin)
    got = np.array([[int(x, 16) for x in line.split()] for line in lines])
    assert got.shape == (len(values), 4), got.shape
    for col, (name, saturate) in enumerate(
            (("e4m3", True), ("e4m3", False), ("e5m2", True), ("e5m2", False))):
        f = FORMATS[name]
        want = encode(values, f, saturate)
        bad = np.nonzero(got[:, col] != want)[0]
        overflows = int(np.sum((want & 0x7F) == (f["max_code"] if saturate
                                                  else f["overflow"])))
        print("encode %s %s: %d values (%d at +-max or overflow), %s" %
              (name, "saturating" if saturate else "non-saturating",
               len(values), overflows, "IDENTICAL" if not len(bad) else
               "%d DIFFER, e.g. %s" % (len(bad), "; ".join(
                   "%r: got %02x want %02x" % (values[i], got[i, col], want[i])
                   for i in bad[:5]))))
        ok &= not len(bad)
    return ok


def amax_sequence(steps):
    """Growth, decay, zeros, infinity, NaN, tiny and random amaxes."""
    rng = np.random.default_rng(7)
    seq = []
    for step in range(steps):
        kind = step % 10
        if step < 8:
            seq.append(2.0 ** step * 3.1)  # growth
        elif step < 14:
            seq.append(seq[-1] / 7.3)  # decay
        elif kind == 4:
            seq.append(0.0)
        elif step == 25:
            seq.append(np.inf)
        elif step == 31:
            seq.append(np.nan)
        elif step == 37:
            seq.append(1e-44)  # scale overflows FP32
        else:
            seq.append(float(2.0 ** rng.uniform(-12, 12)))
    return np.array(seq, dtype=np.float32)


def reference_recipe(amaxes, length, margin, algo, fp8_max):
    history = np.zeros(length, dtype=np.float32)
    scale, out = np.float32(1), []
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        for newest in amaxes:
            history = np.roll(history, -1)
            history[0] = newest
            if algo == "max":
                amax = np.float32(np.nanmax(np.append(history, np.float32(0))))
            else:
                amax = newest
            if np.isfinite(amax) and amax > 0:
                s = np.float32(fp8_max) / amax
                s = s / np.float32(2.0 ** margin)
                scale = np.float32(np.finfo(np.float32).max) if np.isinf(s) else s
            out.append((scale, np.float32(1) / scale, history.copy()))
    return out


def check_recipe(tables, steps):
    ok = True
    amaxes = amax_sequence(steps)
    stdin = "\n".join("%08x" % b for b in bits32(amaxes)) + "\n"
    for length, margin, algo, name in ((1024, 0, "max", "e4m3"),
                                       (16, 0, "max", "e4m3"),
                                       (4, 2, "most_recent", "e5m2"),
                                       (8, 1, "max", "e5m2")):
        fp8_max = 448.0 if name == "e4m3" else 57344.0
        lines = run(tables, ["recipe", str(length), str(margin), algo, name],
                    stdin)
        want = reference_recipe(amaxes, length, margin, algo, fp8_max)
        bad, kept = [], 0
        previous = np.float32(1)
        for step, (line, (scale, inv, history)) in enumerate(zip(lines, want)):
            got = np.array([int(x, 16) for x in line.split()], dtype=np.uint64)
            expected = np.concatenate([bits32([scale, inv]), bits32(history)])
            if got.shape != expected.shape or np.any(got != expected):
                bad.append(step)
            kept += int(scale == previous)
            previous = scale
        distinct = len({float(w[0]) for w in want})
        print("recipe %s history %d margin %d %s: %d steps (%d distinct "
              "scales, %d steps kept the scale), scales and histories %s" %
              (name, length, margin, algo, len(lines), distinct, kept,
               "IDENTICAL" if not bad and len(lines) == steps else
               "DIFFER at steps %s" % bad[:10]))
        ok &= not bad and len(lines) == steps
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("tables")
    parser.add_argument("what", choices=["numerics", "recipe"])
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    ok = (check_numerics(args.tables) if args.what == "numerics" else
          check_recipe(args.tables, args.steps))
    print("PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
