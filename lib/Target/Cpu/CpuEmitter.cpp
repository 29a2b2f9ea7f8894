//===- CpuEmitter.cpp - C++ model libraries for the CPU -------------------===//
//
// Walks @forward in its kernel-level form (after ampc-fuse and
// ampc-plan-memory) and writes, for each op, a call to the kernels of
// include/ampc/Runtime/CpuKernels.h or one loop nest (an ampc.fusion or a
// lone elementwise op). The instance state holds the parameters, which
// `init` copies from a blob the library embeds, then the arena of the
// memory plan, where every intermediate lives at its planned offset; views
// share their operand's buffer.
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/CpuTarget.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Target/ScalarExpression.h"
#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Transforms/Training.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

using namespace mlir;
using llvm::formatv;
using llvm::StringRef;

namespace {

constexpr int64_t kAlign = 64;

int64_t alignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// ONNX TensorProto data type codes, as the model ABI uses them.
int onnxDtype(Type t) {
  if (t.isF32()) return 1;
  if (t.isF16()) return 10;
  if (t.isBF16()) return 16;
  if (t.isF64()) return 11;
  if (t.isInteger(1)) return 9;
  if (t.isInteger(8)) return t.isUnsignedInteger() ? 2 : 3;
  if (t.isInteger(32)) return 6;
  if (t.isInteger(64)) return 7;
  return 0;
}

/// C++ type a buffer of `t` holds.
StringRef storageType(Type t) {
  if (t.isF32()) return "float";
  if (t.isF64()) return "double";
  if (t.isF16() || t.isBF16()) return "uint16_t";
  if (t.isInteger(1)) return "uint8_t";
  if (t.isInteger(8)) return t.isUnsignedInteger() ? "uint8_t" : "int8_t";
  if (t.isInteger(32)) return "int32_t";
  if (t.isInteger(64)) return "int64_t";
  return "";
}

/// C++ type arithmetic on `t` uses.
StringRef computeType(Type t) {
  if (t.isF16() || t.isBF16() || t.isF32()) return "float";
  if (t.isF64()) return "double";
  if (t.isInteger(1)) return "bool";
  return storageType(t);
}

int64_t storageSize(Type t) {
  if (t.isF64() || t.isInteger(64)) return 8;
  if (t.isF32() || t.isInteger(32)) return 4;
  if (t.isF16() || t.isBF16()) return 2;
  return 1;
}

std::string load(Type t, const std::string &e) {
  if (t.isF16()) return "ampc::cpu::loadF16(" + e + ")";
  if (t.isBF16()) return "ampc::cpu::loadBf16(" + e + ")";
  if (t.isInteger(1)) return "(" + e + " != 0)";
  return e;
}

std::string store(Type t, const std::string &e) {
  if (t.isF16()) return "ampc::cpu::storeF16(" + e + ")";
  if (t.isBF16()) return "ampc::cpu::storeBf16(" + e + ")";
  return "static_cast<" + storageType(t).str() + ">(" + e + ")";
}

/// A generic lambda loading one stored element of `t` for the kernels.
std::string loadFn(Type t) { return "[](auto v) { return " + load(t, "v") + "; }"; }
/// A generic lambda rounding a computed value to the storage of `t`.
std::string storeFn(Type t) {
  return "[](auto v) { return " + store(t, "v") + "; }";
}

/// What the kernels accumulate and compute in for data of `t`: float for
/// 16- and 32-bit floats, double for f64, integers as themselves.
StringRef accumulatorType(Type t) {
  if (isa<FloatType>(t))
    return t.isF64() ? "double" : "float";
  return storageType(t);
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

/// Row-major strides of `shape`.
SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// The exact value of a float attribute as a C++ double literal.
std::string exactLiteral(const APFloat &value) {
  return formatv("{0:e17}", value.convertToDouble()).str();
}

/// "node 'NAME' (OpType)" for the ONNX node an op came from (the importer's
/// NameLoc around a FusedLoc whose metadata is the op type), for run-time
/// messages; the ampc op name where the location says nothing.
std::string nodeDescription(Operation *op) {
  std::string node, opType;
  Location loc = op->getLoc();
  if (auto name = dyn_cast<NameLoc>(loc)) {
    node = name.getName().str();
    loc = name.getChildLoc();
  }
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (auto type = dyn_cast_or_null<StringAttr>(fused.getMetadata()))
      opType = type.str();
  std::string what = opType.empty() ? op->getName().getStringRef().str() : opType;
  return node.empty() ? what : "node '" + node + "' (" + what + ")";
}

/// `text` as the inside of a C string literal.
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

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }
Type elementOf(Value v) { return tensorOf(v).getElementType(); }

std::string list(ArrayRef<int64_t> values) {
  if (values.empty())
    return "{0}";
  return "{" + llvm::join(llvm::map_range(values, [](int64_t v) {
                            return std::to_string(v) + "LL";
                          }),
                          ", ") +
         "}";
}

/// Row-major strides of `shape`, placed at the end of a rank-`rank` index
/// space, 0 along dimensions of size 1 that broadcast to `out`.
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> shape,
                                      ArrayRef<int64_t> out) {
  SmallVector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (int64_t i = shape.size() - 1, o = out.size() - 1; i >= 0; --i, --o) {
    strides[o] = shape[i] == 1 && out[o] != 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

class Emitter {
public:
  Emitter(ModuleOp module, const ampc::CpuLibraryOptions &options,
          llvm::raw_ostream &os, std::string &blob)
      : module(module), options(options), os(os), blob(blob) {}

  LogicalResult run();

private:
  std::string name(Value v) { return names.lookup(v); }
  /// Names the buffer of result `v`: its planned place in the arena, or
  /// its operand's buffer for a view.
  LogicalResult bind(OpResult v, llvm::raw_ostream &body);
  LogicalResult emitOp(Operation *op, llvm::raw_ostream &body);
  /// One loop over the elements of `output`: `ops` (elementwise, in order,
  /// the last one computing `output`) evaluated per element from `inputs`,
  /// whose values the body sees as `arguments` (the fusion's block
  /// arguments; the inputs themselves for a lone op).
  LogicalResult emitLoopNest(ArrayRef<Operation *> ops, ValueRange inputs,
                             ValueRange arguments, Value output,
                             llvm::raw_ostream &body);
  void emitStrided(Value input, Value output, ArrayRef<int64_t> strides,
                   llvm::raw_ostream &body, int64_t base = 0);
  /// A `const float *w_NAME` holding `v` in FP32 (a widened copy for
  /// f16/bf16).
  std::string widenFloat(Value v);
  /// `if (!(condition)) return <failure naming the node>;`
  std::string failUnless(Operation *op, const std::string &condition,
                         StringRef what);
  LogicalResult emitMatmul(Operation *op, llvm::raw_ostream &body);
  LogicalResult emitConv(ampc::ConvOp op, llvm::raw_ostream &body);
  LogicalResult emitWindow(Operation *op, ArrayRef<int64_t> kernel,
                           std::optional<ArrayRef<int64_t>> strides,
                           std::optional<ArrayRef<int64_t>> pads,
                           std::optional<ArrayRef<int64_t>> dilations,
                           llvm::raw_ostream &body);
  /// The same for a window whose forward input and output shapes (N, C,
  /// spatial...) are given: the backward ops read the forward's geometry.
  LogicalResult emitWindow(Operation *op, ArrayRef<int64_t> inShape,
                           ArrayRef<int64_t> outShape, ArrayRef<int64_t> kernel,
                           std::optional<ArrayRef<int64_t>> strides,
                           std::optional<ArrayRef<int64_t>> pads,
                           std::optional<ArrayRef<int64_t>> dilations,
                           llvm::raw_ostream &body);
  /// The gradient ops of AMPCGradOps.td that are not elementwise.
  LogicalResult emitGradientOp(Operation *op, llvm::raw_ostream &body);
  void emitSlice(ampc::SliceOp op, llvm::raw_ostream &body);
  void emitReduce(Operation *op, StringRef kind, llvm::raw_ostream &body);
  void emitLayerNorm(ampc::LayerNormalizationOp op, llvm::raw_ostream &body);
  void emitBatchNorm(ampc::BatchNormalizationOp op, llvm::raw_ostream &body);
  void emitLoss(Operation *op, Value scores, Value labels, Value weights,
                StringRef reduction, std::optional<int64_t> ignoreIndex,
                Value logProb, llvm::raw_ostream &body);
  void emitConstant(ampc::ConstantOp op, llvm::raw_ostream &body);
  /// The body of `f` as a library function over `inputs` and `outputs`.
  LogicalResult emitFunction(func::FuncOp f, llvm::raw_ostream &body);
  /// Parameter read/write functions and the gradient-to-parameter table.
  LogicalResult emitParameterAccess(func::FuncOp trainStep);
  void emitDescriptor(func::FuncOp forward, func::FuncOp trainStep);
  /// The training ops of AMPCTrainOps.td.
  LogicalResult emitTrainingOp(Operation *op, llvm::raw_ostream &body);
  /// `refreshCopies(state, p)`: recomputes the low-precision copies of
  /// parameter p (all when p < 0) from the master weights.
  void emitRefreshCopies();
  /// The state tensors a checkpoint holds, read_state and write_state.
  void emitStateAccess();
  /// Lays out `symbol` (a parameter or state) in the state and appends its
  /// initial value to the blob.
  void layOut(StringRef symbol, RankedTensorType type, ElementsAttr initial);

  ModuleOp module;
  const ampc::CpuLibraryOptions &options;
  llvm::raw_ostream &os;
  std::string &blob;
  llvm::DenseMap<Value, std::string> names;
  llvm::StringMap<int64_t> parameterOffsets;
  int64_t stateSize = 0;
  /// Offset in the state of the memory plan's arena.
  int64_t arenaBase = 0;
  unsigned counter = 0;
  std::string constants;
  /// Offset in the state of the run-time error message slot, -1 while no
  /// op can fail at run time.
  int64_t errorSlot = -1;
  int32_t numGradients = 0;
};

LogicalResult Emitter::bind(OpResult v, llvm::raw_ostream &body) {
  Operation *op = v.getOwner();
  if (ampc::isViewResult(op, v.getResultNumber())) {
    names[v] = name(op->getOperand(0));
    return success();
  }
  std::optional<int64_t> offset = ampc::planOffset(v);
  if (!offset)
    return op->emitError() << "result " << v.getResultNumber()
                           << " has no buffer: the module was not planned "
                              "(ampc-plan-memory)";
  std::string n = "v" + std::to_string(counter++);
  names[v] = n;
  StringRef type = storageType(elementOf(v));
  body << "  " << type << " *" << n << " = reinterpret_cast<" << type
       << " *>(state + " << arenaBase + *offset << ");\n";
  return success();
}

void Emitter::emitStrided(Value input, Value output, ArrayRef<int64_t> strides,
                          llvm::raw_ostream &body, int64_t base) {
  RankedTensorType out = tensorOf(output);
  body << formatv("  {{ static const int64_t dims[] = {0}; static const int64_t "
                  "s0[] = {1}; const int64_t *strides[] = {{s0};\n",
                  list(out.getShape()), list(strides));
  body << formatv("    ampc::cpu::forEach<1>({0}, dims, strides, [&](int64_t o, "
                  "int64_t a) {{ {1}[o] = {2}[{3}LL + a]; }); }\n",
                  out.getRank(), name(output), name(input), base);
}

LogicalResult Emitter::emitLoopNest(ArrayRef<Operation *> ops,
                                    ValueRange inputs, ValueRange arguments,
                                    Value output, llvm::raw_ostream &body) {
  RankedTensorType out = tensorOf(output);
  body << "  { static const int64_t dims[] = " << list(out.getShape()) << ";\n";
  std::string strideNames;
  for (auto [i, in] : llvm::enumerate(inputs)) {
    body << "    static const int64_t s" << i << "[] = "
         << list(broadcastStrides(tensorOf(in).getShape(), out.getShape()))
         << ";\n";
    strideNames += (i ? ", s" : "s") + std::to_string(i);
  }
  body << "    const int64_t *strides[] = {" << strideNames << "};\n";
  std::string params = "int64_t o";
  for (size_t i = 0; i < inputs.size(); ++i)
    params += ", int64_t i" + std::to_string(i);
  body << "    ampc::cpu::forEach<" << inputs.size() << ">(" << out.getRank()
       << ", dims, strides, [&](" << params << ") {\n";
  // Each operand element is loaded once; each intermediate is a local,
  // rounded to its dtype as if it had been stored.
  llvm::DenseMap<Value, std::string> scalars;
  for (auto [i, in] : llvm::enumerate(inputs)) {
    std::string x = "x" + std::to_string(i);
    scalars[arguments[i]] = x;
    body << "      const " << computeType(elementOf(in)) << " " << x << " = "
         << load(elementOf(in), name(in) + "[i" + std::to_string(i) + "]")
         << ";\n";
  }
  for (auto [i, op] : llvm::enumerate(ops)) {
    SmallVector<std::string> operands;
    for (Value v : op->getOperands())
      operands.push_back(scalars.lookup(v));
    Type t = elementOf(op->getResult(0));
    FailureOr<std::string> e =
        ampc::scalarExpression(op, operands, computeType(t));
    if (failed(e))
      return failure();
    if (i + 1 == ops.size()) {
      body << "      " << name(output) << "[o] = " << store(t, *e) << ";\n";
      break;
    }
    std::string tmp = "t" + std::to_string(i);
    scalars[op->getResult(0)] = tmp;
    body << "      const " << computeType(t) << " " << tmp << " = "
         << load(t, store(t, *e)) << ";\n";
  }
  body << "    }); }\n";
  return success();
}

std::string Emitter::widenFloat(Value v) {
  Type t = elementOf(v);
  std::string n = name(v);
  if (t.isF32() || t.isF64())
    return formatv("const {0} *w_{1} = {1};\n", storageType(t), n).str();
  return formatv("std::vector<float> wv_{0} = ampc::cpu::widen({0}, {1}LL, "
                 "{2}); const float *w_{0} = wv_{0}.data();\n",
                 n, tensorOf(v).getNumElements(),
                 t.isF16() ? "ampc::cpu::loadF16" : "ampc::cpu::loadBf16")
      .str();
}

std::string Emitter::failUnless(Operation *op, const std::string &condition,
                                StringRef what) {
  if (errorSlot < 0) {
    errorSlot = stateSize;
    stateSize = alignUp(stateSize + 8);
  }
  return formatv("  if (!({0})) return ampc::cpu::fail(state + {1}, \"{2}: "
                 "{3}\");\n",
                 condition, errorSlot, cString(nodeDescription(op)), what)
      .str();
}

LogicalResult Emitter::emitMatmul(Operation *op, llvm::raw_ostream &body) {
  // Gemm: alpha * op(A) op(B) + beta * C; MatMul: batched A B with numpy
  // broadcasting of the batch dimensions. Both widen 16-bit inputs to FP32,
  // multiply with FP32 accumulation, and round once when storing.
  Value a = op->getOperand(0), b = op->getOperand(1), out = op->getResult(0);
  Type outType = elementOf(out);
  if (!isa<FloatType>(outType))
    return op->emitError() << "the CPU target multiplies float matrices "
                              "only, got "
                           << outType;
  // T: the GEMM's type, double for f64 and float otherwise.
  StringRef t = accumulatorType(outType);
  auto widen = [&](Value v) { return widenFloat(v); };
  body << "  {\n    " << widen(a) << "    " << widen(b);
  int64_t outCount = tensorOf(out).getNumElements();
  body << "    std::vector<" << t << "> acc(" << outCount << "LL);\n";
  if (auto gemm = dyn_cast<ampc::GemmOp>(op)) {
    ArrayRef<int64_t> as = tensorOf(a).getShape(), bs = tensorOf(b).getShape();
    bool ta = gemm.getTransA() != 0, tb = gemm.getTransB() != 0;
    int64_t m = ta ? as[1] : as[0], k = ta ? as[0] : as[1];
    int64_t n = tb ? bs[0] : bs[1];
    float beta = gemm.getBeta().convertToFloat();
    if (Value c = gemm.getC()) {
      body << "    " << widen(c);
      body << formatv("    {{ static const int64_t dims[] = {0}; static const "
                      "int64_t s0[] = {1}; const int64_t *strides[] = {{s0};\n"
                      "      ampc::cpu::forEach<1>(2, dims, strides, [&](int64_t "
                      "o, int64_t i0) {{ acc[o] = {4}({2}) * w_{3}[i0]; }); }\n",
                      list({m, n}),
                      list(broadcastStrides(tensorOf(c).getShape(), {m, n})),
                      llvm::formatv("{0:e9}", beta), name(c), t);
    }
    body << formatv("    ampc::cpu::gemm<{9}>({0}, {1}, {2}LL, {3}LL, {4}LL, "
                    "{9}({5}), w_{6}, w_{7}, {9}({8}), acc.data());\n",
                    ta, tb, m, n, k,
                    llvm::formatv("{0:e9}", gemm.getAlpha().convertToFloat()),
                    name(a), name(b), gemm.getC() ? "1" : "0", t);
  } else {
    // Promote 1-D operands to matrices, then loop over the broadcast batch.
    SmallVector<int64_t> as(tensorOf(a).getShape()), bs(tensorOf(b).getShape());
    if (as.size() == 1)
      as.insert(as.begin(), 1);
    if (bs.size() == 1)
      bs.push_back(1);
    int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
    ArrayRef<int64_t> aBatch = ArrayRef(as).drop_back(2),
                      bBatch = ArrayRef(bs).drop_back(2);
    SmallVector<int64_t> batch =
        *ampc::broadcastShapes({aBatch, bBatch});
    SmallVector<int64_t> aStrides = broadcastStrides(aBatch, batch),
                         bStrides = broadcastStrides(bBatch, batch);
    for (int64_t &s : aStrides)
      s *= m * k;
    for (int64_t &s : bStrides)
      s *= k * n;
    body << formatv("    static const int64_t dims[] = {0}; static const int64_t "
                    "sa[] = {1}; static const int64_t sb[] = {2};\n"
                    "    const int64_t *strides[] = {{sa, sb};\n"
                    "    ampc::cpu::forEach<2>({3}, dims, strides, [&](int64_t o, "
                    "int64_t ia, int64_t ib) {{\n"
                    "      ampc::cpu::gemm<{10}>(false, false, {4}LL, {5}LL, {6}LL, "
                    "{10}(1), w_{7} + ia, w_{8} + ib, {10}(0), acc.data() + o * "
                    "{9}LL);\n"
                    "    });\n",
                    list(batch), list(aStrides), list(bStrides), batch.size(), m,
                    n, k, name(a), name(b), m * n, t);
  }
  body << "    for (int64_t i = 0; i < " << outCount << "LL; ++i) " << name(out)
       << "[i] = " << store(outType, "acc[i]") << ";\n  }\n";
  return success();
}

void Emitter::emitConstant(ampc::ConstantOp op, llvm::raw_ostream &body) {
  Value v = op.getResult();
  Type t = elementOf(v);
  std::string n = "c" + std::to_string(counter++);
  names[v] = n;
  llvm::raw_string_ostream cs(constants);
  cs << "alignas(64) static const " << storageType(t) << " " << n << "[] = {";
  auto elements = cast<DenseElementsAttr>(op.getValue());
  int64_t count = tensorOf(v).getNumElements();
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
      if (t.isF16() || t.isBF16())
        cs << value.bitcastToAPInt().getZExtValue();
      else
        cs << formatv("{0:e17}", value.convertToDouble());
    } else {
      APInt value = elements.getValues<APInt>()[index];
      // The most negative int64 has no literal: write it as an expression.
      if (t.isInteger(1))
        cs << value.getZExtValue();
      else if (value.isMinSignedValue() && t.isInteger(64))
        cs << "(-9223372036854775807LL - 1)";
      else
        cs << value.getSExtValue() << (t.isInteger(64) ? "LL" : "");
    }
  }
  cs << "};\n";
  (void)body;
}

/// The window geometry of a conv or pool op over its input's spatial
/// dimensions, as a `static const ampc::cpu::Window win`.
LogicalResult Emitter::emitWindow(Operation *op, ArrayRef<int64_t> kernel,
                                  std::optional<ArrayRef<int64_t>> strides,
                                  std::optional<ArrayRef<int64_t>> pads,
                                  std::optional<ArrayRef<int64_t>> dilations,
                                  llvm::raw_ostream &body) {
  return emitWindow(op, tensorOf(op->getOperand(0)).getShape(),
                    tensorOf(op->getResult(0)).getShape(), kernel, strides,
                    pads, dilations, body);
}

LogicalResult Emitter::emitWindow(Operation *op, ArrayRef<int64_t> inShape,
                                  ArrayRef<int64_t> outShape,
                                  ArrayRef<int64_t> kernel,
                                  std::optional<ArrayRef<int64_t>> strides,
                                  std::optional<ArrayRef<int64_t>> pads,
                                  std::optional<ArrayRef<int64_t>> dilations,
                                  llvm::raw_ostream &body) {
  ArrayRef<int64_t> in = inShape.drop_front(2), out = outShape.drop_front(2);
  size_t n = in.size();
  if (n > 8)
    return op->emitError() << "the CPU target handles at most 8 spatial "
                              "dimensions, got "
                           << n;
  SmallVector<int64_t> ones(n, 1), zeros(n, 0);
  SmallVector<int64_t> begin(zeros), end(zeros);
  if (pads) {
    begin.assign(pads->begin(), pads->begin() + n);
    end.assign(pads->begin() + n, pads->end());
  }
  body << formatv("    static const ampc::cpu::Window win = {{{0}, {1}, {2}, "
                  "{3}, {4}, {5}, {6}, {7}};\n",
                  n, list(in), list(out), list(kernel),
                  list(strides ? *strides : ArrayRef<int64_t>(ones)),
                  list(begin), list(end),
                  list(dilations ? *dilations : ArrayRef<int64_t>(ones)));
  return success();
}

LogicalResult Emitter::emitConv(ampc::ConvOp op, llvm::raw_ostream &body) {
  // im2col + GEMM: 16-bit operands widened to FP32, FP32 accumulation, one
  // rounding when storing; f64 in double.
  Value x = op.getInput(), w = op.getWeight(), b = op.getBias(),
        out = op.getOutput();
  Type outType = elementOf(out);
  ArrayRef<int64_t> xs = tensorOf(x).getShape();
  body << "  {\n    " << widenFloat(x) << "    " << widenFloat(w);
  if (b)
    body << "    " << widenFloat(b);
  if (failed(emitWindow(op, tensorOf(w).getShape().drop_front(2),
                        op.getStrides(), op.getPads(), op.getDilations(),
                        body)))
    return failure();
  int64_t count = tensorOf(out).getNumElements();
  bool direct = outType.isF32() || outType.isF64();
  if (!direct)
    body << "    std::vector<float> acc(" << count << "LL);\n";
  body << formatv("    ampc::cpu::conv<{8}>(w_{0}, w_{1}, {2}, {3}, {4}LL, "
                  "{5}LL, {6}LL, {7}LL, win);\n",
                  name(x), name(w), b ? "w_" + name(b) : "nullptr",
                  direct ? name(out) : "acc.data()", xs[0], xs[1],
                  tensorOf(w).getDimSize(0), op.getGroup(),
                  accumulatorType(outType));
  if (!direct)
    body << "    for (int64_t i = 0; i < " << count << "LL; ++i) " << name(out)
         << "[i] = " << store(outType, "acc[i]") << ";\n";
  body << "  }\n";
  return success();
}

/// A Slice of a tensor of `shape` as a strided view: the first element's
/// offset and, per dimension, the input stride times the step (negative for
/// negative steps). The forward Slice reads through it; slice_grad writes
/// through it.
static int64_t sliceView(ArrayRef<int64_t> shape, ArrayRef<int64_t> starts,
                         ArrayRef<int64_t> axes, ArrayRef<int64_t> steps,
                         SmallVectorImpl<int64_t> &strides) {
  SmallVector<int64_t> inStrides = rowMajorStrides(shape);
  strides.assign(inStrides.begin(), inStrides.end());
  int64_t base = 0;
  for (auto [i, a] : llvm::enumerate(axes)) {
    int64_t axis = *ampc::normalizeAxis(a, shape.size());
    int64_t dim = shape[axis], step = steps[i];
    int64_t start = starts[i];
    if (start < 0)
      start += dim;
    start = step > 0 ? std::clamp<int64_t>(start, 0, dim)
                     : std::clamp<int64_t>(start, 0, dim - 1);
    base += start * inStrides[axis];
    strides[axis] = inStrides[axis] * step;
  }
  return base;
}

void Emitter::emitSlice(ampc::SliceOp op, llvm::raw_ostream &body) {
  Value in = op.getInput(), out = op.getOutput();
  if (tensorOf(out).getNumElements() == 0)
    return;
  SmallVector<int64_t> strides;
  int64_t base = sliceView(tensorOf(in).getShape(), op.getStarts(),
                           op.getAxes(), op.getSteps(), strides);
  emitStrided(in, out, strides, body, base);
}

LogicalResult Emitter::emitGradientOp(Operation *op, llvm::raw_ostream &body) {
  // Kernels of CpuBackwardKernels.h; 16-bit data is widened to FP32 where a
  // kernel computes on FP32 arrays and rounded once when stored.
  // A `std::vector<C> NAME` holding `v` converted to C.
  auto converted = [&](StringRef what, StringRef c, Value v) {
    body << formatv("    std::vector<{0}> {1} = ampc::cpu::convert<{0}>({2}, "
                    "{3}LL, {4});\n",
                    c, what, name(v), tensorOf(v).getNumElements(),
                    loadFn(elementOf(v)));
  };
  // Stores `count` values of vector `acc` into `out`.
  auto storeAll = [&](StringRef acc, Value out) {
    body << "    for (int64_t i = 0; i < " << tensorOf(out).getNumElements()
         << "LL; ++i) " << name(out) << "[i] = "
         << store(elementOf(out), (acc + "[i]").str()) << ";\n";
  };
  // Convolution adjoints: GEMMs on FP32 copies (double for f64).
  auto convolution = [&](bool data, Value lhs, Value rhs, Value out,
                         ArrayRef<int64_t> xShape, ArrayRef<int64_t> yShape,
                         ArrayRef<int64_t> kernel, int64_t m, int64_t group,
                         std::optional<ArrayRef<int64_t>> strides,
                         std::optional<ArrayRef<int64_t>> pads,
                         std::optional<ArrayRef<int64_t>> dilations) {
    Type t = elementOf(out);
    body << "  {\n    " << widenFloat(lhs) << "    " << widenFloat(rhs);
    if (failed(emitWindow(op, xShape, yShape, kernel, strides, pads,
                          dilations, body)))
      return failure();
    bool direct = t.isF32() || t.isF64();
    if (!direct)
      body << "    std::vector<float> acc(" << tensorOf(out).getNumElements()
           << "LL);\n";
    body << formatv("    ampc::cpu::{0}<{1}>(w_{2}, w_{3}, {4}, {5}LL, {6}LL, "
                    "{7}LL, {8}LL, win);\n",
                    data ? "convBackwardData" : "convBackwardWeight",
                    accumulatorType(t), name(lhs), name(rhs),
                    direct ? name(out) : "acc.data()", xShape[0], xShape[1], m,
                    group);
    if (!direct)
      storeAll("acc", out);
    body << "  }\n";
    return success();
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::ConvBackwardDataOp o) {
        ArrayRef<int64_t> w = tensorOf(o.getWeight()).getShape();
        return convolution(true, o.getGrad(), o.getWeight(), o.getOutput(),
                           tensorOf(o.getOutput()).getShape(),
                           tensorOf(o.getGrad()).getShape(), w.drop_front(2),
                           w[0], o.getGroup(), o.getStrides(), o.getPads(),
                           o.getDilations());
      })
      .Case([&](ampc::ConvBackwardWeightOp o) {
        ArrayRef<int64_t> w = tensorOf(o.getOutput()).getShape();
        return convolution(false, o.getInput(), o.getGrad(), o.getOutput(),
                           tensorOf(o.getInput()).getShape(),
                           tensorOf(o.getGrad()).getShape(), w.drop_front(2),
                           w[0], o.getGroup(), o.getStrides(), o.getPads(),
                           o.getDilations());
      })
      .Case([&](ampc::MaxPoolGradOp o) -> LogicalResult {
        Type t = elementOf(o.getGrad());
        ArrayRef<int64_t> x = tensorOf(o.getOutput()).getShape();
        SmallVector<int64_t> ones(x.size() - 2, 1);
        body << "  {\n";
        if (failed(emitWindow(op, x, tensorOf(o.getGrad()).getShape(), ones,
                              std::nullopt, std::nullopt, std::nullopt, body)))
          return failure();
        body << formatv("    ampc::cpu::maxPoolGrad<{0}>({1}, {2}, {3}, {4}LL, "
                        "win, {5}, {6}, {7});\n  }\n",
                        accumulatorType(t), name(o.getGrad()),
                        name(o.getIndices()), name(o.getOutput()), x[0] * x[1],
                        o.getStorageOrder() != 0, loadFn(t), storeFn(t));
        return success();
      })
      .Case([&](ampc::AveragePoolGradOp o) -> LogicalResult {
        Type t = elementOf(o.getGrad());
        ArrayRef<int64_t> x = tensorOf(o.getOutput()).getShape();
        body << "  {\n";
        if (failed(emitWindow(op, x, tensorOf(o.getGrad()).getShape(),
                              o.getKernelShape(), o.getStrides(), o.getPads(),
                              o.getDilations(), body)))
          return failure();
        body << formatv("    ampc::cpu::averagePoolGrad<{0}>({1}, {2}, {3}LL, "
                        "win, {4}, {5}, {6});\n  }\n",
                        accumulatorType(t), name(o.getGrad()),
                        name(o.getOutput()), x[0] * x[1],
                        o.getCountIncludePad() != 0, loadFn(t), storeFn(t));
        return success();
      })
      .Case([&](ampc::BatchNormGradOp o) {
        Value x = o.getInput();
        ArrayRef<int64_t> shape = tensorOf(x).getShape();
        int64_t n = shape[0], channels = shape[1],
                inner = product(shape.drop_front(2));
        bool wide = elementOf(x).isF64() || elementOf(o.getScale()).isF64();
        StringRef c = wide ? "double" : "float";
        body << "  {\n";
        converted("scale", c, o.getScale());
        if (o.getMean()) {
          converted("mean", c, o.getMean());
          converted("variance", c, o.getVar());
        }
        body << formatv("    std::vector<{0}> gradScale({1}LL), gradBias({1}LL);\n",
                        c, channels);
        body << formatv(
            "    ampc::cpu::batchNormGrad<{0}>({1}, {2}, {3}, {4}LL, {5}LL, "
            "{6}LL, scale.data(), {7}, {8}, {0}({9}), gradScale.data(), "
            "gradBias.data(), {10}, {11});\n",
            c, name(o.getGrad()), name(x), name(o.getGradInput()), n, channels,
            inner, o.getMean() ? "mean.data()" : "nullptr",
            o.getMean() ? "variance.data()" : "nullptr",
            exactLiteral(o.getEpsilon()), loadFn(elementOf(x)),
            storeFn(elementOf(o.getGradInput())));
        storeAll("gradScale", o.getGradScale());
        storeAll("gradBias", o.getGradBias());
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::LayerNormGradOp o) {
        Value x = o.getInput();
        ArrayRef<int64_t> shape = tensorOf(x).getShape();
        int64_t axis = *ampc::normalizeAxis(o.getAxis(), shape.size());
        ArrayRef<int64_t> normalized = shape.drop_front(axis);
        Type stash = elementOf(o.getMean());
        StringRef c = elementOf(x).isF64() || stash.isF64() ? "double" : "float";
        body << formatv(
            "  {{ static const int64_t dims[] = {0};\n"
            "    static const int64_t scaleStrides[] = {1};\n"
            "    std::vector<{2}> scale = ampc::cpu::broadcast<{2}>({3}, {4}, "
            "dims, scaleStrides, {5});\n"
            "    ampc::cpu::layerNormGrad<{2}>({6}, {7}, scale.data(), {8}, {9}, "
            "{10}, {11}LL, {12}LL, {13}, {14}, {15}); }\n",
            list(normalized),
            list(broadcastStrides(tensorOf(o.getScale()).getShape(),
                                  normalized)),
            c, name(o.getScale()), normalized.size(),
            loadFn(elementOf(o.getScale())), name(o.getGrad()), name(x),
            name(o.getMean()), name(o.getInvStdDev()), name(o.getOutput()),
            product(shape.take_front(axis)), product(normalized),
            loadFn(elementOf(x)), loadFn(stash), storeFn(elementOf(x)));
        return success();
      })
      .Case([&](ampc::NllLossGradOp o) {
        ArrayRef<int64_t> shape = tensorOf(o.getOutput()).getShape();
        StringRef c = elementOf(o.getOutput()).isF64() ||
                              elementOf(o.getGrad()).isF64()
                          ? "double"
                          : "float";
        body << "  {\n";
        converted("grad", c, o.getGrad());
        if (o.getWeight())
          converted("weights", c, o.getWeight());
        body << formatv("    std::vector<{0}> out({1}LL);\n", c,
                        tensorOf(o.getOutput()).getNumElements());
        StringRef reduction = o.getReduction();
        std::optional<uint64_t> ignore = o.getIgnoreIndex();
        std::string call =
            formatv("ampc::cpu::nllLossGrad<{0}>(grad.data(), {1}, {2}, "
                    "{3}LL, {4}LL, {5}LL, {6}, {7}LL, ampc::cpu::{8}, "
                    "out.data())",
                    c, name(o.getTarget()),
                    o.getWeight() ? "weights.data()" : "nullptr", shape[0],
                    shape[1], product(shape.drop_front(2)), ignore.has_value(),
                    static_cast<int64_t>(ignore.value_or(0)),
                    reduction == "mean"  ? "LossMean"
                    : reduction == "sum" ? "LossSum"
                                         : "LossNone")
                .str();
        body << "  " << failUnless(op, call, "a label is out of range");
        storeAll("out", o.getOutput());
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::GatherGradOp o) {
        ArrayRef<int64_t> shape = tensorOf(o.getOutput()).getShape();
        int64_t axis = *ampc::normalizeAxis(o.getAxis(), shape.size());
        StringRef c = accumulatorType(elementOf(o.getOutput()));
        body << "  {\n";
        converted("grad", c, o.getGrad());
        body << formatv("    std::vector<{0}> out({1}LL);\n", c,
                        tensorOf(o.getOutput()).getNumElements());
        std::string call =
            formatv("ampc::cpu::gatherGrad<{0}>(grad.data(), {1}, out.data(), "
                    "{2}LL, {3}LL, {4}LL, {5}LL)",
                    c, name(o.getIndices()), product(shape.take_front(axis)),
                    shape[axis], tensorOf(o.getIndices()).getNumElements(),
                    product(shape.drop_front(axis + 1)))
                .str();
        body << "  " << failUnless(op, call, "an index is out of range");
        storeAll("out", o.getOutput());
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::SliceGradOp o) {
        RankedTensorType out = tensorOf(o.getOutput()),
                         grad = tensorOf(o.getGrad());
        SmallVector<int64_t> strides;
        int64_t base = sliceView(out.getShape(), o.getStarts(), o.getAxes(),
                                 o.getSteps(), strides);
        body << formatv("  {{ static const int64_t dims[] = {0}; static const "
                        "int64_t strides[] = {1};\n"
                        "    ampc::cpu::sliceGrad({2}, {3}, {4}LL, {5}, dims, "
                        "strides, {6}LL); }\n",
                        list(grad.getShape()), list(strides), name(o.getGrad()),
                        name(o.getOutput()), out.getNumElements(),
                        grad.getRank(), base);
        return success();
      })
      .Default([&](Operation *) {
        return op->emitError()
               << "the CPU target cannot compile '" << op->getName()
               << "' yet";
      });
}

void Emitter::emitReduce(Operation *op, StringRef kind,
                         llvm::raw_ostream &body) {
  Value in = op->getOperand(0), out = op->getResult(0);
  ArrayRef<int64_t> shape = tensorOf(in).getShape();
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
  SmallVector<bool> reduced(shape.size(), axes.empty());
  for (int64_t a : axes)
    reduced[*ampc::normalizeAxis(a, shape.size())] = true;
  // Kept dimensions in output order (keepdims does not change the layout)
  // and reduced ones, each with its input strides.
  SmallVector<int64_t> strides = rowMajorStrides(shape);
  SmallVector<int64_t> keptDims, keptStrides, reducedDims, reducedStrides;
  for (size_t d = 0; d < shape.size(); ++d) {
    (reduced[d] ? reducedDims : keptDims).push_back(shape[d]);
    (reduced[d] ? reducedStrides : keptStrides).push_back(strides[d]);
  }
  Type ti = elementOf(in), to = elementOf(out);
  if (tensorOf(out).getNumElements() == 0)
    return;
  body << formatv("  {{ static const int64_t kept[] = {0}; static const int64_t "
                  "keptStrides[] = {1};\n"
                  "    static const int64_t reduced[] = {2}; static const "
                  "int64_t reducedStrides[] = {3};\n"
                  "    ampc::cpu::reduce<{4}>({5}, {6}, {7}, kept, keptStrides, "
                  "{8}, reduced, reducedStrides, ampc::cpu::{9}, {10}, {11}); }\n",
                  list(keptDims), list(keptStrides), list(reducedDims),
                  list(reducedStrides), accumulatorType(ti), name(in),
                  name(out), keptDims.size(), reducedDims.size(), kind,
                  loadFn(ti), storeFn(to));
}

void Emitter::emitLayerNorm(ampc::LayerNormalizationOp op,
                            llvm::raw_ostream &body) {
  Value x = op.getInput(), y = op.getOutput();
  ArrayRef<int64_t> shape = tensorOf(x).getShape();
  int64_t axis = *ampc::normalizeAxis(op.getAxis(), shape.size());
  ArrayRef<int64_t> normalized = shape.drop_front(axis);
  Type stash = elementOf(op.getMean());
  StringRef c = elementOf(x).isF64() || stash.isF64() ? "double" : "float";
  body << "  { static const int64_t dims[] = " << list(normalized) << ";\n";
  // Scale and bias broadcast to the normalised shape, in the compute type.
  auto operand = [&](StringRef what, Value v) {
    body << formatv("    static const int64_t {0}Strides[] = {1};\n"
                    "    std::vector<{2}> {0} = ampc::cpu::broadcast<{2}>({3}, "
                    "{4}, dims, {0}Strides, {5});\n",
                    what,
                    list(broadcastStrides(tensorOf(v).getShape(), normalized)),
                    c, name(v), normalized.size(), loadFn(elementOf(v)));
  };
  operand("scale", op.getScale());
  if (op.getBias())
    operand("bias", op.getBias());
  body << formatv("    ampc::cpu::layerNorm<{0}>({1}, {2}, {3}, {4}, {5}LL, "
                  "{6}LL, scale.data(), {7}, {0}({8}), {9}, {10}, {11}); }\n",
                  c, name(x), name(y), name(op.getMean()),
                  name(op.getInvStdDev()), product(shape.take_front(axis)),
                  product(normalized), op.getBias() ? "bias.data()" : "nullptr",
                  exactLiteral(op.getEpsilon()), loadFn(elementOf(x)),
                  storeFn(elementOf(y)), storeFn(stash));
}

void Emitter::emitBatchNorm(ampc::BatchNormalizationOp op,
                            llvm::raw_ostream &body) {
  // Statistics in the compute type whatever their storage (under autocast
  // the data is f16/bf16 and the statistics FP32).
  Value x = op.getInput(), y = op.getOutput();
  ArrayRef<int64_t> shape = tensorOf(x).getShape();
  int64_t n = shape[0], channels = shape[1], inner = product(shape.drop_front(2));
  bool wide = elementOf(x).isF64() || elementOf(op.getInputMean()).isF64();
  StringRef c = wide ? "double" : "float";
  body << "  {\n";
  for (auto [what, v] : {std::pair<StringRef, Value>{"scale", op.getScale()},
                         {"bias", op.getBias()},
                         {"mean", op.getInputMean()},
                         {"variance", op.getInputVar()}})
    body << formatv("    std::vector<{0}> {1} = ampc::cpu::convert<{0}>({2}, "
                    "{3}LL, {4});\n",
                    c, what, name(v), channels, loadFn(elementOf(v)));
  bool training = op.getTrainingMode() != 0;
  if (training)
    body << formatv("    std::vector<{0}> batchMean({1}LL), batchVariance({1}LL);\n"
                    "    ampc::cpu::channelStatistics<{0}>({2}, {3}LL, {1}LL, "
                    "{4}LL, batchMean.data(), batchVariance.data(), {5});\n",
                    c, channels, name(x), n, inner, loadFn(elementOf(x)));
  StringRef m = training ? "batchMean" : "mean",
            v = training ? "batchVariance" : "variance";
  body << formatv("    ampc::cpu::batchNorm<{0}>({1}, {2}, {3}LL, {4}LL, {5}LL, "
                  "scale.data(), bias.data(), {6}.data(), {7}.data(), {0}({8}), "
                  "{9}, {10});\n",
                  c, name(x), name(y), n, channels, inner, m, v,
                  exactLiteral(op.getEpsilon()), loadFn(elementOf(x)),
                  storeFn(elementOf(y)));
  // Running statistics: ONNX updates them with the population variance,
  // running = input * momentum + batch * (1 - momentum); outside training
  // they are the inputs.
  double momentum = op.getMomentum().convertToDouble();
  auto running = [&](Value out, StringRef input, StringRef batch) {
    std::string e = training
                        ? formatv("{0}[i] * {1}({2:e17}) + {3}[i] * {1}({4:e17})",
                                  input, c, momentum, batch, 1.0 - momentum)
                              .str()
                        : (input + "[i]").str();
    body << "    for (int64_t i = 0; i < " << channels << "LL; ++i) "
         << name(out) << "[i] = " << store(elementOf(out), e) << ";\n";
  };
  running(op.getRunningMean(), "mean", "batchMean");
  running(op.getRunningVar(), "variance", "batchVariance");
  body << "  }\n";
}

void Emitter::emitLoss(Operation *op, Value scores, Value labels,
                       Value weights, StringRef reduction,
                       std::optional<int64_t> ignoreIndex, Value logProb,
                       llvm::raw_ostream &body) {
  // SoftmaxCrossEntropyLoss (with logProb) is LogSoftmax over axis 1 and
  // NegativeLogLikelihoodLoss; both compute in float (double for f64).
  ArrayRef<int64_t> shape = tensorOf(scores).getShape();
  int64_t n = shape[0], classes = shape[1], inner = product(shape.drop_front(2));
  int64_t count = tensorOf(scores).getNumElements();
  Type t = elementOf(scores);
  Value loss = op->getResult(0);
  StringRef c = t.isF64() ? "double" : "float";
  body << "  {\n";
  if (logProb) {
    body << formatv("    std::vector<{0}> logp({1}LL);\n"
                    "    ampc::cpu::softmax<{0}>({2}, logp.data(), {3}LL, {4}LL, "
                    "{5}LL, true, {6}, [](auto v) {{ return v; });\n"
                    "    for (int64_t i = 0; i < {1}LL; ++i) {7}[i] = {8};\n",
                    c, count, name(scores), n, classes, inner, loadFn(t),
                    name(logProb), store(elementOf(logProb), "logp[i]"));
  } else {
    body << formatv("    std::vector<{0}> logp = ampc::cpu::convert<{0}>({1}, "
                    "{2}LL, {3});\n",
                    c, name(scores), count, loadFn(t));
  }
  if (weights)
    body << formatv("    std::vector<{0}> weights = ampc::cpu::convert<{0}>({1}, "
                    "{2}LL, {3});\n",
                    c, name(weights), classes, loadFn(elementOf(weights)));
  int64_t lossCount = tensorOf(loss).getNumElements();
  body << formatv("    std::vector<{0}> loss({1}LL);\n", c, lossCount);
  std::string call =
      formatv("ampc::cpu::nllLoss<{0}>(logp.data(), {1}, {2}, {3}LL, {4}LL, "
              "{5}LL, {6}, {7}LL, ampc::cpu::{8}, loss.data())",
              c, name(labels), weights ? "weights.data()" : "nullptr", n,
              classes, inner, ignoreIndex.has_value(), ignoreIndex.value_or(0),
              reduction == "mean"  ? "LossMean"
              : reduction == "sum" ? "LossSum"
                                   : "LossNone")
          .str();
  body << "  " << failUnless(op, call, "a label is out of range");
  body << "    for (int64_t i = 0; i < " << lossCount << "LL; ++i) "
       << name(loss) << "[i] = " << store(elementOf(loss), "loss[i]")
       << ";\n  }\n";
}

LogicalResult Emitter::emitOp(Operation *op, llvm::raw_ostream &body) {
  if (auto c = dyn_cast<ampc::ConstantOp>(op)) {
    emitConstant(c, body);
    return success();
  }
  if (auto load = dyn_cast<ampc::LoadParameterOp>(op)) {
    Type t = elementOf(load.getResult());
    std::string n = "p" + std::to_string(counter++);
    names[load.getResult()] = n;
    body << "  " << storageType(t) << " *" << n << " = reinterpret_cast<"
         << storageType(t) << " *>(state + "
         << parameterOffsets.lookup(load.getParameter()) << ");\n";
    return success();
  }
  if (auto load = dyn_cast<ampc::LoadStateOp>(op)) {
    Type t = elementOf(load.getResult());
    std::string n = "s" + std::to_string(counter++);
    names[load.getResult()] = n;
    body << "  " << storageType(t) << " *" << n << " = reinterpret_cast<"
         << storageType(t) << " *>(state + "
         << parameterOffsets.lookup(load.getState()) << ");\n";
    return success();
  }
  if (auto store = dyn_cast<ampc::StoreOp>(op)) {
    RankedTensorType t = tensorOf(store.getValue());
    body << "  std::memmove(state + " << parameterOffsets.lookup(store.getTarget())
         << ", " << name(store.getValue()) << ", "
         << t.getNumElements() * storageSize(t.getElementType()) << "ULL);\n";
    return success();
  }
  for (OpResult r : op->getResults())
    if (failed(bind(r, body)))
      return failure();
  if (isa<ampc::UnscaleOp, ampc::ClipGradNormOp, ampc::OptimizerUpdateOp,
          ampc::UpdateScaleOp>(op))
    return emitTrainingOp(op, body);
  if (op->hasTrait<ampc::View>())
    return success(); // same elements, same order, same buffer
  if (op->hasTrait<ampc::Elementwise>())
    return emitLoopNest({op}, op->getOperands(), op->getOperands(),
                        op->getResult(0), body);
  if (auto fusion = dyn_cast<ampc::FusionOp>(op)) {
    SmallVector<Operation *> ops;
    for (Operation &inner : fusion.getBody().front().without_terminator())
      ops.push_back(&inner);
    return emitLoopNest(ops, fusion.getInputs(),
                        fusion.getBody().front().getArguments(),
                        fusion.getOutput(), body);
  }
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::TransposeOp t) {
        ArrayRef<int64_t> in = tensorOf(t.getInput()).getShape();
        SmallVector<int64_t> inStrides(in.size(), 1), strides;
        for (int64_t d = static_cast<int64_t>(in.size()) - 2; d >= 0; --d)
          inStrides[d] = inStrides[d + 1] * in[d + 1];
        for (int64_t p : t.getPerm())
          strides.push_back(inStrides[p]);
        emitStrided(t.getInput(), t.getOutput(), strides, body);
        return success();
      })
      .Case<ampc::GemmOp, ampc::MatMulOp>(
          [&](Operation *) { return emitMatmul(op, body); })
      .Case<ampc::SoftmaxOp, ampc::LogSoftmaxOp>([&](Operation *) {
        Value in = op->getOperand(0), out = op->getResult(0);
        ArrayRef<int64_t> shape = tensorOf(in).getShape();
        int64_t axis = *ampc::normalizeAxis(
            op->getAttrOfType<IntegerAttr>("axis").getInt(), shape.size());
        int64_t outer = 1, inner = 1;
        for (int64_t d = 0; d < axis; ++d)
          outer *= shape[d];
        for (int64_t d = axis + 1; d < static_cast<int64_t>(shape.size()); ++d)
          inner *= shape[d];
        Type ti = elementOf(in), to = elementOf(out);
        body << formatv("  ampc::cpu::softmax<{8}>({0}, {1}, {2}LL, {3}LL, {4}LL, "
                        "{5}, {6}, {7});\n",
                        name(in), name(out), outer, shape[axis], inner,
                        isa<ampc::LogSoftmaxOp>(op), loadFn(ti), storeFn(to),
                        accumulatorType(ti).str() == "double" ||
                                accumulatorType(to).str() == "double"
                            ? "double"
                            : "float");
        return success();
      })
      .Case([&](ampc::SliceOp o) {
        emitSlice(o, body);
        return success();
      })
      .Case([&](ampc::ConcatOp o) {
        ArrayRef<int64_t> shape = tensorOf(o.getOutput()).getShape();
        int64_t axis = *ampc::normalizeAxis(o.getAxis(), shape.size());
        int64_t outer = product(shape.take_front(axis)),
                inner = product(shape.drop_front(axis + 1)), offset = 0;
        for (Value in : o.getInputs()) {
          int64_t block = tensorOf(in).getDimSize(axis) * inner;
          body << formatv("  ampc::cpu::concatPart({0}, {1}, {2}LL, {3}LL, "
                          "{4}LL, {5}LL);\n",
                          name(in), name(o.getOutput()), outer, block,
                          shape[axis] * inner, offset);
          offset += block;
        }
        return success();
      })
      .Case([&](ampc::GatherOp o) {
        ArrayRef<int64_t> shape = tensorOf(o.getData()).getShape();
        int64_t axis = *ampc::normalizeAxis(o.getAxis(), shape.size());
        body << failUnless(
            op,
            formatv("ampc::cpu::gather({0}, {1}, {2}, {3}LL, {4}LL, {5}LL, "
                    "{6}LL)",
                    name(o.getData()), name(o.getIndices()), name(o.getOutput()),
                    product(shape.take_front(axis)), shape[axis],
                    tensorOf(o.getIndices()).getNumElements(),
                    product(shape.drop_front(axis + 1))),
            "an index is out of range");
        return success();
      })
      .Case([&](ampc::ShapeOp o) {
        // Normally folded away; the values are known here anyway.
        ArrayRef<int64_t> shape = tensorOf(o.getInput()).getShape();
        int64_t rank = shape.size();
        auto clampDim = [&](int64_t d) {
          return std::clamp<int64_t>(d < 0 ? d + rank : d, 0, rank);
        };
        int64_t start = clampDim(o.getStart());
        int64_t end = o.getEnd() ? clampDim(*o.getEnd()) : rank;
        SmallVector<int64_t> dims(
            shape.slice(start, std::max<int64_t>(end - start, 0)));
        if (!dims.empty())
          body << "  { static const int64_t dims[] = " << list(dims)
               << "; std::memcpy(" << name(o.getOutput()) << ", dims, "
               << 8 * dims.size() << "ULL); }\n";
        return success();
      })
      .Case([&](ampc::ReduceSumOp) {
        emitReduce(op, "ReduceSum", body);
        return success();
      })
      .Case([&](ampc::ReduceMeanOp) {
        emitReduce(op, "ReduceMean", body);
        return success();
      })
      .Case([&](ampc::ReduceMaxOp) {
        emitReduce(op, "ReduceMax", body);
        return success();
      })
      .Case([&](ampc::LayerNormalizationOp o) {
        emitLayerNorm(o, body);
        return success();
      })
      .Case([&](ampc::BatchNormalizationOp o) {
        emitBatchNorm(o, body);
        return success();
      })
      .Case([&](ampc::DropoutOp o) -> LogicalResult {
        RankedTensorType t = tensorOf(o.getOutput());
        double ratio = o.getRatio().convertToDouble();
        if (!o.getTrainingMode() || ratio == 0.0) {
          // The identity with an all-true mask.
          body << "  std::memcpy(" << name(o.getOutput()) << ", "
               << name(o.getInput()) << ", "
               << t.getNumElements() * storageSize(t.getElementType())
               << "ULL);\n  std::memset(" << name(o.getMask()) << ", 1, "
               << t.getNumElements() << "ULL);\n";
          return success();
        }
        // A random mask per training step (ampc.step, 0 in a library without
        // an optimizer), distinct per Dropout (its seed, else its name);
        // kept values scaled by 1 / (1 - ratio).
        // The seed must be the same for the op's copies in @forward and
        // @train_step: FNV-1a of the ONNX node's description.
        uint64_t seed = 0xCBF29CE484222325ULL;
        if (o.getSeed()) {
          seed = static_cast<uint64_t>(*o.getSeed());
        } else {
          for (char c : nodeDescription(op))
            seed = (seed ^ static_cast<unsigned char>(c)) * 0x100000001B3ULL;
        }
        std::string step = "0";
        if (parameterOffsets.count(ampc::kStepCount))
          step = formatv("*reinterpret_cast<const int64_t *>(state + {0})",
                         parameterOffsets.lookup(ampc::kStepCount))
                     .str();
        Type e = t.getElementType();
        body << formatv(
            "  {{ const uint64_t step = static_cast<uint64_t>({0});\n"
            "    for (int64_t i = 0; i < {1}LL; ++i) {{\n"
            "      const bool keep = ampc::cpu::dropoutKeeps({2}ULL, step, "
            "static_cast<uint64_t>(i), {3:e17});\n"
            "      {4}[i] = keep;\n"
            "      {5}[i] = {6};\n    }\n  }\n",
            step, t.getNumElements(), seed, ratio, name(o.getMask()),
            name(o.getOutput()),
            ratio >= 1.0
                ? store(e, "0")
                : store(e, formatv("keep ? {0} * {1}({2:e17}) : {1}(0)",
                                   load(e, name(o.getInput()) + "[i]"),
                                   computeType(e), 1.0 / (1.0 - ratio))
                               .str()));
        return success();
      })
      .Case([&](ampc::MaxPoolOp o) -> LogicalResult {
        Type t = elementOf(o.getInput());
        body << "  {\n";
        if (failed(emitWindow(op, o.getKernelShape(), o.getStrides(),
                              o.getPads(), o.getDilations(), body)))
          return failure();
        ArrayRef<int64_t> shape = tensorOf(o.getInput()).getShape();
        body << formatv("    ampc::cpu::maxPool<{0}>({1}, {2}, {3}, {4}LL, win, "
                        "{5}, {6}, {7});\n  }\n",
                        accumulatorType(t), name(o.getInput()),
                        name(o.getOutput()), name(o.getIndices()),
                        shape[0] * shape[1], o.getStorageOrder() != 0,
                        loadFn(t), storeFn(elementOf(o.getOutput())));
        return success();
      })
      .Case([&](ampc::AveragePoolOp o) -> LogicalResult {
        Type t = elementOf(o.getInput());
        body << "  {\n";
        if (failed(emitWindow(op, o.getKernelShape(), o.getStrides(),
                              o.getPads(), o.getDilations(), body)))
          return failure();
        ArrayRef<int64_t> shape = tensorOf(o.getInput()).getShape();
        body << formatv("    ampc::cpu::averagePool<{0}>({1}, {2}, {3}LL, win, "
                        "{4}, {5}, {6});\n  }\n",
                        accumulatorType(t), name(o.getInput()),
                        name(o.getOutput()), shape[0] * shape[1],
                        o.getCountIncludePad() != 0, loadFn(t),
                        storeFn(elementOf(o.getOutput())));
        return success();
      })
      .Case([&](ampc::GlobalAveragePoolOp o) {
        Type t = elementOf(o.getInput());
        ArrayRef<int64_t> shape = tensorOf(o.getInput()).getShape();
        body << formatv("  ampc::cpu::globalAveragePool<{0}>({1}, {2}, {3}LL, "
                        "{4}LL, {5}, {6});\n",
                        accumulatorType(t), name(o.getInput()),
                        name(o.getOutput()), shape[0] * shape[1],
                        product(shape.drop_front(2)), loadFn(t),
                        storeFn(elementOf(o.getOutput())));
        return success();
      })
      .Case([&](ampc::ConvOp o) { return emitConv(o, body); })
      .Case([&](ampc::SoftmaxCrossEntropyLossOp o) {
        std::optional<int64_t> ignore;
        if (auto i = o.getIgnoreIndex())
          ignore = static_cast<int64_t>(*i);
        emitLoss(op, o.getScores(), o.getLabels(), o.getWeights(),
                 o.getReduction(), ignore, o.getLogProb(), body);
        return success();
      })
      .Case([&](ampc::NegativeLogLikelihoodLossOp o) {
        std::optional<int64_t> ignore;
        if (auto i = o.getIgnoreIndex())
          ignore = static_cast<int64_t>(*i);
        emitLoss(op, o.getInput(), o.getTarget(), o.getWeight(),
                 o.getReduction(), ignore, Value(), body);
        return success();
      })
      .Default([&](Operation *) { return emitGradientOp(op, body); });
}

LogicalResult Emitter::emitTrainingOp(Operation *op, llvm::raw_ostream &body) {
  // T: what the step computes in, float or double (f64 models).
  auto computeIn = [](Value v) { return accumulatorType(elementOf(v)); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::UnscaleOp o) {
        body << "  { const float inv = ampc::cpu::inverseScale("
             << load(elementOf(o.getScale()), name(o.getScale()) + "[0]")
             << "); bool found = false;\n";
        for (auto [g, u] : llvm::zip(o.getGrads(), o.getUnscaled()))
          body << formatv("    found |= ampc::cpu::unscale({0}, {1}, {2}LL, "
                          "inv);\n",
                          name(g), name(u), tensorOf(g).getNumElements());
        body << "    " << name(o.getFoundInf()) << "[0] = found; }\n";
        return success();
      })
      .Case([&](ampc::ClipGradNormOp o) {
        StringRef t = computeIn(o.getGrads()[0]);
        body << "  { " << t << " sum = 0;\n";
        for (Value g : o.getGrads())
          body << formatv("    sum += ampc::cpu::sumOfSquares({0}, {1}LL);\n",
                          name(g), tensorOf(g).getNumElements());
        body << formatv("    const {0} coef = std::min<{0}>({0}(1), {0}({1:e9}) "
                        "/ (std::sqrt(sum) + {0}(1e-6)));\n",
                        t, o.getMaxNorm().convertToFloat());
        for (auto [g, c] : llvm::zip(o.getGrads(), o.getClipped()))
          body << formatv("    for (int64_t i = 0; i < {0}LL; ++i) {1}[i] = "
                          "{2}[i] * coef;\n",
                          tensorOf(g).getNumElements(), name(c), name(g));
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::OptimizerUpdateOp o) {
        StringRef t = computeIn(o.getParam());
        int64_t count = tensorOf(o.getParam()).getNumElements();
        auto literal = [&](APFloat v) {
          return formatv("{0}({1:e9})", t, v.convertToFloat()).str();
        };
        std::string lr = formatv("{0}({1}[0])", t, name(o.getLr())).str();
        std::string step = name(o.getStep()) + "[0]";
        std::string skip =
            o.getFoundInf() ? name(o.getFoundInf()) + "[0]" : "false";
        int64_t bytes = count * storageSize(elementOf(o.getParam()));
        // A skipped step copies every input to its result, bit for bit.
        body << "  if (" << skip << ") {\n";
        body << formatv("    std::memcpy({0}, {1}, {2}ULL);\n",
                        name(o.getNewParam()), name(o.getParam()), bytes);
        for (auto [m, nm] : llvm::zip(o.getMoments(), o.getNewMoments()))
          body << formatv("    std::memcpy({0}, {1}, {2}ULL);\n", name(nm),
                          name(m), bytes);
        body << "  } else {\n";
        if (o.getKind() == "sgd") {
          bool hasBuffer = !o.getMoments().empty();
          body << formatv(
              "    ampc::cpu::sgdStep<{0}>({1}, {2}, {3}, {4}, {5}, {6}LL, "
              "{7}, {8}, {9}, {10}, {11}, {12});\n",
              t, name(o.getParam()), name(o.getGrad()),
              hasBuffer ? name(o.getMoments()[0]) : "nullptr",
              name(o.getNewParam()),
              hasBuffer ? name(o.getNewMoments()[0]) : "nullptr", count, lr,
              step, literal(o.getMomentum()), literal(o.getDampening()),
              o.getNesterov(), literal(o.getWeightDecay()));
        } else {
          body << formatv(
              "    ampc::cpu::adamStep<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, "
              "{8}LL, {9}, {10}, {11}, {12}, {13}, {14}, {15});\n",
              t, name(o.getParam()), name(o.getGrad()),
              name(o.getMoments()[0]), name(o.getMoments()[1]),
              name(o.getNewParam()), name(o.getNewMoments()[0]),
              name(o.getNewMoments()[1]), count, lr, step,
              literal(o.getBeta1()), literal(o.getBeta2()),
              literal(o.getEps()), literal(o.getWeightDecay()),
              o.getKind() == "adamw");
        }
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::UpdateScaleOp o) {
        body << formatv(
            "  ampc::cpu::updateScale({0}[0], {1}[0], {2}[0], {3:e9}f, "
            "{4:e9}f, {5}LL, {6:e9}f, {7:e9}f, {8}, {9});\n",
            name(o.getScale()), name(o.getGrowthTracker()),
            name(o.getFoundInf()), o.getGrowthFactor().convertToFloat(),
            o.getBackoffFactor().convertToFloat(), o.getGrowthInterval(),
            o.getMinScale().convertToFloat(), o.getMaxScale().convertToFloat(),
            name(o.getNewScale()), name(o.getNewGrowthTracker()));
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}

void Emitter::emitRefreshCopies() {
  os << "static void refreshCopies(unsigned char *state, int32_t parameter) {\n"
        "  (void)state; (void)parameter;\n";
  llvm::StringMap<int32_t> parameterIndex;
  for (auto p : module.getOps<ampc::ParameterOp>())
    parameterIndex[p.getSymName()] = parameterIndex.size();
  for (auto s : module.getOps<ampc::StateOp>()) {
    auto from = s.getDerivedFromAttr();
    if (!from)
      continue;
    auto t = cast<RankedTensorType>(s.getType());
    os << formatv("  if (parameter < 0 || parameter == {0}) {{\n"
                  "    const float *src = reinterpret_cast<const float *>(state "
                  "+ {1}); uint16_t *dst = reinterpret_cast<uint16_t *>(state "
                  "+ {2});\n"
                  "    for (int64_t i = 0; i < {3}LL; ++i) dst[i] = {4};\n  }\n",
                  parameterIndex.lookup(from.getValue()),
                  parameterOffsets.lookup(from.getValue()),
                  parameterOffsets.lookup(s.getSymName()), t.getNumElements(),
                  store(t.getElementType(), "src[i]"));
  }
  os << "}\n\n";
}

void Emitter::emitStateAccess() {
  // Parameters, then state that is not derived from a parameter.
  SmallVector<std::pair<StringRef, RankedTensorType>> tensors;
  for (auto p : module.getOps<ampc::ParameterOp>())
    tensors.push_back({p.getSymName(), cast<RankedTensorType>(p.getType())});
  int32_t numParameters = tensors.size();
  for (auto s : module.getOps<ampc::StateOp>())
    if (!s.getDerivedFromAttr())
      tensors.push_back({s.getSymName(), cast<RankedTensorType>(s.getType())});
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
  os << "static const ampc_abi_tensor stateTensors[] = {\n"
     << entries << "  {\"\", 0, 0, nullptr},\n};\n"
     << "static const int32_t kNumStateTensors = " << tensors.size() << ";\n"
     << "static const uint64_t kStateOffsets[] = {" << offsets << "0};\n"
     << "static const uint64_t kStateBytes[] = {" << sizes << "0};\n"
     << "static int32_t readState(void *raw, int32_t i, void *out) {\n"
        "  std::memcpy(out, static_cast<unsigned char *>(raw) + "
        "kStateOffsets[i], kStateBytes[i]);\n  return 0;\n}\n"
        "static int32_t writeState(void *raw, int32_t i, const void *in) {\n"
        "  std::memcpy(static_cast<unsigned char *>(raw) + kStateOffsets[i], "
        "in, kStateBytes[i]);\n"
     << "  if (i < " << numParameters
     << ") refreshCopies(static_cast<unsigned char *>(raw), i);\n"
        "  return 0;\n}\n\n";
}

void Emitter::layOut(StringRef symbol, RankedTensorType t,
                     ElementsAttr initial) {
  parameterOffsets[symbol] = stateSize;
  auto values = cast<DenseElementsAttr>(initial);
  blob.resize(stateSize, '\0');
  bool isFloat = isa<FloatType>(t.getElementType());
  for (int64_t i = 0, e = t.getNumElements(); i < e; ++i) {
    int64_t at = values.isSplat() ? 0 : i;
    APInt bits = isFloat ? values.getValues<APFloat>()[at].bitcastToAPInt()
                         : values.getValues<APInt>()[at];
    uint64_t word = bits.getZExtValue();
    blob.append(reinterpret_cast<const char *>(&word),
                static_cast<size_t>(storageSize(t.getElementType())));
  }
  stateSize =
      alignUp(stateSize + t.getNumElements() * storageSize(t.getElementType()));
}

void Emitter::emitDescriptor(func::FuncOp forward, func::FuncOp trainStep) {
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
    auto n = forward.getArgAttrOfType<StringAttr>(i, "ampc.name");
    return n ? n.str() : "input" + std::to_string(i);
  });
  tensors("output", forward.getResultTypes(), [&](unsigned i) {
    auto n = forward.getResultAttrOfType<StringAttr>(i, "ampc.name");
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
  bool training = trainStep && module->hasAttr(ampc::kOptimizerAttr);
  auto text = [&](StringRef attr) {
    auto s = module->getAttrOfType<StringAttr>(attr);
    return "\"" + cString(s ? s.getValue() : "") + "\"";
  };
  int32_t numLabels = 0;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    numLabels += forward.getArgAttr(i, "ampc.label") != nullptr;
  if (!options.onnxFile.empty())
    os << "extern \"C\" const unsigned char ampc_onnx_model[];\n"
          "asm(\".section .rodata\\n.balign 64\\n"
          ".type ampc_onnx_model, @object\\nampc_onnx_model:\\n.incbin \\\""
       << cString(options.onnxFile) << "\\\"\\n.previous\\n\");\n";
  std::string onnx =
      options.onnxFile.empty()
          ? std::string("nullptr, 0")
          : formatv("ampc_onnx_model, {0}ULL", options.onnxSize).str();
  std::string trainingFields =
      training ? formatv("kNumStateTensors, stateTensors, readState, "
                         "writeState, trainStep, {0}, {1}, {2}, {3}, {4}",
                         text(ampc::kOptimizerAttr),
                         text(ampc::kHyperparametersAttr),
                         text(ampc::kLossScalingAttr), numLabels, onnx)
                     .str()
               : formatv("0, nullptr, nullptr, nullptr, nullptr, nullptr, "
                         "nullptr, nullptr, {0}, {1}",
                         numLabels, onnx)
                     .str();
  os << formatv(R"(
static const ampc_model_abi kModel = {
  sizeof(ampc_model_abi), AMPC_ABI_VERSION,
  "{0}", "cpu", "{1}", "{8}",
  {2}, inputs, {3}, outputs, {4}, parameters,
  {5}ULL, init, infer, {6}, nullptr,
  {7},
  {9},
};

extern "C" AMPC_MODEL_EXPORT const ampc_model_abi *ampc_model_entry(void) {{
  return &kModel;
}
)",
                cString(options.modelName), options.precision,
                forward.getNumArguments(), forward.getNumResults(),
                paramTypes.size(), stateSize,
                errorSlot < 0 ? "nullptr" : "lastError",
                trainStep ? formatv("readParameter, writeParameter, {0}, "
                                    "kGradientParameters, {1}",
                                    numGradients,
                                    training ? "nullptr" : "gradients")
                                .str()
                          : std::string("nullptr, nullptr, 0, nullptr, nullptr"),
                trainStep ? "train" : "infer", trainingFields);
}

/// The parameter or state symbol whose storage `v` reads in place (a load,
/// or a view of one), or null.
static StringAttr storageSymbol(Value v) {
  while (auto r = dyn_cast<OpResult>(v)) {
    Operation *op = r.getOwner();
    if (auto load = dyn_cast<ampc::LoadParameterOp>(op))
      return load.getParameterAttr().getAttr();
    if (auto load = dyn_cast<ampc::LoadStateOp>(op))
      return load.getStateAttr().getAttr();
    if (!ampc::isViewResult(op, r.getResultNumber()))
      return {};
    v = op->getOperand(0);
  }
  return {};
}

LogicalResult Emitter::emitFunction(func::FuncOp f, llvm::raw_ostream &body) {
  names.clear();
  // Loads read the state in place, so a value read after a store to its
  // symbol would see the new value: the passes put every store after the
  // last read, and this checks it.
  llvm::DenseSet<StringAttr> stored;
  WalkResult order = f.walk([&](Operation *op) {
    for (Value v : op->getOperands())
      if (StringAttr symbol = storageSymbol(v); symbol && stored.contains(symbol)) {
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
  for (auto [i, arg] : llvm::enumerate(f.getArguments())) {
    Type t = elementOf(arg);
    std::string n = "in" + std::to_string(i);
    names[arg] = n;
    body << "  const " << storageType(t) << " *" << n << " = static_cast<const "
         << storageType(t) << " *>(inputs[" << i << "]);\n";
  }
  for (Operation &op : f.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        RankedTensorType t = tensorOf(v);
        body << "  std::memcpy(outputs[" << i << "], " << name(v) << ", "
             << t.getNumElements() * storageSize(t.getElementType())
             << "ULL);\n";
      }
      continue;
    }
    for (Type t : op.getResultTypes())
      if (!onnxDtype(cast<ShapedType>(t).getElementType()))
        return op.emitError() << "the CPU target cannot store " << t;
    // ampc::cpu::forEach keeps its multi-index in 16 slots.
    for (Value v : llvm::concat<Value>(op.getOperands(), op.getResults()))
      if (auto t = dyn_cast<RankedTensorType>(v.getType()); t && t.getRank() > 16)
        return op.emitError() << "the CPU target handles tensors of rank 16 "
                                 "at most, got "
                              << t;
    if (failed(emitOp(&op, body)))
      return failure();
  }
  return success();
}

LogicalResult Emitter::emitParameterAccess(func::FuncOp trainStep) {
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
        r, "ampc.gradient_of");
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
        "  std::memcpy(out, static_cast<unsigned char *>(raw) + "
        "kParameterOffsets[i], kParameterBytes[i]);\n  return 0;\n}\n"
        "static int32_t writeParameter(void *raw, int32_t i, const void *in) "
        "{\n"
        "  std::memcpy(static_cast<unsigned char *>(raw) + "
        "kParameterOffsets[i], in, kParameterBytes[i]);\n"
        "  refreshCopies(static_cast<unsigned char *>(raw), i);\n"
        "  return 0;\n}\n\n";
  return success();
}

LogicalResult Emitter::run() {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError() << "the CPU target needs a func @forward";

  // Parameters first in the state, in their storage format; `init` copies
  // them from the embedded blob, which has the same layout.
  for (auto p : module.getOps<ampc::ParameterOp>())
    layOut(p.getSymName(), cast<RankedTensorType>(p.getType()),
           p.getInitialValue());
  // Then the training state (optimizer moments, scaler, counters, copies).
  for (auto s : module.getOps<ampc::StateOp>())
    layOut(s.getSymName(), cast<RankedTensorType>(s.getType()),
           s.getInitialValue());
  // The blob holds every parameter's and state's initial value.
  int64_t parameterBytes = stateSize;
  blob.resize(parameterBytes, '\0');
  auto arena = forward->getAttrOfType<IntegerAttr>(ampc::kArenaBytesAttr);
  if (!arena)
    return forward.emitError() << "has no memory plan (ampc-plan-memory)";
  arenaBase = stateSize;
  stateSize = alignUp(stateSize + arena.getInt());

  // Every function runs in the same arena (the runtime never runs two
  // functions on one state at once), sized for the largest plan.
  auto trainStep = module.lookupSymbol<func::FuncOp>("train_step");
  int64_t arenaBytes = 0;
  for (func::FuncOp f : {forward, trainStep}) {
    if (!f)
      continue;
    auto arena = f->getAttrOfType<IntegerAttr>(ampc::kArenaBytesAttr);
    if (!arena)
      return f.emitError() << "has no memory plan (ampc-plan-memory)";
    arenaBytes = std::max<int64_t>(arenaBytes, arena.getInt());
  }
  arenaBase = stateSize;
  stateSize = alignUp(stateSize + arenaBytes);

  std::string inferText, gradientsText;
  llvm::raw_string_ostream inferBody(inferText), gradientsBody(gradientsText);
  if (failed(emitFunction(forward, inferBody)))
    return failure();
  if (trainStep) {
    if (trainStep.getArgumentTypes() != forward.getArgumentTypes())
      return trainStep.emitError()
             << "must take the arguments of @forward (the library has one "
                "list of inputs)";
    if (failed(emitFunction(trainStep, gradientsBody)))
      return failure();
  }

  os << "// Generated by ampc (CPU target). Model: " << options.modelName
     << "\n#include \"ampc/Runtime/CpuBackwardKernels.h\"\n"
        "#include \"ampc/Runtime/CpuTrainKernels.h\"\n"
        "#include \"ampc/Runtime/ModelAbi.h\"\n\n";
  if (parameterBytes) {
    os << "// The parameters' initial values, laid out as in the state.\n"
          "extern \"C\" const unsigned char ampc_parameter_blob[];\n"
          "asm(\".section .rodata\\n.balign 64\\n"
          ".type ampc_parameter_blob, @object\\n"
          "ampc_parameter_blob:\\n.incbin \\\""
       << cString(options.parameterFile)
       << "\\\"\\n.previous\\n\");\n\n";
  }
  emitRefreshCopies();
  os << constants << "\nstatic int32_t init(void *raw, const ampc_abi_config *) {\n";
  if (parameterBytes)
    os << "  std::memcpy(raw, ampc_parameter_blob, " << parameterBytes << "ULL);\n";
  os << "  refreshCopies(static_cast<unsigned char *>(raw), -1);\n";
  os << "  return 0;\n}\n\n";
  auto function = [&](StringRef name, StringRef body) {
    os << "static int32_t " << name
       << "(void *raw, const void *const *inputs, void *const *outputs) {\n"
          "  unsigned char *state = static_cast<unsigned char *>(raw);\n"
          "  (void)state; (void)inputs; (void)outputs;\n"
       << body << "  return 0;\n}\n\n";
  };
  function("infer", inferText);
  bool training = trainStep && module->hasAttr(ampc::kOptimizerAttr);
  if (trainStep) {
    function(training ? "trainStepBody" : "gradients", gradientsText);
    if (failed(emitParameterAccess(trainStep)))
      return failure();
  }
  if (training) {
    os << "static int32_t trainStep(void *raw, const void *const *inputs, "
          "void *loss) {\n  void *const outputs[] = {loss};\n"
          "  return trainStepBody(raw, inputs, outputs);\n}\n\n";
    emitStateAccess();
  }
  if (errorSlot >= 0)
    os << "\nstatic const char *lastError(void *raw) {\n"
          "  return ampc::cpu::lastError(static_cast<unsigned char *>(raw) + "
       << errorSlot << ");\n}\n";
  emitDescriptor(forward, trainStep);
  return success();
}

} // namespace

LogicalResult ampc::emitCpuSource(ModuleOp module,
                                  const CpuLibraryOptions &options,
                                  llvm::raw_ostream &source,
                                  std::string &parameters) {
  return Emitter(module, options, source, parameters).run();
}

bool ampc::compileCpuLibrary(StringRef sourcePath, StringRef output,
                             std::string &error) {
  std::string compiler = "c++";
  if (const char *cxx = std::getenv("CXX"); cxx && *cxx)
    compiler = cxx;
  auto program = llvm::sys::findProgramByName(compiler);
  if (!program) {
    error = "no C++ compiler '" + compiler + "' on PATH (set CXX)";
    return false;
  }
  llvm::SmallString<128> log;
  if (llvm::sys::fs::createTemporaryFile("ampc-cxx", "log", log)) {
    error = "cannot create a temporary file";
    return false;
  }
  llvm::FileRemover removeLog(log);
  std::string include = "-I" AMPC_RUNTIME_INCLUDE_DIR;
  SmallVector<StringRef> args = {*program,  "-O3", "-std=c++17", "-shared",
                                 "-fPIC", "-fvisibility=hidden", include,
                                 sourcePath, "-o", output, "-lopenblas"};
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // Hardware f16 conversions (CpuKernels.h) where this machine has them; a
  // library built here then needs F16C (every x86-64 CPU since 2012).
  if (__builtin_cpu_supports("f16c"))
    args.push_back("-mf16c");
#endif
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log),
                                          StringRef(log)};
  if (llvm::sys::ExecuteAndWait(*program, args, std::nullopt, redirects) != 0) {
    error = "the C++ compiler failed on " + sourcePath.str();
    if (auto text = llvm::MemoryBuffer::getFile(log)) {
      for (StringRef line : llvm::split((*text)->getBuffer(), '\n'))
        if (line.contains("error")) {
          error += ": " + line.trim().str();
          break;
        }
    }
    return false;
  }
  return true;
}
