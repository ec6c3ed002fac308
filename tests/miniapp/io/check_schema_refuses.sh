#!/usr/bin/env bash
# check_schema_refuses.sh H5COPY CHECKER REF.h5 OUT.h5: the schema check must fail on a copy of a
# good dump that lacks its second step (what a value comparison of two such files cannot see).
set -u
h5copy=$1 check=$2 ref=$3 part=$4
rm -f "$part"
for g in /meta /init /step_0000; do "$h5copy" -i "$ref" -o "$part" -s "$g" -d "$g" || exit 1; done
"$check" --schema-only "$part" > "$part.log"
rc=$?
tail -n 3 "$part.log"
[ $rc -eq 1 ] || { echo "FAIL: the checker exited $rc on a dump without /step_0001"; exit 1; }
grep -q 'SCHEMA /step_0001/tokens: missing' "$part.log" || { echo "FAIL: /step_0001/tokens not named"; exit 1; }
echo PASS
