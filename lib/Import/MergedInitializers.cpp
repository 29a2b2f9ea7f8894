//===- MergedInitializers.cpp - initializers an exporter merged -----------===//

#include "ampc/Import/MergedInitializers.h"

#include <map>
#include <set>

using namespace ampc;

namespace {
bool isFloat(int32_t dataType) {
  using T = onnx::TensorProto;
  return dataType == T::FLOAT || dataType == T::FLOAT16 ||
         dataType == T::BFLOAT16 || dataType == T::DOUBLE;
}
} // namespace

std::vector<MergedInitializer>
ampc::findMergedInitializers(const onnx::ModelProto &model) {
  const onnx::GraphProto &graph = model.graph();
  std::map<std::string, const onnx::TensorProto *> initializers;
  for (const onnx::TensorProto &t : graph.initializer())
    initializers.emplace(t.name(), &t);
  std::set<std::string> graphOutputs;
  for (const onnx::ValueInfoProto &o : graph.output())
    graphOutputs.insert(o.name());
  std::vector<MergedInitializer> merged;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    if (node.op_type() != "Identity" ||
        !(node.domain().empty() || node.domain() == "ai.onnx") ||
        node.input_size() != 1 || node.output_size() != 1 ||
        node.output(0).empty() || graphOutputs.count(node.output(0)) ||
        initializers.count(node.output(0)))
      continue;
    auto it = initializers.find(node.input(0));
    if (it == initializers.end() || !isFloat(it->second->data_type()))
      continue;
    merged.push_back({static_cast<size_t>(i), node.input(0), node.output(0)});
  }
  return merged;
}

std::vector<MergedInitializer>
ampc::untieMergedInitializers(onnx::ModelProto &model) {
  std::vector<MergedInitializer> merged = findMergedInitializers(model);
  if (merged.empty())
    return merged;
  onnx::GraphProto *graph = model.mutable_graph();
  std::map<std::string, onnx::TensorProto> copies;
  for (const onnx::TensorProto &t : graph->initializer())
    for (const MergedInitializer &m : merged)
      if (t.name() == m.kept) {
        onnx::TensorProto copy = t;
        copy.set_name(m.merged);
        copies.emplace(m.merged, std::move(copy));
      }
  for (const MergedInitializer &m : merged)
    *graph->add_initializer() = copies.at(m.merged);
  // The Identity nodes go, from the back so the indices stay valid.
  for (auto it = merged.rbegin(); it != merged.rend(); ++it)
    graph->mutable_node()->DeleteSubrange(static_cast<int>(it->node), 1);
  return merged;
}

std::vector<size_t> ampc::findFoldedBatchNorms(const onnx::ModelProto &model) {
  const onnx::GraphProto &graph = model.graph();
  std::set<std::string> initializers;
  for (const onnx::TensorProto &t : graph.initializer())
    initializers.insert(t.name());
  std::vector<size_t> folded;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    if (node.op_type() == "Conv" && node.input_size() >= 2 &&
        initializers.count(node.input(1)) &&
        node.input(1).rfind("onnx::Conv_", 0) == 0)
      folded.push_back(static_cast<size_t>(i));
  }
  return folded;
}
