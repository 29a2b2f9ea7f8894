//===- AMPCDialect.cpp - the ampc dialect ---------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Fp8.h"
#include "ampc/Dialect/Optimizers.h"
#include "ampc/Dialect/ShardOptimizer.h"
#include "ampc/Dialect/TensorSize.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace ampc;

#include "ampc/Dialect/AMPCOpsDialect.cpp.inc"
#include "ampc/Dialect/AMPCInterfaces.cpp.inc"
#include "ampc/Dialect/AMPCEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "ampc/Dialect/AMPCAttrs.cpp.inc"

void AMPCDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ampc/Dialect/AMPCAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ampc/Dialect/AMPCOps.cpp.inc"
      >();
}

Operation *AMPCDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

//===----------------------------------------------------------------------===//
// The discardable attributes of the passes (AMPCDialect.h)
//===----------------------------------------------------------------------===//

/// `ampc.offsets` on `op`: one entry per result, each -1 or an aligned
/// offset, and, once the function has its arena, inside it.
static LogicalResult verifyOffsets(Operation *op, Attribute value) {
  auto offsets = dyn_cast<DenseI64ArrayAttr>(value);
  if (!offsets)
    return op->emitOpError("'ampc.offsets' must be an array<i64>, got ")
           << value;
  if (offsets.size() != static_cast<int64_t>(op->getNumResults()))
    return op->emitOpError("'ampc.offsets' must have one entry per result (")
           << op->getNumResults() << "), got " << offsets.size();
  auto func = op->getParentOfType<func::FuncOp>();
  auto arena = func ? func->getAttrOfType<IntegerAttr>(kArenaBytesAttr)
                    : IntegerAttr();
  for (auto [i, offset] : llvm::enumerate(offsets.asArrayRef())) {
    if (offset == -1)
      continue;
    if (offset < 0 || offset % kBufferAlignment != 0)
      return op->emitOpError("'ampc.offsets' entries must be -1 or a "
                             "non-negative multiple of ")
             << kBufferAlignment << ", got " << offset << " for result #"
             << i;
    auto type = dyn_cast<ShapedType>(op->getResult(i).getType());
    std::optional<int64_t> bytes =
        type ? checkedByteSize(type) : std::optional<int64_t>();
    // Tensors are at most kMaxTensorBytes (BoundedTensors), so the sum of
    // two of them cannot overflow.
    if (arena && bytes && offset > arena.getInt() - *bytes)
      return op->emitOpError("'ampc.offsets' puts result #")
             << i << " (" << *bytes << " bytes at offset " << offset
             << ") past the arena of @" << func.getSymName() << " ("
             << arena.getInt() << " bytes)";
  }
  return success();
}

LogicalResult AMPCDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  auto isModule = isa<ModuleOp>(op);
  if (name == kAutocastAttr) {
    if (!isa<UnitAttr>(value) || !isa<CastOp>(op))
      return op->emitOpError("'ampc.autocast' must be a unit attribute on an "
                             "ampc.cast");
    return success();
  }
  if (name == kLossSeedAttr) {
    if (!isa<UnitAttr>(value) || !isa<ConstantOp>(op))
      return op->emitOpError("'ampc.loss_seed' must be a unit attribute on "
                             "an ampc.constant");
    return success();
  }
  if (name == kAttentionSavesAttr) {
    auto bytes = dyn_cast<IntegerAttr>(value);
    if (!bytes || !bytes.getType().isInteger(64) || bytes.getInt() < 0 ||
        !isa<AttentionOp>(op))
      return op->emitOpError("'ampc.attention_saves' must be a non-negative "
                             "i64 (bytes) on an ampc.attention");
    return success();
  }
  if (name == kAttentionMergedHeadsAttr) {
    if (!isa<UnitAttr>(value) || !isa<AttentionOp>(op))
      return op->emitOpError("'ampc.attention_merged_heads' must be a unit "
                             "attribute on an ampc.attention");
    return success();
  }
  if (name == kAttentionUnfusedAttr) {
    if (!isa<StringAttr>(value) || !isa<SoftmaxOp>(op))
      return op->emitOpError("'ampc.attention_unfused' must be a string (the "
                             "reason) on an ampc.softmax");
    return success();
  }
  if (name == kFrozenAttr) {
    if (!isa<UnitAttr, StringAttr>(value) || !isa<ParameterOp>(op))
      return op->emitOpError("'ampc.frozen' must be a unit attribute or a "
                             "reason (a string) on an ampc.parameter");
    return success();
  }
  if (name == kBufferAttr) {
    if (!isa<UnitAttr>(value) || !isa<StateOp>(op))
      return op->emitOpError("'ampc.buffer' must be a unit attribute on an "
                             "ampc.state");
    return success();
  }
  if (name == kBatchRowsAttr) {
    if (!isa<UnitAttr>(value) || !isa<ConstantOp>(op))
      return op->emitOpError("'ampc.batch_rows' must be a unit attribute on "
                             "an ampc.constant");
    return success();
  }
  if (name == kPartialBatchesAttr) {
    if (!isModule || !isa<StringAttr>(value))
      return op->emitOpError("'ampc.partial_batches' must be a string on "
                             "the module, got ")
             << value;
    return success();
  }
  if (name == kFp8Attr) {
    auto dict = dyn_cast<DictionaryAttr>(value);
    auto format = dict ? dict.getAs<StringAttr>("format") : StringAttr();
    auto reason = dict ? dict.getAs<StringAttr>("reason") : StringAttr();
    if (!dict || dict.size() != 2 || !format || !reason ||
        !isFp8Format(format.getValue()) || reason.getValue().empty() ||
        !isa<GemmOp, MatMulOp, BatchedGemmOp>(op))
      return op->emitOpError("'ampc.fp8' must be {format = \"hybrid\", "
                             "\"e4m3\" or \"bf16\", reason = a non-empty "
                             "string} on an ampc.gemm, ampc.matmul or "
                             "ampc.batched_gemm, got ")
             << value;
    return success();
  }
  if (name == kFp8RecipeAttr) {
    auto dict = dyn_cast<DictionaryAttr>(value);
    auto history = dict ? dict.getAs<IntegerAttr>("amax_history")
                        : IntegerAttr();
    auto margin = dict ? dict.getAs<IntegerAttr>("margin") : IntegerAttr();
    auto algo = dict ? dict.getAs<StringAttr>("amax_algo") : StringAttr();
    if (!isModule || !dict || dict.size() != 3 || !history || !margin ||
        !algo || history.getInt() < 1 ||
        history.getInt() > kFp8MaxAmaxHistory || margin.getInt() < 0 ||
        margin.getInt() > kFp8MaxMargin || !isFp8AmaxAlgo(algo.getValue()))
      return op->emitOpError("'ampc.fp8_recipe' must be {amax_history = 1.."
                             "65536, margin = 0..127, amax_algo = \"max\" or "
                             "\"most_recent\"} on the module, got ")
             << value;
    return success();
  }
  if (name == kGemmShapeAttr) {
    // On the Gemm ampc-pad-gemms decided for, the batched_gemm
    // ampc-fold-transposes makes of it (kernel level), and the
    // convolution ampc-pad-channels decided for.
    if (!isa<StringAttr>(value) || !isa<GemmOp, BatchedGemmOp, ConvOp>(op))
      return op->emitOpError("'ampc.gemm_shape' must be a string on an "
                             "ampc.gemm, ampc.batched_gemm or ampc.conv");
    return success();
  }
  if (name == kLayoutAttr) {
    if (!isa<StringAttr>(value) ||
        !isa<TransposeOp, ReshapeOp, ReduceMeanOp>(op))
      return op->emitOpError("'ampc.layout' must be a string on an "
                             "ampc.transpose, ampc.reshape or "
                             "ampc.reduce_mean");
    return success();
  }
  if (name == kPaddingAttr) {
    if (!isa<UnitAttr>(value) || !isa<ConcatOp, SliceOp>(op))
      return op->emitOpError("'ampc.padding' must be a unit attribute on an "
                             "ampc.concat or ampc.slice");
    return success();
  }
  if (name == kAlignmentAttr) {
    auto dict = dyn_cast<DictionaryAttr>(value);
    bool ok = dict && isa<GemmOp, BatchedGemmOp, MatMulOp>(op) &&
              dict.size() == 4 && isa_and_nonnull<IntegerAttr>(dict.get("needs"));
    for (StringRef d : {"m", "n", "k"}) {
      auto entry = dict ? dyn_cast_or_null<DenseI64ArrayAttr>(dict.get(d))
                        : DenseI64ArrayAttr();
      ok = ok && entry && entry.size() == 2;
    }
    if (!ok)
      return op->emitOpError("'ampc.alignment' must be {m, n, k = "
                             "array<i64: dim, alignment>, needs = i64} on "
                             "an ampc.gemm, batched_gemm or matmul, got ")
             << value;
    return success();
  }
  if (name == kPrecisionAttr) {
    if (!isa<PrecisionDecisionAttr>(value))
      return op->emitOpError("'ampc.precision' must be a precision decision "
                             "(#ampc.precision<...>), got ")
             << value;
    return success();
  }
  if (name == kOffsetsAttr)
    return verifyOffsets(op, value);
  if (name == kArenaBytesAttr) {
    auto bytes = dyn_cast<IntegerAttr>(value);
    if (!isa<func::FuncOp>(op) || !bytes || !bytes.getType().isInteger(64) ||
        bytes.getInt() < 0)
      return op->emitOpError("'ampc.arena_bytes' must be a non-negative i64 "
                             "on a function, got ")
             << value;
    return success();
  }
  if (name == kGuardBytesAttr) {
    auto bytes = dyn_cast<IntegerAttr>(value);
    if (!isa<func::FuncOp>(op) || !bytes || !bytes.getType().isInteger(64) ||
        bytes.getInt() <= 0)
      return op->emitOpError("'ampc.guard_bytes' must be a positive i64 on "
                             "a function, got ")
             << value;
    return success();
  }
  if (name == kOverlapAttr) {
    auto count = dyn_cast<IntegerAttr>(value);
    if (!isa<AllReduceStartOp>(op) || !count ||
        !count.getType().isInteger(64) || count.getInt() < 0)
      return op->emitOpError("'ampc.overlap' must be a non-negative i64 on "
                             "an ampc.all_reduce_start, got ")
             << value;
    return success();
  }
  if (name == kSyncRequestAttr) {
    auto request = dyn_cast<IntegerAttr>(value);
    auto bn = dyn_cast<BatchNormalizationOp>(op);
    auto grad = dyn_cast<BatchNormGradOp>(op);
    if (!request || !request.getType().isInteger(64) || request.getInt() < 0 ||
        request.getInt() > INT32_MAX ||
        !((bn && bn.getTrainingMode() != 0) ||
          (grad && grad.getTrainingMode() != 0)))
      return op->emitOpError("'ampc.sync_request' must be an i64 request "
                             "number in [0, 2^31) on a training-mode "
                             "ampc.batch_normalization or "
                             "ampc.batch_norm_grad, got ")
             << value;
    return success();
  }
  if (name == kShardOptimizerAttr) {
    if (!isa<AllReduceStartOp, ModuleOp>(op) || !isa<UnitAttr>(value))
      return op->emitOpError("'ampc.shard_optimizer' must be a unit "
                             "attribute on a module or an "
                             "ampc.all_reduce_start, got ")
             << value;
    return success();
  }
  if (name == kErrorSlotAttr) {
    auto offset = dyn_cast<IntegerAttr>(value);
    if (!isa<func::FuncOp>(op) || !offset || !offset.getType().isInteger(64) ||
        offset.getInt() < 0 || offset.getInt() % kBufferAlignment != 0)
      return op->emitOpError("'ampc.error_slot' must be an i64 multiple of ")
             << kBufferAlignment << " on a function, got " << value;
    return success();
  }
  if (name == kScratchAttr) {
    auto block = dyn_cast<DenseI64ArrayAttr>(value);
    if (isa<func::FuncOp, ModuleOp>(op) || !block || block.size() != 2 ||
        block[0] < 0 || block[0] % kBufferAlignment != 0 || block[1] <= 0)
      return op->emitOpError("'ampc.scratch' must be array<i64: offset, "
                             "bytes> with the offset a multiple of ")
             << kBufferAlignment << " and bytes positive, got " << value;
    return success();
  }
  if (name == kInputOffsetsAttr) {
    auto func = dyn_cast<func::FuncOp>(op);
    auto offsets = dyn_cast<DenseI64ArrayAttr>(value);
    if (!func || !offsets ||
        offsets.size() != static_cast<int64_t>(func.getNumArguments()))
      return op->emitOpError("'ampc.input_offsets' must be an array<i64> "
                             "with one entry per argument of a function, "
                             "got ")
             << value;
    return success();
  }
  if (name == kAccumulateAttr) {
    auto type = dyn_cast<TypeAttr>(value);
    if (!op->hasTrait<Accumulating>() || !type ||
        !(type.getValue().isF32() || type.getValue().isF64() ||
          type.getValue().isInteger(64)))
      return op->emitOpError("'ampc.accumulate' must be f32, f64, i64 or "
                             "ui64 on an op that accumulates, got ")
             << value;
    return success();
  }
  if (name == kLaunchAttr) {
    // The keys and their types; which keys an op takes on a target is
    // ampc::emit::launchKeys' (KernelGeometry.h), checked before use.
    auto launch = dyn_cast<DictionaryAttr>(value);
    auto valid = [](NamedAttribute entry) {
      StringRef key = entry.getName().getValue();
      Attribute v = entry.getValue();
      if (key == "parallelism")
        return isa<StringAttr>(v);
      if (key == "cudnn" || key == "log_prob")
        return isa<BoolAttr>(v);
      static constexpr llvm::StringLiteral counts[] = {
          "splits",          "threads",  "groups", "partials",
          "images_per_gemm", "workspace"};
      auto count = dyn_cast<IntegerAttr>(v);
      // A clipping of no gradients has no partial sums; a convolution
      // cuDNN does not run has no workspace.
      bool maybeZero = key == "partials" || key == "workspace";
      return llvm::is_contained(counts, key) && count &&
             count.getType().isInteger(64) &&
             count.getInt() >= (maybeZero ? 0 : 1);
    };
    if (isa<func::FuncOp, ModuleOp>(op) || !launch ||
        !llvm::all_of(launch, valid))
      return op->emitOpError("'ampc.launch' must be a dictionary of launch "
                             "decisions (parallelism: a string; cudnn, "
                             "log_prob: bools; splits, threads, groups, "
                             "images_per_gemm: positive i64; partials, "
                             "workspace: non-negative i64), got ")
             << value;
    return success();
  }
  if (name == kLossScalingAttr) {
    if (!isModule || !isa<LossScalingModeAttr>(value))
      return op->emitOpError("'ampc.loss_scaling' must be a loss-scaling "
                             "mode (#ampc<loss_scaling ...>) on the module, "
                             "got ")
             << value;
    return success();
  }
  if (name == kOptimizerAttr) {
    auto kind = dyn_cast<OptimizerKindAttr>(value);
    if (!isModule || !kind || !optimizerFacts(kind.getValue()))
      return op->emitOpError("'ampc.optimizer' must be ")
             << optimizerKindList()
             << " (#ampc<optimizer ...>) on the module, got " << value;
    return success();
  }
  if (name == kHyperparametersAttr) {
    if (!isModule || !isa<StringAttr>(value))
      return op->emitOpError("'ampc.hyperparameters' must be a string on "
                             "the module, got ")
             << value;
    return success();
  }
  if (name == kNameAttr || name == kLabelAttr || name == kGradientOfAttr)
    return op->emitOpError("has the function argument or result attribute '")
           << name << "' as an attribute of its own";
  return op->emitOpError("has an unknown attribute '")
         << name << "' in the ampc namespace";
}

/// `ampc.name` on a function argument or result: the ONNX name.
static LogicalResult verifyName(Operation *op, Attribute value,
                                StringRef where, unsigned index) {
  if (!isa<StringAttr>(value))
    return op->emitOpError("'ampc.name' must be a string, got ")
           << value << " on " << where << " #" << index;
  return success();
}

LogicalResult AMPCDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  if (name == kNameAttr)
    return verifyName(op, value, "argument", argIndex);
  if (name == kLabelAttr) {
    if (!isa<UnitAttr>(value))
      return op->emitOpError("'ampc.label' must be a unit attribute, got ")
             << value << " on argument #" << argIndex;
    return success();
  }
  if (name == kInputPrecisionAttr) {
    if (!isa<StringAttr>(value))
      return op->emitOpError("'ampc.input_precision' must be a string (why "
                             "the input has its type), got ")
             << value << " on argument #" << argIndex;
    return success();
  }
  return op->emitOpError("has an unknown argument attribute '")
         << name << "' on argument #" << argIndex;
}

LogicalResult AMPCDialect::verifyRegionResultAttribute(
    Operation *op, unsigned regionIndex, unsigned resultIndex,
    NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  if (name == kNameAttr)
    return verifyName(op, value, "result", resultIndex);
  if (name == kGradientOfAttr) {
    auto ref = dyn_cast<FlatSymbolRefAttr>(value);
    if (!ref)
      return op->emitOpError("'ampc.gradient_of' must name a parameter "
                             "(@name), got ")
             << value << " on result #" << resultIndex;
    auto param = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(op, ref);
    if (!param)
      return op->emitOpError("'ampc.gradient_of' names no ampc.parameter: ")
             << ref << " on result #" << resultIndex;
    auto function = dyn_cast<FunctionOpInterface>(op);
    if (function && resultIndex < function.getNumResults() &&
        function.getResultTypes()[resultIndex] != param.getType())
      return op->emitOpError("'ampc.gradient_of' needs the parameter's type: ")
             << ref << " is " << param.getType() << ", result #"
             << resultIndex << " is "
             << function.getResultTypes()[resultIndex];
    return success();
  }
  return op->emitOpError("has an unknown result attribute '")
         << name << "' on result #" << resultIndex;
}

std::string ampc::nodeDescription(Operation *op) {
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

std::optional<int64_t> ampc::normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

std::optional<SmallVector<int64_t>>
ampc::broadcastShapes(ArrayRef<ArrayRef<int64_t>> shapes) {
  size_t rank = 0;
  for (ArrayRef<int64_t> s : shapes)
    rank = std::max(rank, s.size());
  SmallVector<int64_t> result(rank, 1);
  for (ArrayRef<int64_t> s : shapes) {
    size_t offset = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &r = result[offset + i];
      if (s[i] == r || s[i] == 1)
        continue;
      if (r != 1)
        return std::nullopt;
      r = s[i];
    }
  }
  return result;
}

SmallVector<int64_t, 4>
ampc::attentionLogicalShape(ArrayRef<int64_t> physical, ArrayRef<int64_t> perm) {
  SmallVector<int64_t, 4> logical;
  for (int64_t p : perm)
    logical.push_back(physical[p]);
  return logical;
}

SmallVector<int64_t, 4>
ampc::attentionLogicalStrides(ArrayRef<int64_t> physical,
                              ArrayRef<int64_t> perm) {
  SmallVector<int64_t, 4> strides(physical.size(), 1);
  for (int64_t i = static_cast<int64_t>(physical.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * physical[i + 1];
  SmallVector<int64_t, 4> logical;
  for (int64_t p : perm)
    logical.push_back(strides[p]);
  return logical;
}

SmallVector<int64_t, 4>
ampc::attentionPhysicalShape(ArrayRef<int64_t> logical, ArrayRef<int64_t> perm) {
  SmallVector<int64_t, 4> physical(logical.size());
  for (auto [l, p] : llvm::enumerate(perm))
    physical[p] = logical[l];
  return physical;
}
