#!/usr/bin/env bash
# check_tokenize_trains.sh MINIPIPE DECK OUTDIR TEXT: tokenizes TEXT, checks the row count from
# the byte count, trains the text deck on it and checks the loss starts at ln 256 and falls.
set -u
bin=$1 deck=$2 out=$3 text=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$out" && mkdir -p "$out"
"$bin" tokenize "$text" --output "$out/tokens.h5" --seq-len 64 || fail "tokenize exited $?"
bytes=$(wc -c <"$text")
rows=$(((bytes - 1 + 63) / 64))
h5dump -H "$out/tokens.h5" | grep -q "SIMPLE { ( $rows, 65 ) / ( $rows, 65 ) }" ||
  fail "expected $rows rows of 65 tokens for $bytes bytes: $(h5dump -H "$out/tokens.h5" | grep SIMPLE)"
run=$("$bin" run --deck "$deck" --data.path "$out/tokens.h5" --train.steps 20 --output.print_every 1 2>&1) ||
  { echo "$run"; fail "training on the token file exited non-zero"; }
echo "$run" | grep '^step'
first=$(echo "$run" | awk '/^step/ {print $4; exit}')
last=$(echo "$run" | awk '/^step/ {v=$4} END {print v}')
echo "first loss $first (ln 256 = 5.545), last loss $last"
awk -v a="$first" 'BEGIN { exit !(a > 5.3 && a < 5.8) }' || fail "first loss is not near ln 256: vocab 256 not in use?"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.75 * a) }' || fail "loss did not fall by a quarter in 20 steps"
echo PASS
