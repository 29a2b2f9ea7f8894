//===- OptionsBinder.h - one declaration per option, several front ends -===//
//
// IREE's OptionsBinder pattern (compiler/src/iree/compiler/Utils/
// OptionUtils.h): a settings struct declares each of its options once, in
// `bindOptions(OptionsBinder &)` (name, field, help, value name, allowed
// values; the field's initializer is the default), and the binder turns
// that one declaration into
//   - a global llvm::cl option of the `ampc` command line (commandLine),
//   - an option of a pass pipeline, `ampc-opt --ampc-pipeline="..."`
//     (passPipeline),
//   - a description of every option, for `ampc --list-options=json` (read
//     by the Python module) and for checking a value against its allowed
//     values (describe).
// After parsing, apply() copies what was given into the bound fields
// (docs/design.md, Options).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_SUPPORT_OPTIONSBINDER_H
#define AMPC_SUPPORT_OPTIONSBINDER_H

#include "ampc/Support/Choices.h"

#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ampc {

/// The heading an option is listed under in `ampc --help`.
enum class OptionGroup { General, Loss, Training };
constexpr size_t kNumOptionGroups = 3;

/// What one option says about itself besides its name, type and default.
struct OptionSpec {
  explicit OptionSpec(std::string help) : help(std::move(help)) {}
  /// The value's name in --help (`--channels-last=<on|off|auto>`).
  OptionSpec &valueName(std::string name) {
    value = std::move(name);
    return *this;
  }
  OptionSpec &in(OptionGroup g) {
    group = g;
    return *this;
  }
  /// The words a string option takes; other words are an error (checked
  /// after parsing, with the driver's message, by checkChoices).
  OptionSpec &oneOf(std::vector<std::string> words) {
    choices = std::move(words);
    return *this;
  }
  /// Words taken besides `choices` but not listed (old spellings).
  OptionSpec &alsoAccepts(std::vector<std::string> words) {
    aliases = std::move(words);
    return *this;
  }
  /// A list option of the command line that takes A,B,C as well as
  /// repeated flags (a pipeline's list options always do).
  OptionSpec &commaSeparated() {
    splitCommas = true;
    return *this;
  }
  /// Only an option of `--ampc-pipeline`: the `ampc` driver sets the field
  /// from one of its own options (--target picks the compiler as well).
  OptionSpec &pipelineOnly() {
    onCommandLine = false;
    return *this;
  }
  /// Appended to the help of the pass pipeline's option (what differs in
  /// `--ampc-pipeline="..."`'s syntax).
  OptionSpec &inPipeline(std::string note) {
    pipelineNote = std::move(note);
    return *this;
  }

  std::string help, value, pipelineNote;
  OptionGroup group = OptionGroup::General;
  std::vector<std::string> choices, aliases;
  bool splitCommas = false;
  bool onCommandLine = true;
};

/// One bound option as `describe` records it.
struct OptionInfo {
  std::string name;
  /// bool, int, float or string.
  std::string type;
  bool list = false;
  /// No default: unset unless given (the field is a std::optional).
  bool optional = false;
  /// The default as JSON: true, 1e-3, "fp16", [] or null.
  std::string defaultJson;
  OptionSpec spec;
  /// The field's current value, for a string option.
  std::function<std::string()> stringValue;
  /// The field's current values (none when unset), for a float option.
  std::function<std::vector<double>()> floatValues;
};

class OptionsBinder {
public:
  enum class Kind { CommandLine, PassPipeline, Describe };

  /// Global options of the program's command line, in `categories`
  /// (indexed by OptionGroup). Bind before cl::ParseCommandLineOptions.
  static OptionsBinder
  commandLine(std::array<llvm::cl::OptionCategory *, kNumOptionGroups> cats) {
    OptionsBinder binder(Kind::CommandLine);
    binder.categories = cats;
    return binder;
  }
  /// Options of a pass pipeline's option struct (its parseFromString).
  static OptionsBinder passPipeline(mlir::detail::PassOptions &parent) {
    OptionsBinder binder(Kind::PassPipeline);
    binder.parent = &parent;
    return binder;
  }
  /// Records the options only (options()).
  static OptionsBinder describe() { return OptionsBinder(Kind::Describe); }

  OptionsBinder(OptionsBinder &&) = default;
  OptionsBinder &operator=(OptionsBinder &&) = default;

  /// A scalar option: bool, int64_t, double or std::string.
  template <typename T>
  void opt(llvm::StringRef name, T &field, OptionSpec spec) {
    record<T>(name, spec, /*list=*/false, /*optional=*/false,
              jsonOf(field), stringGetter(field));
    if constexpr (std::is_floating_point_v<T>)
      infos.back().floatValues = [&field] {
        return std::vector<double>{double(field)};
      };
    if (kind == Kind::CommandLine && spec.onCommandLine) {
      auto *o = own(new llvm::cl::opt<T>(keep(name), llvm::cl::init(field),
                                         llvm::cl::cat(*cat(spec))));
      describeOption(*o, spec);
      appliers.push_back([o, &field] { field = o->getValue(); });
    } else if (kind == Kind::PassPipeline) {
      auto *o = own(new mlir::detail::PassOptions::Option<T>(
          *parent, keep(name), llvm::cl::init(field)));
      describeOption(*o, spec);
      appliers.push_back([o, &field] { field = o->getValue(); });
    }
  }

  /// An option without a default: the field stays unset unless given.
  template <typename T>
  void opt(llvm::StringRef name, std::optional<T> &field, OptionSpec spec) {
    record<T>(name, spec, /*list=*/false, /*optional=*/true, "null", {});
    if constexpr (std::is_floating_point_v<T>)
      infos.back().floatValues = [&field] {
        return field ? std::vector<double>{double(*field)}
                     : std::vector<double>{};
      };
    if (kind == Kind::CommandLine && spec.onCommandLine) {
      auto *o = own(new llvm::cl::opt<T>(keep(name),
                                         llvm::cl::cat(*cat(spec))));
      describeOption(*o, spec);
      appliers.push_back([o, &field] {
        if (o->getNumOccurrences())
          field = o->getValue();
      });
    } else if (kind == Kind::PassPipeline) {
      auto *o = own(
          new mlir::detail::PassOptions::Option<T>(*parent, keep(name)));
      describeOption(*o, spec);
      appliers.push_back([o, &field] {
        if (o->hasValue())
          field = o->getValue();
      });
    }
  }

  /// A list option (repeatable; see OptionSpec::commaSeparated).
  template <typename T>
  void list(llvm::StringRef name, std::vector<T> &field, OptionSpec spec) {
    record<T>(name, spec, /*list=*/true, /*optional=*/false, "[]", {});
    if constexpr (std::is_floating_point_v<T>)
      infos.back().floatValues = [&field] {
        return std::vector<double>(field.begin(), field.end());
      };
    if (kind == Kind::CommandLine && spec.onCommandLine) {
      auto *o = own(new llvm::cl::list<T>(keep(name),
                                          llvm::cl::cat(*cat(spec))));
      if (spec.splitCommas)
        o->setMiscFlag(llvm::cl::CommaSeparated);
      describeOption(*o, spec);
      appliers.push_back(
          [o, &field] { field.assign(o->begin(), o->end()); });
    } else if (kind == Kind::PassPipeline) {
      auto *o = own(
          new mlir::detail::PassOptions::ListOption<T>(*parent, keep(name)));
      describeOption(*o, spec);
      appliers.push_back(
          [o, &field] { field.assign(o->begin(), o->end()); });
    }
  }

  /// A string option that takes one of `values` (word, help). On the
  /// command line it lists them in --help as an enum option does
  /// (`--mode=<value>` then `=train - ...`); a pipeline option takes the
  /// word as a string, checked by checkChoices.
  void choice(llvm::StringRef name, std::string &field,
              std::vector<std::pair<std::string, std::string>> values,
              OptionSpec spec) {
    for (auto &value : values)
      spec.choices.push_back(value.first);
    record<std::string>(name, spec, /*list=*/false, /*optional=*/false,
                        jsonOf(field), stringGetter(field));
    if (kind == Kind::CommandLine && spec.onCommandLine) {
      unsigned initial = 0;
      for (auto [i, value] : llvm::enumerate(values))
        if (value.first == field)
          initial = i;
      auto *o = own(new llvm::cl::opt<ChoiceIndex>(
          keep(name), llvm::cl::init(ChoiceIndex(initial)),
          llvm::cl::cat(*cat(spec))));
      describeOption(*o, spec);
      std::vector<std::string> words;
      for (auto [i, value] : llvm::enumerate(values)) {
        o->getParser().addLiteralOption(keep(value.first), ChoiceIndex(i),
                                        keep(value.second));
        words.push_back(value.first);
      }
      appliers.push_back([o, &field, words] {
        field = words[static_cast<unsigned>(o->getValue())];
      });
    } else if (kind == Kind::PassPipeline) {
      if (spec.value.empty())
        spec.value = llvm::join(spec.choices, "|");
      opt(name, field, spec);
      infos.pop_back(); // opt recorded it again
    }
  }

  /// Copies what was parsed into the bound fields.
  void apply() const {
    for (const std::function<void()> &copy : appliers)
      copy();
  }

  /// Every bound option, in declaration order (all kinds record them).
  llvm::ArrayRef<OptionInfo> options() const { return infos; }

  /// False with "PREFIXNAME must be A, B or C, got 'X'" in `error` for the
  /// first string option whose value is not one of its words.
  bool checkChoices(llvm::StringRef prefix, std::string &error) const {
    for (const OptionInfo &info : infos) {
      if (info.spec.choices.empty() || !info.stringValue)
        continue;
      std::string value = info.stringValue();
      if (llvm::is_contained(info.spec.choices, value) ||
          llvm::is_contained(info.spec.aliases, value))
        continue;
      error = (prefix + info.name + " must be " +
               joinChoices(info.spec.choices) + ", got '" + value + "'")
                  .str();
      return false;
    }
    return true;
  }

private:
  enum class ChoiceIndex : unsigned {};

  explicit OptionsBinder(Kind kind) : kind(kind) {}

  template <typename T>
  static constexpr const char *typeName() {
    if constexpr (std::is_same_v<T, bool>)
      return "bool";
    else if constexpr (std::is_integral_v<T>)
      return "int";
    else if constexpr (std::is_floating_point_v<T>)
      return "float";
    else
      return "string";
  }

  template <typename T>
  static std::string jsonOf(const T &value) {
    if constexpr (std::is_same_v<T, bool>)
      return value ? "true" : "false";
    else if constexpr (std::is_integral_v<T>)
      return std::to_string(value);
    else if constexpr (std::is_floating_point_v<T>) {
      // The shortest decimal that reads back as `value` (1e-3, not
      // 0.0010000000000000000208).
      char text[32];
      for (int digits = 1; digits <= 17; ++digits) {
        std::snprintf(text, sizeof(text), "%.*g", digits, double(value));
        if (std::strtod(text, nullptr) == double(value))
          break;
      }
      return text;
    } else {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << '"';
      os.write_escaped(value);
      os << '"';
      return text;
    }
  }

  template <typename T>
  static std::function<std::string()> stringGetter(T &field) {
    if constexpr (std::is_same_v<T, std::string>)
      return [&field] { return field; };
    else
      return {};
  }

  template <typename T>
  void record(llvm::StringRef name, const OptionSpec &spec, bool list,
              bool optional, std::string defaultJson,
              std::function<std::string()> stringValue) {
    infos.push_back({name.str(), typeName<T>(), list, optional,
                     std::move(defaultJson), spec, std::move(stringValue),
                     {}});
  }

  /// The binder owns the strings an llvm::cl::Option refers to.
  llvm::StringRef keep(llvm::StringRef text) {
    return strings.emplace_back(text.str());
  }

  template <typename O>
  O *own(O *option) {
    options_.emplace_back(option);
    return option;
  }

  void describeOption(llvm::cl::Option &option, const OptionSpec &spec) {
    option.setDescription(keep(kind == Kind::PassPipeline
                                   ? spec.help + spec.pipelineNote
                                   : spec.help));
    if (!spec.value.empty())
      option.setValueStr(keep(spec.value));
  }

  llvm::cl::OptionCategory *cat(const OptionSpec &spec) const {
    return categories[static_cast<size_t>(spec.group)];
  }

  Kind kind;
  std::array<llvm::cl::OptionCategory *, kNumOptionGroups> categories{};
  mlir::detail::PassOptions *parent = nullptr;
  std::deque<std::string> strings;
  std::vector<std::unique_ptr<llvm::cl::Option>> options_;
  std::vector<std::function<void()>> appliers;
  std::vector<OptionInfo> infos;
};

} // namespace ampc

#endif // AMPC_SUPPORT_OPTIONSBINDER_H
