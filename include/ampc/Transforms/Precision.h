//===- Precision.h - precision rules, overrides and decisions ---*- C++ -*-===//
//
// What ampc-assign-precision reads (categories, --keep-fp32 / --force-lowp
// overrides, --amp-rules files) and what it writes on every op it decides
// (the `ampc.precision` attribute that the report and the ONNX exporter
// read). docs/precision.md describes the rules.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TRANSFORMS_PRECISION_H
#define AMPC_TRANSFORMS_PRECISION_H

#include "ampc/Dialect/AMPCDialect.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>
#include <vector>

namespace ampc {

// kPrecisionAttr, the decision on every op precision assignment decided,
// and kAutocastAttr, the mark of compiler-inserted casts, are in
// AMPCDialect.h: the dialect verifies them, and the gradient rules insert
// casts too.

/// `op:TYPE` or `node:NAME`, as written on the command line.
struct OverrideRule {
  enum Kind { Op, Node } kind;
  std::string name;
  /// Where it came from, for messages: "--keep-fp32" or "rules.json
  /// keep_fp32[0]".
  std::string origin;
  std::string spelling() const {
    return (kind == Op ? "op:" : "node:") + name;
  }
};

/// Everything the user can change about the default lists.
struct PrecisionRules {
  /// ONNX op type → category, replacing the op's default.
  llvm::StringMap<PrecisionCategory> categories;
  /// Where each category change came from, for messages.
  llvm::StringMap<std::string> categoryOrigins;
  std::vector<OverrideRule> keepFp32;
  std::vector<OverrideRule> forceLowp;
};

/// Parses "op:Softmax,node:/encoder/MatMul_3" (already split on commas by the
/// option parser) into `rules`. `origin` names the option in messages. False
/// with `error` set on a malformed rule.
bool parseOverrideRules(llvm::ArrayRef<std::string> specs,
                        llvm::StringRef origin,
                        std::vector<OverrideRule> &rules, std::string &error);

/// Reads an --amp-rules file into `rules`:
///   {"categories": {"Softmax": "follow"},
///    "keep_fp32": ["node:/head/MatMul"], "force_lowp": ["op:Add"]}
/// Errors name the file and the offending key ("key 'categories.Softmax':
/// ..."); false with `error` set.
bool loadPrecisionRules(llvm::StringRef path, PrecisionRules &rules,
                        std::string &error);

/// The same for a rules file's text already read; `path` names it in
/// messages.
bool parsePrecisionRules(llvm::StringRef text, llvm::StringRef path,
                         PrecisionRules &rules, std::string &error);

/// The ONNX op type an op was imported from (its location's fused metadata),
/// or the op name in CamelCase for ops written in MLIR ("layer_normalization"
/// → "LayerNormalization").
std::string onnxOpType(mlir::Operation *op);

/// The ONNX node name from the op's location; empty when it has none.
std::string onnxNodeName(mlir::Operation *op);

/// Whether an `op:` rule names this op: its ONNX op type or its ampc op name,
/// compared case-insensitively and ignoring underscores.
bool ruleMatchesOpType(llvm::StringRef ruleName, mlir::Operation *op);
/// Whether a `node:` rule's name matches the ONNX node name `node`: equal,
/// or, when the name has glob characters (`*`, `?`, `[...]`, as in
/// `node:/enc/layers.*/self_attn/*`), matched as a glob.
bool ruleMatchesNodeName(llvm::StringRef ruleName, llvm::StringRef node);

/// The rule among `rules` that names `op`: a node rule before an op rule,
/// null when none does. Every rule that names the op goes into `used` (for
/// the warning about rules that name nothing).
const OverrideRule *
findOverrideRule(mlir::Operation *op, llvm::ArrayRef<OverrideRule> rules,
                 llvm::DenseSet<const OverrideRule *> &used);

/// The decision recorded on an op by ampc-assign-precision (as a
/// PrecisionDecisionAttr, `ampc.precision`).
struct PrecisionDecision {
  mlir::FloatType compute;
  PrecisionCategory category;
  std::string rule;
};
std::optional<PrecisionDecision> getPrecisionDecision(mlir::Operation *op);
void setPrecisionDecision(mlir::Operation *op,
                          const PrecisionDecision &decision);

/// Whether a cast was inserted by the compiler (not the user's ONNX Cast).
bool isAutocast(mlir::Operation *op);

/// Whether a floating-point Accumulating op sums in FP64 (an FP64 operand
/// or result) rather than FP32: ampc-assign-accumulation's rule, which
/// ampc-fold-casts also reads before the attribute is set.
bool accumulatesInF64(mlir::Operation *op);

/// Number of compiler-inserted casts in `op` (usually the module).
unsigned countAutocasts(mlir::Operation *op);

/// "f16", "bf16", "f32", "i64", ... for reports.
std::string dtypeName(mlir::Type type);

} // namespace ampc

#endif // AMPC_TRANSFORMS_PRECISION_H
