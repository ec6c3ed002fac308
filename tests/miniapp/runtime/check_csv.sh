#!/usr/bin/env bash
# check_csv.sh MINIPIPE CHECKER DECK REF.h5 OUTDIR CSV PLACEMENT: runs a PyTorch-format CSV schedule
# on as many ranks as it has rows; its dump must pass the docs/design.md §5 schema check and be bit for
# bit the reference (`minipipe compare`).
set -uo pipefail
bin=$1 check=$2 deck=$3 ref=$4 outdir=$5 csv=$6 placement=$7
rm -rf "$outdir" && mkdir -p "$outdir" || exit 1
p=$(grep -c . "$csv")
m=$(grep -oE '[0-9]+F[0-9]+' "$csv" | sed 's/.*F//' | sort -n | tail -1); m=$((m + 1))
echo "CSV $csv: p=$p, m=$m"
mpiexec -n "$p" "$bin" run --deck "$deck" --schedule csv --pipeline.csv "$csv" --pipeline.placement "$placement" -m "$m" \
  --dump "$outdir/run.h5" --force > "$outdir/run.log" 2>&1 || { tail -n 30 "$outdir/run.log"; echo "FAIL: run exited non-zero"; exit 1; }
"$check" --schema-only "$outdir/run.h5" || exit 1
"$bin" compare "$ref" "$outdir/run.h5" > "$outdir/compare.log" && grep summary "$outdir/compare.log" &&
  echo "bitwise identical to the reference" && exit 0
tail -n 15 "$outdir/compare.log"
exit 1
