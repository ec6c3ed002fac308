#!/usr/bin/env python3
"""Register, spill and shared-memory budgets of miniPipe's device kernels (standard library only).

Reads the device compiler's per-kernel resource report of minipipe_kernels (scripts/device_budgets.sh
builds it with MINIPIPE_PTXAS_VERBOSE=ON and passes the build log here) and writes one Markdown table
per backend: kernel, team size, registers, spill bytes, shared memory, blocks per SM (CUDA) or waves
per SIMD (HIP), theoretical occupancy. With --check it fails (exit 1) when a kernel spills, when a
kernel cannot launch at its team size, or when a team kernel is missing from LAUNCH_SHAPES.

  device_budgets.py cuda BUILD_LOG [--check] [--markdown OUT]
  device_budgets.py hip  BUILD_LOG [--check] [--markdown OUT]
  device_budgets.py --self-test       (the occupancy rules and checks on known cases)

Exit codes: 0 within budget, 1 a budget is broken, 2 bad input (no kernel in the log, bad usage).
"""
import argparse
import math
import re
import subprocess
import sys

# ---------------------------------------------------------------------------------------------
# Launch shapes: the one place that says how each device kernel is launched on a GPU. Each entry
# is (pattern, team, scratch, role) where pattern is a regular expression matched against the
# short kernel name this script prints (e.g. "gemm_detail::GemmTeamBody<float> team"), team is the
# number of threads of a team/block on a GPU ("auto": Kokkos chooses it, Kokkos::AUTO or a
# RangePolicy) and scratch(T, hs) is the level-0 team scratch in bytes the code requests (T: bytes
# of the element type, hs: head size; GPT-2's hs = 64). Every device team kernel is a body functor
# launched through team::launch (kernels/team.hpp); its GPU shape (team::Target::gpu) comes from
# one function per kernel, mirrored here:
#   gemm_detail::GemmTeamBody      gemm_shape: DeviceTile<T>::kGpuTeam = 256; device_scratch_bytes<T>(256)
#   attention_device::*Body        attention_shape: kGpuTeam = 256; Scratch<Real>::shmem_size(*_elems(hs))
#   LayerNorm, CrossEntropy rows   rowred::row_shape: rowred::kLanes = 32 threads; kLanes values
#     (ForwardDet, Forward<T, true>, BackwardInput<T, true>; fast mode's ForwardFast, Forward<T,
#     false>, BackwardInput<T, false>: 32 threads, no scratch)
#   LayerNorm BackwardWeight       backward_weight_shape: kWChunks * kWCols = 8 * 32; 2 * 8 * 32 values
#   Embedding WteBody              kCols = 32 threads, no scratch
#   HostForward, HostBackward      host_team_shape: 128; on a GPU only for heads the device path
#                                  cannot hold, whose tiles then sit in level-1 (global) scratch
# Bodies in an anonymous namespace are named with their unit ("layernorm.cpp: BackwardInput<...>"):
# LayerNorm and CrossEntropy both have a BackwardInput. The first pattern that matches wins. When
# a launch-shape function changes, change it here.
LANES = 32


def _view_scratch(n, t):  # team::scratch_bytes<T>(n) = Kokkos::View<T*, scratch>::shmem_size(n): n values plus one
    return (n + 1) * t


def _gemm_scratch(t):  # device_scratch_bytes<T>(256): one carve of 2 x KT x (TY RM + TX RN); RM = RN = 4, KT = 8; 16 x 16 threads
    rm, rn, kt = 4, 4, 8
    return _view_scratch(2 * kt * (16 * rm + 16 * rn), t)


def _att(t):  # Tiles<Real>: kQ = 128 / sizeof, kK = kKB = kQD = 64 / sizeof
    return 128 // t, 64 // t, 64 // t, 64 // t


def _att_forward(t, hs):
    q, k, _, _ = _att(t)
    return _view_scratch(q * (hs + 1) + k * (hs + 1) + q + q * LANES, t)


def _att_out(t, hs):
    q, k, _, _ = _att(t)
    return _view_scratch(k * (hs + 1) + q * k + q * hs, t)


def _att_rowdot(t, hs):
    q, k, _, _ = _att(t)
    return _view_scratch(q * (hs + 1) + k * (hs + 1) + q * k + q * LANES, t)


def _att_dkv(t, hs):
    _, _, kb, qd = _att(t)
    return _view_scratch(kb * (hs + 1) + 2 * qd * (hs + 1) + 2 * qd * kb + qd + 2 * kb * hs, t)


def _att_dq(t, hs):
    q, _, kb, _ = _att(t)
    return _view_scratch(q * (hs + 1) + 2 * kb * (hs + 1) + q * kb + q + q * hs, t)


HOT, FALLBACK, HOST, OTHER, LIBRARY = "hot", "fallback", "host path", "device", "Kokkos Kernels"
LAUNCH_SHAPES = [
    (r"^gemm_detail::GemmTeamBody<.*> team$", 256, lambda t, hs: _gemm_scratch(t), HOT),
    (r"^attention_device::ForwardBody<.*> team$", 256, _att_forward, HOT),
    (r"^attention_device::OutBody<.*> team$", 256, _att_out, HOT),
    (r"^attention_device::RowdotBody<.*> team$", 256, _att_rowdot, HOT),
    (r"^attention_device::DkvBody<.*> team$", 256, _att_dkv, HOT),
    (r"^attention_device::DqBody<.*> team$", 256, _att_dq, HOT),
    # deterministic row kernels: kLanes values of scratch for the canonical tree
    (r"^layernorm\.cpp: (ForwardDet<.*>|BackwardInput<.*, true>) team$", LANES,
     lambda t, hs: _view_scratch(LANES, t), HOT),
    (r"^cross_entropy\.cpp: (Forward|BackwardInput)<.*, true> team$", LANES, lambda t, hs: _view_scratch(LANES, t), HOT),
    # fast mode's row kernels: team reductions, no scratch
    (r"^layernorm\.cpp: (ForwardFast<.*>|BackwardInput<.*, false>) team$", LANES, lambda t, hs: 0, HOT),
    (r"^cross_entropy\.cpp: (Forward|BackwardInput)<.*, false> team$", LANES, lambda t, hs: 0, HOT),
    (r"^layernorm\.cpp: BackwardWeight<.*> team$", 8 * LANES, lambda t, hs: _view_scratch(2 * 8 * LANES, t), HOT),
    (r"^embedding\.cpp: WteBody<.*> team$", 32, lambda t, hs: 0, OTHER),
    # the host path's attention teams: on a GPU only for heads whose tiles the device path cannot
    # hold (not at GPT-2 shapes), their scratch then in level 1 (global memory, no shared memory)
    (r"^Host(Forward|Backward)<.*> team$", 128, lambda t, hs: 0, FALLBACK),
    # the host path's row loops: compiled for the device, never launched there (a GPU's memory is
    # not host-accessible, so use_device_path() is always true)
    (r"(LayerNorm|CrossEntropy)<.*>::(forward|backward_input|backward_weight) range#1 \(int\)$", "auto",
     lambda t, hs: 0, HOST),
    (r"Embedding<.*>::backward_weight range#1 \(int\)$", "auto", lambda t, hs: 0, HOST),
    # attention for heads whose tiles fit no team scratch: the canonical order's row kernels
    (r"^attention_order::", "auto", lambda t, hs: 0, FALLBACK),
    # Kokkos Kernels' own kernels (fast mode's KokkosBlas::gemm; cuBLAS when its TPL is on): their
    # launch shapes are the library's
    (r"^(KokkosBlas|KokkosKernels|KokkosBatched)::", "auto", lambda t, hs: 0, LIBRARY),
    # every other RangePolicy / Kokkos::AUTO kernel, named functor and Kokkos' own: Kokkos picks the
    # block size, so the table shows the best one. A team kernel not listed above is an error.
    (r"^(?!.* team(#\d+)?$)", "auto", lambda t, hs: 0, OTHER),
]
HEAD_SIZE = 64  # GPT-2's head size, for the attention tiles' scratch

# The hot kernels (GEMMs, attention, row kernels; role HOT above) must reach this occupancy.
OCCUPANCY_TARGET = 0.25

# ---------------------------------------------------------------------------------------------
# Occupancy rules, as the vendors state them.
# NVIDIA sm_90 (CUDA C++ Programming Guide, "Compute Capabilities" table; the occupancy calculator
# in cuda_occupancy.h): 65536 32-bit registers per SM and per block, at most 255 per thread,
# allocated per warp in units of 256 (regs x 32 rounded up to 256) from 4 sub-partitions of 16384
# each; the launch check rounds a block's warps up to a multiple of 4; at most 32 blocks and 64
# warps (2048 threads) per SM, 1024 threads per block; 228 KB of shared memory per SM, at most
# 227 KB per block, allocated in units of 128 bytes, plus 1 KB the driver reserves per block.
SM90 = dict(regs_sm=65536, regs_block=65536, max_regs=255, reg_unit=256, subparts=4, max_blocks=32,
            max_warps=64, max_threads=1024, smem_sm=228 * 1024, smem_block=227 * 1024, smem_unit=128,
            smem_reserved=1024)
# AMD gfx90a (MI200; AMD CDNA2 ISA guide and the HIP performance guide's occupancy section): wave64;
# 4 SIMDs per CU; 512 vector registers per SIMD lane in one file shared by VGPRs and AGPRs (the
# code object's vgpr_count on gfx90a is the unified count, allocated in units of 8); at most 8 waves
# per SIMD; SGPRs (the remark's count includes VCC, FLAT_SCRATCH, XNACK_MASK) limit a SIMD to 8
# waves up to 100 a wave and 7 above (LLVM's AMDGPU occupancy table for gfx9, which the compiler's
# own "Occupancy [waves/SIMD]" remark applies); 64 KB of LDS per CU shared by the CU's workgroups,
# allocated in units of 128 dwords (512 B: the code object's LDS_SIZE granule on gfx7 to gfx9); 1024
# threads per workgroup, whose waves are spread over the CU's 4 SIMDs; at most 16 workgroups of
# more than one wave a CU (hardware barriers; LLVM's getMaxWorkGroupsPerCU).
GFX90A = dict(vgprs=512, vgpr_unit=8, max_waves=8, sgpr_waves=((100, 8),), sgpr_min_waves=7, simds=4, wave=64,
              lds_cu=64 * 1024, lds_unit=512, max_threads=1024, max_barrier_wgs=16)


def round_up(x, m):
    return (x + m - 1) // m * m


def sm90_blocks(regs, threads, smem):
    """Resident blocks per SM (0: cannot launch) and the limiting resource."""
    a = SM90
    if threads > a["max_threads"] or regs > a["max_regs"] or smem > a["smem_block"]:
        return 0, "launch"
    warps = math.ceil(threads / 32)
    per_warp = round_up(max(regs, 1) * 32, a["reg_unit"])
    if per_warp * round_up(warps, a["subparts"]) > a["regs_block"]:
        return 0, "registers"
    warps_by_regs = (a["regs_sm"] // a["subparts"] // per_warp) * a["subparts"]
    limits = {  # on a tie the first is named
        "warps": a["max_warps"] // warps,
        "blocks": a["max_blocks"],
        "registers": warps_by_regs // warps,
        "shared": a["smem_sm"] // round_up(smem + a["smem_reserved"], a["smem_unit"]),
    }
    why = min(limits, key=lambda k: limits[k])
    return limits[why], why


def gfx90a_waves(vgprs, sgprs, threads, lds):
    """Resident waves per SIMD, averaged over the CU's 4 SIMDs (0: cannot launch; 0.5: one 2-wave
    workgroup a CU), and the limiting resource."""
    a = GFX90A
    if threads > a["max_threads"] or lds > a["lds_cu"] or vgprs > a["vgprs"]:
        return 0, "launch"
    waves_wg = math.ceil(threads / a["wave"])
    by_vgpr = min(a["max_waves"], a["vgprs"] // round_up(max(vgprs, 1), a["vgpr_unit"]))
    by_sgpr = next((w for limit, w in a["sgpr_waves"] if sgprs <= limit), a["sgpr_min_waves"])
    # whole workgroups per CU: a workgroup's waves take wave slots of the CU's SIMDs
    slots = a["max_waves"] * a["simds"] // waves_wg
    limits = {
        "waves": slots if waves_wg == 1 else min(slots, a["max_barrier_wgs"]),
        "vgprs": by_vgpr * a["simds"] // waves_wg,
        "sgprs": by_sgpr * a["simds"] // waves_wg,
        "lds": a["lds_cu"] // round_up(lds, a["lds_unit"]) if lds > 0 else a["max_waves"] * a["simds"],
    }
    wgs = min(limits.values())
    waves = wgs * waves_wg / a["simds"]
    # the resource that binds (a register limit before the wave-slot limit it ties with)
    why = "waves" if waves == a["max_waves"] else next(k for k in ("vgprs", "sgprs", "lds", "waves") if limits[k] == wgs)
    return (waves if wgs else 0), why


# ---------------------------------------------------------------------------------------------
# Kernel names: the Kokkos closure or functor inside ParallelFor/ParallelReduce<...>, shortened.
def _strip_parens(s):
    out, depth = [], 0
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _first_template_arg(s, start):
    depth, i = 0, start
    while i < len(s):
        c = s[i]
        if c in "<(":
            depth += 1
        elif c in ">)":
            if depth == 0:
                return s[start:i]
            depth -= 1
        elif c == "," and depth == 0:
            return s[start:i]
        i += 1
    return s[start:]


def short_name(demangled, unit=None):
    """The kernel's body (closure or functor) without Kokkos' wrappers. `unit`: the source file the
    kernel was compiled from, put before a body declared in an anonymous namespace of minipipe
    ("layernorm.cpp: BackwardInput<float, true> team"), where two units may use one name."""
    # nvcc's prefix of a kernel whose owner has internal linkage: a hash that changes with each build
    demangled = re.sub(r"_INTERNAL_[0-9a-f]+_\d+_\w+?_[0-9a-f]+_\d+::", "", demangled)
    m = re.search(r"Kokkos::Impl::(ParallelFor|ParallelReduce|ParallelScan\w*)<", demangled)
    if not m:
        return _strip_parens(demangled.replace("(anonymous namespace)::", "")).strip()
    kind = m.group(1)
    body = _first_template_arg(demangled, m.end())
    policy = _first_template_arg(demangled, m.end() + len(body) + 1)
    cf = "Kokkos::Impl::CombinedFunctorReducer<"
    if body.startswith(cf):
        body = _first_template_arg(body, len(cf))
    kb = "minipipe::team::KokkosBody<"  # team::launch's wrapper of a team body (kernels/team.hpp)
    if body.startswith(kb):
        body = _first_template_arg(body, len(kb)).strip()
    anon = body.startswith("minipipe::(anonymous namespace)::")
    body = body.replace("(anonymous namespace)::", "")
    lam = re.search(r"::\{lambda\((.*)\)#(\d+)\}$", body)
    name = _strip_parens(body)
    if lam:  # the innermost closure: the last "::{lambda(" of the name
        i = body.rindex("::{lambda(")
        params = _first_template_arg(body, i + len("::{lambda("))
        number = re.search(r"#(\d+)\}$", body).group(1)
        owner = _strip_parens(body[:i])
        owner = re.sub(r"\s+const$", "", owner).strip()
        if "{lambda" in owner:  # a function template instantiated with a closure: its first argument
            head = owner.split("<", 1)[0]
            owner = f"{head}<{_first_template_arg(owner, len(head) + 1).strip()}>" if "<" in owner else head
            owner = re.sub(r"\s*\{lambda[^}]*\}", "", owner)
        team = "TeamMember" in params or "team_member" in params.lower()
        tag = "team" if team else ("reduce" if kind == "ParallelReduce" else "range")
        name = f"{owner} {tag}#{number}"
        if not team:  # lambdas are numbered per parameter list: name it
            name += f" ({params.replace('const', '').strip()})"
    elif "TeamPolicy<" in policy:  # a named team functor: its launch shape must be listed too
        name += " team"
    name = _drop_template_args(name.replace("minipipe::", ""), "Kokkos::View<", "View")
    if re.match(r"(Kokkos|KokkosBlas|KokkosKernels|KokkosBatched)::", name):
        name = name.split("<", 1)[0]  # the library's functor, whatever its instantiation
    name = re.sub(r"\s+", " ", name).strip()
    return f"{unit}: {name}" if anon and unit else name


def is_team(name):
    return re.search(r" team(#\d+)?$", name) is not None


def _drop_template_args(s, head, repl):
    """Replaces every head<...> (balanced) in s by repl."""
    while head in s:
        i = s.index(head)
        j, depth = i + len(head), 1
        while j < len(s) and depth:
            depth += {"<": 1, ">": -1}.get(s[j], 0)
            j += 1
        s = s[:i] + repl + s[j:]
    return s


def demangle(names):
    if not names:
        return {}
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
        return dict(zip(names, out.splitlines()))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def launch_shape(name, tbytes):
    """(team, scratch bytes, role) of a kernel; team None when LAUNCH_SHAPES has no entry."""
    for pat, team, scratch, role in LAUNCH_SHAPES:
        if re.search(pat, name):
            return team, scratch(tbytes, HEAD_SIZE), role
    return None, 0, None


def elem_bytes(name):
    """Bytes of the kernel's element type: its first template argument (Forward<double, true>)."""
    return 8 if re.search(r"<double\s*[,>]", name) else 4


# ---------------------------------------------------------------------------------------------
# device_budgets.sh puts this line before each unit's part of the report.
UNIT_MARK = re.compile(r"^device_budgets unit: (\S+)$")


def _key(mangled, unit):
    """A kernel's key: its mangled name, with the unit where the name is the unit's own (anonymous
    namespace: `_GLOBAL__N_1` in every unit on HIP)."""
    return f"{unit}:{mangled}" if unit and "_GLOBAL__N" in mangled else mangled


def _new_kernel(mangled, unit, **fields):
    return dict(fields, mangled=mangled, unit=unit)


# CUDA: ptxas -v lines (nvcc 12/13):
#   ptxas info    : Compiling entry function '_Z...' for 'sm_90'
#   ptxas info    : Function properties for _Z...
#       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
#   ptxas info    : Used 40 registers, used 1 barriers, 8 bytes smem, 400 bytes cmem[0]
def parse_ptxas(text):
    kernels, cur, props, unit = {}, None, None, None
    for line in text.splitlines():
        m = UNIT_MARK.match(line)
        if m:
            unit, cur, props = m.group(1), None, None
            continue
        m = re.search(r"Compiling entry function '([^']+)' for '(sm_\d+a?)'", line)
        if m:
            cur = _key(m.group(1), unit)
            kernels.setdefault(cur, _new_kernel(m.group(1), unit, regs=0, spill_st=0, spill_ld=0, stack=0, smem=0,
                                                arch=m.group(2)))
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            props = _key(m.group(1), unit)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and props in kernels:
            k = kernels[props]
            k["stack"], k["spill_st"], k["spill_ld"] = (int(g) for g in m.groups())
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and cur in kernels:
            kernels[cur]["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            kernels[cur]["smem"] = int(s.group(1)) if s else 0
    return kernels


# HIP (clang -Rpass-analysis=kernel-resource-usage, ROCm 5.2.3's clang 15):
#   remark: file:line:col: Function Name: _Z...
#   remark: ...: VGPRs: 32 / AGPRs: 0 / SGPRs: 40 / ScratchSize [bytes/lane]: 0 / Occupancy [waves/SIMD]: 8
#   / SGPRs Spill: 0 / VGPRs Spill: 0 / LDS Size [bytes/block]: 0
def parse_amdgpu_remarks(text):
    kernels, cur, unit = {}, None, None
    for line in text.splitlines():
        m = UNIT_MARK.match(line)
        if m:
            unit, cur = m.group(1), None
            continue
        m = re.search(r"Function Name: (\S+)", line)
        if m:
            cur = _key(m.group(1), unit)
            kernels.setdefault(cur, _new_kernel(m.group(1), unit, vgprs=0, agprs=0, sgprs=0, scratch=0, sgpr_spill=0,
                                                vgpr_spill=0, lds=0, cc_waves=None))
            continue
        if cur is None:
            continue
        for key, pat in (("vgprs", r"\bVGPRs: (\d+)"), ("agprs", r"\bAGPRs: (\d+)"), ("sgprs", r"\bSGPRs: (\d+)"),
                         ("scratch", r"ScratchSize \[bytes/lane\]: (\d+)"), ("sgpr_spill", r"SGPRs Spill: (\d+)"),
                         ("vgpr_spill", r"VGPRs Spill: (\d+)"), ("lds", r"LDS Size \[bytes/block\]: (\d+)"),
                         ("cc_waves", r"Occupancy \[waves/SIMD\]: (\d+)")):
            m = re.search(pat, line)
            if m:
                kernels[cur][key] = int(m.group(1))
    return kernels


def best_auto(fn):
    best = (0, 0, "")
    for threads in range(64, 1025, 64):
        v, why = fn(threads)
        occ = v
        if occ >= best[0] and occ > 0:
            best = (occ, threads, why)
    return best


def rows_cuda(kernels):
    names = demangle(sorted({k["mangled"] for k in kernels.values()}))
    rows, problems = [], []
    for k in kernels.values():
        name = short_name(names[k["mangled"]], k["unit"])
        team, scratch, role = launch_shape(name, elem_bytes(name))
        smem = k["smem"] + scratch
        spill = k["spill_st"] + k["spill_ld"]
        if team is None:
            problems.append(f"{name}: no launch shape in LAUNCH_SHAPES (scripts/device_budgets.py)")
            continue
        # Kokkos adds 8 x (team + 2) bytes of its own to a team kernel's shared memory (team reductions)
        extra = (lambda th: 8 * (th + 2)) if is_team(name) else (lambda th: 0)
        if team == "auto":
            warps, threads, why = best_auto(lambda th: _sm90_warps(k["regs"], th, smem + extra(th)))
            blocks = warps // math.ceil(threads / 32) if threads else 0
            team_txt = f"auto ({threads})"
            smem_txt = smem + extra(threads)
        else:
            smem_txt = smem + extra(team)
            blocks, why = sm90_blocks(k["regs"], team, smem_txt)
            warps = blocks * math.ceil(team / 32)
            threads = team
            team_txt = str(team)
            if blocks == 0:
                problems.append(f"{name}: {k['regs']} registers x {team} threads cannot launch on sm_90 ({why})")
        if spill:
            problems.append(f"{name}: spills {k['spill_st']} B stored / {k['spill_ld']} B loaded on sm_90")
        occ = warps / SM90["max_warps"]
        rows.append(dict(name=name, role=role, team=team_txt, regs_n=k["regs"],
                         cols=[k["regs"], f"{k['spill_st']} / {k['spill_ld']}", smem_txt, f"{blocks} ({why})"],
                         occ=occ, stack=k["stack"]))
    return rows, problems


def _sm90_warps(regs, threads, smem):
    blocks, why = sm90_blocks(regs, threads, smem)
    return blocks * math.ceil(threads / 32), why


def rows_hip(kernels):
    names = demangle(sorted({k["mangled"] for k in kernels.values()}))
    rows, problems = [], []
    for k in kernels.values():
        name = short_name(names[k["mangled"]], k["unit"])
        team, scratch, role = launch_shape(name, elem_bytes(name))
        lds = k["lds"] + scratch
        # scratch alone is the kernel's stack (private arrays), like ptxas' stack frame: shown, not a spill
        spill = k["vgpr_spill"] + k["sgpr_spill"]
        # gfx90a: the unified register file holds VGPRs then AGPRs (VGPRs rounded up to 4 first)
        vg = round_up(k["vgprs"], 4) + k["agprs"] if k["agprs"] else k["vgprs"]
        if team is None:
            problems.append(f"{name}: no launch shape in LAUNCH_SHAPES (scripts/device_budgets.py)")
            continue
        extra = (lambda th: 8 * (th + 2)) if is_team(name) else (lambda th: 0)
        if team == "auto":
            waves, threads, why = best_auto(lambda th: gfx90a_waves(vg, k["sgprs"], th, lds + extra(th)))
            team_txt = f"auto ({threads})"
            lds_txt = lds + extra(threads)
        else:
            lds_txt = lds + extra(team)
            waves, why = gfx90a_waves(vg, k["sgprs"], team, lds_txt)
            team_txt = str(team)
            if waves == 0:
                problems.append(f"{name}: {vg} VGPRs x {team} threads cannot launch on gfx90a ({why})")
        if spill:
            # LLVM spills SGPRs into lanes of VGPRs first: with no scratch they never reach memory
            where = "; SGPRs into VGPR lanes, no scratch memory" if not k["vgpr_spill"] and not k["scratch"] else ""
            problems.append(f"{name}: spills on gfx90a (VGPR spill {k['vgpr_spill']}, SGPR spill "
                            f"{k['sgpr_spill']}, scratch {k['scratch']} B/lane{where})")
        occ = waves / GFX90A["max_waves"]
        cc = "?" if k["cc_waves"] is None else k["cc_waves"]
        rows.append(dict(name=name, role=role, team=team_txt, regs_n=vg,
                         cols=[k["vgprs"], k["agprs"], k["sgprs"], f"{k['vgpr_spill']} / {k['sgpr_spill']}",
                               k["scratch"], lds_txt, f"{_waves_txt(waves)} ({why})", cc],
                         occ=occ, stack=k["scratch"]))
    return rows, problems


def _waves_txt(w):
    return f"{w:g}"


ROLE_ORDER = {HOT: 0, OTHER: 1, FALLBACK: 2, HOST: 3, LIBRARY: 4}


def table(backend, rows):
    if backend == "cuda":
        head = ("| kernel | role | team | registers | spill stores / loads (B) | shared memory (B) | blocks per SM "
                "(limit) | occupancy |\n|---|---|---|---|---|---|---|---|")
    else:
        head = ("| kernel | role | team | VGPRs | AGPRs | SGPRs | spill VGPRs / SGPRs | scratch (B/lane) | LDS (B) | "
                "waves per SIMD (limit) | compiler's waves per SIMD | occupancy |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    merged = {}  # one row a name: the worst instantiation (most registers), with the count
    for r in rows:
        m = merged.get(r["name"])
        if m is None or (r["occ"], -r["regs_n"]) < (m["occ"], -m["regs_n"]):
            r = dict(r, count=(m["count"] + 1) if m else 1)
            merged[r["name"]] = r
        else:
            m["count"] += 1
    for r in sorted(merged.values(), key=lambda r: (ROLE_ORDER[r["role"]], r["name"])):
        r["shown"] = f"`{r['name']}`" + (f" ({r['count']} instantiations, the worst)" if r["count"] > 1 else "")
        flag = " **(below 25%)**" if r["role"] == HOT and r["occ"] < OCCUPANCY_TARGET else ""
        cols = " | ".join(str(c) for c in r["cols"])
        lines.append(f"| {r['shown']} | {r['role']} | {r['team']} | {cols} | {r['occ'] * 100:.1f}%{flag} |")
    return "\n".join(lines) + "\n"


def self_test():
    """The occupancy rules and the checks on known cases (no toolchain needed)."""
    fails = []

    def expect(what, got, want):
        if got != want:
            fails.append(f"{what}: got {got!r}, expected {want!r}")

    # sm_90: 255 registers x 256 threads is one block (8 of 64 warps: 12.5%); 128 registers two
    # blocks (25%); 255 x 512 cannot launch (64 K registers a block); 32 registers: 8 blocks (warps).
    expect("sm90 255 regs x 256", sm90_blocks(255, 256, 16384)[0], 1)
    expect("sm90 128 regs x 256", sm90_blocks(128, 256, 16384)[0], 2)
    expect("sm90 129 regs x 256", sm90_blocks(129, 256, 16384)[0], 1)
    expect("sm90 255 regs x 512", sm90_blocks(255, 512, 0), (0, "registers"))
    expect("sm90 32 regs x 256", sm90_blocks(32, 256, 0), (8, "warps"))
    expect("sm90 64 regs x 256", sm90_blocks(64, 256, 0), (4, "registers"))
    expect("sm90 32 regs x 32", sm90_blocks(32, 32, 0), (32, "blocks"))
    expect("sm90 100 KB shared", sm90_blocks(32, 128, 100 * 1024), (2, "shared"))
    expect("sm90 228 KB shared", sm90_blocks(32, 128, 228 * 1024)[0], 0)
    # gfx90a: 128 VGPRs -> 4 waves per SIMD; 512 -> 1; 256 threads = 4 waves, one a SIMD
    expect("gfx90a 128 vgprs x 256", gfx90a_waves(128, 32, 256, 0)[0], 4)
    expect("gfx90a 512 vgprs x 256", gfx90a_waves(512, 32, 256, 0)[0], 1)
    expect("gfx90a 40 KB LDS x 256", gfx90a_waves(32, 32, 256, 40 * 1024)[0], 1)
    expect("gfx90a 16 vgprs x 64", gfx90a_waves(16, 16, 64, 0)[0], 8)
    # a 128-thread team (2 waves) with 34 KB of LDS: one a CU, its 2 waves on 2 of the 4 SIMDs
    expect("gfx90a 2-wave team, 34 KB LDS", gfx90a_waves(56, 96, 128, 34 * 1024), (0.5, "lds"))
    # LDS in units of 512 B: 16385 B a workgroup takes 16896, three a CU, not four
    expect("gfx90a LDS granule", gfx90a_waves(32, 32, 256, 16385), (3, "lds"))
    expect("gfx90a LDS at a granule", gfx90a_waves(32, 32, 256, 16384), (4, "lds"))
    # one-wave workgroups: 32 a CU (8 a SIMD); two-wave ones at most 16 a CU (barriers)
    expect("gfx90a 1-wave teams", gfx90a_waves(32, 32, 32, 0), (8, "waves"))
    expect("gfx90a 2-wave teams", gfx90a_waves(32, 32, 128, 0), (8, "waves"))
    # SGPRs (LLVM's table for gfx9): 100 a wave still 8 waves per SIMD, 101 seven
    expect("gfx90a 100 sgprs", gfx90a_waves(32, 100, 256, 0), (8, "waves"))
    expect("gfx90a 101 sgprs", gfx90a_waves(32, 101, 256, 0), (7, "sgprs"))
    # 896 threads (14 waves) at 72 VGPRs: 2 workgroups, 7 waves a SIMD, the VGPRs bind
    expect("gfx90a VGPRs bind at a tie", gfx90a_waves(66, 92, 896, 0), (7, "vgprs"))
    # ptxas -v and clang remark parsing, and --check's verdicts
    log = ("ptxas info    : Compiling entry function '_Z4kernPfi' for 'sm_90'\n"
           "ptxas info    : Function properties for _Z4kernPfi\n"
           "    40 bytes stack frame, 36 bytes spill stores, 36 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 1 barriers, 40 bytes cumulative stack size, 8 bytes smem\n")
    k = parse_ptxas(log)
    expect("ptxas parse", k.get("_Z4kernPfi"),
           dict(regs=255, spill_st=36, spill_ld=36, stack=40, smem=8, arch="sm_90", mangled="_Z4kernPfi", unit=None))
    hip = ("k.cpp:2:1: remark: Function Name: _Z4kernPfi [-Rpass-analysis=kernel-resource-usage]\n"
           "k.cpp:2:1: remark:     SGPRs: 12 [-Rpass-analysis=kernel-resource-usage]\n"
           "k.cpp:2:1: remark:     VGPRs: 6 [-Rpass-analysis=kernel-resource-usage]\n"
           "k.cpp:2:1: remark:     AGPRs: 0 [-Rpass-analysis=kernel-resource-usage]\n"
           "k.cpp:2:1: remark:     ScratchSize [bytes/lane]: 0 [-Rpass-analysis=kernel-resource-usage]\n"
           "k.cpp:2:1: remark:     Occupancy [waves/SIMD]: 8 [-Rpass-analysis=kernel-resource-usage]\n"
           "k.cpp:2:1: remark:     SGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]\n"
           "k.cpp:2:1: remark:     VGPRs Spill: 3 [-Rpass-analysis=kernel-resource-usage]\n"
           "k.cpp:2:1: remark:     LDS Size [bytes/block]: 256 [-Rpass-analysis=kernel-resource-usage]\n")
    expect("remark parse", parse_amdgpu_remarks(hip).get("_Z4kernPfi"),
           dict(vgprs=6, agprs=0, sgprs=12, scratch=0, sgpr_spill=0, vgpr_spill=3, lds=256, cc_waves=8,
                mangled="_Z4kernPfi", unit=None))
    # one anonymous-namespace name in two units: two kernels, each with its unit
    two = ("device_budgets unit: layernorm.cpp\n" + log.replace("_Z4kernPfi", "_ZN12_GLOBAL__N_14kernEv") +
           "device_budgets unit: cross_entropy.cpp\n" + log.replace("_Z4kernPfi", "_ZN12_GLOBAL__N_14kernEv"))
    expect("units of anonymous kernels", sorted(k["unit"] for k in parse_ptxas(two).values()),
           ["cross_entropy.cpp", "layernorm.cpp"])
    global LAUNCH_SHAPES
    saved = LAUNCH_SHAPES
    try:
        LAUNCH_SHAPES = [(r"^kern$", 256, lambda t, hs: 0, HOT)]
        _, problems = rows_cuda(k)
        expect("a spill is a problem", any("spills" in p for p in problems), True)
        LAUNCH_SHAPES = [(r"^kern$", 512, lambda t, hs: 0, HOT)]
        _, problems = rows_cuda(k)
        expect("255 x 512 cannot launch", any("cannot launch" in p for p in problems), True)
        LAUNCH_SHAPES = []
        _, problems = rows_cuda(k)
        expect("an unmapped kernel is a problem", any("no launch shape" in p for p in problems), True)
        # HIP: scratch without a spill is the kernel's stack, not a spill; a VGPR spill is one
        LAUNCH_SHAPES = [(r"^kern$", 256, lambda t, hs: 0, HOT)]
        stack = parse_amdgpu_remarks(hip.replace("VGPRs Spill: 3", "VGPRs Spill: 0").replace(
            "ScratchSize [bytes/lane]: 0", "ScratchSize [bytes/lane]: 24"))
        expect("HIP scratch alone is no spill", rows_hip(stack)[1], [])
        expect("a HIP VGPR spill is a problem", any("spills" in p for p in rows_hip(parse_amdgpu_remarks(hip))[1]),
               True)
    finally:
        LAUNCH_SHAPES = saved
    demangled = ("void Kokkos::Impl::cuda_parallel_launch_local_memory<Kokkos::Impl::ParallelFor<minipipe::"
                 "gemm_detail::gemm_team<float>(int, int, minipipe::StridedMat<float>, long)::{lambda(Kokkos::"
                 "Impl::CudaTeamMember const&)#1}, Kokkos::TeamPolicy<Kokkos::Cuda, Kokkos::LaunchBounds<256u, "
                 "2u> >, Kokkos::Cuda> >(Kokkos::Impl::ParallelFor<int>)")
    expect("a team lambda", short_name(demangled), "gemm_detail::gemm_team<float> team#1")
    # the merged tree's team kernels: bodies that team::launch wraps in team::KokkosBody
    wrapped = ("void Kokkos::Impl::cuda_parallel_launch_local_memory<Kokkos::Impl::ParallelFor<minipipe::team::"
               "KokkosBody<minipipe::gemm_detail::GemmTeamBody<float> >, Kokkos::TeamPolicy<Kokkos::Cuda, Kokkos::"
               "LaunchBounds<256u, 2u> >, Kokkos::Cuda> >(Kokkos::Impl::ParallelFor<minipipe::team::KokkosBody<"
               "minipipe::gemm_detail::GemmTeamBody<float> >, Kokkos::TeamPolicy<Kokkos::Cuda, Kokkos::LaunchBounds<"
               "256u, 2u> >, Kokkos::Cuda>)")
    expect("a team body", short_name(wrapped), "gemm_detail::GemmTeamBody<float> team")
    expect("gemm shape", launch_shape("gemm_detail::GemmTeamBody<float> team", 4)[:2], (256, 8196))
    expect("gemm shape, double", launch_shape("gemm_detail::GemmTeamBody<double> team", 8)[:2], (256, 16392))
    anon = ("void Kokkos::Impl::cuda_parallel_launch_local_memory<Kokkos::Impl::ParallelFor<minipipe::team::"
            "KokkosBody<minipipe::(anonymous namespace)::BackwardInput<double, true> >, Kokkos::TeamPolicy<Kokkos::"
            "Cuda, Kokkos::LaunchBounds<0u, 0u> >, Kokkos::Cuda> >(Kokkos::Impl::ParallelFor<int>)")
    expect("an anonymous body", short_name(anon, "cross_entropy.cpp"), "cross_entropy.cpp: BackwardInput<double, true> team")
    expect("double of a two-argument body", elem_bytes("cross_entropy.cpp: BackwardInput<double, true> team"), 8)
    expect("row shape", launch_shape("cross_entropy.cpp: BackwardInput<double, true> team", 8)[:2], (32, 264))
    expect("fast row shape", launch_shape("layernorm.cpp: BackwardInput<float, false> team", 4)[:2], (32, 0))
    expect("backward_weight shape", launch_shape("layernorm.cpp: BackwardWeight<float> team", 4)[:2], (256, 2052))
    ns = anon.replace("minipipe::(anonymous namespace)::BackwardInput<double, true>",
                      "minipipe::attention_device::(anonymous namespace)::DkvBody<float>")
    internal = ("void Kokkos::Impl::cuda_parallel_launch_local_memory<Kokkos::Impl::ParallelFor<_INTERNAL_8ef63d09_10_"
                "linear_cpp_faa4b1c4_19984::minipipe::(anonymous namespace)::hold_samples<double>(_INTERNAL_8ef63d09_"
                "10_linear_cpp_faa4b1c4_19984::minipipe::GradAccum<double>&, int)::{lambda(int)#2}, Kokkos::RangePolicy"
                "<Kokkos::Cuda>, Kokkos::Cuda> >(Kokkos::Impl::ParallelFor<int>)")
    expect("a lambda of an internal function", short_name(internal, "linear.cpp"),
           "linear.cpp: hold_samples<double> range#2 (int)")
    expect("a body in a named namespace", short_name(ns, "attention_device.cpp"), "attention_device::DkvBody<float> team")
    expect("attention dk/dv shape", launch_shape("attention_device::DkvBody<float> team", 4)[:2], (256, 22788))
    expect("attention forward shape", launch_shape("attention_device::ForwardBody<float> team", 4)[:2], (256, 16708))
    expect("attention out shape", launch_shape("attention_device::OutBody<float> team", 4)[:2], (256, 14404))
    functor = ("void Kokkos::Impl::cuda_parallel_launch_local_memory<Kokkos::Impl::ParallelFor<minipipe::GemmTeam<"
               "float>, Kokkos::TeamPolicy<Kokkos::Cuda>, Kokkos::Cuda> >(Kokkos::Impl::ParallelFor<int>)")
    expect("a named team functor", short_name(functor), "GemmTeam<float> team")
    expect("an unlisted team functor has no shape", launch_shape("GemmTeam<float> team", 4)[0], None)
    for f in fails:
        print(f"device_budgets self-test: {f}", file=sys.stderr)
    print(f"device_budgets self-test: {'FAILED' if fails else 'passed'} ({len(fails)} failures)", file=sys.stderr)
    return 1 if fails else 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("backend", choices=["cuda", "hip"])
    ap.add_argument("log", help="build log of minipipe_kernels with the resource report")
    ap.add_argument("--check", action="store_true", help="exit 1 on a spill or a team that cannot launch")
    ap.add_argument("--markdown", help="write the table here (default: stdout)")
    args = ap.parse_args(argv)
    try:
        text = open(args.log, encoding="utf-8", errors="replace").read()
    except OSError as e:
        print(f"device_budgets: cannot read the build log {args.log}: {e}", file=sys.stderr)
        return 2
    kernels = parse_ptxas(text) if args.backend == "cuda" else parse_amdgpu_remarks(text)
    if not kernels:
        print(f"device_budgets: no kernel resource report in {args.log} (backend {args.backend}; expected "
              f"{'ptxas -v' if args.backend == 'cuda' else 'kernel-resource-usage remarks'})", file=sys.stderr)
        return 2
    rows, problems = rows_cuda(kernels) if args.backend == "cuda" else rows_hip(kernels)
    md = table(args.backend, rows)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(md)
    else:
        sys.stdout.write(md)
    low = [r["name"] for r in rows if r["role"] == HOT and r["occ"] < OCCUPANCY_TARGET]
    print(f"device_budgets: {args.backend}: {len(rows)} kernels, {len(problems)} over budget, "
          f"{len(low)} hot kernels below {OCCUPANCY_TARGET:.0%} occupancy", file=sys.stderr)
    for p in problems:
        print(f"device_budgets: over budget: {p}", file=sys.stderr)
    for n in low:
        print(f"device_budgets: below the occupancy target: {n}", file=sys.stderr)
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
