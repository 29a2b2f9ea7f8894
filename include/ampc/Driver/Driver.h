//===- Driver.h - import, pipeline, emit, compile ---------------*- C++ -*-===//
//
// The steps every ampc tool composes (docs/design.md, "Driver"): read an
// ONNX model once and import it (loadModel), run the pipeline
// (runPipeline), write a target's library as an Artifact (emitArtifact:
// code pieces, data, the parameter blob and the embedded ONNX model as
// fields, not a text with markers), write its files and compile it
// (writeArtifactFiles, compileArtifact). `ampc`, `ampc-gradcheck` and
// `ampc-conformance` use it; the Python module runs the `ampc` executable,
// so it reaches the driver through ampc.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DRIVER_DRIVER_H
#define AMPC_DRIVER_DRIVER_H

#include "ampc/Import/ImportOptions.h"
#include "ampc/Target/Artifact.h"
#include "ampc/Target/LibraryEmitter.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace ampc {

/// An ONNX model: the file's bytes, read once, kept for everything that
/// needs the model again (the `--emit=onnx` export, the model a training
/// library embeds, a tool's look at its graph), and its import.
struct Model {
  /// The file as named (messages, the importer's locations).
  std::string path;
  std::string bytes;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

/// Reads the model file at `path` into `model` (its bytes only); on
/// failure sets `error` ("cannot open: REASON", without the file name).
bool readModel(llvm::StringRef path, Model &model, std::string &error);
/// Parses the model's bytes (binary protobuf or ONNX text, as the
/// importer does); on failure sets `error` (without the file name).
bool parseModel(const Model &model, onnx::ModelProto &proto,
                std::string &error);
/// Imports the model's bytes into `model.module`; false, with the
/// importer's diagnostics, when it cannot. External tensor data is read
/// beside the model file.
bool importModel(mlir::MLIRContext &context, Model &model,
                 const ImportOptions &options);
/// readModel, then importModel; a file that cannot be read is an error
/// diagnostic at the file, as the importer reports its errors.
bool loadModel(mlir::MLIRContext &context, llvm::StringRef path,
               const ImportOptions &options, Model &model);

/// Runs `part` of the pipeline on `module`; `instrument`, when given, adds
/// to the pass manager first (instrumentation). Failure with `error` set
/// when the options name no pass of the pipeline (buildPipeline); with
/// `error` empty when a pass failed (its diagnostics are reported).
mlir::LogicalResult
runPipeline(mlir::ModuleOp module, const PipelineOptions &options,
            PipelinePart part, std::string &error,
            llvm::function_ref<void(mlir::PassManager &)> instrument = nullptr);

/// The serialized model a training library embeds for export
/// (ampc_model_export_onnx): the model as imported, each merged
/// initializer untied unless `keepTied`.
bool embeddedModel(const Model &model, bool keepTied, std::string &bytes,
                   std::string &error);
/// `--emit=onnx`: the model with the precision decisions of `module` (after
/// the pipeline's graph part) applied; `warnings` receives what the export
/// could not apply.
bool exportModel(const Model &model, mlir::ModuleOp module,
                 onnx::ModelProto &exported, std::string &error,
                 std::vector<std::string> &warnings);

/// The targets a library is written and compiled for.
enum class Target { Cpu, Cuda, CudaSim };
inline bool isCuda(Target target) { return target != Target::Cpu; }

/// Writes `target`'s library of `module` (the pipeline's kernel part
/// done); nothing, with a diagnostic at the op the target cannot compile,
/// when it cannot. A training library's embedded model goes in with
/// `onnx` (embeddedModel's bytes; `options` says where: onnxFile, or
/// onnxData for an array).
std::optional<Artifact> emitArtifact(mlir::ModuleOp module, Target target,
                                     const LibraryOptions &options,
                                     std::string onnx = {});

/// Writes a file of an artifact: false with `error` set (or reported, and
/// `error` left empty) when it cannot.
using WriteFile = llvm::function_ref<bool(llvm::StringRef path,
                                          llvm::StringRef bytes,
                                          std::string &error)>;
/// Writes the files the artifact's compile reads: the parameter file and
/// the ONNX file (where it names them and has bytes), then its text form at
/// `sourcePath` (unless empty), each with `write` (by default, a plain
/// write whose error is "cannot write PATH: REASON").
bool writeArtifactFiles(const Artifact &artifact, llvm::StringRef sourcePath,
                        std::string &error, WriteFile write = nullptr);
/// A source's text form read back (`ampc SOURCE.cpp`; Artifact::parse);
/// one that cannot be read is code alone, which its compile then reports.
Artifact readSource(llvm::StringRef path);

/// How compileArtifact builds a library.
struct CompileOptions {
  Target target = Target::Cpu;
  /// The GPU architectures of a CUDA library (sm_80, sm_90a, ...).
  std::vector<std::string> gpuArchs;
  /// Whether a cuda-sim compile checks the kernels' GPU resources first.
  bool resourceCheck = true;
};
/// Compiles `artifact`, whose files writeArtifactFiles wrote (its text form
/// at `sourcePath`), into the shared library `output`; on failure sets
/// `error` to one line.
bool compileArtifact(const Artifact &artifact, llvm::StringRef sourcePath,
                     llvm::StringRef output, const CompileOptions &options,
                     std::string &error);

} // namespace ampc

#endif // AMPC_DRIVER_DRIVER_H
