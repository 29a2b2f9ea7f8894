//===- PrecisionRules.cpp - overrides, --amp-rules files, decisions -------===//

#include "ampc/Support/Nesting.h"
#include "ampc/Support/RegularFile.h"
#include "ampc/Transforms/Precision.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;
using llvm::StringRef;

namespace {
/// Sets `error` to `message` and fails: the convention of docs/design.md
/// ("Errors").
bool fail(std::string &error, const llvm::Twine &message) {
  error = message.str();
  return false;
}

/// `origin` names the rule's source in reports ("--keep-fp32",
/// "rules.json keep_fp32[0]"); `where` prefixes error messages.
bool parseOneRule(StringRef spec, StringRef origin, StringRef where,
                  std::vector<ampc::OverrideRule> &rules, std::string &error) {
  spec = spec.trim();
  ampc::OverrideRule rule{ampc::OverrideRule::Op, "", origin.str()};
  if (spec.consume_front("op:"))
    rule.kind = ampc::OverrideRule::Op;
  else if (spec.consume_front("node:"))
    rule.kind = ampc::OverrideRule::Node;
  else
    return fail(error, where + ": '" + spec +
                     "' is not a rule (expected op:TYPE or node:NAME)");
  if (spec.empty())
    return fail(error, where + ": a rule needs a name after '" +
                     (rule.kind == ampc::OverrideRule::Op ? "op:" : "node:") +
                     "'");
  if (rule.kind == ampc::OverrideRule::Node &&
      spec.find_first_of("*?[") != StringRef::npos) {
    llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(spec);
    if (!glob)
      return fail(error, where + ": 'node:" + spec + "' is not a valid glob: " +
                       llvm::toString(glob.takeError()));
  }
  rule.name = spec.str();
  rules.push_back(std::move(rule));
  return true;
}

std::string categoryList() {
  return llvm::join(ampc::enumSpellings<ampc::PrecisionCategory>(), ", ");
}

/// Reads a JSON array of rule strings at `key`.
bool readRuleArray(const llvm::json::Value &value, StringRef file,
                   StringRef key, std::vector<ampc::OverrideRule> &rules,
                   std::string &error) {
  const llvm::json::Array *array = value.getAsArray();
  if (!array)
    return fail(error, file + ": key '" + key +
                     "': expected an array of \"op:TYPE\" / \"node:NAME\" "
                     "strings");
  for (auto [i, item] : llvm::enumerate(*array)) {
    std::string where = (file + ": key '" + key + "[" + llvm::Twine(i) + "]'").str();
    std::optional<StringRef> text = item.getAsString();
    if (!text)
      return fail(error, where + ": expected a string");
    std::string origin = (file + " " + key + "[" + llvm::Twine(i) + "]").str();
    if (!parseOneRule(*text, origin, where, rules, error))
      return false;
  }
  return true;
}
} // namespace

bool ampc::parseOverrideRules(llvm::ArrayRef<std::string> specs,
                              StringRef origin,
                              std::vector<OverrideRule> &rules,
                              std::string &error) {
  for (const std::string &spec : specs) {
    // Options may arrive unsplit ("op:A,node:B") from pass pipelines.
    llvm::SmallVector<StringRef> parts;
    StringRef(spec).split(parts, ',', -1, /*KeepEmpty=*/false);
    for (StringRef part : parts)
      if (!parseOneRule(part, origin, origin, rules, error))
        return false;
  }
  return true;
}

bool ampc::loadPrecisionRules(StringRef path, PrecisionRules &rules,
                              std::string &error) {
  // A rules file is a few lines: anything past 64 MiB is not one.
  std::string text, reason;
  if (!ampc::readRegularFile(path.str(), text, uint64_t(1) << 26, reason))
    return fail(error, path + ": cannot open: " + reason);
  return parsePrecisionRules(text, path, rules, error);
}

bool ampc::parsePrecisionRules(StringRef text, StringRef path,
                               PrecisionRules &rules, std::string &error) {
  // The JSON parser recurses per level: refuse deep nesting first.
  if (int64_t depth = nestingDepth(text, /*hashComments=*/false);
      depth > kMaxNesting)
    return fail(error, path + ": not valid JSON: nested " + Twine(depth) +
                     " deep (at most " + Twine(kMaxNesting) + ")");
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json)
    return fail(error, path + ": not valid JSON: " +
                     llvm::toString(json.takeError()));
  const llvm::json::Object *top = json->getAsObject();
  if (!top)
    return fail(error, path + ": expected a JSON object with keys categories, "
                            "keep_fp32, force_lowp");
  for (const auto &[key, value] : *top) {
    StringRef name = key;
    if (name == "keep_fp32") {
      if (!readRuleArray(value, path, name, rules.keepFp32, error))
        return false;
    } else if (name == "force_lowp") {
      if (!readRuleArray(value, path, name, rules.forceLowp, error))
        return false;
    } else if (name == "categories") {
      const llvm::json::Object *map = value.getAsObject();
      if (!map)
        return fail(error, path + ": key 'categories': expected an object "
                                "mapping ONNX op types to categories");
      for (const auto &[op, cat] : *map) {
        std::string where = (path + ": key 'categories." + StringRef(op) + "'").str();
        std::optional<StringRef> text = cat.getAsString();
        if (!text)
          return fail(error, where + ": expected a string (" + categoryList() +
                           ")");
        std::optional<PrecisionCategory> category =
            symbolizePrecisionCategory(*text);
        if (!category)
          return fail(error, where + ": unknown category '" + *text +
                           "' (expected " + categoryList() + ")");
        rules.categories[StringRef(op)] = *category;
        rules.categoryOrigins[StringRef(op)] =
            (path + " categories." + StringRef(op)).str();
      }
    } else {
      return fail(error, path + ": unknown key '" + name +
                       "' (expected categories, keep_fp32, force_lowp)");
    }
  }
  return true;
}

std::string ampc::onnxOpType(Operation *op) {
  // The importer's locations are NameLoc(node, fused<"OpType">[file]).
  Location loc = op->getLoc();
  while (auto name = dyn_cast<NameLoc>(loc))
    loc = name.getChildLoc();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (auto type = dyn_cast_or_null<StringAttr>(fused.getMetadata()))
      return type.str();
  std::string camel;
  bool upper = true;
  for (char c : op->getName().stripDialect()) {
    if (c == '_') {
      upper = true;
      continue;
    }
    camel += upper ? llvm::toUpper(c) : c;
    upper = false;
  }
  return camel;
}

std::string ampc::onnxNodeName(Operation *op) {
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    return name.getName().str();
  return "";
}

bool ampc::ruleMatchesNodeName(StringRef ruleName, StringRef node) {
  if (ruleName.find_first_of("*?[") == StringRef::npos)
    return ruleName == node;
  llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(ruleName);
  if (!glob) {
    llvm::consumeError(glob.takeError()); // refused when parsed
    return false;
  }
  return glob->match(node);
}

bool ampc::ruleMatchesOpType(StringRef ruleName, Operation *op) {
  auto normalize = [](StringRef s) {
    std::string out;
    for (char c : s)
      if (c != '_')
        out += llvm::toLower(c);
    return out;
  };
  std::string want = normalize(ruleName);
  return want == normalize(onnxOpType(op)) ||
         want == normalize(op->getName().stripDialect());
}

std::optional<ampc::PrecisionDecision>
ampc::getPrecisionDecision(Operation *op) {
  auto decision = op->getAttrOfType<PrecisionDecisionAttr>(kPrecisionAttr);
  if (!decision)
    return std::nullopt;
  return PrecisionDecision{decision.getCompute(), decision.getCategory(),
                           decision.getRule().str()};
}

void ampc::setPrecisionDecision(Operation *op,
                                const PrecisionDecision &decision) {
  op->setAttr(kPrecisionAttr,
              PrecisionDecisionAttr::get(op->getContext(), decision.category,
                                         decision.compute, decision.rule));
}

bool ampc::isAutocast(Operation *op) {
  return isa<CastOp>(op) && op->hasAttr(kAutocastAttr);
}

unsigned ampc::countAutocasts(Operation *root) {
  unsigned n = 0;
  root->walk([&](CastOp cast) { n += isAutocast(cast); });
  return n;
}

std::string ampc::dtypeName(Type type) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    type = shaped.getElementType();
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

const ampc::OverrideRule *
ampc::findOverrideRule(mlir::Operation *op,
                       llvm::ArrayRef<OverrideRule> rules,
                       llvm::DenseSet<const OverrideRule *> &used) {
  const OverrideRule *byNode = nullptr, *byOp = nullptr;
  std::string node = ampc::onnxNodeName(op);
  for (const OverrideRule &rule : rules) {
    bool matches = rule.kind == OverrideRule::Node
                       ? ampc::ruleMatchesNodeName(rule.name, node)
                       : ampc::ruleMatchesOpType(rule.name, op);
    if (!matches)
      continue;
    used.insert(&rule);
    (rule.kind == OverrideRule::Node ? byNode : byOp) = &rule;
  }
  return byNode ? byNode : byOp;
}
