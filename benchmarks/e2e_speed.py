#!/usr/bin/env python3
# End-to-end training speed of miniPipe: tokens/s and model GFLOP/s of deterministic and fast
# mode at p = 1, 2 and m = 1, 8, next to the same-run cblas_sgemm rate and PyTorch eager.
"""Runs every configuration and the references interleaved, `--repeats` rounds, and reports
medians, so that ratios come from one run on a shared machine (absolute times alone mean little
there). Per round: the sgemm rate (minipipe_bench_kernels' cblas benchmark on the model's fc
shape), each miniPipe configuration, and -- when python3-torch is installed -- an independent
PyTorch eager model of docs/design.md §2 on the same shape, thread count and optimizer. A second table
gives each row's fastest timed step against the fastest sgemm round: other tenants of a shared
host only slow steps down, so that is the nearest a run gets to the code's own speed.

Model FLOPs per step = 6 * N * tokens + attention, with N the weights of the matrix products
(every block's four Linear weights, the lm_head; not the biases, the wte/wpe lookup tables or the
LayerNorms), tokens = B*T, and attention = 3 (forward + backward) * 2 * hs * T(T+1)/2 * 2 * B*H
per layer (q.k and att.v over the causal pairs, forward; backward does twice that): the FOM's
F_token of docs/benchmarking.md times B*T, so "model GFLOP/s" here is the run's model FLOP rate.

Usage: benchmarks/e2e_speed.py [--build build] [--baseline-build DIR] [--repeats 3] [--steps 5] [--threads N]
       [--vocab 512 --channels 256 --layers 8 --heads 8 --seq-len 128 --batch 8] [--no-torch]
--baseline-build adds the same miniPipe rows from another build (e.g. an older commit) to the
same interleaved rounds, for before/after ratios. --variant "LABEL=ARGS" (repeatable) adds the
rows of --build run with extra minipipe arguments, e.g. --variant "no-fence=--profile.action_fence
false", in the same rounds, with their ratios to the baseline. --threads N adds p=1 m=1 rows at N host threads
(a build against an OpenMP Kokkos; fast mode's BLAS gets N threads too) and their speed-up over
the 1-thread rows of the same rounds, beside the memory bandwidth (a triad), the BLAS's own sgemm
and the cost of one kernel dispatch at 1 and N threads.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def env():
    """scripts/env.sh's settings for a benchmark (OpenMPI as root, oversubscription, one BLAS thread, and
    the fastest OpenBLAS kernels the CPU runs even over a slower preset OPENBLAS_CORETYPE, which env.sh
    says on stderr; this prints that line)."""
    r = subprocess.run(["bash", "-c", f"MINIPIPE_BLAS=fastest; source '{ROOT}/scripts/env.sh' && env -0"],
                       check=True, capture_output=True)
    if r.stderr:
        sys.stderr.write(r.stderr.decode())
    e = dict(kv.split("=", 1) for kv in r.stdout.decode().split("\0") if "=" in kv)
    e["OMP_NUM_THREADS"] = "1"
    return e


def deck_text(a):
    return f"""[model]
vocab = {a.vocab}
seq_len = {a.seq_len}
channels = {a.channels}
n_head = {a.heads}
n_layer = {a.layers}
[train]
batch = {a.batch}
steps = {a.steps}
seed = 1
lr = 1e-3
optimizer = "adamw"
[pipeline]
schedule = "sequential"
microbatches = 1
"""


def model_flops(a):
    C, V, L, T, B, H = a.channels, a.vocab, a.layers, a.seq_len, a.batch, a.heads
    n_matmul = L * 12 * C * C + V * C  # qkv, proj, fc, fc_proj weights; lm_head
    attn = L * 3 * 2 * (C // H) * T * (T + 1) * B * H
    return 6 * n_matmul * B * T + attn


def run_bench(build, e, bench_filter, *args):
    """minipipe_bench_kernels' JSON output for the benchmarks matching bench_filter, with env e."""
    exe = os.path.join(build, "benchmarks", "minipipe_bench_kernels")
    if not os.path.exists(exe):
        sys.exit(f"e2e_speed: {exe} is missing: configure {build} with -DMINIPIPE_BUILD_BENCHMARKS=ON")
    r = subprocess.run([exe, *args, f"--benchmark_filter={bench_filter}", "--benchmark_min_time=0.3",
                        "--benchmark_format=json"], env=e, check=True, capture_output=True, text=True)
    return json.loads(r.stdout)


def sgemm_rate(build, a, e):
    """GFLOP/s of cblas_sgemm on the model's fc forward shape (B*T x 4C x C), one thread."""
    d = run_bench(build, e, "gemm_f32/fc_fwd/.*/cblas", f"--tokens={a.batch * a.seq_len}",
                  f"--channels={a.channels}", f"--seq-len={a.seq_len}", f"--heads={a.heads}")
    return d["benchmarks"][0]["GFLOP/s"], d["context"]  # the counter is already in GFLOP/s


def host_probes(build, e):
    """On the backend's threads in e: GB/s of the stream triad (3 arrays of 64 MiB), microseconds of one
    kernel (dispatch/parallel_for: one item per thread and its fence) and of one phase of a team region
    (dispatch/team_phases: a team barrier)."""
    b = {x["name"].split("/")[1]: x for x in run_bench(build, e, "stream_f32/triad|dispatch/")["benchmarks"]}
    us = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[b["parallel_for"]["time_unit"]]
    return b["triad"]["GB/s"], b["parallel_for"]["real_time"] * us, b["team_phases"]["s/phase"] * 1e6


def schedule_of(a, p, m):
    """sequential at p = 1; --schedule where it allows m (zb-v needs m >= 2p-1), else 1f1b."""
    if p == 1:
        return "sequential"
    return a.schedule if a.schedule != "zb-v" or m >= 2 * p - 1 else "1f1b"


def threaded_env(e, n):
    """e with n host threads for Kokkos (OpenMP) and for the BLAS of fast mode, one per core."""
    t = dict(e)
    t.update(OMP_NUM_THREADS=str(n), OPENBLAS_NUM_THREADS=str(n), OMP_PROC_BIND="spread", OMP_PLACES="cores")
    return t


def minipipe_run(build, deck, mode, p, m, a, e, tmp, extra=()):
    exe = os.path.join(build, "miniapp", "minipipe")
    js = os.path.join(tmp, f"r_{mode}_{p}_{m}.json")
    sched = schedule_of(a, p, m)
    cmd = [exe, "run", "--deck", deck, "--train.mode", mode, "-m", str(m), "--schedule", sched, "--json", js,
           "--force"] + (["--train.fast_gemm", a.fast_gemm] if mode == "fast" and a.fast_gemm != "auto" else [])
    cmd += list(extra)
    if p > 1:
        cmd = ["mpiexec", "-n", str(p)] + cmd
    r = subprocess.run(cmd, env=e, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"e2e_speed: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    with open(js) as f:
        run = json.load(f)["runs"][0]
    return run["step_seconds"][1:], run  # step 0 warms up (first-touch pages, workspaces)


def torch_python():
    """A Python that imports torch: this one, else Debian's (python3-torch installs there)."""
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0:
            return py
    return None


def torch_run(py, a, e):
    r = subprocess.run([py, os.path.abspath(__file__), "--torch-child", "--vocab", str(a.vocab),
                        "--channels", str(a.channels), "--layers", str(a.layers), "--heads", str(a.heads),
                        "--seq-len", str(a.seq_len), "--batch", str(a.batch), "--steps", str(a.steps)],
                       env=e, check=True, capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def torch_child(a):
    """PyTorch eager GPT-2 of docs/design.md §2, written independently of miniPipe: one thread, fp32, AdamW."""
    import math
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(1)
    torch.manual_seed(1)
    C, V, L, T, B, H = a.channels, a.vocab, a.layers, a.seq_len, a.batch, a.heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
            self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.fc, self.fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
            self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in (q, k, v))
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            att = F.softmax(s.masked_fill(~self.mask[:t, :t], float("-inf")), dim=-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, C))
            return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.lnf = nn.LayerNorm(C, eps=1e-5)
            self.head = nn.Linear(C, V, bias=False)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.lnf(x))
            return F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1, reduction="sum") / (
                targets != -1).sum()

    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    idx = torch.randint(0, V, (B, T))
    tgt = torch.roll(idx, -1, dims=1)
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"step_seconds": times[1:], "torch": torch.__version__, "threads": torch.get_num_threads()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--baseline-build", default="")
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL=ARGS: rows of --build run with extra minipipe arguments (repeatable)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--schedule", default="zb-v", help="schedule of the p = 2 runs")
    ap.add_argument("--configs", default="1:1,1:8,2:1,2:8", help="p:m pairs")
    ap.add_argument("--threads", type=int, default=0,
                    help="also run p=1 m=1 with this many host threads (OpenMP backends; BLAS threads alike)")
    ap.add_argument("--fast-gemm", default="auto", choices=["auto", "blas", "gemm_det"],
                    help="train.fast_gemm of the fast rows (auto: gemm_det where its SIMD microkernel runs)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.steps < 2:
        ap.error("--steps must be at least 2 (the first step is a warm-up)")
    if a.threads == 1 or a.threads < 0:
        ap.error("--threads must be at least 2 (1 thread is every other row)")
    if a.threads and (1, 1) not in [tuple(int(x) for x in c.split(":")) for c in a.configs.split(",")]:
        ap.error("--threads compares against the p=1 m=1 rows: keep 1:1 in --configs")
    if a.torch_child:
        torch_child(a)
        return
    e = env()
    py = None if a.no_torch else torch_python()
    if not a.no_torch and not py:
        print("python3-torch is not installed: no PyTorch column (apt-get install python3-torch)")
    builds = [("", a.build, [])] + ([("baseline ", a.baseline_build, [])] if a.baseline_build else [])
    for v in a.variant:
        if "=" not in v:
            ap.error(f"--variant {v!r}: expected LABEL=ARGS")
        label, args = v.split("=", 1)
        builds.append((label.strip() + " ", a.build, args.split()))
    configs = [tuple(int(x) for x in c.split(":")) for c in a.configs.split(",")]
    tmp = tempfile.mkdtemp(prefix="minipipe_e2e_")
    deck = os.path.join(tmp, "deck.toml")
    with open(deck, "w") as f:
        f.write(deck_text(a))
    steps = {}  # (build label, mode, p, m) -> step seconds pooled over rounds
    probes = {1: [], a.threads: []}  # threads -> (triad GB/s, kernel us, team phase us) per round (--threads only)
    sgemm_threads = []  # the BLAS's sgemm at --threads threads, per round (--threads only)
    backends = {}  # build label -> its Kokkos backend
    fast_gemm_used = {}  # build label -> the GEMM its fast rows ran
    sgemm, torch_steps, ctx, info, torch_info = [], [], None, {}, {}
    try:
        for rnd in range(a.repeats):
            rate, ctx = sgemm_rate(a.build, a, e)
            sgemm.append(rate)
            for label, build, extra in builds:
                for p, m in configs:
                    for mode in ("deterministic", "fast"):
                        s, run = minipipe_run(build, deck, mode, p, m, a, e, tmp, extra)
                        steps.setdefault((label, mode, p, m), []).extend(s)
                        info = run
                        if mode == "fast":
                            fast_gemm_used[label] = run.get("gemm")
                        backends[label] = run.get("backend")
                if a.threads and backends[label] != "Serial":
                    for mode in ("deterministic", "fast"):
                        s, _ = minipipe_run(build, deck, mode, 1, 1, a, threaded_env(e, a.threads), tmp)
                        steps.setdefault((label, mode, "threads"), []).extend(s)
                    if not label:  # memory bandwidth and dispatch costs at 1 and N threads, same round
                        for n in probes:
                            probes[n].append(host_probes(build, threaded_env(e, n)))
                        # Unbound: OpenBLAS's pthreads inherit the core that OMP_PROC_BIND gives the
                        # process's master thread, so bound they would share one core.
                        unbound = {k: v for k, v in threaded_env(e, a.threads).items()
                                   if k not in ("OMP_PROC_BIND", "OMP_PLACES")}
                        sgemm_threads.append(sgemm_rate(build, a, unbound)[0])
            if py:
                t = torch_run(py, a, e)
                torch_steps.extend(t["step_seconds"])
                torch_info = t
            print(f"round {rnd + 1}/{a.repeats} done", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    tokens = a.batch * a.seq_len
    flops = model_flops(a)
    g = statistics.median(sgemm)
    print(f"model V={a.vocab} C={a.channels} L={a.layers} H={a.heads} T={a.seq_len} B={a.batch}, fp32, AdamW; "
          f"{flops / 1e9:.2f} GFLOP per step ({flops} FLOP); {a.repeats} interleaved rounds x {a.steps - 1} timed "
          f"steps, medians")
    print(f"Kokkos backend {info.get('backend')}, BLAS: {info.get('blas')}")
    for label, _, _ in builds:
        print(f"{label}fast rows' GEMM: {fast_gemm_used.get(label)}")
    print(f"sgemm (cblas, fc shape {tokens}x{4 * a.channels}x{a.channels}, 1 thread): {g:.1f} GFLOP/s "
          f"(rounds: {', '.join(f'{x:.1f}' for x in sgemm)}); openblas core {ctx.get('openblas_corename')}, "
          f"gemm_det microkernel: {ctx.get('gemm_det_microkernel')}")
    core = ctx.get("openblas_corename")
    ref = statistics.median(torch_steps) if torch_steps else None
    if ref:
        print(f"PyTorch {torch_info['torch']} eager, {torch_info['threads']} thread: {tokens / ref:.0f} tokens/s, "
              f"{flops / ref / 1e9:.1f} GFLOP/s ({flops / ref / 1e9 / g:.2f} of sgemm)")
    print(f"model rate over the same-run sgemm (OpenBLAS {core} kernels), each mode:")
    hdr = f"{'run':<26}{'schedule':>11}{'p':>3}{'m':>4}{'tokens/s':>11}{'GFLOP/s':>10}{'/sgemm':>8}"
    print(hdr + (f"{'/torch':>8}" if ref else ""))
    def rate_row(name, p, m, t, g):
        """A row's run, schedule, p, m, tokens/s, GFLOP/s and its ratio to the sgemm rate g."""
        line = f"{name:<26}{schedule_of(a, p, m):>11}{p:>3}{m:>4}{tokens / t:>11.0f}{flops / t / 1e9:>10.1f}"
        return line + f"{flops / t / 1e9 / g:>8.2f}"

    med = {k: statistics.median(v) for k, v in steps.items()}
    for label, _, _ in builds:
        for p, m in configs:
            for mode in ("deterministic", "fast"):
                t = med[(label, mode, p, m)]
                print(rate_row(label + mode, p, m, t, g) + (f"{ref / t:>8.2f}" if ref else ""))
    # On a shared host other tenants only ever slow a step down: the fastest step of a row (pooled
    # over its rounds) against the fastest sgemm round is the nearest this run gets to the code's
    # own speed. The medians above stay the headline figures.
    g_max = max(sgemm)
    print(f"fastest timed step of each row, against the fastest sgemm round ({g_max:.1f} GFLOP/s):")
    print(f"{'run':<26}{'schedule':>11}{'p':>3}{'m':>4}{'tokens/s':>11}{'GFLOP/s':>10}{'/sgemm':>8}")
    for label, _, _ in builds:
        for p, m in configs:
            for mode in ("deterministic", "fast"):
                print(rate_row(label + mode, p, m, min(steps[(label, mode, p, m)]), g_max))
    print("ratios (medians of this run):")
    for label, _, _ in builds:
        for mode in ("deterministic", "fast"):
            def r(num, den):
                return med[(label, mode) + den] / med[(label, mode) + num]
            parts = []
            if (1, 8) in configs and (1, 1) in configs:
                parts.append(f"m=8/m=1 speed at p=1 {r((1, 8), (1, 1)):.2f}")
            if (2, 8) in configs and (1, 8) in configs:
                parts.append(f"p=2/p=1 at m=8 {r((2, 8), (1, 8)):.2f}")
            print(f"  {label + mode}: " + "; ".join(parts))
        if (1, 1) in configs:
            print(f"  {label}fast/deterministic at p=1 m=1: "
                  f"{med[(label, 'deterministic', 1, 1)] / med[(label, 'fast', 1, 1)]:.2f}")
    if a.baseline_build:
        for label, _, _ in builds:
            if label == "baseline ":
                continue
            for p, m in configs:
                for mode in ("deterministic", "fast"):
                    print(f"  {label or 'this build '}speed-up over baseline, {mode} p={p} m={m}: "
                          f"{med[('baseline ', mode, p, m)] / med[(label, mode, p, m)]:.2f}")
    if all(b == "Serial" for b in backends.values()):
        print("Kokkos thread scaling: not measured (this Kokkos has the Serial backend only)")
    elif not a.threads:
        print("Kokkos thread scaling: not measured (--threads N runs p=1 m=1 with N threads)")
    else:
        print(f"Kokkos thread scaling, p=1 m=1, {a.threads} threads "
              f"(OMP_PROC_BIND=spread, OMP_PLACES=cores, OPENBLAS_NUM_THREADS={a.threads}) over 1 thread:")
        for label, _, _ in builds:
            for mode in ("deterministic", "fast"):
                if (label, mode, "threads") not in med:
                    print(f"  {label + mode}: not measured (its Kokkos has the Serial backend only)")
                    continue
                t = med[(label, mode, "threads")]
                print(f"  {label + mode} ({backends[label]}): {tokens / t:.0f} tokens/s, {flops / t / 1e9:.1f} GFLOP/s, "
                      f"speed-up {med[(label, mode, 1, 1)] / t:.2f}")
        if probes[1]:
            t1, tn = (statistics.median(x[0] for x in probes[n]) for n in (1, a.threads))
            print(f"  memory bandwidth (stream_f32 triad, 3 x 64 MiB, same rounds): 1 thread {t1:.1f} GB/s, "
                  f"{a.threads} threads {tn:.1f} GB/s, ratio {tn / t1:.2f} (rounds: "
                  f"{', '.join(f'{y[0] / x[0]:.2f}' for x, y in zip(probes[1], probes[a.threads]))})")
            # The vendor BLAS's own scaling on the model's fc shape: the yardstick for the step's.
            print(f"  sgemm (cblas, fc shape, same rounds, threads unbound): 1 thread {g:.1f} GFLOP/s, {a.threads} threads "
                  f"{statistics.median(sgemm_threads):.1f}, ratio {statistics.median(sgemm_threads) / g:.2f} (rounds: "
                  f"{', '.join(f'{y / x:.2f}' for x, y in zip(sgemm, sgemm_threads))})")
            k1, kn = (statistics.median(x[1] for x in probes[n]) for n in (1, a.threads))
            ph = statistics.median(x[2] for x in probes[a.threads])
            print(f"  kernel dispatch (dispatch/parallel_for, one item per thread + fence, same rounds): 1 thread "
                  f"{k1:.2f} us, {a.threads} threads {kn:.2f} us; one phase of a {a.threads}-thread team region "
                  f"(a team barrier) {ph:.2f} us")


if __name__ == "__main__":
    main()
