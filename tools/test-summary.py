#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The test command's tally (tools/test-all.sh): every step's results in one
unit, counted once.

A *test* is one test program, script check, fuzz target or Python test
module. The same test run by several steps (the meson build, the Makefile
build, the sanitizer builds) is counted once: failed when it failed in any
run, skipped when it was skipped in every run, passed otherwise. Each skipped
test is named once with its reason and the steps that skipped it.

  test-summary.py meson STEP TESTLOG_JSON   meson's meson-logs/testlog.json
  test-summary.py lines STEP LOG            "PASS name", "SKIP name: why",
                                            "FAIL name (exit N)" lines
                                            (tools/run-tests.sh, tools/fuzz.sh)
  test-summary.py unittest STEP LOG RC      python3 -m unittest -v output and
                                            its exit status: one test a module
  test-summary.py add STEP NAME RESULT [WHY]   one result (PASS, FAIL, SKIP)
  test-summary.py report RESULTS            the tally of the lines the above
                                            printed; exits 1 when one failed

Results are lines "RESULT<TAB>STEP<TAB>NAME<TAB>WHY" on stdout (append them
to one file). The report's last line: "cuweave: N passed, N failed, N skipped".
"""
import json
import os
import re
import sys


def emit(result, step, name, why=""):
    why = " ".join(why.split())
    print("%s\t%s\t%s\t%s" % (result, step, name, why))


def test_name(cmd_word):
    """A test's name as both builds give it: the program's file name."""
    return os.path.basename(cmd_word)


def from_meson(step, path):
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            res = r.get("result", "")
            name = r.get("name", "?").split(" / ")[-1].strip()  # "cuweave:cpu / test_api"
            out = r.get("stdout") or ""
            if res in ("OK", "EXPECTEDFAIL"):
                emit("PASS", step, name)
            elif res == "SKIP":
                why = next((l for l in out.splitlines() if "SKIP" in l), "exit 77")
                emit("SKIP", step, name, why.split("SKIP", 1)[-1].lstrip(": ") or "exit 77")
            else:
                emit("FAIL", step, name, res)


LINE = re.compile(r"^(PASS|FAIL|SKIP) (\S+)(.*)$")


def from_lines(step, path):
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if not m:
                continue
            res, name, rest = m.group(1), m.group(2).rstrip(":"), m.group(3)
            why = ""
            if res == "SKIP":
                why = rest.lstrip(": ")
                why = why.split("SKIP", 1)[-1].lstrip(": ") if "SKIP" in why else why
            elif res == "FAIL":
                why = rest.strip()
            emit(res, step, test_name(name), why)


CASE = re.compile(r"^(\w+) \(([\w.]+)\)(?: \S.*)? \.\.\. (ok|skipped (.*)|FAIL|ERROR|expected failure|unexpected success)$")


def from_unittest(step, path, rc):
    modules = {}  # module -> [cases, skipped, failed, first skip reason]
    with open(path, errors="replace") as f:
        for line in f:
            m = CASE.match(line.rstrip("\n"))
            if not m:
                continue
            mod = m.group(2).split(".")[0]
            st = modules.setdefault(mod, [0, 0, 0, ""])
            st[0] += 1
            res = m.group(3)
            if res.startswith("skipped"):
                st[1] += 1
                if not st[3]:
                    st[3] = (m.group(4) or "").strip("'\"")
            elif res in ("FAIL", "ERROR", "unexpected success"):
                st[2] += 1
    any_failed = False
    for mod in sorted(modules):
        n, sk, bad, why = modules[mod]
        name = "python:" + mod
        if bad:
            any_failed = True
            emit("FAIL", step, name, "%d of %d cases failed" % (bad, n))
        elif sk == n:
            emit("SKIP", step, name, why)
        else:
            emit("PASS", step, name, "%d cases, %d skipped (%s)" % (n, sk, why) if sk else "%d cases" % n)
    if int(rc) != 0 and not any_failed:
        emit("FAIL", step, "python:unittest", "exit %s" % rc)


def report(path):
    runs = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3:
                runs.append((parts[0], parts[1], parts[2], parts[3] if len(parts) > 3 else ""))
    tests = {}  # name -> {"PASS": [steps], "FAIL": [(step, why)], "SKIP": [(step, why)]}
    order = []
    for res, step, name, why in runs:
        if name not in tests:
            tests[name] = {"PASS": [], "FAIL": [], "SKIP": []}
            order.append(name)
        tests[name][res if res in ("PASS", "FAIL", "SKIP") else "FAIL"].append((step, why))
    passed = [n for n in order if not tests[n]["FAIL"] and tests[n]["PASS"]]
    failed = [n for n in order if tests[n]["FAIL"]]
    skipped = [n for n in order if not tests[n]["FAIL"] and not tests[n]["PASS"]]
    steps = sorted({r[1] for r in runs})
    print("%d runs of %d tests in %d steps (%s)" % (len(runs), len(order), len(steps), ", ".join(steps)))
    for n in failed:
        for step, why in tests[n]["FAIL"]:
            print("FAILED  %s [%s]%s" % (n, step, ": " + why if why else ""))
    # a skip is named once, with the reason and the steps that skipped it
    for n in skipped:
        reasons = {}
        for step, why in tests[n]["SKIP"]:
            reasons.setdefault(why or "exit 77", []).append(step)
        for why, st in reasons.items():
            print("SKIPPED %s: %s [%s]" % (n, why, ", ".join(st)))
    partial = [n for n in passed if tests[n]["SKIP"]]
    for n in partial:
        st = ", ".join(s for s, _ in tests[n]["SKIP"])
        print("note: %s passed in some steps and was skipped in %s" % (n, st))
    print("cuweave: %d passed, %d failed, %d skipped (tests, each counted once)" % (len(passed), len(failed), len(skipped)))
    return 1 if failed else 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "meson":
        from_meson(argv[2], argv[3])
    elif len(argv) >= 4 and argv[1] == "lines":
        from_lines(argv[2], argv[3])
    elif len(argv) >= 5 and argv[1] == "unittest":
        from_unittest(argv[2], argv[3], argv[4])
    elif len(argv) >= 5 and argv[1] == "add":
        emit(argv[4], argv[2], argv[3], " ".join(argv[5:]))
    elif len(argv) == 3 and argv[1] == "report":
        return report(argv[2])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
