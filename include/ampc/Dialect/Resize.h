//===- Resize.h - ampc.resize's axes read against its input -----*- C++ -*-===//
//
// ampc.resize's per-axis plan, read once for its shape rule (the result
// type) and ampc-decompose-resize (what it resizes, and how).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DIALECT_RESIZE_H
#define AMPC_DIALECT_RESIZE_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>

namespace ampc {

/// The largest output size along one axis of ampc.resize: its lowering
/// builds index and weight vectors of that many elements (the importer's
/// limit on the constants it computes, kMaxComputedElements).
constexpr int64_t kMaxResizedSize = int64_t(1) << 24;

/// One axis ampc.resize names: its input and output sizes, the scale, and
/// the crop of tf_crop_and_resize (roi, as fractions of the input).
struct ResizeAxis {
  int64_t axis = 0, in = 0, out = 0;
  double scale = 1; // output / input, as ONNX's reference uses it
  double roiStart = 0, roiEnd = 1;
  bool roiF32 = false; // roi given as float32
};

/// The axes of an ampc.resize of an input of `shape`, in the order `axes`
/// lists them: `axes` distinct dimensions of the input, `sizes` and
/// `scales` one per axis, `roi` (starts, then ends) two per axis when
/// `crop` (tf_crop_and_resize) and none otherwise, a size between 1 and
/// kMaxResizedSize (0 for an empty dimension, which stays empty), a
/// positive finite scale. Failure otherwise, with `error` saying which.
mlir::FailureOr<llvm::SmallVector<ResizeAxis>>
readResize(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> axes,
           llvm::ArrayRef<int64_t> sizes, llvm::ArrayRef<double> scales,
           llvm::ArrayRef<double> roi, bool roiF32, bool crop,
           std::string &error);

} // namespace ampc

#endif // AMPC_DIALECT_RESIZE_H
