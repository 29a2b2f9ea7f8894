//===- OnnxFullCheck.h - onnx.checker full_check for unit tests -*- C++ -*-===//

#ifndef AMPC_UNITTESTS_ONNXFULLCHECK_H
#define AMPC_UNITTESTS_ONNXFULLCHECK_H

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <string>

namespace ampc::testing {

/// What onnx.checker.check_model(m, full_check=True) does: the structural
/// check, then shape inference with type checking, throwing on any error.
/// Returns the message of the first failure, or "" when the model is valid.
inline std::string fullCheck(const onnx::ModelProto &model) {
  try {
    onnx::checker::check_model(model);
    onnx::ModelProto copy = model;
    onnx::shape_inference::InferShapes(
        copy, onnx::OpSchemaRegistry::Instance(),
        onnx::ShapeInferenceOptions{/*check_type=*/true, /*error_mode=*/1,
                                    /*enable_data_propagation=*/false});
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

} // namespace ampc::testing

#endif // AMPC_UNITTESTS_ONNXFULLCHECK_H
