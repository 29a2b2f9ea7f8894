//===- OnnxExport.h - mixed-precision ONNX models ---------------*- C++ -*-===//
//
// Rewrites the original ONNX model so that every node computes in the dtype
// the precision assignment chose for it: Cast nodes where a tensor crosses
// from one dtype to another, FP32 weights stored in low precision where all
// of their uses want it, graph inputs and outputs keeping their original
// types. The result passes onnx.checker.check_model(m, full_check=True).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TARGET_ONNXEXPORT_H
#define AMPC_TARGET_ONNXEXPORT_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace ampc {

/// Compute dtype chosen per ONNX node (keyed by onnxNodeName), as ONNX
/// TensorProto data types: FLOAT (1), FLOAT16 (10) or BFLOAT16 (16).
using NodePrecisions = llvm::StringMap<int>;

/// Builds in `out` the mixed-precision form of `model` in which each node
/// named in `decisions` computes in its decided dtype and every other node
/// with float inputs follows the dtype of those inputs. Cast nodes are
/// inserted where needed (one per tensor and dtype); an FP32 initializer or
/// Constant whose every use wants the same FP16/BF16 dtype is stored in that
/// dtype instead (round-to-nearest-even); initializers with external data stay
/// FP32 and are cast, so the tensor data itself is never read. Graph inputs
/// and outputs keep their original types, and graph.value_info is cleared.
///
/// Decisions naming no node of the model are ignored (the caller warns).
/// Where a node's op, at the model's opset, does not accept the decided (or
/// followed) dtype, for example BFLOAT16 for Conv before opset 22, the node
/// computes in its original dtype instead; for a decided node a message
/// saying so is appended to `warnings` when given.
///
/// Returns false and sets `error` when the model cannot be rewritten: a
/// decision other than FLOAT/FLOAT16/BFLOAT16, a BFLOAT16 decision in a model
/// whose default-domain opset is below 13, a needed Cast without a
/// default-domain opset of at least 6, a node with subgraphs (If, Loop,
/// Scan), a cycle, or ONNX shape inference failing on the original model.
bool exportMixedPrecisionOnnx(const onnx::ModelProto &model,
                              const NodePrecisions &decisions,
                              onnx::ModelProto &out, std::string &error,
                              std::vector<std::string> *warnings = nullptr);

/// Writes `model` to `path` as a binary protobuf, atomically: into a
/// temporary file in the same folder which is then renamed over `path`, so
/// readers never see a partial file. On failure returns false and sets
/// `error` (without the file name); `path` is then left as it was.
bool writeOnnxModel(const onnx::ModelProto &model, llvm::StringRef path,
                    std::string &error);

} // namespace ampc

#endif // AMPC_TARGET_ONNXEXPORT_H
