#!/usr/bin/env python3
"""Checks the output of tests/elastic/elastic_train across every launch of one elastic run.

Usage: check_run.py OUTPUT EPOCHS SAMPLES [--launches N] [--sizes 4,3,4] [--kill-time T]
Prints 'ok: ...' per check and 'FAIL: ...' per failure; exits 1 when anything failed.
Checks: each relaunch resumed from the newest commit of the launch before (so no committed step is
redone and none skipped); the steps kept (those each launch committed, and all of the last) are
1..N once each; every epoch used every sample exactly once over all ranks; every rank of the last
launch ends with identical parameters and step counter; the 'seen' buffer equals the step.
"""
import argparse
import re
import sys
from collections import Counter, defaultdict

ap = argparse.ArgumentParser()
ap.add_argument("output")
ap.add_argument("epochs", type=int)
ap.add_argument("samples", type=int)
ap.add_argument("--launches", type=int)
ap.add_argument("--sizes")
ap.add_argument("--kill-time", type=float)
args = ap.parse_args()

failures = 0


def check(what, good, detail=""):
    global failures
    print(("ok: " if good else "FAIL: ") + what + ("" if good else ": " + detail))
    failures += 0 if good else 1


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)


starts, steps, commits, params, firsts = defaultdict(dict), defaultdict(list), defaultdict(list), defaultdict(dict), {}
for raw in open(args.output, errors="replace"):
    m = re.search(r"(START|STEP|COMMIT|PARAMS|FIRST) .*", raw)
    if not m:
        continue
    line = m.group(0)
    kind, f = line.split()[0], fields(line)
    launch = f.get("launch")
    if kind == "START":
        starts[launch][int(f["rank"])] = f
    elif kind == "STEP":
        steps[launch].append(f)
    elif kind == "COMMIT":
        commits[launch].append((int(f["id"]), int(f["step"])))
    elif kind == "PARAMS":
        params[launch][int(f["rank"])] = f
    elif kind == "FIRST":
        firsts[launch] = f

order = sorted(starts, key=lambda l: min(float(s["time"]) for s in starts[l].values()))
sizes = [int(starts[l][0]["size"]) for l in order if 0 in starts[l]]
print("launches: " + ", ".join("size %s from commit %s (step %s)" % (starts[l][0]["size"], starts[l][0]["commit"], starts[l][0]["step"]) for l in order if 0 in starts[l]))
if args.launches is not None:
    check("%d launches" % args.launches, len(order) == args.launches, "got %d" % len(order))
if args.sizes:
    want = [int(s) for s in args.sizes.split(",")]
    check("world sizes %s" % want, sizes == want, "got %s" % sizes)

kept = {}  # step -> list of (rank, epoch, indices) from the launch whose work survived
for i, launch in enumerate(order):
    start = starts[launch].get(0)
    if start is None:
        check("launch %s has a START line from rank 0" % launch, False, "missing")
        continue
    size = int(start["size"])
    check("launch %d: every rank restored the same commit" % (i + 1),
          len(starts[launch]) == size and len({s["commit"] for s in starts[launch].values()}) == 1 and
          len({s["step"] for s in starts[launch].values()}) == 1, str(starts[launch]))
    if i > 0:
        # The newest commit of the launch before: the last it printed, or the one after it when
        # that launch stopped inside commit() for a change of hosts (it has no COMMIT line then).
        prev = commits[order[i - 1]]
        newest = prev[-1] if prev else (int(starts[order[i - 1]][0]["commit"]), int(starts[order[i - 1]][0]["step"]))
        prev_steps = {int(f["step"]) for f in steps[order[i - 1]]}
        resumed = (int(start["commit"]), int(start["step"]))
        good = resumed == newest or (resumed[0] == newest[0] + 1 and resumed[1] > newest[1] and
                                     all(s in prev_steps for s in range(newest[1] + 1, resumed[1] + 1)))
        check("launch %d resumed from the newest commit of launch %d" % (i + 1, i), good,
              "resumed from commit %d at step %d; launch %d printed commit %d at step %d last" %
              (resumed + (i,) + newest))
    limit = None
    if i + 1 < len(order):
        limit = int(starts[order[i + 1]][0]["step"]) if 0 in starts[order[i + 1]] else None
    for f in steps[launch]:
        s = int(f["step"])
        if s <= int(start["step"]):
            check("launch %d never redoes committed step %d" % (i + 1, s), False, "it did")
        if limit is not None and s > limit:
            continue  # work after the last commit of a failed launch: redone by the next one
        idx = [int(x) for x in f["idx"].split(",") if x]
        kept.setdefault(s, []).append((launch, int(f["rank"]), int(f["epoch"]), idx))

last = order[-1]
final_steps = int(next(iter(params[last].values()))["step"]) if params[last] else -1
check("the steps kept are 1..%d" % final_steps, sorted(kept) == list(range(1, final_steps + 1)),
      "missing %s" % sorted(set(range(1, final_steps + 1)) - set(kept)))
for s, entries in kept.items():
    launches = {e[0] for e in entries}
    if len(launches) != 1:
        check("step %d kept from one launch only" % s, False, str(launches))
per_epoch = defaultdict(Counter)
for entries in kept.values():
    for _, _, epoch, idx in entries:
        per_epoch[epoch].update(idx)
for epoch in range(args.epochs):
    c = per_epoch[epoch]
    bad = {k: v for k, v in c.items() if v != 1}
    missing = set(range(args.samples)) - set(c)
    check("epoch %d used each of the %d samples exactly once" % (epoch, args.samples),
          not bad and not missing, "repeated %s, skipped %s" % (sorted(bad)[:10], sorted(missing)[:10]))

last_size = int(starts[last][0]["size"])
check("every rank of the last launch reported its parameters", len(params[last]) == last_size, str(params[last].keys()))
check("every rank ends with identical parameters", len({p["hash"] for p in params[last].values()}) == 1,
      str({r: p["hash"] for r, p in params[last].items()}))
check("every rank ends at the same step, and the 'seen' buffer equals it",
      all(p["step"] == str(final_steps) and p["seen"] == str(final_steps) for p in params[last].values()),
      str(params[last]))
if args.kill_time is not None:
    after = [l for l in order if 0 in starts[l] and float(starts[l][0]["time"]) > args.kill_time]
    if after and after[0] in firsts:
        print("RECOVERY kill -> first step after restore: %.2f s" % (float(firsts[after[0]]["time"]) - args.kill_time))
    else:
        check("a launch after the kill took a step", False, "none")
sys.exit(1 if failures else 0)
