//===- Diagnostics.cpp - one-line messages for ONNX locations -------------===//

#include "ampc/Import/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {
struct Where {
  std::string file, node, opType;
};

void collect(Location loc, Where &where) {
  if (auto name = dyn_cast<NameLoc>(loc)) {
    if (where.node.empty())
      where.node = name.getName().str();
    collect(name.getChildLoc(), where);
  } else if (auto fused = dyn_cast<FusedLoc>(loc)) {
    if (auto op = dyn_cast_or_null<StringAttr>(fused.getMetadata());
        op && where.opType.empty())
      where.opType = op.str();
    for (Location l : fused.getLocations())
      collect(l, where);
  } else if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    if (where.file.empty()) {
      where.file = file.getFilename().str();
      if (file.getLine() > 0)
        where.file += ":" + std::to_string(file.getLine()) + ":" +
                      std::to_string(file.getColumn());
    }
  } else if (auto call = dyn_cast<CallSiteLoc>(loc)) {
    collect(call.getCallee(), where);
  }
}
} // namespace

std::string ampc::formatDiagnostic(Diagnostic &diag) {
  Where where;
  collect(diag.getLocation(), where);
  std::string out;
  llvm::raw_string_ostream os(out);
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error:
    os << "error: ";
    break;
  case DiagnosticSeverity::Warning:
    os << "warning: ";
    break;
  default:
    os << "note: ";
    break;
  }
  if (!where.file.empty())
    os << where.file << ": ";
  if (!where.node.empty()) {
    os << "node '" << where.node << "'";
    if (!where.opType.empty())
      os << " (" << where.opType << ")";
    os << ": ";
  }
  std::string message = diag.str();
  // Keep the message on one line whatever an op verifier put in it.
  for (char &c : message)
    if (c == '\n')
      c = ' ';
  os << message;
  return out;
}

ampc::OnnxDiagnosticHandler::OnnxDiagnosticHandler(MLIRContext *context)
    : ScopedDiagnosticHandler(context) {
  setHandler([this](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      ++errors;
    if (diag.getSeverity() != DiagnosticSeverity::Remark)
      llvm::errs() << formatDiagnostic(diag) << "\n";
    return success();
  });
}
