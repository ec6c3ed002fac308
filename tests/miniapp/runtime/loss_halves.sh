#!/usr/bin/env bash
# loss_halves.sh MINIPIPE DECK: one rank, no launcher; the loss must fall below half its first
# value within the deck's steps.
set -u
out=$("$1" run --deck "$2" 2>&1) || { echo "$out"; echo "FAIL: run exited non-zero"; exit 1; }
echo "$out" | grep '^step'
first=$(echo "$out" | awk '/^step/ {print $4; exit}')
last=$(echo "$out" | awk '/^step/ {v=$4} END {print v}')
echo "first loss $first, last loss $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 2) }' || { echo "FAIL: loss did not halve"; exit 1; }
echo PASS
