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

/// `text` with control characters escaped (\n, \t, \xNN), so a node name
/// from a hostile model cannot break the one-line message or send terminal
/// escape sequences.
static std::string escapeControls(llvm::StringRef text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      static const char digits[] = "0123456789abcdef";
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 15];
    } else
      out += static_cast<char>(c);
  }
  return out;
}

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
    os << escapeControls(where.file) << ": ";
  if (!where.node.empty()) {
    os << "node '" << escapeControls(where.node) << "'";
    if (!where.opType.empty())
      os << " (" << escapeControls(where.opType) << ")";
    os << ": ";
  }
  // One line whatever an op verifier or a model's names put in the message.
  std::string message = diag.str();
  for (char &c : message)
    if (c == '\n')
      c = ' ';
  os << escapeControls(message);
  return out;
}

ampc::OnnxDiagnosticHandler::OnnxDiagnosticHandler(MLIRContext *context)
    : ScopedDiagnosticHandler(context) {
  setHandler([this](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      ++errors;
    llvm::errs() << formatDiagnostic(diag) << "\n";
    return success();
  });
}
