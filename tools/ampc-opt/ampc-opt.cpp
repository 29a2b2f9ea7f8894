//===- ampc-opt.cpp - MlirOptMain with the ampc dialect and passes --------===//

#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/PipelineSettings.h"
#include "ampc/Version.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  ampc::registerAllDialects(registry);
  ampc::registerAMPCPasses();
  ampc::registerPipeline();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  llvm::cl::SetVersionPrinter(ampc::printVersion);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv,
      "ampc optimizer driver: the ampc dialect, every ampc pass and the "
      "whole pipeline (--ampc-pipeline)\n",
      registry));
}
