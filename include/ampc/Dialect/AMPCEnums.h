//===- AMPCEnums.h - the dialect's enums (AMPCOps.td) -----------*- C++ -*-===//
//
// The enums of AMPCOps.td (GemmEpilogue, Reduction, GeluApproximate,
// OptimizerKind, LossScalingMode, PrecisionCategory and the pass-option
// enums) with their generated symbolize/stringify functions, which are the
// one spelling of every case: the IR's `#ampc<NAME value>`, pass options,
// rules files and messages all use them.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DIALECT_AMPCENUMS_H
#define AMPC_DIALECT_AMPCENUMS_H

#include "ampc/Support/Choices.h"

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/DenseMapInfo.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>

#include "ampc/Dialect/AMPCEnums.h.inc"

namespace ampc {

/// The spelling of every case of `E`, in the order AMPCOps.td lists them
/// (the cases of each enum are numbered from 0 without gaps).
template <typename E>
llvm::SmallVector<llvm::StringRef> enumSpellings() {
  llvm::SmallVector<llvm::StringRef> spellings;
  for (uint32_t i = 0;; ++i) {
    llvm::StringRef s = stringifyEnum(static_cast<E>(i));
    if (s.empty())
      return spellings;
    spellings.push_back(s);
  }
}

/// "a, b or c": the cases of `E`, for messages that say what was expected.
template <typename E>
std::string enumChoices() {
  return joinChoices(enumSpellings<E>());
}

} // namespace ampc

#endif // AMPC_DIALECT_AMPCENUMS_H
