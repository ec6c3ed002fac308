#!/usr/bin/env bash
# check_tokenize_errors.sh MINIPIPE OUTDIR: non-UTF-8 input, an existing output without --force and
# an output that is an input are refused with exit 2, a clear message and no file left behind.
set -u
bin=$1 out=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$out" && mkdir -p "$out"
printf 'good text\n' >"$out/good.txt"
printf 'caf\xc3\xa9 then \xc0\x80 overlong\n' >"$out/bad.txt"
expect() {  # expect RC REGEX CMD...
  local rc=$1 re=$2; shift 2
  local msg
  msg=$("$@" 2>&1); local got=$?
  echo "$msg"
  [ "$got" -eq "$rc" ] || fail "exit $got, wanted $rc: $*"
  echo "$msg" | grep -Eq -- "$re" || fail "message does not match '$re'"
}
expect 2 "bad.txt' is not UTF-8 text: byte 0xC0 at offset 11" "$bin" tokenize "$out/good.txt" "$out/bad.txt" -o "$out/t.h5"
[ -e "$out/t.h5" ] && fail "a refused tokenize left $out/t.h5"
expect 0 "1 rows of 65 tokens" "$bin" tokenize "$out/good.txt" -o "$out/t.h5"
sum=$(cksum <"$out/t.h5")
expect 2 "'--output' has value '.*t.h5': the file exists; refusing to overwrite it without --force" "$bin" tokenize "$out/good.txt" -o "$out/t.h5" --seq-len 4
[ "$(cksum <"$out/t.h5")" = "$sum" ] || fail "the refused run changed the existing file"
expect 0 "3 rows of 5 tokens" "$bin" tokenize "$out/good.txt" -o "$out/t.h5" --seq-len 4 --force
expect 2 "'--output' .* names the input of 'files'" "$bin" tokenize "$out/good.txt" -o "$out/good.txt" --force
expect 2 "directory '$out/missing' does not exist" "$bin" tokenize "$out/good.txt" -o "$out/missing/t.h5"
for f in "$out"/*.tmp.*; do
  [ -e "$f" ] && fail "a temporary file was left behind: $f"
done
echo PASS
