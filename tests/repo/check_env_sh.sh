#!/usr/bin/env bash
# check_env_sh.sh SRC: scripts/env.sh's choice of OpenBLAS kernels, on made-up /proc/cpuinfo flag
# lines (MINIPIPE_CPUINFO). Without a preset it picks the fastest set the flags allow (SkylakeX with
# AVX-512F, Haswell with AVX2 + FMA, none otherwise); a preset is kept for tests and the demo; a
# benchmark (MINIPIPE_BLAS=fastest) replaces a slower preset, unsets OPENBLAS_L2_SIZE with it and
# says so on stderr, and never replaces an equal or faster one.
set -u
src=$1
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
printf 'processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512_bf16 avx512_vp2intersect\n' > "$tmp/zen5"
printf 'processor\t: 0\nflags\t\t: fpu sse2 avx fma avx2\n' > "$tmp/avx2"
printf 'processor\t: 0\nflags\t\t: fpu sse2 avx\n' > "$tmp/avx"
fail=0
# expect CPUINFO PRESET BENCH WANT_CORE WANT_L2 WANT_NOTE(0/1)
expect() {
  local got note
  got=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE MINIPIPE_CPUINFO="$tmp/$1" P="$2" B="$3" bash -c '
    [ -n "$P" ] && export OPENBLAS_CORETYPE=$P OPENBLAS_L2_SIZE=512
    [ -n "$B" ] && MINIPIPE_BLAS=fastest
    source "'"$src"'/scripts/env.sh" 2> "'"$tmp"'/err"
    echo "${OPENBLAS_CORETYPE:-none} ${OPENBLAS_L2_SIZE:-none}"')
  note=$(grep -c "was preset; this benchmark runs" "$tmp/err")
  if [ "$got" != "$4 $5" ] || [ "$note" != "$6" ]; then
    echo "FAIL: cpu=$1 preset='$2' bench='$3': got '$got' (note lines $note), want '$4 $5' (note lines $6)"
    fail=1
  fi
}
expect zen5 "" "" SkylakeX none 0
expect avx2 "" "" Haswell none 0
expect avx "" "" none none 0
expect zen5 Haswell "" Haswell 512 0      # tests and the demo keep the machine's preset
expect zen5 Haswell 1 SkylakeX none 1     # a benchmark runs the fastest kernels and says so
expect zen5 Cooperlake 1 Cooperlake 512 0 # an equal set (SkylakeX's sgemm plus bf16) is kept
expect avx2 Haswell 1 Haswell 512 0       # nothing faster on this CPU
expect avx2 SkylakeX 1 SkylakeX 512 0     # never downgraded, even where it cannot run
[ $fail = 0 ] && echo "PASS: env.sh's OpenBLAS kernel choice, 8 cases"
exit $fail
