#!/usr/bin/env bash
# check_concurrent_dumps.sh MINIPIPE DECK OUTDIR: two runs with one --output.dump and different
# seeds, started together. Exactly one succeeds, the other is refused (exit 2 up front or 3 at
# its final rename), and the dump equals the winner's own run bit for bit: never a mix.
set -u
bin=$1 deck=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"
f=$dir/shared.h5
for s in 1 2; do
  "$bin" run --deck "$deck" --train.steps 40 --train.seed $s --dump "$dir/ref_$s.h5" >/dev/null || exit 1
done
"$bin" run --deck "$deck" --train.steps 40 --train.seed 1 --dump "$f" >"$dir/run1.log" 2>&1 & p1=$!
"$bin" run --deck "$deck" --train.steps 40 --train.seed 2 --dump "$f" >"$dir/run2.log" 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
echo "exit codes: seed 1 -> $r1, seed 2 -> $r2"
tail -n 2 "$dir/run1.log" "$dir/run2.log"
if [ $r1 -eq 0 ] && [ $r2 -ne 0 ]; then win=1; lose=$r2
elif [ $r2 -eq 0 ] && [ $r1 -ne 0 ]; then win=2; lose=$r1
else echo "FAIL: expected exactly one run to succeed"; exit 1; fi
case $lose in 2|3) ;; *) echo "FAIL: the refused run exited $lose, expected 2 or 3"; exit 1;; esac
grep -q "refusing to overwrite\|exists" "$dir/run$((3 - win)).log" || { echo "FAIL: the refusal does not say why"; exit 1; }
"$bin" compare "$dir/ref_$win.h5" "$f" >/dev/null || { echo "FAIL: the dump is not seed $win's run"; exit 1; }
ls "$dir" | grep -q '^shared\.h5\.tmp' && { echo "FAIL: temporaries left: $(ls "$dir")"; exit 1; }
echo PASS
