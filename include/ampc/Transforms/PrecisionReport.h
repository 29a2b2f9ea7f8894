//===- PrecisionReport.h - per-node precision decisions, and why -*- C++ -*-===//
//
// Reads the decisions ampc-assign-precision recorded (Precision.h) and
// presents them: a table (`ampc explain`), JSON and a self-contained HTML
// page with the graph coloured by compute dtype (`--report=FILE.json|html`).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TRANSFORMS_PRECISIONREPORT_H
#define AMPC_TRANSFORMS_PRECISIONREPORT_H

#include "ampc/Support/OutputFile.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace ampc {

struct PrecisionReport {
  struct Node {
    std::string name;     ///< ONNX node name
    std::string op;       ///< ONNX op type
    std::string ampcOp;   ///< the ampc op that computes it ("ampc.gemm")
    std::vector<std::string> inputs;  ///< dtype of each input as it arrives
    std::string compute;  ///< compute dtype
    std::vector<std::string> outputs;
    std::string category; ///< effective category
    std::string rule;     ///< what decided: list, propagation or override
  };
  /// An end of a drawn edge: a decided node, a graph input or output, a
  /// cast the compiler inserted (every one in the forward function is
  /// drawn: `casts`), or what a cast reads that is not a node (a parameter,
  /// a constant: `sources`).
  struct Endpoint {
    enum Kind { Node, Input, Output, Cast, Source } kind;
    int index;
  };
  struct Edge {
    Endpoint from, to;
    std::string dtype; ///< dtype of the value on the edge
  };
  struct Cast {
    std::string from, to; ///< "f32", "f16"
  };

  std::string model;
  std::string lowp; ///< "f16", "bf16" or "f32"
  std::vector<Node> nodes;
  /// A line per attention ampc-fuse-attention fused (its shape) and per
  /// Softmax it left unfused (the node where the pattern broke, and why).
  std::vector<std::string> attention;
  std::vector<std::string> inputs, outputs;
  std::vector<Edge> edges;
  std::vector<Cast> casts;
  std::vector<std::string> sources;
  unsigned castsBefore = 0, castsAfter = 0;
  /// ampc-pad-gemms's decision for each GEMM of the forward (issue 37 item
  /// 11): M, N, K, what was padded and why a dimension was not.
  std::vector<std::string> gemmShapes;
  /// ampc-channels-last's decisions (issue 39 item 3): each image crossing
  /// the layout and why, each channels-last convolution's channel counts.
  std::vector<std::string> layout;
  /// ampc-input-precision's decision for each f32 input it looked at
  /// (`--input-precision=auto`; issue 37, item 2): the type the library
  /// takes the input in and why.
  struct InputPrecision {
    std::string name, dtype, why;
    /// "input x: f16, every use is an autocast to f16".
    std::string line() const;
  };
  std::vector<InputPrecision> inputPrecision;
  /// `--sync-batchnorm` (issue 41): a line per BatchNorm whose statistics
  /// are all-reduced over the ranks (synchronisedBatchNorms).
  std::vector<std::string> syncBatchNorm;

  /// `--precision=fp8` (issue 42): ampc-assign-fp8's decision for each
  /// GEMM of the forward, and the delayed-scaling recipe.
  struct Fp8Gemm {
    std::string node, op;
    std::string format; ///< "hybrid", "e4m3", or "bf16" (stays BF16)
    std::string reason;
    /// "fp8 Gemm_0 (Gemm): hybrid: M, N, K = ...".
    std::string line() const;
  };
  std::vector<Fp8Gemm> fp8Gemms;
  bool fp8 = false;
  int64_t fp8AmaxHistory = 0, fp8Margin = 0;
  std::string fp8AmaxAlgo;
  /// "fp8: 2 of 3 GEMMs decided FP8 (...); computed in BF16: ...".
  std::string fp8Summary() const;

  /// "converted 41/57 nodes to f16 with 23 casts (31 before cast
  /// optimisation)".
  std::string summary() const;
};

/// Collects the report from a module after ampc-assign-precision (and
/// usually ampc-optimize-casts). `castsBefore` is the number of inserted
/// casts right after assignment.
PrecisionReport buildPrecisionReport(mlir::ModuleOp module,
                                     llvm::StringRef model,
                                     llvm::StringRef lowp,
                                     unsigned castsBefore);

/// A table, one node per line, then the summary line.
void printPrecisionTable(const PrecisionReport &report, llvm::raw_ostream &os);

void writePrecisionJson(const PrecisionReport &report, llvm::raw_ostream &os);

/// A self-contained page: the graph drawn by Graphviz `dot` (inline SVG, no
/// network needed), the legend, the table and the summary. Without `dot` the
/// page has the table only and `warning` says so. False with `error` set when
/// the page cannot be written. The page is written by the output rules of
/// ampc/Support/OutputFile.h, never over one of `inputs`.
bool writePrecisionHtml(const PrecisionReport &report, llvm::StringRef path,
                        const std::vector<ProtectedFile> &inputs,
                        std::string &warning, std::string &error);

} // namespace ampc

#endif // AMPC_TRANSFORMS_PRECISIONREPORT_H
