#!/usr/bin/env python3
"""The built-in kernel counters (profile.kernels) against closed forms, on a host build.

  check_kernel_counters.py MINIPIPE MPIEXEC DECK OUTDIR [p m schedule]... [--doc BENCHMARKING_MD]

For each (p, m, schedule) it runs DECK for 3 deterministic steps with the counters on and checks,
for every pipeline rank and step, the synchronizations against the formulas of
docs/benchmarking.md ("Host synchronizations per step"; written there once, and evaluated in
check() below term by term), and, with --doc, that the measured table there has the counts this
run measured for every row it holds of the same deck, p, schedule and m (fences, H2H copies,
fills per rank), so the table, the formula and the measurement cannot drift apart.

that every host synchronization the run report counts (host_syncs_per_step, kernels/types.hpp's
shims) was seen by Kokkos Tools as a fence, copy or reduction (kernel_counters' host_syncs, the
same number), and that the kernels' model FLOPs per step add up to B T F_token, the FOM's model FLOPs, with the
FLOPs the FOM leaves out coming only from the kernels docs/benchmarking.md lists as left out.
"""
import json
import re
import subprocess
import sys
from pathlib import Path


def fail(msg):
    print(f"check_kernel_counters: FAIL: {msg}")
    sys.exit(1)


def deck_values(path):
    vals, table = {}, ""
    for line in Path(path).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("["):
            table = line.strip("[]")
        elif "=" in line:
            k, v = (x.strip() for x in line.split("=", 1))
            vals[f"{table}.{k}"] = v.strip('"')
    return vals


def split(n, parts):
    """Micro-batch sizes: n samples into parts that differ by at most one (larger ones first)."""
    return [n // parts + (1 if k < n % parts else 0) for k in range(parts)]


def dw_fences(sizes, group, holds, by_reference=False):
    """Fences of one weight's backward-weight calls in a step on the host path (kernels/linear.cpp):
    with one micro-batch, or on a pipeline stage (holds false: only a stage that is the whole model
    holds samples back, miniapp/runtime/stage.cpp), each call runs the exact GEMM directly (1 a
    call). With several micro-batches on a whole-model stage, a call of S < group
    samples holds them (1 fence: Linear::dW_hold; none by_reference, where a block's Linear weight
    refers to the stage's step-wide rows instead of copying them), folding first what is held when
    S more would not fit and when the group is full (1 each: Gemm::det exact); a call of S >= group
    runs directly (1); the last W flushes what is left (1)."""
    if len(sizes) == 1 or not holds:
        return len(sizes)
    f = held = 0
    for s in sizes:
        if s >= group:
            f += 1
            continue
        if held + s > group:
            f += 1
            held = 0
        f += 0 if by_reference else 1
        held += s
        if held == group:
            f += 1
            held = 0
    return f + (1 if held else 0)


def f_token(L, C, V, T):
    # docs/benchmarking.md: F_token = 6 (12 L C^2 + V C) + 6 L C (T + 1)
    return 6 * (12 * L * C * C + V * C) + 6 * L * C * (T + 1)


LEFT_OUT = ("LayerNorm::", "Attention::", "Gelu::", "Elementwise::", "Linear::", "CrossEntropy::", "AdamW::",
            "Sgd::", "Embedding::")


def check_doc_row(doc, deck_name, p, schedule, m, measured):
    """The row of docs/benchmarking.md's measured table for this run: '| deck | p, schedule, m | rank |
    fences | H2H copies | fills |', one 'a / b' entry per rank."""
    rows = [l for l in Path(doc).read_text().splitlines()
            if l.startswith(f"| {deck_name} | {p}, {schedule}, {m} |")]
    if len(rows) != 1:
        fail(f"docs/benchmarking.md has {len(rows)} table rows for {deck_name} p={p} {schedule} m={m}, expected 1")
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    for col, key in ((3, "fences"), (4, "h2h"), (5, "fills")):
        doc_values = [int(x) for x in cells[col].split("/")]
        got = [r[key] for r in measured]
        if doc_values != got:
            fail(f"docs/benchmarking.md says {key} {cells[col]} for {deck_name} p={p} {schedule} m={m}; "
                 f"measured {' / '.join(map(str, got))}")
    print(f"docs/benchmarking.md's row for {deck_name} p={p} {schedule} m={m}: as measured")


def check_roofline(kc, stdout, where):
    """The roofline summary (docs/benchmarking.md, "Kernel counters") from its definition: each entry
    at max(FLOP / sgemm, bytes / triad), split at the ridge sgemm / triad; the model FLOPs over the
    same-run sgemm at the bound's and at the measured time; and the printed line says the same."""
    sgemm, triad = kc["peaks"]["sgemm_gflops"] * 1e9, kc["peaks"]["triad_gbs"] * 1e9
    ridge = sgemm / triad
    sums = {"compute_bound_seconds": 0.0, "compute_measured_seconds": 0.0, "memory_bound_seconds": 0.0,
            "memory_measured_seconds": 0.0}
    for k in kc["kernels"]:
        part = "compute" if k["bytes"] <= 0 or k["flops"] >= ridge * k["bytes"] else "memory"
        sums[f"{part}_bound_seconds"] += max(k["flops"] / sgemm, k["bytes"] / triad)
        sums[f"{part}_measured_seconds"] += k["seconds"]
    model = sum(k["model_flops"] for k in kc["kernels"])
    bound = sums["compute_bound_seconds"] + sums["memory_bound_seconds"]
    measured = sums["compute_measured_seconds"] + sums["memory_measured_seconds"]
    want = dict(sums, ridge_flops_per_byte=ridge, model_over_sgemm_bound=model / bound / sgemm,
                model_over_sgemm_measured=model / measured / sgemm)
    got = kc.get("roofline", {})
    for key, v in want.items():
        if key not in got or abs(got[key] - v) > 1e-9 * max(abs(v), 1e-30):
            fail(f"{where}: roofline {key} = {got.get(key)}, its definition gives {v}")
    if not 0 < want["model_over_sgemm_bound"] <= 1.0 + 1e-12:
        fail(f"{where}: at the roof the model FLOPs run at {want['model_over_sgemm_bound']} of the sgemm: "
             "every entry's time bound is at least its FLOPs over the sgemm, so at most 1")
    line = next((l for l in stdout.splitlines() if l.startswith("  at the roofline")), None)
    said = re.search(r"\): ([0-9.]+) ms, measured ([0-9.]+):", line or "")
    if not said or abs(float(said[1]) - 1e3 * bound) > 1.5e-3 or abs(float(said[2]) - 1e3 * measured) > 1.5e-3:
        fail(f"{where}: the printed roofline line {line!r} does not say {1e3 * bound:.3f} ms against "
             f"{1e3 * measured:.3f} measured")
    print(f"{where}: at the roofline {1e3 * bound:.3f} ms against {1e3 * measured:.3f} ms measured; model FLOP "
          f"over the sgemm {want['model_over_sgemm_bound']:.3f} at the roof, {want['model_over_sgemm_measured']:.3f}")


def check_peaks(kc, stdout, where):
    """The same-run sgemm is the fastest GEMM the build ran (KokkosBlas::gemm and gemm_det's plain
    GEMM; without a vendor BLAS TPL the first is Kokkos Kernels' own GEMM, tens of times slower on a
    CPU), the printed lines name each, and no compute-bound entry runs at more than four times that
    sgemm: a reference slower than the kernels it bounds (25 times, with Kokkos Kernels' own GEMM)
    puts them far above their roof and inflates every ratio over the sgemm. Four, not one: the
    probe is the best of 5 short runs, which a busy neighbour can slow more than the kernels."""
    peaks = kc["peaks"]
    probes = peaks.get("sgemm_probes", [])
    libs = [g["library"] for g in probes]
    if len(probes) != 2 or not libs[0].startswith("KokkosBlas::gemm -> ") or not libs[1].startswith("miniPipe gemm_det"):
        fail(f"{where}: sgemm probes {libs}: expected KokkosBlas::gemm and gemm_det")
    best = max(probes, key=lambda g: g["gflops"])
    if peaks["sgemm_gflops"] != best["gflops"] or peaks["sgemm_library"] != best["library"]:
        fail(f"{where}: the sgemm is {peaks['sgemm_library']} at {peaks['sgemm_gflops']}, not the fastest probe {best}")
    line = next((l for l in stdout.splitlines() if l.startswith("  same run on")), "")
    if f"sgemm {best['gflops']:.2f} GFLOP/s (n = {peaks['sgemm_n']}, {best['library']})" not in line:
        fail(f"{where}: the printed peaks line {line!r} does not name {best}")
    for g in probes:
        if g is not best and f"    beside it: {g['library']} {g['gflops']:.2f} GFLOP/s" not in stdout.splitlines():
            fail(f"{where}: the slower probe {g} is not printed beside the sgemm")
    ridge = peaks["sgemm_gflops"] / peaks["triad_gbs"]
    for k in kc["kernels"]:
        if k["bytes"] > 0 and k["flops"] >= ridge * k["bytes"] and k["gflops"] > 4 * peaks["sgemm_gflops"]:
            fail(f"{where}: {k['kernel']} runs at {k['gflops']} GFLOP/s, over four times the same-run sgemm "
                 f"{peaks['sgemm_gflops']} ({peaks['sgemm_library']})")
    print(f"{where}: sgemm {best['gflops']:.2f} GFLOP/s from {best['library']} (probes: "
          + ", ".join(f"{g['library']} {g['gflops']:.2f}" for g in probes) + ")")


def check(exe, mpiexec, deck, out, p, m, schedule, doc=None):
    d = deck_values(deck)
    L, C, V, T = (int(d[k]) for k in ("model.n_layer", "model.channels", "model.vocab", "model.seq_len"))
    B = int(d["train.batch"])
    js = out / f"counters_p{p}_m{m}.json"
    cmd = [mpiexec, "-n", str(p), exe, "run", "--deck", deck, "--train.steps", "3", "--train.mode", "deterministic",
           "--pipeline.schedule", schedule, "--pipeline.microbatches", str(m), "--profile.kernels", "true",
           "--output.json", str(js), "--output.roofline", str(out / f"roofline_p{p}_m{m}.svg"), "--output.force",
           "true"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    table = [l for l in r.stdout.splitlines() if l.startswith("  ") and ("Linear::" in l or "sync" in l)]
    if not table:
        fail(f"no per-kernel table in the output:\n{r.stdout}")
    run = json.loads(js.read_text())["runs"][0]
    kc = run["kernel_counters"]
    group = kc["dw_exact_group"]
    if group < 1:
        fail(f"dw_exact_group {group}")
    sizes = split(B, m)
    per_stage_layers = L // p  # even split, v = 1 (the configurations below divide evenly)
    measured = []  # per rank: the last step's counts, for the documented table
    for rank, entry in enumerate(kc["sync_per_step"]):
        first, last = rank == 0, rank == p - 1
        stages = 1
        A = 2 * m * stages  # F and B per micro-batch (no split backward in these schedules)
        S = (0 if last else m) + (0 if first else m)  # sent: activations forward, gradients backward
        R = (0 if first else m) + (0 if last else m)  # received: each copied into the stage's own buffer
        Lw = 4 * per_stage_layers + (1 if last else 0)
        params = 12 * per_stage_layers + (2 if first else 0) + (3 if last else 0)
        # docs/benchmarking.md: h2h = 2 + 2 + 1 + 2 per stage + R (tokens and targets; per-sample
        # sums; the boundary checks' slots; per stage its overflow flags and the optimizer's
        # non-finite codes; each received boundary message).
        Lb = 4 * per_stage_layers  # the blocks' weights; the head's lm_head holds copies
        want = {"fences": A + 1 + 2 * Lw * m + Lb * dw_fences(sizes, group, p == 1, by_reference=True)
                + (Lw - Lb) * dw_fences(sizes, group, p == 1),
                "h2h": 2 + 2 + 1 + 2 * stages + R, "fills": 2 + stages + params - Lw, "d2h": 0, "h2d": 0, "d2d": 0}
        for step, got in enumerate(entry["steps"]):
            for k, v in want.items():
                # The first step grows the executor's buffer of check codes once, in one copy, when it
                # issues more checks than the buffer's first size (64): the steady state has none.
                grown = step == 0 and k == "h2h" and got[k] == v + 1
                if got[k] != v and not grown:
                    fail(f"p={p} m={m} {schedule}: rank {rank} step {step}: {k} = {got[k]}, the formula gives {v} "
                         f"(A={A} S={S} R={R} Lw={Lw} group={group} sizes={sizes}); all counts: {got}")
        # One counter, two witnesses: the report's figure of the last step is the number of host
        # synchronizations in which Kokkos Tools saw a fence, copy or reduction.
        reported = run["ranks"][rank]["host_syncs_per_step"]
        seen = entry["steps"][-1]["host_syncs"]
        if reported != seen or reported <= 0:
            fail(f"p={p} m={m} {schedule}: rank {rank}: the report counts {reported} host syncs in the last step, "
                 f"Kokkos Tools saw {seen}")
        measured.append({k: entry["steps"][-1][k] for k in ("fences", "h2h", "fills")})
        print(f"p={p} m={m} {schedule} rank {rank}: per step {want} (A={A}, S={S}, Lw={Lw}, group={group}) as counted; "
              f"host syncs {reported} reported = {seen} seen by Kokkos Tools")
    # FLOPs: the kernels' model FLOPs per step are the FOM's, exactly; the rest comes from the
    # kernels the FOM leaves out, and is a small part.
    steps = kc["steps"]
    kernels = kc["kernels"]
    model = sum(k["model_flops"] for k in kernels) / steps
    total = sum(k["flops"] for k in kernels) / steps
    # Rank 0's kernels only: with p > 1 the FOM's share of rank 0 is its layers' (checked at p = 1).
    if p == 1:
        want_model = B * T * f_token(L, C, V, T)
        if abs(model - want_model) > 1e-9 * want_model:
            fail(f"model FLOPs per step {model} != B T F_token = {want_model}")
        fom = json.loads(js.read_text())["fom"]
        binary_f_token = fom["model_tflops"] * 1e12 / fom["value"]
        if abs(binary_f_token - f_token(L, C, V, T)) > 1e-4 * f_token(L, C, V, T):
            fail(f"the FOM's F_token {binary_f_token} is not docs/benchmarking.md's {f_token(L, C, V, T)}")
        extra = total - model
        if not 0 < extra < 0.10 * total:
            fail(f"FLOPs the FOM leaves out: {extra} of {total} per step (expected a few percent)")
        print(f"p=1 m={m}: model FLOPs per step {model:.6g} = B T F_token; left out {extra:.4g} "
              f"({100 * extra / total:.2f}% of {total:.6g})")
    for k in kernels:
        if k["flops"] > k["model_flops"] and not k["kernel"].startswith(LEFT_OUT):
            fail(f"{k['kernel']} has FLOPs the FOM does not count and is not among its left-out kernels")
        if k["calls"] > 0 and k["seconds"] <= 0:
            fail(f"{k['kernel']} ran {k['calls']} times in no time")
    if kc["peaks"]["sgemm_gflops"] <= 0 or kc["peaks"]["triad_gbs"] <= 0:
        fail(f"no same-run peaks: {kc['peaks']}")
    check_peaks(kc, r.stdout, f"p={p} m={m} {schedule}")
    check_roofline(kc, r.stdout, f"p={p} m={m} {schedule}")
    if doc:
        check_doc_row(doc, Path(deck).stem, p, schedule, m, measured)
    svg = (out / f"roofline_p{p}_m{m}.svg").read_text()
    if svg.count("<circle") < 10 or "sgemm" not in svg:
        fail("the roofline has fewer than 10 kernel points or no sgemm roof")


def main():
    exe, mpiexec, deck, out = sys.argv[1:5]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rest = sys.argv[5:]
    doc = None
    if "--doc" in rest:
        i = rest.index("--doc")
        doc = rest[i + 1]
        del rest[i:i + 2]
    for i in range(0, len(rest), 3):
        check(exe, mpiexec, deck, out, int(rest[i]), int(rest[i + 1]), rest[i + 2], doc)
    print("check_kernel_counters: OK")


if __name__ == "__main__":
    main()
