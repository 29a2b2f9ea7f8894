//===- MergedInitializers.h - initializers an exporter merged -*- C++ -*-===//
//
// torch.onnx.export in EVAL mode (its default) changes the model it writes
// in two ways that matter when the model is trained rather than run:
//  - initializers of equal value are merged: one is kept, and each other is
//    read through an Identity node whose output has the merged one's name
//    (`n2.bias = Identity(n1.bias)`), so two parameters the user wrote
//    would train as one;
//  - a BatchNormalization after a convolution is folded into it: the Conv
//    reads weights the exporter computed, named `onnx::Conv_N`.
// `untieMergedInitializers` gives every merged initializer back its own
// copy; `findMergedInitializers` and `findFoldedBatchNorms` report them.
// The importer (for training) and the driver (for the ONNX model a training
// library embeds, so its export has the same initializers) both use them.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_IMPORT_MERGEDINITIALIZERS_H
#define AMPC_IMPORT_MERGEDINITIALIZERS_H

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace ampc {

/// An Identity node reading a float initializer: `merged` (its output, the
/// initializer the exporter removed) is a copy of `kept`.
struct MergedInitializer {
  size_t node; ///< Index of the Identity in graph.node.
  std::string kept, merged;
};

/// Every merged initializer of the main graph, in node order.
std::vector<MergedInitializer>
findMergedInitializers(const onnx::ModelProto &model);

/// Replaces each merged initializer's Identity node by an initializer of
/// its own (a copy of the kept one under the merged name); returns what it
/// untied.
std::vector<MergedInitializer> untieMergedInitializers(onnx::ModelProto &model);

/// Conv nodes (indices in graph.node) whose weight is an initializer the
/// exporter computed (`onnx::Conv_N`): a folded BatchNormalization.
std::vector<size_t> findFoldedBatchNorms(const onnx::ModelProto &model);

} // namespace ampc

#endif // AMPC_IMPORT_MERGEDINITIALIZERS_H
