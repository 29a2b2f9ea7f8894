//===- Quantization.h - the operands of a (de)quantization ------*- C++ -*-===//
//
// What ampc.quantize_linear, ampc.dequantize_linear and
// ampc.dynamic_quantize_linear require of their operands, checked once for
// their shape rules (lib/Dialect/AMPCOps.cpp), the importer's rules (the
// node's error messages, lib/Import/Rules/Quantization.cpp) and
// ampc-decompose-quantization (the shape a per-axis scale is broadcast
// with, lib/Transforms/DecomposeQuantization.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DIALECT_QUANTIZATION_H
#define AMPC_DIALECT_QUANTIZATION_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace ampc {

/// The shape that a scale or zero point of shape `v` takes to broadcast
/// along `axis` of an x of shape `x`: [length, 1, ...] for a per-axis value
/// (1-D of the axis's length), [] for a scalar or a single value, whatever
/// the axis (ONNX reads the axis only for per-axis values). `what` ("the
/// scale", "the zero point") names the value in `error`: an axis out of
/// range, or a value that is neither a scalar nor of the axis's length.
mlir::FailureOr<llvm::SmallVector<int64_t>>
quantizationParameterShape(llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> v,
                           int64_t axis, llvm::StringRef what,
                           std::string &error);

/// The element type of QuantizeLinear's result: the zero point's, or
/// uint8 (ONNX's default) without one (`zeroPoint` null). Anything but an
/// 8-bit integer is a failure, with `error` saying so.
mlir::FailureOr<mlir::IntegerType>
quantizedElementType(mlir::MLIRContext *ctx, mlir::Type zeroPoint,
                     std::string &error);

/// DynamicQuantizeLinear's x must be a float tensor: "" or the message.
std::string checkDynamicQuantizeInput(mlir::Type element);

} // namespace ampc

#endif // AMPC_DIALECT_QUANTIZATION_H
