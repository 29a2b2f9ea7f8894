//===- Nesting.h - nesting depth of a text, before a recursive parser -*- C++ -*-===//
//
// The ONNX text parser and LLVM's JSON parser recurse once per nesting
// level, so 100,000 nested brackets overflow the stack. Their input is
// measured first and refused past kMaxNesting: no real model or rules file
// nests more than a few levels.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_SUPPORT_NESTING_H
#define AMPC_SUPPORT_NESTING_H

#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <cstdint>

namespace ampc {

/// Nesting deeper than this is refused before parsing.
constexpr int64_t kMaxNesting = 256;

/// The deepest nesting of ( [ { < in `text`, outside "strings" (with \
/// escapes) and, when `hashComments`, outside # comments to the line's end.
inline int64_t nestingDepth(llvm::StringRef text, bool hashComments) {
  int64_t depth = 0, deepest = 0;
  bool inString = false, inComment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inComment) {
      inComment = c != '\n';
      continue;
    }
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '#' && hashComments)
      inComment = true;
    else if (c == '(' || c == '[' || c == '{' || c == '<')
      deepest = std::max(deepest, ++depth);
    else if (c == ')' || c == ']' || c == '}' || c == '>')
      depth = std::max<int64_t>(0, depth - 1);
  }
  return deepest;
}

} // namespace ampc

#endif // AMPC_SUPPORT_NESTING_H
