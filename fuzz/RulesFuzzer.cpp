//===- RulesFuzzer.cpp - libFuzzer target: --amp-rules files --------------===//
//
// One input is one rules file's text. It is either read or refused with an
// error; a crash or sanitizer finding stops the run.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Precision.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ampc::PrecisionRules rules;
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  std::string error;
  (void)ampc::parsePrecisionRules(text, "fuzz.json", rules, error);
  return 0;
}
