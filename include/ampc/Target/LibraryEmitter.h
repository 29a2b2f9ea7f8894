//===- LibraryEmitter.h - what every model-library emitter shares -*- C++ -*-===//
//
// The CPU and CUDA targets write a model library from the same kernel-level
// module (after ampc-fuse and ampc-plan-memory) and the same model ABI
// (include/ampc/Runtime/ModelAbi.h). What does not depend on how an op runs
// lives here, once: the state layout (parameters, training state, constants
// where a target keeps them in the state, then the arena of the memory
// plan), the parameter blob, the walk over a function with its store-order
// check, the parameter/state tables and their access functions, the
// low-precision copy table, and the descriptor. A target derives from
// LibraryEmitter and says how each op runs (`emitOp`), how a value is loaded
// and stored, and what surrounds the function bodies (`emitLibrary`).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TARGET_LIBRARYEMITTER_H
#define AMPC_TARGET_LIBRARYEMITTER_H

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/AMPCEnums.h"
#include "ampc/Analysis/KernelGeometry.h"
#include "ampc/Target/Artifact.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace ampc {

/// Facts about the model a library is written for, common to the targets.
struct LibraryOptions {
  /// The model's name in the library's description.
  std::string modelName = "model";
  /// "fp16", "bf16", "fp32" or "fp64", for the description.
  std::string precision = "fp32";
  /// Where the parameter values are read from when the source is compiled
  /// (an `.incbin` of this file); empty: the source carries them as an
  /// array (a source written to standard output, which has no folder).
  std::string parameterFile;
  /// The serialized ONNX model to embed for export (an `.incbin` of this
  /// file, `onnxSize` bytes); empty: `onnxData` as an array, if any.
  std::string onnxFile;
  uint64_t onnxSize = 0;
  std::string onnxData;
  /// Appended to the library's global symbols (`ampc_model_entry`, the
  /// parameter and ONNX blobs), so that several models' sources can be
  /// compiled into one library; the application names the entry in
  /// ampc_model_load_entry. Empty: the default names.
  std::string symbolSuffix;
  /// About how many bytes of a function body go into one piece of the
  /// generated source (emit::cutPieces; the CPU target); 0: one piece.
  size_t pieceBytes = 64 * 1024;
};

namespace emit {

constexpr int64_t kAlign = 64;

inline int64_t alignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// ONNX TensorProto data type code of `t`, as the model ABI uses them; 0 for
/// a type the ABI cannot describe.
int onnxDtype(mlir::Type t);
/// C++ type a buffer of `t` holds (16-bit floats as uint16_t bits).
llvm::StringRef storageType(mlir::Type t);
/// The codec type both targets' kernels read and write `t` with, in
/// namespace `ns`: NS::AsF16, NS::AsBf16, NS::As<storage type>.
std::string codecName(mlir::Type t, llvm::StringRef ns);
/// C++ type arithmetic on `t` uses: float for 16/32-bit floats.
llvm::StringRef computeType(mlir::Type t);
int64_t storageSize(mlir::Type t);
/// What kernels accumulate in for data of `t`: float for 16- and 32-bit
/// floats, double for f64, integers as themselves.
llvm::StringRef accumulatorType(mlir::Type t);
/// The exact value of a float attribute as a C++ double literal.
std::string exactLiteral(const llvm::APFloat &value);
/// The name of a loss reduction in both targets' kernels (`LossReduction`
/// in CpuKernels.h and CudaKernels.cuh): LossNone, LossSum, LossMean.
llvm::StringRef lossReductionName(ampc::Reduction reduction);
/// "node 'NAME' (OpType)" (AMPCDialect.h).
using ampc::nodeDescription;
/// `text` as the inside of a C string literal.
std::string cString(llvm::StringRef text);
/// `{1LL, 2LL}`; `{0}` for an empty list (C++ has no empty arrays).
std::string list(llvm::ArrayRef<int64_t> values);
/// The elements of a constant as C++ initialisers of its storage type
/// (16-bit floats as their bits).
std::string constantElements(mlir::Operation *constant);
/// The values an ampc.shape computes (its input's static dimensions from
/// start to end, negative bounds counting from the end, clamped).
llvm::SmallVector<int64_t> shapeOpDims(mlir::Operation *shape);
/// Where an installed ampc keeps `relative` (e.g. "include"): beside the
/// running executable's folder (PREFIX/bin/ampc → PREFIX/include) when
/// `probe` exists below it, else `buildPath` (the build tree's, compiled
/// in): a build tree runs from where it was built, an installed or copied
/// prefix from itself.
std::string installedPath(llvm::StringRef relative, llvm::StringRef probe,
                          llvm::StringRef buildPath);
/// `-I` of the runtime headers the generated sources include.
std::string runtimeIncludeFlag(llvm::StringRef buildIncludeDir);

/// Runs a compiler (`args[0]` is the program) on `sourcePath`; on failure
/// sets `error` to "`what` failed on SOURCE: <its first error line>".
/// `log`, when given, receives what it printed (stdout and stderr).
bool runCompiler(llvm::ArrayRef<std::string> args, llvm::StringRef what,
                 llvm::StringRef sourcePath, std::string &error,
                 std::string *log = nullptr);
/// Runs the compiler command lines `jobs` at most compileJobs() at a time;
/// false with `error` as runCompiler sets it for the first that failed.
/// `logs`, when given, receives what each printed, in order.
bool runCompilers(llvm::ArrayRef<std::vector<std::string>> jobs,
                  llvm::StringRef what, llvm::StringRef sourcePath,
                  std::string &error,
                  std::vector<std::string> *logs = nullptr);
/// How many compiles of one library run at once: $AMPC_COMPILE_JOBS, else
/// the number of hardware threads.
unsigned compileJobs();
/// The host C++ compiler: $CXX, else `c++`, found on PATH; nothing, with
/// `error` set, when there is none.
std::optional<std::string> hostCompiler(std::string &error);

/// Where an emitted function body may be cut (cutPieces).
struct BodyLayout {
  /// The offsets in the body where each top-level op's text ends.
  llvm::SmallVector<size_t> opEnds;
  /// The line that declares each state or input pointer in the body, by
  /// the pointer's name.
  llvm::StringMap<std::string> declarations;
};
/// A function body cut into pieces of about `pieceBytes` at `layout`'s op
/// ends: each piece's statements with, before them, the pointer
/// declarations it uses. One piece when the body is smaller than two
/// pieces or `pieceBytes` is 0.
std::vector<std::string> cutPieces(llvm::StringRef body,
                                   const BodyLayout &layout,
                                   size_t pieceBytes);
/// How a target's compiler builds a library (compileLibrary).
struct LibraryCompile {
  /// The compiler (a host C++ compiler, or nvcc) and the language its
  /// `-x` names for the generated source ("c++", "cu").
  llvm::StringRef program;
  llvm::StringRef language = "c++";
  /// Every flag of an object's compile but the source and the output
  /// (part of the cache key), and the flags of the link after its inputs.
  llvm::ArrayRef<std::string> compileFlags;
  llvm::ArrayRef<std::string> linkFlags;
  /// The runtime headers the source includes, for precompiledHeader.
  llvm::ArrayRef<llvm::StringRef> headers;
  /// Names the compiler in errors.
  llvm::StringRef what;
  /// Runs before the code is compiled and can refuse it (cuda-sim's
  /// resource check).
  llvm::function_ref<bool(std::string &error)> checkBefore = nullptr;
  /// Flags of the code's compile that are not part of the cache key (where
  /// nvcc keeps its PTX), and a check of what that compile printed, which
  /// can refuse the code (the CUDA target's resource check).
  llvm::ArrayRef<std::string> uncachedCodeFlags;
  llvm::function_ref<bool(llvm::StringRef log, std::string &error)>
      checkAfter = nullptr;
};

/// Compiles the generated library `source` into the shared library
/// `output` as `how` says. With its data apart (Artifact::data) it is
/// built as the objects of its pieces and of its data, each piece's from
/// (and into) the compile cache, keyed on the compiler's identity (its
/// bytes' checksum and its `--version`), the flags, the piece's text (and
/// the shared code's) and the precompiled header's inputs, and used only
/// while its size and checksum and the contents of every header it read
/// are those its manifest records; a host compiler reads the runtime
/// headers from a precompiled header. The cache keeps only code that
/// passed both checks, so a cache hit runs neither. A cache folder or
/// entry that another user owns or others can write is refused with a
/// warning, and the compile goes on without it. Without its data apart,
/// the source's text form at `sourcePath` is compiled as one translation
/// unit. `sourcePath` names the source in errors; the data's files must
/// be written (the driver's writeArtifactFiles).
bool compileLibrary(const LibraryCompile &how, const Artifact &source,
                    llvm::StringRef sourcePath, llvm::StringRef output,
                    std::string &error);
/// The arguments (`-include PATH`) that make the host compiler `program`,
/// run with `compileFlags` (every flag of the compile but the source, the
/// output, -shared and the link flags), read the runtime `headers` (as the
/// generated sources include them) from a precompiled header in ampc's
/// compile cache ($AMPC_CACHE_DIR, else $XDG_CACHE_HOME/ampc or
/// ~/.cache/ampc; AMPC_CACHE_DIR=off turns it off), which is built there
/// first when missing, cut short, or made from headers whose contents have
/// changed since. `identity`, when given, receives what identifies the
/// header's inputs (part of the key of the objects compiled with it), ""
/// without one. Empty when it cannot be used (not GCC, no cache folder or
/// a refused one, another ampc building it, a failed build): the compile
/// then parses the headers itself, to the same library.
std::vector<std::string>
precompiledHeader(llvm::StringRef program,
                  llvm::ArrayRef<std::string> compileFlags,
                  llvm::ArrayRef<llvm::StringRef> headers,
                  std::string *identity = nullptr);

} // namespace emit

class LibraryEmitter {
public:
  /// Writes the library into `artifact`.
  LibraryEmitter(mlir::ModuleOp module, const LibraryOptions &options,
                 Artifact &artifact)
      : module(module), options(options), artifact(artifact), os(code),
        blob(artifact.parameters) {}
  virtual ~LibraryEmitter() = default;

  /// Lays out the state, emits @forward and @train_step through `emitOp`,
  /// then the library through `emitLibrary`, into the artifact: its code
  /// cut where `startPiece` was called, its data (dataSection) apart.
  mlir::LogicalResult run();

protected:
  /// "cpu" or "cuda", for messages and the descriptor.
  virtual llvm::StringRef targetName() const = 0;
  /// The kernels this emitter writes calls to: the memory plan must have
  /// placed their scratch (scratchLayout).
  virtual ampc::KernelTarget kernelTarget() const = 0;
  /// Whether a constant lives in the instance state (copied from the blob by
  /// `init`) rather than in the generated source. By default only small
  /// constants (at most kInlineConstantElements elements) are written into
  /// the source, so that its size never grows with a tensor's: a folded
  /// 10^7-element constant is blob data, not 250 MB of C++.
  virtual bool constantInState(mlir::Operation *constant) const;
  static constexpr int64_t kInlineConstantElements = 64;
  /// One op of a function body (not func.return): binds constants, loads
  /// and results, then hands each kind of op to the hooks below.
  mlir::LogicalResult emitOp(mlir::Operation *op, llvm::raw_ostream &body);
  /// A constant written into the generated source (not constantInState).
  virtual void emitConstant(mlir::Operation *constant,
                            llvm::raw_ostream &body) {}
  /// ampc.store: copies the value into its symbol's storage.
  virtual void emitStore(mlir::Operation *store, llvm::raw_ostream &body) = 0;
  /// The training ops of AMPCTrainOps.td.
  virtual mlir::LogicalResult emitTrainingOp(mlir::Operation *op,
                                             llvm::raw_ostream &body) = 0;
  /// `ops` (elementwise, in order) evaluated per element of `outputs`
  /// (one shape) from `inputs`, which the ops see as `arguments` (a
  /// fusion's block arguments; the inputs for a lone op); `yielded[k]`, a
  /// value of `ops`, is written to `outputs[k]`.
  virtual mlir::LogicalResult emitElementwise(
      llvm::ArrayRef<mlir::Operation *> ops, mlir::ValueRange inputs,
      mlir::ValueRange arguments, mlir::ValueRange yielded,
      mlir::ValueRange outputs, llvm::raw_ostream &body) = 0;
  /// Every other op, its results bound: the op's family (this is the one
  /// place that says which family an op belongs to) and the target's
  /// emitter of that family, one file each in lib/Target/{Cpu,Cuda}.
  mlir::LogicalResult emitKernelOp(mlir::Operation *op,
                                   llvm::raw_ostream &body);
  /// The op families emitKernelOp dispatches to.
  virtual mlir::LogicalResult emitMatmul(mlir::Operation *op,
                                         llvm::raw_ostream &body) = 0;
  virtual mlir::LogicalResult emitConvolution(mlir::Operation *op,
                                              llvm::raw_ostream &body) = 0;
  virtual mlir::LogicalResult emitDataMovement(mlir::Operation *op,
                                               llvm::raw_ostream &body) = 0;
  virtual mlir::LogicalResult emitNormalization(mlir::Operation *op,
                                                llvm::raw_ostream &body) = 0;
  virtual mlir::LogicalResult emitReduction(mlir::Operation *op,
                                            llvm::raw_ostream &body) = 0;
  virtual mlir::LogicalResult emitDropout(mlir::Operation *op,
                                          llvm::raw_ostream &body) = 0;
  virtual mlir::LogicalResult emitWindowOp(mlir::Operation *op,
                                           llvm::raw_ostream &body) = 0;
  virtual mlir::LogicalResult emitAttention(mlir::Operation *op,
                                            llvm::raw_ostream &body) = 0;
  /// What the message for an op the target cannot compile adds ("" or
  /// " (use --target=cpu)").
  virtual llvm::StringRef unsupportedOpHint() const { return ""; }
  /// Called before the body of each function is written.
  virtual void beginFunction(mlir::func::FuncOp f) {}
  /// The state offset a result is written to in place (the slot its one
  /// ampc.store targets), or std::nullopt for its planned arena buffer. A
  /// target that writes results in place makes their stores no-ops.
  virtual std::optional<int64_t> inPlaceOffset(mlir::Value v) const {
    return std::nullopt;
  }
  /// The bytes of host state the runtime allocates, as a C++ expression.
  virtual std::string hostStateSize() const {
    return std::to_string(stateSize) + "ULL";
  }
  /// The descriptor's `synchronize` function, "nullptr" for a target whose
  /// functions finish before they return.
  virtual std::string synchronizeFunction() const { return "nullptr"; }
  /// The descriptor's device entries (train_step_device, infer_device,
  /// memory_of, wait_stream): all "nullptr" for a host target.
  virtual std::string deviceFunctions(bool training) const {
    (void)training;
    return "nullptr, nullptr, nullptr, nullptr";
  }
  /// Copies `v` to function output `index` (host memory).
  virtual void emitReturn(unsigned index, mlir::Value v,
                          llvm::raw_ostream &body) = 0;
  /// Binds function argument `index` (host memory) to a name.
  virtual void emitArgument(unsigned index, mlir::BlockArgument arg,
                            llvm::raw_ostream &body) = 0;
  /// Loads one stored element of `t` as its compute type; rounds a computed
  /// value to the storage of `t`.
  virtual std::string load(mlir::Type t, const std::string &e) const = 0;
  virtual std::string store(mlir::Type t, const std::string &e) const = 0;
  /// Everything around the function bodies: the preamble, init, the
  /// functions, state access, then (its last act) `emitDescriptor`.
  virtual mlir::LogicalResult emitLibrary(mlir::func::FuncOp forward,
                                          mlir::func::FuncOp trainStep,
                                          llvm::StringRef inferBody,
                                          llvm::StringRef stepBody) = 0;

  std::string name(mlir::Value v) { return names.lookup(v); }
  /// The statements of an elementwise loop body after the inputs' loads:
  /// `ops` evaluated on `scalars` (the names their operands have), each
  /// intermediate a local rounded to its type as if it had been stored,
  /// each (value, destination) of `stores` stored there (a lone last op's
  /// value directly); every line starts with `indent`.
  mlir::LogicalResult
  emitScalarOps(llvm::ArrayRef<mlir::Operation *> ops,
                llvm::DenseMap<mlir::Value, std::string> &scalars,
                llvm::ArrayRef<std::pair<mlir::Value, std::string>> stores,
                llvm::StringRef indent, llvm::raw_ostream &body);
  /// The `.incbin` of the parameter blob (LibraryOptions::parameterFile)
  /// as `ampc_parameter_blob`, after `comment`, or the bytes as an array
  /// without a file; nothing without a blob.
  void emitParameterBlob(llvm::StringRef comment);
  /// `base` with the library's symbol suffix (LibraryOptions::symbolSuffix).
  std::string symbol(llvm::StringRef base) const {
    return (base + options.symbolSuffix).str();
  }
  /// `trainStep` over the generated `trainStepBody`, and the state access
  /// (a library that trains).
  void emitTrainStepEntry();
  /// Names the buffer of result `v`: its planned place in the arena, or
  /// its operand's buffer for a view.
  mlir::LogicalResult bind(mlir::OpResult v, llvm::raw_ostream &body);
  /// Names a parameter, state or constant read in place at its offset.
  void bindStorage(mlir::Value v, llvm::StringRef prefix, int64_t offset,
                   llvm::raw_ostream &body);
  /// Binds ampc.constant, ampc.load_parameter and ampc.load_state; false for
  /// any other op.
  bool bindStorageOp(mlir::Operation *op, llvm::raw_ostream &body);
  /// `state + OFFSET` as a `type *`: slot `slot` of `op`'s scratch block
  /// (ampc.scratch; scratchLayout names the slots).
  std::string scratch(mlir::Operation *op, llvm::StringRef slot,
                      llvm::StringRef type);
  /// The state offset of the run-time error slot (ampc.error_slot, the
  /// same in every function).
  int64_t errorSlot() const { return arenaBase + errorSlotOffset; }
  /// The state offset of argument `index`'s staging buffer
  /// (ampc.input_offsets of the function being written).
  int64_t stagingOffset(unsigned index) const {
    return arenaBase + inputOffsets[index];
  }
  /// Reserves `bytes` in the state and returns its offset.
  int64_t reserve(int64_t bytes);
  /// Writes the tables of parameters (offsets, sizes, gradient owners) and
  /// readParameter/writeParameter over the target's `copyOut`/`copyIn`.
  mlir::LogicalResult emitParameterAccess(mlir::func::FuncOp trainStep);
  /// The state tensors a checkpoint holds, readState and writeState.
  void emitStateAccess();
  /// `kCopies`: for each low-precision weight copy, its parameter, source
  /// and destination offsets, count and whether it is bf16.
  void emitCopyTable();
  /// The descriptor and `ampc_model_entry`.
  void emitDescriptor(mlir::func::FuncOp forward, mlir::func::FuncOp trainStep,
                      bool hasLastError, bool hasRelease);
  bool isTraining(mlir::func::FuncOp trainStep) const;

  mlir::ModuleOp module;
  const LibraryOptions &options;
  Artifact &artifact;

private:
  /// The code as emitLibrary writes it, and where each piece starts.
  std::string code;
  std::vector<size_t> pieceStarts;

protected:
  /// Where emitLibrary writes the code.
  llvm::raw_string_ostream os;
  /// The parameter blob (the artifact's).
  std::string &blob;
  /// Ends the code shared by every piece (the first call) or the piece
  /// before, and starts a piece: the code from here on compiles apart
  /// (Artifact::pieces; the CPU target's pieced bodies).
  void startPiece() { pieceStarts.push_back(code.size()); }
  /// The artifact's data (emitDescriptor writes it last).
  std::string dataSection;
  llvm::DenseMap<mlir::Value, std::string> names;
  /// The layout of the body emitFunction is writing.
  emit::BodyLayout *layout = nullptr;
  /// Writes `line` (`  T *NAME = ...;`, without the newline) declaring the
  /// pointer `name` to `body`, and records it in the layout.
  void declarePointer(llvm::StringRef name, const llvm::Twine &line,
                      llvm::raw_ostream &body) {
    std::string text = line.str();
    body << text << "\n";
    if (layout)
      layout->declarations[name] = std::move(text);
  }
  /// Offsets in the state of the values bound there (views take their
  /// operand's).
  llvm::DenseMap<mlir::Value, int64_t> stateOffsets;
  /// Offsets in the state of every parameter, state symbol and (with
  /// constantInState) constant op.
  llvm::StringMap<int64_t> parameterOffsets;
  llvm::DenseMap<mlir::Operation *, int64_t> constantOffsets;
  /// A splat constant kept in the state: not in the blob (its size would be
  /// the tensor's), but after it, filled by `init` with `word` (`width`
  /// bytes, little-endian) `count` times.
  struct SplatFill {
    int64_t offset, count, width;
    uint64_t word;
  };
  std::vector<SplatFill> splatFills;
  int64_t stateSize = 0;
  /// Bytes of the blob `init` copies to the start of the state.
  int64_t blobBytes = 0;
  /// Offset in the state of the memory plan's arena.
  int64_t arenaBase = 0;
  /// Data parallel (issue 41): the state offset of the communicator
  /// pointer `init` stores (-1: none) and the step's all-reduce buckets.
  int64_t commSlot = -1;
  int64_t allReduceBuckets = 0;
  /// ZeRO-1 (--shard-optimizer; analyzeShards): each moment state's kind
  /// (its place among its update's moments), the offset of its tensor in
  /// the flat concatenation of the gradients and its elements; each
  /// update's offset; the concatenation's elements, the kinds, the last
  /// update (the all-gather follows it) and the state offset of the
  /// ampc::cpu::Shards pointer (-1: not sharded).
  struct ShardedState {
    int64_t kind, offset, count;
  };
  llvm::StringMap<ShardedState> shardedStates;
  llvm::DenseMap<mlir::Operation *, int64_t> shardOffsets;
  int64_t shardTotal = 0, shardKinds = 0, shardSlot = -1;
  mlir::Operation *lastUpdate = nullptr;
  /// Whether the target compiles --shard-optimizer.
  virtual bool shardsOptimizer() const { return false; }
  /// The pointer to moment `kind` of the rank's shard, of element type `t`.
  virtual std::string shardedMoments(int64_t kind, mlir::Type t) const {
    return "nullptr";
  }
  /// Fills the ZeRO-1 tables above from the step's sharded bucket.
  mlir::LogicalResult analyzeShards(mlir::func::FuncOp trainStep);
  /// The descriptor's all_reduce_layout ("dtype:count;...", bucket order,
  /// then "sync_batchnorm:request" for each synchronised BatchNorm op).
  std::string allReduceLayout;
  unsigned counter = 0;
  int32_t numGradients = 0;

private:
  /// Checks that `f`'s plan is one for kernelTarget(): every Accumulating
  /// op has its accumulation type, every op its scratch block (at least as
  /// large as scratchLayout), the function its error slot and, for CUDA,
  /// its staging buffers.
  mlir::LogicalResult checkPlan(mlir::func::FuncOp f);
  int64_t errorSlotOffset = 0;
  llvm::ArrayRef<int64_t> inputOffsets;
  void layOut(llvm::StringRef symbol, mlir::RankedTensorType type,
              mlir::ElementsAttr initial);
  int64_t layOutConstant(mlir::Operation *constant);
  mlir::LogicalResult emitFunction(mlir::func::FuncOp f,
                                   llvm::raw_string_ostream &body,
                                   emit::BodyLayout &bodyLayout);

protected:
  /// Where the bodies emitLibrary gets may be cut (cutPieces).
  emit::BodyLayout inferLayout, stepLayout;
};

} // namespace ampc

#endif // AMPC_TARGET_LIBRARYEMITTER_H
