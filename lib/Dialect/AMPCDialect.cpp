//===- AMPCDialect.cpp - the ampc dialect ---------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace ampc;

#include "ampc/Dialect/AMPCOpsDialect.cpp.inc"
#include "ampc/Dialect/AMPCInterfaces.cpp.inc"
#include "ampc/Dialect/AMPCEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "ampc/Dialect/AMPCAttrs.cpp.inc"

void AMPCDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ampc/Dialect/AMPCAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ampc/Dialect/AMPCOps.cpp.inc"
      >();
}

Operation *AMPCDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

std::optional<int64_t> ampc::normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

std::optional<SmallVector<int64_t>>
ampc::broadcastShapes(ArrayRef<ArrayRef<int64_t>> shapes) {
  size_t rank = 0;
  for (ArrayRef<int64_t> s : shapes)
    rank = std::max(rank, s.size());
  SmallVector<int64_t> result(rank, 1);
  for (ArrayRef<int64_t> s : shapes) {
    size_t offset = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &r = result[offset + i];
      if (s[i] == r || s[i] == 1)
        continue;
      if (r != 1)
        return std::nullopt;
      r = s[i];
    }
  }
  return result;
}
