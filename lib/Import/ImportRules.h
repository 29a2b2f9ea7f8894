//===- ImportRules.h - what an ONNX import rule sees ------------*- C++ -*-===//
//
// The node context every import rule gets, and the helpers that build the
// ampc ops of ops imported as compositions: shared by OnnxImporter.cpp (the
// rule table, kRules, and most rules) and the families of rules kept in
// files of their own (Recurrent.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_LIB_IMPORT_IMPORTRULES_H
#define AMPC_LIB_IMPORT_IMPORTRULES_H

#include "ampc/Dialect/AMPCDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

namespace ampc::detail {

class Importer;

/// What an import rule sees of one ONNX node.
struct NodeContext {
  Importer &importer;
  const onnx::NodeProto &node;
  mlir::Location loc;
  int64_t opset;
  llvm::SmallVector<mlir::Value>
      inputs; // null where an optional input is absent
  mlir::OpBuilder &b;

  mlir::Value input(size_t i) const {
    return i < inputs.size() ? inputs[i] : mlir::Value();
  }
  size_t numOutputs() const { return node.output_size(); }
  bool outputUsed(int i) const {
    return i < node.output_size() && !node.output(i).empty();
  }

  const onnx::AttributeProto *attr(llvm::StringRef name) const {
    for (const auto &a : node.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t getInt(llvm::StringRef name, int64_t dflt) const {
    const auto *a = attr(name);
    return a ? a->i() : dflt;
  }
  float getFloat(llvm::StringRef name, float dflt) const {
    const auto *a = attr(name);
    return a ? a->f() : dflt;
  }
  std::string getString(llvm::StringRef name, llvm::StringRef dflt) const {
    const auto *a = attr(name);
    return a ? a->s() : dflt.str();
  }
  std::optional<llvm::SmallVector<int64_t>>
  getInts(llvm::StringRef name) const {
    const auto *a = attr(name);
    if (!a)
      return std::nullopt;
    return llvm::SmallVector<int64_t>(a->ints().begin(), a->ints().end());
  }

  /// Reports an error at this node and returns failure.
  mlir::LogicalResult error(const llvm::Twine &message) const {
    mlir::emitError(loc) << message;
    return mlir::failure();
  }

  /// The constant value of input `i`, which must be known at import.
  mlir::FailureOr<mlir::DenseElementsAttr>
  constantInput(size_t i, llvm::StringRef what) const {
    mlir::DenseElementsAttr value;
    mlir::Value v = input(i);
    if (!v || !mlir::matchPattern(v, mlir::m_Constant(&value)))
      return error("input " + llvm::Twine(i) + " (" + what +
                   ") must be a constant once shapes are bound");
    return value;
  }

  /// The integer values of constant input `i`.
  mlir::FailureOr<llvm::SmallVector<int64_t>>
  constantInts(size_t i, llvm::StringRef what) const {
    mlir::FailureOr<mlir::DenseElementsAttr> value = constantInput(i, what);
    if (failed(value))
      return mlir::failure();
    if (!mlir::isa<mlir::IntegerType>(value->getElementType()))
      return error("input " + llvm::Twine(i) + " (" + what +
                   ") must be integer");
    llvm::SmallVector<int64_t> out;
    for (const llvm::APInt &v : value->getValues<llvm::APInt>())
      out.push_back(v.getSExtValue());
    return out;
  }

  /// Builds `opName`, inferring result types unless `resultTypes` is given,
  /// verifies it and folds it when its operands are constant.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  build(llvm::StringRef opName, mlir::ValueRange operands,
        llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
        unsigned numResults = 1, mlir::TypeRange resultTypes = {});

  mlir::NamedAttribute i64(llvm::StringRef name, int64_t v) const {
    return b.getNamedAttr(name, b.getI64IntegerAttr(v));
  }
  mlir::NamedAttribute f32(llvm::StringRef name, float v) const {
    return b.getNamedAttr(name, b.getF32FloatAttr(v));
  }
  mlir::NamedAttribute ints(llvm::StringRef name,
                            llvm::ArrayRef<int64_t> v) const {
    return b.getNamedAttr(name, b.getDenseI64ArrayAttr(v));
  }
  /// String attribute `name` (default `dflt`) as the enum attribute AttrT of
  /// the case of E it spells (ONNX and AMPCOps.td spell them alike); any
  /// other word is an error at the node.
  template <typename E, typename AttrT>
  mlir::FailureOr<mlir::NamedAttribute> enumAttr(llvm::StringRef name,
                                                 llvm::StringRef dflt) const {
    std::string word = getString(name, dflt);
    std::optional<E> value = ampc::symbolizeEnum<E>(word);
    if (!value)
      return error("'" + name + "' must be " + ampc::enumChoices<E>() +
                   ", got '" + word + "'");
    return b.getNamedAttr(name, AttrT::get(b.getContext(), *value));
  }
};

using Outputs = llvm::SmallVector<mlir::Value>;

/// "[2, 3, 4]", for messages.
std::string formatDims(llvm::ArrayRef<int64_t> dims);
/// `v` as printf's %g writes it, for messages.
std::string formatNumber(double v);

/// A constant op holding `value`.
mlir::FailureOr<Outputs> constant(NodeContext &nc,
                                  mlir::DenseElementsAttr value);

/// The most elements of a constant the importer computes from a model's
/// numbers rather than reads from it: index vectors along an axis (OneHot's
/// depth, ArgMax's axis), gather positions and weights (Pad, Resize,
/// ConvTranspose), Range's values, a window. They are made element by
/// element at import and stored in the library, so a model of a few
/// hundred bytes asking for 2^32 of them is refused before any is made:
/// 2^24 elements (128 MiB of int64), besides --max-tensor-bytes.
constexpr int64_t kMaxComputedElements = int64_t(1) << 24;

/// Success when a constant of `shape` and `element` that the importer is
/// about to compute has at most kMaxComputedElements elements and
/// --max-tensor-bytes bytes; otherwise an error at the node that starts
/// with `what` (which names the model's number) and returns failure.
mlir::LogicalResult checkComputedConstant(NodeContext &nc,
                                          llvm::ArrayRef<int64_t> shape,
                                          mlir::Type element,
                                          const llvm::Twine &what);

//===----------------------------------------------------------------------===//
// Parts of compositions: each returns null after an error at the node
// (already reported), and takes a null operand for such an error.
//===----------------------------------------------------------------------===//

/// ampc.gemm's operand segments (A, B, the optional C when `operands` is
/// 3, no ReLU mask): the attribute an ampc.gemm built by name needs.
mlir::NamedAttribute gemmSegments(NodeContext &nc, size_t operands);

/// The single result of `opName` on `operands`, its type inferred unless
/// `resultType` is given.
mlir::Value part(NodeContext &nc, llvm::StringRef opName,
                 mlir::ValueRange operands,
                 llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
                 mlir::Type resultType = {});

/// A zero-dimensional constant `value` of `element`.
mlir::Value scalarOf(NodeContext &nc, mlir::Type element, double value);

/// `v` reshaped to `shape`.
mlir::Value reshaped(NodeContext &nc, mlir::Value v,
                     llvm::ArrayRef<int64_t> shape);

/// `v` transposed by `perm` (itself when `perm` is the identity).
mlir::Value transposed(NodeContext &nc, mlir::Value v,
                       llvm::ArrayRef<int64_t> perm);

//===----------------------------------------------------------------------===//
// Rules defined in files of their own
//===----------------------------------------------------------------------===//

/// Recurrent.cpp: LSTM, GRU and RNN unrolled over the sequence.
mlir::FailureOr<Outputs> importLSTM(NodeContext &nc);
mlir::FailureOr<Outputs> importGRU(NodeContext &nc);
mlir::FailureOr<Outputs> importRNN(NodeContext &nc);

} // namespace ampc::detail

#endif // AMPC_LIB_IMPORT_IMPORTRULES_H
