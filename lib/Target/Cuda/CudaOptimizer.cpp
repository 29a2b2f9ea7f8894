//===- CudaOptimizer.cpp - the step's state written in place ----------------===//
//
// The end of a training step stores every parameter's new FP32 master, its
// moments, its FP16/BF16 copies and the scaler's state (ampc.store). Written
// as planned, each result has a buffer of its own and each store is a
// device-to-device copy. Here the CUDA target writes them in place instead:
//  - the optimizer updates run as one multi-tensor kernel
//    (ampc::cuda::optimizerStep) at the first update, over every parameter,
//    updating masters and moments in place and writing the weight copies
//    (the casts of the new masters) in the same pass;
//  - any other stored result (the scale update, the step counts) is bound
//    to its store's slot, so its kernel writes the state directly;
// and a store whose value already lives in its slot emits nothing. A result
// goes in place only when that cannot change what any op reads: its slot is
// stored once, no op after the write reads the slot's old value (loads read
// the state in place), and a producer that reads the slot itself reads each
// element before writing it (an elementwise kernel over the same shape, an
// optimizer update paired with its own state, the one-thread scale update).
// The CPU target keeps its copies; the numbers are the same.
//
//===----------------------------------------------------------------------===//

#include "CudaEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/ChannelsLast.h"
#include "ampc/Transforms/MemoryPlan.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace ampc::emit;
using namespace ampc::cudagen;
using llvm::formatv;

namespace {
/// The FP16/BF16 copy a fused optimizer writes: `v`'s one user is a cast
/// (alone or as a fusion of one cast) to f16/bf16; that cast's op, or null.
Operation *weightCopyCast(Operation *user) {
  Operation *inner = user;
  if (auto fusion = dyn_cast<ampc::FusionOp>(user)) {
    auto ops = fusion.getBody().front().without_terminator();
    if (std::distance(ops.begin(), ops.end()) != 1 ||
        fusion.getInputs().size() != 1)
      return nullptr;
    inner = &*ops.begin();
  }
  auto c = dyn_cast<ampc::CastOp>(inner);
  if (!c)
    return nullptr;
  Type to = c.getOutput().getType().getElementType();
  Type from = c.getInput().getType().getElementType();
  if (!(to.isF16() || to.isBF16()) || !(from.isF32() || from.isF64()))
    return nullptr;
  return user;
}

/// The transpose of a weight copy to a channels-last copy's layout (M, C,
/// k...) -> (M, k..., C) (ampc-attach-optimizer), the copy's one reader;
/// null otherwise.
ampc::TransposeOp channelsLastCopy(Value copy) {
  if (!copy.hasOneUse())
    return {};
  auto t = dyn_cast<ampc::TransposeOp>(*copy.getUsers().begin());
  if (!t)
    return {};
  int64_t rank = t.getPerm().size();
  return rank >= 3 && t.getPerm() == ArrayRef<int64_t>(
                                         ampc::channelsLastPerm(rank))
             ? t
             : ampc::TransposeOp();
}
} // namespace

void CudaEmitter::planInPlace(func::FuncOp f) {
  inPlace.clear();
  fusedUpdates.clear();
  fusedAt = nullptr;
  folded.clear();
  Block &block = f.getBody().front();
  llvm::DenseMap<Operation *, int64_t> position;
  int64_t next = 0;
  for (Operation &op : block)
    position[&op] = next++;
  // Each symbol's stores and the ops that read it (its loads' users).
  llvm::DenseMap<StringAttr, SmallVector<ampc::StoreOp>> stores;
  llvm::DenseMap<StringAttr, SmallVector<Operation *>> readers;
  for (Operation &op : block) {
    if (auto s = dyn_cast<ampc::StoreOp>(op))
      stores[s.getTargetAttr().getAttr()].push_back(s);
    for (Value v : op.getOperands())
      for (StringAttr symbol : ampc::storageSymbols(v))
        readers[symbol].push_back(&op);
  }
  // The slot `v` is stored to, when `v`'s only store is that slot's only
  // one; null otherwise.
  auto storedOnce = [&](Value v) -> StringAttr {
    ampc::StoreOp found;
    for (Operation *user : v.getUsers())
      if (auto s = dyn_cast<ampc::StoreOp>(user)) {
        if (found)
          return {};
        found = s;
      }
    if (!found)
      return {};
    StringAttr symbol = found.getTargetAttr().getAttr();
    if (stores.lookup(symbol).size() != 1 ||
        !parameterOffsets.count(symbol.getValue()))
      return {};
    return symbol;
  };
  // Where each op's writes happen: the fused updates' at the launch.
  auto at = [&](Operation *op) {
    return folded.contains(op) || op == fusedAt ? position.lookup(fusedAt)
                                                : position.lookup(op);
  };
  // Whether an op other than those in `writers` reads `symbol` after
  // position `from`.
  auto readAfter = [&](StringAttr symbol, int64_t from,
                       llvm::function_ref<bool(Operation *)> writers) {
    return llvm::any_of(readers.lookup(symbol), [&](Operation *reader) {
      return !writers(reader) && at(reader) > from;
    });
  };
  auto offsetOf = [&](StringAttr symbol) {
    return parameterOffsets.lookup(symbol.getValue());
  };

  // The optimizer updates as one launch: one kind, nesterov flag, step and
  // found_inf (each tensor carries its group's hyperparameters), every
  // result stored once to the state it was read from, the new master's
  // other users casts to its stored weight copies.
  SmallVector<ampc::OptimizerUpdateOp> updates;
  for (Operation &op : block)
    if (auto u = dyn_cast<ampc::OptimizerUpdateOp>(op))
      updates.push_back(u);
  auto fuse = [&]() -> bool {
    if (updates.empty())
      return false;
    ampc::OptimizerUpdateOp first = updates.front();
    int64_t launchAt = position.lookup(first);
    llvm::DenseMap<Value, int64_t> slots;
    SmallVector<std::pair<Operation *, SmallVector<Value>>> group;
    llvm::DenseSet<Operation *> members;
    for (ampc::OptimizerUpdateOp u : updates) {
      if (u.getKind() != first.getKind() ||
          u.getNesterov() != first.getNesterov() ||
          u.getStep() != first.getStep() ||
          u.getFoundInf() != first.getFoundInf() ||
          elementOf(u.getParam()) != elementOf(first.getParam()) ||
          u.getMoments().size() > 2)
        return false;
      // Every input is there at the launch.
      for (Value in : u->getOperands()) {
        Operation *def = in.getDefiningOp();
        if (def && !ampc::storageSymbol(in) &&
            position.lookup(def) >= launchAt)
          return false;
      }
      // Each result back into the state it was read from.
      SmallVector<std::pair<Value, Value>> pairs = {
          {u.getParam(), u.getNewParam()}};
      for (auto [m, n] : llvm::zip(u.getMoments(), u.getNewMoments()))
        pairs.push_back({m, n});
      for (auto [in, out] : pairs) {
        StringAttr symbol = storedOnce(out);
        if (!symbol || ampc::storageSymbol(in) != symbol)
          return false;
        slots[out] = offsetOf(symbol);
      }
      for (Value out : u.getNewMoments())
        if (!llvm::all_of(out.getUsers(),
                          [](Operation *user) { return isa<ampc::StoreOp>(user); }))
          return false;
      SmallVector<Value> copies;
      for (Operation *user : u.getNewParam().getUsers()) {
        if (isa<ampc::StoreOp>(user))
          continue;
        Operation *castOp = weightCopyCast(user);
        if (!castOp)
          return false;
        Value copy = castOp->getResult(0);
        // A channels-last copy: the kernel writes each element at its
        // transposed place (math::weightCopyIndex).
        if (ampc::TransposeOp t = channelsLastCopy(copy)) {
          members.insert(t);
          copy = t.getOutput();
        }
        StringAttr symbol = storedOnce(copy);
        if (!symbol || !llvm::all_of(copy.getUsers(), [](Operation *c) {
              return isa<ampc::StoreOp>(c);
            }))
          return false;
        Type t = cast<ShapedType>(copy.getType()).getElementType();
        if (llvm::any_of(copies, [&](Value c) {
              return cast<ShapedType>(c.getType()).getElementType() == t ||
                     static_cast<bool>(c.getDefiningOp<ampc::TransposeOp>()) !=
                         static_cast<bool>(copy.getDefiningOp<ampc::TransposeOp>());
            }))
          return false;
        slots[copy] = offsetOf(symbol);
        copies.push_back(copy);
        members.insert(castOp);
      }
      // The other inputs read no state the launch writes (checked below
      // for every reader).
      members.insert(u);
      group.push_back({u, std::move(copies)});
    }
    // Nothing after the launch reads a slot it writes; an update reads one
    // only as its own parameter or moment (each element before its write).
    for (auto &[value, offset] : slots) {
      StringAttr symbol = storedOnce(value);
      for (Operation *reader : readers.lookup(symbol)) {
        if (!members.contains(reader)) {
          if (position.lookup(reader) >= launchAt)
            return false;
          continue;
        }
        auto u = dyn_cast<ampc::OptimizerUpdateOp>(reader);
        if (!u)
          return false;
        unsigned firstMoment = u->getNumOperands() - u.getMoments().size();
        for (OpOperand &use : reader->getOpOperands())
          if (ampc::storageSymbol(use.get()) == symbol &&
              use.getOperandNumber() != 0 &&
              use.getOperandNumber() < firstMoment)
            return false;
      }
    }
    fusedAt = first;
    for (Operation *m : members)
      if (m != first)
        folded.insert(m);
    fusedUpdates = std::move(group);
    for (auto &[value, offset] : slots)
      inPlace[value] = offset;
    return true;
  };
  fuse();

  // Every other stored result, in place where that is safe.
  for (Operation &op : block) {
    auto s = dyn_cast<ampc::StoreOp>(op);
    if (!s)
      continue;
    Value v = s.getValue();
    auto result = dyn_cast<OpResult>(v);
    if (!result || inPlace.count(v))
      continue;
    Operation *producer = result.getOwner();
    if (producer == fusedAt || folded.contains(producer) ||
        ampc::isViewResult(producer, result.getResultNumber()) ||
        !ampc::planOffset(v))
      continue;
    StringAttr symbol = storedOnce(v);
    if (!symbol || symbol != s.getTargetAttr().getAttr())
      continue;
    if (readAfter(symbol, at(producer),
                  [&](Operation *reader) { return reader == producer; }))
      continue;
    // A producer reading the slot it writes: each element read before it
    // is written.
    bool reads = llvm::any_of(producer->getOperands(), [&](Value in) {
      return ampc::storageSymbol(in) == symbol;
    });
    if (reads) {
      bool elementwise =
          (producer->hasTrait<ampc::Elementwise>() ||
           isa<ampc::FusionOp>(producer)) &&
          llvm::all_of(producer->getOperands(), [&](Value in) {
            return ampc::storageSymbol(in) != symbol ||
                   cast<ShapedType>(in.getType()).getShape() ==
                       cast<ShapedType>(v.getType()).getShape();
          });
      bool paired = false;
      if (isa<ampc::UpdateScaleOp>(producer))
        paired = true; // one thread, reads before it writes
      else if (auto bn = dyn_cast<ampc::BatchNormalizationOp>(producer);
               bn && bn.getTrainingMode() != 0) {
        // BatchNorm's running statistics in training mode: each channel's
        // old value read and its new one written by the same thread, and
        // by no other (the inference kernels read them everywhere).
        paired = llvm::all_of(producer->getOpOperands(), [&](OpOperand &in) {
          if (ampc::storageSymbol(in.get()) != symbol)
            return true;
          return (&in == &bn.getInputMeanMutable() &&
                  v == bn.getRunningMean()) ||
                 (&in == &bn.getInputVarMutable() && v == bn.getRunningVar());
        });
      }
      else if (auto u = dyn_cast<ampc::OptimizerUpdateOp>(producer)) {
        // The per-parameter kernels: the parameter (operand 0) into the
        // new parameter, moment k into new moment k.
        unsigned firstMoment = u->getNumOperands() - u.getMoments().size();
        paired = llvm::all_of(producer->getOpOperands(), [&](OpOperand &in) {
          if (ampc::storageSymbol(in.get()) != symbol)
            return true;
          unsigned n = in.getOperandNumber();
          if (n == 0)
            return v == u.getNewParam();
          return n >= firstMoment && v == u.getNewMoments()[n - firstMoment];
        });
      }
      if (!elementwise && !paired)
        continue;
    }
    inPlace[v] = offsetOf(symbol);
  }
}

LogicalResult CudaEmitter::emitFusedOptimizer(Operation *op,
                                              llvm::raw_ostream &body) {
  auto first = cast<ampc::OptimizerUpdateOp>(op);
  StringRef t = accumulatorType(elementOf(first.getParam()));
  auto literal = [&](APFloat v) {
    return formatv("{0}({1:e9})", t, v.convertToFloat()).str();
  };
  auto offset = [&](Value v) -> std::string {
    if (!v)
      return "ampc::cuda::kNoTensor";
    if (auto it = inPlace.find(v); it != inPlace.end())
      return std::to_string(it->second) + "ULL";
    return std::to_string(stateOffsets.lookup(v)) + "ULL";
  };
  for (auto &[u, copies] : fusedUpdates)
    for (Value in : {cast<ampc::OptimizerUpdateOp>(u).getGrad(),
                     cast<ampc::OptimizerUpdateOp>(u).getLr()})
      if (!stateOffsets.count(in))
        return u->emitError() << "the fused optimizer reads an input with no "
                                 "place in the state";
  body << formatv("  static const ampc::cuda::OptimizerHyper<{0}> hyper{1} = "
                  "{{{2}, {3}, {4}};\n",
                  t, counter, first.getKind() != ampc::OptimizerKind::Sgd,
                  first.getKind() == ampc::OptimizerKind::Adamw,
                  first.getNesterov());
  std::string hyper = "hyper" + std::to_string(counter++);
  std::string found = first.getFoundInf()
                          ? "reinterpret_cast<const uint8_t *>(" +
                                name(first.getFoundInf()) + ")"
                          : "nullptr";
  for (size_t begin = 0; begin < fusedUpdates.size(); begin += 128) {
    size_t end = std::min(fusedUpdates.size(), begin + 128);
    constexpr int kFields = 16;
    std::string fields[kFields];
    SmallVector<int64_t> sizes;
    for (size_t k = begin; k < end; ++k) {
      auto u = cast<ampc::OptimizerUpdateOp>(fusedUpdates[k].first);
      Value f16, bf16;
      for (Value c : fusedUpdates[k].second)
        (elementOf(c).isF16() ? f16 : bf16) = c;
      auto moment = [&](unsigned m) {
        return m < u.getNewMoments().size() ? u.getNewMoments()[m] : Value();
      };
      int64_t count = tensorOf(u.getParam()).getNumElements();
      sizes.push_back(count);
      // The copies' layout (one for both, planInPlace checks).
      int64_t channels = 0, spatial = 0;
      if (Value c = f16 ? f16 : bf16; c && c.getDefiningOp<ampc::TransposeOp>())
        std::tie(channels, spatial) =
            ampc::channelsLastLayout(tensorOf(c).getShape());
      // In OptimizerList's order.
      std::string row[kFields] = {offset(u.getNewParam()),
                                  offset(u.getGrad()),
                                  offset(moment(0)),
                                  offset(moment(1)),
                                  offset(f16),
                                  offset(bf16),
                                  offset(u.getLr()),
                                  literal(u.getWeightDecay()),
                                  literal(u.getMomentum()),
                                  literal(u.getDampening()),
                                  literal(u.getBeta1()),
                                  literal(u.getBeta2()),
                                  literal(u.getEps()),
                                  std::to_string(count) + "LL",
                                  std::to_string(channels) + "LL",
                                  std::to_string(spatial) + "LL"};
      for (int f = 0; f < kFields; ++f)
        fields[f] += row[f] + ", ";
    }
    std::string list = "list" + std::to_string(counter++);
    body << formatv("  static const ampc::cuda::OptimizerList<{0}> {1} = "
                    "{{{2}",
                    t, list, end - begin);
    for (const std::string &f : fields)
      body << ", {" << f << "}";
    int64_t blocks;
    body << ", " << firstBlocks(sizes, blocks) << "};\n";
    launch(op, formatv("ampc::cuda::optimizerStep<{0}>", t).str(), 0,
           formatv("state, {0}, {1}, {2}, {3}", list, hyper,
                   name(first.getStep()), found)
               .str(),
           body, std::to_string(blocks));
  }
  return success();
}
