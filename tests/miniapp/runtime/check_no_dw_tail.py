#!/usr/bin/env python3
"""check_no_dw_tail.py MPIEXEC MINIPIPE DECK OUTDIR: no held-back dW tail in a deterministic pipeline.

A pipeline stage whose step ends on a B (the schedules that do not split B into I and W) adds each
micro-batch's dW samples in that micro-batch's B (miniapp/runtime/stage.cpp), so no action adds
held-back samples and the report's per-stage W_tail (docs/time-budget.md) is exactly 0 -- a count, not
a time: the tail is nonzero only when some stage's last W was flagged as adding held samples, whatever
the machine's load. p = 2, deterministic, m = 4, 1F1B and GPipe. (Stages that end on a split W, as
under ZB-V, keep holding samples back: nothing waits on that W.)
"""
import json
import os
import subprocess
import sys

mpiexec, minipipe, deck, out = sys.argv[1:5]
os.makedirs(out, exist_ok=True)
failures = []
for schedule in ("1f1b", "gpipe"):
    path = os.path.join(out, f"no_dw_tail_{schedule}.json")
    cmd = [mpiexec, "-n", "2", minipipe, "run", "--deck", deck, "--schedule", schedule, "-m", "4",
           "--train.mode", "deterministic", "--train.steps", "2", "--output.json", path, "--force"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print(r.stdout)
        sys.exit(f"check_no_dw_tail: {' '.join(cmd)} exited {r.returncode}")
    run = json.load(open(path))["runs"][0]
    tail = run["time_budget"]["stage_costs"]["W_tail"]
    if len(tail) != run["p"] * run["v"]:
        failures.append(f"{schedule}: W_tail has {len(tail)} stages, expected {run['p'] * run['v']}")
    elif any(t != 0 for t in tail):
        failures.append(f"{schedule}: W_tail per stage {tail} ms, expected all 0 (held-back dW samples "
                        "added by a stage's last W)")
    else:
        print(f"{schedule}: W_tail per stage {tail}")
if failures:
    print("check_no_dw_tail: FAIL\n  " + "\n  ".join(failures))
    sys.exit(1)
print("check_no_dw_tail: PASS")
