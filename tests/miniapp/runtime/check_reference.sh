#!/usr/bin/env bash
# check_reference.sh MINIPIPE CHECKER OUTDIR NP [checker flags...] -- [run args...]: runs minipipe
# on NP ranks with a full dump into a fresh OUTDIR and checks the dump against the independent
# double-precision reference (tests/reference) and the docs/design.md §5 schema.
set -uo pipefail
bin=$1 check=$2 outdir=$3 np=$4; shift 4
flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags+=("$1"); shift; done
shift
rm -rf "$outdir" && mkdir -p "$outdir" || exit 1
mpiexec -n "$np" "$bin" run "$@" --dump "$outdir/run.h5" > "$outdir/run.log" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$outdir/run.log"; echo "FAIL: run exited $rc"; exit 1; }
grep -E '^(step|== schedule)' "$outdir/run.log"
"$check" "${flags[@]}" "$outdir/run.h5"
