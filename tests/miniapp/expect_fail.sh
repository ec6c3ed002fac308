#!/usr/bin/env bash
# expect_fail.sh [--code N] [--np P] [--must REGEX]... [--no-file PATH]... [--empty-dir DIR] -- COMMAND...
# Bad-input contract of docs/design.md §7: COMMAND (on P ranks under mpiexec, or alone without --np) must
# exit with exactly code N (default 2) on every rank by itself, print exactly one
# "minipipe: error" line, that line must match every REGEX (key, value, what is allowed), and it
# must leave no PATH, PATH.tmp nor anything in DIR (created empty before the run) behind.
set -u
code=2 np=0 musts=() nofiles=() dirs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --code) code=$2 ;;
    --np) np=$2 ;;
    --must) musts+=("$2") ;;
    --no-file) nofiles+=("$2") ;;
    --empty-dir) dirs+=("$2") ;;
    *) echo "expect_fail.sh: bad argument $1"; exit 2 ;;
  esac
  shift 2
done
[ "${1:-}" = "--" ] || { echo "expect_fail.sh: missing -- COMMAND"; exit 2; }
shift
for d in "${dirs[@]}"; do rm -rf "$d"; mkdir -p "$d"; done
rcdir=$(mktemp -d)
trap 'rm -rf "$rcdir"' EXIT
if [ "$np" -gt 0 ]; then
  # Each rank records its own exit code and then exits 0, so mpiexec never kills a peer on the
  # first non-zero exit: a rank that does not exit by itself shows up as a missing code or a hang.
  out=$(mpiexec -n "$np" bash -c '"$@"; echo $? > "'"$rcdir"'/rank_${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}"' _ "$@" 2>&1)
  launcher_rc=$?
else
  out=$("$@" 2>&1)
  echo $? > "$rcdir/rank_0"
  launcher_rc=0
fi
echo "$out" | tail -n 20
status=0
fail() { echo "FAIL: $*"; status=1; }
[ "$launcher_rc" -eq 0 ] || fail "the launcher itself exited $launcher_rc"
ranks=$((np > 0 ? np : 1))
for ((r = 0; r < ranks; ++r)); do
  f="$rcdir/rank_$r"
  if [ ! -f "$f" ]; then
    fail "rank $r did not exit by itself"
  elif [ "$(cat "$f")" != "$code" ]; then
    fail "rank $r exited $(cat "$f"), expected $code"
  fi
done
echo "exit codes: $(cat "$rcdir"/rank_* 2>/dev/null | tr '\n' ' ')(expected $code on $ranks rank(s))"
lines=$(echo "$out" | grep -c '^minipipe: error')
[ "$lines" -eq 1 ] || fail "$lines 'minipipe: error' lines, expected exactly one"
msg=$(echo "$out" | grep '^minipipe: error' | head -n 1)
for re in "${musts[@]}"; do
  echo "$msg" | grep -Eq -- "$re" || fail "the error line does not match /$re/"
done
for f in "${nofiles[@]}"; do
  [ -e "$f" ] && fail "$f was left behind"
  [ -e "$f.tmp" ] && fail "$f.tmp was left behind"
  compgen -G "$f.*" >/dev/null && fail "$(compgen -G "$f.*" | head -n 1) was left behind"
done
for d in "${dirs[@]}"; do
  left=$(ls -A "$d")
  [ -z "$left" ] || fail "left behind in $d: $left"
done
[ $status -eq 0 ] && echo PASS
exit $status
