//===- Driver.cpp - import, pipeline, emit, compile -----------------------===//
//
// docs/design.md, "Driver".
//
//===----------------------------------------------------------------------===//

#include "ampc/Driver/Driver.h"

#include "ampc/Import/MergedInitializers.h"
#include "ampc/Import/OnnxImporter.h"
#include "ampc/Import/OnnxModel.h"
#include "ampc/Support/RegularFile.h"
#include "ampc/Target/CpuTarget.h"
#include "ampc/Target/CudaTarget.h"
#include "ampc/Target/OnnxExport.h"
#include "ampc/Transforms/Precision.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <climits>

using namespace llvm;

bool ampc::readModel(StringRef path, Model &model, std::string &error) {
  model.path = path.str();
  model.module = nullptr;
  // A binary model over 2 GiB is refused by protobuf anyway; a text model
  // that size is no model either.
  std::string reason;
  if (!readRegularFile(model.path, model.bytes, uint64_t(INT_MAX), reason)) {
    error = "cannot open: " + reason;
    return false;
  }
  return true;
}

bool ampc::parseModel(const Model &model, onnx::ModelProto &proto,
                      std::string &error) {
  return parseOnnxModel(model.bytes, model.path, proto, error);
}

bool ampc::importModel(mlir::MLIRContext &context, Model &model,
                       const ImportOptions &options) {
  model.module = importOnnxBuffer(context, model.bytes, model.path,
                                  sys::path::parent_path(model.path), options);
  return bool(model.module);
}

bool ampc::loadModel(mlir::MLIRContext &context, StringRef path,
                     const ImportOptions &options, Model &model) {
  std::string error;
  if (!readModel(path, model, error)) {
    mlir::emitError(mlir::FileLineColLoc::get(&context, path, 0, 0)) << error;
    return false;
  }
  return importModel(context, model, options);
}

mlir::LogicalResult
ampc::runPipeline(mlir::ModuleOp module, const PipelineOptions &options,
                  PipelinePart part, std::string &error,
                  function_ref<void(mlir::PassManager &)> instrument) {
  mlir::PassManager pm(module.getContext());
  if (!buildPipeline(pm, options, part, error))
    return mlir::failure();
  if (instrument)
    instrument(pm);
  return pm.run(module);
}

bool ampc::embeddedModel(const Model &model, bool keepTied, std::string &bytes,
                         std::string &error) {
  onnx::ModelProto proto;
  if (!parseModel(model, proto, error))
    return false;
  // The model as imported: the export writes each untied parameter.
  if (!keepTied)
    untieMergedInitializers(proto);
  if (!proto.SerializeToString(&bytes)) {
    error = "cannot serialize the model";
    return false;
  }
  return true;
}

bool ampc::exportModel(const Model &model, mlir::ModuleOp module,
                       onnx::ModelProto &exported, std::string &error,
                       std::vector<std::string> &warnings) {
  NodePrecisions decisions;
  module.walk([&](mlir::Operation *op) {
    std::optional<PrecisionDecision> d = getPrecisionDecision(op);
    if (!d)
      return;
    int type = d->compute.isF16()    ? onnx::TensorProto::FLOAT16
               : d->compute.isBF16() ? onnx::TensorProto::BFLOAT16
                                     : onnx::TensorProto::FLOAT;
    // A node the importer built from several ops takes its first decision.
    decisions.try_emplace(onnxNodeName(op), type);
  });
  onnx::ModelProto proto;
  return parseModel(model, proto, error) &&
         exportMixedPrecisionOnnx(proto, decisions, exported, error,
                                  &warnings);
}

std::optional<ampc::Artifact>
ampc::emitArtifact(mlir::ModuleOp module, Target target,
                   const LibraryOptions &options, std::string onnx) {
  Artifact artifact;
  if (mlir::failed(isCuda(target)
                       ? emitCudaArtifact(module, options, artifact)
                       : emitCpuArtifact(module, options, artifact)))
    return std::nullopt;
  if (!artifact.onnxFile.empty())
    artifact.onnx = std::move(onnx);
  return artifact;
}

bool ampc::writeArtifactFiles(const Artifact &artifact, StringRef sourcePath,
                              std::string &error, WriteFile write) {
  auto plainWrite = [](StringRef path, StringRef bytes, std::string &error) {
    std::error_code ec;
    raw_fd_ostream file(path, ec);
    if (!ec) {
      file << bytes;
      file.close();
      ec = file.error();
      file.clear_error(); // reported below, not by the stream's destructor
    }
    if (ec)
      error = ("cannot write " + path + ": " + ec.message()).str();
    return !ec;
  };
  if (!write)
    write = plainWrite;
  if (!artifact.parameterFile.empty() && !artifact.parameters.empty() &&
      !write(artifact.parameterFile, artifact.parameters, error))
    return false;
  if (!artifact.onnxFile.empty() &&
      !write(artifact.onnxFile, artifact.onnx, error))
    return false;
  return sourcePath.empty() || write(sourcePath, artifact.text(), error);
}

ampc::Artifact ampc::readSource(StringRef path) {
  auto text = MemoryBuffer::getFile(path);
  return text ? Artifact::parse((*text)->getBuffer()) : Artifact{};
}

bool ampc::compileArtifact(const Artifact &artifact, StringRef sourcePath,
                           StringRef output, const CompileOptions &options,
                           std::string &error) {
  switch (options.target) {
  case Target::Cpu:
    return compileCpuLibrary(artifact, sourcePath, output, error);
  case Target::Cuda:
    return compileCudaLibrary(artifact, sourcePath, output, options.gpuArchs,
                              error);
  case Target::CudaSim:
    return compileCudaSimLibrary(artifact, sourcePath, output,
                                 options.resourceCheck, error);
  }
  return false;
}
