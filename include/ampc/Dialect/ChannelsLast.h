//===- ChannelsLast.h - the channels-last layout's permutations -*- C++ -*-===//
//
// The facts of the channels-last layout (issue 39 item 3) every layer
// shares: an image (N, C, spatial...) stored (N, spatial..., C), and a
// convolution weight (M, C, k...) stored (M, k..., C), are the same
// permutation. The shape rules of the ops with `channels_last`,
// ampc-channels-last, ampc-attach-optimizer's weight copies,
// ampc-fold-transposes' unscale fold and the emitters read it here.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DIALECT_CHANNELSLAST_H
#define AMPC_DIALECT_CHANNELSLAST_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <utility>

namespace ampc {

/// (N, C, spatial...) -> (N, spatial..., C) for a tensor of `rank`, as
/// ampc.transpose's `perm` (result dimension i is input dimension perm[i]).
inline llvm::SmallVector<int64_t> channelsLastPerm(int64_t rank) {
  llvm::SmallVector<int64_t> perm = {0};
  for (int64_t d = 2; d < rank; ++d)
    perm.push_back(d);
  perm.push_back(1);
  return perm;
}

/// Its inverse: (N, spatial..., C) -> (N, C, spatial...).
inline llvm::SmallVector<int64_t> channelsFirstPerm(int64_t rank) {
  llvm::SmallVector<int64_t> perm = {0, rank - 1};
  for (int64_t d = 1; d < rank - 1; ++d)
    perm.push_back(d);
  return perm;
}

/// `shape` transposed by `perm`.
inline llvm::SmallVector<int64_t> permuteShape(llvm::ArrayRef<int64_t> shape,
                                               llvm::ArrayRef<int64_t> perm) {
  llvm::SmallVector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(shape[p]);
  return out;
}

/// A channels-last tensor (M, spatial..., C) as math::weightCopyIndex reads
/// it: its channels C and spatial size.
inline std::pair<int64_t, int64_t>
channelsLastLayout(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  int64_t channels = shape.back();
  return {channels, count / (shape.front() * channels)};
}

} // namespace ampc

#endif // AMPC_DIALECT_CHANNELSLAST_H
