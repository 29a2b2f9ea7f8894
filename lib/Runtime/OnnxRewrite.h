//===- OnnxRewrite.h - replace initializers in a serialized ONNX model -*- C++ -*-===//
//
// What ampc_model_export_onnx uses to write the trained model: the ONNX
// model embedded in the library with its trained initializers replaced.
// Internal to libampc_runtime, which must not depend on protobuf, so the
// wire format is read by hand.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_LIB_RUNTIME_ONNXREWRITE_H
#define AMPC_LIB_RUNTIME_ONNXREWRITE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ampc::runtime {

/// A tensor to store as an initializer. `dtype` is an ampc_dtype (ONNX
/// TensorProto code); `data` holds `bytes` bytes, little-endian, dense.
struct NamedTensor {
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  const void *data = nullptr;
  size_t bytes = 0;
  /// Replaces the initializer of this name if the graph has one; without
  /// it, a name the graph lacks is an error.
  bool optional = false;
};

/// `model` is a serialized onnx ModelProto. Writes to `out` a copy in which
/// every initializer of the main graph (GraphProto field 5) whose name is a
/// replacement's is replaced by a TensorProto holding only that name, dims,
/// data_type and raw_data; every other byte of the model is kept as it was,
/// unknown fields and external-data initializers included. Fails with a
/// one-line `error` for malformed input, a replacement whose size does not
/// match its dtype and shape, two replacements of one name, or a replacement
/// that is not an initializer of the graph.
bool rewriteOnnxInitializers(const unsigned char *model, size_t size,
                             const std::vector<NamedTensor> &replacements,
                             std::string &out, std::string &error);

/// `model` is a serialized onnx ModelProto. Writes to `out` a copy that
/// runs as PyTorch's `model.eval()`: every BatchNormalization of the main
/// graph gets `training_mode` 0 and loses its running-statistics outputs,
/// every Dropout loses its `training_mode` input (so it is the identity);
/// every other byte is kept. Fails with a one-line `error` for malformed
/// input, or when a running-statistics output is read by the graph (the
/// eval-mode node cannot produce it).
bool rewriteOnnxEvalMode(const unsigned char *model, size_t size,
                         std::string &out, std::string &error);

} // namespace ampc::runtime

#endif // AMPC_LIB_RUNTIME_ONNXREWRITE_H
