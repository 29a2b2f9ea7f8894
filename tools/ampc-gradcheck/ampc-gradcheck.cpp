//===- ampc-gradcheck.cpp - analytic gradients against finite differences -===//
//
// ampc-gradcheck MODEL
// [--loss=cross_entropy|bce_with_logits|mse|l1|smooth_l1|huber|none]
// [--label=NAME]
//                [--shape NAME=DIMS]... [--batch N] [--seed S] [--samples K]
//                [--eps E] [--atol A] [--rtol R] [--label-range N] [--verbose]
//                [--print-ops]
// ampc-gradcheck --list-rules
//
// Compiles MODEL for training at fp64 for the CPU target, in process (the
// driver's import, pipeline with autodiff, emit and compile), loads the
// library through the runtime C API and compares every gradient it computes
// (ampc_model_gradients) with central finite differences of its loss
// (output 0 of ampc_model_infer), the method and tolerances of
// torch.autograd.gradcheck. Prints one line per parameter and
// "N passed, N failed"; exit status 1 when a parameter fails or on any error.
// MODEL may also be a library already compiled for training (FILE.so), which
// is checked as it is. --list-rules prints the ops that have a gradient
// rule; --print-ops prints which of them the model's gradient goes through,
// so that tests can tell which rules they check.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Driver/Driver.h"
#include "ampc/Import/Diagnostics.h"
#include "ampc/Import/OnnxImporter.h"
#include "ampc/Kernels/Common/Float16.h"
#include "ampc/Runtime/ampc.h"
#include "ampc/Target/CpuTarget.h"
#include "ampc/Transforms/Passes.h"
#include "ampc/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace llvm;

namespace {
cl::OptionCategory category("ampc-gradcheck options");

cl::opt<std::string>
    modelPath(cl::Positional,
              cl::desc("<model.onnx|model.onnxtext|module.mlir|train.so>"),
              cl::cat(category));
cl::opt<std::string> loss(
    "loss",
    cl::desc("the loss attached to output 0 unless the graph already ends in "
             "one (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss, the "
             "MSE pattern), as `ampc --loss`: cross_entropy (the default; "
             "scores (N, C, ...) against int64 class ids), mse, or none"),
    cl::value_desc("cross_entropy|bce_with_logits|mse|l1|smooth_l1|huber|none"),
    cl::init("cross_entropy"), cl::cat(category));
cl::opt<std::string>
    label("label",
          cl::desc("name of the label input --loss adds (default: label)"),
          cl::value_desc("NAME"), cl::init("label"), cl::cat(category));
cl::list<std::string>
    shapes("shape",
           cl::desc("bind an input's shape, e.g. x=4x784 (repeatable)"),
           cl::value_desc("NAME=DxD..."), cl::cat(category));
cl::opt<int64_t> batch("batch",
                       cl::desc("bind the symbolic leading dimension of every "
                                "input"),
                       cl::value_desc("N"), cl::init(-1), cl::cat(category));
cl::opt<unsigned>
    seed("seed",
         cl::desc("seed of the random inputs and of the elements sampled "
                  "(default 0); the same seed checks the same points"),
         cl::value_desc("S"), cl::init(0), cl::cat(category));
cl::opt<int> samples(
    "samples",
    cl::desc("elements checked per parameter: all of a parameter with at "
             "most K elements, otherwise K chosen with --seed (default 16)"),
    cl::value_desc("K"), cl::init(16), cl::cat(category));
cl::opt<double> eps("eps", cl::desc("finite-difference step (default 1e-6)"),
                    cl::value_desc("E"), cl::init(1e-6), cl::cat(category));
cl::opt<double> absoluteTolerance("atol",
                                  cl::desc("absolute tolerance (default 1e-5)"),
                                  cl::value_desc("A"), cl::init(1e-5),
                                  cl::cat(category));
cl::opt<double>
    relativeTolerance("rtol",
                      cl::desc("relative tolerance, of the numeric gradient "
                               "(default 1e-3)"),
                      cl::value_desc("R"), cl::init(1e-3), cl::cat(category));
cl::opt<int64_t> labelRange(
    "label-range",
    cl::desc("integer inputs (class labels, indices) are drawn uniformly "
             "from [0, N); N must not exceed the number of classes or the "
             "size of the table they index (default 2)"),
    cl::value_desc("N"), cl::init(2), cl::cat(category));
cl::opt<bool> verbose(
    "verbose",
    cl::desc("also print where the library is built, the loss, and every "
             "checked element"),
    cl::cat(category));
cl::opt<bool> listRules(
    "list-rules",
    cl::desc("print the ops that have a gradient rule, one per line, sorted, "
             "and exit"),
    cl::cat(category));
cl::opt<bool> printOps(
    "print-ops",
    cl::desc("before the results, print the ops whose gradient rule the "
             "model's gradients go through, as one line: ops: A B ..."),
    cl::cat(category));
cl::opt<bool> printOpsOnly(
    "print-ops-only",
    cl::desc("print the ops line of --print-ops and exit without building or "
             "checking the library"),
    cl::cat(category));

const char *kOverview =
    "ampc-gradcheck: checks ampc's gradients against finite differences\n"
    "\n"
    "  ampc-gradcheck MODEL "
    "[--loss=cross_entropy|bce_with_logits|mse|l1|smooth_l1|huber|none] "
    "[--label=NAME]\n"
    "                 [--shape NAME=DxD...] [--batch N] [--seed S]\n"
    "                 [--samples K] [--eps E] [--atol A] [--rtol R]\n"
    "                 [--label-range N] [--verbose] [--print-ops]\n"
    "  ampc-gradcheck --list-rules\n"
    "\n"
    "Compiles MODEL (.onnx or .onnxtext) for training with every FP32 tensor\n"
    "widened to FP64 (ampc --mode=train --precision=fp64) for the CPU target,\n"
    "in a temporary folder, and loads it. Unless the graph ends in a loss,\n"
    "--loss attaches one to output 0 and adds the label input --label. MODEL\n"
    "may also be a library already compiled that way (a path ending in .so),\n"
    "checked as it is; --loss, --label, --shape and --batch apply only when\n"
    "compiling. A module in the ampc dialect (.mlir, with a func @forward)\n"
    "is compiled as written: the import-time ampc-fold-shapes does not run.\n"
    "\n"
    "Inputs are random, drawn with --seed: floating-point inputs from the\n"
    "normal distribution N(0, 1), integer inputs (labels) uniformly from\n"
    "[0, --label-range), booleans 0 or 1. The analytic gradients come from\n"
    "one backward pass (ampc_model_gradients). For each element checked, the\n"
    "numeric gradient is the central difference\n"
    "  (loss(p + eps) - loss(p - eps)) / (2 eps)\n"
    "of the forward's loss (output 0, which must be a scalar), the parameter\n"
    "being restored afterwards. An element passes when\n"
    "  |analytic - numeric| <= atol + rtol * |numeric|\n"
    "(torch.autograd.gradcheck's rule, with its default eps, atol, rtol).\n"
    "\n"
    "Output: one line per trainable parameter,\n"
    "  PARAM: worst abs error E at element I (analytic A, numeric N) "
    "ok|FAILED\n"
    "where I is the row-major index of the element with the largest error\n"
    "(the largest among the failing elements when some fail), then\n"
    "  N passed, N failed\n"
    "counting parameters. Exit status 0 when every parameter passes, 1 when\n"
    "one fails or on an error (bad model, compile failure, no trainable\n"
    "parameter, a gradients entry whose loss differs from the forward's),\n"
    "reported as one line: error: MODEL: ...\n"
    "\n"
    "Ops are named by their ampc mnemonic (max_pool for ampc.max_pool).\n"
    "--list-rules prints every op of the ampc dialect with a gradient rule\n"
    "(GradientOpInterface), one per line, sorted. --print-ops prints, before\n"
    "the results,\n"
    "  ops: A B ...\n"
    "the distinct ops, sorted, whose rule ampc-autodiff calls for this\n"
    "model: those of @forward on a path from a trainable parameter to the\n"
    "loss, except the ops of a loss --loss attaches. --print-ops-only\n"
    "prints that line and exits without building the library.\n";

/// Prints "error: MODEL: MESSAGE" and returns the exit status for it.
int modelError(const Twine &message) {
  errs() << "error: " << modelPath << ": " << message << "\n";
  return 1;
}

int usageError(const Twine &message) {
  errs() << "error: " << message << "\n";
  return 1;
}

/// A diagnostic as one line without the "error: MODEL: " that modelError
/// adds again.
std::string diagnosticMessage(mlir::Diagnostic &diagnostic) {
  std::string line = ampc::formatDiagnostic(diagnostic);
  StringRef rest(line);
  rest.consume_front("error: ");
  if (rest.consume_front(modelPath.getValue())) {
    // "FILE: ..." or "FILE:LINE:COL: ...".
    size_t colon = rest.find(": ");
    if (colon != StringRef::npos &&
        rest.take_front(colon).find(' ') == StringRef::npos)
      rest = rest.drop_front(colon + 2);
  }
  return rest.str();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

/// The name a rule is listed under: the op's mnemonic.
std::string ruleName(mlir::OperationName name) {
  return name.stripDialect().str();
}

/// Every op of the ampc dialect that has a gradient rule, sorted by name.
std::vector<std::string> gradientRules(mlir::MLIRContext &context) {
  context.getOrLoadDialect<ampc::AMPCDialect>();
  std::vector<std::string> names;
  for (mlir::RegisteredOperationName op : context.getRegisteredOperations())
    if (op.getDialectNamespace() == "ampc" &&
        op.hasInterface<ampc::GradientOpInterface>())
      names.push_back(ruleName(op));
  llvm::sort(names);
  return names;
}

/// Collects, just before ampc-autodiff runs, the ops of @forward whose rule
/// it will call: those with a float operand the rule differentiates that
/// depends on a trainable parameter, and a result the rule differentiates
/// that the loss depends on (ampc-autodiff's own criterion).
class ExercisedRules : public mlir::PassInstrumentation {
public:
  explicit ExercisedRules(std::set<std::string> &names) : names(names) {}

  void runBeforePass(mlir::Pass *pass, mlir::Operation *op) override {
    if (pass->getArgument() != "ampc-autodiff")
      return;
    auto module = dyn_cast<mlir::ModuleOp>(op);
    auto forward =
        module ? module.lookupSymbol<mlir::func::FuncOp>("forward") : nullptr;
    if (!forward || !forward.getBody().hasOneBlock())
      return;
    mlir::Block &body = forward.getBody().front();
    mlir::Operation *ret = body.getTerminator();
    if (ret->getNumOperands() == 0)
      return;
    mlir::SymbolTable symbols(module);

    llvm::DenseSet<mlir::Value> varied, useful;
    for (mlir::Operation &inner : body.without_terminator()) {
      if (auto load = dyn_cast<ampc::LoadParameterOp>(inner)) {
        auto parameter = symbols.lookup<ampc::ParameterOp>(load.getParameter());
        if (parameter && !parameter->hasAttr("ampc.frozen"))
          varied.insert(load.getOutput());
        continue;
      }
      if (inner.hasTrait<ampc::NonDifferentiable>())
        continue;
      if (llvm::any_of(inner.getOpOperands(), [&](mlir::OpOperand &o) {
            return varied.contains(o.get()) && carriesGradient(o);
          }))
        for (mlir::OpResult r : inner.getResults())
          if (carriesGradient(r))
            varied.insert(r);
    }
    useful.insert(ret->getOperand(0));
    for (mlir::Operation &inner : llvm::reverse(body.without_terminator())) {
      if (inner.hasTrait<ampc::NonDifferentiable>() ||
          llvm::none_of(inner.getResults(), [&](mlir::OpResult r) {
            return useful.contains(r) && carriesGradient(r);
          }))
        continue;
      for (mlir::OpOperand &o : inner.getOpOperands())
        if (carriesGradient(o))
          useful.insert(o.get());
    }

    auto active = [&](mlir::Value v) {
      return varied.contains(v) && useful.contains(v);
    };
    for (mlir::Operation &inner : body.without_terminator()) {
      if (!isa<ampc::GradientOpInterface>(inner))
        continue;
      bool fromParameter =
          llvm::any_of(inner.getOpOperands(), [&](mlir::OpOperand &o) {
            return active(o.get()) && carriesGradient(o);
          });
      bool toLoss = llvm::any_of(inner.getResults(), [&](mlir::OpResult r) {
        return active(r) && carriesGradient(r);
      });
      if (fromParameter && toLoss && !attachedByLossPass(inner))
        names.insert(ruleName(inner.getName()));
    }
  }

private:
  /// The ops ampc-attach-loss builds for --loss are named after its node
  /// "ampc.loss"; they are not the model's.
  static bool attachedByLossPass(mlir::Operation &op) {
    auto name = dyn_cast<mlir::NameLoc>(op.getLoc());
    return name && name.getName() == "ampc.loss";
  }
  static bool isFloatTensor(mlir::Value v) {
    return isa<mlir::FloatType>(mlir::getElementTypeOrSelf(v.getType()));
  }
  static bool carriesGradient(mlir::OpResult r) {
    auto rule = dyn_cast<ampc::GradientOpInterface>(r.getOwner());
    return isFloatTensor(r) &&
           (!rule || rule.isDifferentiableResult(r.getResultNumber()));
  }
  static bool carriesGradient(mlir::OpOperand &o) {
    auto rule = dyn_cast<ampc::GradientOpInterface>(o.getOwner());
    return isFloatTensor(o.get()) &&
           (!rule || rule.isDifferentiableOperand(o.getOperandNumber()));
  }

  std::set<std::string> &names;
};

//===----------------------------------------------------------------------===//
// Compiling
//===----------------------------------------------------------------------===//

/// Training at fp64: every FP32 tensor widened to FP64, so the finite
/// differences are not swamped by rounding; no loss scaling, no optimizer.
ampc::PipelineOptions trainingPipeline() {
  ampc::PipelineOptions pipeline;
  pipeline.widenToF64 = true;
  pipeline.precision.dtype = ampc::LowPrecisionType::F32;
  pipeline.training = true;
  // The finite differences run `infer`, which must compute the loss exactly
  // as the gradients' forward does (Dropout and BatchNorm as exported).
  pipeline.evalForward = false;
  // main checked the spelling.
  pipeline.loss.loss = *ampc::symbolizeEnum<ampc::LossFunction>(loss);
  pipeline.loss.label = label;
  // The gradients themselves, unscaled, with no update applied: the
  // library's gradients entry.
  pipeline.lossScaling.mode = ampc::LossScalingMode::None;
  pipeline.optimizer.kind = ampc::OptimizerKind::None;
  return pipeline;
}

/// Compiles MODEL into `folder`/model.so; on failure prints the error line
/// and returns false.
bool compileModel(mlir::MLIRContext &context, StringRef folder,
                  std::string &libraryPath) {
  std::string firstError;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error &&
        firstError.empty())
      firstError = diagnosticMessage(d);
    return mlir::success();
  });
  auto failWith = [&](StringRef stage, StringRef fallback) {
    modelError(stage + (firstError.empty() ? fallback : StringRef(firstError)));
    return false;
  };

  ampc::ImportOptions options;
  for (const std::string &spec : shapes) {
    std::string error;
    if (!ampc::parseShapeBinding(spec, options, error))
      return usageError(error), false;
  }
  if (batch.getNumOccurrences())
    options.batch = batch;
  // An .mlir module is taken as written (ampc-fold-shapes, an import-time
  // cleanup that folds away e.g. every Identity, does not run), so rules of
  // ops that ONNX import never leaves behind can be checked too.
  bool isMlir = modelPath.getValue().size() > 5 &&
                StringRef(modelPath).ends_with(".mlir");
  ampc::Model model;
  if (isMlir)
    model.module =
        mlir::parseSourceFile<mlir::ModuleOp>(modelPath.getValue(), &context);
  else
    ampc::loadModel(context, modelPath, options, model);
  if (!model.module)
    return failWith("", isMlir ? "cannot parse the module"
                               : "cannot import the model");
  mlir::ModuleOp module = *model.module;

  std::string error;
  ampc::PipelineOptions pipeline = trainingPipeline();
  pipeline.foldShapes = !isMlir;
  std::set<std::string> exercised;
  if (failed(ampc::runPipeline(
          module, pipeline, ampc::PipelinePart::All, error,
          [&](mlir::PassManager &pm) {
            if (printOps || printOpsOnly)
              pm.addInstrumentation(
                  std::make_unique<ExercisedRules>(exercised));
          })))
    return error.empty() ? failWith("", "the pipeline failed")
                         : (modelError(error), false);
  if (!module.lookupSymbol<mlir::func::FuncOp>("train_step"))
    return modelError("the pipeline built no @train_step, so there are no "
                      "gradients to check"),
           false;
  if (printOps || printOpsOnly) {
    outs() << "ops:";
    for (const std::string &name : exercised)
      outs() << " " << name;
    outs() << "\n";
  }
  if (printOpsOnly)
    return true;

  ampc::CpuLibraryOptions cpu;
  cpu.modelName = sys::path::stem(modelPath).str();
  cpu.precision = "fp64";
  cpu.parameterFile = (folder + "/model.params.bin").str();
  std::optional<ampc::Artifact> artifact =
      ampc::emitArtifact(module, ampc::Target::Cpu, cpu);
  if (!artifact)
    return failWith("CPU target: ", "cannot generate the library's source");
  std::string sourcePath = (folder + "/model.cpp").str();
  if (!ampc::writeArtifactFiles(*artifact, sourcePath, error))
    return modelError(error), false;
  libraryPath = (folder + "/model.so").str();
  if (!ampc::compileArtifact(*artifact, sourcePath, libraryPath, {}, error))
    return modelError(error), false;
  if (verbose)
    outs() << "compiled " << modelPath << " into " << libraryPath << "\n";
  return true;
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

/// A value with the digits that matter in a gradient comparison.
std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.10g", value);
  return text;
}

std::string shapeText(ArrayRef<int64_t> shape) {
  return "[" +
         join(map_range(shape, [](int64_t d) { return std::to_string(d); }),
              ", ") +
         "]";
}

bool isFloat(ampc_dtype dtype) {
  return dtype == AMPC_DTYPE_F64 || dtype == AMPC_DTYPE_F32 ||
         dtype == AMPC_DTYPE_F16 || dtype == AMPC_DTYPE_BF16;
}

/// A tensor of the model's, with its own storage.
struct HostTensor {
  std::string name;
  ampc_dtype dtype = AMPC_DTYPE_F64;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;

  static HostTensor like(const ampc_tensor_info &info) {
    HostTensor t;
    t.name = info.name;
    t.dtype = info.dtype;
    t.shape.assign(info.shape, info.shape + info.rank);
    t.bytes.assign(
        static_cast<size_t>(t.numElements()) * ampc_dtype_size(info.dtype), 0);
    return t;
  }
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  ampc_tensor view() {
    return {dtype, static_cast<int32_t>(shape.size()), shape.data(),
            bytes.data(), bytes.size()};
  }
  /// Element `i` of a floating-point tensor.
  double get(int64_t i) const {
    const unsigned char *p =
        bytes.data() + static_cast<size_t>(i) * ampc_dtype_size(dtype);
    switch (dtype) {
    case AMPC_DTYPE_F32: {
      float v;
      std::memcpy(&v, p, sizeof(v));
      return v;
    }
    case AMPC_DTYPE_F16:
    case AMPC_DTYPE_BF16: {
      uint16_t v;
      std::memcpy(&v, p, sizeof(v));
      return dtype == AMPC_DTYPE_F16 ? ampc::numeric::f16BitsToF32(v)
                                     : ampc::numeric::bf16BitsToF32(v);
    }
    default: {
      double v;
      std::memcpy(&v, p, sizeof(v));
      return v;
    }
    }
  }
  /// Sets element `i` of a floating-point tensor, rounding to its dtype.
  void set(int64_t i, double value) {
    unsigned char *p =
        bytes.data() + static_cast<size_t>(i) * ampc_dtype_size(dtype);
    switch (dtype) {
    case AMPC_DTYPE_F32: {
      float v = static_cast<float>(value);
      std::memcpy(p, &v, sizeof(v));
      return;
    }
    case AMPC_DTYPE_F16:
    case AMPC_DTYPE_BF16: {
      float f = static_cast<float>(value);
      uint16_t v = dtype == AMPC_DTYPE_F16 ? ampc::numeric::f32ToF16Bits(f)
                                           : ampc::numeric::f32ToBf16Bits(f);
      std::memcpy(p, &v, sizeof(v));
      return;
    }
    default:
      std::memcpy(p, &value, sizeof(value));
    }
  }
  /// Sets element `i` of an integer or boolean tensor: the low bytes of
  /// the two's complement value, which are the value in any integer dtype
  /// that holds it (little-endian host).
  void setInteger(int64_t i, int64_t value) {
    size_t size = ampc_dtype_size(dtype);
    uint64_t bits = static_cast<uint64_t>(value);
    std::memcpy(bytes.data() + static_cast<size_t>(i) * size, &bits, size);
  }
};

/// The largest value --label-range may draw for an integer dtype, plus one.
int64_t integerLimit(ampc_dtype dtype) {
  switch (dtype) {
  case AMPC_DTYPE_I8:
    return 128;
  case AMPC_DTYPE_U8:
    return 256;
  case AMPC_DTYPE_BOOL:
    return 2;
  case AMPC_DTYPE_I16:
    return int64_t(1) << 15;
  case AMPC_DTYPE_U16:
    return int64_t(1) << 16;
  case AMPC_DTYPE_I32:
    return int64_t(1) << 31;
  case AMPC_DTYPE_U32:
    return int64_t(1) << 32;
  default:
    return INT64_MAX;
  }
}

/// Random inputs for every input of `model`, or an error message.
bool makeInputs(ampc_model *model, const ampc_model_info &info,
                std::mt19937_64 &rng, std::vector<HostTensor> &inputs,
                std::string &error) {
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int32_t k = 0; k < info.num_inputs; ++k) {
    ampc_tensor_info declared;
    if (ampc_model_input_info(model, k, &declared) != AMPC_OK) {
      error = ampc_last_error();
      return false;
    }
    HostTensor t = HostTensor::like(declared);
    int64_t n = t.numElements();
    int64_t range = t.dtype == AMPC_DTYPE_BOOL ? 2 : labelRange.getValue();
    if (isFloat(t.dtype)) {
      for (int64_t i = 0; i < n; ++i)
        t.set(i, normal(rng));
    } else {
      if (range > integerLimit(t.dtype)) {
        error = formatv("--label-range {0} does not fit input '{1}' ({2})",
                        range, t.name, ampc_dtype_name(t.dtype));
        return false;
      }
      std::uniform_int_distribution<int64_t> uniform(0, range - 1);
      for (int64_t i = 0; i < n; ++i)
        t.setInteger(i, uniform(rng));
    }
    if (verbose)
      outs() << formatv("input {0} '{1}': {2} {3} from {4}\n", k, t.name,
                        ampc_dtype_name(t.dtype), shapeText(t.shape),
                        isFloat(t.dtype) ? std::string("N(0, 1)")
                        : t.dtype == AMPC_DTYPE_BOOL
                            ? std::string("{0, 1}")
                            : "[0, " + std::to_string(range) + ")");
    inputs.push_back(std::move(t));
  }
  return true;
}

/// `count` distinct indices below `n`, sorted: all of them when n <= count,
/// otherwise drawn with `rng` (Floyd's algorithm, no O(n) memory).
std::vector<int64_t> chooseElements(int64_t n, int64_t count,
                                    std::mt19937_64 &rng) {
  std::vector<int64_t> chosen;
  if (n <= count) {
    for (int64_t i = 0; i < n; ++i)
      chosen.push_back(i);
    return chosen;
  }
  std::set<int64_t> picked;
  for (int64_t j = n - count; j < n; ++j) {
    int64_t t = std::uniform_int_distribution<int64_t>(0, j)(rng);
    if (!picked.insert(t).second)
      picked.insert(j);
  }
  chosen.assign(picked.begin(), picked.end());
  return chosen;
}

//===----------------------------------------------------------------------===//
// Checking
//===----------------------------------------------------------------------===//

/// Runs the forward on `inputs` and returns its loss (output 0) in `loss`.
bool forwardLoss(ampc_model *model, std::vector<ampc_tensor> &inputs,
                 std::vector<HostTensor> &outputs, double &loss) {
  std::vector<ampc_tensor> views;
  for (HostTensor &t : outputs)
    views.push_back(t.view());
  if (ampc_model_infer(model, inputs.data(),
                       static_cast<int32_t>(inputs.size()), views.data(),
                       static_cast<int32_t>(views.size())) != AMPC_OK)
    return false;
  loss = outputs[0].get(0);
  return true;
}

/// Checks every gradient of a loaded library; returns the exit status.
int checkLibrary(ampc_model *model) {
  ampc_model_info info;
  if (ampc_model_describe(model, &info) != AMPC_OK)
    return modelError(ampc_last_error());
  int32_t numGradients = 0;
  if (ampc_model_num_gradients(model, &numGradients) != AMPC_OK)
    return modelError(ampc_last_error());
  if (numGradients == 0)
    return modelError("no trainable parameter: no floating-point parameter "
                      "reaches the loss");

  // The forward's output 0 is what the central differences differentiate.
  ampc_tensor_info lossInfo;
  if (ampc_model_output_info(model, 0, &lossInfo) != AMPC_OK)
    return modelError(ampc_last_error());
  HostTensor lossShape = HostTensor::like(lossInfo);
  if (lossShape.numElements() != 1 || !isFloat(lossInfo.dtype))
    return modelError(formatv(
        "output 0 ('{0}') of the forward is {1} {2}, not a scalar loss: the "
        "finite differences need the forward to return the loss first",
        lossInfo.name, ampc_dtype_name(lossInfo.dtype),
        shapeText(lossShape.shape)));

  std::mt19937_64 rng(seed);
  std::vector<HostTensor> inputs, outputs, gradients;
  std::string error;
  if (!makeInputs(model, info, rng, inputs, error))
    return modelError(error);
  std::vector<ampc_tensor> inputViews;
  for (HostTensor &t : inputs)
    inputViews.push_back(t.view());
  for (int32_t k = 0; k < info.num_outputs; ++k) {
    ampc_tensor_info declared;
    if (ampc_model_output_info(model, k, &declared) != AMPC_OK)
      return modelError(ampc_last_error());
    outputs.push_back(HostTensor::like(declared));
  }

  // Analytic gradients at the parameters as loaded.
  std::vector<int32_t> parameterOf(static_cast<size_t>(numGradients));
  std::vector<ampc_tensor_info> parameterInfo(
      static_cast<size_t>(numGradients));
  for (int32_t g = 0; g < numGradients; ++g) {
    if (ampc_model_gradient_info(model, g, &parameterOf[g]) != AMPC_OK ||
        ampc_model_parameter_info(model, parameterOf[g], &parameterInfo[g]) !=
            AMPC_OK)
      return modelError(ampc_last_error());
    gradients.push_back(HostTensor::like(parameterInfo[g]));
  }
  HostTensor analyticLoss = HostTensor::like(lossInfo);
  ampc_tensor lossView = analyticLoss.view();
  std::vector<ampc_tensor> gradientViews;
  for (HostTensor &t : gradients)
    gradientViews.push_back(t.view());
  if (ampc_model_gradients(model, inputViews.data(),
                           static_cast<int32_t>(inputViews.size()), &lossView,
                           gradientViews.data(), numGradients) != AMPC_OK)
    return modelError(ampc_last_error());
  double forwardValue = 0;
  if (!forwardLoss(model, inputViews, outputs, forwardValue))
    return modelError(ampc_last_error());
  double backwardValue = analyticLoss.get(0);
  if (verbose)
    outs() << formatv("loss {0} (forward), {1} (gradients)\n",
                      number(forwardValue), number(backwardValue));
  // The gradients are those of the loss the gradients entry computes; the
  // finite differences see the forward's. When the two disagree, the check
  // would compare the derivatives of two different functions.
  if (!(std::fabs(forwardValue - backwardValue) <=
        absoluteTolerance + relativeTolerance * std::fabs(forwardValue)))
    return modelError(formatv("the loss ampc_model_gradients gives ({0}) "
                              "differs from the forward's ({1})",
                              number(backwardValue), number(forwardValue)));

  unsigned passed = 0, failed = 0;
  for (int32_t g = 0; g < numGradients; ++g) {
    const ampc_tensor_info &declared = parameterInfo[g];
    int32_t index = parameterOf[g];
    HostTensor original = HostTensor::like(declared);
    ampc_tensor originalView = original.view();
    if (ampc_model_get_parameter(model, index, &originalView) != AMPC_OK)
      return modelError(ampc_last_error());
    if (declared.dtype != AMPC_DTYPE_F64)
      errs() << formatv("warning: {0}: parameter '{1}' is {2}, so the "
                        "finite differences are not exact: compile at fp64\n",
                        modelPath, declared.name,
                        ampc_dtype_name(declared.dtype));
    int64_t n = original.numElements();
    std::vector<int64_t> elements = chooseElements(n, samples, rng);
    if (verbose)
      outs() << formatv("parameter {0} '{1}' ({2} {3}): checking {4} of {5} "
                        "elements\n",
                        index, declared.name, ampc_dtype_name(declared.dtype),
                        shapeText(original.shape), elements.size(), n);

    HostTensor perturbed = original;
    ampc_tensor perturbedView = perturbed.view();
    auto lossWith = [&](int64_t i, double value, double &result) {
      perturbed.set(i, value);
      return ampc_model_set_parameter(model, index, &perturbedView) ==
                 AMPC_OK &&
             forwardLoss(model, inputViews, outputs, result);
    };
    struct Worst {
      int64_t element = -1;
      double error = -1, analytic = 0, numeric = 0;
    } worst, worstFailing;
    int64_t failing = 0;
    for (int64_t i : elements) {
      double value = original.get(i), plus = 0, minus = 0;
      bool ran =
          lossWith(i, value + eps, plus) && lossWith(i, value - eps, minus);
      perturbed.set(i, value);
      if (!ran) {
        std::string why = ampc_last_error();
        ampc_model_set_parameter(model, index, &originalView);
        return modelError(why);
      }
      double numeric = (plus - minus) / (2 * eps);
      double analytic = gradients[g].get(i);
      double error = std::fabs(analytic - numeric);
      bool ok =
          error <= absoluteTolerance + relativeTolerance * std::fabs(numeric);
      if (verbose)
        outs() << formatv("  {0}[{1}]: analytic {2}, numeric {3}, "
                          "abs error {4:e3} {5}\n",
                          declared.name, i, number(analytic), number(numeric),
                          error, ok ? "ok" : "FAILED");
      // NaN compares false: such an element fails and counts as the worst.
      if (std::isnan(error))
        error = INFINITY;
      Worst here{i, error, analytic, numeric};
      if (here.error > worst.error)
        worst = here;
      if (!ok) {
        ++failing;
        if (here.error > worstFailing.error)
          worstFailing = here;
      }
    }
    if (ampc_model_set_parameter(model, index, &originalView) != AMPC_OK)
      return modelError(ampc_last_error());

    const Worst &shown = failing ? worstFailing : worst;
    if (elements.empty())
      outs() << declared.name << ": no elements to check ok\n";
    else
      outs() << formatv("{0}: worst abs error {1:e3} at element {2} "
                        "(analytic {3}, numeric {4}) {5}\n",
                        declared.name, shown.error, shown.element,
                        number(shown.analytic), number(shown.numeric),
                        failing ? "FAILED" : "ok");
    if (failing && verbose)
      outs() << formatv("  {0} of {1} checked elements of '{2}' failed\n",
                        failing, elements.size(), declared.name);
    ++(failing ? failed : passed);
  }
  outs() << passed << " passed, " << failed << " failed\n";
  return failed ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  llvm::cl::SetVersionPrinter(ampc::printVersion);
  cl::ParseCommandLineOptions(argc, argv, kOverview);

  if (listRules) {
    mlir::DialectRegistry registry;
    ampc::registerAllDialects(registry);
    mlir::MLIRContext context(registry);
    for (const std::string &name : gradientRules(context))
      outs() << name << "\n";
    return 0;
  }
  if (modelPath.empty())
    return usageError("no model given (see --help)");
  if (!ampc::symbolizeEnum<ampc::LossFunction>(loss))
    return usageError("--loss must be " +
                      ampc::enumChoices<ampc::LossFunction>() + ", got '" +
                      loss + "'");
  if (label.empty())
    return usageError("--label must not be empty");
  if (batch.getNumOccurrences() && batch < 1)
    return usageError("--batch must be >= 1, got " + Twine(batch.getValue()));
  if (samples < 1)
    return usageError("--samples must be >= 1, got " +
                      Twine(samples.getValue()));
  if (!(eps > 0) || !std::isfinite(eps))
    return usageError("--eps must be a positive number, got " +
                      number(eps.getValue()));
  if (!(absoluteTolerance >= 0) || !(relativeTolerance >= 0))
    return usageError("--atol and --rtol must be >= 0");
  if (labelRange < 1)
    return usageError("--label-range must be >= 1, got " +
                      Twine(labelRange.getValue()));
  if (!sys::fs::exists(modelPath))
    return modelError("no such file");

  // A compiled library is checked as it is; anything else is compiled here.
  bool prebuilt = StringRef(modelPath).ends_with(".so");
  if (prebuilt) {
    for (const cl::Option *option :
         {static_cast<const cl::Option *>(&loss),
          static_cast<const cl::Option *>(&label),
          static_cast<const cl::Option *>(&batch),
          static_cast<const cl::Option *>(&printOps),
          static_cast<const cl::Option *>(&printOpsOnly)})
      if (option->getNumOccurrences())
        return usageError("--" + option->ArgStr +
                          " applies when compiling an ONNX model, not to a "
                          "compiled library");
    if (shapes.getNumOccurrences())
      return usageError("--shape applies when compiling an ONNX model, not "
                        "to a "
                        "compiled library");
  }

  SmallString<128> folder;
  struct RemoveFolder {
    SmallString<128> &path;
    ~RemoveFolder() {
      if (!path.empty())
        sys::fs::remove_directories(path);
    }
  } removeFolder{folder};
  std::string libraryPath = modelPath;
  if (!prebuilt) {
    if (std::error_code ec =
            sys::fs::createUniqueDirectory("ampc-gradcheck", folder))
      return modelError("cannot create a temporary folder: " + ec.message());
    mlir::DialectRegistry registry;
    ampc::registerAllDialects(registry);
    mlir::MLIRContext context(registry);
    context.printOpOnDiagnostic(false);
    if (!compileModel(context, folder, libraryPath))
      return 1;
    if (printOpsOnly)
      return 0;
  }

  ampc_model *model = nullptr;
  if (ampc_model_load(libraryPath.c_str(), nullptr, &model) != AMPC_OK)
    return modelError(ampc_last_error());
  // Released before the folder that holds it is removed.
  int status = checkLibrary(model);
  ampc_model_release(model);
  return status;
}
