#!/usr/bin/env bash
# check_csv.sh MINIPIPE DECK REF.h5 OUTDIR CSV PLACEMENT: runs a PyTorch-format CSV schedule on as many
# ranks as it has rows and checks its dump against the reference bitwise.
set -u
bin=$1 deck=$2 ref=$3 outdir=$4 csv=$5 placement=$6
mkdir -p "$outdir"
p=$(grep -c . "$csv")
m=$(grep -oE '[0-9]+F[0-9]+' "$csv" | sed 's/.*F//' | sort -n | tail -1); m=$((m + 1))
echo "CSV $csv: p=$p, m=$m"
mpiexec -n "$p" "$bin" run --deck "$deck" --schedule csv --pipeline.csv "$csv" --pipeline.placement "$placement" -m "$m" \
  --dump "$outdir/run.h5" --force || { echo "FAIL: run exited non-zero"; exit 1; }
h5diff --exclude-path /meta "$ref" "$outdir/run.h5" && echo "bitwise identical to the reference" && exit 0
"$bin" compare "$ref" "$outdir/run.h5" | tail -n 15
exit 1
