//===- TrainOps.cpp - verifiers of the training ops -----------------------===//
//
// The ops of AMPCTrainOps.td: training state, stores, the unscale and
// overflow check, clipping, optimizer and scale updates.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/ChannelsLast.h"
#include "ampc/Dialect/Optimizers.h"

using namespace mlir;
using namespace ampc;

namespace {
/// The type of the `ampc.parameter` or `ampc.state` named `name`, or null.
Type symbolType(Operation *from, SymbolTableCollection &table,
                FlatSymbolRefAttr name) {
  Operation *symbol = table.lookupNearestSymbolFrom(from, name);
  if (auto p = dyn_cast_or_null<ParameterOp>(symbol))
    return p.getType();
  if (auto s = dyn_cast_or_null<StateOp>(symbol))
    return s.getType();
  return {};
}

bool isScalar(Type t) { return cast<RankedTensorType>(t).getRank() == 0; }
} // namespace

LogicalResult StateOp::verify() {
  if (getInitialValue().getType() != getType())
    return emitOpError("initial value has type ")
           << getInitialValue().getType() << ", expected " << getType();
  if (getChannelsLast() &&
      (!getDerivedFrom() || cast<RankedTensorType>(getType()).getRank() < 3))
    return emitOpError("channels_last is for the copy of a weight of rank 3 "
                       "or more (derived_from)");
  return success();
}

LogicalResult LoadStateOp::verifySymbolUses(SymbolTableCollection &table) {
  auto state = table.lookupNearestSymbolFrom<StateOp>(*this, getStateAttr());
  if (!state)
    return emitOpError("'") << getState() << "' is not an ampc.state";
  if (state.getType() != getType())
    return emitOpError("result type ")
           << getType() << " does not match state type " << state.getType();
  return success();
}

LogicalResult
LoadPackedStateOp::verifySymbolUses(SymbolTableCollection &table) {
  auto result = cast<RankedTensorType>(getType());
  if (getStates().empty() || result.getRank() == 0)
    return emitOpError("packs one or more states into a tensor of rank 1 or "
                       "more");
  int64_t rows = 0;
  for (Attribute a : getStates()) {
    auto symbol = cast<FlatSymbolRefAttr>(a);
    auto state = table.lookupNearestSymbolFrom<StateOp>(*this, symbol);
    if (!state)
      return emitOpError("'") << symbol.getValue() << "' is not an ampc.state";
    auto t = cast<RankedTensorType>(state.getType());
    if (t.getElementType() != result.getElementType() ||
        t.getRank() != result.getRank() ||
        t.getShape().drop_front() != result.getShape().drop_front())
      return emitOpError("state '")
             << symbol.getValue() << "' of type " << t
             << " does not pack into " << result
             << " (one element type, equal trailing dimensions)";
    rows += t.getDimSize(0);
  }
  if (rows != result.getDimSize(0))
    return emitOpError("the states have ")
           << rows << " rows in all, the result " << result.getDimSize(0);
  return success();
}

LogicalResult StoreOp::verifySymbolUses(SymbolTableCollection &table) {
  Type type = symbolType(*this, table, getTargetAttr());
  if (!type)
    return emitOpError("'") << getTarget()
                            << "' is not an ampc.parameter or ampc.state";
  if (type != getValue().getType())
    return emitOpError("value type ") << getValue().getType()
                                      << " does not match " << type;
  return success();
}

LogicalResult UnscaleOp::verify() {
  if (!isScalar(getScale().getType()))
    return emitOpError("the scale must be a scalar");
  if (getUnscaled().size() != getGrads().size())
    return emitOpError("expects one result per gradient, got ")
           << getUnscaled().size() << " for " << getGrads().size();
  if (auto list = getChannelsLast())
    for (int64_t i : *list)
      if (i < 0 || i >= static_cast<int64_t>(getGrads().size()) ||
          llvm::count(*list, i) != 1)
        return emitOpError("channels_last lists gradient ")
               << i << ", which is not one of the " << getGrads().size()
               << " gradients or is listed twice";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(getGrads(), getUnscaled()))) {
    auto [g, u] = pair;
    // The gradient's type as the result's layout reads it.
    Type read = g.getType();
    if (isChannelsLast(i)) {
      auto t = cast<RankedTensorType>(g.getType());
      if (t.getRank() < 3)
        return emitOpError("a channels-last gradient has rank 3 or more, "
                           "got ")
               << t;
      read = RankedTensorType::get(
          permuteShape(t.getShape(), channelsFirstPerm(t.getRank())),
          t.getElementType());
    }
    if (read != u.getType() && !isSixteenBitOfF32(u.getType(), read))
      return emitOpError("result type ")
             << u.getType() << " does not match gradient type " << g.getType()
             << (isChannelsLast(i) ? " read channels-last" : "")
             << " (nor widens it from f16/bf16 to f32)";
  }
  if (!isScalar(getFoundInf().getType()))
    return emitOpError("found_inf must be a scalar");
  return success();
}

LogicalResult ClipGradNormOp::verify() {
  if (getClipped().size() != getGrads().size())
    return emitOpError("expects one result per gradient");
  for (auto [g, c] : llvm::zip(getGrads(), getClipped()))
    if (g.getType() != c.getType())
      return emitOpError("result type ")
             << c.getType() << " does not match gradient type " << g.getType();
  if (!(getMaxNorm().convertToFloat() > 0))
    return emitOpError("'max_norm' must be positive");
  return success();
}

LogicalResult OptimizerUpdateOp::verify() {
  OptimizerKind kind = getKind();
  size_t moments = getMoments().size();
  // `none` means no optimizer to ampc-attach-optimizer; no update has it.
  if (!optimizerFacts(kind))
    return emitOpError("'kind' must be ")
           << optimizerKindList() << ", got '" << stringifyOptimizerKind(kind)
           << "'";
  size_t expected = momentCount(kind, getMomentum().convertToFloat());
  if (moments != expected)
    return emitOpError("'") << stringifyOptimizerKind(kind) << "' keeps "
                            << expected << " moment(s), got " << moments;
  Type t = getParam().getType();
  if (getGrad().getType() != t)
    return emitOpError("gradient type ") << getGrad().getType()
                                         << " does not match parameter " << t;
  for (Value m : getMoments())
    if (m.getType() != t)
      return emitOpError("moment type ") << m.getType()
                                         << " does not match parameter " << t;
  if (getNewParam().getType() != t || getNewMoments().size() != moments)
    return emitOpError("results must be the new parameter and moments");
  if (!isScalar(getLr().getType()) || !isScalar(getStep().getType()) ||
      (getFoundInf() && !isScalar(getFoundInf().getType())))
    return emitOpError("lr, step and found_inf must be scalars");
  return success();
}

/// The element count of every tensor in `values`.
static int64_t elementCount(ValueRange values) {
  int64_t count = 0;
  for (Value v : values)
    count += cast<RankedTensorType>(v.getType()).getNumElements();
  return count;
}

LogicalResult AllReduceStartOp::verify() {
  if (getGrads().empty())
    return emitOpError("needs at least one gradient");
  auto packed = cast<RankedTensorType>(getPacked().getType());
  if (packed.getRank() != 1 || packed.getNumElements() != elementCount(getGrads()))
    return emitOpError("packs ")
           << elementCount(getGrads())
           << " gradient elements, so its result is 1-D of that size, got "
           << packed;
  if (getBucketAttr().getInt() < 0)
    return emitOpError("bucket is ")
           << getBucketAttr().getInt() << ", expected >= 0";
  return success();
}

LogicalResult AllReduceWaitOp::verify() {
  if (!getPacked().getDefiningOp<AllReduceStartOp>())
    return emitOpError("waits for a value ampc.all_reduce_start produced");
  auto start = getPacked().getDefiningOp<AllReduceStartOp>();
  if (start.getGrads() != getGrads())
    return emitOpError("takes the gradients of its ampc.all_reduce_start, "
                       "in its order");
  if (getMeans().size() != getGrads().size())
    return emitOpError("expects one result per gradient, got ")
           << getMeans().size() << " for " << getGrads().size();
  for (auto [g, m] : llvm::zip(getGrads(), getMeans()))
    if (g.getType() != m.getType())
      return emitOpError("result type ")
             << m.getType() << " differs from its gradient's " << g.getType();
  return success();
}
