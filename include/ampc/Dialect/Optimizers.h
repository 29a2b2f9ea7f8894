//===- Optimizers.h - what each optimizer kind keeps and takes --*- C++ -*-===//
//
// The facts of each torch.optim optimizer ampc attaches, defined once: the
// moments it keeps (their state names), the settings it takes besides lr
// and weight_decay, its default weight decay. ampc-attach-optimizer, the
// verifiers of ampc.optimizer_update and of the module's `ampc.optimizer`,
// and every message that lists the kinds read them. The update itself,
// step for step torch.optim's, is in include/ampc/Kernels/Common/TrainMath.h
// (both targets' kernels); docs/contributing.md, "Adding an optimizer".
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DIALECT_OPTIMIZERS_H
#define AMPC_DIALECT_OPTIMIZERS_H

#include "ampc/Dialect/AMPCEnums.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace ampc {

struct OptimizerFacts {
  /// torch.optim's names of the moments, the suffixes of their
  /// `ampc.state`s ("NAME.exp_avg"), in the order ampc.optimizer_update
  /// takes them.
  llvm::ArrayRef<llvm::StringLiteral> moments;
  /// The settings it takes besides lr and weight_decay, per parameter
  /// group (`--param-group GLOB:KEY=X`) and in the hyperparameter text.
  llvm::ArrayRef<llvm::StringLiteral> settings;
  /// Settings of the whole optimizer only (SGD's nesterov), in the
  /// hyperparameter text after `settings`.
  llvm::ArrayRef<llvm::StringLiteral> flags;
  /// weight_decay when none is given (torch.optim's default).
  double defaultWeightDecay;
  /// The moments are kept only where momentum is not 0 (SGD's buffer).
  bool momentsNeedMomentum;
};

/// The facts of `kind`; null for OptimizerKind::None (no optimizer).
const OptimizerFacts *optimizerFacts(OptimizerKind kind);

/// The moments an update of `kind` with this `momentum` keeps.
unsigned momentCount(OptimizerKind kind, double momentum);

/// Every kind with an update, for messages: "sgd, adam or adamw".
std::string optimizerKindList();

/// The settings that other kinds take and `kind` does not, for messages:
/// "beta1, beta2 or eps" for SGD.
std::string foreignOptimizerSettings(OptimizerKind kind);

} // namespace ampc

#endif // AMPC_DIALECT_OPTIMIZERS_H
