#!/usr/bin/env bash
# check_costs_wide_integer.sh MINIPIPE DECK COSTS OUTDIR: a cost file's integers are range-checked
# in the width the JSON holds before they are narrowed to int (a vocab of 2^32 + 32 read as 32, or
# as a negative number): exit 2 naming the file, the key, the value and the range.
set -u
bin=$1 deck=$2 costs=$3 dir=$4
mkdir -p "$dir"
for v in 4294967328 1e300 2.5; do
  python3 -c "import json, sys; j = json.load(open(sys.argv[1])); j['model']['vocab'] = float(sys.argv[3]) if 'e' in sys.argv[3] or '.' in sys.argv[3] else int(sys.argv[3]); json.dump(j, open(sys.argv[2], 'w'))" \
    "$costs" "$dir/costs_wide.json" "$v" || exit 1
  bash "$(dirname "$0")/../expect_fail.sh" --must "cost file .*costs_wide.json" --must "key 'vocab' has value" \
    --must "allowed: an integer 1 .. 2147483647" -- "$bin" tune --deck "$deck" -p 2 --costs "$dir/costs_wide.json" ||
    exit 1
done
echo PASS
