//===- Training.cpp - what the training passes share ----------------------===//

#include "ampc/Transforms/Training.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

ampc::Seed ampc::findLossSeed(func::FuncOp step) {
  Seed seed;
  step.walk([&](ampc::ConstantOp c) {
    if (c->hasAttr(ampc::kLossSeedAttr))
      seed.op = c;
  });
  return seed;
}

SmallVector<unsigned> ampc::gradientResults(func::FuncOp step) {
  SmallVector<unsigned> results;
  for (unsigned i = 0; i < step.getNumResults(); ++i)
    if (step.getResultAttr(i, ampc::kGradientOfAttr))
      results.push_back(i);
  return results;
}

Value ampc::declareState(ModuleOp module, func::FuncOp func, StringRef name,
                         ElementsAttr initial, FlatSymbolRefAttr derivedFrom) {
  SymbolTable symbols(module);
  return declareState(symbols, func, name, initial, derivedFrom);
}

Value ampc::declareState(SymbolTable &symbols, func::FuncOp func,
                         StringRef name, ElementsAttr initial,
                         FlatSymbolRefAttr derivedFrom) {
  auto module = cast<ModuleOp>(symbols.getOp());
  OpBuilder b(module.getContext());
  auto type = cast<RankedTensorType>(initial.getType());
  if (!symbols.lookup(name)) {
    // After the last parameter or state, so symbols stay grouped. Searched
    // from the end: only the functions follow the symbols.
    Operation *last = nullptr;
    for (Operation &op : llvm::reverse(module.getBody()->getOperations()))
      if (isa<ampc::ParameterOp, ampc::StateOp>(op)) {
        last = &op;
        break;
      }
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(module.getBody());
    auto state = ampc::StateOp::create(b, func.getLoc(), name, type, initial,
                                       derivedFrom);
    symbols.insert(state);
  }
  b.setInsertionPointToStart(&func.getBody().front());
  return ampc::LoadStateOp::create(b, func.getLoc(), type, name);
}

Value ampc::countIf(OpBuilder &b, Location loc, Value counter, Value flag,
                    bool when) {
  auto type = cast<RankedTensorType>(counter.getType());
  Value one = ampc::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getIntegerAttr(type.getElementType(), 1)));
  Value next = ampc::AddOp::create(b, loc, counter, one);
  return when ? ampc::WhereOp::create(b, loc, flag, next, counter).getResult()
              : ampc::WhereOp::create(b, loc, flag, counter, next).getResult();
}

Value ampc::findFoundInf(func::FuncOp step) {
  Value found;
  step.walk([&](ampc::UnscaleOp u) { found = u.getFoundInf(); });
  return found;
}
