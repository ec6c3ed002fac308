#!/usr/bin/env bash
# expect_code.sh CODE REGEX -- COMMAND...: passes when COMMAND exits with exactly CODE and its
# stdout+stderr match REGEX (the exit-code contract of docs/design.md §7: 0 / 1 / 2 / 3).
set -u
code=$1 regex=$2
shift 2
[ "$1" = "--" ] && shift
out=$("$@" 2>&1); rc=$?
echo "$out" | tail -n 12
echo "exit code: $rc (expected $code)"
[ "$rc" -eq "$code" ] || { echo "FAIL: exit code $rc, expected $code"; exit 1; }
echo "$out" | grep -Eq -- "$regex" || { echo "FAIL: output does not match /$regex/"; exit 1; }
echo "$out" | grep -Eq "terminate called|Segmentation|buffer overflow|core dumped" && { echo "FAIL: crashed"; exit 1; }
echo PASS
