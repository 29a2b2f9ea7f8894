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

std::string ampc::detail::formatDims(ArrayRef<int64_t> dims) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(dims))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

std::string ampc::detail::formatNumber(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", v);
  return buffer;
}

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

class Importer {
public:
  Importer(MLIRContext *ctx, const onnx::ModelProto &model, StringRef file,
           StringRef baseDir, const ampc::ImportOptions &options)
      : ctx(ctx), b(ctx), model(model), file(file.str()),
        baseDir(baseDir.str()), options(options),
        fileLoc(FileLineColLoc::get(ctx, file, 0, 0)) {}

  OwningOpRef<ModuleOp> run();

  MLIRContext *ctx;
  OpBuilder b;
  /// --max-tensor-bytes: the largest tensor a node may make.
  int64_t maxTensorBytes() const { return options.maxTensorBytes; }

  /// Marks the parameter `v` loads (if it loads one) frozen: it keeps its
  /// value and gets no gradient (a quantization scale, which torch's
  /// observers set, not its optimizer).
  void freezeParameter(Value v) {
    if (auto load = v ? v.getDefiningOp<ampc::LoadParameterOp>() : nullptr)
      if (auto param = parameters.lookup(load.getParameter()))
        param->setAttr(ampc::kFrozenAttr,
                      b.getStringAttr("a quantization scale"));
  }

  /// A QuantizeLinear result and what a following DequantizeLinear needs
  /// for the straight-through estimator: the float input, where it was in
  /// the 8-bit range before saturation, and the scale and zero point.
  struct Quantized {
    Value input, inRange, scale, zeroPoint;
  };
  llvm::DenseMap<Value, Quantized> quantized;

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

FailureOr<SmallVector<Value>> NodeContext::build(StringRef opName,
                                                 ValueRange operands,
                                                 ArrayRef<NamedAttribute> attrs,
                                                 unsigned numResults,
                                                 TypeRange resultTypes) {
  MLIRContext *ctx = b.getContext();
  OperationState state(loc, opName);
  state.addOperands(operands);
  state.addAttributes(attrs);
  bool infer = resultTypes.empty();
  if (infer)
    state.addTypes(SmallVector<Type>(numResults, NoneType::get(ctx)));
  else
    state.addTypes(resultTypes);
  Operation *op = b.create(state);
  if (infer) {
    auto iface = cast<InferTypeOpInterface>(op);
    SmallVector<Type> types;
    if (failed(iface.inferReturnTypes(ctx, loc, op->getOperands(),
                                      op->getRawDictionaryAttrs(),
                                      op->getPropertiesStorage(),
                                      op->getRegions(), types))) {
      op->erase();
      return failure();
    }
    for (auto [result, type] : llvm::zip(op->getResults(), types))
      result.setType(type);
  }
  // Verified here, before folding can replace it, so an invalid node is
  // reported at its own location; the module is verified once more at the
  // end for what spans nodes (the return, symbol uses).
  if (failed(mlir::verify(op))) {
    op->erase();
    return failure();
  }
  for (Type t : op->getResultTypes())
    if (std::string problem =
            ampc::checkTensorSize(t, importer.maxTensorBytes());
        !problem.empty()) {
      op->erase();
      return emitError(loc) << "the result " << problem
                            << " (--max-tensor-bytes)";
    }
  // Fold at once when every operand is constant: shape computations become
  // constants before the ops that need their values are reached.
  SmallVector<Attribute> constants;
  for (Value v : op->getOperands()) {
    Attribute c;
    matchPattern(v, m_Constant(&c));
    constants.push_back(c);
  }
  SmallVector<OpFoldResult> folded;
  SmallVector<Value> results(op->getResults());
  if (!op->hasTrait<OpTrait::ConstantLike>() &&
      succeeded(op->fold(constants, folded)) && !folded.empty()) {
    SmallVector<Value> replacements;
    for (auto [ofr, result] : llvm::zip(folded, op->getResults())) {
      if (auto v = dyn_cast<Value>(ofr)) {
        replacements.push_back(v);
        continue;
      }
      Operation *c = op->getDialect()->materializeConstant(
          b, cast<Attribute>(ofr), result.getType(), loc);
      if (!c)
        return results; // keep the unfolded op
      replacements.push_back(c->getResult(0));
    }
    op->erase();
    return replacements;
  }
  return results;
}

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

  NodeContext nc{*this, node, loc, opset, {}, b};
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

//===----------------------------------------------------------------------===//
// Import rules
//===----------------------------------------------------------------------===//

FailureOr<Outputs> buildSame(NodeContext &nc, StringRef opName,
                             ArrayRef<NamedAttribute> attrs = {},
                             unsigned numResults = 1) {
  SmallVector<Value> operands;
  for (Value v : nc.inputs)
    if (v)
      operands.push_back(v);
  return nc.build(opName, operands, attrs, numResults);
}

template <const char *OpName>
FailureOr<Outputs> simple(NodeContext &nc) {
  return buildSame(nc, OpName);
}

constexpr char kNeg[] = "ampc.neg", kSqrt[] = "ampc.sqrt",
               kReciprocal[] = "ampc.reciprocal", kExp[] = "ampc.exp",
               kLog[] = "ampc.log", kErf[] = "ampc.erf", kRelu[] = "ampc.relu",
               kSigmoid[] = "ampc.sigmoid", kTanh[] = "ampc.tanh",
               kIdentity[] = "ampc.identity", kAdd[] = "ampc.add",
               kSub[] = "ampc.sub", kMul[] = "ampc.mul", kDiv[] = "ampc.div",
               kPow[] = "ampc.pow", kEqual[] = "ampc.equal",
               kWhere[] = "ampc.where", kMatMul[] = "ampc.matmul",
               kGlobalAveragePool[] = "ampc.global_average_pool";

FailureOr<Outputs> importLeakyRelu(NodeContext &nc) {
  return buildSame(nc, "ampc.leaky_relu",
                   {nc.f32("alpha", nc.getFloat("alpha", 0.01f))});
}

FailureOr<Outputs> importGelu(NodeContext &nc) {
  FailureOr<NamedAttribute> approximate =
      nc.enumAttr<ampc::GeluApproximate, ampc::GeluApproximateAttr>(
          "approximate", "none");
  if (failed(approximate))
    return failure();
  return buildSame(nc, "ampc.gelu", {*approximate});
}

constexpr char kAbs[] = "ampc.abs", kSign[] = "ampc.sign",
               kFloor[] = "ampc.floor", kCeil[] = "ampc.ceil",
               kRound[] = "ampc.round", kSin[] = "ampc.sin", kCos[] = "ampc.cos",
               kTan[] = "ampc.tan", kAsin[] = "ampc.asin", kAcos[] = "ampc.acos",
               kAtan[] = "ampc.atan", kSinh[] = "ampc.sinh",
               kCosh[] = "ampc.cosh", kAsinh[] = "ampc.asinh",
               kAcosh[] = "ampc.acosh", kAtanh[] = "ampc.atanh",
               kSoftplus[] = "ampc.softplus", kSoftsign[] = "ampc.softsign",
               kMish[] = "ampc.mish", kHardSwish[] = "ampc.hard_swish",
               kGreater[] = "ampc.greater",
               kLess[] = "ampc.less",
               kGreaterOrEqual[] = "ampc.greater_or_equal",
               kLessOrEqual[] = "ampc.less_or_equal", kAnd[] = "ampc.and",
               kOr[] = "ampc.or", kXor[] = "ampc.xor", kNot[] = "ampc.not",
               kIsNaN[] = "ampc.is_nan";

/// An activation with float attributes: each (ONNX name, default) becomes
/// the op's f32 attribute of the same name.
template <const char *OpName>
FailureOr<Outputs>
withFloats(NodeContext &nc,
           std::initializer_list<std::pair<const char *, float>> attrs) {
  SmallVector<NamedAttribute> named;
  for (auto [name, dflt] : attrs)
    named.push_back(nc.f32(name, nc.getFloat(name, dflt)));
  return buildSame(nc, OpName, named);
}

constexpr char kElu[] = "ampc.elu", kCelu[] = "ampc.celu",
               kSelu[] = "ampc.selu", kHardSigmoid[] = "ampc.hard_sigmoid",
               kThresholdedRelu[] = "ampc.thresholded_relu",
               kShrink[] = "ampc.shrink";

FailureOr<Outputs> importElu(NodeContext &nc) {
  return withFloats<kElu>(nc, {{"alpha", 1.0f}});
}
FailureOr<Outputs> importCelu(NodeContext &nc) {
  return withFloats<kCelu>(nc, {{"alpha", 1.0f}});
}
FailureOr<Outputs> importSelu(NodeContext &nc) {
  return withFloats<kSelu>(
      nc, {{"alpha", 1.67326319217681884765625f},
           {"gamma", 1.05070102214813232421875f}});
}
FailureOr<Outputs> importHardSigmoid(NodeContext &nc) {
  return withFloats<kHardSigmoid>(nc, {{"alpha", 0.2f}, {"beta", 0.5f}});
}
FailureOr<Outputs> importThresholdedRelu(NodeContext &nc) {
  return withFloats<kThresholdedRelu>(nc, {{"alpha", 1.0f}});
}

FailureOr<Outputs> importShrink(NodeContext &nc) {
  if (!isa<FloatType>(
          cast<RankedTensorType>(nc.input(0).getType()).getElementType()))
    return nc.error("Shrink of integer data is not supported (floats only)");
  return withFloats<kShrink>(nc, {{"lambd", 0.5f}, {"bias", 0.0f}});
}

/// BitShift: `direction` LEFT or RIGHT as the op's `left`.
FailureOr<Outputs> importBitShift(NodeContext &nc) {
  std::string direction = nc.getString("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    return nc.error("'direction' must be LEFT or RIGHT, got '" + direction +
                    "'");
  return buildSame(nc, "ampc.bit_shift",
                   {nc.i64("left", direction == "LEFT" ? 1 : 0)});
}

FailureOr<Outputs> importIsInf(NodeContext &nc) {
  return buildSame(nc, "ampc.is_inf",
                   {nc.i64("detect_negative", nc.getInt("detect_negative", 1)),
                    nc.i64("detect_positive", nc.getInt("detect_positive", 1))});
}

FailureOr<Outputs> importMod(NodeContext &nc) {
  return buildSame(nc, "ampc.mod", {nc.i64("fmod", nc.getInt("fmod", 0))});
}

/// PRelu: the slope broadcasts to x (numpy, from opset 7); a 1-D slope of
/// x's channel count that does not is a per-channel slope as opset 6 and
/// torch.nn.PReLU meant it, reshaped to (C, 1, ...).
FailureOr<Outputs> importPRelu(NodeContext &nc) {
  Value x = nc.input(0), slope = nc.input(1);
  auto xt = cast<RankedTensorType>(x.getType());
  auto st = cast<RankedTensorType>(slope.getType());
  if (!ampc::broadcastShapes({xt.getShape(), st.getShape()}) &&
      st.getRank() == 1 && xt.getRank() >= 2 &&
      st.getDimSize(0) == xt.getDimSize(1)) {
    SmallVector<int64_t> shape(xt.getRank() - 1, 1);
    shape[0] = st.getDimSize(0);
    FailureOr<Outputs> r = nc.build("ampc.reshape", slope, {}, 1,
                                    st.clone(shape));
    if (failed(r))
      return failure();
    slope = (*r)[0];
  }
  return nc.build("ampc.prelu", {x, slope});
}

/// Max, Min, Sum and Mean: one input is itself; more fold left through the
/// binary op (`opName`), broadcasting as they go; Mean then divides by the
/// count.
FailureOr<Outputs> variadic(NodeContext &nc, StringRef opName,
                            bool mean = false) {
  Value acc = nc.input(0);
  for (size_t i = 1; i < nc.inputs.size(); ++i) {
    FailureOr<Outputs> next = nc.build(opName, {acc, nc.input(i)});
    if (failed(next))
      return failure();
    acc = (*next)[0];
  }
  if (!mean || nc.inputs.size() == 1)
    return Outputs{acc};
  auto type = cast<RankedTensorType>(acc.getType());
  auto scalar = RankedTensorType::get({}, type.getElementType());
  FailureOr<Outputs> count = constant(
      nc, DenseElementsAttr::get(
              scalar, nc.b.getFloatAttr(type.getElementType(),
                                        static_cast<double>(nc.inputs.size()))));
  if (failed(count))
    return failure();
  return nc.build("ampc.div", {acc, (*count)[0]});
}
FailureOr<Outputs> importMax(NodeContext &nc) { return variadic(nc, "ampc.max"); }
FailureOr<Outputs> importMin(NodeContext &nc) { return variadic(nc, "ampc.min"); }
FailureOr<Outputs> importSum(NodeContext &nc) { return variadic(nc, "ampc.add"); }
FailureOr<Outputs> importMean(NodeContext &nc) {
  return variadic(nc, "ampc.add", /*mean=*/true);
}

/// Clip: the bounds are inputs 1 and 2 from opset 11 (attributes min and
/// max before); a missing bound is the type's extreme, so ampc.clip always
/// has both.
FailureOr<Outputs> importClip(NodeContext &nc) {
  Value x = nc.input(0);
  Type element = cast<RankedTensorType>(x.getType()).getElementType();
  auto scalar = RankedTensorType::get({}, element);
  auto bound = [&](size_t index, StringRef name, bool upper) -> Value {
    if (nc.opset >= 11) {
      if (Value v = nc.input(index))
        return v;
    } else if (nc.attr(name)) {
      FailureOr<Outputs> c = constant(
          nc, DenseElementsAttr::get(
                  scalar, nc.b.getFloatAttr(element, nc.getFloat(name, 0))));
      return failed(c) ? Value() : (*c)[0];
    }
    Attribute extreme;
    if (auto f = dyn_cast<FloatType>(element))
      extreme = nc.b.getFloatAttr(
          element, APFloat::getInf(f.getFloatSemantics(), /*Negative=*/!upper));
    else if (auto i = dyn_cast<IntegerType>(element))
      extreme = nc.b.getIntegerAttr(
          element, upper ? (i.isUnsigned() ? APInt::getMaxValue(i.getWidth())
                                           : APInt::getSignedMaxValue(i.getWidth()))
                         : (i.isUnsigned() ? APInt::getMinValue(i.getWidth())
                                           : APInt::getSignedMinValue(i.getWidth())));
    else
      return Value();
    FailureOr<Outputs> c =
        constant(nc, DenseElementsAttr::get(scalar, extreme));
    return failed(c) ? Value() : (*c)[0];
  };
  Value lo = bound(1, "min", false), hi = bound(2, "max", true);
  if (!lo || !hi)
    return nc.error("Clip needs a float or integer input");
  return nc.build("ampc.clip", {x, lo, hi});
}

/// CastLike: a Cast to input 1's element type.
FailureOr<Outputs> importCastLike(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  Type element = cast<RankedTensorType>(nc.input(1).getType()).getElementType();
  return nc.build("ampc.cast", nc.input(0), {}, 1, in.clone(element));
}

FailureOr<Outputs> importCast(NodeContext &nc) {
  if (!nc.attr("to"))
    return nc.error("attribute 'to' is required");
  int64_t to = nc.getInt("to", 0);
  Type element = elementTypeFromOnnx(nc.b.getContext(), to);
  if (!element)
    return nc.error("cannot cast to unsupported type " + onnxTypeName(to));
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  return nc.build("ampc.cast", nc.input(0), {}, 1,
                  RankedTensorType::get(in.getShape(), element));
}

FailureOr<Outputs> importGemm(NodeContext &nc) {
  return buildSame(nc, "ampc.gemm",
                   {nc.f32("alpha", nc.getFloat("alpha", 1.0f)),
                    nc.f32("beta", nc.getFloat("beta", 1.0f)),
                    nc.i64("transA", nc.getInt("transA", 0)),
                    nc.i64("transB", nc.getInt("transB", 0)),
                    gemmSegments(nc, llvm::count_if(nc.inputs, [](Value v) {
                                   return static_cast<bool>(v);
                                 }))});
}

/// Resolves `auto_pad` into explicit pads (begins, then ends) for a window op
/// whose spatial input sizes, kernel, strides and dilations are given.
FailureOr<SmallVector<int64_t>>
resolvePads(NodeContext &nc, ArrayRef<int64_t> spatial, ArrayRef<int64_t> kernel,
            ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations) {
  std::string autoPad = nc.getString("auto_pad", "NOTSET");
  size_t n = spatial.size();
  if (autoPad == "NOTSET") {
    SmallVector<int64_t> pads =
        nc.getInts("pads").value_or(SmallVector<int64_t>(2 * n, 0));
    return pads;
  }
  if (nc.attr("pads"))
    {
      (void)nc.error("'pads' and auto_pad '" + autoPad +
                    "' must not both be given");
      return failure();
    }
  SmallVector<int64_t> pads(2 * n, 0);
  if (autoPad == "VALID")
    return pads;
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    {
      (void)nc.error("'auto_pad' must be NOTSET, VALID, SAME_UPPER or "
                    "SAME_LOWER, got '" +
                    autoPad + "'");
      return failure();
    }
  if (kernel.size() != n || strides.size() != n || dilations.size() != n)
    {
      (void)nc.error("window attributes do not match " + Twine(n) +
                    " spatial dimensions");
      return failure();
    }
  for (size_t i = 0; i < n; ++i) {
    if (strides[i] < 1)
      {
      (void)nc.error("'strides' values must be >= 1");
      return failure();
    }
    // In 128 bits: kernel, strides and dilations are the model's numbers
    // (a dilation of 2^62 over a kernel of 3 passes 2^63).
    using Wide = __int128;
    Wide out = (Wide(spatial[i]) + strides[i] - 1) / strides[i];
    Wide span = (Wide(kernel[i]) - 1) * dilations[i] + 1;
    Wide total = std::max<Wide>(0, (out - 1) * strides[i] + span - spatial[i]);
    if (total > std::numeric_limits<int64_t>::max()) {
      (void)nc.error("auto_pad '" + autoPad + "': the padding of spatial dim " +
                     Twine(i) + " (kernel " + Twine(kernel[i]) +
                     ", stride " + Twine(strides[i]) + ", dilation " +
                     Twine(dilations[i]) + ") does not fit in int64");
      return failure();
    }
    int64_t small = static_cast<int64_t>(total / 2),
            large = static_cast<int64_t>(total) - small;
    pads[i] = autoPad == "SAME_UPPER" ? small : large;
    pads[i + n] = autoPad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

FailureOr<Outputs> importConv(NodeContext &nc) {
  auto x = cast<RankedTensorType>(nc.input(0).getType());
  auto w = cast<RankedTensorType>(nc.input(1).getType());
  if (x.getRank() < 3 || w.getRank() != x.getRank())
    return nc.error("X " + formatDims(x.getShape()) + " and W " +
                    formatDims(w.getShape()) +
                    " must be (N, C, spatial...) and (M, C/group, kernel...)");
  size_t n = x.getRank() - 2;
  SmallVector<int64_t> kernel(w.getShape().drop_front(2));
  if (auto ks = nc.getInts("kernel_shape"); ks && *ks != kernel)
    return nc.error("'kernel_shape' " + formatDims(*ks) +
                    " differs from the weight's spatial shape " +
                    formatDims(kernel));
  SmallVector<int64_t> strides =
      nc.getInts("strides").value_or(SmallVector<int64_t>(n, 1));
  SmallVector<int64_t> dilations =
      nc.getInts("dilations").value_or(SmallVector<int64_t>(n, 1));
  FailureOr<SmallVector<int64_t>> pads =
      resolvePads(nc, x.getShape().drop_front(2), kernel, strides, dilations);
  if (failed(pads))
    return failure();
  return buildSame(nc, "ampc.conv",
                   {nc.ints("strides", strides), nc.ints("pads", *pads),
                    nc.ints("dilations", dilations),
                    nc.i64("group", nc.getInt("group", 1))});
}

/// MaxPool and AveragePool share their window attributes.
FailureOr<SmallVector<NamedAttribute>> poolAttributes(NodeContext &nc) {
  auto x = cast<RankedTensorType>(nc.input(0).getType());
  if (x.getRank() < 3)
    {
      (void)nc.error("X must be (N, C, spatial...), got " +
                    formatDims(x.getShape()));
      return failure();
    }
  size_t n = x.getRank() - 2;
  std::optional<SmallVector<int64_t>> kernel = nc.getInts("kernel_shape");
  if (!kernel)
    {
      (void)nc.error("attribute 'kernel_shape' is required");
      return failure();
    }
  SmallVector<int64_t> strides =
      nc.getInts("strides").value_or(SmallVector<int64_t>(n, 1));
  SmallVector<int64_t> dilations =
      nc.getInts("dilations").value_or(SmallVector<int64_t>(n, 1));
  FailureOr<SmallVector<int64_t>> pads =
      resolvePads(nc, x.getShape().drop_front(2), *kernel, strides, dilations);
  if (failed(pads))
    return failure();
  return SmallVector<NamedAttribute>{
      nc.ints("kernel_shape", *kernel), nc.ints("strides", strides),
      nc.ints("pads", *pads), nc.ints("dilations", dilations),
      nc.i64("ceil_mode", nc.getInt("ceil_mode", 0))};
}

FailureOr<Outputs> importMaxPool(NodeContext &nc) {
  FailureOr<SmallVector<NamedAttribute>> attrs = poolAttributes(nc);
  if (failed(attrs))
    return failure();
  attrs->push_back(nc.i64("storage_order", nc.getInt("storage_order", 0)));
  return buildSame(nc, "ampc.max_pool", *attrs, 2);
}

FailureOr<Outputs> importAveragePool(NodeContext &nc) {
  FailureOr<SmallVector<NamedAttribute>> attrs = poolAttributes(nc);
  if (failed(attrs))
    return failure();
  attrs->push_back(
      nc.i64("count_include_pad", nc.getInt("count_include_pad", 0)));
  return buildSame(nc, "ampc.average_pool", *attrs);
}

FailureOr<Outputs> importSoftmax(NodeContext &nc) {
  return buildSame(nc, "ampc.softmax", {nc.i64("axis", nc.getInt("axis", -1))});
}

FailureOr<Outputs> importLogSoftmax(NodeContext &nc) {
  return buildSame(nc, "ampc.log_softmax",
                   {nc.i64("axis", nc.getInt("axis", -1))});
}

FailureOr<Outputs> importLayerNormalization(NodeContext &nc) {
  return buildSame(nc, "ampc.layer_normalization",
                   {nc.i64("axis", nc.getInt("axis", -1)),
                    nc.f32("epsilon", nc.getFloat("epsilon", 1e-5f)),
                    nc.i64("stash_type", nc.getInt("stash_type", 1))},
                   3);
}

FailureOr<Outputs> importBatchNormalization(NodeContext &nc) {
  if (nc.getInt("spatial", 1) != 1)
    return nc.error("'spatial' = 0 is not supported");
  int64_t training = nc.getInt("training_mode", 0);
  if (nc.opset < 14 && nc.numOutputs() > 1)
    return nc.error("the training outputs of BatchNormalization before opset "
                    "14 are not supported");
  return buildSame(nc, "ampc.batch_normalization",
                   {nc.f32("epsilon", nc.getFloat("epsilon", 1e-5f)),
                    nc.f32("momentum", nc.getFloat("momentum", 0.9f)),
                    nc.i64("training_mode", training)},
                   3);
}

FailureOr<Outputs> importDropout(NodeContext &nc) {
  float ratio = nc.getFloat("ratio", 0.5f);
  int64_t training = 0;
  if (nc.opset >= 12) {
    if (nc.input(1)) {
      FailureOr<DenseElementsAttr> r = nc.constantInput(1, "ratio");
      if (failed(r))
        return failure();
      if (!isa<FloatType>(r->getElementType()) || r->getNumElements() != 1)
        return nc.error("input 1 (ratio) must be a float scalar");
      ratio = (*r->getValues<APFloat>().begin()).convertToFloat();
    }
    if (nc.input(2)) {
      FailureOr<DenseElementsAttr> t = nc.constantInput(2, "training_mode");
      if (failed(t))
        return failure();
      if (!t->getElementType().isInteger(1) || t->getNumElements() != 1)
        return nc.error("input 2 (training_mode) must be a bool scalar");
      training = *t->getValues<bool>().begin();
    }
  }
  SmallVector<NamedAttribute> attrs = {nc.f32("ratio", ratio),
                                       nc.i64("training_mode", training)};
  if (nc.attr("seed"))
    attrs.push_back(nc.i64("seed", nc.getInt("seed", 0)));
  FailureOr<Outputs> results = nc.build("ampc.dropout", nc.input(0), attrs, 2);
  if (failed(results) || nc.opset >= 10 || !nc.outputUsed(1))
    return results;
  // Before opset 10 the mask has the data's float type, not bool.
  FailureOr<Outputs> mask = nc.build("ampc.cast", (*results)[1], {}, 1,
                                     nc.input(0).getType());
  if (failed(mask))
    return failure();
  return Outputs{(*results)[0], (*mask)[0]};
}

FailureOr<Outputs> importReshape(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> target = nc.constantInts(1, "shape");
  if (failed(target))
    return failure();
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  bool allowZero = nc.getInt("allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  int64_t known = 1, inferred = -1;
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= in.getRank())
        return nc.error("shape " + formatDims(*target) + " copies dim " +
                        Twine(i) + " of a rank-" + Twine(in.getRank()) +
                        " input");
      d = in.getDimSize(i);
    }
    if (d == -1) {
      if (inferred >= 0)
        return nc.error("shape " + formatDims(*target) + " has more than one -1");
      inferred = i;
    } else if (d < 0) {
      return nc.error("shape " + formatDims(*target) + " has invalid dim " +
                      Twine(d));
    } else if (llvm::MulOverflow(known, d, known)) {
      return nc.error("shape " + formatDims(*target) + " has more than 2^63 "
                      "elements");
    }
    shape.push_back(d);
  }
  if (inferred >= 0) {
    if (known == 0 || in.getNumElements() % known != 0)
      return nc.error("cannot reshape " + formatDims(in.getShape()) + " to " +
                      formatDims(*target));
    shape[inferred] = in.getNumElements() / known;
  }
  return nc.build("ampc.reshape", nc.input(0), {}, 1,
                  RankedTensorType::get(shape, in.getElementType()));
}

FailureOr<Outputs> importExpand(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> target = nc.constantInts(1, "shape");
  if (failed(target))
    return failure();
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (llvm::any_of(*target, [](int64_t d) { return d < 0; }))
    return nc.error("shape " + formatDims(*target) + " has a negative dim");
  std::optional<SmallVector<int64_t>> shape =
      ampc::broadcastShapes({in.getShape(), *target});
  if (!shape)
    return nc.error("cannot expand " + formatDims(in.getShape()) + " to " +
                    formatDims(*target));
  return nc.build("ampc.expand", nc.input(0), {}, 1,
                  RankedTensorType::get(*shape, in.getElementType()));
}

FailureOr<Outputs> importTranspose(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  SmallVector<int64_t> perm;
  if (auto p = nc.getInts("perm"))
    perm = *p;
  else
    for (int64_t i = in.getRank() - 1; i >= 0; --i)
      perm.push_back(i);
  return buildSame(nc, "ampc.transpose", {nc.ints("perm", perm)});
}

FailureOr<Outputs> importFlatten(NodeContext &nc) {
  return buildSame(nc, "ampc.flatten", {nc.i64("axis", nc.getInt("axis", 1))});
}

/// Squeeze/Unsqueeze/Reduce*: axes from the attribute (older opsets) or from
/// the constant input 1 (newer ones).
FailureOr<SmallVector<int64_t>> axesOf(NodeContext &nc, int64_t inputSince) {
  if (nc.opset >= inputSince) {
    if (nc.attr("axes"))
      {
      (void)nc.error("'axes' is an input from opset " + Twine(inputSince) +
                      ", not an attribute");
      return failure();
    }
    if (!nc.input(1))
      return SmallVector<int64_t>();
    return nc.constantInts(1, "axes");
  }
  if (nc.inputs.size() > 1)
    {
      (void)nc.error("takes 'axes' as an attribute before opset " +
                    Twine(inputSince));
      return failure();
    }
  return nc.getInts("axes").value_or(SmallVector<int64_t>());
}

FailureOr<Outputs> importSqueeze(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> axes = axesOf(nc, 13);
  if (failed(axes))
    return failure();
  return nc.build("ampc.squeeze", nc.input(0), {nc.ints("axes", *axes)});
}

FailureOr<Outputs> importUnsqueeze(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> axes = axesOf(nc, 13);
  if (failed(axes))
    return failure();
  if (axes->empty())
    return nc.error("'axes' must not be empty");
  return nc.build("ampc.unsqueeze", nc.input(0), {nc.ints("axes", *axes)});
}

FailureOr<Outputs> importConcat(NodeContext &nc) {
  if (!nc.attr("axis"))
    return nc.error("attribute 'axis' is required");
  return buildSame(nc, "ampc.concat", {nc.i64("axis", nc.getInt("axis", 0))});
}

FailureOr<Outputs> importSlice(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> starts = nc.constantInts(1, "starts");
  if (failed(starts))
    return failure();
  FailureOr<SmallVector<int64_t>> ends = nc.constantInts(2, "ends");
  if (failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps(starts->size(), 1);
  for (size_t i = 0; i < starts->size(); ++i)
    axes.push_back(i);
  if (nc.input(3)) {
    FailureOr<SmallVector<int64_t>> a = nc.constantInts(3, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  }
  if (nc.input(4)) {
    FailureOr<SmallVector<int64_t>> s = nc.constantInts(4, "steps");
    if (failed(s))
      return failure();
    steps = *s;
  }
  return nc.build("ampc.slice", nc.input(0),
                  {nc.ints("starts", *starts), nc.ints("ends", *ends),
                   nc.ints("axes", axes), nc.ints("steps", steps)});
}

FailureOr<Outputs> importGather(NodeContext &nc) {
  return buildSame(nc, "ampc.gather", {nc.i64("axis", nc.getInt("axis", 0))});
}

template <int64_t AxesInputSince>
FailureOr<Outputs> importReduce(NodeContext &nc, StringRef opName) {
  FailureOr<SmallVector<int64_t>> axes = axesOf(nc, AxesInputSince);
  if (failed(axes))
    return failure();
  if (axes->empty() && nc.getInt("noop_with_empty_axes", 0))
    return Outputs{nc.input(0)};
  return nc.build(opName, nc.input(0),
                  {nc.ints("axes", *axes),
                   nc.i64("keepdims", nc.getInt("keepdims", 1))});
}

FailureOr<Outputs> importReduceMean(NodeContext &nc) {
  return importReduce<18>(nc, "ampc.reduce_mean");
}
FailureOr<Outputs> importReduceMax(NodeContext &nc) {
  return importReduce<18>(nc, "ampc.reduce_max");
}
FailureOr<Outputs> importReduceSum(NodeContext &nc) {
  return importReduce<13>(nc, "ampc.reduce_sum");
}

//===----------------------------------------------------------------------===//
// Ops imported as compositions of ampc ops: their kernels, precision
// categories and gradient rules are those of the parts (docs/ops.md).
//===----------------------------------------------------------------------===//

} // namespace

// The parts every composition uses (ImportRules.h).
namespace ampc::detail {

/// ampc.gemm's operand segments (A, B, the optional C, no ReLU mask) for
/// `operands` operands, built by name.
NamedAttribute gemmSegments(NodeContext &nc, size_t operands) {
  return nc.b.getNamedAttr(
      "operandSegmentSizes",
      nc.b.getDenseI32ArrayAttr({1, 1, operands > 2 ? 1 : 0, 0}));
}

Value part(NodeContext &nc, StringRef opName, ValueRange operands,
           ArrayRef<NamedAttribute> attrs, Type resultType) {
  if (llvm::any_of(operands, [](Value v) { return !v; }))
    return Value();
  FailureOr<Outputs> r =
      resultType ? nc.build(opName, operands, attrs, 1, resultType)
                 : nc.build(opName, operands, attrs);
  return failed(r) ? Value() : (*r)[0];
}

Value scalarOf(NodeContext &nc, Type element, double value) {
  auto type = RankedTensorType::get({}, element);
  Attribute attr = isa<FloatType>(element)
                       ? Attribute(nc.b.getFloatAttr(element, value))
                       : Attribute(nc.b.getIntegerAttr(
                             element, static_cast<int64_t>(value)));
  FailureOr<Outputs> c = constant(nc, DenseElementsAttr::get(type, attr));
  return failed(c) ? Value() : (*c)[0];
}

Value reshaped(NodeContext &nc, Value v, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  return part(nc, "ampc.reshape", v, {}, type.clone(shape));
}

Value transposed(NodeContext &nc, Value v, ArrayRef<int64_t> perm) {
  if (!v || llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return v;
  return part(nc, "ampc.transpose", v, {nc.ints("perm", perm)});
}

FailureOr<Outputs> constant(NodeContext &nc, DenseElementsAttr value) {
  return nc.build("ampc.constant", {}, {nc.b.getNamedAttr("value", value)});
}

LogicalResult checkComputedConstant(NodeContext &nc, ArrayRef<int64_t> shape,
                                    Type element, const Twine &what) {
  std::optional<int64_t> count = ampc::checkedProduct(shape);
  if (!count)
    return nc.error(what + ": a constant of shape " + formatDims(shape) +
                    ", more than 2^63 elements");
  if (*count > kMaxComputedElements)
    return nc.error(what + ": a constant of " + Twine(*count) +
                    " elements, more than the 2^24 (" +
                    Twine(kMaxComputedElements) +
                    ") that ampc computes at import");
  if (std::string problem = ampc::checkTensorSize(
          RankedTensorType::get(shape, element), nc.importer.maxTensorBytes());
      !problem.empty())
    return nc.error(what + ": the constant " + problem +
                    " (--max-tensor-bytes)");
  return success();
}

} // namespace ampc::detail

namespace {

/// column - row for a rows x cols matrix, as an int64 (rows, cols) value
/// computed from two index vectors (constants of rows + cols elements, so
/// that a huge matrix costs no huge constant at import).
Value diagonalOffsets(NodeContext &nc, int64_t rows, int64_t cols) {
  auto indices = [&](int64_t n, ArrayRef<int64_t> shape) -> Value {
    if (failed(checkComputedConstant(nc, shape, nc.b.getI64Type(),
                                     "an index vector of " + Twine(n) +
                                         " elements")))
      return Value();
    SmallVector<int64_t> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = i;
    auto type = RankedTensorType::get(shape, nc.b.getI64Type());
    FailureOr<Outputs> c =
        constant(nc, DenseElementsAttr::get(type, ArrayRef<int64_t>(values)));
    return failed(c) ? Value() : (*c)[0];
  };
  Value row = indices(rows, {rows, 1}), col = indices(cols, {1, cols});
  if (!row || !col)
    return Value();
  return part(nc, "ampc.sub", {col, row});
}

/// The int64 (or, for a float `element`, f64) constant 0, step, 2 step, ...
/// of `n` elements, shaped `shape` (n elements in all).
Value indexVector(NodeContext &nc, int64_t n, ArrayRef<int64_t> shape,
                  Type element, int64_t step = 1) {
  if (failed(checkComputedConstant(nc, shape, element,
                                   "an index vector of " + Twine(n) +
                                       " elements")))
    return Value();
  // The last value must fit too (a step of 2^62 over 4 elements wraps).
  int64_t last;
  if (n > 0 && llvm::MulOverflow(n - 1, step, last)) {
    (void)nc.error("an index vector of " + Twine(n) + " elements in steps of " +
                   Twine(step) + " goes past 2^63");
    return Value();
  }
  auto type = RankedTensorType::get(shape, element);
  DenseElementsAttr value;
  if (isa<FloatType>(element)) {
    SmallVector<double> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = static_cast<double>(i * step);
    value = DenseElementsAttr::get(type, ArrayRef<double>(values));
  } else {
    SmallVector<int64_t> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = i * step;
    value = DenseElementsAttr::get(type, ArrayRef<int64_t>(values));
  }
  FailureOr<Outputs> c = constant(nc, value);
  return failed(c) ? Value() : (*c)[0];
}

/// `shape` with ones everywhere but `n` at `axis` (and at `axis2` when
/// given): a vector along `axis` that broadcasts against a tensor of rank
/// `rank`.
SmallVector<int64_t> alongAxes(int64_t rank, int64_t n, int64_t axis,
                               int64_t axis2 = -1) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = n;
  if (axis2 >= 0)
    shape[axis2] = n;
  return shape;
}

/// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp and
/// ReduceMin: ReduceSum (ReduceMax for Min) of an elementwise function of
/// the input, then one of the result. LogSumExp subtracts the maximum
/// first (kept dims), as every stable implementation does.
FailureOr<Outputs> importComposedReduce(NodeContext &nc, StringRef kind) {
  FailureOr<SmallVector<int64_t>> axes = axesOf(nc, 18);
  if (failed(axes))
    return failure();
  Value x = nc.input(0);
  bool noop = axes->empty() && nc.getInt("noop_with_empty_axes", 0);
  int64_t keep = nc.getInt("keepdims", 1);
  auto reduce = [&](StringRef op, Value v, int64_t keepDims) {
    if (noop)
      return v;
    return part(nc, op, v,
                {nc.ints("axes", *axes), nc.i64("keepdims", keepDims)});
  };
  auto unary = [&](StringRef op, Value v) {
    return v ? part(nc, op, v) : Value();
  };
  Value r;
  if (kind == "ReduceSumSquare" || kind == "ReduceL2") {
    r = reduce("ampc.reduce_sum", part(nc, "ampc.mul", {x, x}), keep);
    if (kind == "ReduceL2")
      r = unary("ampc.sqrt", r);
  } else if (kind == "ReduceL1") {
    r = reduce("ampc.reduce_sum", unary("ampc.abs", x), keep);
  } else if (kind == "ReduceLogSum") {
    r = unary("ampc.log", reduce("ampc.reduce_sum", x, keep));
  } else if (kind == "ReduceMin") {
    // min = flip(max(flip(x))) for an order-reversing flip that is its own
    // inverse: -x for floats; for integers ~x, as c - x with c = -1
    // (signed) or the largest value (unsigned), which never overflows
    // (-x does at the smallest signed value).
    Type element = cast<RankedTensorType>(x.getType()).getElementType();
    Value c;
    if (auto i = dyn_cast<IntegerType>(element)) {
      APInt all = APInt::getAllOnes(i.getWidth()); // -1, or the largest
      FailureOr<Outputs> k = constant(
          nc, DenseElementsAttr::get(RankedTensorType::get({}, element),
                                     ArrayRef<APInt>(all)));
      if (failed(k))
        return failure();
      c = (*k)[0];
    }
    auto flip = [&](Value v) {
      if (!v || !c)
        return unary("ampc.neg", v);
      return part(nc, "ampc.sub", {c, v});
    };
    r = flip(reduce("ampc.reduce_max", flip(x), keep));
  } else { // ReduceLogSumExp
    Value max = reduce("ampc.reduce_max", x, 1);
    Value shifted = part(nc, "ampc.sub", {x, max});
    Value sum = reduce("ampc.reduce_sum", unary("ampc.exp", shifted), 1);
    r = part(nc, "ampc.add", {unary("ampc.log", sum), max});
    if (r && !keep && !noop) {
      // The kept-dims result without the reduced dimensions.
      auto in = cast<RankedTensorType>(x.getType());
      SmallVector<int64_t> shape;
      for (int64_t d = 0; d < in.getRank(); ++d) {
        bool reduced = axes->empty() || llvm::any_of(*axes, [&](int64_t a) {
          return ampc::normalizeAxis(a, in.getRank()) == d;
        });
        if (!reduced)
          shape.push_back(in.getDimSize(d));
      }
      r = reshaped(nc, r, shape);
    }
  }
  if (!r)
    return failure();
  return Outputs{r};
}
FailureOr<Outputs> importReduceL1(NodeContext &nc) {
  return importComposedReduce(nc, "ReduceL1");
}
FailureOr<Outputs> importReduceL2(NodeContext &nc) {
  return importComposedReduce(nc, "ReduceL2");
}
FailureOr<Outputs> importReduceSumSquare(NodeContext &nc) {
  return importComposedReduce(nc, "ReduceSumSquare");
}
FailureOr<Outputs> importReduceLogSum(NodeContext &nc) {
  return importComposedReduce(nc, "ReduceLogSum");
}
FailureOr<Outputs> importReduceLogSumExp(NodeContext &nc) {
  return importComposedReduce(nc, "ReduceLogSumExp");
}
FailureOr<Outputs> importReduceMin(NodeContext &nc) {
  auto element = cast<RankedTensorType>(nc.input(0).getType()).getElementType();
  if (element.isInteger(1))
    return nc.error("ReduceMin of boolean data is not supported (it is "
                    "computed as ~ReduceMax(~x))");
  return importComposedReduce(nc, "ReduceMin");
}

//===----------------------------------------------------------------------===//
// Quantization: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear
// as compositions (Div, Round, Add, Clip, Cast; Sub, Mul; the reductions).
// Round is not differentiable, so a quantized value alone is a constant to
// autodiff; a QuantizeLinear its DequantizeLinear takes back is fake
// quantization, with torch's straight-through gradient (below).
//===----------------------------------------------------------------------===//

/// A per-axis scale or zero point `v` (1-D of the length of x's `axis`)
/// reshaped to broadcast along that axis; a scalar (or one value) as a
/// scalar, whatever the axis (ONNX reads it only for per-axis values).
/// Null after an error at the node.
Value alongAxis(NodeContext &nc, Value v, RankedTensorType x, StringRef what) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getRank() == 0 || (t.getRank() == 1 && t.getDimSize(0) == 1))
    return t.getRank() == 0 ? v : reshaped(nc, v, {});
  std::optional<int64_t> axis =
      ampc::normalizeAxis(nc.getInt("axis", 1), x.getRank());
  if (!axis) {
    (void)nc.error("axis " + Twine(nc.getInt("axis", 1)) +
                   " is out of range for rank " + Twine(x.getRank()));
    return Value();
  }
  int64_t length = x.getDimSize(*axis);
  if (t.getRank() != 1 || t.getDimSize(0) != length) {
    (void)nc.error(what + " must be a scalar or hold " + Twine(length) +
                   " values (the length of axis " + Twine(*axis) + "), got " +
                   formatDims(t.getShape()));
    return Value();
  }
  SmallVector<int64_t> shape(x.getRank() - *axis, 1);
  shape[0] = length;
  return reshaped(nc, v, shape);
}

/// The scale and zero point of a (De)QuantizeLinear node, broadcast along
/// its axis, the zero point as the scale's float type (null where absent);
/// false after an error.
bool quantizationParameters(NodeContext &nc, Value x, Value &scale,
                            Value &zeroFloat) {
  auto in = cast<RankedTensorType>(x.getType());
  scale = alongAxis(nc, nc.input(1), in, "the scale");
  if (!scale)
    return false;
  zeroFloat = Value();
  if (Value zp = nc.input(2)) {
    zp = alongAxis(nc, zp, in, "the zero point");
    if (!zp)
      return false;
    auto zt = cast<RankedTensorType>(zp.getType());
    zeroFloat = part(nc, "ampc.cast", zp, {},
                     zt.clone(cast<RankedTensorType>(scale.getType())
                                  .getElementType()));
    return bool(zeroFloat);
  }
  return true;
}

/// saturate(round(x / scale) + zero point) as `element` (uint8 or int8);
/// `inRange`, where given, gets where the unsaturated value was in range.
Value quantize(NodeContext &nc, Value x, Value scale, Value zeroFloat,
               IntegerType element, Value *inRange = nullptr) {
  Type f = cast<RankedTensorType>(x.getType()).getElementType();
  Value q = part(nc, "ampc.round", part(nc, "ampc.div", {x, scale}));
  if (zeroFloat)
    q = part(nc, "ampc.add", {q, zeroFloat});
  bool isUnsigned = element.isUnsigned();
  double lo = isUnsigned ? 0.0 : -128.0, hi = isUnsigned ? 255.0 : 127.0;
  Value loV = scalarOf(nc, f, lo), hiV = scalarOf(nc, f, hi);
  if (inRange)
    *inRange = part(nc, "ampc.and",
                    {part(nc, "ampc.greater_or_equal", {q, loV}),
                     part(nc, "ampc.less_or_equal", {q, hiV})});
  q = part(nc, "ampc.clip", {q, loV, hiV});
  if (!q)
    return Value();
  return part(nc, "ampc.cast", q, {},
              cast<RankedTensorType>(q.getType()).clone(element));
}

/// The 8-bit integer type of a quantized tensor, or an error.
FailureOr<IntegerType> quantizedType(NodeContext &nc, Type t, StringRef what) {
  auto i = dyn_cast<IntegerType>(t);
  if (i && i.getWidth() == 8)
    return i;
  std::string text;
  llvm::raw_string_ostream(text) << t;
  return nc.error(what + " must be uint8 or int8, got " + text);
}

FailureOr<Outputs> importQuantizeLinear(NodeContext &nc) {
  Value x = nc.input(0), scale, zeroFloat;
  if (!quantizationParameters(nc, x, scale, zeroFloat))
    return failure();
  // int32 data (opsets 10 to 18) is quantized as the scale's float type.
  auto xt = cast<RankedTensorType>(x.getType());
  Type f = cast<RankedTensorType>(scale.getType()).getElementType();
  if (isa<IntegerType>(xt.getElementType()))
    x = part(nc, "ampc.cast", x, {}, xt.clone(f));
  // Without a zero point the result is uint8 (ONNX's default).
  Type element = nc.input(2)
                     ? cast<RankedTensorType>(nc.input(2).getType())
                           .getElementType()
                     : IntegerType::get(nc.b.getContext(), 8,
                                        IntegerType::Unsigned);
  FailureOr<IntegerType> q = quantizedType(nc, element, "the zero point");
  if (failed(q))
    return failure();
  Value inRange;
  Value r = quantize(nc, x, scale, zeroFloat, *q, &inRange);
  if (!r || !inRange)
    return failure();
  nc.importer.quantized[r] = {x, inRange, nc.input(1), nc.input(2)};
  return Outputs{r};
}

FailureOr<Outputs> importDequantizeLinear(NodeContext &nc) {
  Value x = nc.input(0), scale, zeroFloat;
  if (!quantizationParameters(nc, x, scale, zeroFloat))
    return failure();
  auto in = cast<RankedTensorType>(x.getType());
  Value y = part(nc, "ampc.cast", x, {},
                 in.clone(cast<RankedTensorType>(scale.getType())
                              .getElementType()));
  if (zeroFloat)
    y = part(nc, "ampc.sub", {y, zeroFloat});
  y = part(nc, "ampc.mul", {y, scale});
  if (!y)
    return failure();
  // A QuantizeLinear's result dequantized with its own scale and zero
  // point is fake quantization (what torch exports for quantization-aware
  // training): the gradient passes straight through to the float input
  // where it was in range (torch's fake_quantize backward), and the scale
  // is frozen (torch's observers set it; a zero point is an integer
  // initializer, a constant already).
  auto found = nc.importer.quantized.find(x);
  if (found != nc.importer.quantized.end() &&
      found->second.scale == nc.input(1) &&
      found->second.zeroPoint == nc.input(2)) {
    const auto &q = found->second;
    // q.input has y's type: QuantizeLinear divided it by this same scale.
    Value pass = part(nc, "ampc.sub",
                      {q.input, part(nc, "ampc.stop_gradient", q.input)});
    Value zero = scalarOf(nc, cast<RankedTensorType>(y.getType())
                                  .getElementType(), 0.0);
    y = part(nc, "ampc.add",
             {y, part(nc, "ampc.where", {q.inRange, pass, zero})});
    if (!y)
      return failure();
    nc.importer.freezeParameter(nc.input(1));
  }
  return Outputs{y};
}

/// DynamicQuantizeLinear: uint8 with the scale and zero point of x's range
/// widened to hold 0: scale = (max(x, 0) - min(x, 0)) / 255, zero point =
/// round(clip(-min / scale, 0, 255)).
FailureOr<Outputs> importDynamicQuantizeLinear(NodeContext &nc) {
  Value x = nc.input(0);
  Type f = cast<RankedTensorType>(x.getType()).getElementType();
  if (!isa<FloatType>(f)) {
    std::string text;
    llvm::raw_string_ostream(text) << f;
    return nc.error("x must be a float tensor, got " + text);
  }
  auto all = [&](StringRef op, Value v) {
    return part(nc, op, v,
                {nc.ints("axes", {}), nc.i64("keepdims", 0)});
  };
  Value zero = scalarOf(nc, f, 0.0);
  Value max = part(nc, "ampc.max", {all("ampc.reduce_max", x), zero});
  Value negMin = part(nc, "ampc.max",
                      {all("ampc.reduce_max", part(nc, "ampc.neg", x)), zero});
  Value scale = part(nc, "ampc.div",
                     {part(nc, "ampc.add", {max, negMin}), scalarOf(nc, f, 255.0)});
  Value zeroFloat = part(
      nc, "ampc.round",
      part(nc, "ampc.clip", {part(nc, "ampc.div", {negMin, scale}), zero,
                             scalarOf(nc, f, 255.0)}));
  auto u8 = IntegerType::get(nc.b.getContext(), 8, IntegerType::Unsigned);
  Value y = quantize(nc, x, scale, zeroFloat, u8);
  Value zp = zeroFloat ? part(nc, "ampc.cast", zeroFloat, {},
                              RankedTensorType::get({}, u8))
                       : Value();
  if (!y || !zp)
    return failure();
  return Outputs{y, scale, zp};
}

/// Size: the element count, known at compile time.
FailureOr<Outputs> importSize(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  auto type = RankedTensorType::get({}, nc.b.getI64Type());
  return constant(nc, DenseElementsAttr::get(
                          type, nc.b.getI64IntegerAttr(in.getNumElements())));
}

/// Trilu: Where over a mask of the last two dimensions (upper: column -
/// row >= k, lower: column - row <= k; folded to a constant when small),
/// zero elsewhere.
FailureOr<Outputs> importTrilu(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() < 2)
    return nc.error("Trilu needs a tensor of rank 2 or more");
  int64_t k = 0;
  if (nc.input(1)) {
    FailureOr<SmallVector<int64_t>> kv = nc.constantInts(1, "k");
    if (failed(kv))
      return failure();
    if (kv->size() != 1)
      return nc.error("input 1 (k) must hold one value");
    k = (*kv)[0];
  }
  bool upper = nc.getInt("upper", 1) != 0;
  int64_t rows = in.getDimSize(in.getRank() - 2),
          cols = in.getDimSize(in.getRank() - 1);
  Value offsets = diagonalOffsets(nc, rows, cols);
  // column - row lies in [1 - rows, cols - 1]: k clamped to [-rows, cols]
  // compares alike, and is exact as the double scalarOf takes (INT64_MAX
  // is not: it became INT64_MIN, and an upper Trilu kept everything).
  Value kValue = scalarOf(nc, nc.b.getI64Type(),
                          static_cast<double>(std::clamp(k, -rows, cols)));
  Value zero = scalarOf(nc, in.getElementType(), 0);
  if (!offsets || !kValue || !zero)
    return failure();
  Value mask = part(nc, upper ? "ampc.greater_or_equal" : "ampc.less_or_equal",
                    {offsets, kValue});
  Value r = mask ? part(nc, "ampc.where", {mask, nc.input(0), zero}) : Value();
  if (!r)
    return failure();
  return Outputs{r};
}

/// Split: one Slice per output along `axis`, sizes from input 1 (opset
/// 13+), the `split` attribute, or `num_outputs` / the output count (the
/// last part smaller when it does not divide).
FailureOr<Outputs> importSplit(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  std::optional<int64_t> axis =
      ampc::normalizeAxis(nc.getInt("axis", 0), in.getRank());
  if (!axis)
    return nc.error("axis " + Twine(nc.getInt("axis", 0)) +
                    " is out of range for rank " + Twine(in.getRank()));
  int64_t dim = in.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  if (nc.input(1)) {
    FailureOr<SmallVector<int64_t>> s = nc.constantInts(1, "split");
    if (failed(s))
      return failure();
    sizes = *s;
  } else if (auto s = nc.getInts("split")) {
    sizes = *s;
  } else {
    int64_t n = nc.getInt("num_outputs", static_cast<int64_t>(nc.numOutputs()));
    if (n <= 0 || n != static_cast<int64_t>(nc.numOutputs()))
      return nc.error("cannot split into " + Twine(n) + " parts for " +
                      Twine(nc.numOutputs()) + " outputs");
    int64_t each = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(each, dim - i * each)));
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0 || llvm::AddOverflow(total, s, total))
      return nc.error("split sizes " + formatDims(sizes) +
                      " must be non-negative and sum to dim " + Twine(dim));
  }
  if (sizes.size() != nc.numOutputs() || total != dim)
    return nc.error("split sizes " + formatDims(sizes) + " do not cover dim " +
                    Twine(dim) + " in " + Twine(nc.numOutputs()) + " outputs");
  Outputs outs;
  int64_t start = 0;
  for (int64_t s : sizes) {
    Value v = part(nc, "ampc.slice", nc.input(0),
                   {nc.ints("starts", {start}), nc.ints("ends", {start + s}),
                    nc.ints("axes", {*axis}), nc.ints("steps", {1})});
    if (!v)
      return failure();
    outs.push_back(v);
    start += s;
  }
  return outs;
}

/// Tile: x reshaped to (1, d0, 1, d1, ...), expanded to (r0, d0, r1, d1,
/// ...), reshaped to (r0 d0, r1 d1, ...).
FailureOr<Outputs> importTile(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  FailureOr<SmallVector<int64_t>> repeats = nc.constantInts(1, "repeats");
  if (failed(repeats))
    return failure();
  if (static_cast<int64_t>(repeats->size()) != in.getRank())
    return nc.error("repeats " + formatDims(*repeats) + " must have one entry "
                    "per dimension of the rank-" + Twine(in.getRank()) +
                    " input");
  SmallVector<int64_t> interleaved, expanded, out;
  for (auto [d, r] : llvm::zip(in.getShape(), *repeats)) {
    int64_t tiled;
    if (r < 0 || llvm::MulOverflow(r, d, tiled))
      return nc.error("repeats " + formatDims(*repeats) +
                      " must be non-negative and keep every dim below 2^63");
    interleaved.append({1, d});
    expanded.append({r, d});
    out.push_back(tiled);
  }
  if (!ampc::checkedProduct(out))
    return nc.error("the tiled tensor has more than 2^63 elements");
  Value v = reshaped(nc, nc.input(0), interleaved);
  if (v)
    v = part(nc, "ampc.expand", v, {}, in.clone(expanded));
  if (v)
    v = reshaped(nc, v, out);
  if (!v)
    return failure();
  return Outputs{v};
}

/// DepthToSpace (DCR or CRD) and SpaceToDepth on NCHW: a reshape to six
/// dimensions, a transpose, a reshape back (as the ONNX definitions).
FailureOr<Outputs> importDepthSpace(NodeContext &nc, bool toSpace) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() != 4)
    return nc.error("needs an NCHW tensor of rank 4");
  int64_t b = nc.getInt("blocksize", 0);
  if (b <= 0)
    return nc.error("'blocksize' must be positive, got " + Twine(b));
  int64_t n = in.getDimSize(0), c = in.getDimSize(1), h = in.getDimSize(2),
          w = in.getDimSize(3);
  // blocksize^2 and the dimensions it multiplies are checked: a blocksize
  // of 2^32 squared wraps to 0 (and divided by it).
  int64_t bb;
  if (llvm::MulOverflow(b, b, bb))
    return nc.error("'blocksize' " + Twine(b) + " squared does not fit in "
                    "int64");
  SmallVector<int64_t> first, perm, last;
  if (toSpace) {
    int64_t hb, wb;
    if (c % bb)
      return nc.error("channels " + Twine(c) + " are not a multiple of " +
                      Twine(bb) + " ('blocksize' " + Twine(b) + " squared)");
    if (llvm::MulOverflow(h, b, hb) || llvm::MulOverflow(w, b, wb))
      return nc.error("height " + Twine(h) + " and width " + Twine(w) +
                      " times 'blocksize' " + Twine(b) +
                      " do not fit in int64");
    bool crd = nc.getString("mode", "DCR") == "CRD";
    if (crd) {
      first = {n, c / bb, b, b, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      first = {n, b, b, c / bb, h, w};
      perm = {0, 3, 4, 1, 5, 2};
    }
    last = {n, c / bb, hb, wb};
  } else {
    int64_t cbb;
    if (h % b || w % b)
      return nc.error("height " + Twine(h) + " and width " + Twine(w) +
                      " must be multiples of 'blocksize' " + Twine(b));
    if (llvm::MulOverflow(c, bb, cbb))
      return nc.error("channels " + Twine(c) + " times 'blocksize' " +
                      Twine(b) + " squared do not fit in int64");
    first = {n, c, h / b, b, w / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    last = {n, cbb, h / b, w / b};
  }
  Value v = reshaped(nc, nc.input(0), first);
  if (v)
    v = part(nc, "ampc.transpose", v, {nc.ints("perm", perm)});
  if (v)
    v = reshaped(nc, v, last);
  if (!v)
    return failure();
  return Outputs{v};
}
FailureOr<Outputs> importDepthToSpace(NodeContext &nc) {
  return importDepthSpace(nc, /*toSpace=*/true);
}
FailureOr<Outputs> importSpaceToDepth(NodeContext &nc) {
  return importDepthSpace(nc, /*toSpace=*/false);
}

/// An int64 constant of `shape` holding `values`.
Value indexConstant(NodeContext &nc, ArrayRef<int64_t> values,
                    ArrayRef<int64_t> shape) {
  if (failed(checkComputedConstant(nc, shape, nc.b.getI64Type(),
                                   "an index constant of " +
                                       Twine(values.size()) + " elements")))
    return Value();
  auto type = RankedTensorType::get(shape, nc.b.getI64Type());
  FailureOr<Outputs> c = constant(nc, DenseElementsAttr::get(type, values));
  return failed(c) ? Value() : (*c)[0];
}

/// A constant of `element` and `shape` holding `values` (rounded from
/// double to the element type).
Value floatConstant(NodeContext &nc, Type element, ArrayRef<double> values,
                    ArrayRef<int64_t> shape) {
  if (failed(checkComputedConstant(nc, shape, element,
                                   "a weight constant of " +
                                       Twine(values.size()) + " elements")))
    return Value();
  SmallVector<Attribute> attrs;
  for (double v : values)
    attrs.push_back(nc.b.getFloatAttr(element, v));
  auto type = RankedTensorType::get(shape, element);
  FailureOr<Outputs> c = constant(nc, DenseElementsAttr::get(type, attrs));
  return failed(c) ? Value() : (*c)[0];
}

/// The shape of a vector of `n` elements along `axis` of a rank-`rank`
/// tensor, ones elsewhere: it broadcasts along that axis.
SmallVector<int64_t> alongAxis(int64_t rank, int64_t axis, int64_t n) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = n;
  return shape;
}

/// `v` gathered along `axis` at the constant `indices` (none when they
/// read the axis as it is).
Value gatherAlong(NodeContext &nc, Value v, int64_t axis,
                  ArrayRef<int64_t> indices) {
  if (!v)
    return Value();
  auto type = cast<RankedTensorType>(v.getType());
  bool same = static_cast<int64_t>(indices.size()) == type.getDimSize(axis);
  for (auto [i, index] : llvm::enumerate(indices))
    same = same && index == static_cast<int64_t>(i);
  if (same)
    return v;
  Value idx = indexConstant(nc, indices, {static_cast<int64_t>(indices.size())});
  return idx ? part(nc, "ampc.gather", {v, idx}, {nc.i64("axis", axis)})
             : Value();
}

/// The largest output (or padded) size along one axis that Resize,
/// Upsample and ConvTranspose accept: their index and weight vectors are
/// constants of that many elements built at import.
constexpr int64_t kMaxComposedAxis = kMaxComputedElements;

/// One resized axis: its input and output sizes, the scale, and the crop
/// of tf_crop_and_resize (roi, as fractions of the input).
struct ResizeAxis {
  int64_t axis = 0, in = 0, out = 0;
  double scale = 1; // output / input, as ONNX's reference uses it
  double roiStart = 0, roiEnd = 1;
  bool roiF32 = false; // roi given as float32
};

/// Resize's attributes that decide the taps of each output position.
struct ResizeMode {
  std::string mode, coordinates, nearest;
  double cubicA = -0.75;
  bool excludeOutside = false;
};

/// x_original of output position `x` (ONNX reference, _interpolate_1d_with_x:
/// the output width there is scale * input, a double, not the integer
/// size); nullopt outside tf_crop_and_resize's crop.
std::optional<double> sourceCoordinate(const ResizeMode &m,
                                       const ResizeAxis &a, double x) {
  double in = static_cast<double>(a.in), width = a.scale * in;
  const std::string &c = m.coordinates;
  if (c == "half_pixel")
    return (x + 0.5) / a.scale - 0.5;
  if (c == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(a.out) / width;
    double offset = in / 2 * (1 - adjustment);
    return offset + (x + 0.5) / a.scale - 0.5;
  }
  if (c == "pytorch_half_pixel")
    return width == 1 ? -0.5 : (x + 0.5) / a.scale - 0.5;
  if (c == "align_corners")
    return width == 1 ? 0.0 : x * (in - 1) / (width - 1);
  if (c == "asymmetric")
    return x / a.scale;
  if (c == "tf_half_pixel_for_nn")
    return (x + 0.5) / a.scale;
  // tf_crop_and_resize. The reference computes the float32 roi's span,
  // the centre of a width of 1 and the start's offset in float32, the
  // rest in double; ties of nearest rounding depend on it.
  double span = a.roiEnd - a.roiStart, start = a.roiStart * (in - 1), r;
  if (a.roiF32) {
    float spanF = static_cast<float>(a.roiEnd) - static_cast<float>(a.roiStart);
    float inF = static_cast<float>(a.in - 1);
    span = spanF;
    start = static_cast<float>(a.roiStart) * inF;
    r = width == 1 ? spanF * inF / 2 : x * span * (in - 1) / (width - 1);
  } else {
    r = width == 1 ? span * (in - 1) / 2 : x * span * (in - 1) / (width - 1);
  }
  r += start;
  if (!std::isfinite(r) || r < 0 || r > in - 1)
    return std::nullopt;
  return r;
}

/// The taps of source coordinate `xo` on an axis of `in` elements: the `n`
/// positions nearest to it in the input edge-padded by ceil(n / 2) (ties to
/// the lower one, ONNX reference _get_neighbor), as clamped source indices
/// with the mode's coefficients.
void resizeTaps(const ResizeMode &m, double xo, int64_t in,
                SmallVectorImpl<int64_t> &index, SmallVectorImpl<double> &weight) {
  int n = m.mode == "cubic" ? 4 : 2;
  int64_t pad = (n + 1) / 2, limit = in + 2 * pad;
  double xp = xo + static_cast<double>(pad);
  // The n nearest lie within n of floor(xp) clamped into [0, limit).
  double center = std::floor(std::clamp(xp, -1.0, static_cast<double>(limit)));
  int64_t c = std::clamp<int64_t>(static_cast<int64_t>(center), 0, limit - 1);
  SmallVector<int64_t, 16> candidates;
  for (int64_t i = std::max<int64_t>(0, c - n);
       i < std::min<int64_t>(limit, c + n + 1); ++i)
    candidates.push_back(i);
  llvm::stable_sort(candidates, [&](int64_t a, int64_t b) {
    double da = std::fabs(xp - static_cast<double>(a));
    double db = std::fabs(xp - static_cast<double>(b));
    return da < db || (da == db && a < b);
  });
  candidates.resize(n);
  llvm::sort(candidates);

  double floorX = std::floor(xo);
  double ratio = xo == floorX ? 1.0 : xo - floorX;
  SmallVector<double, 4> coeffs;
  if (m.mode == "linear") {
    coeffs = {1 - ratio, ratio};
  } else if (m.mode == "nearest") {
    bool upper;
    if (ratio == 1.0 || m.nearest == "ceil")
      upper = true;
    else if (m.nearest == "floor")
      upper = false;
    else if (m.nearest == "round_prefer_ceil")
      upper = ratio >= 0.5;
    else // round_prefer_floor
      upper = ratio > 0.5;
    coeffs = {upper ? 0.0 : 1.0, upper ? 1.0 : 0.0};
  } else {
    double a = m.cubicA, r1 = ratio + 1, s = 1 - ratio, s1 = s + 1;
    coeffs = {((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a,
              ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
              ((a + 2) * s - (a + 3)) * s * s + 1,
              ((a * s1 - 5 * a) * s1 + 8 * a) * s1 - 4 * a};
  }
  if (m.excludeOutside) {
    double sum = 0;
    for (auto [i, p] : llvm::enumerate(candidates)) {
      if (p - pad < 0 || p - pad >= in)
        coeffs[i] = 0;
      sum += coeffs[i];
    }
    if (sum != 0)
      for (double &w : coeffs)
        w /= sum;
  }
  for (auto [p, w] : llvm::zip(candidates, coeffs)) {
    index.push_back(std::clamp<int64_t>(p - pad, 0, in - 1));
    weight.push_back(w);
  }
}

/// `v` resized along one axis: nearest is one Gather of the chosen source
/// positions; linear and cubic sum, over the taps, a Gather times a
/// constant weight vector along the axis (taps with all weights 0 are left
/// out, weights of 1 need no Mul); positions outside tf_crop_and_resize's
/// crop get weight 0 and extrapolation_value added.
Value resizeAxis(NodeContext &nc, Value v, const ResizeMode &m,
                 const ResizeAxis &a, double extrapolation) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t rank = type.getRank();
  Type element = type.getElementType();
  int taps = m.mode == "nearest" ? 1 : m.mode == "linear" ? 2 : 4;
  SmallVector<SmallVector<int64_t>> index(taps);
  SmallVector<SmallVector<double>> weight(taps);
  SmallVector<double> outside;
  bool anyOutside = false;
  for (int64_t x = 0; x < a.out; ++x) {
    std::optional<double> xo = sourceCoordinate(m, a, static_cast<double>(x));
    SmallVector<int64_t, 4> idx;
    SmallVector<double, 4> w;
    if (xo) {
      resizeTaps(m, *xo, a.in, idx, w);
    } else {
      idx.assign(m.mode == "cubic" ? 4 : 2, 0);
      w.assign(idx.size(), 0.0);
    }
    outside.push_back(xo ? 0.0 : extrapolation);
    anyOutside |= !xo;
    if (m.mode == "nearest") {
      // The tap whose coefficient is 1.
      index[0].push_back(w[1] != 0 ? idx[1] : idx[0]);
      weight[0].push_back(xo ? 1.0 : 0.0);
      continue;
    }
    for (int t = 0; t < taps; ++t) {
      index[t].push_back(idx[t]);
      weight[t].push_back(w[t]);
    }
  }
  SmallVector<int64_t> vectorShape = alongAxis(rank, a.axis, a.out);
  Value sum;
  for (int t = 0; t < taps; ++t) {
    bool zeros = llvm::all_of(weight[t], [](double w) { return w == 0; });
    bool ones = llvm::all_of(weight[t], [](double w) { return w == 1; });
    // A tap that never counts is skipped, unless no tap counts at all.
    if (zeros && (sum || t + 1 < taps))
      continue;
    Value term = gatherAlong(nc, v, a.axis, index[t]);
    if (!ones) {
      Value w = floatConstant(nc, element, weight[t], vectorShape);
      term = w ? part(nc, "ampc.mul", {term, w}) : Value();
    }
    sum = sum ? part(nc, "ampc.add", {sum, term}) : term;
    if (!sum)
      return Value();
  }
  if (anyOutside && extrapolation != 0) {
    Value e = floatConstant(nc, element, outside, vectorShape);
    sum = e ? part(nc, "ampc.add", {sum, e}) : Value();
  }
  return sum;
}

/// The float values of constant input `i` (empty when the input is absent
/// or holds no elements).
FailureOr<SmallVector<double>> constantFloats(NodeContext &nc, size_t i,
                                              StringRef what) {
  if (!nc.input(i))
    return SmallVector<double>();
  FailureOr<DenseElementsAttr> value = nc.constantInput(i, what);
  if (failed(value))
    return failure();
  if (!isa<FloatType>(value->getElementType()))
    return nc.error("input " + Twine(i) + " (" + what + ") must be float");
  SmallVector<double> out;
  for (Attribute v : value->getValues<Attribute>())
    out.push_back(cast<FloatAttr>(v).getValueAsDouble());
  return out;
}

/// Resize (opset 10: X, scales; 11+: X, roi, scales, sizes) and Upsample
/// (opset 7: the `scales` attribute; 9: X, scales): nearest, linear or
/// cubic, one pass per resized axis (resizeAxis), innermost first as
/// ONNX's reference interpolates. Upsample and Resize-10 take source
/// positions as `asymmetric` with nearest rounding down (output i reads
/// input floor(i / scale)).
FailureOr<Outputs> importResize(NodeContext &nc, bool upsample) {
  Value x = nc.input(0);
  auto in = cast<RankedTensorType>(x.getType());
  int64_t rank = in.getRank();
  bool legacy = upsample || nc.opset < 11;

  ResizeMode m;
  m.mode = nc.getString("mode", "nearest");
  if (upsample && m.mode == "bilinear")
    m.mode = "linear";
  if (m.mode != "nearest" && m.mode != "linear" &&
      (legacy || m.mode != "cubic"))
    return nc.error("'mode' must be nearest, linear" +
                    Twine(legacy ? "" : " or cubic") + ", got '" + m.mode +
                    "'");
  m.coordinates = legacy ? "asymmetric"
                         : nc.getString("coordinate_transformation_mode",
                                        "half_pixel");
  static const char *const kCoordinates[] = {
      "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
      "align_corners", "asymmetric", "tf_half_pixel_for_nn",
      "tf_crop_and_resize"};
  if (!llvm::is_contained(kCoordinates, StringRef(m.coordinates)))
    return nc.error("'coordinate_transformation_mode' must be half_pixel, "
                    "half_pixel_symmetric, pytorch_half_pixel, "
                    "align_corners, asymmetric, tf_half_pixel_for_nn or "
                    "tf_crop_and_resize, got '" +
                    m.coordinates + "'");
  m.nearest = legacy ? "floor" : nc.getString("nearest_mode", "round_prefer_floor");
  if (m.nearest != "round_prefer_floor" && m.nearest != "round_prefer_ceil" &&
      m.nearest != "floor" && m.nearest != "ceil")
    return nc.error("'nearest_mode' must be round_prefer_floor, "
                    "round_prefer_ceil, floor or ceil, got '" +
                    m.nearest + "'");
  m.cubicA = nc.getFloat("cubic_coeff_a", -0.75f);
  m.excludeOutside = nc.getInt("exclude_outside", 0) != 0;
  if (nc.getInt("antialias", 0) != 0)
    return nc.error("'antialias' is not supported (only 0)");
  if (m.mode != "nearest" && !isa<FloatType>(in.getElementType()))
    return nc.error("'" + m.mode + "' mode needs float data");

  // The resized axes, in the order scales, sizes and roi list them.
  SmallVector<int64_t> axes;
  if (auto given = nc.getInts("axes")) {
    for (int64_t axis : *given) {
      std::optional<int64_t> a = ampc::normalizeAxis(axis, rank);
      if (!a || llvm::is_contained(axes, *a))
        return nc.error("'axes' " + formatDims(*given) +
                        " must be distinct axes of the rank-" + Twine(rank) +
                        " input");
      axes.push_back(*a);
    }
  } else {
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
  }
  size_t count = axes.size();

  SmallVector<double> scales;
  SmallVector<int64_t> sizes;
  SmallVector<double> roi;
  bool roiF32 = false;
  if (upsample && nc.opset < 9) {
    const auto *attr = nc.attr("scales");
    if (!attr)
      return nc.error("attribute 'scales' is required");
    scales.assign(attr->floats().begin(), attr->floats().end());
  } else {
    size_t scalesInput = legacy ? 1 : 2;
    if (legacy && nc.attr("scales"))
      return nc.error("'scales' is an input from opset 9, not an attribute");
    if (!nc.input(scalesInput) && legacy)
      return nc.error("input " + Twine(scalesInput) + " (scales) is required");
    FailureOr<SmallVector<double>> s = constantFloats(nc, scalesInput, "scales");
    if (failed(s))
      return failure();
    scales = *s;
    if (!legacy && nc.input(3)) {
      FailureOr<SmallVector<int64_t>> z = nc.constantInts(3, "sizes");
      if (failed(z))
        return failure();
      sizes = *z;
    }
    if (!legacy && m.coordinates == "tf_crop_and_resize") {
      FailureOr<SmallVector<double>> r = constantFloats(nc, 1, "roi");
      if (failed(r))
        return failure();
      roi = *r;
      roiF32 = nc.input(1) && cast<RankedTensorType>(nc.input(1).getType())
                                  .getElementType()
                                  .isF32();
      if (roi.size() != 2 * count)
        return nc.error("'roi' needs " + Twine(2 * count) +
                        " values (starts, then ends), got " +
                        Twine(roi.size()));
    }
  }
  if (scales.empty() == sizes.empty())
    return nc.error("exactly one of 'scales' and 'sizes' must be given");
  if (!scales.empty() && scales.size() != count)
    return nc.error("'scales' has " + Twine(scales.size()) +
                    " values for " + Twine(count) + " axes");
  if (!sizes.empty() && sizes.size() != count)
    return nc.error("'sizes' has " + Twine(sizes.size()) + " values for " +
                    Twine(count) + " axes");

  // Output sizes and scales: floor(input * scale) from scales; from sizes,
  // scale = size / input, one common scale under keep_aspect_ratio_policy.
  std::string policy = nc.getString("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return nc.error("'keep_aspect_ratio_policy' must be stretch, not_larger "
                    "or not_smaller, got '" + policy + "'");
  SmallVector<ResizeAxis> plan;
  std::optional<double> common;
  for (size_t i = 0; i < count; ++i) {
    ResizeAxis a;
    a.axis = axes[i];
    a.in = in.getDimSize(a.axis);
    if (!roi.empty()) {
      a.roiStart = roi[i];
      a.roiEnd = roi[i + count];
      a.roiF32 = roiF32;
    }
    // An empty dim stays empty: floor(0 * scale), or a size of 0.
    if (!sizes.empty() && !(a.in == 0 && sizes[i] == 0)) {
      if (a.in == 0)
        return nc.error("cannot resize the empty dim " + Twine(a.axis) +
                        " to " + Twine(sizes[i]));
      if (sizes[i] < 1 || sizes[i] > kMaxComposedAxis)
        return nc.error("'sizes' value " + Twine(sizes[i]) + " for dim " +
                        Twine(a.axis) + " must be between 1 and 2^24");
      double ratio = static_cast<double>(sizes[i]) / static_cast<double>(a.in);
      common = !common ? ratio
               : policy == "not_larger" ? std::min(*common, ratio)
                                        : std::max(*common, ratio);
    }
    plan.push_back(a);
  }
  for (auto [i, a] : llvm::enumerate(plan)) {
    double out;
    if (!sizes.empty()) {
      if (a.in == 0)
        continue;
      a.scale = policy == "stretch"
                    ? static_cast<double>(sizes[i]) / static_cast<double>(a.in)
                    : *common;
      out = policy == "stretch" ? static_cast<double>(sizes[i])
                                : std::round(*common * static_cast<double>(a.in));
    } else {
      a.scale = scales[i];
      if (!(a.scale > 0) || !std::isfinite(a.scale))
        return nc.error("'scales' must be positive and finite, got " +
                        formatNumber(a.scale));
      if (a.in == 0)
        continue;
      out = std::floor(a.scale * static_cast<double>(a.in));
    }
    if (!(out >= 1 && out <= static_cast<double>(kMaxComposedAxis)))
      return nc.error("dim " + Twine(a.axis) + " of " + Twine(a.in) +
                      " would be resized to " + formatNumber(out) +
                      " elements; ampc resizes dims to 1 to 2^24 elements");
    a.out = static_cast<int64_t>(out);
  }

  Value v = x;
  double extrapolation = nc.getFloat("extrapolation_value", 0.0f);
  for (const ResizeAxis &a : llvm::reverse(plan)) {
    if (a.in == 0 ||
        (a.in == a.out && a.scale == 1.0 && m.coordinates != "tf_crop_and_resize"))
      continue;
    v = resizeAxis(nc, v, m, a, extrapolation);
    if (!v)
      return failure();
  }
  return Outputs{v};
}
FailureOr<Outputs> importResizeOp(NodeContext &nc) {
  return importResize(nc, /*upsample=*/false);
}
FailureOr<Outputs> importUpsample(NodeContext &nc) {
  return importResize(nc, /*upsample=*/true);
}

/// ConvTranspose as a Conv: the input with stride - 1 zeros between its
/// elements and (k - 1) * d - pad zeros around them (a crop where that is
/// negative, output_padding more at the end), convolved at stride 1 with
/// the weight transposed per group, (C_in, C_out / g, k...) to (C_out,
/// C_in / g, k...), and flipped along the kernel axes. Each spatial axis
/// is one Gather from the input with one zero slice appended, whose
/// indices say which source element (or the zero) each position holds;
/// an axis that needs no zeros inside and no crop is padded by the Conv.
FailureOr<Outputs> importConvTranspose(NodeContext &nc) {
  Value x = nc.input(0), w = nc.input(1);
  auto xt = cast<RankedTensorType>(x.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  int64_t rank = xt.getRank();
  if (rank < 3 || wt.getRank() != rank)
    return nc.error("X " + formatDims(xt.getShape()) + " and W " +
                    formatDims(wt.getShape()) +
                    " must be (N, C, spatial...) and (C, M/group, kernel...)");
  size_t n = rank - 2;
  int64_t group = nc.getInt("group", 1);
  int64_t cin = xt.getDimSize(1), coutPerGroup = wt.getDimSize(1);
  int64_t cout;
  if (group < 1 || group > std::max<int64_t>(cin, 1) || cin % group ||
      wt.getDimSize(0) != cin ||
      llvm::MulOverflow(group, coutPerGroup, cout))
    return nc.error("W " + formatDims(wt.getShape()) + " must have the " +
                    Twine(cin) + " input channels of X, in 'group' " +
                    Twine(group) + " groups");
  SmallVector<int64_t> kernel(wt.getShape().drop_front(2));
  if (auto ks = nc.getInts("kernel_shape"); ks && *ks != kernel)
    return nc.error("'kernel_shape' " + formatDims(*ks) +
                    " differs from the weight's spatial shape " +
                    formatDims(kernel));
  auto spatial = [&](StringRef name, int64_t dflt, size_t size,
                     int64_t least) -> FailureOr<SmallVector<int64_t>> {
    SmallVector<int64_t> v = nc.getInts(name).value_or(
        SmallVector<int64_t>(size, dflt));
    if (v.size() != size)
      return nc.error("'" + name + "' " + formatDims(v) + " must have " +
                      Twine(size) + " values");
    for (int64_t e : v)
      if (e < least || e > kMaxComposedAxis)
        return nc.error("'" + name + "' " + formatDims(v) +
                        " values must be between " + Twine(least) +
                        " and 2^24");
    return v;
  };
  FailureOr<SmallVector<int64_t>> strides = spatial("strides", 1, n, 1);
  FailureOr<SmallVector<int64_t>> dilations = spatial("dilations", 1, n, 1);
  FailureOr<SmallVector<int64_t>> outputPadding =
      spatial("output_padding", 0, n, 0);
  if (failed(strides) || failed(dilations) || failed(outputPadding))
    return failure();

  // Pads (begins, then ends), from `pads`, or from the output size that
  // `output_shape` or auto_pad SAME_* asks for: the total padding is
  // split evenly, the odd one at the end for SAME_UPPER and at the
  // beginning otherwise (as ONNX's reference; a negative total extends the
  // output with zeros).
  std::string autoPad = nc.getString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return nc.error("'auto_pad' must be NOTSET, VALID, SAME_UPPER or "
                    "SAME_LOWER, got '" + autoPad + "'");
  // stride * (in - 1) + output_padding + (k - 1) * dilation + 1 per axis:
  // every term is at most 2^24 and in is a dim, so __int128 holds it.
  SmallVector<__int128> full;
  for (size_t i = 0; i < n; ++i) {
    int64_t in = xt.getDimSize(2 + i);
    if (in < 1 || kernel[i] < 1)
      return nc.error("X and W must have non-empty spatial dims");
    full.push_back(static_cast<__int128>((*strides)[i]) * (in - 1) +
                   (*outputPadding)[i] +
                   static_cast<__int128>(kernel[i] - 1) * (*dilations)[i] + 1);
  }
  SmallVector<__int128> pads(2 * n, 0);
  std::optional<SmallVector<int64_t>> outputShape = nc.getInts("output_shape");
  if (outputShape && outputShape->size() == n + 2)
    outputShape->erase(outputShape->begin(), outputShape->begin() + 2);
  if (outputShape || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    if (outputShape && outputShape->size() != n)
      return nc.error("'output_shape' " + formatDims(*outputShape) +
                      " must have " + Twine(n) + " spatial dims");
    for (size_t i = 0; i < n; ++i) {
      __int128 out = outputShape
                         ? static_cast<__int128>((*outputShape)[i])
                         : static_cast<__int128>(xt.getDimSize(2 + i)) *
                               (*strides)[i];
      if (out < 1 || out > kMaxComposedAxis)
        return nc.error("output dim " + Twine(i) + " must be between 1 and "
                        "2^24");
      __int128 total = full[i] - out;
      // Floor division: a negative total pads the end.
      __int128 half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      bool upper = autoPad == "SAME_UPPER";
      pads[i] = upper ? half : total - half;
      pads[i + n] = upper ? total - half : half;
    }
  } else if (autoPad == "NOTSET") {
    FailureOr<SmallVector<int64_t>> given = spatial("pads", 0, 2 * n, 0);
    if (failed(given))
      return failure();
    for (size_t i = 0; i < 2 * n; ++i)
      pads[i] = (*given)[i];
  }

  // The input: per spatial axis, the positions of the dilated, padded
  // input the stride-1 Conv reads; -1 marks a zero.
  Value v = x;
  SmallVector<int64_t> convPads(2 * n, 0);
  for (size_t i = 0; i < n; ++i) {
    int64_t axis = 2 + i, in = xt.getDimSize(axis), s = (*strides)[i];
    __int128 span = static_cast<__int128>(kernel[i] - 1) * (*dilations)[i];
    __int128 before = span - pads[i];
    __int128 after = span - pads[i + n] + (*outputPadding)[i];
    __int128 length = before + static_cast<__int128>(s) * (in - 1) + 1 + after;
    if (length - span < 1)
      return nc.error("spatial dim " + Twine(i) +
                      " of the output would be empty (pads too large)");
    if (length > kMaxComposedAxis)
      return nc.error("spatial dim " + Twine(i) + " of the padded input "
                      "would have more than 2^24 elements");
    if (s == 1 && before >= 0 && after >= 0) {
      convPads[i] = static_cast<int64_t>(before);
      convPads[i + n] = static_cast<int64_t>(after);
      continue;
    }
    SmallVector<int64_t> indices;
    bool zero = false;
    for (int64_t p = 0; p < static_cast<int64_t>(length); ++p) {
      __int128 u = p - before;
      bool hit = u >= 0 && u % s == 0 && u / s < in;
      indices.push_back(hit ? static_cast<int64_t>(u / s) : in);
      zero |= !hit;
    }
    if (zero) {
      auto type = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> slab(type.getShape());
      slab[axis] = 1;
      auto slabType = type.clone(slab);
      FailureOr<Outputs> zeros = constant(
          nc, DenseElementsAttr::get(
                  slabType, nc.b.getZeroAttr(type.getElementType())));
      if (failed(zeros))
        return failure();
      v = part(nc, "ampc.concat", {v, (*zeros)[0]}, {nc.i64("axis", axis)});
    }
    v = gatherAlong(nc, v, axis, indices);
    if (!v)
      return failure();
  }

  // The weight: (C_in, C_out/g, k...) -> (g, C_in/g, C_out/g, k...) ->
  // (g, C_out/g, C_in/g, k...) -> (C_out, C_in/g, k...), flipped.
  SmallVector<int64_t> grouped = {group, cin / group, coutPerGroup};
  grouped.append(kernel);
  SmallVector<int64_t> perm = {0, 2, 1};
  SmallVector<int64_t> convWeight = {cout, cin / group};
  for (size_t i = 0; i < n; ++i) {
    perm.push_back(3 + i);
    convWeight.push_back(kernel[i]);
  }
  // Swapping C_in/g and C_out/g moves no element when either is 1.
  Value weight = w;
  if (cin / group > 1 && coutPerGroup > 1) {
    weight = reshaped(nc, w, grouped);
    if (weight)
      weight = part(nc, "ampc.transpose", weight, {nc.ints("perm", perm)});
  }
  if (weight)
    weight = reshaped(nc, weight, convWeight);
  for (size_t i = 0; i < n && weight; ++i) {
    SmallVector<int64_t> reversed;
    for (int64_t k = kernel[i] - 1; k >= 0; --k)
      reversed.push_back(k);
    weight = gatherAlong(nc, weight, 2 + i, reversed);
  }
  if (!v || !weight)
    return failure();
  SmallVector<Value> operands = {v, weight};
  if (nc.input(2))
    operands.push_back(nc.input(2));
  Value y = part(nc, "ampc.conv", operands,
                 {nc.ints("strides", SmallVector<int64_t>(n, 1)),
                  nc.ints("pads", convPads), nc.ints("dilations", *dilations),
                  nc.i64("group", group)});
  if (!y)
    return failure();
  return Outputs{y};
}

/// EyeLike: ones on diagonal `k` of input 0's shape, in `dtype` (default:
/// the input's type): column - row == k, cast (folded when small).
FailureOr<Outputs> importEyeLike(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() != 2)
    return nc.error("EyeLike needs a rank-2 input");
  Type element = in.getElementType();
  if (nc.attr("dtype")) {
    element = elementTypeFromOnnx(nc.b.getContext(), nc.getInt("dtype", 1));
    if (!element)
      return nc.error("unsupported dtype " +
                      onnxTypeName(nc.getInt("dtype", 1)));
  }
  Value offsets = diagonalOffsets(nc, in.getDimSize(0), in.getDimSize(1));
  // Clamped as Trilu's k (column - row lies in [1 - rows, cols - 1]).
  Value kValue = scalarOf(
      nc, nc.b.getI64Type(),
      static_cast<double>(std::clamp<int64_t>(
          nc.getInt("k", 0), -in.getDimSize(0), in.getDimSize(1))));
  if (!offsets || !kValue)
    return failure();
  Value mask = part(nc, "ampc.equal", {offsets, kValue});
  Value r = mask ? part(nc, "ampc.cast", mask, {}, in.clone(element)) : Value();
  if (!r)
    return failure();
  return Outputs{r};
}

/// HannWindow, HammingWindow and BlackmanWindow: a0 - a1 cos(2 pi n / N) +
/// a2 cos(4 pi n / N) for n < size, N = size when `periodic` (the default),
/// size - 1 otherwise; a constant at import (the size is a compile-time
/// input), computed in double and cast to `output_datatype`.
FailureOr<Outputs> importWindow(NodeContext &nc, double a0, double a1,
                                double a2) {
  FailureOr<SmallVector<int64_t>> size = nc.constantInts(0, "size");
  if (failed(size))
    return failure();
  if (size->size() != 1 || (*size)[0] < 0)
    return nc.error("the size must be one value >= 0, got " +
                    formatDims(*size));
  int64_t n = (*size)[0];
  Type element =
      elementTypeFromOnnx(nc.b.getContext(), nc.getInt("output_datatype", 1));
  if (!element)
    return nc.error("unsupported output_datatype " +
                    onnxTypeName(nc.getInt("output_datatype", 1)));
  auto type = RankedTensorType::get({n}, element);
  if (std::string problem =
          ampc::checkTensorSize(type, nc.importer.maxTensorBytes());
      !problem.empty())
    return nc.error("the window " + problem + " (--max-tensor-bytes)");
  // Computed here, element by element: at most 2^24 (as Range).
  constexpr int64_t kMaxWindow = kMaxComputedElements;
  if (n > kMaxWindow)
    return nc.error("a window of " + Twine(n) + " values: at most 2^24");
  double period = static_cast<double>(nc.getInt("periodic", 1) ? n : n - 1);
  SmallVector<double> values;
  for (int64_t i = 0; i < n; ++i) {
    double t = period > 0 ? 2 * M_PI * static_cast<double>(i) / period : 0;
    values.push_back(a0 - a1 * std::cos(t) + a2 * std::cos(2 * t));
  }
  FailureOr<Outputs> c = constant(
      nc, DenseElementsAttr::get(type.clone(nc.b.getF64Type()),
                                 ArrayRef<double>(values)));
  if (failed(c))
    return failure();
  if (element.isF64())
    return c;
  Value r = part(nc, "ampc.cast", (*c)[0], {}, type);
  if (!r)
    return failure();
  return Outputs{r};
}
FailureOr<Outputs> importHannWindow(NodeContext &nc) {
  return importWindow(nc, 0.5, 0.5, 0.0);
}
FailureOr<Outputs> importHammingWindow(NodeContext &nc) {
  return importWindow(nc, 25.0 / 46.0, 21.0 / 46.0, 0.0);
}
FailureOr<Outputs> importBlackmanWindow(NodeContext &nc) {
  return importWindow(nc, 0.42, 0.5, 0.08);
}

/// MaxUnpool: X's values written at the flat output positions MaxPool's
/// Indices gave (ampc.scatter into zeros), the output's spatial dims
/// (in - 1) * stride + kernel - pads, or `output_shape` (input 2, a
/// compile-time input).
FailureOr<Outputs> importMaxUnpool(NodeContext &nc) {
  Value x = nc.input(0), indices = nc.input(1);
  auto xt = cast<RankedTensorType>(x.getType());
  auto it = cast<RankedTensorType>(indices.getType());
  int64_t rank = xt.getRank(), spatial = rank - 2;
  if (rank < 3)
    return nc.error("X must have rank 3 or more (N, C, spatial...)");
  if (it.getShape() != xt.getShape() || !it.getElementType().isInteger(64))
    return nc.error("I must be int64 of X's shape " +
                    formatDims(xt.getShape()) + ", got " +
                    formatDims(it.getShape()));
  std::optional<SmallVector<int64_t>> kernel = nc.getInts("kernel_shape");
  if (!kernel || static_cast<int64_t>(kernel->size()) != spatial)
    return nc.error("'kernel_shape' must hold " + Twine(spatial) + " values");
  SmallVector<int64_t> strides =
      nc.getInts("strides").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> pads =
      nc.getInts("pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  if (static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial)
    return nc.error("'strides' must hold " + Twine(spatial) +
                    " values and 'pads' " + Twine(2 * spatial));
  SmallVector<int64_t> shape(xt.getShape());
  for (int64_t i = 0; i < spatial; ++i) {
    // (in - 1) stride + kernel - pad begin - pad end, in 128 bits: each
    // term is the model's (pads of INT64_MIN passed 2^63).
    __int128 d = (__int128(shape[2 + i]) - 1) * strides[i] + (*kernel)[i] -
                 pads[i] - pads[spatial + i];
    if (d <= 0 || d > std::numeric_limits<int64_t>::max() ||
        strides[i] <= 0 || (*kernel)[i] <= 0)
      return nc.error("spatial axis " + Twine(i) + ": the unpooled size "
                      "(in - 1) * stride + kernel - pads must be between 1 "
                      "and 2^63 - 1 (stride " + Twine(strides[i]) +
                      ", kernel " + Twine((*kernel)[i]) + ", pads " +
                      Twine(pads[i]) + " and " + Twine(pads[spatial + i]) +
                      ")");
    shape[2 + i] = static_cast<int64_t>(d);
  }
  SmallVector<int64_t> outShape = shape;
  if (nc.input(2)) {
    FailureOr<SmallVector<int64_t>> given = nc.constantInts(2, "output_shape");
    if (failed(given))
      return failure();
    if (static_cast<int64_t>(given->size()) != rank ||
        llvm::any_of(llvm::zip(*given, shape), [](auto p) {
          return std::get<0>(p) < std::get<1>(p);
        }))
      return nc.error("output_shape " + formatDims(*given) + " must hold " +
                      Twine(rank) + " dims, each at least the unpooled " +
                      formatDims(shape));
    outShape = *given;
  }
  auto outType = xt.clone(outShape);
  if (std::string problem =
          ampc::checkTensorSize(outType, nc.importer.maxTensorBytes());
      !problem.empty())
    return nc.error("the output " + problem + " (--max-tensor-bytes)");
  // The indices are flat positions in the unpooled shape; a larger
  // output_shape pads each axis at its end (ONNX's reference), so they are
  // moved to the same coordinates of the larger shape.
  Value flat = reshaped(nc, indices, {xt.getNumElements()});
  if (outShape != shape) {
    auto i64 = nc.b.getI64Type();
    Value rest = flat, moved = scalarOf(nc, i64, 0.0);
    int64_t stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      Value dim = scalarOf(nc, i64, static_cast<double>(shape[d]));
      Value coordinate = part(nc, "ampc.mod", {rest, dim});
      rest = part(nc, "ampc.div", {rest, dim});
      moved = part(nc, "ampc.add",
                   {moved, part(nc, "ampc.mul",
                                {coordinate, scalarOf(nc, i64,
                                                      static_cast<double>(
                                                          stride))})});
      stride *= outShape[d];
    }
    flat = moved;
  }
  shape = outShape;
  int64_t total = outType.getNumElements();
  Value zeros = part(nc, "ampc.expand",
                     scalarOf(nc, xt.getElementType(), 0.0), {},
                     RankedTensorType::get({total}, xt.getElementType()));
  Value r = part(nc, "ampc.scatter",
                 {zeros, flat, reshaped(nc, x, {xt.getNumElements()})},
                 {nc.i64("axis", 0),
                  nc.b.getNamedAttr("reduction", nc.b.getStringAttr("none"))});
  r = r ? reshaped(nc, r, shape) : Value();
  if (!r)
    return failure();
  return Outputs{r};
}

/// A 1-D int64 constant holding `values`.
Value indexVector(NodeContext &nc, ArrayRef<int64_t> values) {
  int64_t n = static_cast<int64_t>(values.size());
  if (failed(checkComputedConstant(nc, {n}, nc.b.getI64Type(),
                                   "an index vector of " + Twine(n) +
                                       " elements")))
    return Value();
  auto type = RankedTensorType::get({n}, nc.b.getI64Type());
  FailureOr<Outputs> c = constant(nc, DenseElementsAttr::get(type, values));
  return failed(c) ? Value() : (*c)[0];
}

/// The source index of position `i` (in [-before, dim + after)) of an axis
/// of `dim` elements padded in `mode`: reflect mirrors about the end
/// elements (numpy's "reflect": the edge is not repeated; a one-element
/// axis repeats it), edge repeats them, wrap is cyclic.
int64_t padSource(StringRef mode, int64_t i, int64_t dim) {
  if (mode == "edge" || dim == 1)
    return std::clamp<int64_t>(i, 0, dim - 1);
  if (mode == "wrap")
    return ((i % dim) + dim) % dim;
  int64_t period = 2 * (dim - 1);
  int64_t j = ((i % period) + period) % period;
  return j < dim ? j : period - j;
}

/// The longest axis Pad's reflect, edge and wrap modes build an index
/// vector for.
constexpr int64_t kMaxPadIndexVector = kMaxComputedElements;

/// Pad (opsets 2-21; modes constant, reflect, edge and wrap; `axes` from
/// opset 18). Negative pads crop first (a Slice); then each padded axis in
/// turn: constant mode concatenates blocks of the value (a scalar expanded)
/// on both sides, the other modes gather along the axis with an index
/// vector computed here. The gradient is Slice's, Concat's and Gather's.
FailureOr<Outputs> importPad(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  int64_t rank = in.getRank();
  std::string mode = nc.getString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      mode != "wrap")
    return nc.error("'mode' must be constant, reflect, edge or wrap, got '" +
                    mode + "'");
  SmallVector<int64_t> pads, axes;
  double value = 0;
  if (nc.opset < 11) {
    std::optional<SmallVector<int64_t>> p = nc.getInts("pads");
    if (!p)
      return nc.error("attribute 'pads' is required");
    pads = *p;
    value = nc.getFloat("value", 0.0f);
  } else {
    FailureOr<SmallVector<int64_t>> p = nc.constantInts(1, "pads");
    if (failed(p))
      return failure();
    pads = *p;
    if (nc.input(2)) {
      FailureOr<DenseElementsAttr> v = nc.constantInput(2, "constant_value");
      if (failed(v))
        return failure();
      if (v->getNumElements() != 1)
        return nc.error("input 2 (constant_value) must hold one value");
      if (isa<FloatType>(v->getElementType()))
        value = (*v->getValues<APFloat>().begin()).convertToDouble();
      else if (isa<IntegerType>(v->getElementType()))
        value = static_cast<double>((*v->getValues<APInt>().begin()).getSExtValue());
      else
        return nc.error("input 2 (constant_value) must be a number");
    }
    if (nc.input(3)) {
      FailureOr<SmallVector<int64_t>> a = nc.constantInts(3, "axes");
      if (failed(a))
        return failure();
      axes = *a;
    }
  }
  if (axes.empty() && !(nc.opset >= 18 && nc.input(3)))
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  if (pads.size() != 2 * axes.size())
    return nc.error("'pads' " + formatDims(pads) + " must hold " +
                    Twine(2 * axes.size()) + " values (begin and end of " +
                    Twine(axes.size()) + " axes)");
  SmallVector<int64_t> before(rank, 0), after(rank, 0);
  SmallVector<bool> seen(rank, false);
  for (auto [i, a] : llvm::enumerate(axes)) {
    std::optional<int64_t> axis = ampc::normalizeAxis(a, rank);
    if (!axis)
      return nc.error("axis " + Twine(a) + " is out of range for rank " +
                      Twine(rank));
    if (seen[*axis])
      return nc.error("axis " + Twine(a) + " is named twice");
    seen[*axis] = true;
    before[*axis] = pads[i];
    after[*axis] = pads[i + axes.size()];
  }
  // The padded shape, checked before anything is built.
  SmallVector<int64_t> outShape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size;
    if (llvm::AddOverflow(in.getDimSize(d), before[d], size) ||
        llvm::AddOverflow(size, after[d], size) || size < 0)
      return nc.error("pads " + formatDims(pads) + " give axis " + Twine(d) +
                      " of " + Twine(in.getDimSize(d)) +
                      " a negative or overflowing size");
    outShape.push_back(size);
  }
  // Within the tensor size limit before an index vector of an axis's
  // padded length is built.
  std::string tooLarge =
      ampc::checkTensorSize(in.clone(outShape), nc.importer.maxTensorBytes());
  if (!tooLarge.empty())
    return nc.error("the padded tensor: " + tooLarge);
  Value v = nc.input(0);
  // Negative pads crop.
  for (int64_t d = 0; d < rank && v; ++d) {
    if (before[d] >= 0 && after[d] >= 0)
      continue;
    int64_t dim = in.getDimSize(d);
    int64_t start = before[d] < 0 ? -before[d] : 0;
    int64_t end = after[d] < 0 ? dim + after[d] : dim;
    v = part(nc, "ampc.slice", v,
             {nc.ints("starts", {start}), nc.ints("ends", {end}),
              nc.ints("axes", {d}), nc.ints("steps", {1})});
    before[d] = std::max<int64_t>(before[d], 0);
    after[d] = std::max<int64_t>(after[d], 0);
  }
  for (int64_t d = 0; d < rank && v; ++d) {
    if (!before[d] && !after[d])
      continue;
    auto type = cast<RankedTensorType>(v.getType());
    int64_t dim = type.getDimSize(d);
    if (mode == "constant") {
      Value fill = scalarOf(nc, type.getElementType(), value);
      SmallVector<Value> pieces;
      for (int64_t width : {before[d], int64_t(-1), after[d]}) {
        if (width < 0) {
          pieces.push_back(v);
          continue;
        }
        if (!width)
          continue;
        SmallVector<int64_t> shape(type.getShape());
        shape[d] = width;
        pieces.push_back(part(nc, "ampc.expand", fill, {}, type.clone(shape)));
      }
      v = part(nc, "ampc.concat", pieces, {nc.i64("axis", d)});
      continue;
    }
    if (dim == 0)
      return nc.error("cannot pad the empty axis " + Twine(d) + " in mode '" +
                      mode + "'");
    // The index vector has the padded axis's length: bounded as Resize's.
    if (dim + before[d] + after[d] > kMaxPadIndexVector)
      return nc.error("axis " + Twine(d) + " padded to " +
                      Twine(dim + before[d] + after[d]) + " elements in mode '" +
                      mode + "': at most 2^24");
    SmallVector<int64_t> source;
    for (int64_t i = -before[d]; i < dim + after[d]; ++i)
      source.push_back(padSource(mode, i, dim));
    v = part(nc, "ampc.gather", {v, indexVector(nc, source)},
             {nc.i64("axis", d)});
  }
  if (!v)
    return failure();
  return Outputs{v};
}

/// GlobalMaxPool: ReduceMax over the spatial dimensions, kept.
FailureOr<Outputs> importGlobalMaxPool(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() < 3)
    return nc.error("needs an (N, C, D1, ...) input of rank 3 or more");
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < in.getRank(); ++d)
    axes.push_back(d);
  return nc.build("ampc.reduce_max", nc.input(0),
                  {nc.ints("axes", axes), nc.i64("keepdims", 1)});
}

/// `v` normalised over the dimensions from 1 on of its (rows, ...) view
/// `rows` x (the rest), by LayerNormalization with a unit scale: the
/// statistics in FP32, as autocast computes instance and group norms.
Value normalizedRows(NodeContext &nc, Value v, int64_t rows, float epsilon,
                     int64_t stashType = 1) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t total = type.getNumElements();
  Value flat = reshaped(nc, v, {rows, rows ? total / rows : 0});
  Value one = scalarOf(nc, type.getElementType(), 1.0);
  if (!flat || !one)
    return Value();
  FailureOr<Outputs> r = nc.build(
      "ampc.layer_normalization", {flat, one},
      {nc.i64("axis", 1), nc.f32("epsilon", epsilon),
       nc.i64("stash_type", stashType)},
      3);
  return failed(r) ? Value() : reshaped(nc, (*r)[0], type.getShape());
}

/// `y` * scale + bias with per-channel (C) vectors broadcast over an
/// (N, C, D1, ...) tensor.
Value channelAffine(NodeContext &nc, Value y, Value scale, Value bias) {
  auto type = cast<RankedTensorType>(y.getType());
  SmallVector<int64_t> shape(type.getRank() - 1, 1);
  shape[0] = type.getDimSize(1);
  if (scale)
    y = part(nc, "ampc.mul", {y, reshaped(nc, scale, shape)});
  if (bias && y)
    y = part(nc, "ampc.add", {y, reshaped(nc, bias, shape)});
  return y;
}

/// Checks that input `i` is a vector of `n` elements.
LogicalResult checkVector(NodeContext &nc, size_t i, StringRef what,
                          int64_t n) {
  auto t = cast<RankedTensorType>(nc.input(i).getType());
  if (t.getRank() != 1 || t.getDimSize(0) != n)
    return nc.error("input " + Twine(i) + " (" + what + ") must have shape [" +
                    Twine(n) + "], got " + formatDims(t.getShape()));
  return success();
}

/// InstanceNormalization: each (n, c) plane normalised (LayerNormalization
/// of the (N C, D1 ...) view), then the per-channel scale and bias.
FailureOr<Outputs> importInstanceNormalization(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() < 3)
    return nc.error("needs an (N, C, D1, ...) input of rank 3 or more");
  int64_t c = in.getDimSize(1);
  if (failed(checkVector(nc, 1, "scale", c)) ||
      failed(checkVector(nc, 2, "B", c)))
    return failure();
  Value y = normalizedRows(nc, nc.input(0), in.getDimSize(0) * c,
                           nc.getFloat("epsilon", 1e-5f));
  y = y ? channelAffine(nc, y, nc.input(1), nc.input(2)) : Value();
  if (!y)
    return failure();
  return Outputs{y};
}

/// GroupNormalization (opsets 18 and 21): each group of C / G channels of
/// each sample normalised (LayerNormalization of the (N G, ...) view), then
/// the scale and bias per channel (opset 21) or per group (opset 18, each
/// repeated over its channels).
FailureOr<Outputs> importGroupNormalization(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() < 3)
    return nc.error("needs an (N, C, D1, ...) input of rank 3 or more");
  if (!nc.attr("num_groups"))
    return nc.error("attribute 'num_groups' is required");
  int64_t groups = nc.getInt("num_groups", 1);
  int64_t c = in.getDimSize(1);
  if (groups <= 0 || c % groups)
    return nc.error("'num_groups' " + Twine(groups) +
                    " must be positive and divide the " + Twine(c) +
                    " channels");
  bool perGroup = nc.opset < 21;
  int64_t n = perGroup ? groups : c;
  if (failed(checkVector(nc, 1, "scale", n)) ||
      failed(checkVector(nc, 2, "bias", n)))
    return failure();
  Value scale = nc.input(1), bias = nc.input(2);
  if (perGroup && groups != c) {
    auto repeat = [&](Value v) {
      auto t = cast<RankedTensorType>(v.getType());
      Value r = reshaped(nc, v, {groups, 1});
      r = r ? part(nc, "ampc.expand", r, {}, t.clone({groups, c / groups}))
            : Value();
      return r ? reshaped(nc, r, {c}) : Value();
    };
    scale = repeat(scale);
    bias = repeat(bias);
  }
  Value y = normalizedRows(nc, nc.input(0), in.getDimSize(0) * groups,
                           nc.getFloat("epsilon", 1e-5f),
                           nc.getInt("stash_type", 1));
  y = y && scale && bias ? channelAffine(nc, y, scale, bias) : Value();
  if (!y)
    return failure();
  return Outputs{y};
}

/// MeanVarianceNormalization: (X - mean) / (sqrt(variance) + 1e-9) over
/// `axes` (default 0, 2, 3), as ONNX's function body, with the variance
/// of the centred values (the body's E[X^2] - E[X]^2 can go negative in
/// rounding).
FailureOr<Outputs> importMeanVarianceNormalization(NodeContext &nc) {
  SmallVector<int64_t> axes =
      nc.getInts("axes").value_or(SmallVector<int64_t>{0, 2, 3});
  auto mean = [&](Value v) {
    return part(nc, "ampc.reduce_mean", v,
                {nc.ints("axes", axes), nc.i64("keepdims", 1)});
  };
  Value x = nc.input(0);
  Value centred = part(nc, "ampc.sub", {x, mean(x)});
  Value deviation = part(nc, "ampc.sqrt", mean(part(nc, "ampc.mul",
                                                     {centred, centred})));
  auto element = cast<RankedTensorType>(x.getType()).getElementType();
  Value y = part(nc, "ampc.div",
                 {centred, part(nc, "ampc.add",
                                {deviation, scalarOf(nc, element, 1e-9)})});
  if (!y)
    return failure();
  return Outputs{y};
}

/// LpNormalization: X divided by its L1 or L2 norm along `axis` (p = 1 or
/// 2), kept for broadcasting.
FailureOr<Outputs> importLpNormalization(NodeContext &nc) {
  int64_t p = nc.getInt("p", 2);
  if (p != 1 && p != 2)
    return nc.error("'p' must be 1 or 2, got " + Twine(p));
  Value x = nc.input(0);
  auto attrs = {nc.ints("axes", {nc.getInt("axis", -1)}),
                nc.i64("keepdims", 1)};
  Value norm = p == 1 ? part(nc, "ampc.reduce_sum", part(nc, "ampc.abs", x),
                             attrs)
                      : part(nc, "ampc.sqrt",
                             part(nc, "ampc.reduce_sum",
                                  part(nc, "ampc.mul", {x, x}), attrs));
  Value y = part(nc, "ampc.div", {x, norm});
  if (!y)
    return failure();
  return Outputs{y};
}

/// LRN: X / (bias + alpha / size * S)^beta, S the sum of squares over the
/// `size` channels around each one (floor((size - 1) / 2) before, the rest
/// after): an AveragePool of the squares, counting the zero padding, over
/// the (N, 1, C, D1 ...) view.
FailureOr<Outputs> importLRN(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() < 2)
    return nc.error("needs an (N, C, ...) input of rank 2 or more");
  if (!nc.attr("size"))
    return nc.error("attribute 'size' is required");
  int64_t size = nc.getInt("size", 1);
  if (size <= 0 || size > (int64_t(1) << 30))
    return nc.error("'size' must be in [1, 2^30], got " + Twine(size));
  int64_t n = in.getDimSize(0), c = in.getDimSize(1);
  int64_t rest = 1;
  for (int64_t d : in.getShape().drop_front(2))
    rest *= d;
  float alpha = nc.getFloat("alpha", 1e-4f), beta = nc.getFloat("beta", 0.75f),
        bias = nc.getFloat("bias", 1.0f);
  Value x = nc.input(0);
  Value squares = reshaped(nc, part(nc, "ampc.mul", {x, x}), {n, 1, c, rest});
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  Value mean = part(nc, "ampc.average_pool", squares,
                    {nc.ints("kernel_shape", {size, 1}),
                     nc.ints("strides", {1, 1}),
                     nc.ints("pads", {lo, 0, hi, 0}),
                     nc.i64("count_include_pad", 1)});
  mean = mean ? reshaped(nc, mean, in.getShape()) : Value();
  Type element = in.getElementType();
  Value base = part(nc, "ampc.add",
                    {part(nc, "ampc.mul", {mean, scalarOf(nc, element, alpha)}),
                     scalarOf(nc, element, bias)});
  Value y = part(nc, "ampc.div",
                 {x, part(nc, "ampc.pow", {base, scalarOf(nc, element, beta)})});
  if (!y)
    return failure();
  return Outputs{y};
}

/// Einsum labels: a letter is its character code; the k-th of the
/// dimensions that "..." stands for, counted over the widest "..." (numpy
/// aligns them from the right and broadcasts them), is kEllipsisLabel + k.
constexpr int kEllipsisLabel = 256;

std::string einsumLabelName(int label) {
  if (label < kEllipsisLabel)
    return std::string("'") + static_cast<char>(label) + "'";
  return "'...' dimension " + std::to_string(label - kEllipsisLabel);
}

/// One term of an Einsum equation as letters, with '.' for its "..." (at
/// most one).
FailureOr<std::string> einsumTerm(NodeContext &nc, StringRef equation,
                                  StringRef term) {
  std::string letters;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (llvm::isAlpha(term[i])) {
      letters += term[i];
      continue;
    }
    if (!ellipsis && term.substr(i).starts_with("...")) {
      ellipsis = true;
      letters += '.';
      i += 2;
      continue;
    }
    return nc.error("equation '" + equation + "': term '" + term +
                    "' must be letters and at most one '...'");
  }
  return letters;
}

/// A tensor with one Einsum label per dimension.
struct Labeled {
  Value value;
  SmallVector<int> labels;
};

/// `t` summed over the labels `keep` rejects, which are dropped.
void einsumSumOut(NodeContext &nc, Labeled &t,
                  llvm::function_ref<bool(int)> keep) {
  SmallVector<int64_t> axes;
  SmallVector<int> kept;
  for (auto [i, l] : llvm::enumerate(t.labels)) {
    if (keep(l))
      kept.push_back(l);
    else
      axes.push_back(i);
  }
  if (axes.empty() || !t.value)
    return;
  t.value = part(nc, "ampc.reduce_sum", t.value,
                 {nc.ints("axes", axes), nc.i64("keepdims", 0)});
  t.labels = kept;
}

/// The contraction of `a` and `b` keeping the labels in `keep` (the
/// output's and those of the operands still to come): labels of one
/// operand only that are not kept are summed first; the rest are batch
/// (both, kept), contracted (both, not kept) or free (one). Each operand
/// is transposed to (batch, free, contracted) / (batch, contracted, free)
/// and reshaped to 3-D for one batched ampc.matmul, whose result is
/// reshaped to (batch..., free of a..., free of b...). A null value after
/// an error.
Labeled einsumContract(NodeContext &nc, Labeled a, Labeled b,
                       const std::set<int> &keep) {
  auto has = [](const Labeled &t, int l) {
    return llvm::is_contained(t.labels, l);
  };
  einsumSumOut(nc, a, [&](int l) { return has(b, l) || keep.count(l); });
  einsumSumOut(nc, b, [&](int l) { return has(a, l) || keep.count(l); });
  if (!a.value || !b.value)
    return {};
  SmallVector<int> batch, contracted, freeA, freeB;
  for (int l : a.labels) {
    if (!has(b, l))
      freeA.push_back(l);
    else if (keep.count(l))
      batch.push_back(l);
    else
      contracted.push_back(l);
  }
  for (int l : b.labels)
    if (!has(a, l))
      freeB.push_back(l);
  // Positions and the size product of `groups` of labels of `t`.
  auto layout = [](const Labeled &t, ArrayRef<ArrayRef<int>> groups,
                   SmallVectorImpl<int64_t> &perm,
                   SmallVectorImpl<int64_t> &sizes) {
    auto shape = cast<RankedTensorType>(t.value.getType()).getShape();
    for (ArrayRef<int> group : groups) {
      int64_t size = 1;
      for (int l : group) {
        int64_t at = llvm::find(t.labels, l) - t.labels.begin();
        perm.push_back(at);
        size *= shape[at]; // a factor of t's element count: no overflow
      }
      sizes.push_back(size);
    }
  };
  SmallVector<int64_t> permA, shapeA, permB, shapeB;
  layout(a, {batch, freeA, contracted}, permA, shapeA);
  layout(b, {batch, contracted, freeB}, permB, shapeB);
  // The result's dimensions: batch and free ones, whose product (unlike
  // the operands') may overflow.
  SmallVector<int64_t> dims;
  auto typeA = cast<RankedTensorType>(a.value.getType());
  auto typeB = cast<RankedTensorType>(b.value.getType());
  for (int64_t p : ArrayRef<int64_t>(permA).take_front(batch.size() +
                                                       freeA.size()))
    dims.push_back(typeA.getDimSize(p));
  for (int64_t p : ArrayRef<int64_t>(permB).take_back(freeB.size()))
    dims.push_back(typeB.getDimSize(p));
  if (!ampc::checkedProduct(dims)) {
    (void)nc.error("the contraction's result " + formatDims(dims) +
                   " has more than 2^63 elements");
    return {};
  }
  Value lhs = transposed(nc, a.value, permA);
  Value rhs = transposed(nc, b.value, permB);
  lhs = lhs ? reshaped(nc, lhs, shapeA) : Value();
  rhs = rhs ? reshaped(nc, rhs, shapeB) : Value();
  Value product = part(nc, "ampc.matmul", {lhs, rhs});
  Labeled result;
  result.value = product ? reshaped(nc, product, dims) : Value();
  llvm::append_range(result.labels, batch);
  llvm::append_range(result.labels, freeA);
  llvm::append_range(result.labels, freeB);
  return result;
}

/// Einsum: the equation's labels (an implicit output: the letters used
/// once, in ASCII order, after the "..." dimensions). Each operand first
/// takes the diagonal of a repeated label (the two dimensions made
/// adjacent, merged, and sliced with a step of n + 1) and drops the
/// size-1 dimensions of labels another operand broadcasts. Operands are
/// then contracted pairwise from the left with batched matmuls
/// (einsumContract); what is left is summed over the labels not in the
/// output and transposed to the output's order.
FailureOr<Outputs> importEinsum(NodeContext &nc) {
  if (!nc.attr("equation"))
    return nc.error("attribute 'equation' is required");
  std::string text;
  for (char c : nc.getString("equation", ""))
    if (!llvm::isSpace(c))
      text += c;
  StringRef equation(text);
  bool explicitOutput = equation.contains("->");
  auto [lhs, rhs] = equation.split("->");
  if (rhs.contains("->"))
    return nc.error("equation '" + equation + "' has more than one '->'");
  SmallVector<StringRef> termTexts;
  lhs.split(termTexts, ',');
  if (termTexts.size() != nc.inputs.size())
    return nc.error("equation '" + equation + "' has " +
                    Twine(termTexts.size()) + " operand term(s) for " +
                    Twine(nc.inputs.size()) + " inputs");

  // Each term's letters, checked against its operand's rank; the widest
  // "..." decides how many ellipsis labels there are.
  SmallVector<std::string> terms;
  SmallVector<int64_t> ellipsisRanks;
  int64_t widest = 0;
  for (auto [k, termText] : llvm::enumerate(termTexts)) {
    FailureOr<std::string> term = einsumTerm(nc, equation, termText);
    if (failed(term))
      return failure();
    int64_t rank = cast<RankedTensorType>(nc.input(k).getType()).getRank();
    bool ellipsis = StringRef(*term).contains('.');
    int64_t letters = static_cast<int64_t>(term->size()) - ellipsis;
    if (ellipsis ? letters > rank : letters != rank)
      return nc.error("equation '" + equation + "': term '" + termText +
                      "' has " + Twine(letters) + " labels for input " +
                      Twine(k) + " of rank " + Twine(rank));
    ellipsisRanks.push_back(ellipsis ? rank - letters : 0);
    widest = std::max(widest, ellipsisRanks.back());
    terms.push_back(std::move(*term));
  }
  SmallVector<Labeled> operands;
  for (auto [k, term] : llvm::enumerate(terms)) {
    Labeled t{nc.input(k), {}};
    for (char c : term) {
      if (c != '.') {
        t.labels.push_back(c);
        continue;
      }
      for (int64_t j = widest - ellipsisRanks[k]; j < widest; ++j)
        t.labels.push_back(kEllipsisLabel + static_cast<int>(j));
    }
    operands.push_back(std::move(t));
  }
  auto inInputs = [&](int l) {
    return llvm::any_of(operands, [&](const Labeled &t) {
      return llvm::is_contained(t.labels, l);
    });
  };
  SmallVector<int> output;
  if (explicitOutput) {
    FailureOr<std::string> term = einsumTerm(nc, equation, rhs);
    if (failed(term))
      return failure();
    for (char c : *term) {
      if (c == '.') {
        for (int64_t j = 0; j < widest; ++j)
          output.push_back(kEllipsisLabel + static_cast<int>(j));
        continue;
      }
      if (llvm::is_contained(output, c))
        return nc.error("equation '" + equation + "': output label '" +
                        Twine(c) + "' appears twice");
      if (!inInputs(c))
        return nc.error("equation '" + equation + "': output label '" +
                        Twine(c) + "' is in no input");
      output.push_back(c);
    }
  } else {
    for (int64_t j = 0; j < widest; ++j)
      output.push_back(kEllipsisLabel + static_cast<int>(j));
    std::map<char, int> uses; // ordered: ASCII order
    for (const std::string &term : terms)
      for (char c : term)
        if (c != '.')
          ++uses[c];
    for (auto [c, n] : uses)
      if (n == 1)
        output.push_back(c);
  }

  // Each label's size: equal wherever it appears, or 1 (broadcast).
  llvm::DenseMap<int, int64_t> sizes;
  for (const Labeled &t : operands) {
    auto shape = cast<RankedTensorType>(t.value.getType()).getShape();
    for (auto [l, d] : llvm::zip(t.labels, shape)) {
      auto [it, inserted] = sizes.try_emplace(l, d);
      if (inserted || it->second == d || d == 1)
        continue;
      if (it->second != 1)
        return nc.error("equation '" + equation + "': label " +
                        einsumLabelName(l) + " has sizes " +
                        Twine(it->second) + " and " + Twine(d));
      it->second = d;
    }
  }

  for (auto [k, t] : llvm::enumerate(operands)) {
    // A repeated label takes the diagonal: its second dimension moved next
    // to the first, the two merged into n * n and every (n + 1)-th kept.
    for (size_t p = 0; p < t.labels.size(); ++p) {
      for (size_t q = p + 1; q < t.labels.size();) {
        if (t.labels[q] != t.labels[p]) {
          ++q;
          continue;
        }
        auto type = cast<RankedTensorType>(t.value.getType());
        int64_t n = type.getDimSize(p);
        if (type.getDimSize(q) != n)
          return nc.error("equation '" + equation + "': label " +
                          einsumLabelName(t.labels[p]) + " repeats in term '" +
                          termTexts[k] + "' with sizes " + Twine(n) + " and " +
                          Twine(type.getDimSize(q)));
        std::optional<int64_t> square = ampc::checkedProduct({n, n});
        if (!square)
          return nc.error("equation '" + equation + "': the diagonal of " +
                          einsumLabelName(t.labels[p]) + " (size " + Twine(n) +
                          ") has more than 2^63 elements");
        SmallVector<int64_t> perm, merged;
        for (int64_t i = 0; i < type.getRank(); ++i)
          if (i != static_cast<int64_t>(q))
            perm.push_back(i);
        perm.insert(perm.begin() + p + 1, q);
        for (int64_t i : perm)
          if (i != static_cast<int64_t>(q))
            merged.push_back(i == static_cast<int64_t>(p)
                                 ? *square
                                 : type.getDimSize(i));
        Value v = transposed(nc, t.value, perm);
        v = v ? reshaped(nc, v, merged) : Value();
        v = part(nc, "ampc.slice", v,
                 {nc.ints("starts", {0}), nc.ints("ends", {*square}),
                  nc.ints("axes", {static_cast<int64_t>(p)}),
                  nc.ints("steps", {n + 1})});
        if (!v)
          return failure();
        t.value = v;
        t.labels.erase(t.labels.begin() + q);
      }
    }
    // A size-1 dimension of a label another operand has larger is not
    // summed over or kept: the operand does not vary along it.
    auto shape = cast<RankedTensorType>(t.value.getType()).getShape();
    SmallVector<int64_t> squeezed;
    SmallVector<int> labels;
    for (auto [l, d] : llvm::zip(t.labels, shape)) {
      if (d == 1 && sizes.lookup(l) != 1)
        continue;
      squeezed.push_back(d);
      labels.push_back(l);
    }
    if (labels.size() != t.labels.size()) {
      t.value = reshaped(nc, t.value, squeezed);
      t.labels = labels;
      if (!t.value)
        return failure();
    }
  }

  Labeled result = operands.front();
  for (size_t k = 1; k < operands.size(); ++k) {
    std::set<int> keep(output.begin(), output.end());
    for (size_t j = k + 1; j < operands.size(); ++j)
      keep.insert(operands[j].labels.begin(), operands[j].labels.end());
    result = einsumContract(nc, result, operands[k], keep);
    if (!result.value)
      return failure();
  }
  einsumSumOut(nc, result,
               [&](int l) { return llvm::is_contained(output, l); });
  SmallVector<int64_t> perm;
  for (int l : output)
    perm.push_back(llvm::find(result.labels, l) - result.labels.begin());
  Value r = result.value ? transposed(nc, result.value, perm) : Value();
  // An equation that changes nothing ("ij->ij") is still a node of its own.
  if (r && r == nc.input(0))
    r = part(nc, "ampc.identity", r);
  if (!r)
    return failure();
  return Outputs{r};
}

/// CumSum: x with the axis (n elements) spread over a second one,
/// where(mask, x, 0), reduced over the first: out[j] sums the x[i] whose
/// mask[i, j] holds, a triangle of index vectors (j - i >= 0; > 0
/// exclusive; <= 0 / < 0 reverse). ReduceSum is an FP32-output op, so the
/// sums are in f32 at fp16 and bf16 (as autocast runs CumSum); the spread
/// tensor has n times x's elements and is refused when that is more than
/// --max-tensor-bytes.
FailureOr<Outputs> importCumSum(NodeContext &nc) {
  Value x = nc.input(0);
  auto in = cast<RankedTensorType>(x.getType());
  if (in.getRank() == 0)
    return nc.error("CumSum needs a tensor of rank 1 or more");
  FailureOr<SmallVector<int64_t>> axisValue = nc.constantInts(1, "axis");
  if (failed(axisValue))
    return failure();
  if (axisValue->size() != 1)
    return nc.error("input 1 (axis) must hold one value");
  std::optional<int64_t> axis =
      ampc::normalizeAxis(axisValue->front(), in.getRank());
  if (!axis)
    return nc.error("axis " + Twine(axisValue->front()) +
                    " is out of range for rank " + Twine(in.getRank()));
  int64_t n = in.getDimSize(*axis);
  SmallVector<int64_t> column(in.getShape()), spread(in.getShape());
  column.insert(column.begin() + *axis + 1, 1);
  spread.insert(spread.begin() + *axis + 1, n);
  std::string problem = ampc::checkTensorSize(
      in.clone(spread), nc.importer.maxTensorBytes());
  if (!problem.empty())
    return nc.error("CumSum along an axis of " + Twine(n) +
                    " elements spreads the input over a second such axis, "
                    "and " + problem + " (--max-tensor-bytes)");
  bool exclusive = nc.getInt("exclusive", 0) != 0;
  bool reverse = nc.getInt("reverse", 0) != 0;
  StringRef compare = reverse ? (exclusive ? "ampc.less" : "ampc.less_or_equal")
                              : (exclusive ? "ampc.greater"
                                           : "ampc.greater_or_equal");
  // Integers are summed in f64 (exact up to 2^53) and cast back: ampc's
  // reductions accumulate integers in f32.
  bool integer = !isa<FloatType>(in.getElementType());
  Type element = integer ? Type(nc.b.getF64Type()) : in.getElementType();
  if (integer)
    x = part(nc, "ampc.cast", x, {}, in.clone(element));
  Value offsets = diagonalOffsets(nc, n, n);
  Value zero64 = scalarOf(nc, nc.b.getI64Type(), 0);
  Value zero = scalarOf(nc, element, 0);
  Value mask = part(nc, compare, {offsets, zero64});
  // (n, n, 1, ...): the two axes, then one for each dimension after them.
  SmallVector<int64_t> maskShape(in.getRank() - *axis + 1, 1);
  maskShape[0] = maskShape[1] = n;
  mask = mask ? reshaped(nc, mask, maskShape) : Value();
  Value spreadX =
      x ? part(nc, "ampc.where", {mask, reshaped(nc, x, column), zero})
        : Value();
  Value r = part(nc, "ampc.reduce_sum", spreadX,
                 {nc.ints("axes", {*axis}), nc.i64("keepdims", 0)});
  if (r && integer)
    r = part(nc, "ampc.cast", r, {}, in);
  if (!r)
    return failure();
  return Outputs{r};
}

/// The index along `axis` of the first (or last) maximum of x, as f64:
/// where(x == reduce_max(x), index, fill) reduced by ReduceMax; the first
/// index is found as the maximum of negated indices. Integer and boolean
/// data are compared in f64 (exact up to 2^53; ampc's reductions
/// accumulate integers in f32), and the indices are f64 so that their
/// reduction is exact for any axis. With `keepDims` the axis stays (size
/// 1).
Value maxIndex(NodeContext &nc, Value x, int64_t axis, bool last,
               bool keepDims) {
  auto in = cast<RankedTensorType>(x.getType());
  int64_t n = in.getDimSize(axis);
  Type f64 = nc.b.getF64Type();
  if (!isa<FloatType>(in.getElementType()))
    x = part(nc, "ampc.cast", x, {}, in.clone(f64));
  Value max = part(nc, "ampc.reduce_max", x,
                   {nc.ints("axes", {axis}), nc.i64("keepdims", 1)});
  Value mask = part(nc, "ampc.equal", {x, max});
  Value index = indexVector(nc, n, alongAxes(in.getRank(), n, axis), f64,
                            last ? 1 : -1);
  Value fill = scalarOf(nc, f64, last ? -1.0 : -static_cast<double>(n));
  Value picked = part(nc, "ampc.where", {mask, index, fill});
  Value r = part(nc, "ampc.reduce_max", picked,
                 {nc.ints("axes", {axis}), nc.i64("keepdims", keepDims)});
  return last ? r : part(nc, "ampc.neg", r);
}

/// ArgMax and ArgMin (int64 indices; no derivative). ArgMin is the ArgMax
/// of -x, integer and boolean data first cast to f64 (where negation
/// cannot overflow).
FailureOr<Outputs> importArgMaxMin(NodeContext &nc, bool min) {
  Value x = nc.input(0);
  auto in = cast<RankedTensorType>(x.getType());
  if (in.getRank() == 0)
    return nc.error("needs a tensor of rank 1 or more");
  std::optional<int64_t> axis =
      ampc::normalizeAxis(nc.getInt("axis", 0), in.getRank());
  if (!axis)
    return nc.error("axis " + Twine(nc.getInt("axis", 0)) +
                    " is out of range for rank " + Twine(in.getRank()));
  if (in.getDimSize(*axis) == 0)
    return nc.error("the axis has no elements (no index to return)");
  if (min) {
    if (!isa<FloatType>(in.getElementType()))
      x = part(nc, "ampc.cast", x, {}, in.clone(nc.b.getF64Type()));
    x = part(nc, "ampc.neg", x);
  }
  Value r = x ? maxIndex(nc, x, *axis, nc.getInt("select_last_index", 0) != 0,
                         nc.getInt("keepdims", 1) != 0)
              : Value();
  if (r)
    r = part(nc, "ampc.cast", r, {},
             cast<RankedTensorType>(r.getType()).clone(nc.b.getI64Type()));
  if (!r)
    return failure();
  return Outputs{r};
}
FailureOr<Outputs> importArgMax(NodeContext &nc) {
  return importArgMaxMin(nc, /*min=*/false);
}
FailureOr<Outputs> importArgMin(NodeContext &nc) {
  return importArgMaxMin(nc, /*min=*/true);
}

/// Hardmax: 1 at the first maximum along `axis`, 0 elsewhere, in x's type
/// (index == maxIndex, cast). Before opset 13 the input is coerced to 2-D
/// at `axis` (default 1) and the maximum taken over the second dimension.
FailureOr<Outputs> importHardmax(NodeContext &nc) {
  Value x = nc.input(0);
  auto in = cast<RankedTensorType>(x.getType());
  if (in.getRank() == 0)
    return nc.error("Hardmax needs a tensor of rank 1 or more");
  bool coerce = nc.opset < 13;
  int64_t given = nc.getInt("axis", coerce ? 1 : -1);
  std::optional<int64_t> axis =
      coerce ? (given >= -in.getRank() && given <= in.getRank()
                    ? std::optional<int64_t>(given < 0 ? given + in.getRank()
                                                       : given)
                    : std::nullopt)
             : ampc::normalizeAxis(given, in.getRank());
  if (!axis)
    return nc.error("axis " + Twine(given) + " is out of range for rank " +
                    Twine(in.getRank()));
  if (coerce) {
    // The products are factors of x's element count... unless a dimension
    // is 0, so check them.
    std::optional<int64_t> outer =
        ampc::checkedProduct(in.getShape().take_front(*axis));
    std::optional<int64_t> inner =
        ampc::checkedProduct(in.getShape().drop_front(*axis));
    if (!outer || !inner)
      return nc.error("the 2-D view of " + formatDims(in.getShape()) +
                      " has a dimension of more than 2^63 elements");
    x = reshaped(nc, x, {*outer, *inner});
  }
  int64_t along = coerce ? 1 : *axis;
  auto view = cast<RankedTensorType>(x.getType());
  int64_t n = view.getDimSize(along);
  if (n == 0)
    return Outputs{part(nc, "ampc.identity", nc.input(0))};
  Value first = maxIndex(nc, x, along, /*last=*/false, /*keepDims=*/true);
  Value index = indexVector(nc, n, alongAxes(view.getRank(), n, along),
                            nc.b.getF64Type());
  Value hit = part(nc, "ampc.equal", {index, first});
  Value r = part(nc, "ampc.cast", hit, {}, view);
  if (r && coerce)
    r = reshaped(nc, r, in.getShape());
  if (!r)
    return failure();
  return Outputs{r};
}

/// OneHot: where(unsqueeze(indices, axis) == index vector, on, off), the
/// values [off, on] sliced from input 2. Negative indices count from
/// `depth` (input 1, a constant; truncated when a float); others outside
/// [-depth, depth) match nothing. Float indices are compared in f64,
/// integer ones in int64, both exact.
FailureOr<Outputs> importOneHot(NodeContext &nc) {
  Value indices = nc.input(0), values = nc.input(2);
  auto in = cast<RankedTensorType>(indices.getType());
  auto valuesType = cast<RankedTensorType>(values.getType());
  if (valuesType.getRank() != 1 || valuesType.getDimSize(0) != 2)
    return nc.error("input 2 (values) must be [off_value, on_value], got " +
                    formatDims(valuesType.getShape()));
  FailureOr<DenseElementsAttr> depthValue = nc.constantInput(1, "depth");
  if (failed(depthValue))
    return failure();
  if (depthValue->getNumElements() != 1)
    return nc.error("input 1 (depth) must hold one value");
  double depthNumber;
  SmallString<32> depthText;
  if (isa<FloatType>(depthValue->getElementType())) {
    APFloat v = *depthValue->getValues<APFloat>().begin();
    v.toString(depthText);
    depthNumber = std::trunc(v.convertToDouble());
  } else {
    APInt v = *depthValue->getValues<APInt>().begin();
    bool isSigned = !depthValue->getElementType().isUnsignedInteger();
    v.toString(depthText, 10, isSigned);
    depthNumber = isSigned ? static_cast<double>(v.getSExtValue())
                           : static_cast<double>(v.getZExtValue());
  }
  int64_t rank = in.getRank() + 1;
  std::optional<int64_t> axis =
      ampc::normalizeAxis(nc.getInt("axis", -1), rank);
  if (!axis)
    return nc.error("axis " + Twine(nc.getInt("axis", -1)) +
                    " is out of range for rank " + Twine(rank));
  // A depth beyond 2^53 is not exact as a double nor a size of a tensor
  // ampc makes (the size check below refuses far less).
  if (!(depthNumber >= 1 && depthNumber <= 9007199254740992.0))
    return nc.error("depth " + depthText +
                    " must be between 1 and 2^53 (truncated to an integer)");
  int64_t depth = static_cast<int64_t>(depthNumber);
  SmallVector<int64_t> shape(in.getShape()), unsqueezed(in.getShape());
  shape.insert(shape.begin() + *axis, depth);
  unsqueezed.insert(unsqueezed.begin() + *axis, 1);
  std::string problem =
      ampc::checkTensorSize(valuesType.clone(shape), nc.importer.maxTensorBytes());
  if (!problem.empty())
    return nc.error("depth " + Twine(depth) + ": " + problem +
                    " (--max-tensor-bytes)");
  Type compare = isa<FloatType>(in.getElementType())
                     ? Type(nc.b.getF64Type())
                     : Type(nc.b.getI64Type());
  // The index vector 0 .. depth - 1 is a constant made here.
  if (failed(checkComputedConstant(nc, {depth}, compare,
                                   "depth " + Twine(depth))))
    return failure();
  Value wide = part(nc, "ampc.cast", indices, {}, in.clone(compare));
  Value zero = scalarOf(nc, compare, 0);
  Value depthScalar = scalarOf(nc, compare, static_cast<double>(depth));
  Value negative = part(nc, "ampc.less", {wide, zero});
  Value wrapped = part(nc, "ampc.where",
                       {negative, part(nc, "ampc.add", {wide, depthScalar}),
                        wide});
  wrapped = wrapped ? reshaped(nc, wrapped, unsqueezed) : Value();
  Value index =
      indexVector(nc, depth, alongAxes(rank, depth, *axis), compare);
  Value hit = part(nc, "ampc.equal", {wrapped, index});
  auto pick = [&](int64_t at) -> Value {
    Value v = part(nc, "ampc.slice", values,
                   {nc.ints("starts", {at}), nc.ints("ends", {at + 1}),
                    nc.ints("axes", {0}), nc.ints("steps", {1})});
    return v ? reshaped(nc, v, {}) : Value();
  };
  Value r = part(nc, "ampc.where", {hit, pick(1), pick(0)});
  if (!r)
    return failure();
  return Outputs{r};
}

//===----------------------------------------------------------------------===//
// Data-dependent indexing: GatherElements, GatherND, ScatterElements,
// ScatterND and TopK's values are a Gather or a Scatter (ampc.scatter) of
// flat positions into data viewed as rows, the positions computed from the
// indices by int64 elementwise ops (fused into one loop). An index out of
// range makes its position one that Gather and Scatter refuse at run time,
// so these ops fail as Gather does: an error naming the node.
//===----------------------------------------------------------------------===//

/// Row-major strides of `shape`.
SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// The int64 position `index` (an integer tensor) names along a dimension
/// of `size` elements, a negative index counting from the end, and
/// whether it lies in [-size, size). An index outside is given position 0,
/// and size is added to negative indices only, so that no arithmetic on a
/// hostile index (near ±2^63) overflows.
struct AxisPosition {
  Value position, valid;
};
AxisPosition axisPosition(NodeContext &nc, Value index, int64_t size) {
  auto type = cast<RankedTensorType>(index.getType());
  Type i64 = nc.b.getI64Type();
  Value wide = type.getElementType() == i64
                   ? index
                   : part(nc, "ampc.cast", index, {}, type.clone(i64));
  Value zero = scalarOf(nc, i64, 0), sizeValue = scalarOf(nc, i64, size);
  Value valid = part(
      nc, "ampc.and",
      {part(nc, "ampc.greater_or_equal", {wide, scalarOf(nc, i64, -size)}),
       part(nc, "ampc.less", {wide, sizeValue})});
  Value wrapped = part(
      nc, "ampc.add",
      {wide, part(nc, "ampc.where",
                  {part(nc, "ampc.less", {wide, zero}), sizeValue, zero})});
  return {part(nc, "ampc.where", {valid, wrapped, zero}), valid};
}

/// `offset` where `valid` holds, else -(rows + 1): outside the range of
/// every Gather or Scatter along a dimension of `rows`, so refused there at
/// run time.
Value guardedPosition(NodeContext &nc, Value offset, Value valid,
                      int64_t rows) {
  if (!valid)
    return offset;
  Type i64 = nc.b.getI64Type();
  return part(nc, "ampc.where",
              {valid, offset, scalarOf(nc, i64, -static_cast<double>(rows) - 1)});
}

/// The flat (row-major) position in data of shape `dataShape` of each
/// element that GatherElements or ScatterElements reads or writes: index
/// i's value along `axis`, i's own coordinates along the other dimensions.
/// `checked`: wrap negative indices and guard against indices out of range
/// (TopK's int64 positions need neither).
Value elementPositions(NodeContext &nc, Value indices,
                       ArrayRef<int64_t> dataShape, int64_t axis,
                       bool checked) {
  auto type = cast<RankedTensorType>(indices.getType());
  Type i64 = nc.b.getI64Type();
  int64_t rank = type.getRank();
  SmallVector<int64_t> strides = rowMajorStrides(dataShape);
  AxisPosition p = checked ? axisPosition(nc, indices, dataShape[axis])
                           : AxisPosition{indices, Value()};
  Value offset =
      strides[axis] == 1
          ? p.position
          : part(nc, "ampc.mul", {p.position, scalarOf(nc, i64, strides[axis])});
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = type.getDimSize(d);
    if (d == axis || n <= 1)
      continue;
    offset = part(nc, "ampc.add",
                  {offset, indexVector(nc, n, alongAxes(rank, n, d), i64,
                                       strides[d])});
  }
  int64_t total = 1;
  for (int64_t d : dataShape)
    total *= d;
  return guardedPosition(nc, offset, p.valid, total);
}

/// Indices of the gathers and scatters are int32 or int64 (ONNX's type
/// constraint).
LogicalResult checkIndexType(NodeContext &nc, RankedTensorType indices) {
  Type t = indices.getElementType();
  if (t.isSignlessInteger(32) || t.isSignlessInteger(64))
    return success();
  std::string name;
  llvm::raw_string_ostream os(name);
  os << t;
  return nc.error("indices must be int32 or int64, got " + name);
}

/// Checks GatherElements' and ScatterElements' shapes: indices of data's
/// rank, no longer than data off the axis. Returns the axis.
FailureOr<int64_t> checkElementIndices(NodeContext &nc, RankedTensorType data,
                                       RankedTensorType indices) {
  if (failed(checkIndexType(nc, indices)))
    return failure();
  if (data.getRank() == 0)
    return nc.error("data must have rank >= 1");
  if (indices.getRank() != data.getRank())
    return nc.error("indices " + formatDims(indices.getShape()) +
                    " must have the rank of data " +
                    formatDims(data.getShape()));
  std::optional<int64_t> axis =
      ampc::normalizeAxis(nc.getInt("axis", 0), data.getRank());
  if (!axis)
    return nc.error("axis " + Twine(nc.getInt("axis", 0)) +
                    " is out of range for rank " + Twine(data.getRank()));
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != *axis && indices.getDimSize(d) > data.getDimSize(d))
      return nc.error("indices " + formatDims(indices.getShape()) +
                      " are longer than data " + formatDims(data.getShape()) +
                      " along dimension " + Twine(d) + " (not the axis)");
  return *axis;
}

FailureOr<Outputs> importGatherElements(NodeContext &nc) {
  Value data = nc.input(0), indices = nc.input(1);
  auto dataType = cast<RankedTensorType>(data.getType());
  auto indexType = cast<RankedTensorType>(indices.getType());
  FailureOr<int64_t> axis = checkElementIndices(nc, dataType, indexType);
  if (failed(axis))
    return failure();
  Value positions = elementPositions(nc, indices, dataType.getShape(), *axis,
                                     /*checked=*/true);
  Value flat = reshaped(nc, data, {dataType.getNumElements()});
  Value r = part(nc, "ampc.gather", {flat, positions}, {nc.i64("axis", 0)});
  if (!r)
    return failure();
  return Outputs{r};
}

/// ReverseSequence: a GatherElements along time_axis at index len - 1 - t
/// where t < len (the batch's sequence_lens), t elsewhere.
FailureOr<Outputs> importReverseSequence(NodeContext &nc) {
  Value x = nc.input(0), lens = nc.input(1);
  auto xt = cast<RankedTensorType>(x.getType());
  auto lt = cast<RankedTensorType>(lens.getType());
  int64_t timeAxis = nc.getInt("time_axis", 0),
          batchAxis = nc.getInt("batch_axis", 1);
  if (xt.getRank() < 2)
    return nc.error("input must have rank 2 or more");
  if (!((timeAxis == 0 && batchAxis == 1) || (timeAxis == 1 && batchAxis == 0)))
    return nc.error("time_axis and batch_axis must be 0 and 1 in some order, "
                    "got " + Twine(timeAxis) + " and " + Twine(batchAxis));
  int64_t steps = xt.getDimSize(timeAxis), batch = xt.getDimSize(batchAxis);
  if (lt.getRank() != 1 || lt.getDimSize(0) != batch ||
      !lt.getElementType().isInteger(64))
    return nc.error("sequence_lens must be int64 [" + Twine(batch) +
                    "] (one length per batch entry), got " +
                    formatDims(lt.getShape()));
  auto i64 = nc.b.getI64Type();
  SmallVector<int64_t> tShape(2, 1), lShape(2, 1);
  tShape[timeAxis] = steps;
  lShape[batchAxis] = batch;
  Value t = indexVector(nc, steps, tShape, i64);
  Value len = reshaped(nc, lens, lShape);
  Value reversed = part(nc, "ampc.sub",
                        {part(nc, "ampc.sub", {len, scalarOf(nc, i64, 1.0)}), t});
  Value index = part(nc, "ampc.where",
                     {part(nc, "ampc.less", {t, len}), reversed, t});
  if (!index)
    return failure();
  // (T, B) or (B, T), then 1s for the other axes, expanded to x's shape.
  SmallVector<int64_t> shape2(xt.getShape().take_front(2));
  shape2.append(xt.getRank() - 2, 1);
  index = part(nc, "ampc.expand", reshaped(nc, index, shape2), {},
               RankedTensorType::get(xt.getShape(), i64));
  Value positions = index ? elementPositions(nc, index, xt.getShape(),
                                             timeAxis, /*checked=*/true)
                          : Value();
  Value r = part(nc, "ampc.gather",
                 {reshaped(nc, x, {xt.getNumElements()}), positions},
                 {nc.i64("axis", 0)});
  if (!r)
    return failure();
  return Outputs{r};
}

/// The reduction attribute of ScatterElements and ScatterND: none, add and
/// mul from opset 16, max and min from 18.
FailureOr<NamedAttribute> scatterReduction(NodeContext &nc) {
  std::string r = nc.getString("reduction", "none");
  bool known = r == "none" || r == "add" || r == "mul" ||
               (nc.opset >= 18 && (r == "max" || r == "min"));
  if (!known)
    return nc.error("'reduction' must be none, add, mul" +
                    Twine(nc.opset >= 18 ? ", max or min" : "") + ", got '" +
                    r + "'");
  return nc.b.getNamedAttr("reduction", nc.b.getStringAttr(r));
}

/// ScatterElements (and the Scatter of opsets 9 and 10).
FailureOr<Outputs> importScatterElements(NodeContext &nc) {
  Value data = nc.input(0), indices = nc.input(1), updates = nc.input(2);
  auto dataType = cast<RankedTensorType>(data.getType());
  auto indexType = cast<RankedTensorType>(indices.getType());
  auto updateType = cast<RankedTensorType>(updates.getType());
  FailureOr<int64_t> axis = checkElementIndices(nc, dataType, indexType);
  if (failed(axis))
    return failure();
  if (updateType.getShape() != indexType.getShape())
    return nc.error("updates " + formatDims(updateType.getShape()) +
                    " must have the shape of indices " +
                    formatDims(indexType.getShape()));
  FailureOr<NamedAttribute> reduction = scatterReduction(nc);
  if (failed(reduction))
    return failure();
  Value positions = elementPositions(nc, indices, dataType.getShape(), *axis,
                                     /*checked=*/true);
  Value flat = reshaped(nc, data, {dataType.getNumElements()});
  Value r = part(nc, "ampc.scatter", {flat, positions, updates},
                 {nc.i64("axis", 0), *reduction});
  r = r ? reshaped(nc, r, dataType.getShape()) : Value();
  if (!r)
    return failure();
  return Outputs{r};
}

/// GatherND's and ScatterND's view of data: its first `lead` dimensions
/// flattened into rows, and for each index tuple of `indices` (shape
/// [..., k], lead = batch + k, the first `batch` dimensions those of data)
/// its row, Σ position_j × stride_j plus the batch's first row.
Value tupleRows(NodeContext &nc, Value indices, ArrayRef<int64_t> dataShape,
                int64_t batch) {
  auto type = cast<RankedTensorType>(indices.getType());
  Type i64 = nc.b.getI64Type();
  int64_t q = type.getRank(), k = type.getDimSize(q - 1);
  SmallVector<int64_t> tupleShape(type.getShape().drop_back());
  ArrayRef<int64_t> lead = dataShape.take_front(batch + k);
  SmallVector<int64_t> strides = rowMajorStrides(lead);
  Value offset, valid;
  for (int64_t j = 0; j < k; ++j) {
    Value c = part(nc, "ampc.slice", indices,
                   {nc.ints("starts", {j}), nc.ints("ends", {j + 1}),
                    nc.ints("axes", {q - 1}), nc.ints("steps", {1})});
    if (!c)
      return Value();
    AxisPosition p =
        axisPosition(nc, reshaped(nc, c, tupleShape), lead[batch + j]);
    int64_t stride = strides[batch + j];
    Value term =
        stride == 1 ? p.position
                    : part(nc, "ampc.mul", {p.position, scalarOf(nc, i64, stride)});
    offset = offset ? part(nc, "ampc.add", {offset, term}) : term;
    valid = valid ? part(nc, "ampc.and", {valid, p.valid}) : p.valid;
  }
  for (int64_t i = 0; i < batch; ++i) {
    int64_t n = tupleShape[i];
    if (n > 1)
      offset = part(nc, "ampc.add",
                    {offset, indexVector(nc, n, alongAxes(q - 1, n, i), i64,
                                         strides[i])});
  }
  int64_t rows = 1;
  for (int64_t d : lead)
    rows *= d;
  return guardedPosition(nc, offset, valid, rows);
}

/// Checks GatherND's and ScatterND's shapes; returns k, the length of an
/// index tuple.
FailureOr<int64_t> checkTupleIndices(NodeContext &nc, RankedTensorType data,
                                     RankedTensorType indices, int64_t batch) {
  if (failed(checkIndexType(nc, indices)))
    return failure();
  int64_t r = data.getRank(), q = indices.getRank();
  if (r == 0 || q == 0)
    return nc.error("data " + formatDims(data.getShape()) + " and indices " +
                    formatDims(indices.getShape()) + " must have rank >= 1");
  if (batch < 0 || batch >= std::min(r, q))
    return nc.error("batch_dims " + Twine(batch) +
                    " must be at least 0 and less than the ranks of data (" +
                    Twine(r) + ") and indices (" + Twine(q) + ")");
  int64_t k = indices.getDimSize(q - 1);
  if (k < 1 || k > r - batch)
    return nc.error("indices " + formatDims(indices.getShape()) +
                    " hold index tuples of " + Twine(k) +
                    " elements, but data " + formatDims(data.getShape()) +
                    " takes tuples of 1 to " + Twine(r - batch));
  if (indices.getShape().take_front(batch) !=
      data.getShape().take_front(batch))
    return nc.error("indices " + formatDims(indices.getShape()) +
                    " and data " + formatDims(data.getShape()) +
                    " must agree on the first " + Twine(batch) +
                    " (batch) dimensions");
  return k;
}

/// data viewed as rows of its dimensions after the first `lead`.
Value asRows(NodeContext &nc, Value data, int64_t lead) {
  auto type = cast<RankedTensorType>(data.getType());
  int64_t rows = 1;
  for (int64_t d : type.getShape().take_front(lead))
    rows *= d;
  SmallVector<int64_t> shape = {rows};
  llvm::append_range(shape, type.getShape().drop_front(lead));
  return reshaped(nc, data, shape);
}

FailureOr<Outputs> importGatherND(NodeContext &nc) {
  Value data = nc.input(0), indices = nc.input(1);
  auto dataType = cast<RankedTensorType>(data.getType());
  int64_t batch = nc.getInt("batch_dims", 0);
  FailureOr<int64_t> k = checkTupleIndices(
      nc, dataType, cast<RankedTensorType>(indices.getType()), batch);
  if (failed(k))
    return failure();
  Value rows = tupleRows(nc, indices, dataType.getShape(), batch);
  Value r = part(nc, "ampc.gather", {asRows(nc, data, batch + *k), rows},
                 {nc.i64("axis", 0)});
  if (!r)
    return failure();
  return Outputs{r};
}

FailureOr<Outputs> importScatterND(NodeContext &nc) {
  Value data = nc.input(0), indices = nc.input(1), updates = nc.input(2);
  auto dataType = cast<RankedTensorType>(data.getType());
  auto indexType = cast<RankedTensorType>(indices.getType());
  auto updateType = cast<RankedTensorType>(updates.getType());
  FailureOr<int64_t> k = checkTupleIndices(nc, dataType, indexType, 0);
  if (failed(k))
    return failure();
  SmallVector<int64_t> expected(indexType.getShape().drop_back());
  llvm::append_range(expected, dataType.getShape().drop_front(*k));
  if (updateType.getShape() != ArrayRef<int64_t>(expected))
    return nc.error("updates " + formatDims(updateType.getShape()) +
                    " must have shape " + formatDims(expected) +
                    " (indices' but the last, then data's after the first " +
                    Twine(*k) + ")");
  FailureOr<NamedAttribute> reduction = scatterReduction(nc);
  if (failed(reduction))
    return failure();
  Value rows = tupleRows(nc, indices, dataType.getShape(), 0);
  Value r = part(nc, "ampc.scatter", {asRows(nc, data, *k), rows, updates},
                 {nc.i64("axis", 0), *reduction});
  r = r ? reshaped(nc, r, dataType.getShape()) : Value();
  if (!r)
    return failure();
  return Outputs{r};
}

/// TopK: ampc.top_k's indices, and the values gathered at them (so their
/// gradient is Gather's). K is input 1 from opset 10, an attribute before.
FailureOr<Outputs> importTopK(NodeContext &nc) {
  Value x = nc.input(0);
  auto type = cast<RankedTensorType>(x.getType());
  int64_t k;
  if (nc.opset >= 10) {
    if (!nc.input(1))
      return nc.error("input 1 (K) is required from opset 10");
    FailureOr<SmallVector<int64_t>> values = nc.constantInts(1, "K");
    if (failed(values))
      return failure();
    if (values->size() != 1)
      return nc.error("input 1 (K) must hold one value, got " +
                      Twine(values->size()));
    k = (*values)[0];
  } else {
    if (!nc.attr("k"))
      return nc.error("attribute 'k' is required before opset 10");
    k = nc.getInt("k", 0);
  }
  if (type.getRank() == 0)
    return nc.error("input must have rank >= 1");
  std::optional<int64_t> axis =
      ampc::normalizeAxis(nc.getInt("axis", -1), type.getRank());
  if (!axis)
    return nc.error("axis " + Twine(nc.getInt("axis", -1)) +
                    " is out of range for rank " + Twine(type.getRank()));
  int64_t n = type.getDimSize(*axis);
  if (k < 0 || k > n)
    return nc.error("K " + Twine(k) + " must be between 0 and " + Twine(n) +
                    ", the size of axis " + Twine(*axis));
  int64_t largest = nc.getInt("largest", 1);
  if (largest != 0 && largest != 1)
    return nc.error("'largest' must be 0 or 1, got " + Twine(largest));
  Value indices = part(nc, "ampc.top_k", x,
                       {nc.i64("k", k), nc.i64("axis", *axis),
                        nc.i64("largest", largest)});
  if (!indices)
    return failure();
  Value positions = elementPositions(nc, indices, type.getShape(), *axis,
                                     /*checked=*/false);
  Value values = part(nc, "ampc.gather",
                      {reshaped(nc, x, {type.getNumElements()}), positions},
                      {nc.i64("axis", 0)});
  if (!values)
    return failure();
  return Outputs{values, indices};
}

FailureOr<Outputs> importReduceProd(NodeContext &nc) {
  return importReduce<18>(nc, "ampc.reduce_prod");
}

FailureOr<Outputs> importShape(NodeContext &nc) {
  SmallVector<NamedAttribute> attrs = {nc.i64("start", nc.getInt("start", 0))};
  if (nc.attr("end"))
    attrs.push_back(nc.i64("end", nc.getInt("end", 0)));
  return nc.build("ampc.shape", nc.input(0), attrs);
}

FailureOr<Outputs> importConstantOfShape(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> shape = nc.constantInts(0, "shape");
  if (failed(shape))
    return failure();
  for (int64_t d : *shape)
    if (d < 0)
      return nc.error("shape " + formatDims(*shape) + " has a negative dim");
  if (!ampc::checkedProduct(*shape))
    return nc.error("shape " + formatDims(*shape) + " has more than 2^63 "
                    "elements");
  MLIRContext *ctx = nc.b.getContext();
  Attribute element = nc.b.getF32FloatAttr(0.0f);
  if (const auto *a = nc.attr("value")) {
    std::string message;
    DenseElementsAttr v = convertTensor(ctx, a->t(), "", nc.importer.maxTensorBytes(), message);
    if (!v)
      return nc.error(message);
    if (v.getNumElements() != 1)
      return nc.error("'value' must hold exactly one element");
    element = *v.getValues<Attribute>().begin();
  }
  auto type = RankedTensorType::get(*shape, cast<TypedAttr>(element).getType());
  return constant(nc, DenseElementsAttr::get(type, element));
}

FailureOr<Outputs> importRange(NodeContext &nc) {
  // One message per node: stop at the first operand that is not constant.
  FailureOr<DenseElementsAttr> start = nc.constantInput(0, "start");
  if (failed(start))
    return failure();
  FailureOr<DenseElementsAttr> limit = nc.constantInput(1, "limit");
  if (failed(limit))
    return failure();
  FailureOr<DenseElementsAttr> delta = nc.constantInput(2, "delta");
  if (failed(delta))
    return failure();
  Type element = start->getElementType();
  for (DenseElementsAttr a : {*start, *limit, *delta})
    if (a.getNumElements() != 1 || a.getElementType() != element)
      return nc.error("start, limit and delta must be scalars of one type");
  // ONNX defines the count and the values in the inputs' own type:
  // ceil((limit - start) / delta) and start + i * delta, so f32 ranges are
  // computed in float, not double.
  auto scalar = [](DenseElementsAttr a) -> Attribute {
    return *a.getValues<Attribute>().begin();
  };
  // The values are written as raw data: an Attribute per element would
  // intern up to 2^24 of them in the context.
  int64_t count = 0;
  constexpr int64_t kMaxRange = kMaxComputedElements;
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() < 8 ||
      element.getIntOrFloatBitWidth() % 8)
    return nc.error("start, limit and delta must be integers or floats");
  unsigned width = element.getIntOrFloatBitWidth() / 8;
  std::vector<char> raw;
  auto append = [&](const APInt &bits) {
    for (unsigned byte = 0; byte < width; ++byte)
      raw.push_back(static_cast<char>(bits.extractBitsAsZExtValue(8, 8 * byte)));
  };
  if (auto ft = dyn_cast<FloatType>(element)) {
    auto compute = [&](auto s, auto l, auto d) -> LogicalResult {
      if (d == 0)
        return nc.error("delta must not be 0");
      auto c = std::ceil((l - s) / d);
      if (!(c <= kMaxRange))
        return nc.error("range is too large or not finite");
      count = c > 0 ? static_cast<int64_t>(c) : 0;
      raw.reserve(count * width);
      for (int64_t i = 0; i < count; ++i) {
        APFloat v(static_cast<double>(s + static_cast<decltype(s)>(i) * d));
        bool lost;
        v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
        append(v.bitcastToAPInt());
      }
      return success();
    };
    double s = cast<FloatAttr>(scalar(*start)).getValueAsDouble();
    double l = cast<FloatAttr>(scalar(*limit)).getValueAsDouble();
    double d = cast<FloatAttr>(scalar(*delta)).getValueAsDouble();
    LogicalResult ok = ft.isF32() ? compute(float(s), float(l), float(d))
                                  : compute(s, l, d);
    if (failed(ok))
      return failure();
  } else {
    bool isSigned = !element.isUnsignedInteger();
    auto valueOf = [&](DenseElementsAttr a) -> __int128 {
      APInt v = cast<IntegerAttr>(scalar(a)).getValue();
      return isSigned ? static_cast<__int128>(v.getSExtValue())
                      : static_cast<__int128>(v.getZExtValue());
    };
    __int128 s = valueOf(*start), l = valueOf(*limit), d = valueOf(*delta);
    if (d == 0)
      return nc.error("delta must not be 0");
    __int128 span = l - s;
    __int128 c = span / d + ((span % d != 0) && ((span > 0) == (d > 0)));
    if (c > kMaxRange)
      return nc.error("range of more than " + Twine(kMaxRange) +
                      " elements is too large");
    count = c > 0 ? static_cast<int64_t>(c) : 0;
    raw.reserve(count * width);
    // Every value lies between start and limit, so it fits the type; the
    // product is taken in 128 bits (i * delta alone can pass 2^63).
    for (int64_t i = 0; i < count; ++i)
      append(APInt(8 * width, static_cast<uint64_t>(s + i * d),
                   /*isSigned=*/false, /*implicitTrunc=*/true));
  }
  return constant(nc, DenseElementsAttr::getFromRawBuffer(
                          RankedTensorType::get({count}, element), raw));
}

FailureOr<Outputs> importConstant(NodeContext &nc) {
  if (nc.node.attribute_size() != 1)
    return nc.error("needs exactly one value attribute");
  const onnx::AttributeProto &a = nc.node.attribute(0);
  MLIRContext *ctx = nc.b.getContext();
  OpBuilder &b = nc.b;
  if (a.name() == "value") {
    std::string message;
    DenseElementsAttr v = convertTensor(ctx, a.t(), "", nc.importer.maxTensorBytes(), message);
    if (!v)
      return nc.error(message);
    return constant(nc, v);
  }
  if (a.name() == "value_float")
    return constant(nc, DenseElementsAttr::get(
                            RankedTensorType::get({}, b.getF32Type()), a.f()));
  if (a.name() == "value_int")
    return constant(nc, DenseElementsAttr::get(
                            RankedTensorType::get({}, b.getI64Type()),
                            static_cast<int64_t>(a.i())));
  if (a.name() == "value_floats")
    return constant(nc, DenseElementsAttr::get(
                            RankedTensorType::get({a.floats_size()},
                                                  b.getF32Type()),
                            ArrayRef<float>(a.floats().data(), a.floats_size())));
  if (a.name() == "value_ints") {
    SmallVector<int64_t> v(a.ints().begin(), a.ints().end());
    return constant(nc, DenseElementsAttr::get(
                            RankedTensorType::get({a.ints_size()},
                                                  b.getI64Type()),
                            ArrayRef<int64_t>(v)));
  }
  return nc.error("'" + a.name() + "' constants are not supported");
}

/// Both ONNX losses take the same attributes.
FailureOr<SmallVector<NamedAttribute>> lossAttributes(NodeContext &nc) {
  FailureOr<NamedAttribute> reduction =
      nc.enumAttr<ampc::Reduction, ampc::ReductionAttr>("reduction", "mean");
  if (failed(reduction))
    return failure();
  SmallVector<NamedAttribute> attrs = {*reduction};
  if (nc.attr("ignore_index"))
    attrs.push_back(nc.i64("ignore_index", nc.getInt("ignore_index", 0)));
  return attrs;
}

FailureOr<Outputs> importSoftmaxCrossEntropyLoss(NodeContext &nc) {
  FailureOr<SmallVector<NamedAttribute>> attrs = lossAttributes(nc);
  if (failed(attrs))
    return failure();
  return buildSame(nc, "ampc.softmax_cross_entropy_loss", *attrs, 2);
}

FailureOr<Outputs> importNegativeLogLikelihoodLoss(NodeContext &nc) {
  FailureOr<SmallVector<NamedAttribute>> attrs = lossAttributes(nc);
  if (failed(attrs))
    return failure();
  return buildSame(nc, "ampc.negative_log_likelihood_loss", *attrs);
}

constexpr AttrKind I = AttrKind::Int, F = AttrKind::Float, S = AttrKind::String,
                   Is = AttrKind::Ints, Fs = AttrKind::Floats,
                   T = AttrKind::Tensor;

const std::vector<OpRule> &rules() {
  // opType, ampc op, min opset, min/max inputs, max outputs, attributes,
  // builder.
  static const std::vector<OpRule> kRules = {
      {"Neg", "ampc.neg", 6, 1, 1, 1, {}, simple<kNeg>},
      {"Sqrt", "ampc.sqrt", 6, 1, 1, 1, {}, simple<kSqrt>},
      {"Reciprocal", "ampc.reciprocal", 6, 1, 1, 1, {}, simple<kReciprocal>},
      {"Exp", "ampc.exp", 6, 1, 1, 1, {}, simple<kExp>},
      {"Log", "ampc.log", 6, 1, 1, 1, {}, simple<kLog>},
      {"Erf", "ampc.erf", 9, 1, 1, 1, {}, simple<kErf>},
      {"Relu", "ampc.relu", 6, 1, 1, 1, {}, simple<kRelu>},
      {"Sigmoid", "ampc.sigmoid", 6, 1, 1, 1, {}, simple<kSigmoid>},
      {"Tanh", "ampc.tanh", 6, 1, 1, 1, {}, simple<kTanh>},
      {"Identity", "ampc.identity", 1, 1, 1, 1, {}, simple<kIdentity>},
      {"LeakyRelu", "ampc.leaky_relu", 6, 1, 1, 1, {{"alpha", F}}, importLeakyRelu},
      {"Gelu", "ampc.gelu", 20, 1, 1, 1, {{"approximate", S}}, importGelu},
      {"Add", "ampc.add", 7, 2, 2, 1, {}, simple<kAdd>},
      {"Sub", "ampc.sub", 7, 2, 2, 1, {}, simple<kSub>},
      {"Mul", "ampc.mul", 7, 2, 2, 1, {}, simple<kMul>},
      {"Div", "ampc.div", 7, 2, 2, 1, {}, simple<kDiv>},
      {"Pow", "ampc.pow", 7, 2, 2, 1, {}, simple<kPow>},
      {"Equal", "ampc.equal", 7, 2, 2, 1, {}, simple<kEqual>},
      {"Where", "ampc.where", 9, 3, 3, 1, {}, simple<kWhere>},
      {"Cast", "ampc.cast", 6, 1, 1, 1, {{"to", I}, {"saturate", I}}, importCast},
      {"CastLike", "ampc.cast", 15, 2, 2, 1, {{"saturate", I}}, importCastLike},
      {"Abs", "ampc.abs", 6, 1, 1, 1, {}, simple<kAbs>},
      {"Sign", "ampc.sign", 9, 1, 1, 1, {}, simple<kSign>},
      {"Floor", "ampc.floor", 6, 1, 1, 1, {}, simple<kFloor>},
      {"Ceil", "ampc.ceil", 6, 1, 1, 1, {}, simple<kCeil>},
      {"Round", "ampc.round", 11, 1, 1, 1, {}, simple<kRound>},
      {"Sin", "ampc.sin", 7, 1, 1, 1, {}, simple<kSin>},
      {"Cos", "ampc.cos", 7, 1, 1, 1, {}, simple<kCos>},
      {"Tan", "ampc.tan", 7, 1, 1, 1, {}, simple<kTan>},
      {"Asin", "ampc.asin", 7, 1, 1, 1, {}, simple<kAsin>},
      {"Acos", "ampc.acos", 7, 1, 1, 1, {}, simple<kAcos>},
      {"Atan", "ampc.atan", 7, 1, 1, 1, {}, simple<kAtan>},
      {"Sinh", "ampc.sinh", 9, 1, 1, 1, {}, simple<kSinh>},
      {"Cosh", "ampc.cosh", 9, 1, 1, 1, {}, simple<kCosh>},
      {"Asinh", "ampc.asinh", 9, 1, 1, 1, {}, simple<kAsinh>},
      {"Acosh", "ampc.acosh", 9, 1, 1, 1, {}, simple<kAcosh>},
      {"Atanh", "ampc.atanh", 9, 1, 1, 1, {}, simple<kAtanh>},
      {"Softplus", "ampc.softplus", 1, 1, 1, 1, {}, simple<kSoftplus>},
      {"Softsign", "ampc.softsign", 1, 1, 1, 1, {}, simple<kSoftsign>},
      {"Mish", "ampc.mish", 18, 1, 1, 1, {}, simple<kMish>},
      {"HardSwish", "ampc.hard_swish", 14, 1, 1, 1, {}, simple<kHardSwish>},
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
      {"Greater", "ampc.greater", 9, 2, 2, 1, {}, simple<kGreater>},
      {"Less", "ampc.less", 9, 2, 2, 1, {}, simple<kLess>},
      {"GreaterOrEqual", "ampc.greater_or_equal", 12, 2, 2, 1, {}, simple<kGreaterOrEqual>},
      {"LessOrEqual", "ampc.less_or_equal", 12, 2, 2, 1, {}, simple<kLessOrEqual>},
      {"And", "ampc.and", 7, 2, 2, 1, {}, simple<kAnd>},
      {"Or", "ampc.or", 7, 2, 2, 1, {}, simple<kOr>},
      {"Xor", "ampc.xor", 7, 2, 2, 1, {}, simple<kXor>},
      {"Not", "ampc.not", 1, 1, 1, 1, {}, simple<kNot>},
      {"IsNaN", "ampc.is_nan", 9, 1, 1, 1, {}, simple<kIsNaN>},
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
      {"MatMul", "ampc.matmul", 1, 2, 2, 1, {}, simple<kMatMul>},
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
      {"GlobalAveragePool", "ampc.global_average_pool", 1, 1, 1, 1, {}, simple<kGlobalAveragePool>},
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
