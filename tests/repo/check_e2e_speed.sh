#!/usr/bin/env bash
# check_e2e_speed.sh SRC BUILD MINIPIPE OUT: benchmarks/e2e_speed.py end to end on a tiny model
# (no PyTorch column, one round): it must print a row with positive tokens/s for each mode and
# p:m pair, the ratio lines, and a model FLOP count per step equal to the FOM's F_token x B x T
# that the miniapp itself reports (model_tflops x 1e12 / tokens per second, from its JSON): two
# independent implementations of docs/benchmarking.md's formula. The triad benchmark (memory
# bandwidth, printed beside --threads' scaling) gives a rate and the dispatch benchmarks a time.
# Bad --threads is refused.
set -u
src=$1 build=$2 bin=$3 out=$4
rm -rf "$out" && mkdir -p "$out" || exit 1
shape=(--vocab 64 --channels 32 --layers 2 --heads 2 --seq-len 16 --batch 4)
python3 "$src/benchmarks/e2e_speed.py" --build "$build" --no-torch --repeats 1 --steps 2 --configs 1:1,2:2 \
  "${shape[@]}" > "$out/e2e.log" 2>&1 || { cat "$out/e2e.log"; echo "FAIL: e2e_speed.py exited non-zero"; exit 1; }
cat "$out/e2e.log"
for row in "deterministic +sequential +1 +1" "fast +sequential +1 +1" "deterministic +[a-z0-9-]+ +2 +2" \
  "fast +[a-z0-9-]+ +2 +2"; do
  # tokens/s, GFLOP/s, / sgemm
  grep -qE "^$row +[1-9][0-9]* +[0-9.]+ +[0-9.]+$" "$out/e2e.log" ||
    { echo "FAIL: no row /$row/ with tokens/s > 0"; exit 1; }
done
# the ratio table names the kernels of the sgemm it divides by
grep -qE "^model rate over the same-run sgemm \(OpenBLAS [A-Za-z0-9]+ kernels\), each mode:$" "$out/e2e.log" ||
  { echo "FAIL: the ratio table does not name the sgemm's OpenBLAS kernels"; exit 1; }
grep -q "fast/deterministic at p=1 m=1: [0-9.]*$" "$out/e2e.log" || { echo "FAIL: no fast/deterministic ratio"; exit 1; }
grep -qE "^fastest timed step of each row, against the fastest sgemm round \([0-9.]+ GFLOP/s" "$out/e2e.log" ||
  { echo "FAIL: no fastest-step table"; exit 1; }
# its rows come after the header: tokens/s there is at least the median row's
awk '/^fastest timed step/ {t = 1; next} /^ratios/ {t = 0} t && /^fast +sequential +1 +1 / {f = $5}
     !t && /^fast +sequential +1 +1 / && !m {m = $5} END {exit !(f > 0 && m > 0 && f >= m)}' "$out/e2e.log" ||
  { echo "FAIL: the fastest step of fast p=1 m=1 is missing or slower than its median"; exit 1; }
grep -qE "^fast rows' GEMM: (miniPipe gemm_det|KokkosBlas)" "$out/e2e.log" || { echo "FAIL: no GEMM named for the fast rows"; exit 1; }
flops=$(grep -oE '\(([0-9]+) FLOP\)' "$out/e2e.log" | grep -oE '[0-9]+')
[ -n "$flops" ] || { echo "FAIL: no FLOP count per step"; exit 1; }

cat > "$out/deck.toml" <<EOF
[model]
vocab = 64
seq_len = 16
channels = 32
n_head = 2
n_layer = 2
[train]
batch = 4
steps = 2
EOF
"$bin" run --deck "$out/deck.toml" --json "$out/run.json" > "$out/run.log" 2>&1 || { cat "$out/run.log"; exit 1; }
fom=$(grep -oE '"fom": \{[^}]*\}' "$out/run.json")
value=$(grep -oE '"value": [0-9.e+-]+' <<< "$fom" | grep -oE '[0-9.e+-]+$')
tflops=$(grep -oE '"model_tflops": [0-9.e+-]+' <<< "$fom" | grep -oE '[0-9.e+-]+$')
echo "e2e_speed.py: $flops FLOP per step; miniapp FOM: $value tokens/s, $tflops TFLOP/s"
awk -v f="$flops" -v v="$value" -v t="$tflops" 'BEGIN {
  app = t * 1e12 / v * 4 * 16  # F_token x B x T
  d = app - f; if (d < 0) d = -d
  exit !(v > 0 && d <= 1e-9 * f) }' || { echo "FAIL: e2e_speed.py's FLOP count differs from the FOM's"; exit 1; }

# the benchmarks that --threads prints beside the thread scaling run and report: the memory
# bandwidth triad a rate, the kernel-dispatch benchmarks a time per kernel and per team phase
"$build/benchmarks/minipipe_bench_kernels" "--benchmark_filter=stream_f32/triad|dispatch/" --benchmark_min_time=0.01 \
  > "$out/probes.log" 2>&1 || { cat "$out/probes.log"; echo "FAIL: the triad or dispatch benchmarks exited non-zero"; exit 1; }
grep -qE "^stream_f32/triad/16777216/real_time .* GB/s=[1-9][0-9.]*/s" "$out/probes.log" ||
  { cat "$out/probes.log"; echo "FAIL: no triad GB/s"; exit 1; }
grep -qE "^dispatch/parallel_for/real_time +[0-9.]+ [nu]s" "$out/probes.log" &&
  grep -qE "^dispatch/team_phases/real_time .* s/phase=[0-9.]+[pnum]?s" "$out/probes.log" ||
  { cat "$out/probes.log"; echo "FAIL: no dispatch times"; exit 1; }

python3 "$src/benchmarks/e2e_speed.py" --build "$build" --no-torch --threads 1 > "$out/bad.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--threads must be at least 2" "$out/bad.log" ||
  { cat "$out/bad.log"; echo "FAIL: --threads 1 gave exit $rc, not 2 with the reason"; exit 1; }
echo PASS
