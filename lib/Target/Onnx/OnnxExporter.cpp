//===- OnnxExporter.cpp - mixed-precision ONNX models ---------------------===//
//
// The exporter works on the original ModelProto, never on the dialect: the
// decisions of the precision assignment are keyed by ONNX node name, and
// every node keeps its attributes, names and op version. The rewrite:
//
//  1. ONNX shape inference on a copy gives the ORIGINAL element type of every
//     tensor (graph inputs, initializers, intermediates, outputs).
//  2. The nodes are visited in topological order while the dtype each tensor
//     has in the new graph (its "current" dtype) is tracked.
//  3. Each node computes in its decided dtype, or follows the current dtype
//     of its float inputs. The dtype is that of one type parameter of the
//     op's schema (the "compute parameter": the parameter of the first input
//     whose original type is a float type); inputs of that parameter are cast
//     to it, outputs of that parameter get it, everything else keeps its type.
//  4. FP32 initializers and Constants whose every use wants the same FP16 or
//     BF16 dtype are stored in that dtype instead of being cast.
//  5. Graph outputs get their original dtype back through a final Cast.
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/OnnxExport.h"

#include "ampc/Import/OnnxModel.h"
#include "ampc/Kernels/Common/Float16.h"
#include "ampc/Support/AtomicWrite.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <set>

using llvm::StringRef;
using llvm::Twine;
using onnx::NodeProto;
using onnx::OpSchema;
using onnx::TensorProto;

namespace {

//===----------------------------------------------------------------------===//
// Data types
//===----------------------------------------------------------------------===//

/// Element type of a tensor whose type is not known (TensorProto::UNDEFINED).
constexpr int kUnknownType = TensorProto::UNDEFINED;
/// Marks a value that is not a tensor (sequence, map, optional).
constexpr int kNotATensor = -1;

bool isFloatType(int t) {
  return t == TensorProto::FLOAT || t == TensorProto::FLOAT16 ||
         t == TensorProto::BFLOAT16 || t == TensorProto::DOUBLE;
}

bool isLowPrecision(int t) {
  return t == TensorProto::FLOAT16 || t == TensorProto::BFLOAT16;
}

/// Short dtype name used in the names of inserted tensors ("x_to_f16").
const char *shortName(int t) {
  switch (t) {
  case TensorProto::FLOAT16:
    return "f16";
  case TensorProto::BFLOAT16:
    return "bf16";
  case TensorProto::DOUBLE:
    return "f64";
  default:
    return "f32";
  }
}

/// The dtype as ONNX names it in messages.
const char *onnxName(int t) {
  switch (t) {
  case TensorProto::FLOAT16:
    return "FLOAT16";
  case TensorProto::BFLOAT16:
    return "BFLOAT16";
  case TensorProto::DOUBLE:
    return "DOUBLE";
  default:
    return "FLOAT";
  }
}

/// The type string an OpSchema uses for a tensor of float dtype `t`.
std::string schemaTypeString(int t) {
  switch (t) {
  case TensorProto::FLOAT16:
    return "tensor(float16)";
  case TensorProto::BFLOAT16:
    return "tensor(bfloat16)";
  case TensorProto::DOUBLE:
    return "tensor(double)";
  default:
    return "tensor(float)";
  }
}

/// The common dtype of float dtypes that differ: the widest one, and FLOAT
/// when FP16 and BF16 meet (neither holds the other).
int widestFloatType(const std::vector<int> &types) {
  bool f64 = false, f32 = false;
  for (int t : types) {
    f64 |= t == TensorProto::DOUBLE;
    f32 |= t == TensorProto::FLOAT;
  }
  if (f64)
    return TensorProto::DOUBLE;
  if (f32 || std::adjacent_find(types.begin(), types.end(),
                                std::not_equal_to<int>()) != types.end())
    return TensorProto::FLOAT;
  return types.front();
}

/// ONNX's default domain is spelled "" or "ai.onnx".
std::string normalizeDomain(const std::string &domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

//===----------------------------------------------------------------------===//
// FP32 tensor data to FP16 / BF16 (round-to-nearest-even)
//===----------------------------------------------------------------------===//

/// Number of elements the tensor's dims describe.
int64_t elementCount(const TensorProto &tensor) {
  int64_t count = 1;
  for (int64_t d : tensor.dims())
    count *= d;
  return count;
}

/// Rewrites an FP32 tensor held in the proto (raw_data or float_data) as
/// `dtype` (FLOAT16 or BFLOAT16) in raw_data, little-endian as ONNX stores
/// it. Returns false, leaving the tensor alone, when its data is inconsistent
/// with its dims or lives outside the proto.
bool convertFloatTensor(TensorProto &tensor, int dtype) {
  if (tensor.data_type() != TensorProto::FLOAT ||
      tensor.data_location() == TensorProto::EXTERNAL)
    return false;
  std::vector<float> values;
  if (!tensor.raw_data().empty()) {
    const std::string &raw = tensor.raw_data();
    if (raw.size() % 4 != 0)
      return false;
    values.resize(raw.size() / 4);
    for (size_t i = 0; i < values.size(); ++i) {
      auto byte = [&](size_t k) {
        return static_cast<uint32_t>(static_cast<unsigned char>(raw[4 * i + k]));
      };
      uint32_t bits = byte(0) | byte(1) << 8 | byte(2) << 16 | byte(3) << 24;
      std::memcpy(&values[i], &bits, sizeof(bits));
    }
  } else {
    values.assign(tensor.float_data().begin(), tensor.float_data().end());
  }
  if (static_cast<int64_t>(values.size()) != elementCount(tensor))
    return false;

  std::string raw(values.size() * 2, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t bits = dtype == TensorProto::FLOAT16
                        ? ampc::numeric::f32ToF16Bits(values[i])
                        : ampc::numeric::f32ToBf16Bits(values[i]);
    raw[2 * i] = static_cast<char>(bits & 0xFF);
    raw[2 * i + 1] = static_cast<char>(bits >> 8);
  }
  tensor.clear_float_data();
  tensor.set_raw_data(std::move(raw));
  tensor.set_data_type(dtype);
  return true;
}

//===----------------------------------------------------------------------===//
// The exporter
//===----------------------------------------------------------------------===//

class Exporter {
public:
  Exporter(const onnx::ModelProto &model, const ampc::NodePrecisions &decisions,
           onnx::ModelProto &out, std::string &error,
           std::vector<std::string> *warnings)
      : model(model), decisions(decisions), out(out), error(error),
        warnings(warnings) {}

  bool run();

private:
  bool fail(const Twine &message) {
    error = message.str();
    return false;
  }
  void warn(const Twine &message) {
    if (warnings)
      warnings->push_back(message.str());
  }

  // Steps, in the order run() calls them.
  void readOpsets();
  bool checkDecisions();
  bool checkNoSubgraphs();
  bool topologicalOrder(std::vector<size_t> &order);
  bool inferOriginalTypes(const std::vector<size_t> &order);
  bool rewriteNode(const NodeProto &node, size_t index);
  void storeConstantsInLowPrecision();
  bool restoreGraphOutputTypes();

  // Node rewriting helpers.
  const OpSchema *schemaOf(const NodeProto &node) const;
  bool keepOriginalTypes(NodeProto &node);
  bool castInput(std::string *input, int dtype);
  bool restoreInput(std::string *input);

  // Cast insertion and naming.
  bool castTo(const std::string &tensor, int dtype, std::string &result);
  NodeProto makeCast(const std::string &input, const std::string &output,
                     int dtype);
  std::string freshTensorName(const std::string &base);
  std::string freshNodeName(const std::string &base);

  int originalType(const std::string &name) const {
    auto it = originalTypes.find(name);
    return it == originalTypes.end() ? kUnknownType : it->second;
  }
  int currentType(const std::string &name) const {
    auto it = currentTypes.find(name);
    return it == currentTypes.end() ? kUnknownType : it->second;
  }
  void setCurrentType(const std::string &name, int dtype) {
    if (dtype == kUnknownType)
      currentTypes.erase(name);
    else
      currentTypes[name] = dtype;
  }
  /// Renames every use of `from` as a node input in the new graph.
  void renameUses(const std::string &from, const std::string &to);

  const onnx::ModelProto &model;
  const ampc::NodePrecisions &decisions;
  onnx::ModelProto &out;
  std::string &error;
  std::vector<std::string> *warnings;

  /// Opset per (normalized) domain.
  std::map<std::string, int64_t> opsets;
  /// Element types in the original model; kNotATensor for other values.
  llvm::StringMap<int> originalTypes;
  /// Element types in the graph being built.
  llvm::StringMap<int> currentTypes;
  /// Every tensor and node name in use, for fresh names.
  llvm::StringSet<> tensorNames, nodeNames;
  /// The nodes of the new graph, in order.
  std::vector<NodeProto> nodes;
  /// The Cast inserted for (source tensor, dtype): its output name.
  std::map<std::pair<std::string, int>, std::string> casts;
  /// Output name of each inserted Cast -> its source tensor.
  llvm::StringMap<std::string> castSources;
};

bool Exporter::run() {
  out = model;
  readOpsets();
  std::vector<size_t> order;
  if (!checkDecisions() || !checkNoSubgraphs() ||
      !topologicalOrder(order) || !inferOriginalTypes(order))
    return false;

  const onnx::GraphProto &graph = model.graph();
  // Names already taken; inserted tensors and nodes get fresh ones.
  for (const auto &vi : graph.input())
    tensorNames.insert(vi.name());
  for (const auto &vi : graph.output())
    tensorNames.insert(vi.name());
  for (const auto &vi : graph.value_info())
    tensorNames.insert(vi.name());
  for (const auto &init : graph.initializer())
    tensorNames.insert(init.name());
  for (const auto &sparse : graph.sparse_initializer())
    tensorNames.insert(sparse.values().name());
  for (const NodeProto &node : graph.node()) {
    for (const std::string &name : node.input())
      tensorNames.insert(name);
    for (const std::string &name : node.output())
      tensorNames.insert(name);
    if (!node.name().empty())
      nodeNames.insert(node.name());
  }

  // Graph inputs and initializers start at their original dtype.
  for (const auto &vi : graph.input())
    setCurrentType(vi.name(), originalType(vi.name()));
  for (const auto &init : graph.initializer())
    setCurrentType(init.name(), originalType(init.name()));
  for (const auto &sparse : graph.sparse_initializer())
    setCurrentType(sparse.values().name(), originalType(sparse.values().name()));

  for (size_t index : order)
    if (!rewriteNode(graph.node(index), index))
      return false;

  storeConstantsInLowPrecision();
  if (!restoreGraphOutputTypes())
    return false;

  onnx::GraphProto *result = out.mutable_graph();
  result->clear_node();
  for (NodeProto &node : nodes)
    *result->add_node() = std::move(node);
  // Intermediate types changed; the checker infers them again.
  result->clear_value_info();
  return true;
}

void Exporter::readOpsets() {
  for (const auto &opset : model.opset_import())
    opsets[normalizeDomain(opset.domain())] = opset.version();
}

bool Exporter::checkDecisions() {
  // Decisions naming no node are the caller's to report; only the nodes of
  // this model are checked.
  for (int index = 0; index < model.graph().node_size(); ++index) {
    const NodeProto &node = model.graph().node(index);
    std::string key = ampc::onnxNodeName(node, index);
    auto it = decisions.find(key);
    if (it == decisions.end())
      continue;
    int dtype = it->second;
    if (dtype != TensorProto::FLOAT && dtype != TensorProto::FLOAT16 &&
        dtype != TensorProto::BFLOAT16)
      return fail("node '" + key + "' (" + node.op_type() +
                  "): precision decision " + Twine(dtype) +
                  " is not FLOAT (1), FLOAT16 (10) or BFLOAT16 (16)");
    auto opset = opsets.find("");
    int64_t version = opset == opsets.end() ? 0 : opset->second;
    if (dtype == TensorProto::BFLOAT16 && version < 13)
      return fail("node '" + key + "' (" + node.op_type() +
                  ") is assigned BFLOAT16, but the model's default-domain "
                  "opset is " +
                  Twine(version) +
                  "; a Cast to bfloat16 needs opset 13 or later");
  }
  return true;
}

bool Exporter::inferOriginalTypes(const std::vector<size_t> &order) {
  // Shape inference on a sorted copy (it visits nodes in order): the model
  // itself is left as it came. Node-level inference errors are not raised
  // (error mode 0); whatever stays untyped is treated as "not a float tensor"
  // below.
  onnx::ModelProto inferred = model;
  inferred.mutable_graph()->clear_node();
  for (size_t index : order)
    *inferred.mutable_graph()->add_node() = model.graph().node(index);
  try {
    onnx::shape_inference::InferShapes(inferred);
  } catch (const std::exception &e) {
    return fail(Twine("ONNX shape inference failed on the original model: ") +
                e.what());
  }

  auto record = [&](const onnx::ValueInfoProto &vi) {
    if (!vi.has_type())
      return;
    if (!vi.type().has_tensor_type()) {
      originalTypes[vi.name()] = kNotATensor;
      return;
    }
    int elem = vi.type().tensor_type().elem_type();
    if (elem != kUnknownType)
      originalTypes[vi.name()] = elem;
  };
  // Later sources override earlier ones: declared types beat inferred ones,
  // and an initializer's own data type beats a graph input's declaration.
  const onnx::GraphProto &graph = inferred.graph();
  for (const auto &vi : graph.value_info())
    record(vi);
  for (const auto &vi : graph.output())
    record(vi);
  for (const auto &vi : graph.input())
    record(vi);
  for (const auto &init : graph.initializer())
    if (init.data_type() != kUnknownType)
      originalTypes[init.name()] = init.data_type();
  for (const auto &sparse : graph.sparse_initializer())
    if (sparse.values().data_type() != kUnknownType)
      originalTypes[sparse.values().name()] = sparse.values().data_type();
  return true;
}

bool Exporter::checkNoSubgraphs() {
  // A subgraph refers to outer tensors by name and would need the same
  // rewrite applied inside it; the importer does not accept these ops either.
  for (int index = 0; index < model.graph().node_size(); ++index) {
    const NodeProto &node = model.graph().node(index);
    for (const auto &attr : node.attribute())
      if (attr.has_g() || attr.graphs_size() > 0)
        return fail("node '" + ampc::onnxNodeName(node, index) + "' (" +
                    node.op_type() +
                    "): nodes with subgraphs are not supported by the "
                    "mixed-precision exporter");
  }
  return true;
}

bool Exporter::topologicalOrder(std::vector<size_t> &order) {
  const onnx::GraphProto &graph = model.graph();
  if (std::optional<ampc::OnnxGraphError> e = ampc::sortOnnxNodes(graph, order))
    return fail("node '" + ampc::onnxNodeName(graph.node(e->node), e->node) +
                "' (" + graph.node(e->node).op_type() + "): " + e->message);
  return true;
}

const OpSchema *Exporter::schemaOf(const NodeProto &node) const {
  auto opset = opsets.find(normalizeDomain(node.domain()));
  if (opset == opsets.end())
    return nullptr;
  return onnx::OpSchemaRegistry::Schema(node.op_type(),
                                        static_cast<int>(opset->second),
                                        normalizeDomain(node.domain()));
}

/// The formal parameter the i-th input or output binds to; the last formal
/// repeats for variadic ones.
const OpSchema::FormalParameter *
formalAt(const std::vector<OpSchema::FormalParameter> &formals, int i) {
  if (formals.empty())
    return nullptr;
  return &formals[std::min<size_t>(i, formals.size() - 1)];
}

/// Whether the formal parameter accepts tensors of float dtype `dtype`.
bool accepts(const OpSchema::FormalParameter &formal, int dtype) {
  std::string wanted = schemaTypeString(dtype);
  for (onnx::DataType type : formal.GetTypes())
    if (*type == wanted)
      return true;
  return false;
}

bool Exporter::castInput(std::string *input, int dtype) {
  int current = currentType(*input);
  if (!isFloatType(current) || current == dtype)
    return true;
  std::string source = *input;
  return castTo(source, dtype, *input);
}

bool Exporter::restoreInput(std::string *input) {
  int original = originalType(*input);
  if (!isFloatType(original))
    return true;
  return castInput(input, original);
}

bool Exporter::keepOriginalTypes(NodeProto &node) {
  for (std::string &input : *node.mutable_input())
    if (!input.empty() && !restoreInput(&input))
      return false;
  for (const std::string &output : node.output())
    if (!output.empty())
      setCurrentType(output, originalType(output));
  nodes.push_back(std::move(node));
  return true;
}

bool Exporter::rewriteNode(const NodeProto &original, size_t index) {
  NodeProto node = original;
  std::string key = ampc::onnxNodeName(original, index);
  std::optional<int> decision;
  if (auto it = decisions.find(key); it != decisions.end())
    decision = it->second;
  std::string domain = normalizeDomain(node.domain());

  // A user's Cast is left as written: its output has its `to` type, whatever
  // its input now is (Cast accepts every dtype).
  if (domain.empty() && node.op_type() == "Cast") {
    int to = kUnknownType;
    for (const auto &attr : node.attribute())
      if (attr.name() == "to" && attr.type() == onnx::AttributeProto::INT)
        to = static_cast<int>(attr.i());
    for (const std::string &output : node.output())
      if (!output.empty())
        setCurrentType(output, to != kUnknownType ? to : originalType(output));
    nodes.push_back(std::move(node));
    return true;
  }

  // Without a schema (custom domains, model-local functions) nothing is known
  // about which inputs and outputs share a type: give it exactly the types
  // of the original model. The same holds for nodes that touch sequences,
  // maps or optionals, whose element types are not tracked.
  const OpSchema *schema = schemaOf(node);
  bool touchesNonTensors = false;
  for (const std::string &name : node.input())
    touchesNonTensors |= originalType(name) == kNotATensor;
  for (const std::string &name : node.output())
    touchesNonTensors |= originalType(name) == kNotATensor;
  if (!schema || touchesNonTensors) {
    if (decision)
      warn("node '" + key + "' (" + node.op_type() + "): " +
           (schema ? "it takes or yields non-tensor values"
                   : "no ONNX schema is known for it") +
           "; it keeps the types of the original model");
    return keepOriginalTypes(node);
  }

  // The compute parameter: the type parameter of the first input whose
  // original type is a float type. A node with no float input (shape and
  // integer arithmetic, Constant, ...) is copied unchanged.
  const auto &inputFormals = schema->inputs();
  const auto &outputFormals = schema->outputs();
  const OpSchema::FormalParameter *computeFormal = nullptr;
  std::string firstFloatInput;
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string &name = node.input(i);
    const OpSchema::FormalParameter *formal = formalAt(inputFormals, i);
    if (!name.empty() && formal && isFloatType(originalType(name))) {
      computeFormal = formal;
      firstFloatInput = name;
      break;
    }
  }
  if (!computeFormal)
    return keepOriginalTypes(node);
  const std::string &computeParam = computeFormal->GetTypeStr();

  // Target dtype: the decision, or else the current dtype of the inputs of
  // the compute parameter (the widest when they differ).
  int target;
  if (decision) {
    target = *decision;
  } else {
    std::vector<int> types;
    for (int i = 0; i < node.input_size(); ++i) {
      const OpSchema::FormalParameter *formal = formalAt(inputFormals, i);
      int current = currentType(node.input(i));
      if (!node.input(i).empty() && formal &&
          formal->GetTypeStr() == computeParam && isFloatType(current))
        types.push_back(current);
    }
    target = types.empty() ? originalType(firstFloatInput)
                           : widestFloatType(types);
  }
  // The op at this opset may not take that dtype (BF16 Conv before opset 22,
  // MaxPool before 22, ...): the node then computes as the original model
  // did, which the original model shows it accepts.
  if (!accepts(*computeFormal, target)) {
    int fallback = originalType(firstFloatInput);
    if (decision)
      warn("node '" + key + "' (" + node.op_type() + "): " + node.op_type() +
           " at opset " + Twine(opsets[domain]) + " does not take " +
           onnxName(target) + "; it computes in " + onnxName(fallback));
    target = fallback;
  }

  // Inputs of the compute parameter are cast to the target. Inputs of other
  // parameters keep the dtype they have, except where that parameter also
  // types an output (outputs of other parameters keep their original dtype),
  // the inputs sharing it now disagree, or the op does not take their current
  // dtype: those go back to their original dtype, which the original model
  // shows valid.
  std::set<std::string> outputParams;
  for (int j = 0; j < node.output_size(); ++j)
    if (const auto *formal = formalAt(outputFormals, j);
        formal && !node.output(j).empty())
      outputParams.insert(formal->GetTypeStr());
  std::map<std::string, std::vector<int>> otherParams;
  for (int i = 0; i < node.input_size(); ++i) {
    const OpSchema::FormalParameter *formal = formalAt(inputFormals, i);
    if (node.input(i).empty() || !formal)
      continue;
    if (formal->GetTypeStr() == computeParam) {
      if (!castInput(node.mutable_input(i), target))
        return false;
    } else {
      otherParams[formal->GetTypeStr()].push_back(i);
    }
  }
  for (const auto &[param, indices] : otherParams) {
    bool restore = outputParams.count(param) != 0;
    std::optional<int> shared;
    for (int i : indices) {
      int current = currentType(node.input(i));
      if (!isFloatType(current))
        continue;
      if (!accepts(*formalAt(inputFormals, i), current) ||
          (shared && *shared != current))
        restore = true;
      shared = current;
    }
    if (restore)
      for (int i : indices)
        if (!restoreInput(node.mutable_input(i)))
          return false;
  }

  // Outputs of the compute parameter get the target; the others (the int64
  // of Shape, LayerNormalization's Mean, a Dropout mask, MaxPool indices)
  // keep their original dtype.
  for (int j = 0; j < node.output_size(); ++j) {
    const std::string &name = node.output(j);
    if (name.empty())
      continue;
    const OpSchema::FormalParameter *formal = formalAt(outputFormals, j);
    setCurrentType(name, formal && formal->GetTypeStr() == computeParam
                             ? target
                             : originalType(name));
  }
  nodes.push_back(std::move(node));
  return true;
}

NodeProto Exporter::makeCast(const std::string &input, const std::string &output,
                             int dtype) {
  NodeProto cast;
  cast.set_name(freshNodeName(output));
  cast.set_op_type("Cast");
  cast.add_input(input);
  cast.add_output(output);
  onnx::AttributeProto *to = cast.add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(dtype);
  return cast;
}

bool Exporter::castTo(const std::string &tensor, int dtype,
                      std::string &result) {
  // One Cast per (tensor, dtype) in the whole graph, placed before its first
  // consumer and reused by later ones.
  auto key = std::make_pair(tensor, dtype);
  if (auto it = casts.find(key); it != casts.end()) {
    result = it->second;
    return true;
  }
  auto opset = opsets.find("");
  if (opset == opsets.end() || opset->second < 6)
    return fail("converting tensor '" + tensor + "' to " + onnxName(dtype) +
                " needs a Cast, which needs a default-domain opset of 6 or "
                "later");
  std::string name = freshTensorName(tensor + "_to_" + shortName(dtype));
  nodes.push_back(makeCast(tensor, name, dtype));
  setCurrentType(name, dtype);
  casts[key] = name;
  castSources[name] = tensor;
  result = name;
  return true;
}

std::string Exporter::freshTensorName(const std::string &base) {
  std::string name = base;
  for (unsigned n = 1; tensorNames.contains(name); ++n)
    name = base + "_" + std::to_string(n);
  tensorNames.insert(name);
  return name;
}

std::string Exporter::freshNodeName(const std::string &base) {
  std::string name = base;
  for (unsigned n = 1; nodeNames.contains(name); ++n)
    name = base + "_" + std::to_string(n);
  nodeNames.insert(name);
  return name;
}

void Exporter::renameUses(const std::string &from, const std::string &to) {
  for (NodeProto &node : nodes)
    for (std::string &input : *node.mutable_input())
      if (input == from)
        input = to;
}

void Exporter::storeConstantsInLowPrecision() {
  // Uses of each tensor other than through the Casts inserted here: node
  // inputs and graph outputs.
  llvm::StringMap<unsigned> directUses;
  for (const NodeProto &node : nodes) {
    if (node.op_type() == "Cast" && node.output_size() == 1 &&
        castSources.contains(node.output(0)))
      continue;
    for (const std::string &input : node.input())
      ++directUses[input];
  }
  for (const auto &vi : out.graph().output())
    ++directUses[vi.name()];

  std::map<std::string, std::vector<std::pair<int, std::string>>> castsOf;
  for (const auto &[key, name] : casts)
    castsOf[key.first].push_back({key.second, name});

  // The one low-precision dtype every use of `tensor` wants, if there is one.
  auto wantedLowPrecision = [&](const std::string &tensor) -> std::optional<int> {
    auto it = castsOf.find(tensor);
    if (directUses.lookup(tensor) != 0 || it == castsOf.end() ||
        it->second.size() != 1 || !isLowPrecision(it->second.front().first))
      return std::nullopt;
    return it->second.front().first;
  };
  // `tensor` is now stored as `dtype`: its Cast goes and its consumers read
  // it directly.
  auto dropCast = [&](const std::string &tensor, int dtype) {
    std::string castOutput = casts[{tensor, dtype}];
    nodes.erase(std::find_if(nodes.begin(), nodes.end(), [&](const NodeProto &n) {
      return n.output_size() == 1 && n.output(0) == castOutput &&
             castSources.contains(castOutput);
    }));
    casts.erase({tensor, dtype});
    castSources.erase(castOutput);
    renameUses(castOutput, tensor);
    setCurrentType(tensor, dtype);
  };

  // An initializer that is also a graph input can be overridden by the
  // caller with FP32 data: it stays a graph input of its declared type.
  // Initializers with external data stay FP32 and keep their Casts, so the
  // exporter never needs to read (or rewrite) the external files.
  std::set<std::string> graphInputs;
  for (const auto &vi : out.graph().input())
    graphInputs.insert(vi.name());
  for (TensorProto &init : *out.mutable_graph()->mutable_initializer()) {
    if (graphInputs.count(init.name()))
      continue;
    std::optional<int> dtype = wantedLowPrecision(init.name());
    if (dtype && convertFloatTensor(init, *dtype))
      dropCast(init.name(), *dtype);
  }

  // Constant nodes holding FP32 data, in a `value` tensor or in value_float
  // / value_floats (rewritten as a `value` tensor of the new dtype). Their
  // Casts are dropped after the walk, which must not see `nodes` change.
  std::vector<std::pair<std::string, int>> converted;
  for (NodeProto &node : nodes) {
    if (normalizeDomain(node.domain()) != "" || node.op_type() != "Constant" ||
        node.output_size() != 1 || node.attribute_size() != 1)
      continue;
    const std::string &output = node.output(0);
    std::optional<int> dtype = wantedLowPrecision(output);
    if (!dtype)
      continue;
    onnx::AttributeProto &attr = *node.mutable_attribute(0);
    TensorProto tensor;
    if (attr.name() == "value" && attr.has_t()) {
      tensor = attr.t();
    } else if (attr.name() == "value_float") {
      tensor.set_data_type(TensorProto::FLOAT);
      tensor.add_float_data(attr.f());
    } else if (attr.name() == "value_floats") {
      tensor.set_data_type(TensorProto::FLOAT);
      tensor.add_dims(attr.floats_size());
      tensor.mutable_float_data()->CopyFrom(attr.floats());
    } else {
      continue;
    }
    if (!convertFloatTensor(tensor, *dtype))
      continue;
    attr.Clear();
    attr.set_name("value");
    attr.set_type(onnx::AttributeProto::TENSOR);
    *attr.mutable_t() = std::move(tensor);
    converted.push_back({output, *dtype});
  }
  for (const auto &[output, dtype] : converted)
    dropCast(output, dtype);
}

bool Exporter::restoreGraphOutputTypes() {
  // A graph output computed in another dtype than it was declared with: its
  // producer and consumers move to a fresh name, and a Cast (the one already
  // inserted for that tensor and dtype, if any) produces the output's name.
  std::set<std::string> done;
  for (const auto &vi : model.graph().output()) {
    const std::string &name = vi.name();
    if (!done.insert(name).second)
      continue;
    int original = originalType(name), current = currentType(name);
    if (!isFloatType(original) || !isFloatType(current) || original == current)
      continue;
    auto producer = std::find_if(nodes.begin(), nodes.end(), [&](const NodeProto &n) {
      return std::find(n.output().begin(), n.output().end(), name) !=
             n.output().end();
    });
    if (producer == nodes.end())
      continue;

    std::string computed = freshTensorName(name + "_" + shortName(current));
    for (std::string &output : *producer->mutable_output())
      if (output == name)
        output = computed;
    renameUses(name, computed);
    setCurrentType(computed, current);
    setCurrentType(name, original);

    if (auto it = casts.find({name, original}); it != casts.end()) {
      std::string castOutput = it->second;
      for (NodeProto &node : nodes)
        if (node.output_size() == 1 && node.output(0) == castOutput &&
            castSources.contains(castOutput))
          node.set_output(0, name);
      renameUses(castOutput, name);
      castSources.erase(castOutput);
      castSources[name] = computed;
      casts.erase(it);
      continue;
    }
    auto opset = opsets.find("");
    if (opset == opsets.end() || opset->second < 6)
      return fail("restoring the type of graph output '" + name +
                  "' needs a Cast, which needs a default-domain opset of 6 "
                  "or later");
    nodes.push_back(makeCast(computed, name, original));
    castSources[name] = computed;
  }
  return true;
}

} // namespace

bool ampc::exportMixedPrecisionOnnx(const onnx::ModelProto &model,
                                    const NodePrecisions &decisions,
                                    onnx::ModelProto &out, std::string &error,
                                    std::vector<std::string> *warnings) {
  // libonnx reports problems by throwing; nothing escapes this boundary.
  try {
    onnx::ModelProto result;
    Exporter exporter(model, decisions, result, error, warnings);
    if (!exporter.run())
      return false;
    out = std::move(result);
    return true;
  } catch (const std::exception &e) {
    error = std::string("mixed-precision export failed: ") + e.what();
    return false;
  } catch (...) {
    error = "mixed-precision export failed";
    return false;
  }
}

bool ampc::writeOnnxModel(const onnx::ModelProto &model, StringRef path,
                          std::string &error) {
  if (model.ByteSizeLong() > static_cast<size_t>(INT_MAX)) {
    error = "model larger than 2 GiB; store weights as external data";
    return false;
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) {
    error = "cannot serialize the model";
    return false;
  }

  // Atomically, as the runtime writes checkpoints and exports: only over a
  // regular file, through a temporary in the same folder.
  std::string why;
  if (!ampc::writeFileAtomically(path.str(), {{bytes.data(), bytes.size()}},
                                 "the ONNX model", why)) {
    // The caller names the path; the message starts with it.
    std::string prefix = path.str() + ": ";
    error = why.rfind(prefix, 0) == 0 ? why.substr(prefix.size()) : why;
    return false;
  }
  return true;
}
