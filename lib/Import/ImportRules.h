//===- ImportRules.h - what an ONNX import rule sees ------------*- C++ -*-===//
//
// The node context every import rule gets, the importer state rules share,
// and the helpers that build the ampc ops of ops imported as compositions:
// shared by OnnxImporter.cpp (reading, the signature, the rule table kRules
// and the dispatch) and the families of rules in Rules/ (docs/design.md,
// "The importer by op family", says which file a new op's rule goes to).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_LIB_IMPORT_IMPORTRULES_H
#define AMPC_LIB_IMPORT_IMPORTRULES_H

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Compose.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

namespace ampc::detail {

/// What import rules see of the importer: the limits of this import. The
/// importer (OnnxImporter.cpp) is one.
class ImportContext {
public:
  virtual ~ImportContext() = default;

  /// --max-tensor-bytes: the largest tensor a node may make.
  virtual int64_t maxTensorBytes() const = 0;
};

/// What an import rule sees of one ONNX node: a Composer (Compose.h) at
/// the node's location, which builds, verifies and folds the ops.
struct NodeContext : ampc::Composer {
  ImportContext &importer;
  const onnx::NodeProto &node;
  int64_t opset;
  llvm::SmallVector<mlir::Value>
      inputs; // null where an optional input is absent

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

using ampc::formatDims;
/// `v` as printf's %g writes it, for messages.
std::string formatNumber(double v);

/// A constant op holding `value`.
mlir::FailureOr<Outputs> constant(NodeContext &nc,
                                  mlir::DenseElementsAttr value);

//===----------------------------------------------------------------------===//
// Parts of compositions: each returns null after an error at the node
// (already reported), and takes a null operand for such an error.
//===----------------------------------------------------------------------===//

/// ampc.gemm's operand segments (A, B, the optional C when `operands` is
/// 3, no ReLU mask): the attribute an ampc.gemm built from a list of
/// operands needs.
mlir::NamedAttribute gemmSegments(NodeContext &nc, size_t operands);

/// An OpTy on the node's present inputs, in order.
template <typename OpTy>
mlir::FailureOr<Outputs>
buildSame(NodeContext &nc, llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
          unsigned numResults = 1) {
  llvm::SmallVector<mlir::Value> operands;
  for (mlir::Value v : nc.inputs)
    if (v)
      operands.push_back(v);
  return nc.build<OpTy>(operands, attrs, numResults);
}

/// The rule of an ONNX op that is one ampc op on the same operands.
template <typename OpTy>
mlir::FailureOr<Outputs> simple(NodeContext &nc) {
  return buildSame<OpTy>(nc);
}

using ampc::part;

/// An op class as a value, for a helper lambda that builds the op it is
/// given (a C++17 lambda takes no template parameters):
/// `[&](auto op, Value v) { return part<OpOf<decltype(op)>>(nc, v); }`.
template <typename OpTy> struct OpClass {
  using type = OpTy;
};
template <typename OpTy> constexpr OpClass<OpTy> opClass{};
template <typename C> using OpOf = typename C::type;

using ampc::reshaped;
using ampc::scalarOf;
using ampc::transposed;
// scalarOf, indexVector, alongAxes, checkComputedConstant and
// kMaxComputedElements are in ampc/Dialect/Compose.h (the ampc-decompose-*
// passes build with them too).

/// An int64 constant of `shape` holding `values`.
mlir::Value indexConstant(NodeContext &nc, llvm::ArrayRef<int64_t> values,
                          llvm::ArrayRef<int64_t> shape);

/// `v` gathered along `axis` at the constant `indices` (none when they
/// read the axis as it is).
mlir::Value gatherAlong(NodeContext &nc, mlir::Value v, int64_t axis,
                        llvm::ArrayRef<int64_t> indices);

/// The largest output (or padded) size along one axis that Resize,
/// Upsample and ConvTranspose accept: their index and weight vectors are
/// constants of that many elements built at import.
constexpr int64_t kMaxComposedAxis = kMaxComputedElements;

/// Shape.cpp: the axes of a Squeeze, Unsqueeze or reduction, an attribute
/// before opset `inputSince` and input 1 from it.
mlir::FailureOr<llvm::SmallVector<int64_t>> axesOf(NodeContext &nc,
                                                   int64_t inputSince);

/// Constants.cpp: column - row for a rows x cols matrix (int64).
mlir::Value diagonalOffsets(NodeContext &nc, int64_t rows, int64_t cols);

//===----------------------------------------------------------------------===//
// The rules, by family (Rules/<Family>.cpp); kRules in OnnxImporter.cpp
// lists them
//===----------------------------------------------------------------------===//

// Elementwise.cpp
mlir::FailureOr<Outputs> importLeakyRelu(NodeContext &nc);
mlir::FailureOr<Outputs> importGelu(NodeContext &nc);
mlir::FailureOr<Outputs> importElu(NodeContext &nc);
mlir::FailureOr<Outputs> importCelu(NodeContext &nc);
mlir::FailureOr<Outputs> importSelu(NodeContext &nc);
mlir::FailureOr<Outputs> importHardSigmoid(NodeContext &nc);
mlir::FailureOr<Outputs> importThresholdedRelu(NodeContext &nc);
mlir::FailureOr<Outputs> importShrink(NodeContext &nc);
mlir::FailureOr<Outputs> importBitShift(NodeContext &nc);
mlir::FailureOr<Outputs> importIsInf(NodeContext &nc);
mlir::FailureOr<Outputs> importMod(NodeContext &nc);
mlir::FailureOr<Outputs> importPRelu(NodeContext &nc);
mlir::FailureOr<Outputs> importMax(NodeContext &nc);
mlir::FailureOr<Outputs> importMin(NodeContext &nc);
mlir::FailureOr<Outputs> importSum(NodeContext &nc);
mlir::FailureOr<Outputs> importMean(NodeContext &nc);
mlir::FailureOr<Outputs> importClip(NodeContext &nc);
mlir::FailureOr<Outputs> importCastLike(NodeContext &nc);
mlir::FailureOr<Outputs> importCast(NodeContext &nc);
// Convolution.cpp
mlir::FailureOr<Outputs> importGemm(NodeContext &nc);
mlir::FailureOr<Outputs> importConv(NodeContext &nc);
mlir::FailureOr<Outputs> importMaxPool(NodeContext &nc);
mlir::FailureOr<Outputs> importAveragePool(NodeContext &nc);
mlir::FailureOr<Outputs> importConvTranspose(NodeContext &nc);
mlir::FailureOr<Outputs> importMaxUnpool(NodeContext &nc);
mlir::FailureOr<Outputs> importGlobalMaxPool(NodeContext &nc);
// Normalization.cpp
mlir::FailureOr<Outputs> importSoftmax(NodeContext &nc);
mlir::FailureOr<Outputs> importLogSoftmax(NodeContext &nc);
mlir::FailureOr<Outputs> importLayerNormalization(NodeContext &nc);
mlir::FailureOr<Outputs> importBatchNormalization(NodeContext &nc);
mlir::FailureOr<Outputs> importDropout(NodeContext &nc);
mlir::FailureOr<Outputs> importInstanceNormalization(NodeContext &nc);
mlir::FailureOr<Outputs> importGroupNormalization(NodeContext &nc);
mlir::FailureOr<Outputs> importMeanVarianceNormalization(NodeContext &nc);
mlir::FailureOr<Outputs> importLpNormalization(NodeContext &nc);
mlir::FailureOr<Outputs> importLRN(NodeContext &nc);
mlir::FailureOr<Outputs> importSoftmaxCrossEntropyLoss(NodeContext &nc);
mlir::FailureOr<Outputs> importNegativeLogLikelihoodLoss(NodeContext &nc);
// Shape.cpp
mlir::FailureOr<Outputs> importReshape(NodeContext &nc);
mlir::FailureOr<Outputs> importExpand(NodeContext &nc);
mlir::FailureOr<Outputs> importTranspose(NodeContext &nc);
mlir::FailureOr<Outputs> importFlatten(NodeContext &nc);
mlir::FailureOr<Outputs> importSqueeze(NodeContext &nc);
mlir::FailureOr<Outputs> importUnsqueeze(NodeContext &nc);
mlir::FailureOr<Outputs> importConcat(NodeContext &nc);
mlir::FailureOr<Outputs> importSlice(NodeContext &nc);
mlir::FailureOr<Outputs> importSize(NodeContext &nc);
mlir::FailureOr<Outputs> importSplit(NodeContext &nc);
mlir::FailureOr<Outputs> importTile(NodeContext &nc);
mlir::FailureOr<Outputs> importDepthToSpace(NodeContext &nc);
mlir::FailureOr<Outputs> importSpaceToDepth(NodeContext &nc);
mlir::FailureOr<Outputs> importPad(NodeContext &nc);
mlir::FailureOr<Outputs> importShape(NodeContext &nc);
// Indexing.cpp
mlir::FailureOr<Outputs> importGather(NodeContext &nc);
mlir::FailureOr<Outputs> importOneHot(NodeContext &nc);
mlir::FailureOr<Outputs> importGatherElements(NodeContext &nc);
mlir::FailureOr<Outputs> importReverseSequence(NodeContext &nc);
mlir::FailureOr<Outputs> importScatterElements(NodeContext &nc);
mlir::FailureOr<Outputs> importGatherND(NodeContext &nc);
mlir::FailureOr<Outputs> importScatterND(NodeContext &nc);
mlir::FailureOr<Outputs> importTopK(NodeContext &nc);
// Reduction.cpp
mlir::FailureOr<Outputs> importReduceMean(NodeContext &nc);
mlir::FailureOr<Outputs> importReduceMax(NodeContext &nc);
mlir::FailureOr<Outputs> importReduceSum(NodeContext &nc);
mlir::FailureOr<Outputs> importReduceL1(NodeContext &nc);
mlir::FailureOr<Outputs> importReduceL2(NodeContext &nc);
mlir::FailureOr<Outputs> importReduceSumSquare(NodeContext &nc);
mlir::FailureOr<Outputs> importReduceLogSum(NodeContext &nc);
mlir::FailureOr<Outputs> importReduceLogSumExp(NodeContext &nc);
mlir::FailureOr<Outputs> importReduceMin(NodeContext &nc);
mlir::FailureOr<Outputs> importCumSum(NodeContext &nc);
mlir::FailureOr<Outputs> importArgMax(NodeContext &nc);
mlir::FailureOr<Outputs> importArgMin(NodeContext &nc);
mlir::FailureOr<Outputs> importHardmax(NodeContext &nc);
mlir::FailureOr<Outputs> importReduceProd(NodeContext &nc);
// Constants.cpp
mlir::FailureOr<Outputs> importTrilu(NodeContext &nc);
mlir::FailureOr<Outputs> importEyeLike(NodeContext &nc);
mlir::FailureOr<Outputs> importHannWindow(NodeContext &nc);
mlir::FailureOr<Outputs> importHammingWindow(NodeContext &nc);
mlir::FailureOr<Outputs> importBlackmanWindow(NodeContext &nc);
mlir::FailureOr<Outputs> importConstantOfShape(NodeContext &nc);
mlir::FailureOr<Outputs> importRange(NodeContext &nc);
mlir::FailureOr<Outputs> importConstant(NodeContext &nc);
// Quantization.cpp
mlir::FailureOr<Outputs> importQuantizeLinear(NodeContext &nc);
mlir::FailureOr<Outputs> importDequantizeLinear(NodeContext &nc);
mlir::FailureOr<Outputs> importDynamicQuantizeLinear(NodeContext &nc);
// Resize.cpp
mlir::FailureOr<Outputs> importResizeOp(NodeContext &nc);
mlir::FailureOr<Outputs> importUpsample(NodeContext &nc);
// Einsum.cpp
mlir::FailureOr<Outputs> importEinsum(NodeContext &nc);
// Recurrent.cpp: LSTM, GRU and RNN unrolled over the sequence.
mlir::FailureOr<Outputs> importLSTM(NodeContext &nc);
mlir::FailureOr<Outputs> importGRU(NodeContext &nc);
mlir::FailureOr<Outputs> importRNN(NodeContext &nc);

} // namespace ampc::detail

#endif // AMPC_LIB_IMPORT_IMPORTRULES_H
