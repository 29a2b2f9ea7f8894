//===- EnumOption.h - pass options typed by the dialect's enums -*- C++ -*-===//
//
// A pass option whose values are the cases of an enum of AMPCOps.td
// (`Option<"kind", "kind", "ampc::OptimizerKind", ...>` in Passes.td) is
// parsed by the enum's own symbolize/stringify, so the words an option
// accepts are spelt once, in the ODS enum, and never listed again in
// `cl::values`.
//
// An unknown word is not refused while the option string is parsed: LLVM
// would print "for the --kind option: Cannot find option named 'lion'!"
// and MLIR an empty "error:" line after it. The option keeps the word and
// an out-of-range value instead, and the pass reports it with
// checkEnumOption as one line that says what was expected:
// "ampc-attach-optimizer: kind must be sgd, adam, adamw or none, got 'lion'".
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TRANSFORMS_ENUMOPTION_H
#define AMPC_TRANSFORMS_ENUMOPTION_H

#include "ampc/Dialect/AMPCEnums.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"

#include <limits>
#include <type_traits>

namespace ampc {

/// The value an enum option holds after an unknown word: no case of `E`.
template <typename E>
constexpr E invalidEnumValue() {
  return static_cast<E>(std::numeric_limits<std::underlying_type_t<E>>::max());
}

/// The parser of an option of enum type `E` (see the file comment).
template <typename E>
class EnumOptionParser : public llvm::cl::basic_parser<E> {
public:
  using llvm::cl::basic_parser<E>::basic_parser;

  bool parse(llvm::cl::Option &, llvm::StringRef, llvm::StringRef arg,
             E &value) {
    std::optional<E> parsed = symbolizeEnum<E>(arg);
    value = parsed ? *parsed : invalidEnumValue<E>();
    unknownWord = parsed ? "" : arg.str();
    if (!parsed)
      lastUnknownWord() = arg.str();
    return false;
  }

  /// The last unknown word any option of `E` was given: a pass declared on
  /// functions runs as copies, which copy the value but not the parser.
  static std::string &lastUnknownWord() {
    static std::string word;
    return word;
  }

  /// "sgd|adam|adamw|none" in --help.
  llvm::StringRef getValueName() const override {
    static const std::string name = llvm::join(enumSpellings<E>(), "|");
    return name;
  }

  void printOptionDiff(const llvm::cl::Option &option, E value,
                       const llvm::cl::OptionValue<E> &defaultValue,
                       size_t globalWidth) const {
    this->printOptionName(option, globalWidth);
    llvm::outs() << "= " << stringifyEnum(value) << " (default: "
                 << (defaultValue.hasValue()
                         ? stringifyEnum(defaultValue.getValue())
                         : llvm::StringRef("*no default*"))
                 << ")\n";
  }

  /// The word the option was last given when it names no case of `E`.
  std::string unknownWord;
};

/// Fails with "PASS: NAME must be A, B or C, got 'WORD'" at `loc` when the
/// enum option `option` was given a word its enum does not have.
template <typename OptionT>
mlir::LogicalResult checkEnumOption(OptionT &option, mlir::Location loc,
                                    llvm::StringRef pass) {
  using E = std::decay_t<decltype(option.getValue())>;
  if (!stringifyEnum(option.getValue()).empty())
    return mlir::success();
  return mlir::emitError(loc)
         << pass << ": " << option.ArgStr << " must be " << enumChoices<E>()
         << ", got '"
         << (option.getParser().unknownWord.empty()
                 ? EnumOptionParser<E>::lastUnknownWord()
                 : option.getParser().unknownWord)
         << "'";
}

} // namespace ampc

/// Enum pass options parse with ampc::EnumOptionParser (MLIR's pass options
/// use llvm::cl::parser<T> for a type whose parser is not a
/// generic_parser_base).
#define AMPC_ENUM_OPTION_PARSER(E)                                             \
  namespace llvm::cl {                                                         \
  template <>                                                                  \
  class parser<E> : public ampc::EnumOptionParser<E> {                         \
  public:                                                                      \
    using ampc::EnumOptionParser<E>::EnumOptionParser;                         \
  };                                                                           \
  }

AMPC_ENUM_OPTION_PARSER(ampc::LossFunction)
AMPC_ENUM_OPTION_PARSER(ampc::LowPrecisionType)
AMPC_ENUM_OPTION_PARSER(ampc::Propagation)
AMPC_ENUM_OPTION_PARSER(ampc::LossScalingMode)
AMPC_ENUM_OPTION_PARSER(ampc::OptimizerKind)
AMPC_ENUM_OPTION_PARSER(ampc::KernelTarget)
#undef AMPC_ENUM_OPTION_PARSER

#endif // AMPC_TRANSFORMS_ENUMOPTION_H
