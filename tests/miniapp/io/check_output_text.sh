#!/usr/bin/env bash
# check_output_text.sh MINIPIPE DECK OUTDIR PYTHON: every JSON, SVG and TOML the program writes is
# valid whatever the inputs (a class sweep): file names holding a quote, a backslash, a
# newline and a control byte reach the run's JSON report and Chrome trace, the deck text of /meta
# and of a checkpoint (read back by a restart), and the titles of `minipipe schedule`'s SVG, trace
# and JSON. Before: the checkpoint's deck was not valid TOML (its restart was refused) and the SVG
# was not well-formed XML.
set -u
bin=$1 deck=$2 dir=$3 py=$4
rm -rf "$dir"; mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
cd "$dir" || exit 1
odd=$'q"\\\x01\nz'  # q " \ U+0001 newline z
"$bin" run --deck "$deck" --train.steps 2 --json "r$odd.json" --output.trace "t$odd.json" --output.svg "s$odd.svg" \
  --checkpoint.path "c$odd.h5" --dump "d$odd.h5" > run.log 2>&1 || { rc=$?; tail -n 3 run.log; fail "the run exited $rc"; }
"$bin" run --deck "$deck" --train.steps 3 --restart "c$odd.h5" > restart.log 2>&1 ||
  { rc=$?; tail -n 3 restart.log; fail "the restart from a checkpoint whose deck holds the odd names exited $rc"; }
cp "$(dirname "$deck")/schedules/zb_h1_p2_m4.csv" "l$odd.csv" 2>/dev/null ||
  printf '0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n' > "l$odd.csv"
"$bin" schedule --load-csv "l$odd.csv" --json "sj$odd.json" --trace "st$odd.json" --svg "ss$odd.svg" > sched.log 2>&1 ||
  { rc=$?; tail -n 3 sched.log; fail "schedule exited $rc"; }
"$py" - "$odd" <<'PY' || exit 1
import json, sys, xml.dom.minidom
odd = sys.argv[1]
for name in ["r", "t", "sj", "st"]:
    with open(name + odd + ".json", "rb") as f:
        json.loads(f.read().decode("utf-8"))
for name in ["s", "ss"]:
    xml.dom.minidom.parse(name + odd + ".svg")
report = json.load(open("r" + odd + ".json"))
deck = report["deck"] if "deck" in report else ""
assert ("s" + odd + ".svg").replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") in deck or "\\u0001" in deck, deck
print("PASS: 4 JSON and 2 SVG files parse; the deck text escapes the odd name")
PY
grep -qx 'verification: PASS' restart.log || fail "the restart did not pass"
echo PASS
