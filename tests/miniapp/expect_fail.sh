#!/usr/bin/env bash
# expect_fail.sh REGEX [--no-file PATH]... -- COMMAND...: passes when COMMAND exits non-zero,
# its stderr+stdout match REGEX, and no PATH (nor PATH.tmp) exists afterwards.
set -u
regex=$1; shift
nofiles=()
while [ "$1" != "--" ]; do
  [ "$1" = "--no-file" ] && nofiles+=("$2") && shift 2 && continue
  echo "expect_fail.sh: bad argument $1"; exit 2
done
shift
out=$("$@" 2>&1); rc=$?
echo "$out" | tail -n 20
echo "exit code: $rc"
[ $rc -ne 0 ] || { echo "FAIL: the command succeeded"; exit 1; }
echo "$out" | grep -Eq -- "$regex" || { echo "FAIL: output does not match /$regex/"; exit 1; }
for f in "${nofiles[@]}"; do
  [ -e "$f" ] && { echo "FAIL: $f was left behind"; exit 1; }
  [ -e "$f.tmp" ] && { echo "FAIL: $f.tmp was left behind"; exit 1; }
done
echo "PASS"
