//===- Quantization.cpp - the operands of a (de)quantization --------------===//

#include "ampc/Dialect/Quantization.h"

#include "ampc/Dialect/Compose.h"
#include "ampc/Dialect/AMPCDialect.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace ampc {

static std::string typeText(Type t) {
  std::string text;
  llvm::raw_string_ostream(text) << t;
  return text;
}

FailureOr<SmallVector<int64_t>>
quantizationParameterShape(ArrayRef<int64_t> x, ArrayRef<int64_t> v,
                           int64_t axis, StringRef what, std::string &error) {
  if (v.empty() || (v.size() == 1 && v[0] == 1))
    return SmallVector<int64_t>();
  int64_t rank = static_cast<int64_t>(x.size());
  std::optional<int64_t> at = ampc::normalizeAxis(axis, rank);
  if (!at) {
    error = ("axis " + Twine(axis) + " is out of range for rank " + Twine(rank))
                .str();
    return failure();
  }
  int64_t length = x[*at];
  if (v.size() != 1 || v[0] != length) {
    error = (what + " must be a scalar or hold " + Twine(length) +
             " values (the length of axis " + Twine(*at) + "), got " +
             formatDims(v))
                .str();
    return failure();
  }
  SmallVector<int64_t> shape(rank - *at, 1);
  shape[0] = length;
  return shape;
}

FailureOr<IntegerType> quantizedElementType(MLIRContext *ctx, Type zeroPoint,
                                            std::string &error) {
  if (!zeroPoint)
    return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  auto i = dyn_cast<IntegerType>(zeroPoint);
  if (i && i.getWidth() == 8)
    return i;
  error = "the zero point must be uint8 or int8, got " + typeText(zeroPoint);
  return failure();
}

std::string checkDynamicQuantizeInput(Type element) {
  if (isa<FloatType>(element))
    return "";
  return "x must be a float tensor, got " + typeText(element);
}

} // namespace ampc
