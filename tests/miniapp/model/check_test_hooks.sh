#!/usr/bin/env bash
# check_test_hooks.sh MINIPIPE DECK OUTDIR SRCDIR: every test hook that is set shows in stdout (a
# banner line and the FOM line), in the JSON report (test_hooks, fom.measured = false), in the
# dump's /meta test_hooks, and in the verdict, which is then never a clean "verification: PASS".
# A run without hooks says nothing of them (test_hooks [] in the JSON, "none" in /meta). Every hook variable
# the sources read must be in the table that reports them.
set -u
bin=$1 deck=$2 dir=$3 src=$4
rm -rf "$dir"; mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
table=$src/miniapp/model/test_hooks.cpp
for v in $(grep -rhoE 'getenv\("MINIPIPE_(TEST|FAULT)_[A-Z_]+"\)' "$src/miniapp" "$src/kernels" "$src/schedules" |
  sed -E 's/getenv\("(.*)"\)/\1/' | sort -u); do
  grep -q "\"$v\"" "$table" || fail "$v is read by the sources but not reported by $table"
done
meta() { h5dump -a /meta/test_hooks "$1" | sed -n 's/.*(0): "\(.*\)".*/\1/p'; }
run() {  # name env...
  local name=$1; shift
  env "$@" "$bin" run --deck "$deck" --train.steps 2 --dump "$dir/$name.h5" --output.json "$dir/$name.json" \
    > "$dir/$name.log" 2>&1 || fail "$name exited $? ($(tail -n 2 "$dir/$name.log"))"
}
run clean
grep -qx 'verification: PASS' "$dir/clean.log" || fail "a clean run has no clean PASS"
grep -q 'test hooks' "$dir/clean.log" && fail "a clean run mentions test hooks"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['test_hooks']==[] and j['fom']['measured'] is True, j" \
  "$dir/clean.json" || fail "clean JSON"
[ "$(meta "$dir/clean.h5")" = none ] || fail "clean /meta test_hooks is not 'none'"
for hook in MINIPIPE_TEST_DELAY_FORWARD=0:1000 MINIPIPE_TEST_DELAY_SEND=1000 MINIPIPE_TEST_DEFER_STAGED_POSTS=1 \
  MINIPIPE_TEST_PERTURB=layer_00/ln1; do
  name=${hook%%=*}
  run "$name" "$hook"
  grep -qF "test hooks active: $hook" "$dir/$name.log" || fail "$hook: no banner line"
  grep -q "^FOM: .*not a measurement: test hooks active: $hook" "$dir/$name.log" || fail "$hook: FOM line"
  grep -qx 'verification: PASS' "$dir/$name.log" && fail "$hook: a clean 'verification: PASS'"
  grep -qF "verification: PASS (test hooks active: $hook)" "$dir/$name.log" || fail "$hook: verdict does not name it"
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['test_hooks']==[sys.argv[2]] and j['fom']['measured'] is False and sys.argv[2] in j['verification'], j" \
    "$dir/$name.json" "$hook" || fail "$hook: JSON"
  [ "$(meta "$dir/$name.h5")" = "$hook" ] || fail "$hook: /meta test_hooks is '$(meta "$dir/$name.h5")'"
done
echo PASS
