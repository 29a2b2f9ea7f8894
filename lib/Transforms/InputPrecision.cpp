//===- InputPrecision.cpp - FP16/BF16 inputs where every use casts there --===//
//
// `--input-precision=auto` (Passes.td, InputPrecisionPass; issue 37, item
// 2). An input that the step rounds to 16 bits before any use (the input
// of a Linear under autocast) is sent by the caller in 16 bits: half the
// host-to-device bytes, and no cast kernel. Only the caller's rounding
// moves: the step reads the same 16-bit values, so it computes the same
// bits as from the FP32 data the caller rounded.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/AMPCTraits.h"
#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Precision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace ampc {
#define GEN_PASS_DEF_INPUTPRECISIONPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

/// What one function does with one f32 input.
struct InputUses {
  /// The autocasts that read it, directly or through views.
  SmallVector<ampc::CastOp> casts;
  /// The views between the input and the casts, producers first.
  SmallVector<Operation *> views;
  /// The 16-bit type every cast converts to; null when there is none.
  Type narrow;
  /// Why the input stays f32; empty when it can be narrowed.
  std::string whyNot;
};

InputUses collectUses(BlockArgument input) {
  InputUses uses;
  SmallVector<Value> reached{input};
  while (!reached.empty() && uses.whyNot.empty()) {
    Value value = reached.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (user->hasTrait<ampc::View>()) {
        uses.views.push_back(user);
        reached.push_back(user->getResult(0));
        continue;
      }
      auto cast = dyn_cast<ampc::CastOp>(user);
      if (isa<func::ReturnOp>(user)) {
        uses.whyNot = "it is returned as an output";
      } else if (!cast) {
        uses.whyNot = ampc::nodeDescription(user) + " reads it in f32";
      } else if (!ampc::isAutocast(cast)) {
        uses.whyNot = ampc::nodeDescription(user) +
                      ", a cast of the model, reads it";
      } else {
        Type to = getElementTypeOrSelf(cast.getType());
        if (!to.isF16() && !to.isBF16())
          uses.whyNot = ampc::nodeDescription(user) + " casts it to " +
                        ampc::dtypeName(to);
        else if (uses.narrow && uses.narrow != to)
          uses.whyNot = "it is cast to both " + ampc::dtypeName(uses.narrow) +
                        " and " + ampc::dtypeName(to);
        uses.narrow = to;
        uses.casts.push_back(cast);
      }
      if (!uses.whyNot.empty())
        break;
    }
  }
  if (uses.whyNot.empty() && uses.casts.empty())
    uses.whyNot = "no op reads it";
  return uses;
}

/// The input takes the 16-bit type; its views carry it, its casts go.
void narrowInput(BlockArgument input, const InputUses &uses) {
  auto narrowed = [&](Type t) {
    return cast<RankedTensorType>(t).clone(uses.narrow);
  };
  input.setType(narrowed(input.getType()));
  for (Operation *view : uses.views) {
    view->getResult(0).setType(narrowed(view->getResult(0).getType()));
    if (std::optional<ampc::PrecisionDecision> decision =
            ampc::getPrecisionDecision(view)) {
      decision->compute = cast<FloatType>(uses.narrow);
      ampc::setPrecisionDecision(view, *decision);
    }
  }
  for (ampc::CastOp cast : uses.casts) {
    cast.getOutput().replaceAllUsesWith(cast.getInput());
    cast.erase();
  }
}

struct InputPrecision : ampc::impl::InputPrecisionPassBase<InputPrecision> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.isExternal())
      return;
    // The descriptor lists @forward's inputs, and @train_step takes the
    // same ones: one type per input, decided on both.
    SmallVector<func::FuncOp, 2> functions{forward};
    if (auto trainStep = module.lookupSymbol<func::FuncOp>("train_step"))
      if (!trainStep.isExternal())
        functions.push_back(trainStep);
    MLIRContext *context = &getContext();
    for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
      auto type = dyn_cast<RankedTensorType>(forward.getArgumentTypes()[i]);
      if (!type || !type.getElementType().isF32() ||
          forward.getArgAttr(i, ampc::kLabelAttr))
        continue;
      std::string whyNot;
      Type narrow;
      SmallVector<InputUses, 2> uses;
      for (func::FuncOp f : functions) {
        std::string where =
            f == forward ? "" : " in @" + f.getSymName().str();
        if (i >= f.getNumArguments() || f.getArgumentTypes()[i] != type ||
            f.getArgAttr(i, ampc::kNameAttr) !=
                forward.getArgAttr(i, ampc::kNameAttr)) {
          whyNot = "@" + f.getSymName().str() +
                   " takes another argument at its position";
          break;
        }
        InputUses used = collectUses(f.getArgument(i));
        if (!used.whyNot.empty()) {
          whyNot = used.whyNot + where;
          break;
        }
        if (narrow && narrow != used.narrow) {
          whyNot = "@forward casts it to " + ampc::dtypeName(narrow) +
                   ", @" + f.getSymName().str() + " to " +
                   ampc::dtypeName(used.narrow);
          break;
        }
        narrow = used.narrow;
        uses.push_back(std::move(used));
      }
      std::string decision =
          whyNot.empty()
              ? "every use is an autocast to " + ampc::dtypeName(narrow)
              : whyNot;
      for (auto [f, used] : llvm::zip(functions, uses))
        if (whyNot.empty())
          narrowInput(f.getArgument(i), used);
      for (func::FuncOp f : functions)
        if (i < f.getNumArguments())
          f.setArgAttr(i, ampc::kInputPrecisionAttr,
                       StringAttr::get(context, decision));
    }
    for (func::FuncOp f : functions)
      f.setFunctionType(FunctionType::get(
          context, f.getBody().front().getArgumentTypes(), f.getResultTypes()));
  }
};

} // namespace
