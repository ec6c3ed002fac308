// Device path of the attention kernels: tiled team kernels whose team scratch is independent of T
// (level 0 at GPT-2 shapes), computing every element with the host path's chain (attention.cpp).
#pragma once

#include <cstddef>

#include "types.hpp"

namespace minipipe {
namespace attention_device {

// Threads of a team of every attention kernel on a GPU.
constexpr int kGpuTeam = 256;

// Largest level-0 scratch of the forward and of the backward kernels for head size hs, in bytes.
template <class Real>
std::size_t forward_scratch_bytes(int hs);
template <class Real>
std::size_t backward_scratch_bytes(int hs);

// Whether the tiles of head size hs fit this backend's team scratch (level 0 or 1); when they do
// not, Attention falls back to its one-thread-per-row kernels.
template <class Real>
bool fits(int hs);

// The same contracts as Attention<Real>::forward / backward_input (shapes already checked).
template <class Real>
void forward(int B, int T, int C, int H, CMat<Real> qkv, Mat<Real> att, Mat<Real> out);
template <class Real>
void backward_input(int B, int T, int C, int H, CMat<Real> qkv, CMat<Real> att, CMat<Real> dout, Mat<Real> dqkv);

}  // namespace attention_device
}  // namespace minipipe
