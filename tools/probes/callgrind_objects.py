# SPDX-License-Identifier: BSD-2-Clause
"""Sums a callgrind profile's exclusive instructions per object and per
function (flow_cost.c says how to make one), divided by the frames measured.

usage: callgrind_objects.py callgrind.out FRAMES [TOP]
"""
import collections
import re
import sys


def main():
    path, frames = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    names = {"ob": {}, "fn": {}, "fl": {}}
    ob = fn = None
    by_ob = collections.Counter()
    by_fn = collections.Counter()
    calls = collections.Counter()
    skip_next = False
    events = None
    cfn = cob = None
    driver = collections.Counter()  # inclusive cost of driver entries called from the library
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("events:"):
            events = line.split()[1:]
            continue
        m = re.match(r"^(ob|fn|cob|cfn|fl|fi|fe|cfi|cfl)=(?:\((\d+)\))?\s*(.*)$", line)
        if m:
            kind, num, name = m.groups()
            base = {"cob": "ob", "cfn": "fn", "cfi": "fl", "cfl": "fl", "fi": "fl", "fe": "fl"}.get(kind, kind)
            if num is not None:
                if name:
                    names[base][num] = name
                name = names[base].get(num, name)
            if kind == "ob":
                ob = name
            elif kind == "fn":
                fn = name
            elif kind == "cfn":
                cfn = name
            elif kind == "cob":
                cob = name
            continue
        if line.startswith("calls="):
            skip_next = True
            n = int(line.split("=")[1].split()[0])
            calls[cfn] += n
            continue
        if not line or not (line[0].isdigit() or line[0] in "+-*"):
            continue
        if skip_next:  # the inclusive cost of a call: not this function's own
            skip_next = False
            if ob and cob and "cuweave" in ob and "fake" in cob:
                driver[cfn] += int(line.split()[1])
            cob = None
            continue
        parts = line.split()
        if len(parts) < 2:
            continue
        ir = int(parts[1])
        by_ob[ob] += ir
        by_fn[(ob, fn)] += ir
    total = sum(by_ob.values())
    drv = sum(driver.values())
    print(f"instructions per frame: {total / frames:.0f}; in driver calls made by the library "
          f"{drv / frames:.0f}; the library's own (the rest, less the probe's) "
          f"{(total - drv - by_ob.get(next((o for o in by_ob if o and o.endswith('flow_cost')), None), 0)) / frames:.0f}")
    for f, v in driver.most_common():
        print(f"  driver {v / frames:9.0f}  {f}")
    for o, v in by_ob.most_common():
        print(f"  {v / frames:9.0f}  {o}")
    print("by function (exclusive), per frame:")
    for (o, f), v in by_fn.most_common(top):
        print(f"  {v / frames:9.0f}  {f}  [{o.rsplit('/', 1)[-1] if o else ''}]")
    print("calls per frame (selected):")
    for f in ("malloc", "calloc", "free", "realloc", "pthread_mutex_lock"):
        for k, v in calls.items():
            if k == f or (k and k.startswith(f + "'")):
                print(f"  {v / frames:7.2f}  {k}")


main()
