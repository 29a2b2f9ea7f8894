//===- Diagnostics.h - one-line messages for ONNX locations -----*- C++ -*-===//

#ifndef AMPC_IMPORT_DIAGNOSTICS_H
#define AMPC_IMPORT_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"

#include <string>

namespace ampc {

/// Formats a diagnostic as one line, "error: FILE: node 'NAME' (OpType):
/// MESSAGE", from the locations the importer attaches (NameLoc of the node
/// around fused<"OpType">[FileLineColLoc of the model]). Notes are dropped.
std::string formatDiagnostic(mlir::Diagnostic &diag);

/// Prints every diagnostic of `context` to stderr with formatDiagnostic while
/// alive; counts errors.
class OnnxDiagnosticHandler : public mlir::ScopedDiagnosticHandler {
public:
  explicit OnnxDiagnosticHandler(mlir::MLIRContext *context);
  unsigned numErrors() const { return errors; }

private:
  unsigned errors = 0;
};

} // namespace ampc

#endif // AMPC_IMPORT_DIAGNOSTICS_H
