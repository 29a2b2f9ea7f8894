//===- FreezeParameters.cpp - which initializers train ---------------------===//
//
// `--freeze` and `--trainable` over initializer names: a parameter that
// must not train (a pretrained backbone, a registered buffer the Python
// module names) is marked `ampc.frozen` with the reason, so that
// ampc-autodiff computes no gradient for it and the optimizer never sees
// it. The decision is in the IR, where every later pass and `--summary`
// read it.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/GlobPattern.h"

namespace ampc {
#define GEN_PASS_DEF_FREEZEPARAMETERSPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {
struct Pattern {
  std::string spec;
  llvm::GlobPattern glob;
  bool used = false;
};

struct FreezeParametersPass
    : ampc::impl::FreezeParametersPassBase<FreezeParametersPass> {
  using Base::Base;

  /// The globs of `specs`; false after an error naming `flag` and the
  /// pattern that does not parse.
  bool parse(ModuleOp module, StringRef flag, ArrayRef<std::string> specs,
             std::vector<Pattern> &out) {
    for (const std::string &spec : specs) {
      if (spec.empty()) {
        emitError(module.getLoc()) << "--" << flag << ": an empty pattern";
        return false;
      }
      llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(spec);
      if (!glob) {
        emitError(module.getLoc())
            << "--" << flag << ": '" << spec
            << "' is not a valid glob: " << llvm::toString(glob.takeError());
        return false;
      }
      out.push_back({spec, std::move(*glob)});
    }
    return true;
  }

  /// The first of `patterns` that matches `name`, marked used; or null.
  static Pattern *match(std::vector<Pattern> &patterns, StringRef name) {
    for (Pattern &p : patterns)
      if (p.glob.match(name)) {
        p.used = true;
        return &p;
      }
    return nullptr;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::vector<Pattern> frozen, trained;
    if (!parse(module, "freeze", freeze, frozen) ||
        !parse(module, "trainable", trainable, trained))
      return signalPassFailure();
    if (frozen.empty() && trained.empty())
      return;
    Builder b(&getContext());
    for (auto param : module.getOps<ampc::ParameterOp>()) {
      StringRef name = param.getSymName();
      // Every pattern is tried, so that one used only by a later
      // initializer is not reported as matching none.
      Pattern *freezes = match(frozen, name);
      Pattern *trains = match(trained, name);
      std::string reason;
      if (freezes)
        reason = "--freeze " + freezes->spec;
      else if (!trained.empty() && !trains)
        reason = "not --trainable";
      if (!reason.empty())
        param->setAttr(ampc::kFrozenAttr, b.getStringAttr(reason));
    }
    for (auto [flag, patterns] :
         {std::pair{"freeze", &frozen}, {"trainable", &trained}})
      for (const Pattern &p : *patterns)
        if (!p.used)
          emitWarning(module.getLoc())
              << "--" << flag << " '" << p.spec
              << "' names no initializer of the model";
  }
};
} // namespace
