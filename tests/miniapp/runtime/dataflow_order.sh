#!/bin/bash
# Prints the datasets of a dump in the dataflow order of docs/design.md §5 (the order `minipipe compare`
# names the first divergence in), one path a line, for n_layer layers and the steps given.
# Datasets a dump does not hold are printed all the same (callers skip what is missing).
# Usage: dataflow_order.sh N_LAYER STEP...
set -u
L=$1
shift
fwd="ln1 ln1_mean ln1_rstd qkv att atty attn_proj res1 ln2 ln2_mean ln2_rstd fc gelu fc_proj"
bwd="d_gelu d_fc d_ln2 d_res1_ln2 d_res1 d_atty d_qkv d_ln1 d_x_ln1"
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
  for k in lnf_mean lnf_rstd logits losses; do echo "$g/kernels/head/$k"; done
  echo "$g/per_sample_loss_sum"
  echo "$g/per_sample_tokens"
  echo "$g/loss"
  echo "$g/kernels/head/dlogits"
  echo "$g/kernels/head/d_lnf"
  echo "$g/input_grads/lnf"
  for ((l = L - 1; l >= 0; --l)); do
    for k in $bwd; do echo "$g/kernels/$(layer $l)/$k"; done
    echo "$g/input_grads/$(layer $l)"
  done
  for p in $(params | tac); do echo "$g/grads/$p"; done
  for p in $(params); do echo "$g/params/$p"; done
done
