//===- Optimizers.cpp - what each optimizer kind keeps and takes ----------===//
//
// See include/ampc/Dialect/Optimizers.h. A new optimizer kind is a case of
// AMPC_OptimizerKind (AMPCOps.td), a row here, and its update (TrainMath.h
// and the two targets' kernels).
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/Optimizers.h"

#include "ampc/Dialect/AMPCDialect.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using llvm::StringLiteral;

namespace {
constexpr StringLiteral kSgdMoments[] = {".momentum_buffer"};
constexpr StringLiteral kAdamMoments[] = {".exp_avg", ".exp_avg_sq"};
constexpr StringLiteral kSgdSettings[] = {"momentum", "dampening"};
constexpr StringLiteral kAdamSettings[] = {"beta1", "beta2", "eps"};
constexpr StringLiteral kSgdFlags[] = {"nesterov"};

const ampc::OptimizerFacts kSgd{kSgdMoments, kSgdSettings, kSgdFlags,
                                /*defaultWeightDecay=*/0,
                                /*momentsNeedMomentum=*/true};
const ampc::OptimizerFacts kAdam{kAdamMoments, kAdamSettings, {},
                                 /*defaultWeightDecay=*/0,
                                 /*momentsNeedMomentum=*/false};
const ampc::OptimizerFacts kAdamw{kAdamMoments, kAdamSettings, {},
                                  /*defaultWeightDecay=*/0.01,
                                  /*momentsNeedMomentum=*/false};

/// Every kind with an update, in the enum's order.
llvm::SmallVector<ampc::OptimizerKind> updatingKinds() {
  llvm::SmallVector<ampc::OptimizerKind> kinds;
  for (llvm::StringRef word : ampc::enumSpellings<ampc::OptimizerKind>()) {
    ampc::OptimizerKind kind = *ampc::symbolizeOptimizerKind(word);
    if (ampc::optimizerFacts(kind))
      kinds.push_back(kind);
  }
  return kinds;
}
} // namespace

const ampc::OptimizerFacts *ampc::optimizerFacts(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::Sgd:
    return &kSgd;
  case OptimizerKind::Adam:
    return &kAdam;
  case OptimizerKind::Adamw:
    return &kAdamw;
  case OptimizerKind::None:
    return nullptr;
  }
  return nullptr;
}

unsigned ampc::momentCount(OptimizerKind kind, double momentum) {
  const OptimizerFacts *facts = optimizerFacts(kind);
  if (!facts || (facts->momentsNeedMomentum && momentum == 0))
    return 0;
  return facts->moments.size();
}

std::string ampc::optimizerKindList() {
  llvm::SmallVector<llvm::StringRef> names;
  for (OptimizerKind kind : updatingKinds())
    names.push_back(stringifyOptimizerKind(kind));
  return joinChoices(names);
}

std::string ampc::foreignOptimizerSettings(OptimizerKind kind) {
  const OptimizerFacts *own = optimizerFacts(kind);
  llvm::SmallVector<llvm::StringRef> foreign;
  for (OptimizerKind other : updatingKinds())
    for (llvm::StringRef setting : optimizerFacts(other)->settings)
      if (!(own && llvm::is_contained(own->settings, setting)) &&
          !llvm::is_contained(foreign, setting))
        foreign.push_back(setting);
  return joinChoices(foreign);
}
