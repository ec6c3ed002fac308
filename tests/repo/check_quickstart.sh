#!/usr/bin/env bash
# check_quickstart.sh configure|timing SRC BUILD OUT: the README's two quick-start scripts.
#   configure  scripts/demo.sh and scripts/test.sh run with cmake, ctest, mpiexec, dpkg-query and
#              the binary replaced by stubs that record their arguments: both configure the build
#              directory with the same flags (so running one after the other rebuilds nothing).
#   timing     every test whose verdict depends on measured speed carries the label `timing`
#              (every RUN_SERIAL test, and every test that needs such a test's fixture),
#              scripts/test.sh leaves the label out by default and the README names the command
#              that runs it.
set -u
mode=$1 src=$2 build=$3 out=$4
fail() { echo "check_quickstart: FAIL: $*"; exit 1; }
rm -rf "$out" && mkdir -p "$out/stubs" "$out/build/miniapp"
stub() {  # stub NAME [EXTRA LINE]: a command that appends its arguments to OUT/NAME.calls
  printf '#!/bin/sh\necho "$*" >> "%s/%s.calls"\n%s\nexit 0\n' "$out" "$1" "${2:-}" > "$out/stubs/$1"
  chmod +x "$out/stubs/$1"
}
stub cmake
stub ctest
stub mpiexec
stub sudo
stub apt-get
stub dpkg-query "printf 'install ok installed'"
cp "$out/stubs/mpiexec" "$out/build/miniapp/minipipe"
quick() {  # quick SCRIPT [ARGS]: the script with the stubs first on PATH, into OUT/build
  PATH=$out/stubs:$PATH BUILD_DIR=$out/build DEMO_OUT=$out/demo bash "$src/scripts/$1" "${@:2}" > "$out/$1.log" 2>&1
}

case $mode in
  configure)
    quick demo.sh || { cat "$out/demo.sh.log"; fail "demo.sh with stubs exited $?"; }
    grep -e '-S ' "$out/cmake.calls" > "$out/demo.configure" || fail "demo.sh configured nothing"
    rm "$out/cmake.calls"
    quick test.sh || { cat "$out/test.sh.log"; fail "test.sh with stubs exited $?"; }
    grep -e '-S ' "$out/cmake.calls" > "$out/test.configure" || fail "test.sh configured nothing"
    echo "demo.sh: cmake $(cat "$out/demo.configure")"
    echo "test.sh: cmake $(cat "$out/test.configure")"
    diff "$out/demo.configure" "$out/test.configure" ||
      fail "demo.sh and test.sh configure the build directory differently (the second rebuilds the tree)"
    grep -q -- "-DMINIPIPE_WERROR=ON" "$out/test.configure" || fail "the quick start no longer builds with warnings as errors"
    echo "PASS: demo.sh and test.sh configure alike"
    ;;
  timing)
    ctest --test-dir "$build" --show-only=json-v1 > "$out/tests.json" 2> "$out/ctest.err" ||
      { cat "$out/ctest.err"; fail "ctest --show-only=json-v1 failed"; }
    python3 - "$out/tests.json" << 'EOF' || fail "a timing-sensitive test is not labelled timing"
import json, sys
tests = json.load(open(sys.argv[1]))["tests"]
def props(t):
    return {p["name"]: p["value"] for p in t.get("properties", [])}
timing_fixtures, bad, labelled = set(), [], []
for t in tests:
    p = props(t)
    if "timing" in p.get("LABELS", []):
        timing_fixtures.update(p.get("FIXTURES_SETUP", []))
        labelled.append(t["name"])
for t in tests:
    p = props(t)
    is_timing = "timing" in p.get("LABELS", [])
    if p.get("RUN_SERIAL") and not is_timing:
        bad.append(t["name"] + " (RUN_SERIAL: it measures speed)")
    needs = set(p.get("FIXTURES_REQUIRED", [])) & timing_fixtures
    if needs and not is_timing:
        bad.append(t["name"] + " (needs the timing fixture " + ", ".join(sorted(needs)) + ")")
if "time_budget_injected_causes" in [t["name"] for t in tests] and "time_budget_injected_causes" not in labelled:
    bad.append("time_budget_injected_causes")
print("labelled timing: " + ", ".join(labelled))
if bad:
    print("not labelled timing: " + "; ".join(bad))
    sys.exit(1)
EOF
    quick test.sh || { cat "$out/test.sh.log"; fail "test.sh with stubs exited $?"; }
    grep -q -e "-LE [^ ]*timing" "$out/ctest.calls" || fail "scripts/test.sh runs the timing tests by default: $(cat "$out/ctest.calls")"
    rm "$out/ctest.calls"
    quick test.sh -L timing || { cat "$out/test.sh.log"; fail "test.sh -L timing exited $?"; }
    grep -q -e "-L timing" "$out/ctest.calls" || fail "scripts/test.sh -L timing does not run the timing tests"
    grep -q 'scripts/test.sh -L timing' "$src/README.md" || fail "the README does not name the command of the timing tests"
    echo "PASS: timing tests labelled, left out of scripts/test.sh, named in the README"
    ;;
  *) fail "unknown mode '$mode'; allowed: configure, timing" ;;
esac
