//===- OnnxImporter.cpp - ONNX models into the ampc dialect ---------------===//
//
// One rule per ONNX op type (kRules, at the end) says which opsets and
// attributes it accepts and how it builds ampc ops. Ops are built without
// result types and asked for them (InferTypeOpAdaptor), verified at once and
// folded when their operands are constant, so shape subgraphs of exported
// models collapse to constants as they are read and a Reshape target is
// known when the Reshape is reached.
//
//===----------------------------------------------------------------------===//

#include "ampc/Import/OnnxImporter.h"
#include "ampc/Import/MergedInitializers.h"
#include "ampc/Import/OnnxModel.h"
#include "ampc/Support/Nesting.h"
#include "ampc/Support/RegularFile.h"

#include "ImportRules.h"
#include "TensorConversion.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/TensorSize.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/defs/parser.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <queue>
#include <set>
#include <exception>
#include <limits>

using namespace mlir;
using ampc::detail::convertTensor;
using ampc::detail::elementTypeFromOnnx;
using ampc::detail::onnxTypeName;
using namespace ampc::detail;

namespace {

using RuleFn = FailureOr<Outputs> (*)(NodeContext &);

/// Attribute kinds as ONNX's AttributeProto names them.
using AttrKind = ampc::OnnxAttributeKind;

struct AttrSpec {
  const char *name;
  AttrKind kind;
};

struct OpRule {
  const char *opType;
  /// The ampc op that computes it (docs/ops.md, `ampc --list-ops=table`).
  const char *ampcOp;
  int64_t minOpset;
  int minInputs, maxInputs;
  int maxOutputs;
  std::vector<AttrSpec> attrs;
  RuleFn build;
  /// Inputs whose values decide a shape or an attribute: they must be
  /// constants at import (a graph input there needs --bind-input).
  std::vector<int> compileTimeInputs = {};
};

const std::vector<OpRule> &rules();

/// The importer's rule for a default-domain op type, or null.
const OpRule *ruleFor(StringRef opType) {
  for (const OpRule &r : rules())
    if (opType == r.opType)
      return &r;
  return nullptr;
}

} // namespace

// The importer is NodeContext's (ImportRules.h), so it shares its namespace.
namespace ampc::detail {

class Importer final : public ImportContext {
public:
  Importer(MLIRContext *ctx, const onnx::ModelProto &model, StringRef file,
           StringRef baseDir, const ampc::ImportOptions &options)
      : ctx(ctx), b(ctx), model(model), file(file.str()),
        baseDir(baseDir.str()), options(options),
        fileLoc(FileLineColLoc::get(ctx, file, 0, 0)) {}

  OwningOpRef<ModuleOp> run();

  MLIRContext *ctx;
  OpBuilder b;
  int64_t maxTensorBytes() const override { return options.maxTensorBytes; }

private:
  LogicalResult error(const Twine &message) {
    emitError(fileLoc) << message;
    return failure();
  }
  /// NameLoc(node name) around fused<"OpType">[file]: messages name the
  /// file, the node and its ONNX op. Unnamed nodes are called OpType_index.
  Location nodeLoc(const onnx::NodeProto &node, size_t index) {
    return NameLoc::get(
        b.getStringAttr(ampc::onnxNodeName(node, index)),
        FusedLoc::get(ctx, {fileLoc}, b.getStringAttr(node.op_type())));
  }

  LogicalResult checkOpset();
  LogicalResult checkSupportedOps();
  LogicalResult declareInitializers();
  FailureOr<RankedTensorType> inputType(const onnx::ValueInfoProto &info);
  LogicalResult buildSignature();
  LogicalResult bindConstantInput(const onnx::ValueInfoProto &info,
                                  StringRef path);
  FailureOr<std::vector<size_t>> topologicalOrder();
  Value lookup(const std::string &name);
  LogicalResult importNode(const onnx::NodeProto &node, size_t index);
  LogicalResult checkOutputs(SmallVectorImpl<Value> &results);
  LogicalResult checkInitializerInput(const onnx::ValueInfoProto &info,
                                      const onnx::TensorProto &init);

  const onnx::ModelProto &model;
  std::string file, baseDir;
  const ampc::ImportOptions &options;
  Location fileLoc;
  int64_t opset = 0;

  ModuleOp module;
  func::FuncOp func;
  llvm::StringMap<Value> values;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<DenseElementsAttr> constantInitializers;
  // The ampc.parameter of each float initializer (module.lookupSymbol is a
  // linear scan, once per initializer).
  llvm::StringMap<ampc::ParameterOp> parameters;
  /// Parameter loads and bound inputs open the body in order of first use.
  Operation *prologueEnd = nullptr;
  void setPrologueInsertionPoint() {
    if (prologueEnd)
      b.setInsertionPointAfter(prologueEnd);
    else
      b.setInsertionPointToStart(&func.getBody().front());
  }
};

/// Why ONNX's own `Attention` op (opset 23) is not imported (issue 38;
/// docs/design.md): the ONNX library ampc is built with, which reads and
/// checks every model (shape inference, version conversion), predates it.
static std::string attentionRefusal() {
  const auto &ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = ranges.find("");
  int known = it == ranges.end() ? 0 : it->second.second;
  bool schema = onnx::OpSchemaRegistry::Schema("Attention", 23, "") != nullptr;
  return ("ONNX's Attention op (opset 23) is not imported: the ONNX library "
          "ampc is built with knows opsets 1 to " + Twine(known) +
          (schema ? "" : " and has no Attention schema") +
          ", so it cannot check the node; export the attention as MatMul, "
          "Softmax and MatMul (torch at opset 17), which ampc fuses")
      .str();
}

static bool isOnnxAttention(const onnx::NodeProto &node) {
  return (node.domain().empty() || node.domain() == "ai.onnx") &&
         node.op_type() == "Attention";
}

//===----------------------------------------------------------------------===//
// Model-level checks and the signature
//===----------------------------------------------------------------------===//

LogicalResult Importer::checkOpset() {
  // The IR version says how to read the rest; 0 is a model that never set it.
  if (model.ir_version() < 1 || model.ir_version() > ampc::kMaxOnnxIrVersion)
    return error("ir_version " + Twine(model.ir_version()) +
                 (model.ir_version() == 0 ? " (unset)" : "") +
                 " is not an ONNX IR version ampc reads (1 to " +
                 Twine(ampc::kMaxOnnxIrVersion) + ")");
  bool found = false;
  llvm::StringMap<int64_t> domains;
  for (const auto &entry : model.opset_import()) {
    bool isDefault = entry.domain().empty() || entry.domain() == "ai.onnx";
    StringRef domain = isDefault ? StringRef("ai.onnx") : StringRef(entry.domain());
    auto [it, inserted] = domains.try_emplace(domain, entry.version());
    if (!inserted)
      return error("opset_import names domain '" + domain + "' twice (" +
                   Twine(it->second) + " and " + Twine(entry.version()) + ")");
    if (isDefault) {
      opset = entry.version();
      found = true;
    }
  }
  if (!found)
    return error("model imports no default-domain ('ai.onnx') opset");
  if (opset > ampc::kMaxOnnxOpset) {
    // An Attention node (opset 23) is the reason a model is that new:
    // say so at the node.
    const onnx::GraphProto &graph = model.graph();
    for (int i = 0; i < graph.node_size(); ++i)
      if (isOnnxAttention(graph.node(i))) {
        emitError(nodeLoc(graph.node(i), i)) << attentionRefusal();
        return failure();
      }
  }
  if (opset < 1 || opset > ampc::kMaxOnnxOpset)
    return error("unsupported opset " + Twine(opset) +
                 " (ampc imports default-domain opsets 1 to " +
                 Twine(ampc::kMaxOnnxOpset) + ")");
  return success();
}

LogicalResult Importer::declareInitializers() {
  const onnx::GraphProto &graph = model.graph();
  if (graph.sparse_initializer_size())
    return error("sparse initializer '" +
                 graph.sparse_initializer(0).values().name() +
                 "' is not supported");
  b.setInsertionPointToStart(module.getBody());
  llvm::StringSet<> symbols;
  for (const onnx::TensorProto &t : graph.initializer()) {
    if (t.name().empty())
      return error("an initializer has no name");
    if (!initializers.try_emplace(t.name(), &t).second)
      return error("initializer '" + t.name() + "' is defined twice");
    std::string message;
    DenseElementsAttr value = convertTensor(ctx, t, baseDir, options.maxTensorBytes, message);
    if (!value)
      return error(message);
    // Float initializers are the trainable parameters (FP32 masters once
    // precision assignment runs); the rest are constants.
    if (isa<FloatType>(value.getElementType()))
      parameters[t.name()] = ampc::ParameterOp::create(
          b, NameLoc::get(b.getStringAttr(t.name()), fileLoc), t.name(),
          cast<RankedTensorType>(value.getType()), cast<ElementsAttr>(value));
    else
      constantInitializers[t.name()] = value;
  }
  return success();
}

FailureOr<RankedTensorType>
Importer::inputType(const onnx::ValueInfoProto &info) {
  const std::string &name = info.name();
  if (!info.type().has_tensor_type())
    return error("input '" + name +
                 "' is not a tensor (sequences, maps and optionals are not "
                 "supported)");
  const auto &tt = info.type().tensor_type();
  Type element = elementTypeFromOnnx(ctx, tt.elem_type());
  if (!element)
    {
      (void)error("input '" + name + "' has unsupported element type " +
                 onnxTypeName(tt.elem_type()));
      return failure();
    }
  auto bound = options.shapes.find(name);
  if (bound != options.shapes.end()) {
    ArrayRef<int64_t> dims = bound->second;
    if (tt.has_shape()) {
      if (tt.shape().dim_size() != static_cast<int>(dims.size()))
        {
      (void)error("--shape " + name + ": model declares rank " +
                     Twine(tt.shape().dim_size()) + ", got " +
                     formatDims(dims));
      return failure();
    }
      for (int i = 0; i < tt.shape().dim_size(); ++i)
        if (tt.shape().dim(i).has_dim_value() &&
            tt.shape().dim(i).dim_value() != dims[i])
          {
      (void)error("--shape " + name + ": dim " + Twine(i) + " is " +
                       Twine(tt.shape().dim(i).dim_value()) +
                       " in the model, got " + Twine(dims[i]));
      return failure();
    }
    }
    return RankedTensorType::get(dims, element);
  }
  if (!tt.has_shape())
    return error("input '" + name +
                 "' has no declared shape; give it with --shape " + name +
                 "=DxD...");
  SmallVector<int64_t> dims;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto &dim = tt.shape().dim(i);
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      dims.push_back(dim.dim_value());
      continue;
    }
    if (i == 0 && options.batch) {
      dims.push_back(*options.batch);
      continue;
    }
    std::string symbol = dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : "";
    return error("input '" + name + "' dim " + Twine(i) + symbol +
                 " is symbolic; bind it with --shape " + name +
                 "=DxD... or --batch N");
  }
  return RankedTensorType::get(dims, element);
}

LogicalResult Importer::buildSignature() {
  const onnx::GraphProto &graph = model.graph();
  llvm::StringSet<> inputNames;
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  SmallVector<const onnx::ValueInfoProto *> boundInputs;
  // Check the bindings name real inputs before reporting unbound dims.
  auto isGraphInput = [&](StringRef name) {
    return !initializers.count(name) &&
           llvm::any_of(graph.input(),
                        [&](const auto &in) { return in.name() == name; });
  };
  for (const auto &entry : options.shapes)
    if (!isGraphInput(entry.getKey()))
      return error("--shape names '" + entry.getKey() +
                   "', which is not a graph input");
  for (const auto &entry : options.constantInputs)
    if (!isGraphInput(entry.getKey()))
      return error("--bind-input names '" + entry.getKey() +
                   "', which is not a graph input");
  for (const auto &info : graph.input()) {
    if (auto it = initializers.find(info.name()); it != initializers.end()) {
      // An initializer listed as an input (IR version < 4): what the input
      // declares must be what the initializer holds.
      if (failed(checkInitializerInput(info, *it->second)))
        return failure();
      continue;
    }
    if (!inputNames.insert(info.name()).second)
      return error("graph input '" + info.name() + "' is declared twice");
    if (options.constantInputs.count(info.name())) {
      boundInputs.push_back(&info);
      continue;
    }
    FailureOr<RankedTensorType> type = inputType(info);
    if (failed(type))
      return failure();
    if (std::string problem =
            ampc::checkTensorSize(*type, options.maxTensorBytes);
        !problem.empty())
      return error("input '" + info.name() + "': " + problem +
                   " (--max-tensor-bytes)");
    argTypes.push_back(*type);
    argNames.push_back(info.name());
  }
  // --batch binds symbolic first dimensions; when there is none, a static
  // batch that differs is a contradiction the user must hear about (the
  // library would silently run the exported batch).
  if (options.batch) {
    auto isSymbolic = [](const onnx::ValueInfoProto &info) {
      const auto &tt = info.type().tensor_type();
      return tt.has_shape() && tt.shape().dim_size() > 0 &&
             !(tt.shape().dim(0).has_dim_value() &&
               tt.shape().dim(0).dim_value() >= 0);
    };
    bool bound = false;
    const onnx::ValueInfoProto *contradicting = nullptr;
    for (const auto &info : graph.input()) {
      if (initializers.count(info.name()) ||
          options.shapes.count(info.name()) ||
          options.constantInputs.count(info.name()) ||
          !info.type().has_tensor_type())
        continue;
      if (isSymbolic(info))
        bound = true;
      else if (!contradicting && info.type().tensor_type().has_shape() &&
               info.type().tensor_type().shape().dim_size() > 0 &&
               info.type().tensor_type().shape().dim(0).dim_value() !=
                   *options.batch)
        contradicting = &info;
    }
    if (!bound && contradicting)
      return error("--batch " + Twine(*options.batch) + ": input '" +
                   contradicting->name() + "' has a static batch dimension "
                   "of " +
                   Twine(contradicting->type().tensor_type().shape().dim(0)
                             .dim_value()) +
                   " and no input has a symbolic one; re-export the model "
                   "with a dynamic batch axis (torch.onnx.export "
                   "dynamic_axes) or pass --batch " +
                   Twine(contradicting->type().tensor_type().shape().dim(0)
                             .dim_value()));
  }

  b.setInsertionPointToEnd(module.getBody());
  // Result types are known only after the body is built.
  func = func::FuncOp::create(b, fileLoc, "forward",
                              b.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    func.setArgAttr(i, ampc::kNameAttr, b.getStringAttr(name));
    values[name] = entry->getArgument(i);
  }
  b.setInsertionPointToStart(entry);
  for (const onnx::ValueInfoProto *info : boundInputs)
    if (failed(bindConstantInput(*info, options.constantInputs.lookup(info->name()))))
      return failure();
  return success();
}

LogicalResult Importer::bindConstantInput(const onnx::ValueInfoProto &info,
                                          StringRef path) {
  std::string contents, reason;
  if (!ampc::readRegularFile(path.str(), contents, uint64_t(INT_MAX), reason))
    return error("--bind-input " + info.name() + ": cannot open '" + path +
                 "': " + reason);
  onnx::TensorProto tensor;
  if (!tensor.ParseFromArray(contents.data(), static_cast<int>(contents.size())))
    return error("--bind-input " + info.name() + ": '" + path +
                 "' is not a serialized ONNX TensorProto");
  std::string message;
  DenseElementsAttr value =
      convertTensor(ctx, tensor, llvm::sys::path::parent_path(path),
                    options.maxTensorBytes, message);
  if (!value)
    return error("--bind-input " + info.name() + ": " + message);
  if (info.type().has_tensor_type()) {
    Type declared = elementTypeFromOnnx(ctx, info.type().tensor_type().elem_type());
    if (declared && declared != value.getElementType())
      return error("--bind-input " + info.name() + ": the tensor in '" + path +
                   "' has element type " +
                   onnxTypeName(tensor.data_type()) +
                   ", the input is declared " +
                   onnxTypeName(info.type().tensor_type().elem_type()));
  }
  OpBuilder::InsertionGuard guard(b);
  setPrologueInsertionPoint();
  auto op = ampc::ConstantOp::create(
      b, NameLoc::get(b.getStringAttr(info.name()), fileLoc), value);
  prologueEnd = op;
  values[info.name()] = op;
  return success();
}

Value Importer::lookup(const std::string &name) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  auto init = initializers.find(name);
  if (init == initializers.end())
    return {};
  // Materialise initializers at their first use, at the top of the body.
  OpBuilder::InsertionGuard guard(b);
  setPrologueInsertionPoint();
  Location loc = NameLoc::get(b.getStringAttr(name), fileLoc);
  Value v;
  if (auto param = parameters.lookup(name)) {
    v = ampc::LoadParameterOp::create(b, loc, param.getType(), name);
  } else {
    v = ampc::ConstantOp::create(b, loc, constantInitializers.lookup(name));
  }
  prologueEnd = v.getDefiningOp();
  values[name] = v;
  return v;
}

FailureOr<std::vector<size_t>> Importer::topologicalOrder() {
  std::vector<size_t> order;
  const onnx::GraphProto &graph = model.graph();
  if (std::optional<ampc::OnnxGraphError> e = ampc::sortOnnxNodes(graph, order)) {
    emitError(nodeLoc(graph.node(e->node), e->node)) << e->message;
    return failure();
  }
  return order;
}

/// The rule that imports `node`, or why there is none: one line naming the
/// domain, the op or the opset; `unknownOp` says whether the op type is one
/// the importer has no rule for.
static const OpRule *findRule(const onnx::NodeProto &node, int64_t opset,
                              std::string &why, bool &unknownOp) {
  unknownOp = false;
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    why = "unsupported op domain '" + node.domain() + "'";
    return nullptr;
  }
  if (isOnnxAttention(node)) {
    why = attentionRefusal();
    return nullptr;
  }
  if (const OpRule *r = ruleFor(node.op_type())) {
    if (opset >= r->minOpset)
      return r;
    why = ("unsupported opset " + Twine(opset) + " for this op (ampc imports " +
           node.op_type() + " from opset " + Twine(r->minOpset) + ")")
              .str();
    return nullptr;
  }
  why = ("unsupported op '" + node.op_type() + "' (opset " + Twine(opset) + ")")
            .str();
  unknownOp = true;
  return nullptr;
}

LogicalResult Importer::checkSupportedOps() {
  // Every node is looked at before any is imported, so a model with several
  // unsupported ops is answered once: one line per distinct reason (op
  // type, domain or opset), at the first node it applies to, with a count.
  struct Refusal {
    size_t first;
    unsigned count;
    bool unknownOp;
  };
  llvm::MapVector<StringRef, Refusal, llvm::StringMap<unsigned>> refusals;
  std::deque<std::string> reasons; // what the keys of `refusals` point into
  const onnx::GraphProto &graph = model.graph();
  for (int i = 0; i < graph.node_size(); ++i) {
    std::string why;
    bool unknownOp;
    if (findRule(graph.node(i), opset, why, unknownOp))
      continue;
    auto it = refusals.find(why);
    if (it == refusals.end())
      it = refusals
               .insert({reasons.emplace_back(std::move(why)),
                        Refusal{size_t(i), 0, unknownOp}})
               .first;
    ++it->second.count;
  }
  if (refusals.empty())
    return success();
  // Where the supported ops are is said once, on the last line of an
  // unknown op (the list itself, 150 names, buried the model's own problem).
  const Refusal *listAt = nullptr;
  for (const auto &[why, refusal] : refusals)
    if (refusal.unknownOp)
      listAt = &refusal;
  for (const auto &[why, refusal] : refusals) {
    InFlightDiagnostic d =
        emitError(nodeLoc(graph.node(refusal.first), refusal.first)) << why;
    if (refusal.count > 1)
      d << ": " << refusal.count << " nodes, this is the first";
    if (&refusal == listAt)
      d << "; the supported ops are listed in docs/ops.md and by "
           "'ampc --list-ops'";
  }
  return failure();
}

LogicalResult Importer::importNode(const onnx::NodeProto &node, size_t index) {
  Location loc = nodeLoc(node, index);
  auto fail = [&](const Twine &message) {
    emitError(loc) << message;
    return failure();
  };
  std::string why;
  bool unknownOp;
  const OpRule *rule = findRule(node, opset, why, unknownOp);
  if (!rule)
    return fail(why);
  llvm::StringSet<> attributeNames;
  for (const auto &a : node.attribute())
    if (!attributeNames.insert(a.name()).second)
      return fail("attribute '" + a.name() + "' is given twice");
  int numInputs = node.input_size();
  if (numInputs < rule->minInputs || numInputs > rule->maxInputs)
    return fail("expects " +
                (rule->minInputs == rule->maxInputs
                     ? Twine(rule->minInputs)
                     : Twine(rule->minInputs) + " to " + Twine(rule->maxInputs)) +
                (rule->maxInputs == 1 ? " input" : " inputs") + ", got " +
                Twine(numInputs));
  // An empty name marks an absent optional input; required inputs (and every
  // input of a variadic op) must be present, or the operands would shift.
  bool variadic = rule->maxInputs > 16;
  for (int i = 0; i < numInputs; ++i)
    if (node.input(i).empty() && (variadic || i < rule->minInputs))
      return fail("input " + Twine(i) + " is required but empty");
  if (node.output_size() > rule->maxOutputs)
    return fail("has " + Twine(node.output_size()) + " outputs, at most " +
                Twine(rule->maxOutputs) + " are supported");
  for (const auto &a : node.attribute()) {
    const AttrSpec *spec = nullptr;
    for (const AttrSpec &s : rule->attrs)
      if (a.name() == s.name)
        spec = &s;
    if (!spec)
      return fail("unknown attribute '" + a.name() + "'");
    static const std::pair<AttrKind, onnx::AttributeProto::AttributeType>
        kinds[] = {{AttrKind::Int, onnx::AttributeProto::INT},
                   {AttrKind::Float, onnx::AttributeProto::FLOAT},
                   {AttrKind::String, onnx::AttributeProto::STRING},
                   {AttrKind::Ints, onnx::AttributeProto::INTS},
                   {AttrKind::Floats, onnx::AttributeProto::FLOATS},
                   {AttrKind::Strings, onnx::AttributeProto::STRINGS},
                   {AttrKind::Tensor, onnx::AttributeProto::TENSOR}};
    for (auto [kind, protoType] : kinds)
      if (kind == spec->kind && a.type() != protoType)
        return fail("attribute '" + a.name() + "' must be of type " +
                    onnx::AttributeProto::AttributeType_Name(protoType) +
                    ", got " +
                    onnx::AttributeProto::AttributeType_Name(a.type()));
  }

  NodeContext nc{{b, loc, maxTensorBytes()}, *this, node, opset, {}};
  for (const std::string &in : node.input()) {
    if (in.empty()) {
      nc.inputs.push_back({});
      continue;
    }
    Value v = lookup(in);
    if (!v)
      return fail("input '" + in + "' has no value");
    nc.inputs.push_back(v);
  }
  FailureOr<Outputs> outputs = rule->build(nc);
  if (failed(outputs))
    return failure();
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty())
      continue;
    if (i >= static_cast<int>(outputs->size()) || !(*outputs)[i])
      return fail("output " + Twine(i) + " ('" + node.output(i) +
                  "') is not supported");
    values[node.output(i)] = (*outputs)[i];
  }
  return success();
}

LogicalResult Importer::checkInitializerInput(const onnx::ValueInfoProto &info,
                                              const onnx::TensorProto &init) {
  if (!info.type().has_tensor_type())
    return success();
  const auto &tt = info.type().tensor_type();
  auto dims = [](auto range) {
    std::string text = "[";
    for (auto d : range)
      text += (text.size() > 1 ? ", " : "") + std::to_string(d);
    return text + "]";
  };
  if (tt.elem_type() != 0 && tt.elem_type() != init.data_type())
    return error("input '" + info.name() + "' is declared " +
                 onnxTypeName(tt.elem_type()) + ", its initializer holds " +
                 onnxTypeName(init.data_type()));
  if (!tt.has_shape())
    return success();
  bool same = tt.shape().dim_size() == init.dims_size();
  for (int i = 0; same && i < init.dims_size(); ++i) {
    const auto &d = tt.shape().dim(i);
    same = !d.has_dim_value() || d.dim_value() == init.dims(i);
  }
  if (!same) {
    SmallVector<std::string> declared;
    for (const auto &d : tt.shape().dim())
      declared.push_back(d.has_dim_value() ? std::to_string(d.dim_value())
                                           : d.dim_param().empty() ? "?" : d.dim_param());
    return error("input '" + info.name() + "' is declared with shape [" +
                 llvm::join(declared, ", ") + "], its initializer has " +
                 dims(init.dims()));
  }
  return success();
}

LogicalResult Importer::checkOutputs(SmallVectorImpl<Value> &results) {
  if (model.graph().output_size() == 0)
    return error("the graph declares no outputs");
  for (const auto &info : model.graph().output()) {
    Value v = lookup(info.name());
    if (!v)
      return error("graph output '" + info.name() +
                   "' is not produced by any node");
    auto type = cast<RankedTensorType>(v.getType());
    if (info.type().has_tensor_type()) {
      const auto &tt = info.type().tensor_type();
      Type declared = elementTypeFromOnnx(ctx, tt.elem_type());
      if (tt.elem_type() != 0 && declared != type.getElementType())
        return error("graph output '" + info.name() + "' is declared " +
                     onnxTypeName(tt.elem_type()) + " but computes " +
                     [&] {
                       std::string s;
                       llvm::raw_string_ostream os(s);
                       os << type.getElementType();
                       return s;
                     }());
      if (tt.has_shape()) {
        bool match = tt.shape().dim_size() == type.getRank();
        for (int i = 0; match && i < tt.shape().dim_size(); ++i)
          match = !tt.shape().dim(i).has_dim_value() ||
                  tt.shape().dim(i).dim_value() == type.getDimSize(i);
        if (!match) {
          SmallVector<int64_t> dims;
          for (const auto &d : tt.shape().dim())
            dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
          return error("graph output '" + info.name() + "' is declared " +
                       formatDims(dims) + " (-1: symbolic) but computes " +
                       formatDims(type.getShape()));
        }
      }
    }
    results.push_back(v);
  }
  return success();
}

OwningOpRef<ModuleOp> Importer::run() {
  if (!model.has_graph())
    {
      (void)error("not an ONNX model: it has no graph");
      return nullptr;
    }
  if (failed(checkOpset()) || failed(checkSupportedOps()))
    return nullptr;
  OwningOpRef<ModuleOp> owned = ModuleOp::create(fileLoc);
  module = *owned;
  if (failed(declareInitializers()) || failed(buildSignature()))
    return nullptr;
  FailureOr<std::vector<size_t>> order = topologicalOrder();
  if (failed(order))
    return nullptr;
  const onnx::GraphProto &graph = model.graph();
  b.setInsertionPointToEnd(&func.getBody().front());
  for (size_t i : *order)
    if (failed(importNode(graph.node(i), i)))
      return nullptr;
  SmallVector<Value> results;
  if (failed(checkOutputs(results)))
    return nullptr;
  func::ReturnOp::create(b, fileLoc, results);
  func.setFunctionType(
      b.getFunctionType(func.getArgumentTypes(), ValueRange(results).getTypes()));
  for (auto [i, info] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, ampc::kNameAttr, b.getStringAttr(info.name()));
  // Parameters that no node reads are dropped with a clean module.
  for (auto param : llvm::make_early_inc_range(module.getOps<ampc::ParameterOp>()))
    if (!values.count(param.getSymName()))
      param.erase();
  if (failed(mlir::verify(module)))
    return nullptr;
  return owned;
}

} // namespace ampc::detail

namespace {

constexpr AttrKind I = AttrKind::Int, F = AttrKind::Float, S = AttrKind::String,
                   Is = AttrKind::Ints, Fs = AttrKind::Floats,
                   T = AttrKind::Tensor;

const std::vector<OpRule> &rules() {
  // opType, ampc op, min opset, min/max inputs, max outputs, attributes,
  // builder.
  static const std::vector<OpRule> kRules = {
      {"Neg", "ampc.neg", 6, 1, 1, 1, {}, simple<ampc::NegOp>},
      {"Sqrt", "ampc.sqrt", 6, 1, 1, 1, {}, simple<ampc::SqrtOp>},
      {"Reciprocal", "ampc.reciprocal", 6, 1, 1, 1, {}, simple<ampc::ReciprocalOp>},
      {"Exp", "ampc.exp", 6, 1, 1, 1, {}, simple<ampc::ExpOp>},
      {"Log", "ampc.log", 6, 1, 1, 1, {}, simple<ampc::LogOp>},
      {"Erf", "ampc.erf", 9, 1, 1, 1, {}, simple<ampc::ErfOp>},
      {"Relu", "ampc.relu", 6, 1, 1, 1, {}, simple<ampc::ReluOp>},
      {"Sigmoid", "ampc.sigmoid", 6, 1, 1, 1, {}, simple<ampc::SigmoidOp>},
      {"Tanh", "ampc.tanh", 6, 1, 1, 1, {}, simple<ampc::TanhOp>},
      {"Identity", "ampc.identity", 1, 1, 1, 1, {}, simple<ampc::IdentityOp>},
      {"LeakyRelu", "ampc.leaky_relu", 6, 1, 1, 1, {{"alpha", F}}, importLeakyRelu},
      {"Gelu", "ampc.gelu", 20, 1, 1, 1, {{"approximate", S}}, importGelu},
      {"Add", "ampc.add", 7, 2, 2, 1, {}, simple<ampc::AddOp>},
      {"Sub", "ampc.sub", 7, 2, 2, 1, {}, simple<ampc::SubOp>},
      {"Mul", "ampc.mul", 7, 2, 2, 1, {}, simple<ampc::MulOp>},
      {"Div", "ampc.div", 7, 2, 2, 1, {}, simple<ampc::DivOp>},
      {"Pow", "ampc.pow", 7, 2, 2, 1, {}, simple<ampc::PowOp>},
      {"Equal", "ampc.equal", 7, 2, 2, 1, {}, simple<ampc::EqualOp>},
      {"Where", "ampc.where", 9, 3, 3, 1, {}, simple<ampc::WhereOp>},
      {"Cast", "ampc.cast", 6, 1, 1, 1, {{"to", I}, {"saturate", I}}, importCast},
      {"CastLike", "ampc.cast", 15, 2, 2, 1, {{"saturate", I}}, importCastLike},
      {"Abs", "ampc.abs", 6, 1, 1, 1, {}, simple<ampc::AbsOp>},
      {"Sign", "ampc.sign", 9, 1, 1, 1, {}, simple<ampc::SignOp>},
      {"Floor", "ampc.floor", 6, 1, 1, 1, {}, simple<ampc::FloorOp>},
      {"Ceil", "ampc.ceil", 6, 1, 1, 1, {}, simple<ampc::CeilOp>},
      {"Round", "ampc.round", 11, 1, 1, 1, {}, simple<ampc::RoundOp>},
      {"Sin", "ampc.sin", 7, 1, 1, 1, {}, simple<ampc::SinOp>},
      {"Cos", "ampc.cos", 7, 1, 1, 1, {}, simple<ampc::CosOp>},
      {"Tan", "ampc.tan", 7, 1, 1, 1, {}, simple<ampc::TanOp>},
      {"Asin", "ampc.asin", 7, 1, 1, 1, {}, simple<ampc::AsinOp>},
      {"Acos", "ampc.acos", 7, 1, 1, 1, {}, simple<ampc::AcosOp>},
      {"Atan", "ampc.atan", 7, 1, 1, 1, {}, simple<ampc::AtanOp>},
      {"Sinh", "ampc.sinh", 9, 1, 1, 1, {}, simple<ampc::SinhOp>},
      {"Cosh", "ampc.cosh", 9, 1, 1, 1, {}, simple<ampc::CoshOp>},
      {"Asinh", "ampc.asinh", 9, 1, 1, 1, {}, simple<ampc::AsinhOp>},
      {"Acosh", "ampc.acosh", 9, 1, 1, 1, {}, simple<ampc::AcoshOp>},
      {"Atanh", "ampc.atanh", 9, 1, 1, 1, {}, simple<ampc::AtanhOp>},
      {"Softplus", "ampc.softplus", 1, 1, 1, 1, {}, simple<ampc::SoftplusOp>},
      {"Softsign", "ampc.softsign", 1, 1, 1, 1, {}, simple<ampc::SoftsignOp>},
      {"Mish", "ampc.mish", 18, 1, 1, 1, {}, simple<ampc::MishOp>},
      {"HardSwish", "ampc.hard_swish", 14, 1, 1, 1, {}, simple<ampc::HardSwishOp>},
      {"Elu", "ampc.elu", 6, 1, 1, 1, {{"alpha", F}}, importElu},
      {"Celu", "ampc.celu", 12, 1, 1, 1, {{"alpha", F}}, importCelu},
      {"Selu", "ampc.selu", 6, 1, 1, 1, {{"alpha", F}, {"gamma", F}}, importSelu},
      {"HardSigmoid", "ampc.hard_sigmoid", 6, 1, 1, 1, {{"alpha", F}, {"beta", F}},
       importHardSigmoid},
      {"ThresholdedRelu", "ampc.thresholded_relu", 10, 1, 1, 1, {{"alpha", F}}, importThresholdedRelu},
      {"Shrink", "ampc.shrink", 9, 1, 1, 1, {{"lambd", F}, {"bias", F}}, importShrink},
      {"PRelu", "ampc.prelu", 9, 2, 2, 1, {}, importPRelu},
      {"Clip", "ampc.clip", 6, 1, 3, 1, {{"min", F}, {"max", F}}, importClip},
      {"Max", "ampc.max", 8, 1, 1 << 20, 1, {}, importMax},
      {"Min", "ampc.min", 8, 1, 1 << 20, 1, {}, importMin},
      {"Sum", "ampc.add", 8, 1, 1 << 20, 1, {}, importSum},
      {"Mean", "ampc.add", 8, 1, 1 << 20, 1, {}, importMean},
      {"Mod", "ampc.mod", 10, 2, 2, 1, {{"fmod", I}}, importMod},
      {"BitShift", "ampc.bit_shift", 11, 2, 2, 1, {{"direction", S}},
       importBitShift},
      {"QuantizeLinear", "ampc.round", 10, 2, 3, 1, {{"axis", I}},
       importQuantizeLinear},
      {"DequantizeLinear", "ampc.mul", 10, 2, 3, 1, {{"axis", I}},
       importDequantizeLinear},
      {"DynamicQuantizeLinear", "ampc.round", 11, 1, 1, 3, {},
       importDynamicQuantizeLinear},
      {"Greater", "ampc.greater", 9, 2, 2, 1, {}, simple<ampc::GreaterOp>},
      {"Less", "ampc.less", 9, 2, 2, 1, {}, simple<ampc::LessOp>},
      {"GreaterOrEqual", "ampc.greater_or_equal", 12, 2, 2, 1, {}, simple<ampc::GreaterOrEqualOp>},
      {"LessOrEqual", "ampc.less_or_equal", 12, 2, 2, 1, {}, simple<ampc::LessOrEqualOp>},
      {"And", "ampc.and", 7, 2, 2, 1, {}, simple<ampc::AndOp>},
      {"Or", "ampc.or", 7, 2, 2, 1, {}, simple<ampc::OrOp>},
      {"Xor", "ampc.xor", 7, 2, 2, 1, {}, simple<ampc::XorOp>},
      {"Not", "ampc.not", 1, 1, 1, 1, {}, simple<ampc::NotOp>},
      {"IsNaN", "ampc.is_nan", 9, 1, 1, 1, {}, simple<ampc::IsNaNOp>},
      {"IsInf", "ampc.is_inf", 10, 1, 1, 1, {{"detect_negative", I}, {"detect_positive", I}},
       importIsInf},
      {"ReduceL1", "ampc.reduce_sum", 1, 1, 2, 1,
       {{"axes", Is}, {"keepdims", I}, {"noop_with_empty_axes", I}},
       importReduceL1, {1}},
      {"ReduceL2", "ampc.reduce_sum", 1, 1, 2, 1,
       {{"axes", Is}, {"keepdims", I}, {"noop_with_empty_axes", I}},
       importReduceL2, {1}},
      {"ReduceSumSquare", "ampc.reduce_sum", 1, 1, 2, 1,
       {{"axes", Is}, {"keepdims", I}, {"noop_with_empty_axes", I}},
       importReduceSumSquare, {1}},
      {"ReduceLogSum", "ampc.reduce_sum", 1, 1, 2, 1,
       {{"axes", Is}, {"keepdims", I}, {"noop_with_empty_axes", I}},
       importReduceLogSum, {1}},
      {"ReduceLogSumExp", "ampc.reduce_sum", 1, 1, 2, 1,
       {{"axes", Is}, {"keepdims", I}, {"noop_with_empty_axes", I}},
       importReduceLogSumExp, {1}},
      {"ReduceMin", "ampc.reduce_max", 1, 1, 2, 1,
       {{"axes", Is}, {"keepdims", I}, {"noop_with_empty_axes", I}},
       importReduceMin, {1}},
      {"Size", "ampc.constant", 1, 1, 1, 1, {}, importSize},
      {"Trilu", "ampc.where", 14, 1, 2, 1, {{"upper", I}}, importTrilu, {1}},
      {"Split", "ampc.slice", 2, 1, 2, 1 << 20,
       {{"axis", I}, {"split", Is}, {"num_outputs", I}}, importSplit, {1}},
      {"Tile", "ampc.expand", 6, 2, 2, 1, {}, importTile, {1}},
      {"DepthToSpace", "ampc.transpose", 1, 1, 1, 1,
       {{"blocksize", I}, {"mode", S}}, importDepthToSpace},
      {"SpaceToDepth", "ampc.transpose", 1, 1, 1, 1, {{"blocksize", I}},
       importSpaceToDepth},
      {"EyeLike", "ampc.equal", 9, 1, 1, 1, {{"dtype", I}, {"k", I}},
       importEyeLike},
      {"MatMul", "ampc.matmul", 1, 2, 2, 1, {}, simple<ampc::MatMulOp>},
      {"Einsum", "ampc.matmul", 12, 1, 1 << 20, 1, {{"equation", S}},
       importEinsum},
      {"Gemm", "ampc.gemm", 7, 2, 3, 1,
       {{"alpha", F}, {"beta", F}, {"transA", I}, {"transB", I}}, importGemm},
      {"Conv", "ampc.conv", 1, 2, 3, 1,
       {{"auto_pad", S}, {"dilations", Is}, {"group", I}, {"kernel_shape", Is},
        {"pads", Is}, {"strides", Is}},
       importConv},
      {"ConvTranspose", "ampc.conv", 1, 2, 3, 1,
       {{"auto_pad", S}, {"dilations", Is}, {"group", I}, {"kernel_shape", Is},
        {"output_padding", Is}, {"output_shape", Is}, {"pads", Is},
        {"strides", Is}},
       importConvTranspose},
      // The recurrent ops (Recurrent.cpp): X, W, R, then B, sequence_lens,
      // initial_h (LSTM: initial_c, P); outputs Y, Y_h (LSTM: Y_c).
      {"LSTM", "ampc.gemm", 7, 3, 8, 3,
       {{"activation_alpha", Fs}, {"activation_beta", Fs},
        {"activations", AttrKind::Strings}, {"clip", F}, {"direction", S},
        {"hidden_size", I}, {"input_forget", I}, {"layout", I}},
       importLSTM},
      {"GRU", "ampc.gemm", 7, 3, 6, 2,
       {{"activation_alpha", Fs}, {"activation_beta", Fs},
        {"activations", AttrKind::Strings}, {"clip", F}, {"direction", S},
        {"hidden_size", I}, {"layout", I}, {"linear_before_reset", I}},
       importGRU},
      {"RNN", "ampc.gemm", 7, 3, 6, 2,
       {{"activation_alpha", Fs}, {"activation_beta", Fs},
        {"activations", AttrKind::Strings}, {"clip", F}, {"direction", S},
        {"hidden_size", I}, {"layout", I}},
       importRNN},
      {"ReverseSequence", "ampc.gather", 10, 2, 2, 1,
       {{"batch_axis", I}, {"time_axis", I}}, importReverseSequence},
      {"MaxUnpool", "ampc.scatter", 9, 2, 3, 1,
       {{"kernel_shape", Is}, {"pads", Is}, {"strides", Is}},
       importMaxUnpool, {2}},
      {"MaxPool", "ampc.max_pool", 1, 1, 1, 2,
       {{"auto_pad", S}, {"ceil_mode", I}, {"dilations", Is},
        {"kernel_shape", Is}, {"pads", Is}, {"storage_order", I},
        {"strides", Is}},
       importMaxPool},
      {"AveragePool", "ampc.average_pool", 1, 1, 1, 1,
       {{"auto_pad", S}, {"ceil_mode", I}, {"count_include_pad", I},
        {"dilations", Is}, {"kernel_shape", Is}, {"pads", Is}, {"strides", Is}},
       importAveragePool},
      {"Resize", "ampc.gather", 10, 1, 4, 1,
       {{"antialias", I}, {"axes", Is}, {"coordinate_transformation_mode", S},
        {"cubic_coeff_a", F}, {"exclude_outside", I},
        {"extrapolation_value", F}, {"keep_aspect_ratio_policy", S},
        {"mode", S}, {"nearest_mode", S}},
       importResizeOp, {1, 2, 3}},
      {"Upsample", "ampc.gather", 7, 1, 2, 1, {{"mode", S}, {"scales", Fs}},
       importUpsample, {1}},
      {"GlobalAveragePool", "ampc.global_average_pool", 1, 1, 1, 1, {}, simple<ampc::GlobalAveragePoolOp>},
      {"GlobalMaxPool", "ampc.reduce_max", 1, 1, 1, 1, {}, importGlobalMaxPool},
      {"Pad", "ampc.gather", 2, 1, 4, 1,
       {{"mode", S}, {"pads", Is}, {"value", F}}, importPad, {1, 2, 3}},
      {"Softmax", "ampc.softmax", 13, 1, 1, 1, {{"axis", I}}, importSoftmax},
      {"LogSoftmax", "ampc.log_softmax", 13, 1, 1, 1, {{"axis", I}}, importLogSoftmax},
      {"Hardmax", "ampc.equal", 1, 1, 1, 1, {{"axis", I}}, importHardmax},
      {"LayerNormalization", "ampc.layer_normalization", 17, 2, 3, 3,
       {{"axis", I}, {"epsilon", F}, {"stash_type", I}},
       importLayerNormalization},
      {"InstanceNormalization", "ampc.layer_normalization", 6, 3, 3, 1,
       {{"epsilon", F}}, importInstanceNormalization},
      {"GroupNormalization", "ampc.layer_normalization", 18, 3, 3, 1,
       {{"epsilon", F}, {"num_groups", I}, {"stash_type", I}},
       importGroupNormalization},
      {"MeanVarianceNormalization", "ampc.reduce_mean", 9, 1, 1, 1,
       {{"axes", Is}}, importMeanVarianceNormalization},
      {"LpNormalization", "ampc.reduce_sum", 1, 1, 1, 1,
       {{"axis", I}, {"p", I}}, importLpNormalization},
      {"LRN", "ampc.average_pool", 1, 1, 1, 1,
       {{"alpha", F}, {"beta", F}, {"bias", F}, {"size", I}}, importLRN},
      {"BatchNormalization", "ampc.batch_normalization", 9, 5, 5, 3,
       {{"epsilon", F}, {"momentum", F}, {"training_mode", I}, {"spatial", I}},
       importBatchNormalization},
      {"Dropout", "ampc.dropout", 7, 1, 3, 2, {{"ratio", F}, {"seed", I}}, importDropout, {1, 2}},
      {"Reshape", "ampc.reshape", 5, 2, 2, 1, {{"allowzero", I}}, importReshape, {1}},
      {"Expand", "ampc.expand", 8, 2, 2, 1, {}, importExpand, {1}},
      {"Transpose", "ampc.transpose", 1, 1, 1, 1, {{"perm", Is}}, importTranspose},
      {"Flatten", "ampc.flatten", 1, 1, 1, 1, {{"axis", I}}, importFlatten},
      {"Squeeze", "ampc.squeeze", 1, 1, 2, 1, {{"axes", Is}}, importSqueeze, {1}},
      {"Unsqueeze", "ampc.unsqueeze", 1, 1, 2, 1, {{"axes", Is}}, importUnsqueeze, {1}},
      {"Concat", "ampc.concat", 4, 1, 1 << 20, 1, {{"axis", I}}, importConcat},
      {"Slice", "ampc.slice", 10, 3, 5, 1, {}, importSlice, {1, 2, 3, 4}},
      {"Gather", "ampc.gather", 1, 2, 2, 1, {{"axis", I}}, importGather},
      {"GatherElements", "ampc.gather", 11, 2, 2, 1, {{"axis", I}},
       importGatherElements},
      {"GatherND", "ampc.gather", 11, 2, 2, 1, {{"batch_dims", I}},
       importGatherND},
      {"ScatterElements", "ampc.scatter", 11, 3, 3, 1,
       {{"axis", I}, {"reduction", S}}, importScatterElements},
      {"Scatter", "ampc.scatter", 9, 3, 3, 1, {{"axis", I}},
       importScatterElements},
      {"ScatterND", "ampc.scatter", 11, 3, 3, 1, {{"reduction", S}},
       importScatterND},
      {"TopK", "ampc.gather", 1, 1, 2, 2,
       {{"axis", I}, {"k", I}, {"largest", I}, {"sorted", I}}, importTopK,
       {1}},
      {"OneHot", "ampc.where", 9, 3, 3, 1, {{"axis", I}}, importOneHot, {1}},
      {"ReduceMean", "ampc.reduce_mean", 1, 1, 2, 1,
       {{"axes", Is}, {"keepdims", I}, {"noop_with_empty_axes", I}},
       importReduceMean, {1}},
      {"ReduceMax", "ampc.reduce_max", 1, 1, 2, 1,
       {{"axes", Is}, {"keepdims", I}, {"noop_with_empty_axes", I}},
       importReduceMax, {1}},
      {"ReduceProd", "ampc.reduce_prod", 1, 1, 2, 1,
       {{"axes", Is}, {"keepdims", I}, {"noop_with_empty_axes", I}},
       importReduceProd, {1}},
      {"ReduceSum", "ampc.reduce_sum", 1, 1, 2, 1,
       {{"axes", Is}, {"keepdims", I}, {"noop_with_empty_axes", I}},
       importReduceSum, {1}},
      {"CumSum", "ampc.reduce_sum", 11, 2, 2, 1,
       {{"exclusive", I}, {"reverse", I}}, importCumSum, {1}},
      {"ArgMax", "ampc.equal", 1, 1, 1, 1,
       {{"axis", I}, {"keepdims", I}, {"select_last_index", I}}, importArgMax},
      {"ArgMin", "ampc.equal", 1, 1, 1, 1,
       {{"axis", I}, {"keepdims", I}, {"select_last_index", I}}, importArgMin},
      {"Shape", "ampc.shape", 1, 1, 1, 1, {{"start", I}, {"end", I}}, importShape},
      {"ConstantOfShape", "ampc.constant", 9, 1, 1, 1, {{"value", T}}, importConstantOfShape, {0}},
      {"Range", "ampc.constant", 11, 3, 3, 1, {}, importRange, {0, 1, 2}},
      {"HannWindow", "ampc.constant", 17, 1, 1, 1,
       {{"output_datatype", I}, {"periodic", I}}, importHannWindow, {0}},
      {"HammingWindow", "ampc.constant", 17, 1, 1, 1,
       {{"output_datatype", I}, {"periodic", I}}, importHammingWindow, {0}},
      {"BlackmanWindow", "ampc.constant", 17, 1, 1, 1,
       {{"output_datatype", I}, {"periodic", I}}, importBlackmanWindow, {0}},
      {"Constant", "ampc.constant", 1, 0, 0, 1,
       {{"value", T}, {"value_float", F}, {"value_floats", Fs},
        {"value_int", I}, {"value_ints", Is}, {"value_string", S},
        {"value_strings", AttrKind::Strings}, {"sparse_value", T}},
       importConstant},
      {"SoftmaxCrossEntropyLoss", "ampc.softmax_cross_entropy_loss", 12, 2, 3, 2,
       {{"ignore_index", I}, {"reduction", S}}, importSoftmaxCrossEntropyLoss},
      {"NegativeLogLikelihoodLoss", "ampc.negative_log_likelihood_loss", 12, 2, 3, 1,
       {{"ignore_index", I}, {"reduction", S}},
       importNegativeLogLikelihoodLoss},
  };
  return kRules;
}

} // namespace

std::string ampc::onnxNodeName(const onnx::NodeProto &node, size_t index) {
  return node.name().empty() ? node.op_type() + "_" + std::to_string(index)
                             : node.name();
}

static bool parseModel(StringRef contents, StringRef displayName,
                       onnx::ModelProto &model, std::string &error);

/// Models from older exporters use ops at opsets below the ones the
/// importer reads (Softmax before 13, BatchNormalization with `spatial`,
/// Add with `broadcast`): when every node is an op the importer knows and
/// some are too old, the whole model is brought to the lowest opset that
/// covers them by libonnx's version converter, whose adapters know each
/// op's changes, rather than by rules of our own. A model with ops the
/// importer does not know is left as it is, for the importer to name them
/// all.
static bool bringForward(onnx::ModelProto &model, std::string &error) {
  int64_t opset = 0;
  unsigned defaults = 0;
  for (const auto &entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx") {
      opset = entry.version();
      ++defaults;
    }
  // Missing, repeated or out-of-range opsets are the importer's to report.
  if (defaults != 1 || opset < 1 || opset > ampc::kMaxOnnxOpset ||
      !model.has_graph())
    return true;
  int64_t target = opset;
  int firstOld = -1;
  int64_t firstOldFrom = 0;
  const onnx::GraphProto &graph = model.graph();
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return true;
    const OpRule *rule = ruleFor(node.op_type());
    if (!rule)
      return true;
    if (rule->minOpset > opset && firstOld < 0) {
      firstOld = i;
      firstOldFrom = rule->minOpset;
    }
    target = std::max(target, rule->minOpset);
  }
  if (target == opset)
    return true;
  // libonnx's converter assumes a well-formed graph (it dereferences the
  // producer of every graph output); a malformed one is left unconverted
  // for the importer to refuse with its own message.
  std::vector<size_t> order;
  if (ampc::sortOnnxNodes(graph, order))
    return true;
  llvm::StringSet<> defined;
  for (const auto &in : graph.input())
    defined.insert(in.name());
  for (const auto &t : graph.initializer())
    defined.insert(t.name());
  for (const auto &node : graph.node())
    for (const std::string &out : node.output())
      defined.insert(out);
  for (const auto &out : graph.output())
    if (out.name().empty() || !defined.contains(out.name()))
      return true;
  // Its adapters also assume every node matches its op's schema at the
  // model's opset (the Add adapter reads a second input an Add with one
  // does not have, and crashed): a node that does not is refused here, by
  // the schema's own check.
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    const onnx::OpSchema *schema =
        onnx::OpSchemaRegistry::Schema(node.op_type(), opset, "");
    if (!schema)
      return true;
    std::string invalid;
    try {
      schema->Verify(node);
      continue;
    } catch (const std::exception &e) {
      invalid = StringRef(e.what()).trim().str();
    } catch (...) {
      invalid = "unknown failure";
    }
    std::replace(invalid.begin(), invalid.end(), '\n', ' ');
    // libonnx names the node again: "Node (NAME) has input size ...".
    if (StringRef(invalid).starts_with("Node ("))
      if (size_t close = invalid.find(") "); close != std::string::npos)
        invalid = invalid.substr(close + 2);
    error = "node '" + ampc::onnxNodeName(node, i) + "' (" + node.op_type() +
            "): does not match " + node.op_type() + " at the model's opset " +
            std::to_string(opset) + ": " + invalid;
    return false;
  }
  std::string why;
  try {
    // Some adapters (Softmax 12 to 13) need the shapes of their inputs.
    onnx::ModelProto typed = model;
    onnx::shape_inference::InferShapes(typed);
    onnx::ModelProto converted =
        onnx::version_conversion::ConvertVersion(typed, target);
    model = std::move(converted);
    return true;
  } catch (const std::exception &e) {
    why = e.what();
  } catch (...) {
    why = "unknown failure";
  }
  // libonnx's messages start with its source position and the assertion.
  StringRef reason = StringRef(why).trim();
  if (size_t at = reason.find("failed: "); at != StringRef::npos)
    reason = reason.drop_front(at + 8);
  const onnx::NodeProto &node = graph.node(firstOld);
  error = "node '" + ampc::onnxNodeName(node, firstOld) + "' (" +
          node.op_type() + "): ampc imports " + node.op_type() +
          " from opset " + std::to_string(firstOldFrom) +
          " and the model is at opset " + std::to_string(opset) +
          "; the ONNX version converter cannot bring it to opset " +
          std::to_string(target) + ": " + reason.str();
  return false;
}

bool ampc::parseOnnxModel(StringRef contents, StringRef displayName,
                          onnx::ModelProto &model, std::string &error) {
  return parseModel(contents, displayName, model, error) &&
         bringForward(model, error);
}

static bool parseModel(StringRef contents, StringRef displayName,
                       onnx::ModelProto &model, std::string &error) {
  // No binary ModelProto starts with '<' or '#' (neither is a valid first
  // field tag), so those mean the textual syntax whatever the file is called.
  StringRef head = contents.ltrim();
  bool text = displayName.ends_with(".onnxtext") || head.starts_with("<") ||
              head.starts_with("#");
  try {
    if (text) {
      // The text parser recurses per level: refuse deep nesting first.
      if (int64_t depth = ampc::nestingDepth(contents, /*hashComments=*/true);
          depth > ampc::kMaxNesting) {
        error = "not a valid ONNX text model: brackets nested " +
                std::to_string(depth) + " deep (at most " +
                std::to_string(ampc::kMaxNesting) + ")";
        return false;
      }
      std::string s = contents.str();
      onnx::Status status = onnx::OnnxParser::Parse(model, s.c_str());
      if (!status.IsOK()) {
        error = "not a valid ONNX text model: " + status.ErrorMessage();
        return false;
      }
      return true;
    }
    if (contents.size() > static_cast<size_t>(INT_MAX)) {
      error = "model larger than 2 GiB; store weights as external data";
      return false;
    }
    if (!model.ParseFromArray(contents.data(), static_cast<int>(contents.size()))) {
      error = "not an ONNX model (protobuf parse failed: truncated or not a "
              "ModelProto)";
      return false;
    }
    return true;
  } catch (const std::exception &e) {
    error = std::string("not a valid ONNX model: ") + e.what();
    return false;
  } catch (...) {
    error = "not a valid ONNX model";
    return false;
  }
}

std::optional<ampc::OnnxGraphError>
ampc::sortOnnxNodes(const onnx::GraphProto &graph, std::vector<size_t> &order) {
  size_t n = graph.node_size();
  llvm::StringSet<> external;
  for (const auto &in : graph.input())
    external.insert(in.name());
  for (const auto &init : graph.initializer())
    external.insert(init.name());
  llvm::StringMap<size_t> producer;
  for (size_t i = 0; i < n; ++i)
    for (const std::string &out : graph.node(i).output())
      if (!out.empty() &&
          (external.contains(out) || !producer.try_emplace(out, i).second))
        return OnnxGraphError{i, "value '" + out + "' is defined more than once"};

  // Each producer counts once per consumer, however many inputs it feeds.
  std::vector<size_t> pending(n, 0);
  std::vector<std::vector<size_t>> users(n);
  for (size_t i = 0; i < n; ++i) {
    std::set<size_t> producers;
    for (const std::string &in : graph.node(i).input()) {
      if (in.empty() || external.contains(in))
        continue;
      auto p = producer.find(in);
      if (p == producer.end())
        return OnnxGraphError{i, "input '" + in +
                                     "' is not a graph input, an initializer "
                                     "or the output of any node"};
      producers.insert(p->second);
    }
    pending[i] = producers.size();
    for (size_t p : producers)
      users[p].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < n; ++i)
    if (!pending[i])
      ready.push(i);
  order.clear();
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i])
      if (--pending[u] == 0)
        ready.push(u);
  }
  for (size_t i = 0; i < n; ++i)
    if (pending[i])
      return OnnxGraphError{i, "node is part of a cycle"};
  return std::nullopt;
}

bool ampc::readOnnxModel(StringRef path, onnx::ModelProto &model,
                         std::string &error) {
  // A binary model over 2 GiB is refused by protobuf anyway; a text model
  // that size is no model either.
  std::string contents, reason;
  if (!ampc::readRegularFile(path.str(), contents, uint64_t(INT_MAX), reason)) {
    error = "cannot open: " + reason;
    return false;
  }
  return parseOnnxModel(contents, path, model, error);
}

llvm::ArrayRef<int> ampc::compileTimeInputs(StringRef opType) {
  const OpRule *rule = ruleFor(opType);
  return rule ? ArrayRef<int>(rule->compileTimeInputs) : ArrayRef<int>();
}

std::vector<ampc::SupportedOp> ampc::supportedOnnxOpTable() {
  std::vector<SupportedOp> table;
  for (const OpRule &r : rules()) {
    std::vector<SupportedAttribute> attributes;
    for (const AttrSpec &a : r.attrs)
      attributes.push_back({a.name, a.kind});
    table.push_back({r.opType, r.ampcOp, r.minOpset, std::move(attributes)});
  }
  llvm::sort(table, [](const SupportedOp &a, const SupportedOp &b) {
    return a.onnxOp < b.onnxOp;
  });
  return table;
}

llvm::SmallVector<llvm::StringRef> ampc::supportedOnnxOps() {
  SmallVector<StringRef> names;
  for (const OpRule &r : rules())
    names.push_back(r.opType);
  llvm::sort(names);
  return names;
}

/// For training: unties (or keeps, with a warning) the initializers an
/// EVAL-mode export merged, and notes the BatchNorms it folded into
/// convolutions. Every message names the node.
static void reportExporterChanges(MLIRContext &context, Location fileLoc,
                                  onnx::ModelProto &model,
                                  ampc::ImportOptions::MergedInitializers mode) {
  auto note = [&](Location l) {
    return context.getDiagEngine().emit(l, DiagnosticSeverity::Note);
  };
  auto loc = [&](size_t index) {
    const onnx::NodeProto &node = model.graph().node(static_cast<int>(index));
    return NameLoc::get(
        StringAttr::get(&context, ampc::onnxNodeName(node, index)),
        FusedLoc::get(&context, {fileLoc},
                      StringAttr::get(&context, node.op_type())));
  };
  for (size_t index : ampc::findFoldedBatchNorms(model))
    note(loc(index))
        << "its weight '" << model.graph().node(index).input(1)
        << "' was computed by the exporter: a BatchNormalization folded into "
           "this convolution (torch.onnx.export in EVAL mode), which trains "
           "as a plain convolution; export with "
           "training=torch.onnx.TrainingMode.TRAINING to train the model as "
           "written (docs/exporting.md)";
  bool untie = mode == ampc::ImportOptions::MergedInitializers::Untie;
  std::vector<Location> locs;
  for (const ampc::MergedInitializer &m : ampc::findMergedInitializers(model))
    locs.push_back(loc(m.node));
  std::vector<ampc::MergedInitializer> merged =
      untie ? ampc::untieMergedInitializers(model)
            : ampc::findMergedInitializers(model);
  for (auto [m, l] : llvm::zip(merged, locs)) {
    if (untie)
      note(l) << "the exporter merged initializer '" << m.merged
                    << "' into '" << m.kept
                    << "' (equal values at export); ampc trains them as two "
                       "parameters, as written (--tie-initializers trains "
                       "them as one)";
    else
      emitWarning(l) << "initializer '" << m.merged << "' is '" << m.kept
                     << "' (merged by the exporter): --tie-initializers "
                        "trains them as one parameter";
  }
}

OwningOpRef<ModuleOp> ampc::importOnnxBuffer(MLIRContext &context,
                                             StringRef contents,
                                             StringRef displayName,
                                             StringRef baseDir,
                                             const ImportOptions &options) {
  context.loadDialect<ampc::AMPCDialect, func::FuncDialect>();
  Location fileLoc = FileLineColLoc::get(&context, displayName, 0, 0);
  onnx::ModelProto model;
  std::string error;
  if (!ampc::parseOnnxModel(contents, displayName, model, error)) {
    emitError(fileLoc) << error;
    return nullptr;
  }
  if (options.mergedInitializers !=
      ampc::ImportOptions::MergedInitializers::AsExported)
    reportExporterChanges(context, fileLoc, model, options.mergedInitializers);
  Importer importer(&context, model, displayName, baseDir, options);
  return importer.run();
}

OwningOpRef<ModuleOp> ampc::importOnnxFile(MLIRContext &context,
                                           StringRef path,
                                           const ImportOptions &options) {
  std::string contents, reason;
  if (!ampc::readRegularFile(path.str(), contents, uint64_t(INT_MAX), reason)) {
    emitError(FileLineColLoc::get(&context, path, 0, 0))
        << "cannot open: " << reason;
    return nullptr;
  }
  return importOnnxBuffer(context, contents, path,
                          llvm::sys::path::parent_path(path), options);
}
