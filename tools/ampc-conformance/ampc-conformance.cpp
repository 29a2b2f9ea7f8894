//===- ampc-conformance.cpp - ONNX node tests through the CPU target ------===//
//
// ampc-conformance [--precision=fp32|fp16|bf16] [--verbose] DIR...
//
// For each ONNX node-test folder (model.onnx + test_data_set_*/input_*.pb,
// output_*.pb): compiles the model for the CPU target at the given
// precision, loads the library through the runtime C API, runs every data
// set and compares with the expected outputs (ONNX backend tolerances at
// fp32: rtol 1e-3, atol 1e-7; wider ones for 16-bit precisions). Prints one
// line per failure and "N passed, N failed, N skipped". A test is skipped
// when it uses an op or a tensor type ampc does not support, or an op the CPU
// target cannot compile yet; --verbose names it.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Driver/Driver.h"
#include "ampc/Import/Diagnostics.h"
#include "ampc/Import/OnnxImporter.h"
#include "ampc/Import/OnnxModel.h"
#include "ampc/Kernels/Common/Float16.h"
#include "ampc/Runtime/ampc.h"
#include "ampc/Target/CpuTarget.h"
#include "ampc/Transforms/Passes.h"
#include "ampc/Version.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>
#include <map>
#include <thread>

using namespace llvm;

namespace {
cl::OptionCategory category("ampc-conformance options");
cl::list<std::string> folders(cl::Positional, cl::desc("<node-test folder>..."),
                              cl::cat(category));
cl::opt<std::string> precision("precision",
                               cl::desc("fp32 (default), fp16 or bf16"),
                               cl::init("fp32"), cl::cat(category));
cl::opt<unsigned> perLibrary(
    "per-library",
    cl::desc("tests compiled into one library (default 40; 1: a library "
             "each)"),
    cl::init(40), cl::cat(category));
cl::opt<unsigned> jobs("jobs",
                       cl::desc("compilers run at once (default: the "
                                "machine's hardware threads)"),
                       cl::init(0), cl::cat(category));
cl::opt<bool> verbose("verbose",
                      cl::desc("name every skipped test and why, and every "
                               "test that passes"),
                      cl::cat(category));

/// A tensor as the runtime takes it, with its own storage.
struct HostTensor {
  ampc_dtype dtype = static_cast<ampc_dtype>(0);
  std::vector<int64_t> shape;
  std::string bytes;
};

/// The runtime dtype of an ONNX data type; 0 when ampc has none.
ampc_dtype dtypeOf(int onnxType) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT: return AMPC_DTYPE_F32;
  case onnx::TensorProto::DOUBLE: return AMPC_DTYPE_F64;
  case onnx::TensorProto::FLOAT16: return AMPC_DTYPE_F16;
  case onnx::TensorProto::BFLOAT16: return AMPC_DTYPE_BF16;
  case onnx::TensorProto::INT64: return AMPC_DTYPE_I64;
  case onnx::TensorProto::INT32: return AMPC_DTYPE_I32;
  case onnx::TensorProto::INT8: return AMPC_DTYPE_I8;
  case onnx::TensorProto::UINT8: return AMPC_DTYPE_U8;
  case onnx::TensorProto::INT16: return AMPC_DTYPE_I16;
  case onnx::TensorProto::UINT16: return AMPC_DTYPE_U16;
  case onnx::TensorProto::UINT32: return AMPC_DTYPE_U32;
  case onnx::TensorProto::UINT64: return AMPC_DTYPE_U64;
  case onnx::TensorProto::BOOL: return AMPC_DTYPE_BOOL;
  default: return static_cast<ampc_dtype>(0);
  }
}

/// Reads a serialized TensorProto into storage bytes; false with `error`.
/// `declared` is the dtype the model gives the tensor: ONNX's own test data
/// stores BFLOAT16 values as UINT16 tensors.
bool readTensor(StringRef path, ampc_dtype declared, HostTensor &out,
                std::string &error) {
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false);
  onnx::TensorProto t;
  if (!buffer || !t.ParseFromArray((*buffer)->getBufferStart(),
                                   static_cast<int>((*buffer)->getBufferSize()))) {
    error = "cannot read the tensor " + path.str();
    return false;
  }
  out.dtype = dtypeOf(t.data_type());
  if (t.data_type() == onnx::TensorProto::UINT16 &&
      (declared == AMPC_DTYPE_BF16 || declared == AMPC_DTYPE_F16))
    out.dtype = declared;
  if (!out.dtype) {
    error = "tensor type " + std::to_string(t.data_type()) + " not supported";
    return false;
  }
  out.shape.assign(t.dims().begin(), t.dims().end());
  int64_t count = 1;
  for (int64_t d : out.shape)
    count *= d;
  size_t size = ampc_dtype_size(out.dtype);
  if (!t.raw_data().empty()) {
    out.bytes = t.raw_data();
  } else {
    out.bytes.resize(static_cast<size_t>(count) * size);
    char *p = out.bytes.data();
    for (int64_t i = 0; i < count; ++i, p += size) {
      switch (out.dtype) {
      case AMPC_DTYPE_F32: { float v = t.float_data(i); std::memcpy(p, &v, 4); break; }
      case AMPC_DTYPE_F64: { double v = t.double_data(i); std::memcpy(p, &v, 8); break; }
      case AMPC_DTYPE_I64: { int64_t v = t.int64_data(i); std::memcpy(p, &v, 8); break; }
      case AMPC_DTYPE_U64: { uint64_t v = t.uint64_data(i); std::memcpy(p, &v, 8); break; }
      case AMPC_DTYPE_U32: { uint32_t v = static_cast<uint32_t>(t.uint64_data(i)); std::memcpy(p, &v, 4); break; }
      default: {
        // int32_data holds every narrower type, 16-bit floats as their bits.
        int32_t v = t.int32_data(i);
        std::memcpy(p, &v, size);
      }
      }
    }
  }
  if (out.bytes.size() != static_cast<size_t>(count) * size) {
    error = "tensor " + path.str() + " holds the wrong number of bytes";
    return false;
  }
  return true;
}

double valueAt(const HostTensor &t, size_t i) {
  const char *p = t.bytes.data() + i * ampc_dtype_size(t.dtype);
  switch (t.dtype) {
  case AMPC_DTYPE_F32: { float v; std::memcpy(&v, p, 4); return v; }
  case AMPC_DTYPE_F64: { double v; std::memcpy(&v, p, 8); return v; }
  case AMPC_DTYPE_F16: { uint16_t v; std::memcpy(&v, p, 2); return ampc::numeric::f16BitsToF32(v); }
  case AMPC_DTYPE_BF16: { uint16_t v; std::memcpy(&v, p, 2); return ampc::numeric::bf16BitsToF32(v); }
  case AMPC_DTYPE_I64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  case AMPC_DTYPE_I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
  case AMPC_DTYPE_U64: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  case AMPC_DTYPE_U32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
  case AMPC_DTYPE_I16: { int16_t v; std::memcpy(&v, p, 2); return v; }
  case AMPC_DTYPE_U16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
  case AMPC_DTYPE_I8: return static_cast<int8_t>(*p);
  default: return static_cast<uint8_t>(*p);
  }
}

/// Element i of an integer or bool tensor, exactly (u64 and i64 both fit);
/// nullopt for a float tensor.
std::optional<__int128> integerAt(const HostTensor &t, size_t i) {
  const char *p = t.bytes.data() + i * ampc_dtype_size(t.dtype);
  auto read = [p](auto v) -> __int128 {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (t.dtype) {
  case AMPC_DTYPE_I64: return read(int64_t());
  case AMPC_DTYPE_U64: return read(uint64_t());
  case AMPC_DTYPE_I32: return read(int32_t());
  case AMPC_DTYPE_U32: return read(uint32_t());
  case AMPC_DTYPE_I16: return read(int16_t());
  case AMPC_DTYPE_U16: return read(uint16_t());
  case AMPC_DTYPE_I8: return read(int8_t());
  case AMPC_DTYPE_U8:
  case AMPC_DTYPE_BOOL: return read(uint8_t());
  default: return std::nullopt;
  }
}

std::string integerText(__int128 v) {
  return v < 0 ? std::to_string(static_cast<int64_t>(v))
               : std::to_string(static_cast<uint64_t>(v));
}

enum class Outcome { Passed, Failed, Skipped };

struct Tolerance {
  double rtol, atol;
};

/// A node test whose model compiled to source, waiting for its library.
struct Prepared {
  std::string folder;
  std::vector<std::string> dataSets, inputNames;
  llvm::StringSet<> initializers, constantInputs;
  std::string source;      // the generated C++
  std::string entry;       // its entry symbol (ampc_model_entry + suffix)
  std::string library;     // the library that holds it, once compiled
  std::string compileError;
};

class Runner {
public:
  Runner(mlir::MLIRContext &context, Tolerance tolerance, StringRef work)
      : context(context), tolerance(tolerance), work(work) {}
  /// Imports and generates the source of the test in `folder`; Passed means
  /// "prepared" (appended to `prepared`).
  Outcome prepare(StringRef folder, std::vector<Prepared> &prepared);
  /// Loads the prepared test's library and runs its data sets.
  Outcome check(const Prepared &test);

  std::map<std::string, unsigned> skippedBecause;
  double largestRelativeError = 0;

  Outcome skip(StringRef folder, const std::string &why) {
    ++skippedBecause[why];
    if (verbose)
      outs() << "skip " << sys::path::filename(folder) << ": " << why << "\n";
    return Outcome::Skipped;
  }
  Outcome fail(StringRef folder, const Twine &why) {
    outs() << "FAIL " << sys::path::filename(folder) << ": " << why << "\n";
    return Outcome::Failed;
  }

private:
  mlir::MLIRContext &context;
  Tolerance tolerance;
  std::string work;
};

Outcome Runner::prepare(StringRef folder, std::vector<Prepared> &prepared) {
  SmallString<256> modelPath(folder);
  sys::path::append(modelPath, "model.onnx");
  // The file read once: its graph looked at here, then imported.
  ampc::Model file;
  onnx::ModelProto model;
  std::string error;
  if (!ampc::readModel(modelPath, file, error) ||
      !ampc::parseModel(file, model, error))
    return fail(folder, error);

  // In scope: every op imported, every graph tensor of a supported type.
  SmallVector<StringRef> supported = ampc::supportedOnnxOps();
  for (const auto &node : model.graph().node())
    if (!llvm::is_contained(supported, node.op_type()))
      return skip(folder, "op " + node.op_type());
  for (const auto *list : {&model.graph().input(), &model.graph().output()})
    for (const auto &v : *list)
      if (!v.type().has_tensor_type() ||
          !dtypeOf(v.type().tensor_type().elem_type()))
        return skip(folder, "tensor type of '" + v.name() + "'");

  // Inputs that decide shapes or attributes are bound to data set 0.
  SmallVector<std::string> dataSets;
  std::error_code ec;
  for (sys::fs::directory_iterator it(folder, ec), end; it != end && !ec;
       it.increment(ec))
    if (sys::path::filename(it->path()).starts_with("test_data_set_"))
      dataSets.push_back(it->path());
  llvm::sort(dataSets);
  if (dataSets.empty())
    return fail(folder, "no test_data_set_* folder");
  ampc::ImportOptions options;
  std::vector<std::string> inputNames;
  for (const auto &v : model.graph().input())
    inputNames.push_back(v.name());
  llvm::StringSet<> initializers;
  for (const auto &t : model.graph().initializer())
    initializers.insert(t.name());
  // The graph inputs a compile-time operand depends on, directly or through
  // the nodes that compute it (a window function's size goes through a
  // Cast into Range): bound to the test's values, as a user would.
  llvm::StringMap<const onnx::NodeProto *> producer;
  for (const auto &node : model.graph().node())
    for (const std::string &out : node.output())
      producer[out] = &node;
  std::vector<std::string> pending;
  for (const auto &node : model.graph().node())
    for (int k : ampc::compileTimeInputs(node.op_type()))
      if (k < node.input_size() && !node.input(k).empty())
        pending.push_back(node.input(k));
  llvm::StringSet<> seen;
  while (!pending.empty()) {
    std::string name = pending.back();
    pending.pop_back();
    if (!seen.insert(name).second)
      continue;
    auto it = llvm::find(inputNames, name);
    if (it != inputNames.end()) {
      options.constantInputs[*it] =
          (dataSets.front() + "/input_" +
           std::to_string(it - inputNames.begin()) + ".pb");
      continue;
    }
    if (const onnx::NodeProto *node = producer.lookup(name))
      for (const std::string &in : node->input())
        if (!in.empty())
          pending.push_back(in);
  }

  // Import and compile, keeping the first diagnostic as the reason.
  std::string firstError;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error && firstError.empty())
      firstError = ampc::formatDiagnostic(d);
    return mlir::success();
  });
  if (!ampc::importModel(context, file, options))
    return fail(folder, "import: " + firstError);
  mlir::ModuleOp module = *file.module;
  ampc::PipelineOptions pipeline;
  // The node tests check the op as written, training mode included.
  pipeline.evalForward = false;
  pipeline.precision.dtype =
      StringSwitch<ampc::LowPrecisionType>(precision)
          .Case("fp16", ampc::LowPrecisionType::F16)
          .Case("bf16", ampc::LowPrecisionType::BF16)
          .Default(ampc::LowPrecisionType::F32);
  if (failed(ampc::runPipeline(module, pipeline, ampc::PipelinePart::All,
                               error)))
    return fail(folder, "pipeline: " + firstError + error);

  // Dropout in training mode draws its mask from ampc's own generator; the
  // test's expected outputs come from numpy's, which nothing reproduces.
  bool randomMask = false;
  module.walk([&](ampc::DropoutOp d) {
    randomMask |= d.getTrainingMode() != 0 && !d.getRatio().isZero();
  });
  if (randomMask)
    return skip(folder, "Dropout in training mode (the expected mask comes "
                        "from numpy's random generator)");

  // Every test's source gets its own symbols, so that many compile into one
  // library (compileBatches).
  Prepared test;
  std::string index = std::to_string(prepared.size());
  ampc::CpuLibraryOptions cpu;
  cpu.modelName = sys::path::filename(folder).str();
  cpu.precision = precision;
  cpu.parameterFile = work + "/t" + index + ".params.bin";
  cpu.symbolSuffix = "_t" + index;
  std::optional<ampc::Artifact> artifact =
      ampc::emitArtifact(module, ampc::Target::Cpu, cpu);
  if (!artifact) {
    // An op that imports but the CPU target cannot compile yet.
    StringRef reason(firstError);
    size_t at = reason.find("the CPU target cannot compile '");
    if (at != StringRef::npos)
      return skip(folder, "CPU target: " +
                              reason.substr(at + 31).split('\'').first.str());
    return fail(folder, "codegen: " + firstError);
  }
  // The source is combined with others' (compileBatch): its text form.
  test.source = artifact->text();
  if (!ampc::writeArtifactFiles(*artifact, "", error))
    return fail(folder, error);
  test.folder = folder.str();
  test.dataSets.assign(dataSets.begin(), dataSets.end());
  test.inputNames = std::move(inputNames);
  test.initializers = std::move(initializers);
  for (const auto &entry : options.constantInputs)
    test.constantInputs.insert(entry.first());
  test.entry = "ampc_model_entry" + cpu.symbolSuffix;
  prepared.push_back(std::move(test));
  return Outcome::Passed;
}

Outcome Runner::check(const Prepared &test) {
  StringRef folder = test.folder;
  if (!test.compileError.empty())
    return fail(folder, test.compileError);
  std::string error;
  const std::vector<std::string> &inputNames = test.inputNames;
  ampc_model *library = nullptr;
  if (ampc_model_load_entry(test.library.c_str(), test.entry.c_str(), nullptr,
                            &library) != AMPC_OK)
    return fail(folder, ampc_last_error());
  struct Release {
    ampc_model *m;
    ~Release() { ampc_model_release(m); }
  } release{library};
  ampc_model_info info;
  ampc_model_describe(library, &info);

  for (const std::string &set : test.dataSets) {
    std::vector<HostTensor> inputs, expected, outputs(info.num_outputs);
    for (size_t k = 0; k < inputNames.size(); ++k) {
      if (test.constantInputs.count(inputNames[k]))
        continue;
      // An initializer listed as an input (IR version < 4) is a parameter
      // of the library with the initializer's value; the test feeds only
      // the inputs it provides.
      if (test.initializers.count(inputNames[k])) {
        if (!sys::fs::exists(set + "/input_" + std::to_string(k) + ".pb"))
          continue;
        return skip(folder, "test data replaces an initializer listed as "
                            "an input (the library holds it as a parameter)");
      }
      ampc_tensor_info declared;
      HostTensor t;
      if (ampc_model_input_info(library, static_cast<int32_t>(inputs.size()),
                                &declared) != AMPC_OK ||
          !readTensor(set + "/input_" + std::to_string(k) + ".pb",
                      declared.dtype, t, error))
        return fail(folder, error.empty() ? ampc_last_error() : error);
      // Some of ONNX's test data disagrees with the model it belongs to.
      if (ArrayRef<int64_t>(t.shape) != ArrayRef<int64_t>(declared.shape, declared.rank))
        return skip(folder, "test data for '" + inputNames[k] +
                                "' does not have the shape the model declares");
      inputs.push_back(std::move(t));
    }
    for (int32_t k = 0; k < info.num_outputs; ++k) {
      ampc_tensor_info declared;
      ampc_model_output_info(library, k, &declared);
      HostTensor t;
      if (!readTensor(set + "/output_" + std::to_string(k) + ".pb",
                      declared.dtype, t, error))
        return fail(folder, error);
      expected.push_back(std::move(t));
    }
    auto wrap = [](HostTensor &t) {
      return ampc_tensor{t.dtype, static_cast<int32_t>(t.shape.size()),
                         t.shape.data(), t.bytes.data(), t.bytes.size()};
    };
    std::vector<ampc_tensor> in, out;
    for (HostTensor &t : inputs)
      in.push_back(wrap(t));
    for (int32_t k = 0; k < info.num_outputs; ++k) {
      ampc_tensor_info o;
      ampc_model_output_info(library, k, &o);
      outputs[k].dtype = o.dtype;
      outputs[k].shape.assign(o.shape, o.shape + o.rank);
      int64_t count = 1;
      for (int64_t d : outputs[k].shape)
        count *= d;
      outputs[k].bytes.assign(static_cast<size_t>(count) * ampc_dtype_size(o.dtype), '\0');
      out.push_back(wrap(outputs[k]));
    }
    if (ampc_model_infer(library, in.data(), static_cast<int32_t>(in.size()),
                         out.data(), static_cast<int32_t>(out.size())) != AMPC_OK)
      return fail(folder, ampc_last_error());
    for (int32_t k = 0; k < info.num_outputs; ++k) {
      const HostTensor &got = outputs[k], &want = expected[k];
      if (got.shape != want.shape)
        return fail(folder, "output " + Twine(k) + " has another shape than expected");
      size_t n = got.bytes.size() / ampc_dtype_size(got.dtype);
      for (size_t i = 0; i < n; ++i) {
        // Integers compare exactly (a double holds neither u64 nor i64).
        std::optional<__int128> gi = integerAt(got, i), wi = integerAt(want, i);
        if (gi && wi) {
          if (*gi != *wi)
            return fail(folder, formatv("{0}: output {1} element {2}: got {3}, "
                                        "expected {4}",
                                        sys::path::filename(set), k, i,
                                        integerText(*gi), integerText(*wi)));
          continue;
        }
        double g = valueAt(got, i), w = valueAt(want, i);
        if (std::isnan(w) && std::isnan(g))
          continue;
        if (std::isinf(w) && g == w)
          continue;
        double diff = std::fabs(g - w);
        if (std::fabs(w) > 1e-6)
          largestRelativeError = std::max(largestRelativeError, diff / std::fabs(w));
        // ONNX 1.12 made its BFLOAT16 expectations by truncation; ampc rounds
        // to nearest even (as GPUs do), so allow one BFLOAT16 ulp there.
        double allowed = tolerance.atol + tolerance.rtol * std::fabs(w);
        if (got.dtype == AMPC_DTYPE_BF16)
          allowed = std::max(allowed, std::ldexp(std::fabs(w), -7));
        if (!(diff <= allowed))
          return fail(folder, formatv("{0}: output {1} element {2}: got {3:g9}, "
                                      "expected {4:g9}",
                                      sys::path::filename(set), k, i, g, w));
      }
    }
  }
  if (verbose)
    outs() << "ok " << sys::path::filename(folder) << "\n";
  return Outcome::Passed;
}
/// One library to compile: the sources of `tests`, each in a namespace of
/// its own (their static names apart), their #include lines first.
struct Batch {
  std::vector<Prepared *> tests;
  std::string library;
};

bool compileBatch(const Batch &batch, std::string &error) {
  std::string includes, bodies;
  llvm::StringSet<> seen;
  for (Prepared *test : batch.tests) {
    bodies += "namespace " + test->entry + " {\n";
    for (StringRef line : llvm::split(test->source, '\n')) {
      if (line.starts_with("#include")) {
        if (seen.insert(line).second)
          includes += line.str() + "\n";
        continue;
      }
      bodies += line.str() + "\n";
    }
    bodies += "} // namespace " + test->entry + "\n\n";
  }
  std::string sourcePath = batch.library + ".cpp";
  {
    std::error_code ec;
    raw_fd_ostream s(sourcePath, ec);
    s << includes << "\n" << bodies;
    if (ec) {
      error = "cannot write " + sourcePath;
      return false;
    }
  }
  // The combined text read back as a source (one translation unit when it
  // holds several tests' data).
  return ampc::compileArtifact(ampc::Artifact::parse(includes + "\n" + bodies),
                               sourcePath, batch.library, {}, error);
}

/// Compiles the prepared tests into libraries of up to `perLibrary` tests
/// each, `jobs` compilers at a time: one compiler run parses the kernel
/// headers once for all of a library's tests, most of a small model's
/// compile time. A library that fails is compiled again one test per
/// library, so that the failure is the test's own.
void compileAll(std::vector<Prepared> &tests, StringRef work,
                unsigned perLibrary, unsigned jobs) {
  std::vector<Batch> batches;
  for (size_t first = 0; first < tests.size(); first += perLibrary) {
    Batch batch;
    for (size_t i = first; i < std::min(tests.size(), first + perLibrary); ++i)
      batch.tests.push_back(&tests[i]);
    batch.library = (work + "/b" + Twine(batches.size()) + ".so").str();
    batches.push_back(std::move(batch));
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t b; (b = next++) < batches.size();) {
      const Batch &batch = batches[b];
      std::string error;
      if (compileBatch(batch, error)) {
        for (Prepared *test : batch.tests)
          test->library = batch.library;
        continue;
      }
      if (batch.tests.size() == 1) {
        batch.tests.front()->compileError = error;
        continue;
      }
      for (Prepared *test : batch.tests) {
        Batch alone{{test}, batch.library + "." + test->entry + ".so"};
        if (compileBatch(alone, error))
          test->library = alone.library;
        else
          test->compileError = error;
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned j = 1; j < std::min<size_t>(jobs, batches.size()); ++j)
    threads.emplace_back(worker);
  worker();
  for (std::thread &t : threads)
    t.join();
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  llvm::cl::SetVersionPrinter(ampc::printVersion);
  cl::ParseCommandLineOptions(
      argc, argv,
      "ampc-conformance: runs ONNX node-test folders through the CPU target\n\n"
      "  ampc-conformance [--precision=fp32|fp16|bf16] [--verbose] DIR...\n");
  if (folders.empty()) {
    errs() << "error: no node-test folder given (see --help)\n";
    return 1;
  }
  if (precision != "fp32" && precision != "fp16" && precision != "bf16") {
    errs() << "error: --precision must be fp32, fp16 or bf16, got '"
           << precision << "'\n";
    return 1;
  }
  // ONNX's backend tolerances at fp32; at 16 bits, values are rounded where
  // stored, so the error grows with each op's depth: a few ulps of f16/bf16.
  Tolerance tolerance = precision == "fp32"   ? Tolerance{1e-3, 1e-7}
                        : precision == "fp16" ? Tolerance{1e-2, 1e-3}
                                              : Tolerance{5e-2, 1e-2};
  mlir::DialectRegistry registry;
  ampc::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.printOpOnDiagnostic(false);

  for (const std::string &folder : folders)
    if (!sys::fs::exists(folder + "/model.onnx")) {
      errs() << "error: " << folder << ": no model.onnx\n";
      return 1;
    }
  SmallString<128> work;
  if (std::error_code ec = sys::fs::createUniqueDirectory("ampc-conformance", work)) {
    errs() << "error: cannot create a temporary folder: " << ec.message() << "\n";
    return 1;
  }
  struct Cleanup {
    SmallString<128> &path;
    ~Cleanup() { sys::fs::remove_directories(path); }
  } cleanup{work};

  Runner runner(context, tolerance, work);
  unsigned passed = 0, failed = 0, skipped = 0;
  auto count = [&](Outcome outcome) {
    switch (outcome) {
    case Outcome::Passed: ++passed; break;
    case Outcome::Failed: ++failed; break;
    case Outcome::Skipped: ++skipped; break;
    }
  };
  std::vector<Prepared> prepared;
  for (const std::string &folder : folders)
    if (Outcome outcome = runner.prepare(folder, prepared);
        outcome != Outcome::Passed)
      count(outcome);
  compileAll(prepared, work, std::max(1u, perLibrary.getValue()),
             jobs ? jobs.getValue() : std::max(1u, std::thread::hardware_concurrency()));
  if (verbose) {
    llvm::StringSet<> libraries;
    for (const Prepared &test : prepared)
      if (!test.library.empty())
        libraries.insert(test.library);
    outs() << "compiled " << prepared.size() << " tests into "
           << libraries.size() << " libraries\n";
  }
  for (const Prepared &test : prepared)
    count(runner.check(test));
  if (verbose)
    for (const auto &[why, n] : runner.skippedBecause)
      outs() << "skipped " << n << ": " << why << "\n";
  if (precision != "fp32")
    outs() << formatv("largest relative error seen: {0:e3}\n",
                      runner.largestRelativeError);
  outs() << passed << " passed, " << failed << " failed, " << skipped
         << " skipped\n";
  return failed ? 1 : 0;
}
