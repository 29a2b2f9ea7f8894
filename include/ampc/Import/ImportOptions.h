//===- ImportOptions.h - how an ONNX import binds its inputs ----*- C++ -*-===//
//
// The options an import takes (symbolic dimensions bound by --shape and
// --batch, inputs bound to constants by --bind-input, the tensor size
// limit) and the parsing of the command-line bindings into them. Apart
// from the importer, which reads models with libonnx: a tool or a test
// parses bindings without reading one.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_IMPORT_IMPORTOPTIONS_H
#define AMPC_IMPORT_IMPORTOPTIONS_H

#include "ampc/Dialect/TensorSize.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace ampc {

/// How symbolic input dimensions are bound (`--shape`, `--batch`).
struct ImportOptions {
  /// Full shapes of named graph inputs.
  llvm::StringMap<llvm::SmallVector<int64_t>> shapes;
  /// Binds a symbolic leading dimension of every graph input.
  std::optional<int64_t> batch;
  /// Graph inputs replaced by constants read from serialized TensorProto
  /// files (`--bind-input NAME=FILE.pb`): a static-shape compiler needs the
  /// values of inputs that feed a shape, axes or Range operand.
  llvm::StringMap<std::string> constantInputs;
  /// Initializers an EVAL-mode torch export merged (MergedInitializers.h).
  /// AsExported imports the graph as it is (for inference equal values are
  /// equal). For training, Untie gives each its own parameter with a note,
  /// KeepTied trains them as one with a warning; both also note the
  /// convolutions a BatchNormalization was folded into.
  enum class MergedInitializers { AsExported, Untie, KeepTied };
  MergedInitializers mergedInitializers = MergedInitializers::AsExported;
  /// The largest tensor (bytes) a node, input or initializer may make
  /// (`--max-tensor-bytes`); larger is an error naming the node.
  int64_t maxTensorBytes = kDefaultMaxTensorBytes;
};

/// Parses one `--shape` value, "NAME=2x3x4" (a scalar is "NAME="), into
/// `options`. On failure returns false and sets `error`.
bool parseShapeBinding(llvm::StringRef spec, ImportOptions &options,
                       std::string &error);

/// Parses one `--bind-input` value, "NAME=FILE.pb", into `options`.
bool parseInputBinding(llvm::StringRef spec, ImportOptions &options,
                       std::string &error);

} // namespace ampc

#endif // AMPC_IMPORT_IMPORTOPTIONS_H
