#!/usr/bin/env bash
# check_error_lines.sh MINIPIPE MPIEXEC SRC OUTDIR: every subcommand's refusals go through the one
# error path (docs/exit-codes.md): on stderr, starting "minipipe: error: ", with the exit code of
# the contract (2 bad input or usage, 3 a failure while writing), nothing of it on stdout, no raw
# control byte, no line of CLI11's 309-digit ranges, and the --force hint a tool really takes.
set -u
bin=$1 mpiexec=$2 src=$3 out=$4
rm -rf "$out" && mkdir -p "$out"
deck=$src/inputs/tiny.toml
failures=0
n=0

# case NAME CODE REGEX [--absent REGEX] -- COMMAND...: one refusal.
case_() {
  local name=$1 code=$2 regex=$3 absent=""
  shift 3
  if [ "$1" = "--absent" ]; then absent=$2; shift 2; fi
  [ "$1" = "--" ] && shift
  n=$((n + 1))
  "$@" > "$out/$name.out" 2> "$out/$name.err" < /dev/null
  local rc=$? why=""
  local first
  first=$(grep -m1 'error' "$out/$name.err")
  [ "$rc" -eq "$code" ] || why="exit $rc, expected $code"
  [ -z "$why" ] && ! grep -q '^minipipe: error' "$out/$name.err" && why="no 'minipipe: error' line on stderr"
  [ -z "$why" ] && grep -qi 'error' "$out/$name.out" && why="an error text on stdout"
  [ -z "$why" ] && ! grep -Eq -- "$regex" "$out/$name.err" && why="stderr does not match /$regex/"
  [ -z "$why" ] && [ -n "$absent" ] && grep -Eq -- "$absent" "$out/$name.err" && why="stderr matches /$absent/"
  [ -z "$why" ] && grep -Eq '[0-9]{40}' "$out/$name.err" && why="a number of 40+ digits"
  [ -z "$why" ] && LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$out/$name.err" && why="a raw control byte"
  [ -z "$why" ] && grep -Eq "terminate called|Segmentation|HDF5-DIAG|core dumped" "$out/$name.err" && why="a crash or a library dump"
  if [ -n "$why" ]; then
    failures=$((failures + 1))
    echo "FAIL $name: $why"
    echo "  command: $*"
    sed 's/^/  stderr: /' "$out/$name.err" | head -n 5 | cat -v
    sed 's/^/  stdout: /' "$out/$name.out" | head -n 3 | cat -v
  else
    echo "ok   $name (exit $rc): $first" | cut -c1-220
  fi
}

touch "$out/exists.svg" "$out/exists.h5" "$out/exists.json"
printf 'some text to tokenize\n' > "$out/text.txt"
"$bin" run --deck "$deck" --train.steps 1 --dump "$out/a.h5" > /dev/null 2>&1 || echo "setup: the reference dump failed"

# The driver: no subcommand, an unknown option, an option given twice.
case_ no_subcommand 2 'subcommand' -- "$bin"
case_ unknown_option 2 'nope' -- "$bin" run --deck "$deck" --nope
case_ repeated_key 2 "key 'train.steps' is given 2 times" -- "$bin" run --deck "$deck" --train.steps 1 --train.steps 2
# schedule: CLI11's range check said "[1 - 1797...]" (309 digits) without the prefix.
case_ schedule_p0 2 "^minipipe: error: -p: value '0' is not allowed; allowed: an integer >= 1$" -- "$bin" schedule -p 0
case_ schedule_m_text 2 "-m: value 'x' is not allowed; allowed: an integer >= 1" -- "$bin" schedule -m x
case_ schedule_group_negative 2 "allowed: an integer >= 0" -- "$bin" schedule -s interleaved-1f1b --group -1
case_ schedule_unknown 2 "schedule" -- "$bin" schedule -s nosuch
case_ schedule_exists 2 "exists; refusing to overwrite it without --force$" --absent 'output\.force' -- \
  "$bin" schedule -p 2 -m 4 --svg "$out/exists.svg"
case_ schedule_bad_cost 2 "cost" -- "$bin" schedule -p 2 -m 4 --cost F=x
# run: an integer past 64 bits is out of range (it said "must be an integer").
case_ run_vocab_2p63 2 "key 'model.vocab' has value '9223372036854775808', which is out of range; allowed: at most 2147483647 in magnitude" -- \
  "$bin" run --deck "$deck" --model.vocab 9223372036854775808
case_ run_seed_2p64 2 "key 'train.seed' has value '-18446744073709551616', which is out of range; allowed: >= 0, an integer in \[-9223372036854775808, 9223372036854775807\]" -- \
  "$bin" run --deck "$deck" --train.seed -18446744073709551616
case_ run_vocab_text 2 "key 'model.vocab' has value 'ten', but it must be an integer" -- "$bin" run --deck "$deck" --model.vocab ten
# Raw control bytes in a value are escaped in the error line.
case_ run_deck_escape 2 "\\\\x1B\[31m" -- "$bin" run --deck $'\x1b[31mred\x07.toml'
case_ run_key_escape 2 "\\\\x1B|\\\\u001B" -- "$bin" run --deck "$deck" --train.mode $'fast\x1b[2J'
case_ option_escape 2 "\\\\x1B\\[2J" -- "$bin" run --deck "$deck" $'--x\x1b[2J'
case_ schedule_name_escape 2 "\\\\x07" -- "$bin" schedule -s $'1f1b\a'
# A NUL in a deck's path (a TOML "\u0000") is refused up front, not cut at the NUL by HDF5.
{ cat "$deck"; printf '[output]\ndump = "%s/nul\\u0000cut.h5"\n' "$out"; } > "$out/nul.toml"
case_ run_nul_path 2 "key 'output.dump' has value '.*nul\\\\x00cut.h5', which holds a NUL byte at offset [0-9]+; allowed: a path without NUL bytes" -- \
  "$bin" run --deck "$out/nul.toml" --train.steps 1
[ -e "$out/nul" ] && { failures=$((failures + 1)); echo "FAIL run_nul_path: a file was made under the name cut at the NUL"; }
case_ run_output_exists 2 "exists; refusing to overwrite it without --force \(output.force = true\)" -- \
  "$bin" run --deck "$deck" --train.steps 1 --dump "$out/exists.h5"
# DualPipe at p = 2 has p*v = 4 stages: two model copies of 2 parts.
case_ run_dualpipe_stages 2 "pipeline: 4 stages \(p\*v\), 2 model copies of 2 parts each, but model.n_layer = 1" -- \
  "$mpiexec" -n 2 "$bin" run --deck "$deck" --schedule dualpipe -m 4 --model.n_layer 1
# compare: errors went to stdout as "error: ..." without the prefix.
case_ compare_missing 2 "^minipipe: error: cannot open .*absent.h5: no such file$" -- "$bin" compare "$out/a.h5" "$out/absent.h5"
case_ compare_not_hdf5 2 "is not an HDF5 file" -- "$bin" compare "$out/a.h5" "$out/text.txt"
case_ compare_one_file 2 "B is required|required" -- "$bin" compare "$out/a.h5"
case_ compare_bad_rtol 2 "allowed: a finite number >= 0" -- "$bin" compare "$out/a.h5" "$out/a.h5" --rtol nan
# tokenize: its own --force; a missing input; a bad --seq-len.
case_ tokenize_exists 2 "exists; refusing to overwrite it without --force$" --absent 'output\.force' -- \
  "$bin" tokenize "$out/text.txt" -o "$out/exists.h5"
case_ tokenize_missing 2 "cannot be read" -- "$bin" tokenize "$out/absent.txt" -o "$out/t.h5"
case_ tokenize_seq_len 2 "seq-len" -- "$bin" tokenize "$out/text.txt" -o "$out/t.h5" --seq-len 0
# scale: its own --force (the refusal text only); a bad --devices.
case_ scale_exists 2 "exists; refusing to overwrite it without --force$" --absent 'output\.force' -- \
  "$bin" scale --deck "$deck" --cluster "$src/inputs/clusters/this-machine.toml" --strong-svg "$out/exists.svg"
case_ scale_devices 2 "devices" -- "$bin" scale --deck "$deck" --cluster "$src/inputs/clusters/this-machine.toml" --devices -1
# tune and profile: bad options.
case_ tune_p0 2 "-p" -- "$bin" tune --deck "$deck" -p 0
case_ profile_unknown 2 "nope" -- "$bin" profile --deck "$deck" --out "$out/p.json" --nope
case_ profile_exists 2 "exists; refusing to overwrite it without --force$" --absent 'output\.force' -- \
  "$bin" profile --deck "$deck" --out "$out/exists.json"

# tokenize on a full file system: exit 3, one line with the OS's reason, no HDF5 library dump, and
# nothing left behind (needs root to mount a small tmpfs; skipped otherwise).
if [ "$(id -u)" -eq 0 ] && mkdir -p "$out/fs" && mount -t tmpfs -o size=64k tmpfs "$out/fs" 2> /dev/null; then
  trap 'umount "$out/fs" 2> /dev/null' EXIT
  head -c 300000 /dev/zero | tr '\0' 'a' > "$out/big.txt"
  case_ tokenize_full_disk 3 "^minipipe: error: .*No space left on device" --absent 'time = |file descriptor|buf = ' -- \
    "$bin" tokenize "$out/big.txt" -o "$out/fs/t.h5"
  [ "$(wc -l < "$out/tokenize_full_disk.err")" -eq 1 ] ||
    { failures=$((failures + 1)); echo "FAIL tokenize_full_disk: $(wc -l < "$out/tokenize_full_disk.err") lines, expected one"; }
  [ -z "$(ls -A "$out/fs")" ] || { failures=$((failures + 1)); echo "FAIL tokenize_full_disk: left $(ls -A "$out/fs")"; }
else
  echo "skip tokenize_full_disk: needs root and a tmpfs mount"
fi

echo "$n refusals checked, $failures failed"
[ "$failures" -eq 0 ] || exit 1
echo PASS
