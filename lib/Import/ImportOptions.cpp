//===- ImportOptions.cpp - parsing --shape and --bind-input ---------------===//
//
// The command-line bindings of an import (ImportOptions.h), parsed apart
// from the importer.
//
//===----------------------------------------------------------------------===//

#include "ampc/Import/ImportOptions.h"

using llvm::SmallVector;
using llvm::StringRef;

bool ampc::parseInputBinding(StringRef spec, ImportOptions &options,
                             std::string &error) {
  auto [name, path] = spec.split('=');
  if (name.empty() || path.empty()) {
    error = "--bind-input expects NAME=FILE.pb, got '" + spec.str() + "'";
    return false;
  }
  options.constantInputs[name] = path.str();
  return true;
}

bool ampc::parseShapeBinding(StringRef spec, ImportOptions &options,
                             std::string &error) {
  auto [name, dims] = spec.split('=');
  if (name.empty() || !spec.contains('=')) {
    error = "--shape expects NAME=DxDx..., got '" + spec.str() + "'";
    return false;
  }
  SmallVector<int64_t> shape;
  if (!dims.empty()) {
    SmallVector<StringRef> parts;
    dims.split(parts, 'x');
    for (StringRef p : parts) {
      int64_t d;
      if (p.getAsInteger(10, d) || d < 0) {
        error = "--shape " + name.str() + ": '" + p.str() +
                "' is not a dimension (expected NAME=DxDx..., e.g. x=32x784)";
        return false;
      }
      shape.push_back(d);
    }
  }
  options.shapes[name] = shape;
  return true;
}
