"""A random mix of every collective through horovod.torch's asynchronous calls, submitted by each
rank in an order of its own (from two threads in every other round) and synchronized in yet
another, against closed forms: what negotiation promises, through the Python front end's handle
table and argument conversions (tests/common/mixed_workload.h is the C++ twin). The mix is the
same on every rank (one seed); from three ranks some collectives run in a set of all ranks but
the last. Values depend on the round, so a result left over from an earlier round is wrong."""
import os
import random
import threading

import torch

import horovod.torch as hvd
from conftest import DTYPES, INTEGER_DTYPES, as_float64, reduced_over, truncated

ROUNDS = 12
KINDS = ["allreduce", "grouped_allreduce", "allgather", "grouped_allgather", "broadcast", "alltoall",
         "reducescatter", "grouped_reducescatter"]
OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]
OP_NAMES = {hvd.Sum: "Sum", hvd.Average: "Average", hvd.Min: "Min", hvd.Max: "Max", hvd.Product: "Product"}


def values(rank, count, round_, product):
    """Small whole numbers, exact in every dtype: their sum, product, min and max over up to four
    ranks fit in int8."""
    i = torch.arange(count, dtype=torch.float64) + round_
    return (rank % 3 + 1) * (i % 2 + 1) if product else (rank + 1) * (i % 5 + 1)


def describe(d):
    return "%s '%s' (%s; op %s, scale %s/%s, root %d%s)" % (
        d["kind"], d["name"], ", ".join("%s x%d" % (t, n) for t, n in zip(d["dtypes"], d["rows"])), OP_NAMES[d["op"]],
        d["prescale"], d["postscale"], d["root"], ", in the set" if d["in_set"] else "")


def random_descriptor(rng, name, sets, size):
    kind = rng.choice(KINDS)
    members = rng.randint(1, 3) if kind.startswith("grouped") else 1
    d = {"kind": kind, "name": name, "dtypes": [rng.choice(DTYPES) for _ in range(members)],
         "rows": [rng.choice([0, rng.randint(1, 40), rng.randint(1, 40), rng.randint(300, 900)]) for _ in range(members)],
         "op": hvd.Sum, "prescale": 1.0, "postscale": 1.0, "in_set": sets and rng.randrange(4) == 0}
    if kind.endswith("allreduce"):
        d["op"] = rng.choice(OPS)
    elif kind.endswith("reducescatter"):
        d["op"] = rng.choice([hvd.Sum, hvd.Average])
    floating = all(t not in INTEGER_DTYPES for t in d["dtypes"])
    if d["op"] in (hvd.Sum, hvd.Average) and floating and rng.randrange(3) == 0:
        d["prescale"], d["postscale"] = rng.choice([(0.5, 2.0), (2.0, 0.5), (0.5, 1.0), (1.0, 2.0)])
    d["root"] = rng.randrange(size - 1 if d["in_set"] else size)
    return d


class Submission:
    """What this rank submits for one descriptor, and the check of what synchronize() returns."""

    def __init__(self, d, process_set, members, rank, round_):
        self.d, self.set, self.n, self.r, self.round = d, process_set, members, rank, round_
        product = d["op"] == hvd.Product
        self.inputs = []
        for dtype, rows in zip(d["dtypes"], d["rows"]):
            if d["kind"].endswith("allgather"):
                shape_rows = self.gathered_rows(self.r, rows)
                self.inputs.append(torch.full([shape_rows, 2], 10 * self.r + round_ % 20).to(dtype))
            elif d["kind"] == "alltoall":
                parts = [torch.full([self.split(self.r, to, rows), 2], 10 * self.r + to + round_ % 20) for to in
                         range(self.n)]
                self.inputs.append(torch.cat(parts).to(dtype))
            else:
                self.inputs.append(values(self.r, rows, round_, product).to(dtype))

    def gathered_rows(self, rank, rows):
        return (rank + self.round + rows) % 3

    def split(self, sender, receiver, rows):
        return (sender + 2 * receiver + self.round + rows) % 3

    def submit(self):
        d, k = self.d, self.d["kind"]
        scales = {"prescale_factor": d["prescale"], "postscale_factor": d["postscale"]}
        if k == "allreduce":
            return hvd.allreduce_async(self.inputs[0], name=d["name"], op=d["op"], process_set=self.set, **scales)
        if k == "grouped_allreduce":
            return hvd.grouped_allreduce_async(self.inputs, name=d["name"], op=d["op"], process_set=self.set, **scales)
        if k == "allgather":
            return hvd.allgather_async(self.inputs[0], name=d["name"], process_set=self.set)
        if k == "grouped_allgather":
            return hvd.grouped_allgather_async(self.inputs, name=d["name"], process_set=self.set)
        if k == "broadcast":
            return hvd.broadcast_async(self.inputs[0], d["root"], name=d["name"], process_set=self.set)
        if k == "alltoall":
            splits = torch.tensor([self.split(self.r, to, d["rows"][0]) for to in range(self.n)], dtype=torch.int32)
            return hvd.alltoall_async(self.inputs[0], splits, name=d["name"], process_set=self.set)
        if k == "reducescatter":
            return hvd.reducescatter_async(self.inputs[0], name=d["name"], op=d["op"], process_set=self.set, **scales)
        return hvd.grouped_reducescatter_async(self.inputs, name=d["name"], op=d["op"], process_set=self.set, **scales)

    def expected(self, m):
        d, dtype, rows = self.d, self.d["dtypes"][m], self.d["rows"][m]
        k, product = d["kind"], d["op"] == hvd.Product
        if k.endswith("allgather"):
            return torch.cat([torch.full([self.gathered_rows(s, rows), 2], 10.0 * s + self.round % 20, dtype=torch.float64)
                              for s in range(self.n)])
        if k == "broadcast":
            return values(d["root"], rows, self.round, False)
        if k == "alltoall":
            return torch.cat([torch.full([self.split(s, self.r, rows), 2], 10.0 * s + self.r + self.round % 20,
                                         dtype=torch.float64)
                              for s in range(self.n)])
        # Each rank scales before the reduction, the result after it; integers truncate.
        parts = [truncated(values(s, rows, self.round, product) * d["prescale"], dtype) for s in range(self.n)]
        whole = truncated(reduced_over(d["op"], parts) * d["postscale"], dtype)
        if k.endswith("allreduce"):
            return whole
        first = self.r * (rows // self.n) + min(self.r, rows % self.n)
        return whole[first:first + rows // self.n + (1 if self.r < rows % self.n else 0)]

    def check(self, handle):
        """The first difference from the closed form, or None."""
        try:
            got = hvd.synchronize(handle)
        except Exception as e:  # reported with the descriptor, as every other difference
            return "failed: %s" % e
        if self.d["kind"] == "alltoall":
            got, received = got
            want_splits = [self.split(s, self.r, self.d["rows"][0]) for s in range(self.n)]
            if received.tolist() != want_splits:
                return "received splits %s, expected %s" % (received.tolist(), want_splits)
        results = got if isinstance(got, (list, tuple)) else [got]
        for m, result in enumerate(results):
            dtype, want = self.d["dtypes"][m], self.expected(m)
            if result.dtype != dtype or tuple(result.shape) != tuple(want.shape):
                return "member %d: %s %s, expected %s %s" % (m, result.dtype, tuple(result.shape), dtype,
                                                             tuple(want.shape))
            tolerance = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
            if not torch.allclose(as_float64(result), want, rtol=tolerance, atol=0):
                return "member %d (%s): got %s, expected %s" % (m, dtype, result.flatten().tolist()[:6],
                                                              want.flatten().tolist()[:6])
        return None


def test_random_mix_in_every_order(rank, size):
    seed = int(os.environ.get("HVD_TEST_SEED", "20261127"))
    shared = random.Random(seed)  # the same on every rank: the mix
    own = random.Random(seed * 7919 + rank + 1)  # this rank's orders
    sets = size >= 3
    subset = hvd.add_process_set(list(range(size - 1))) if sets else None
    recurring = [random_descriptor(shared, "pymix.%d" % k, sets, size) for k in range(16)]
    failures, checked = [], 0
    try:
        for round_ in range(ROUNDS):
            mix = [d for d in recurring if shared.randrange(3) != 0]
            mix += [random_descriptor(shared, "pymix.r%d.%d" % (round_, j), sets, size) for j in range(3)]
            mine = [Submission(d, subset if d["in_set"] else hvd.global_process_set,
                               size - 1 if d["in_set"] else size, rank, round_)
                    for d in mix if not d["in_set"] or rank < size - 1]
            own.shuffle(mine)
            handles = [None] * len(mine)

            def submit_every(first, step):
                for i in range(first, len(mine), step):
                    handles[i] = mine[i].submit()

            if round_ % 2:
                other = threading.Thread(target=submit_every, args=(1, 2))
                other.start()
                submit_every(0, 2)
                other.join()
            else:
                submit_every(0, 1)
            order = list(range(len(mine)))
            own.shuffle(order)
            for i in order:
                problem = mine[i].check(handles[i])
                checked += 1
                if problem:
                    failures.append("seed %d (HVD_TEST_SEED), round %d, rank %d: %s: %s" % (
                        seed, round_, rank, describe(mine[i].d), problem))
        # The last rank, outside the set, may be done first; the set's last collectives still run.
        hvd.barrier()
    finally:
        if subset is not None:
            hvd.remove_process_set(subset)
    assert not failures, "\n".join(failures[:5])
    assert checked >= ROUNDS * 5
