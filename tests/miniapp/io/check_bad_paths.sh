#!/usr/bin/env bash
# check_bad_paths.sh MINIPIPE DECK OUTDIR: outputs that collide with each other, with an input or
# with an existing file, and dump paths too long for MPI-IO, are refused up front with exit 2,
# naming the key, and nothing is modified or created. A dangling symlink at an output path is
# refused up front by every command that writes (run noticed it after the last step,
# exit 3, and kept neither the dump nor the checkpoint). A FIFO given as pipeline.costs or to
# compare is refused instead of blocking the open forever.
set -u
bin=$1 deck=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"
xc() { bash "$(dirname "$0")/../expect_code.sh" "$@"; }
cp "$deck" "$dir/deck.toml"
d=$dir/deck.toml
before=$(md5sum < "$d")
xc 2 "output.json.*names the input of '--deck'" -- "$bin" run --deck "$d" --output.json "$d" --force || exit 1
[ "$(md5sum < "$d")" = "$before" ] || { echo "FAIL: the deck was modified"; exit 1; }
xc 2 "'output.dump'.*'output.json'.*same output file" -- "$bin" run --deck "$d" --dump "$dir/x.h5" \
  --json "$dir/x.h5" || exit 1
[ -e "$dir/x.h5" ] && { echo "FAIL: x.h5 created"; exit 1; }
echo keep > "$dir/r.json"
xc 2 "output.json.*exists; refusing to overwrite it without --force" -- "$bin" run --deck "$d" \
  --json "$dir/r.json" || exit 1
[ "$(cat "$dir/r.json")" = keep ] || { echo "FAIL: r.json was replaced"; exit 1; }
echo keep > "$dir/t.svg"
xc 2 "output.svg.*exists" -- "$bin" run --deck "$d" --output.svg "$dir/t.svg" || exit 1
# A 220-character basename: OpenMPI's MPI-IO aborted with "buffer overflow detected" (exit 134).
long=$dir/$(printf 'a%.0s' $(seq 220)).h5
xc 2 "output.dump.*bytes; allowed: at most 228 for a file written through MPI-IO" -- \
  mpiexec -n 2 "$bin" run --deck "$d" --dump "$long" || exit 1
ls "$dir" | grep -q '^aaaa' && { echo "FAIL: a file was created for the long path"; exit 1; }
# Dangling symlinks: the link stays as it was, nothing else is created.
mkdir -p "$dir/links"
cd "$dir/links" || exit 1
ln -s ../gone.h5 ck.h5
dangling() {  # KEY-REGEX COMMAND...: refused naming the key and the link; ck.h5 untouched
  local re=$1
  shift
  xc 2 "$re.*'ck.h5', which is a symbolic link to '../gone.h5' that cannot be followed.*without --force" -- "$@" ||
    exit 1
  [ "$(readlink ck.h5)" = ../gone.h5 ] || { echo "FAIL: the link was changed"; exit 1; }
  [ "$(ls -A)" = ck.h5 ] || { echo "FAIL: left behind: $(ls -A)"; exit 1; }
}
dangling "key 'checkpoint.path'" mpiexec -n 2 "$bin" run --deck "$d" --dump ok.h5 --checkpoint.path ck.h5
dangling "key 'output.dump'" mpiexec -n 2 "$bin" run --deck "$d" --dump ck.h5
dangling "key 'output.json'" "$bin" run --deck "$d" --json ck.h5
dangling "key 'output.trace'" "$bin" run --deck "$d" --output.trace ck.h5
dangling "key '--out'" "$bin" profile --deck "$d" --out ck.h5
dangling "key '--svg'" "$bin" schedule -s 1f1b -p 2 -m 2 --svg ck.h5
dangling "key '--output'" "$bin" tokenize "$d" --output ck.h5 --seq-len 8
cd - > /dev/null || exit 1
# FIFOs as inputs: refused, never opened (an open blocks forever; timeout turns a hang into 124).
mkfifo "$dir/fifo"
xc 2 "key 'pipeline.costs' has value '$dir/fifo', which is a FIFO; allowed: a regular file" -- \
  timeout 20 "$bin" run --deck "$d" --pipeline.layers_per_stage auto --pipeline.costs "$dir/fifo" || exit 1
xc 2 "cannot open $dir/fifo: not a regular file" -- timeout 20 "$bin" compare "$dir/fifo" "$dir/fifo" || exit 1
echo PASS
