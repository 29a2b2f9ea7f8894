"""ampc-train under mpirun (issue 41): the data sharded as DistributedSampler.

    train_shards.py data WORK               the .npy files
    train_shards.py indices N DROP FILE     FILE: `ampc-train --no-shuffle
                                            --print-samples` of N ranks;
                                            each rank's samples against
                                            torch.utils.data.
                                            DistributedSampler(shuffle=False,
                                            drop_last=DROP)'s indices
    train_shards.py shuffled N DROP FILE    the same with the shuffle: in
                                            each epoch, the ranks' shares
                                            disjoint and covering (padded:
                                            every sample, the padding
                                            repeated from the start of
                                            the order; dropped: none twice)
    train_shards.py compare A B TOLERANCE   the parameters of two
                                            checkpoints of LIB (argv 5)
"""
import collections
import os
import sys

import numpy as np

SAMPLES = 10      # the index checks: 10 samples over 3 ranks (not even)
TRAIN = 32        # the training comparison


def data(work):
    rng = np.random.default_rng(3)
    for n, name in ((SAMPLES, "small"), (TRAIN, "train")):
        np.save(os.path.join(work, name + "-x.npy"),
                rng.standard_normal((n, 4)).astype(np.float32))
        np.save(os.path.join(work, name + "-y.npy"),
                rng.integers(0, 3, n).astype(np.int64))


def printed(path):
    """{rank: [samples of step 1, step 2, ...]}, and the steps per epoch."""
    steps = collections.defaultdict(dict)
    for line in open(path):
        words = line.split()
        if len(words) < 4 or words[0] != "rank" or words[2] != "step":
            continue
        steps[int(words[1])][int(words[3].rstrip(":"))] = \
            [int(w) for w in words[4:]]
    return {r: [s[k] for k in sorted(s)] for r, s in steps.items()}


def torch_indices(ranks, drop_last):
    from torch.utils.data import DistributedSampler
    return [list(iter(DistributedSampler(range(SAMPLES), num_replicas=ranks,
                                         rank=r, shuffle=False,
                                         drop_last=drop_last)))
            for r in range(ranks)]


def indices(ranks, drop_last, path):
    steps = printed(path)
    expected = torch_indices(ranks, drop_last)
    assert sorted(steps) == list(range(ranks)), steps
    for r in range(ranks):
        got = [i for step in steps[r] for i in step]
        batch = len(steps[r][0])
        # The rank's share in batches; what does not fill one is dropped.
        want = expected[r][:len(expected[r]) // batch * batch]
        assert got == want, (r, got, want)
    print("%d ranks, %s: each rank's samples are DistributedSampler's "
          "(%s)" % (ranks, "drop_last" if drop_last else "padded",
                    "; ".join(" ".join(map(str, expected[r]))
                              for r in range(ranks))))


def shuffled(ranks, drop_last, path):
    steps = printed(path)
    per_epoch = len(steps[0]) // 2
    for epoch in range(2):
        shares = [[i for step in steps[r][epoch * per_epoch:
                                          (epoch + 1) * per_epoch]
                   for i in step] for r in range(ranks)]
        every = [i for share in shares for i in share]
        counts = collections.Counter(every)
        if drop_last:
            assert len(set(every)) == len(every), "shares overlap"
            # (each rank's share cut to whole batches)
            assert len(shares[0]) <= SAMPLES // ranks
        else:
            assert set(every) == set(range(SAMPLES)), "not covering"
            assert sum(c - 1 for c in counts.values()) == \
                -SAMPLES % ranks, counts
        # The epoch's order: rank r holds positions r, r+N, ...
        order = [None] * len(every)
        for r, share in enumerate(shares):
            order[r::ranks] = share
        if not drop_last:
            # The padding repeats the start of the epoch's order.
            assert order[SAMPLES:] == order[:len(order) - SAMPLES]
    print("%d ranks, %s, shuffled: 2 epochs, the shares %s" % (
        ranks, "drop_last" if drop_last else "padded",
        "disjoint" if drop_last else "covering every sample"))


def compare(a, b, tolerance, library):
    import ampc
    values = []
    for path in (a, b):
        model = ampc.Model(library)
        model.load_checkpoint(path)
        values.append({p: np.asarray(model.get_parameter(p), np.float64)
                       for p in ("fc1_weight", "fc1_bias", "fc2_weight",
                                 "fc2_bias")})
    d = max(float(np.max(np.abs(values[0][p] - values[1][p])))
            for p in values[0])
    assert d <= float(tolerance), d
    print("parameters within %.1e (tolerance %s)" % (d, tolerance))


def main():
    mode = sys.argv[1]
    if mode == "data":
        data(sys.argv[2])
    elif mode == "indices":
        indices(int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4])
    elif mode == "shuffled":
        shuffled(int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4])
    elif mode == "compare":
        compare(*sys.argv[2:6])
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
