//===- LibraryEmitter.cpp - what every model-library emitter shares -------===//
//
// See include/ampc/Target/LibraryEmitter.h.
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/LibraryEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/ShardOptimizer.h"
#include "ampc/Dialect/ChannelsLast.h"
#include "ampc/Target/ScalarExpression.h"
#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Transforms/Training.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <map>
#include <thread>

using namespace mlir;
using llvm::formatv;
using llvm::StringRef;

namespace ampc::emit {

int onnxDtype(Type t) {
  if (t.isF32()) return 1;
  if (t.isF16()) return 10;
  if (t.isBF16()) return 16;
  if (t.isF64()) return 11;
  if (t.isInteger(1)) return 9;
  if (t.isInteger(8)) return t.isUnsignedInteger() ? 2 : 3;
  if (t.isInteger(16)) return t.isUnsignedInteger() ? 4 : 5;
  if (t.isInteger(32)) return t.isUnsignedInteger() ? 12 : 6;
  if (t.isInteger(64)) return t.isUnsignedInteger() ? 13 : 7;
  return 0;
}

StringRef storageType(Type t) {
  if (t.isF32()) return "float";
  if (t.isF64()) return "double";
  if (t.isF16() || t.isBF16()) return "uint16_t";
  if (t.isInteger(1)) return "uint8_t";
  if (t.isInteger(8)) return t.isUnsignedInteger() ? "uint8_t" : "int8_t";
  if (t.isInteger(16)) return t.isUnsignedInteger() ? "uint16_t" : "int16_t";
  if (t.isInteger(32)) return t.isUnsignedInteger() ? "uint32_t" : "int32_t";
  if (t.isInteger(64)) return t.isUnsignedInteger() ? "uint64_t" : "int64_t";
  return "";
}

std::string codecName(Type t, StringRef ns) {
  if (t.isF16())
    return (ns + "::AsF16").str();
  if (t.isBF16())
    return (ns + "::AsBf16").str();
  return (ns + "::As<" + storageType(t) + ">").str();
}

StringRef computeType(Type t) {
  if (t.isF16() || t.isBF16() || t.isF32()) return "float";
  if (t.isF64()) return "double";
  if (t.isInteger(1)) return "bool";
  return storageType(t);
}

int64_t storageSize(Type t) { return ampc::storageBytes(t); }

StringRef accumulatorType(Type t) {
  if (isa<FloatType>(t))
    return t.isF64() ? "double" : "float";
  return storageType(t);
}

std::string exactLiteral(const APFloat &value) {
  return formatv("{0:e17}", value.convertToDouble()).str();
}

StringRef lossReductionName(ampc::Reduction reduction) {
  switch (reduction) {
  case ampc::Reduction::None:
    return "LossNone";
  case ampc::Reduction::Sum:
    return "LossSum";
  case ampc::Reduction::Mean:
    return "LossMean";
  }
  llvm_unreachable("unknown loss reduction");
}

std::string cString(StringRef text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20) {
      out += '\\';
      out += static_cast<char>('0' + (u >> 6));
      out += static_cast<char>('0' + ((u >> 3) & 7));
      out += static_cast<char>('0' + (u & 7));
    } else {
      out += c;
    }
  }
  return out;
}

std::string list(ArrayRef<int64_t> values) {
  if (values.empty())
    return "{0}";
  return "{" + llvm::join(llvm::map_range(values, [](int64_t v) {
                            return std::to_string(v) + "LL";
                          }),
                          ", ") +
         "}";
}


std::string constantElements(Operation *constant) {
  auto op = cast<ampc::ConstantOp>(constant);
  Type t = elementOf(op.getResult());
  auto elements = cast<DenseElementsAttr>(op.getValue());
  int64_t count = tensorOf(op.getResult()).getNumElements();
  std::string text;
  llvm::raw_string_ostream cs(text);
  for (int64_t i = 0; i < std::max<int64_t>(count, 1); ++i) {
    if (i)
      cs << ", ";
    if (count == 0) {
      cs << "0";
      break;
    }
    int64_t index = elements.isSplat() ? 0 : i;
    if (isa<FloatType>(t)) {
      APFloat value = elements.getValues<APFloat>()[index];
      StringRef c = storageType(t);
      if (t.isF16() || t.isBF16())
        cs << value.bitcastToAPInt().getZExtValue();
      else if (value.isInfinity())
        // C++ has no literal for them (formatv would write "INF").
        cs << (value.isNegative() ? "-" : "") << "std::numeric_limits<" << c
           << ">::infinity()";
      else if (value.isNaN())
        cs << "std::numeric_limits<" << c << ">::quiet_NaN()";
      else
        cs << formatv("{0:e17}", value.convertToDouble());
    } else {
      APInt value = elements.getValues<APInt>()[index];
      // The most negative int64 has no literal: write it as an expression.
      if (t.isInteger(1))
        cs << value.getZExtValue();
      else if (t.isUnsignedInteger())
        cs << value.getZExtValue() << (t.isInteger(64) ? "ULL" : "u");
      else if (value.isMinSignedValue() && t.isInteger(64))
        cs << "(-9223372036854775807LL - 1)";
      else
        cs << value.getSExtValue() << (t.isInteger(64) ? "LL" : "");
    }
  }
  return text;
}

SmallVector<int64_t> shapeOpDims(Operation *shapeOp) {
  auto o = cast<ampc::ShapeOp>(shapeOp);
  ArrayRef<int64_t> shape = tensorOf(o.getInput()).getShape();
  int64_t rank = shape.size();
  auto clampDim = [&](int64_t d) {
    return std::clamp<int64_t>(d < 0 ? d + rank : d, 0, rank);
  };
  int64_t start = clampDim(o.getStart());
  int64_t end = o.getEnd() ? clampDim(*o.getEnd()) : rank;
  return SmallVector<int64_t>(
      shape.slice(start, std::max<int64_t>(end - start, 0)));
}

std::string installedPath(StringRef relative, StringRef probe,
                          StringRef buildPath) {
  static int anchor;
  std::string exe = llvm::sys::fs::getMainExecutable(nullptr, &anchor);
  if (!exe.empty()) {
    SmallString<256> candidate(llvm::sys::path::parent_path(
        llvm::sys::path::parent_path(exe)));
    llvm::sys::path::append(candidate, relative);
    SmallString<256> probed(candidate);
    llvm::sys::path::append(probed, probe);
    if (llvm::sys::fs::exists(probed))
      return candidate.str().str();
  }
  return buildPath.str();
}

std::string runtimeIncludeFlag(StringRef buildIncludeDir) {
  return "-I" + installedPath("include", "ampc/Runtime/ModelAbi.h",
                              buildIncludeDir);
}

bool runCompiler(ArrayRef<std::string> args, StringRef what,
                 StringRef sourcePath, std::string &error, std::string *log) {
  std::vector<std::string> logs;
  bool ok = runCompilers({std::vector<std::string>(args.begin(), args.end())},
                         what, sourcePath, error, log ? &logs : nullptr);
  if (log && !logs.empty())
    *log = std::move(logs.front());
  return ok;
}

std::optional<std::string> hostCompiler(std::string &error) {
  std::string compiler = "c++";
  if (const char *cxx = std::getenv("CXX"); cxx && *cxx)
    compiler = cxx;
  auto program = llvm::sys::findProgramByName(compiler);
  if (!program) {
    error = "no C++ compiler '" + compiler + "' on PATH (set CXX)";
    return std::nullopt;
  }
  return *program;
}

unsigned compileJobs() {
  unsigned jobs = 0;
  if (const char *env = std::getenv("AMPC_COMPILE_JOBS"))
    StringRef(env).getAsInteger(10, jobs);
  if (jobs == 0)
    jobs = std::thread::hardware_concurrency();
  return std::max(jobs, 1u);
}

std::vector<std::string> cutPieces(StringRef body, const BodyLayout &layout,
                                   size_t pieceBytes) {
  if (pieceBytes == 0 || body.size() < 2 * pieceBytes)
    return {body.str()};
  const llvm::StringMap<std::string> &declarations = layout.declarations;
  llvm::StringSet<> declarationLines;
  for (const auto &d : declarations)
    declarationLines.insert(d.getValue());
  std::vector<std::string> pieces;
  size_t begin = 0;
  auto finish = [&](size_t end) {
    StringRef text = body.slice(begin, end);
    begin = end;
    std::string statements, uses;
    llvm::StringSet<> used;
    for (StringRef line : llvm::split(text, '\n')) {
      if (line.empty())
        continue;
      if (!declarationLines.contains(line))
        statements += (line + "\n").str();
      // Every identifier of the line that names a declaration.
      for (size_t i = 0; i < line.size();) {
        if (!llvm::isAlpha(line[i]) && line[i] != '_') {
          ++i;
          continue;
        }
        size_t j = i;
        while (j < line.size() && (llvm::isAlnum(line[j]) || line[j] == '_'))
          ++j;
        StringRef word = line.slice(i, j);
        if (auto it = declarations.find(word);
            it != declarations.end() && used.insert(word).second)
          uses += it->getValue() + "\n";
        i = j;
      }
    }
    pieces.push_back(uses + statements);
  };
  for (size_t end : layout.opEnds)
    if (end - begin >= pieceBytes && body.size() - end >= pieceBytes / 2)
      finish(end);
  finish(body.size());
  return pieces;
}

bool runCompilers(ArrayRef<std::vector<std::string>> jobs, StringRef what,
                  StringRef sourcePath, std::string &error,
                  std::vector<std::string> *logs) {
  struct Running {
    llvm::sys::ProcessInfo process;
    SmallString<128> log;
  };
  std::vector<Running> running(jobs.size());
  std::vector<int> status(jobs.size(), -1);
  llvm::scope_exit cleanup([&] {
    for (Running &r : running)
      if (!r.log.empty())
        llvm::sys::fs::remove(r.log);
  });
  // Starts job `i`; false when it cannot be started.
  auto start = [&](size_t i) {
    if (llvm::sys::fs::createTemporaryFile("ampc-compiler", "log",
                                           running[i].log))
      return false;
    SmallVector<StringRef> refs(jobs[i].begin(), jobs[i].end());
    std::optional<StringRef> redirects[] = {
        std::nullopt, StringRef(running[i].log), StringRef(running[i].log)};
    running[i].process = llvm::sys::ExecuteNoWait(jobs[i][0], refs,
                                                  std::nullopt, redirects);
    return running[i].process.Pid != llvm::sys::ProcessInfo::InvalidPid;
  };
  size_t next = 0, limit = compileJobs();
  std::vector<size_t> active;
  while (next < jobs.size() || !active.empty()) {
    // A job that cannot be started keeps status -1: a failure.
    for (; next < jobs.size() && active.size() < limit; ++next)
      if (start(next))
        active.push_back(next);
    if (active.empty())
      break; // none could be started
    // The oldest running job (the compiles of one source take similar
    // times, so waiting in order loses little).
    size_t i = active.front();
    active.erase(active.begin());
    status[i] = llvm::sys::Wait(running[i].process, std::nullopt).ReturnCode;
  }
  if (logs)
    logs->clear();
  bool ok = true;
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::string printed;
    if (!running[i].log.empty())
      if (auto text = llvm::MemoryBuffer::getFile(running[i].log))
        printed = (*text)->getBuffer().str();
    if (logs)
      logs->push_back(printed);
    if (status[i] == 0 || !ok)
      continue;
    ok = false;
    error = what.str() + " failed on " + sourcePath.str();
    for (StringRef line : llvm::split(printed, '\n'))
      if (line.contains("error")) {
        error += ": " + line.trim().str();
        break;
      }
  }
  return ok;
}

} // namespace ampc::emit

using namespace ampc::emit;

namespace ampc {

LogicalResult LibraryEmitter::emitScalarOps(
    ArrayRef<Operation *> ops, llvm::DenseMap<Value, std::string> &scalars,
    ArrayRef<std::pair<Value, std::string>> stores, StringRef indent,
    llvm::raw_ostream &body) {
  bool lone = stores.size() == 1 && !ops.empty() &&
              stores[0].first == ops.back()->getResult(0);
  for (auto [i, op] : llvm::enumerate(ops)) {
    SmallVector<std::string> operands;
    for (Value v : op->getOperands())
      operands.push_back(scalars.lookup(v));
    Type t = elementOf(op->getResult(0));
    FailureOr<std::string> e =
        ampc::scalarExpression(op, operands, computeType(t));
    if (failed(e))
      return failure();
    if (lone && i + 1 == ops.size()) {
      body << indent << stores[0].second << " = " << store(t, *e) << ";\n";
      return success();
    }
    std::string tmp = "t" + std::to_string(i);
    scalars[op->getResult(0)] = tmp;
    body << indent << "const " << computeType(t) << " " << tmp << " = "
         << load(t, store(t, *e)) << ";\n";
  }
  // Each value was rounded to its type as its local was made: storing it
  // again rounds nothing.
  for (auto &[v, destination] : stores)
    body << indent << destination << " = " << store(elementOf(v), scalars.lookup(v))
         << ";\n";
  return success();
}

/// `bytes` as an aligned static array named `name`.
static void emitByteArray(llvm::raw_ostream &os, StringRef name,
                          StringRef bytes) {
  os << "alignas(64) static const unsigned char " << name << "[] = {";
  for (size_t i = 0; i < bytes.size(); ++i)
    os << (i % 20 ? " " : "\n  ") << unsigned(uint8_t(bytes[i])) << ",";
  os << "\n};\n";
}

namespace {
/// The declaration of a blob that incbinBlob defines.
std::string externBlob(StringRef name) {
  return "extern \"C\" const unsigned char *const " + name.str() + ";\n";
}

/// The bytes of `file` (assembler .incbin) behind the hidden pointer
/// `name`. They go in the large read-only section, which the linker places
/// after .bss, and the code reaches them through an 8-byte pointer in
/// .data.rel.ro: in .rodata, between the code and its data, a blob of 2 GiB
/// or more put the code's 32-bit PC-relative references out of range and
/// the link failed ("relocation truncated to fit"), and a pointer reaches
/// a second blob that starts beyond 2 GiB.
std::string incbinBlob(StringRef name, StringRef file) {
  std::string n = name.str(), data = n + "_data";
  return "asm(\".pushsection .lrodata,\\\"al\\\"\\n.balign 64\\n" + data +
         ":\\n.incbin \\\"" + cString(file) +
         "\\\"\\n.popsection\\n.pushsection .data.rel.ro,\\\"aw\\\"\\n"
         ".balign 8\\n.globl " + n + "\\n.hidden " + n + "\\n.type " + n +
         ", @object\\n.size " + n + ", 8\\n" + n + ":\\n.quad " + data +
         "\\n.popsection\\n\");\n";
}
} // namespace

void LibraryEmitter::emitParameterBlob(StringRef comment) {
  if (!blobBytes)
    return;
  std::string name = symbol("ampc_parameter_blob");
  if (options.parameterFile.empty()) {
    os << "// " << comment << "\n";
    emitByteArray(os, name, StringRef(blob.data(), blobBytes));
    os << "\n";
    return;
  }
  os << "// " << comment << "\n" << externBlob(name) << "\n";
  dataSection += incbinBlob(name, options.parameterFile);
}

void LibraryEmitter::emitTrainStepEntry() {
  os << "static int32_t trainStep(void *raw, const void *const *inputs, "
        "void *loss) {\n  void *const outputs[] = {loss};\n"
        "  return trainStepBody(raw, inputs, outputs);\n}\n\n";
  emitStateAccess();
}

std::string LibraryEmitter::scratch(Operation *op, StringRef slot,
                                    StringRef type) {
  auto block = op->getAttrOfType<DenseI64ArrayAttr>(ampc::kScratchAttr);
  std::optional<int64_t> at =
      emit::scratchLayout(op, kernelTarget()).offset(slot);
  // checkPlan saw the block; a slot the layout does not name is a bug of
  // the emitter, not of the input.
  if (!block || !at)
    llvm::report_fatal_error(("emitter: scratch slot '" + slot + "' of " +
                              emit::nodeDescription(op) + " is not planned")
                                 .str()
                                 .c_str());
  return formatv("reinterpret_cast<{0} *>(state + {1})", type,
                 arenaBase + block[0] + *at)
      .str();
}

LogicalResult LibraryEmitter::checkPlan(func::FuncOp f) {
  auto slot = f->getAttrOfType<IntegerAttr>(ampc::kErrorSlotAttr);
  if (!slot)
    return f.emitError() << "has no error slot in its memory plan "
                            "(ampc-plan-memory)";
  bool cuda = kernelTarget() == ampc::KernelTarget::Cuda;
  if (cuda && !f->hasAttr(ampc::kInputOffsetsAttr))
    return f.emitError() << "has no staging buffers in its memory plan (the "
                            "CUDA target needs ampc-plan-memory with "
                            "stage-inputs)";
  WalkResult result = f.walk([&](Operation *op) {
    if (op->hasTrait<ampc::Accumulating>() &&
        !op->hasAttr(ampc::kAccumulateAttr)) {
      op->emitError() << "has no accumulation type (ampc-assign-accumulation)";
      return WalkResult::interrupt();
    }
    auto dropout = dyn_cast<ampc::DropoutOp>(op);
    if (isa<ampc::MatMulOp>(op) || (dropout && dropout.isIdentity())) {
      op->emitError() << (dropout ? "is the identity, which the kernel level "
                                    "folds (canonicalize)"
                                  : "is lowered at the kernel level "
                                    "(ampc-lower-matmul)");
      return WalkResult::interrupt();
    }
    if (failed(emit::checkLaunchGeometry(op, kernelTarget())))
      return WalkResult::interrupt();
    int64_t need = emit::scratchLayout(op, kernelTarget()).bytes();
    auto block = op->getAttrOfType<DenseI64ArrayAttr>(ampc::kScratchAttr);
    if (need > 0 && (!block || block[1] < need)) {
      op->emitError() << "needs " << need << " bytes of scratch on the "
                      << targetName()
                      << " target, which its memory plan does not give it "
                         "(ampc-plan-memory target="
                      << targetName() << ")";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

int64_t LibraryEmitter::reserve(int64_t bytes) {
  int64_t at = stateSize;
  stateSize = alignUp(stateSize + bytes);
  return at;
}

LogicalResult LibraryEmitter::bind(OpResult v, llvm::raw_ostream &body) {
  Operation *op = v.getOwner();
  if (ampc::isViewResult(op, v.getResultNumber())) {
    Value in = op->getOperand(0);
    auto it = stateOffsets.find(in);
    if (int64_t offset = ampc::viewOffset(op)) {
      // A range of the operand's buffer (ampc.subview): its own pointer.
      if (it == stateOffsets.end())
        return op->emitError("views a value with no buffer");
      bindStorage(v, "v",
                  it->second + offset * storageSize(elementOf(in)), body);
      return success();
    }
    names[v] = name(in);
    if (it != stateOffsets.end())
      stateOffsets[v] = it->second;
    return success();
  }
  if (std::optional<int64_t> slot = inPlaceOffset(v)) {
    bindStorage(v, "v", *slot, body);
    return success();
  }
  std::optional<int64_t> offset = ampc::planOffset(v);
  if (!offset)
    return op->emitError() << "result " << v.getResultNumber()
                           << " has no buffer: the module was not planned "
                              "(ampc-plan-memory)";
  bindStorage(v, "v", arenaBase + *offset, body);
  return success();
}

void LibraryEmitter::bindStorage(Value v, StringRef prefix, int64_t offset,
                                 llvm::raw_ostream &body) {
  std::string n = prefix.str() + std::to_string(counter++);
  names[v] = n;
  stateOffsets[v] = offset;
  StringRef type = storageType(elementOf(v));
  declarePointer(n,
                 "  " + type + " *" + n + " = reinterpret_cast<" + type +
                     " *>(state + " + std::to_string(offset) + ");",
                 body);
}

bool LibraryEmitter::constantInState(Operation *constant) const {
  return tensorOf(constant->getResult(0)).getNumElements() >
         kInlineConstantElements;
}

bool LibraryEmitter::bindStorageOp(Operation *op, llvm::raw_ostream &body) {
  if (auto c = dyn_cast<ampc::ConstantOp>(op)) {
    if (!constantInState(op))
      return false;
    bindStorage(c.getResult(), "c", constantOffsets.lookup(op), body);
    return true;
  }
  if (auto load = dyn_cast<ampc::LoadParameterOp>(op)) {
    bindStorage(load.getResult(), "p",
                parameterOffsets.lookup(load.getParameter()), body);
    return true;
  }
  if (auto load = dyn_cast<ampc::LoadStateOp>(op)) {
    auto sharded = shardedStates.find(load.getState());
    if (sharded != shardedStates.end()) {
      // ZeRO-1: the rank's shard of the moment, outside the state block.
      std::string n = "s" + std::to_string(counter++);
      names[load.getResult()] = n;
      Type t = elementOf(load.getResult());
      declarePointer(n,
                     "  " + storageType(t) + " *" + n + " = " +
                         shardedMoments(sharded->second.kind, t) + ";",
                     body);
      return true;
    }
    bindStorage(load.getResult(), "s", parameterOffsets.lookup(load.getState()),
                body);
    return true;
  }
  if (auto load = dyn_cast<ampc::LoadPackedStateOp>(op)) {
    // The states are laid out one after the other (layOutPacked).
    bindStorage(load.getResult(), "s",
                parameterOffsets.lookup(
                    cast<FlatSymbolRefAttr>(load.getStates()[0]).getValue()),
                body);
    return true;
  }
  return false;
}

LogicalResult LibraryEmitter::emitOp(Operation *op, llvm::raw_ostream &body) {
  if (isa<ampc::ConstantOp>(op) && !constantInState(op)) {
    emitConstant(op, body);
    return success();
  }
  if (bindStorageOp(op, body))
    return success();
  if (isa<ampc::StoreOp>(op)) {
    emitStore(op, body);
    return success();
  }
  for (OpResult r : op->getResults())
    if (failed(bind(r, body)))
      return failure();
  if (isa<ampc::UnscaleOp, ampc::ClipGradNormOp, ampc::OptimizerUpdateOp,
          ampc::UpdateScaleOp, ampc::AllReduceStartOp, ampc::AllReduceWaitOp>(
          op))
    return emitTrainingOp(op, body);
  if (ampc::isViewResult(op, 0))
    return success(); // same elements, same order, same buffer
  if (op->hasTrait<ampc::Elementwise>())
    return emitElementwise({op}, op->getOperands(), op->getOperands(),
                           op->getResults(), op->getResults(), body);
  if (auto fusion = dyn_cast<ampc::FusionOp>(op)) {
    SmallVector<Operation *> ops;
    Block &block = fusion.getBody().front();
    for (Operation &inner : block.without_terminator())
      ops.push_back(&inner);
    return emitElementwise(ops, fusion.getInputs(), block.getArguments(),
                           cast<ampc::YieldOp>(block.getTerminator()).getValues(),
                           fusion.getOutputs(), body);
  }
  return emitKernelOp(op, body);
}

LogicalResult LibraryEmitter::emitKernelOp(Operation *op,
                                           llvm::raw_ostream &body) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ampc::GemmOp, ampc::BatchedGemmOp>(
          [&](Operation *) { return emitMatmul(op, body); })
      .Case<ampc::ConvOp, ampc::ConvBackwardDataOp,
            ampc::ConvBackwardWeightOp>(
          [&](Operation *) { return emitConvolution(op, body); })
      .Case<ampc::TransposeOp, ampc::SliceOp, ampc::SliceGradOp,
            ampc::ConcatOp, ampc::GatherOp, ampc::GatherGradOp, ampc::ShapeOp,
            ampc::ScatterOp, ampc::TopKOp>(
          [&](Operation *) { return emitDataMovement(op, body); })
      .Case<ampc::SoftmaxOp, ampc::LogSoftmaxOp, ampc::LayerNormalizationOp,
            ampc::AddLayerNormOp, ampc::LayerNormGradOp>(
          [&](Operation *) { return emitNormalization(op, body); })
      .Case<ampc::ReduceSumOp, ampc::ReduceMeanOp, ampc::ReduceMaxOp,
            ampc::ReduceProdOp, ampc::GlobalAveragePoolOp,
            ampc::SoftmaxCrossEntropyLossOp,
            ampc::NegativeLogLikelihoodLossOp, ampc::NllLossGradOp>(
          [&](Operation *) { return emitReduction(op, body); })
      .Case<ampc::DropoutOp>([&](Operation *) { return emitDropout(op, body); })
      .Case<ampc::MaxPoolOp, ampc::AveragePoolOp, ampc::MaxPoolGradOp,
            ampc::AveragePoolGradOp, ampc::BatchNormalizationOp,
            ampc::BatchNormGradOp>(
          [&](Operation *) { return emitWindowOp(op, body); })
      .Case<ampc::AttentionOp, ampc::AttentionGradOp>(
          [&](Operation *) { return emitAttention(op, body); })
      .Default([&](Operation *) -> LogicalResult {
        return op->emitError()
               << "the " << targetName().upper() << " target cannot compile '"
               << op->getName() << "' yet" << unsupportedOpHint();
      });
}

void LibraryEmitter::layOut(StringRef symbol, RankedTensorType t,
                            ElementsAttr initial) {
  parameterOffsets[symbol] = stateSize;
  auto values = cast<DenseElementsAttr>(initial);
  blob.resize(stateSize, '\0');
  bool isFloat = isa<FloatType>(t.getElementType());
  size_t width = static_cast<size_t>(storageSize(t.getElementType()));
  auto element = [&](int64_t at) {
    APInt bits = isFloat ? values.getValues<APFloat>()[at].bitcastToAPInt()
                         : values.getValues<APInt>()[at];
    return bits.getZExtValue();
  };
  int64_t count = t.getNumElements();
  blob.reserve(blob.size() + static_cast<size_t>(count) * width);
  if (values.isSplat()) {
    uint64_t word = element(0);
    for (int64_t i = 0; i < count; ++i)
      blob.append(reinterpret_cast<const char *>(&word), width);
  } else if (!t.getElementType().isInteger(1) &&
             values.getRawData().size() == static_cast<size_t>(count) * width) {
    // Dense storage is already the little-endian storage format.
    blob.append(values.getRawData().data(), values.getRawData().size());
  } else {
    for (int64_t i = 0; i < count; ++i) {
      uint64_t word = element(i);
      blob.append(reinterpret_cast<const char *>(&word), width);
    }
  }
  stateSize =
      alignUp(stateSize + t.getNumElements() * storageSize(t.getElementType()));
}

int64_t LibraryEmitter::layOutConstant(Operation *constant) {
  auto op = cast<ampc::ConstantOp>(constant);
  auto t = cast<RankedTensorType>(op.getType());
  int64_t at = stateSize;
  layOut("", t, op.getValue());
  parameterOffsets.erase("");
  return at;
}

LogicalResult LibraryEmitter::emitFunction(func::FuncOp f,
                                           llvm::raw_string_ostream &body,
                                           emit::BodyLayout &bodyLayout) {
  bodyLayout = {};
  layout = &bodyLayout;
  llvm::scope_exit noLayout([&] { layout = nullptr; });
  names.clear();
  if (auto staging = f->getAttrOfType<DenseI64ArrayAttr>(ampc::kInputOffsetsAttr))
    inputOffsets = staging.asArrayRef();
  else
    inputOffsets = {};
  beginFunction(f);
  // Loads read the state in place, so a value read after a store to its
  // symbol would see the new value: the passes put every store after the
  // last read, and this checks it.
  llvm::DenseSet<StringAttr> stored;
  WalkResult order = f.walk([&](Operation *op) {
    for (Value v : op->getOperands())
      for (StringAttr symbol : ampc::storageSymbols(v))
        if (stored.contains(symbol)) {
          op->emitError() << "reads '" << symbol.getValue()
                          << "' after the step stored it";
          return WalkResult::interrupt();
        }
    if (auto store = dyn_cast<ampc::StoreOp>(op))
      stored.insert(store.getTargetAttr().getAttr());
    return WalkResult::advance();
  });
  if (order.wasInterrupted())
    return failure();
  for (auto [i, arg] : llvm::enumerate(f.getArguments()))
    emitArgument(i, arg, body);
  for (Operation &op : f.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands()))
        emitReturn(i, v, body);
      continue;
    }
    for (Type t : op.getResultTypes())
      if (!onnxDtype(cast<ShapedType>(t).getElementType()))
        return op.emitError() << "the " << targetName().upper()
                              << " target cannot store " << t;
    // The kernels keep a multi-index in 16 slots.
    for (Value v : llvm::concat<Value>(op.getOperands(), op.getResults()))
      if (auto t = dyn_cast<RankedTensorType>(v.getType()); t && t.getRank() > 16)
        return op.emitError() << "the " << targetName().upper()
                              << " target handles tensors of rank 16 at most, "
                                 "got "
                              << t;
    if (failed(emitOp(&op, body)))
      return failure();
    bodyLayout.opEnds.push_back(body.str().size());
  }
  return success();
}

LogicalResult LibraryEmitter::analyzeShards(func::FuncOp trainStep) {
  ampc::AllReduceStartOp start;
  trainStep.walk([&](ampc::AllReduceStartOp op) {
    if (op->hasAttr(ampc::kShardOptimizerAttr))
      start = op;
  });
  if (!start)
    return success();
  if (!shardsOptimizer())
    return start.emitError()
           << "the " << targetName().upper()
           << " target cannot compile --shard-optimizer yet (ZeRO-1 runs on "
              "the CPU target; docs/distributed.md)";
  // Each gradient's offset in the bucket, the flat concatenation.
  llvm::DenseMap<Value, int64_t> offsets;
  for (Value g : start.getGrads()) {
    offsets[g] = shardTotal;
    shardTotal += tensorOf(g).getNumElements();
  }
  for (auto update : trainStep.getOps<ampc::OptimizerUpdateOp>()) {
    // The update's gradient back through the clipping, the unscale and
    // the wait to the bucket's gradient.
    Value g = update.getGrad();
    while (!offsets.count(g)) {
      auto r = dyn_cast<OpResult>(g);
      Operation *def = r ? r.getOwner() : nullptr;
      unsigned i = r ? r.getResultNumber() : 0;
      if (auto u = dyn_cast_or_null<ampc::UnscaleOp>(def);
          u && i < u.getGrads().size())
        g = u.getGrads()[i];
      else if (auto c = dyn_cast_or_null<ampc::ClipGradNormOp>(def))
        g = c.getGrads()[i];
      else if (auto w = dyn_cast_or_null<ampc::AllReduceWaitOp>(def))
        g = w.getGrads()[i];
      else
        return update.emitError("--shard-optimizer: cannot find this "
                                "update's gradient in the sharded bucket");
    }
    int64_t offset = offsets.lookup(g);
    shardOffsets[update.getOperation()] = offset;
    lastUpdate = update.getOperation();
    for (auto [kind, m] : llvm::enumerate(update.getMoments())) {
      auto load = m.getDefiningOp<ampc::LoadStateOp>();
      if (!load)
        return update.emitError("--shard-optimizer: moment ")
               << kind << " is not read from its state";
      shardedStates[load.getState()] = {static_cast<int64_t>(kind), offset,
                                        tensorOf(m).getNumElements()};
      shardKinds = std::max<int64_t>(shardKinds, kind + 1);
    }
  }
  return success();
}

LogicalResult LibraryEmitter::emitParameterAccess(func::FuncOp trainStep) {
  // Parameter i lives at parameterOffsets, `bytes` long; gradient g of
  // @train_step (result 1 + g) belongs to the parameter its
  // ampc.gradient_of names.
  SmallVector<StringRef> params;
  std::string offsets, sizes;
  for (auto p : module.getOps<ampc::ParameterOp>()) {
    auto t = cast<RankedTensorType>(p.getType());
    params.push_back(p.getSymName());
    offsets += formatv("{0}ULL, ", parameterOffsets.lookup(p.getSymName()));
    sizes += formatv("{0}ULL, ",
                     t.getNumElements() * storageSize(t.getElementType()));
  }
  std::string gradientParameters;
  for (unsigned r = 1; r < trainStep.getNumResults(); ++r) {
    auto of = trainStep.getResultAttrOfType<FlatSymbolRefAttr>(
        r, ampc::kGradientOfAttr);
    auto *it = of ? llvm::find(params, of.getValue()) : params.end();
    if (it == params.end())
      return trainStep.emitError() << "result " << r
                                   << " names no parameter (ampc.gradient_of)";
    gradientParameters += std::to_string(it - params.begin()) + ", ";
    ++numGradients;
  }
  os << "static const uint64_t kParameterOffsets[] = {" << offsets << "0};\n"
     << "static const uint64_t kParameterBytes[] = {" << sizes << "0};\n"
     << "static const int32_t kGradientParameters[] = {" << gradientParameters
     << "0};\n"
        "static int32_t readParameter(void *raw, int32_t i, void *out) {\n"
        "  return copyOut(raw, kParameterOffsets[i], out, kParameterBytes[i]);\n"
        "}\n"
        "static int32_t writeParameter(void *raw, int32_t i, const void *in) {\n"
        "  if (int32_t code = copyIn(raw, kParameterOffsets[i], in, "
        "kParameterBytes[i])) return code;\n"
        "  return refreshCopies(raw, i);\n}\n\n";
  return success();
}

void LibraryEmitter::emitStateAccess() {
  // Parameters, then state that is not derived from a parameter.
  SmallVector<std::pair<StringRef, RankedTensorType>> tensors;
  for (auto p : module.getOps<ampc::ParameterOp>())
    tensors.push_back({p.getSymName(), cast<RankedTensorType>(p.getType())});
  int32_t numParameters = tensors.size();
  std::string buffers;
  std::optional<std::pair<StringRef, RankedTensorType>> batchRows;
  for (auto s : module.getOps<ampc::StateOp>())
    if (!s.getDerivedFromAttr()) {
      if (s.getSymName() == ampc::kBatchRows) {
        batchRows = {s.getSymName(), cast<RankedTensorType>(s.getType())};
        continue;
      }
      if (s->hasAttr(ampc::kBufferAttr))
        buffers += formatv("{0}, ", tensors.size()).str();
      tensors.push_back({s.getSymName(), cast<RankedTensorType>(s.getType())});
    }
  // The partial batch's row count last: the runtime keeps it out of the
  // checkpoint (ModelAbi.h, partial_batch_refusal).
  if (batchRows)
    tensors.push_back(*batchRows);
  std::string entries, offsets, sizes;
  for (auto [i, entry] : llvm::enumerate(tensors)) {
    auto [symbol, t] = entry;
    os << "static const int64_t state_shape" << i << "[] = "
       << list(t.getShape()) << ";\n";
    entries += formatv("  {{\"{0}\", {1}, {2}, state_shape{3}},\n",
                       cString(symbol), onnxDtype(t.getElementType()),
                       t.getRank(), i)
                   .str();
    offsets += formatv("{0}ULL, ", parameterOffsets.lookup(symbol));
    sizes += formatv("{0}ULL, ",
                     t.getNumElements() * storageSize(t.getElementType()));
  }
  // ZeRO-1: a sharded moment's kind (-1: not sharded) and offset in the
  // concatenation; readSharded and writeSharded are the target's.
  std::string kinds, flatOffsets;
  for (auto [symbol, t] : tensors) {
    auto sharded = shardedStates.find(symbol);
    bool isSharded = sharded != shardedStates.end();
    kinds += formatv("{0}, ", isSharded ? sharded->second.kind : -1).str();
    flatOffsets +=
        formatv("{0}LL, ", isSharded ? sharded->second.offset : 0).str();
  }
  os << "static const ampc_abi_tensor stateTensors[] = {\n"
     << entries << "  {\"\", 0, 0, nullptr},\n};\n"
     << "static const int32_t kNumStateTensors = " << tensors.size() << ";\n"
     << "// The model's buffers (BatchNorm statistics and counters) among "
        "them.\n"
     << "static const int32_t kBufferStates[] = {" << buffers << "-1};\n"
     << "static const int32_t kNumBuffers = "
     << llvm::count(buffers, ',') << ";\n"
     << "static const uint64_t kStateOffsets[] = {" << offsets << "0};\n"
     << "static const uint64_t kStateBytes[] = {" << sizes << "0};\n"
     << (shardedStates.empty()
             ? std::string()
             : "static const int32_t kShardKinds[] = {" + kinds +
                   "-1};\nstatic const int64_t kShardOffsets[] = {" +
                   flatOffsets + "0};\n")
     << "static int32_t readState(void *raw, int32_t i, void *out) {\n";
  if (!shardedStates.empty())
    os << "  if (kShardKinds[i] >= 0)\n    return readSharded(raw, "
          "kShardKinds[i], kShardOffsets[i], out, kStateBytes[i]);\n";
  os << "  return copyOut(raw, kStateOffsets[i], out, kStateBytes[i]);\n}\n"
        "static int32_t writeState(void *raw, int32_t i, const void *in) {\n";
  if (!shardedStates.empty())
    os << "  if (kShardKinds[i] >= 0)\n    return writeSharded(raw, "
          "kShardKinds[i], kShardOffsets[i], in, kStateBytes[i]);\n";
  os << "  if (int32_t code = copyIn(raw, kStateOffsets[i], in, "
        "kStateBytes[i])) return code;\n"
     << "  return i < " << numParameters
     << " ? refreshCopies(raw, i) : 0;\n}\n\n";
}

void LibraryEmitter::emitCopyTable() {
  llvm::StringMap<int32_t> parameterIndex;
  for (auto p : module.getOps<ampc::ParameterOp>())
    parameterIndex[p.getSymName()] = parameterIndex.size();
  std::string entries;
  for (auto s : module.getOps<ampc::StateOp>()) {
    auto from = s.getDerivedFromAttr();
    if (!from)
      continue;
    auto t = cast<RankedTensorType>(s.getType());
    // A channels-last copy (M, k..., C) of a master (M, C, k...).
    int64_t channels = 0, spatial = 0;
    if (s.getChannelsLast())
      std::tie(channels, spatial) = ampc::channelsLastLayout(t.getShape());
    entries += formatv("  {{{0}, {1}ULL, {2}ULL, {3}LL, {4}, {5}LL, {6}LL},\n",
                       parameterIndex.lookup(from.getValue()),
                       parameterOffsets.lookup(from.getValue()),
                       parameterOffsets.lookup(s.getSymName()),
                       t.getNumElements(), t.getElementType().isBF16(),
                       channels, spatial)
                   .str();
  }
  os << "// The low-precision weight copies: parameter, FP32 source and copy "
        "offsets, count, bf16, channels-last channels and spatial size.\n"
        "static const ampc::WeightCopy kCopies[] = {\n"
     << entries << "  {-1, 0, 0, 0, false, 0, 0},\n};\n"
     << "static const int32_t kNumCopies = "
     << std::to_string(std::count(entries.begin(), entries.end(), '\n'))
     << ";\n\n";
}

bool LibraryEmitter::isTraining(func::FuncOp trainStep) const {
  return trainStep && module->hasAttr(ampc::kOptimizerAttr);
}

void LibraryEmitter::emitDescriptor(func::FuncOp forward,
                                    func::FuncOp trainStep, bool hasLastError,
                                    bool hasRelease) {
  auto tensors = [&](StringRef kind, auto types, auto nameOf) {
    std::string entries;
    unsigned i = 0;
    for (Type type : types) {
      auto t = cast<RankedTensorType>(type);
      os << "static const int64_t " << kind << "_shape" << i << "[] = "
         << list(t.getShape()) << ";\n";
      entries += formatv("  {{\"{0}\", {1}, {2}, {3}_shape{4}},\n",
                         cString(nameOf(i)), onnxDtype(t.getElementType()),
                         t.getRank(), kind, i)
                     .str();
      ++i;
    }
    if (entries.empty())
      entries = "  {\"\", 0, 0, nullptr},\n";
    os << "static const ampc_abi_tensor " << kind << "s[] = {\n" << entries << "};\n";
  };
  tensors("input", forward.getArgumentTypes(), [&](unsigned i) {
    auto n = forward.getArgAttrOfType<StringAttr>(i, ampc::kNameAttr);
    return n ? n.str() : "input" + std::to_string(i);
  });
  tensors("output", forward.getResultTypes(), [&](unsigned i) {
    auto n = forward.getResultAttrOfType<StringAttr>(i, ampc::kNameAttr);
    return n ? n.str() : "output" + std::to_string(i);
  });
  SmallVector<Type> paramTypes;
  SmallVector<std::string> paramNames;
  for (auto p : module.getOps<ampc::ParameterOp>()) {
    paramTypes.push_back(p.getType());
    paramNames.push_back(p.getSymName().str());
  }
  tensors("parameter", paramTypes, [&](unsigned i) { return paramNames[i]; });
  // The training fields: state, the step, its description, the labels and
  // the embedded ONNX model.
  bool training = isTraining(trainStep);
  auto quoted = [](StringRef s) { return "\"" + cString(s) + "\""; };
  auto hyperparameters =
      module->getAttrOfType<StringAttr>(ampc::kHyperparametersAttr);
  auto optimizer = module->getAttrOfType<ampc::OptimizerKindAttr>(
      ampc::kOptimizerAttr);
  auto lossScaling = module->getAttrOfType<ampc::LossScalingModeAttr>(
      ampc::kLossScalingAttr);
  int32_t numLabels = 0;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    numLabels += forward.getArgAttr(i, ampc::kLabelAttr) != nullptr;
  std::string onnxName = symbol("ampc_onnx_model");
  bool hasOnnx = !options.onnxFile.empty() || !options.onnxData.empty();
  if (options.onnxFile.empty() && !options.onnxData.empty())
    emitByteArray(os, onnxName, options.onnxData);
  else if (!options.onnxFile.empty()) {
    os << externBlob(onnxName);
    dataSection += incbinBlob(onnxName, options.onnxFile);
  }
  // With the data in files, what varies with it without changing the code
  // (the ONNX model's size, the hyperparameters' text) is data too.
  bool separateData = !options.parameterFile.empty();
  std::string onnxSize = formatv("{0}ULL", options.onnxSize).str();
  if (hasOnnx && separateData) {
    std::string sizeName = symbol("ampc_onnx_model_size");
    os << "extern \"C\" const unsigned long long " << sizeName << ";\n";
    dataSection += "extern \"C\" const unsigned long long " + sizeName +
                   " = " + onnxSize + ";\n";
    onnxSize = sizeName;
  }
  std::string onnx = !hasOnnx ? std::string("nullptr, 0")
                              : formatv("{0}, {1}", onnxName, onnxSize).str();
  std::string hyperText =
      quoted(hyperparameters ? hyperparameters.getValue() : "");
  if (training && separateData) {
    std::string name = symbol("ampc_hyperparameters");
    os << "extern \"C\" const char " << name << "[];\n";
    dataSection +=
        "extern \"C\" const char " + name + "[] = " + hyperText + ";\n";
    hyperText = name;
  }
  // "" when the step trains a partial batch (it reads ampc.batch_rows),
  // otherwise why not.
  std::string partialRefusal = training ? "\"\"" : "nullptr";
  if (training && !module.lookupSymbol(ampc::kBatchRows)) {
    auto why = module->getAttrOfType<StringAttr>(ampc::kPartialBatchesAttr);
    partialRefusal = quoted(why && !why.getValue().empty()
                                ? why.getValue()
                                : StringRef("the library was compiled before "
                                            "partial batches, or without a "
                                            "loss ampc attached"));
  }
  std::string trainingFields =
      training ? formatv("kNumStateTensors, stateTensors, readState, "
                         "writeState, trainStep, {0}, {1}, {2}, {3}, {4}",
                         quoted(optimizer ? stringifyEnum(optimizer.getValue())
                                          : ""),
                         hyperText,
                         quoted(lossScaling
                                    ? stringifyEnum(lossScaling.getValue())
                                    : ""),
                         numLabels, onnx)
                     .str()
               : formatv("0, nullptr, nullptr, nullptr, nullptr, nullptr, "
                         "nullptr, nullptr, {0}, {1}",
                         numLabels, onnx)
                     .str();
  os << formatv(R"(
static const ampc_model_abi kModel = {
  sizeof(ampc_model_abi), AMPC_ABI_VERSION,
  "{0}", "{10}", "{1}", "{8}",
  {2}, inputs, {3}, outputs, {4}, parameters,
  {5}, init, infer, {6}, {11},
  {7},
  {9},
  {12},
  {14},
  {15},
  {16},{17}
};

extern "C" AMPC_MODEL_EXPORT const ampc_model_abi *{13}(void) {{
  return &kModel;
}
)",
                cString(options.modelName), options.precision,
                forward.getNumArguments(), forward.getNumResults(),
                paramTypes.size(), hostStateSize(),
                hasLastError ? "lastError" : "nullptr",
                trainStep ? formatv("readParameter, writeParameter, {0}, "
                                    "kGradientParameters, {1}",
                                    numGradients,
                                    training ? "nullptr" : "gradients")
                                .str()
                          : std::string("nullptr, nullptr, 0, nullptr, nullptr"),
                trainStep ? "train" : "infer", trainingFields, targetName(),
                hasRelease ? "release" : "nullptr", synchronizeFunction(),
                symbol("ampc_model_entry"),
                training ? "kNumBuffers, kBufferStates" : "0, nullptr",
                partialRefusal, deviceFunctions(training),
                // Appended only where set: the descriptors of libraries
                // without data parallelism read as before.
                allReduceBuckets ? formatv("\n  {0}, \"{1}\",",
                                           allReduceBuckets, allReduceLayout)
                                       .str()
                                 : std::string());
  // The data after an empty line (the text form's kDataMarker follows it).
  if (!dataSection.empty())
    os << "\n";
}

LogicalResult LibraryEmitter::run() {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError() << "the " << targetName().upper()
                              << " target needs a func @forward";
  auto trainStep = module.lookupSymbol<func::FuncOp>("train_step");

  // Parameters first in the state, in their storage format; `init` copies
  // them from the embedded blob, which has the same layout.
  for (auto p : module.getOps<ampc::ParameterOp>())
    layOut(p.getSymName(), cast<RankedTensorType>(p.getType()),
           p.getInitialValue());
  // Then the training state that starts non-zero (learning rate, scale),
  // then every constant the target keeps there (constantInState): the blob
  // ends here.
  auto startsAtZero = [](ampc::StateOp s) {
    // Weight copies are written by `init`; moments and counters start at 0.
    if (s.getDerivedFromAttr())
      return true;
    auto values = cast<DenseElementsAttr>(s.getInitialValue());
    return values.isSplat() &&
           (isa<FloatType>(values.getElementType())
                ? values.getSplatValue<APFloat>().isPosZero()
                : values.getSplatValue<APInt>().isZero());
  };
  for (auto s : module.getOps<ampc::StateOp>())
    if (!startsAtZero(s))
      layOut(s.getSymName(), cast<RankedTensorType>(s.getType()),
             s.getInitialValue());
  SmallVector<ampc::ConstantOp> splats;
  for (func::FuncOp f : {forward, trainStep})
    if (f)
      f.walk([&](ampc::ConstantOp c) {
        if (!constantInState(c))
          return;
        if (cast<DenseElementsAttr>(c.getValue()).isSplat())
          splats.push_back(c);
        else
          constantOffsets[c] = layOutConstant(c);
      });
  blobBytes = stateSize;
  blob.resize(blobBytes, '\0');
  // The state that starts at zero (optimizer moments, counters, weight
  // copies) is not in the blob: the runtime hands out a zeroed state block
  // (ModelAbi.h) and the CUDA target zeroes its arena.
  // States an ampc.load_packed_state reads as one tensor are laid out
  // together, in its order, with no padding between them.
  llvm::StringMap<ArrayAttr> packing;
  for (func::FuncOp f : {forward, trainStep}) {
    if (!f)
      continue;
    WalkResult packed = f.walk([&](ampc::LoadPackedStateOp load) {
      for (Attribute a : load.getStates()) {
        StringRef symbol = cast<FlatSymbolRefAttr>(a).getValue();
        auto state = module.lookupSymbol<ampc::StateOp>(symbol);
        auto [it, inserted] = packing.try_emplace(symbol, load.getStates());
        if (!state || !startsAtZero(state) ||
            (!inserted && it->second != load.getStates())) {
          load.emitError() << "cannot lay out state '" << symbol
                           << "' packed: it must be a state that starts at "
                              "zero, in one packing";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (packed.wasInterrupted())
      return failure();
  }
  auto bytesOf = [](ampc::StateOp s) {
    auto t = cast<RankedTensorType>(s.getType());
    return t.getNumElements() * storageSize(t.getElementType());
  };
  if (trainStep && failed(analyzeShards(trainStep)))
    return failure();
  for (auto s : module.getOps<ampc::StateOp>()) {
    if (!startsAtZero(s) || parameterOffsets.count(s.getSymName()) ||
        shardedStates.count(s.getSymName()))
      continue;
    if (ArrayAttr group = packing.lookup(s.getSymName())) {
      for (Attribute a : group) {
        StringRef member = cast<FlatSymbolRefAttr>(a).getValue();
        parameterOffsets[member] = stateSize;
        stateSize += bytesOf(module.lookupSymbol<ampc::StateOp>(member));
      }
      stateSize = alignUp(stateSize);
      continue;
    }
    parameterOffsets[s.getSymName()] = stateSize;
    stateSize = alignUp(stateSize + bytesOf(s));
  }
  // Splat constants after it: `init` fills them (emitted by each target from
  // splatFills), so neither the blob nor the source grows with them.
  for (ampc::ConstantOp c : splats) {
    auto t = cast<RankedTensorType>(c.getType());
    auto values = cast<DenseElementsAttr>(c.getValue());
    APInt bits = isa<FloatType>(t.getElementType())
                     ? values.getSplatValue<APFloat>().bitcastToAPInt()
                     : values.getSplatValue<APInt>();
    int64_t width = storageSize(t.getElementType());
    constantOffsets[c] = stateSize;
    splatFills.push_back(
        {stateSize, t.getNumElements(), width, bits.getZExtValue()});
    stateSize = alignUp(stateSize + t.getNumElements() * width);
  }

  // Every function runs in the same arena (the runtime never runs two
  // functions on one state at once), sized for the largest plan.
  int64_t arenaBytes = 0;
  for (func::FuncOp f : {forward, trainStep}) {
    if (!f)
      continue;
    auto arena = f->getAttrOfType<IntegerAttr>(ampc::kArenaBytesAttr);
    if (!arena)
      return f.emitError() << "has no memory plan (ampc-plan-memory)";
    arenaBytes = std::max<int64_t>(arenaBytes, arena.getInt());
  }
  // Data parallel: the communicator `init` is given, for the step's
  // all-reduces (ModelAbi.h, ampc_abi_comm).
  if (trainStep) {
    std::map<int64_t, std::string> buckets;
    trainStep.walk([&](ampc::AllReduceStartOp op) {
      ++allReduceBuckets;
      auto packed = cast<ShapedType>(op.getPacked().getType());
      buckets[op.getBucket()] = formatv("{0}:{1}",
                                        onnxDtype(packed.getElementType()),
                                        packed.getNumElements());
    });
    for (const auto &[bucket, text] : buckets)
      allReduceLayout += (allReduceLayout.empty() ? "" : ";") + text;
    // --sync-batchnorm's all-reduces: ranks with and without it differ.
    trainStep.walk([&](Operation *op) {
      if (auto request = op->getAttrOfType<IntegerAttr>(ampc::kSyncRequestAttr))
        allReduceLayout += formatv(";sync_batchnorm:{0}", request.getInt());
    });
    // ZeRO-1: the runtime reads it (a checkpoint is then a collective).
    if (shardSlot >= 0 || !shardOffsets.empty())
      allReduceLayout = "shard;" + allReduceLayout;
  }
  if (allReduceBuckets)
    commSlot = reserve(8);
  if (!shardOffsets.empty())
    shardSlot = reserve(8);
  arenaBase = reserve(arenaBytes);
  // The error slot is at one offset of the arena in every function: a
  // target reads it after any of them.
  for (func::FuncOp f : {forward, trainStep}) {
    if (!f)
      continue;
    if (failed(checkPlan(f)))
      return failure();
    int64_t slot = f->getAttrOfType<IntegerAttr>(ampc::kErrorSlotAttr).getInt();
    if (f != forward && slot != errorSlotOffset)
      return f.emitError() << "has its error slot at arena offset " << slot
                           << ", @forward at " << errorSlotOffset
                           << " (the plan puts it at one offset)";
    errorSlotOffset = slot;
  }

  std::string inferText, stepText;
  llvm::raw_string_ostream inferBody(inferText), stepBody(stepText);
  if (failed(emitFunction(forward, inferBody, inferLayout)))
    return failure();
  if (trainStep) {
    if (trainStep.getArgumentTypes() != forward.getArgumentTypes())
      return trainStep.emitError()
             << "must take the arguments of @forward (the library has one "
                "list of inputs)";
    if (failed(emitFunction(trainStep, stepBody, stepLayout)))
      return failure();
  }
  if (failed(emitLibrary(forward, trainStep, inferText, stepText)))
    return failure();
  // The code cut where emitLibrary started pieces, the data apart.
  StringRef all(code);
  size_t begin = 0;
  for (auto [i, start] : llvm::enumerate(pieceStarts)) {
    (i == 0 ? artifact.shared : artifact.pieces.emplace_back()) =
        all.slice(begin, start).str();
    begin = start;
  }
  artifact.pieces.push_back(all.drop_front(begin).str());
  if (!dataSection.empty())
    artifact.data = "\n" + dataSection;
  artifact.parameterFile = options.parameterFile;
  artifact.onnxFile = options.onnxFile;
  return success();
}

} // namespace ampc
