//===- TensorSize.cpp - checked tensor sizes and the size limit -----------===//

#include "ampc/Dialect/TensorSize.h"

#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

std::optional<int64_t> ampc::checkedProduct(llvm::ArrayRef<int64_t> dims) {
  int64_t product = 1;
  for (int64_t d : dims) {
    if (d < 0 || llvm::MulOverflow(product, d, product))
      return std::nullopt;
  }
  return product;
}

std::optional<int64_t> ampc::checkedByteSize(ShapedType type) {
  if (!type.hasRank())
    return std::nullopt;
  std::optional<int64_t> elements = checkedProduct(type.getShape());
  if (!elements)
    return std::nullopt;
  Type element = type.getElementType();
  int64_t width = element.isIntOrFloat()
                      ? std::max<int64_t>(1, element.getIntOrFloatBitWidth() / 8)
                      : 8;
  int64_t bytes;
  if (llvm::MulOverflow(*elements, width, bytes))
    return std::nullopt;
  return bytes;
}

std::string ampc::checkTensorSize(Type type, int64_t limit) {
  auto shaped = dyn_cast<RankedTensorType>(type);
  if (!shaped)
    return "";
  std::optional<int64_t> bytes = checkedByteSize(shaped);
  if (bytes && *bytes <= limit)
    return "";
  std::string message;
  llvm::raw_string_ostream os(message);
  os << type << " has ";
  if (bytes)
    os << *bytes << " bytes, more than the limit of " << limit << " bytes";
  else
    os << "more than 2^63 bytes";
  return message;
}
