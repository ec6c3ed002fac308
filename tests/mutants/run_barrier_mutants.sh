#!/usr/bin/env bash
# run_barrier_mutants.sh [FILTER]: removes each team barrier of kernels/ in turn (and shrinks each
# team scratch carve by one element), rebuilds a scratch copy and runs the launch-shape tests (every
# device team kernel at its GPU shape on the simulated executor, kernels/team_sim.hpp). Every mutant
# must make them fail. Prints a table and "caught N / M"; exit 0 only when every mutant is caught.
#
# FILTER (optional): a grep -E regex on the mutant names (e.g. 'gemm|row_reduce'). Not part of ctest:
# one pass rebuilds a kernel file per mutant (10 to 60 minutes on 2 cores, depending on the load).
# Scratch copy: <repo>/build-mutants-barriers/src (git-ignored), built in src/build; ccache entries
# are shared with <repo>/build (CCACHE_BASEDIR), so unmutated files are cache hits.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work="$repo/build-mutants-barriers"
src="$work/src"
build="$src/build"
filter=${1:-.}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$repo")}

echo "== scratch copy of the tracked files of $repo in $src"
rm -rf "$work/incoming" && mkdir -p "$work/incoming" "$src" || exit 2
(cd "$repo" && git ls-files -z | tar --null -cf - -T -) | tar -C "$work/incoming" -xf - || { echo "copy failed"; exit 2; }
python3 - "$work/incoming" "$src" <<'PY' || exit 2
import filecmp, pathlib, shutil, sys
new, dst = map(pathlib.Path, sys.argv[1:])
for f in new.rglob("*"):
    if f.is_file():
        t = dst / f.relative_to(new)
        if not t.exists() or not filecmp.cmp(f, t, shallow=False):
            t.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, t)
            shutil.copymode(f, t)
PY
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1: a mutant only has to fail the tests, and a kernel file rebuilds faster than at -O3
# (MUTANT_OPT overrides it); -ffp-contract=off still holds, so the bits are the same.
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="${MUTANT_OPT:--O1} -DNDEBUG" \
  -DMINIPIPE_WERROR=ON -DMINIPIPE_BUILD_BENCHMARKS=OFF -DMINIPIPE_TEAM_SIM=ON "${launcher[@]}" > "$work/configure.log" 2>&1 || { tail "$work/configure.log"; exit 2; }
targets=(test_kernel_paths test_launch_shapes)

# The launch-shape tests: the deterministic kernels in both thread orders, the fast-mode row kernels.
run_tests() {  # LOG
  local rc=0
  for order in gpu gpu-reverse; do
    MINIPIPE_TEST_TEAM_SIM=$order timeout 600 "$build/tests/kernels/test_kernel_paths" --gtest_brief=1 --gtest_filter='KernelPath.*:*/KernelPaths.*' >> "$1" 2>&1 || rc=1
  done
  timeout 600 "$build/tests/kernels/test_launch_shapes" --gtest_brief=1 --gtest_filter='*FastMode*' >> "$1" 2>&1 || rc=1
  return $rc
}

echo "== baseline build and tests (they must pass unmutated)"
nice -n 5 ninja -C "$build" "${targets[@]}" > "$work/build.log" 2>&1 || { tail -n 30 "$work/build.log"; exit 2; }
: > "$work/baseline.log"
run_tests "$work/baseline.log" || { tail -n 30 "$work/baseline.log"; echo "baseline fails: fix it first"; exit 2; }

# Mutants: FILE|KIND|INDEX (the INDEX-th occurrence in FILE, 0-based).
mapfile -t mutants < <(cd "$src" && python3 - <<'PY'
import pathlib, re
for p in sorted(pathlib.Path("kernels").glob("*.[ch]pp")):
    if p.name.startswith("team"):
        continue
    s = p.read_text()
    for i, _ in enumerate(re.finditer(r"team::barrier\(\w+\);", s)):
        print(f"{p}|barrier|{i}")
    for i, _ in enumerate(re.finditer(r"team::scratch(_ptr)?<\w+>\(\w+, [^,]+, ", s)):
        print(f"{p}|scratch|{i}")
PY
)

# Applies mutant KIND INDEX to FILE in the copy; prints the source line it changed.
apply() {
  python3 - "$src/$1" "$2" "$3" <<'PY'
import re, sys
path, kind, index = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = open(path).read()
# a carve is a statement of its own: "... = team::scratch<T>(member, level, count);"
pat = r"team::barrier\(\w+\);" if kind == "barrier" else r"team::scratch(_ptr)?<\w+>\(\w+, [^,]+, ([^;]+)\);"
m = list(re.finditer(pat, s))[index]
line = s.count("\n", 0, m.start()) + 1
if kind == "barrier":
    rep = "/* barrier removed */"
else:
    rep = m.group(0)[: m.start(2) - m.start()] + "(" + m.group(2) + ") - 1);"
open(path, "w").write(s[: m.start()] + rep + s[m.end() :])
print(f"line {line}")
PY
}

caught=0 total=0 status=0
rows=()
for entry in "${mutants[@]}"; do
  IFS='|' read -r file kind index <<< "$entry"
  name="$(basename "$file" | sed 's/\.[ch]pp$//')_${kind}_$index"
  echo "$name" | grep -qE "$filter" || continue
  total=$((total + 1))
  where=$(apply "$file" "$kind" "$index") || { rows+=("$name|$file|NOT APPLIED|"); status=1; continue; }
  log="$work/$name.log"
  if ! nice -n 5 ninja -C "$build" "${targets[@]}" > "$log" 2>&1; then
    rows+=("$name|$file $where|DID NOT BUILD|see $log")
    status=1
  elif run_tests "$log"; then
    rows+=("$name|$file $where|NOT CAUGHT|")
    status=1
  else
    caught=$((caught + 1))
    first=$(grep -m1 -E "FAILED|Failure|exception|outside|requested|barrier not reached" "$log" | cut -c1-90)
    rows+=("$name|$file $where|caught|$first")
  fi
  cp "$repo/$file" "$src/$file"  # restore before the next mutant
  echo "$(date -u +%H:%M:%S) ${rows[-1]}"
done
echo "== restoring the unmutated build"
nice -n 5 ninja -C "$build" "${targets[@]}" > "$work/build_restore.log" 2>&1
echo
printf '%-28s %-36s %-14s %s\n' mutant where verdict "first failure"
for r in "${rows[@]}"; do
  IFS='|' read -r a b c d <<< "$r"
  printf '%-28s %-36s %-14s %s\n' "$a" "$b" "$c" "$d"
done
echo "caught $caught / $total"
exit $status
