//===- OnnxModel.h - reading ONNX ModelProtos -------------------*- C++ -*-===//
//
// The parts of the importer that other ONNX-facing code (the mixed-precision
// ONNX exporter) shares: reading a model file in either syntax, and the name
// the importer gives a node in locations and messages.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_IMPORT_ONNXMODEL_H
#define AMPC_IMPORT_ONNXMODEL_H

#include "llvm/ADT/StringRef.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

namespace ampc {

/// Parses a model held in memory: ONNX textual syntax when `displayName`
/// ends in ".onnxtext" or the contents start with '<' or '#', binary protobuf
/// otherwise. Catches whatever libonnx throws; on failure returns false and
/// sets `error` (without the file name).
bool parseOnnxModel(llvm::StringRef contents, llvm::StringRef displayName,
                    onnx::ModelProto &model, std::string &error);

/// Reads and parses the model file at `path`; on failure returns false and
/// sets `error` (without the file name).
bool readOnnxModel(llvm::StringRef path, onnx::ModelProto &model,
                   std::string &error);

/// The node's name as ampc reports it: its ONNX name, or "OpType_INDEX"
/// (INDEX = position in graph.node) when the model leaves it empty.
std::string onnxNodeName(const onnx::NodeProto &node, size_t index);

/// What sortOnnxNodes found wrong, at graph.node(node).
struct OnnxGraphError {
  size_t node;
  std::string message;
};

/// Orders graph.node so that every node comes after the nodes producing its
/// inputs (Kahn's algorithm; among ready nodes the lowest index first, so a
/// sorted graph keeps its order). Fails on a value defined twice (by two
/// nodes, or by a node and a graph input or initializer), an input that
/// nothing defines, or a cycle.
std::optional<OnnxGraphError> sortOnnxNodes(const onnx::GraphProto &graph,
                                            std::vector<size_t> &order);

} // namespace ampc

#endif // AMPC_IMPORT_ONNXMODEL_H
