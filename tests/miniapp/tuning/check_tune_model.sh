#!/usr/bin/env bash
# check_tune_model.sh accuracy LOG BASE_BOUND PICK_BOUND | pick LOG: reads tune --verify's table.
#  accuracy: |meas/pred - 1| <= BASE_BOUND + noise for the baseline (1F1B, even split, the deck's m)
#            and <= PICK_BOUND + noise for every verified pick (other schedules, m, splits); noise =
#            the larger of the baseline's and that row's own round-to-round spread of median step
#            times measured in the same run (this shared 2-core machine's load changes between
#            rounds, and a row's median is known no better than its rounds agree; see the README).
#            The baseline's spread includes the calibration's measured step: the same configuration,
#            measured by the profile before tune ran, which the model is anchored to.
#            A row predicted off by a steady margin has a small spread and still fails.
#  pick:     the first pick's measured step <= the baseline's x (1 + the baseline's round-to-round
#            spread measured in the same run): the tuner's pick never loses beyond the noise.
set -u
what=$1 log=$2
[ -f "$log" ] || { echo "FAIL: $log missing (the tune_verify_small fixture did not run)"; exit 1; }
grep -E '^ +([0-9]+|base) ' "$log"
grep -E '^(noise|round-to-round spread of each):' "$log"
case "$what" in
  accuracy)
    rounds=$(sed -nE 's/^noise: round medians of base ([0-9. ]+) ms;.*/\1/p' "$log")
    cal=$(sed -nE 's/^calibration: .* step measured ([0-9.]+) ms.*/\1/p' "$log")
    each=$(sed -nE 's/^round-to-round spread of each:(.*)$/\1/p' "$log")
    [ -n "$rounds" ] && [ -n "$cal" ] && [ -n "$each" ] || { echo "FAIL: no noise or calibration lines"; exit 1; }
    spread=$(echo "$cal $rounds" | awk '{ lo = hi = $1; for (k = 2; k <= NF; k++) { if ($k < lo) lo = $k; if ($k > hi) hi = $k }
                                          printf "%.3f", (hi - lo) / lo }')
    echo "baseline spread with the calibration's step ($cal ms): $spread"
    awk -v bb="$3" -v pb="$4" -v s="$spread" -v each="$each" '
      BEGIN { ne = split(each, e, " "); for (j = 1; j < ne; j += 2) own[e[j]] = e[j + 1] + 0 }
      $1 ~ /^([0-9]+|base)$/ && NF >= 12 {
        key = ($1 == "base") ? "base" : "#" $1
        if (!(key in own)) { print "FAIL: row " $1 " has no round-to-round spread"; bad = 1; next }
        noise = own[key] > s ? own[key] : s
        r = $NF; bound = (($1 == "base") ? bb : pb) + noise; off = r > 1 ? r - 1 : 1 - r
        printf "%s %s m=%s: meas/pred %.3f (|off| %.3f, bound %.3f incl. noise %.3f)\n", $1, $2, $4, r, off, bound, noise
        if (off > bound) { print "FAIL: row " $1 " predicted outside the bound"; bad = 1 }
        rows++
      }
      END { if (rows < 2) { print "FAIL: fewer than 2 verified rows"; bad = 1 }; exit bad }' "$log" || exit 1 ;;
  pick)
    spread=$(sed -nE 's/^noise: .* base spread ([0-9.]+);.*/\1/p' "$log")
    pick=$(awk '$1 == "1" { print $(NF - 1) }' "$log")
    base=$(awk '$1 == "base" { print $(NF - 1) }' "$log")
    [ -n "$spread" ] && [ -n "$pick" ] && [ -n "$base" ] || { echo "FAIL: cannot read pick, base or noise"; exit 1; }
    echo "pick $pick ms, baseline $base ms, noise margin $spread"
    awk -v p="$pick" -v b="$base" -v s="$spread" 'BEGIN { exit !(p <= b * (1 + s)) }' \
      || { echo "FAIL: the pick loses to the 1F1B even-split baseline beyond the noise"; exit 1; } ;;
  *) echo "usage: check_tune_model.sh accuracy LOG BASE_BOUND PICK_BOUND | pick LOG"; exit 2 ;;
esac
echo PASS
