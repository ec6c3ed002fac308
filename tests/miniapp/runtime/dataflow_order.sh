#!/bin/bash
# Prints the datasets of a dump in the dataflow order of docs/design.md §5 (the order `minipipe compare`
# names the first divergence in), one path a line, for n_layer layers and the steps given.
# Datasets a dump does not hold are printed all the same (callers skip what is missing).
# Usage: dataflow_order.sh N_LAYER STEP...
# The kernel-level names and their order come from the independent reference model's one list
# (kKernelTensors in tests/reference/gpt2_reference.cpp), not from the product's table.
set -u
L=$1
shift
root=$(cd "$(dirname "$0")" && pwd)
while [ ! -f "$root/tests/reference/gpt2_reference.cpp" ]; do
  [ "$root" = / ] && { echo "dataflow_order.sh: tests/reference/gpt2_reference.cpp not found above $0" >&2; exit 2; }
  root=$(dirname "$root")
done
kernels() {  # SCOPE PHASE: the names of the table's lines, in order
  awk -v scope="$1" -v phase="$2" '/^\/\/ END kernel tensors/ {on = 0}
    on && $1 == scope && $2 == phase {print $3}
    /^\/\/ BEGIN kernel tensors/ {on = 1}' "$root/tests/reference/gpt2_reference.cpp"
}
fwd=$(kernels block forward)
bwd=$(kernels block backward)
[ -n "$fwd" ] && [ -n "$bwd" ] || { echo "dataflow_order.sh: no kernel tensors read from gpt2_reference.cpp" >&2; exit 2; }
block_params="ln1_w ln1_b qkv_w qkv_b attn_proj_w attn_proj_b ln2_w ln2_b fc_w fc_b fc_proj_w fc_proj_b"
layer() { printf 'layer_%02d' "$1"; }
params() {  # model parameter order
  echo wte
  echo wpe
  for ((l = 0; l < L; ++l)); do for p in $block_params; do echo "$(layer $l)/$p"; done; done
  echo lnf_w
  echo lnf_b
  echo lm_head_w
}
for p in $(params); do echo "/init/params/$p"; done
for s in "$@"; do
  g=$(printf '/step_%04d' "$s")
  echo "$g/tokens"
  echo "$g/targets"
  echo "$g/activations/embedding"
  for ((l = 0; l < L; ++l)); do
    for k in $fwd; do echo "$g/kernels/$(layer $l)/$k"; done
    echo "$g/activations/$(layer $l)"
  done
  echo "$g/activations/lnf"
  for k in $(kernels head forward); do echo "$g/kernels/head/$k"; done
  echo "$g/per_sample_loss_sum"
  echo "$g/per_sample_tokens"
  echo "$g/loss"
  for k in $(kernels head backward); do echo "$g/kernels/head/$k"; done
  echo "$g/input_grads/lnf"
  for ((l = L - 1; l >= 0; --l)); do
    for k in $bwd; do echo "$g/kernels/$(layer $l)/$k"; done
    echo "$g/input_grads/$(layer $l)"
  done
  for p in $(params | tac); do echo "$g/grads/$p"; done
  for p in $(params); do echo "$g/params/$p"; done
done
