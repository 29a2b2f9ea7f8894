//===- ampc-train.cpp - train a compiled model on .npy data ----------------===//
//
// Runs a train.so written by ampc over a data set in .npy files, through the
// runtime C API only (ampc.h): it links libampc_runtime and libstdc++,
// nothing from LLVM, so it runs wherever the runtime does.
//
//===----------------------------------------------------------------------===//

#include "Npy.h"
#include "Plot.h"
#include "Sampler.h"
#include "Schedule.h"

#include "ampc/Kernels/Common/Float16.h"
#include "ampc/Runtime/ampc.h"
#include "ampc/Support/OutputFile.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <deque>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace ampc::train;

namespace {

constexpr const char *kHelp = R"help(usage: ampc-train LIB.so --inputs X.npy --labels Y.npy [options]

Trains the model in LIB.so (compiled by ampc with an optimizer) on the
samples in the .npy files, through the runtime C API.

  --inputs X.npy        the samples of the model's data input (repeat, in
                        input order, for a model with several)
  --labels Y.npy        the labels (repeat for several label inputs)
  --eval-inputs X.npy   an evaluation set, run after every epoch (with
  --eval-labels Y.npy   ampc_model_infer); repeatable like --inputs/--labels
  --epochs N            train until N epochs are complete (default 10)
  --steps N             train until N steps are complete (instead of --epochs)
  --lr X                set the learning rate before the first step (the
                        base rate of a schedule)
  --lr-schedule SPEC    the learning rate of each optimizer step, as
                        torch.optim.lr_scheduler computes it, stepped once per
                        optimizer step; a step the loss scaler skips does not
                        advance it (as optimizer.step() skipped by GradScaler):
                          step:STEP_SIZE[:GAMMA]            StepLR (gamma 0.1)
                          multistep:M1,M2,...[:GAMMA]       MultiStepLR
                          exponential:GAMMA                 ExponentialLR
                          cosine:T_MAX[:ETA_MIN[:WARMUP[:START_FACTOR]]]
                              CosineAnnealingLR after WARMUP steps of LinearLR
                              from START_FACTOR (1/3) (SequentialLR)
                          onecycle:MAX_LR:TOTAL_STEPS[:PCT_START[:DIV[:FINAL_DIV]]]
                              OneCycleLR, cosine annealing (0.3, 25, 1e4;
                              the base rate is not used; momentum is not
                              cycled)
  --seed S              seed of the per-epoch shuffle (default 0)
  --threads N           threads a CPU library uses (0, the default: every
                        core the process may run on; 1: one); the results
                        are the same bits whatever N
  --no-shuffle          take the samples in file order
  --drop-last           data parallel: drop the end of the epoch's order
                        that does not divide evenly over the ranks (instead
                        of padding it from the start)
  --comm-timeout S      data parallel: fail a step whose all-reduce has not
                        finished after S seconds (a rank stopped or failed)
                        instead of waiting; 0 waits forever (default: 600,
                        or AMPC_COMM_TIMEOUT)
  --print-samples       print the samples of every step (this rank's):
                        "step S: I J K ..." ("rank R step S: ..." under a
                        job of several ranks)
  --metrics FILE.csv    one row per step: step,epoch,loss,scale,skipped,lr
                        (step counts from 1; scale is the loss scale after
                        the step; skipped counts skipped steps so far); with
                        an evaluation set eval_loss and (for a classifier)
                        accuracy, filled on the last step of each epoch
  --checkpoint FILE     save the training state after every epoch and at the
                        end (atomically: an interrupted run keeps the last one)
  --resume FILE         load a checkpoint first and continue its step and
                        epoch count (--epochs and --steps are totals)
  --plot FILE.png       loss and loss scale against the step
  --export-onnx FILE    after training, write the trained model as ONNX
                        (eval mode; ampc_model_export_onnx)
  --predict X.npy       after training (or, without --inputs, right away:
                        the library's weights, or a --resume checkpoint's),
                        run the model in eval mode on these samples
                        (repeat for several data inputs) and write its
  --output P.npy        outputs: the first --output gets the model's first
                        output, the next the second (N samples along axis 0)
  --quiet               print only the final line
  --help                print this and exit

Data: each .npy file holds N samples along axis 0 (for training N >= the
batch size, dim 0 of the library's inputs; an evaluation set may be smaller);
every file of a set must have the same N. Each step takes one batch of
consecutive samples of a shuffled order (reshuffled each epoch from --seed);
the samples left over that do not fill a whole batch are dropped from the
epoch. The evaluation set is run whole, in eval mode (Dropout off, BatchNorm
on its running statistics): every sample counts once in the eval loss and
the accuracy (the last partial batch is padded and the padding taken out).
Arrays are converted to the library's dtypes when that is lossless or
obvious: float64/float16 to float32, narrower integers to int64/int32,
float arrays to a float16/bfloat16 input (a library compiled with
--input-precision=auto) rounded to nearest even, as the FP32-input step's
own cast rounds them (a finite value the type cannot hold is an error);
anything else is an error.

Data parallel: a library compiled with --data-parallel, run under
`mpirun -np N`, trains on N processes; each shards the data as
torch.utils.data.DistributedSampler does: every rank computes the same
epoch order (the same --seed), pads it by repeating it from its start to a
multiple of N (or, with --drop-last, drops its end), and rank r takes the
samples at positions r, r+N, r+2N, ... of it; its steps take batches of
consecutive samples of its share, at the library's batch size (each rank's
--batch: 2 ranks at batch B train as one process at 2B). Only rank 0
prints (its loss is the mean over its own samples), evaluates and writes
the --metrics, --checkpoint, --plot, --export-onnx and --output files (the
ranks' parameters are identical); every rank reads --resume. Errors name
the rank: "ampc-train: error: rank R: ...".

Output: on a terminal, a progress bar per epoch; otherwise one line per
epoch: "epoch 3/10  loss 0.1234  scale 65536  skipped 0  1234.5 samples/s"
(mean loss of the epoch, the loss scale, the steps skipped so far), with an
evaluation set followed by "  accuracy 0.9731" (argmax of output 1 over its
last axis against the label; "  eval loss X" when the model has no such
output). The last line: "final: loss L  accuracy A  (N steps, T s)" (when
a --resume checkpoint is already at the requested total: "final: nothing to
train (at step S, asked for T)", with the accuracy of the loaded weights).
Files written (every output, checked before the library is loaded): never a
data file, the library or another output of the run (--checkpoint may be the
--resume file, which it updates), a symbolic link, a read-only file or
anything but a regular file; each is written to a temporary beside it and
renamed when whole (new files 0666 minus the umask, a replaced file keeps
its mode). --lr-schedule and every number are checked before the first step.
Errors: one line "ampc-train: error: ...", exit status 1.
)help";

/// --metrics while it is written: a global, so that exit() from die()
/// removes its temporary.
ampc::OutputFile metricsFile;
/// "rank R: " in a data-parallel job of several ranks, for errors.
std::string rankPrefix;

[[noreturn]] void die(const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "ampc-train: error: %s%s\n", rankPrefix.c_str(),
               message.c_str());
  std::exit(1);
}

struct Options {
  std::string library;
  std::vector<std::string> inputs, labels, evalInputs, evalLabels;
  int64_t epochs = 10, steps = -1;
  bool haveEpochs = false;
  double lr = -1;
  uint64_t seed = 0;
  int32_t threads = 0;
  bool shuffle = true, quiet = false, dropLast = false, printSamples = false;
  std::string commTimeout;
  std::string metrics, checkpoint, resume, plot, exportOnnx;
  std::vector<std::string> predict, outputs;
  Schedule schedule;
  std::string scheduleSpec;
};

int64_t parseCount(const std::string &option, const std::string &value) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end || errno || v < 0)
    die("option " + option + ": expected a non-negative integer, got '" +
        value + "'");
  return v;
}

/// Dies unless every output can be written by the output rules
/// (ampc/Support/OutputFile.h): checked before anything is loaded or
/// trained, not after the first epoch. No output replaces the library or a
/// data file of the run, nor another output; --checkpoint may name the
/// --resume checkpoint, which it then updates (it is read whole first).
void checkOutputs(const Options &o) {
  std::vector<ampc::ProtectedFile> inputs;
  ampc::protectFile(inputs, o.library, "the model library '" + o.library + "'");
  for (auto [option, files] :
       {std::pair<const char *, const std::vector<std::string> *>(
            "--inputs", &o.inputs),
        {"--labels", &o.labels},
        {"--eval-inputs", &o.evalInputs},
        {"--eval-labels", &o.evalLabels},
        {"--predict", &o.predict}})
    for (const std::string &file : *files)
      ampc::protectFile(inputs, file,
                        std::string("the ") + option + " file '" + file + "'");
  std::vector<ampc::ProtectedFile> withResume = inputs;
  ampc::protectFile(withResume, o.resume,
                    "the --resume checkpoint '" + o.resume + "'");
  std::vector<std::pair<std::string, std::string>> outputs;
  for (auto [option, path] :
       {std::pair<const char *, const std::string *>("--checkpoint",
                                                     &o.checkpoint),
        {"--metrics", &o.metrics},
        {"--plot", &o.plot},
        {"--export-onnx", &o.exportOnnx}})
    if (!path->empty())
      outputs.push_back({option, *path});
  for (const std::string &path : o.outputs)
    outputs.push_back({"--output", path});
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto &[option, path] = outputs[i];
    std::string why;
    if (!ampc::checkOutputPath(path,
                               option == "--checkpoint" ? inputs : withResume,
                               why))
      die(option + " " + path + ": cannot write: " + why);
    for (size_t j = 0; j < i; ++j)
      if (ampc::sameOutputPath(path, outputs[j].second))
        die(option + " " + path + ": cannot write: it is also the " +
            outputs[j].first + " file");
  }
}

Options parseOptions(int argc, char **argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kHelp, stdout);
      std::exit(0);
    }
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      if (arg == "--") {
        for (++i; i < argc; ++i)
          positional.push_back(argv[i]);
        break;
      }
      positional.push_back(arg);
      continue;
    }
    std::string name = arg, value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    auto flag = [&](bool &field) {
      if (inlineValue)
        die("option " + name + " takes no value");
      field = true;
    };
    auto takeValue = [&]() -> std::string {
      if (inlineValue)
        return value;
      if (i + 1 >= argc)
        die("option " + name + " needs a value");
      return argv[++i];
    };
    if (name == "--inputs")
      o.inputs.push_back(takeValue());
    else if (name == "--labels")
      o.labels.push_back(takeValue());
    else if (name == "--eval-inputs")
      o.evalInputs.push_back(takeValue());
    else if (name == "--eval-labels")
      o.evalLabels.push_back(takeValue());
    else if (name == "--epochs") {
      o.epochs = parseCount(name, takeValue());
      o.haveEpochs = true;
    } else if (name == "--steps")
      o.steps = parseCount(name, takeValue());
    else if (name == "--lr") {
      std::string v = takeValue();
      char *end = nullptr;
      errno = 0;
      o.lr = std::strtod(v.c_str(), &end);
      // The rate is an f32 in the library: a double beyond its range
      // would be stored as inf.
      if (v.empty() || *end || !std::isfinite(o.lr) || o.lr < 0 ||
          !std::isfinite(float(o.lr)))
        die("option --lr: expected a number >= 0 that fits in f32 (at most "
            "3.4e38), got '" + v + "'");
    } else if (name == "--seed")
      o.seed = uint64_t(parseCount(name, takeValue()));
    else if (name == "--threads") {
      const int64_t threads = parseCount(name, takeValue());
      if (threads > 1024)
        die("option --threads: expected at most 1024, got " +
            std::to_string(threads));
      o.threads = int32_t(threads);
    }
    else if (name == "--no-shuffle") {
      bool noShuffle = false;
      flag(noShuffle);
      o.shuffle = false;
    } else if (name == "--quiet")
      flag(o.quiet);
    else if (name == "--comm-timeout") {
      o.commTimeout = takeValue();
      char *end = nullptr;
      double seconds = std::strtod(o.commTimeout.c_str(), &end);
      if (o.commTimeout.empty() || *end || !(seconds >= 0 && seconds <= 1e9))
        die("option --comm-timeout: expected seconds, a number from 0 (wait "
            "forever) to 1e9, got '" + o.commTimeout + "'");
    } else if (name == "--drop-last")
      flag(o.dropLast);
    else if (name == "--print-samples")
      flag(o.printSamples);
    else if (name == "--metrics")
      o.metrics = takeValue();
    else if (name == "--checkpoint")
      o.checkpoint = takeValue();
    else if (name == "--resume")
      o.resume = takeValue();
    else if (name == "--plot")
      o.plot = takeValue();
    else if (name == "--export-onnx")
      o.exportOnnx = takeValue();
    else if (name == "--predict")
      o.predict.push_back(takeValue());
    else if (name == "--output")
      o.outputs.push_back(takeValue());
    else if (name == "--lr-schedule") {
      std::string error;
      o.scheduleSpec = takeValue();
      if (!parseSchedule(o.scheduleSpec, o.schedule, error))
        die(error);
    }
    else
      die("unknown option '" + name + "' (see --help)");
  }
  if (positional.empty())
    die("no model library given (usage: ampc-train LIB.so --inputs X.npy "
        "--labels Y.npy ...; see --help)");
  if (positional.size() > 1)
    die("one model library expected, got '" + positional[0] + "' and '" +
        positional[1] + "'");
  o.library = positional[0];
  bool afterwards = !o.predict.empty() || !o.exportOnnx.empty();
  if (o.inputs.empty() && (!afterwards || !o.labels.empty()))
    die("no --inputs given");
  if (!o.inputs.empty() && o.labels.empty())
    die("no --labels given");
  if (o.predict.empty() != o.outputs.empty())
    die("--predict and --output go together");
  if (o.evalInputs.empty() != o.evalLabels.empty())
    die("--eval-inputs and --eval-labels go together");
  if (o.haveEpochs && o.steps >= 0)
    die("--epochs and --steps exclude each other");
  checkOutputs(o);
  return o;
}

std::string shapeString(const int64_t *shape, int32_t rank) {
  std::string s = "[";
  for (int32_t i = 0; i < rank; ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// A set of arrays, one per model input, converted to the input's dtype.
struct DataSet {
  int64_t samples = 0;
  std::vector<std::vector<unsigned char>> data;
  std::vector<size_t> sampleBytes;
};

/// Reads `files[k]` for model inputs first..first+files.size() and checks
/// each against the library's input: dtype convertible, shape (N, rest of
/// the input's shape).
/// Loads `files` as the inputs from `firstInput` on. A training set needs
/// a whole batch; an evaluation set (`whole` false) one sample.
void loadInputs(const std::string &library, ampc_model *model,
                int32_t firstInput, const std::vector<std::string> &files,
                DataSet &set, bool wholeBatch) {
  for (size_t k = 0; k < files.size(); ++k) {
    ampc_tensor_info info;
    ampc_model_input_info(model, firstInput + int32_t(k), &info);
    NpyArray array;
    std::string error;
    if (!readNpy(files[k], array, error))
      die(error);
    std::string expected = std::string(ampc_dtype_name(info.dtype)) +
                           " (N" +
                           (info.rank > 1 ? ", " : "");
    for (int32_t d = 1; d < info.rank; ++d)
      expected += std::to_string(info.shape[d]) + (d + 1 < info.rank ? ", " : "");
    expected += info.rank == 1 ? ",)" : ")";
    std::string what = files[k] + ": " + describeNpy(array) + ", " + library +
                       " expects " + expected + " for input '" + info.name +
                       "'";
    bool shapeOk = array.shape.size() == size_t(info.rank) && info.rank >= 1;
    for (int32_t d = 1; shapeOk && d < info.rank; ++d)
      shapeOk = array.shape[size_t(d)] == info.shape[d];
    if (!shapeOk)
      die(what);
    std::vector<unsigned char> converted;
    std::string why;
    if (!convertNpy(array, info.dtype, converted, why))
      die(what + ": " + why);
    int64_t n = array.shape[0];
    if (k > 0 && n != set.samples)
      die(files[k] + ": " + std::to_string(n) + " samples, " + files[0] +
          " has " + std::to_string(set.samples));
    if (wholeBatch ? n < info.shape[0] : n < 1)
      die(files[k] + ": " + std::to_string(n) + " samples, fewer than " +
          (wholeBatch ? "the batch size " + std::to_string(info.shape[0]) +
                            " of " + library
                      : std::string("one")));
    set.samples = n;
    set.sampleBytes.push_back(n ? converted.size() / size_t(n) : 0);
    set.data.push_back(std::move(converted));
  }
}

/// Output buffers and the tensors the runtime calls take.
struct TensorBuffer {
  std::vector<unsigned char> bytes;
  ampc_tensor tensor{};
};

TensorBuffer makeBuffer(const ampc_tensor_info &info) {
  TensorBuffer b;
  size_t count = 1;
  for (int32_t d = 0; d < info.rank; ++d)
    count *= size_t(info.shape[d]);
  b.bytes.assign(count * ampc_dtype_size(info.dtype), 0);
  b.tensor.dtype = info.dtype;
  b.tensor.rank = info.rank;
  b.tensor.shape = info.shape;
  b.tensor.size_bytes = b.bytes.size();
  return b;
}

double scalarValue(ampc_dtype dtype, const unsigned char *p) {
  switch (dtype) {
  case AMPC_DTYPE_F32: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  case AMPC_DTYPE_F64: {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  case AMPC_DTYPE_F16:
  case AMPC_DTYPE_BF16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return dtype == AMPC_DTYPE_F16 ? ampc::numeric::f16BitsToF32(h)
                                   : ampc::numeric::bf16BitsToF32(h);
  }
  case AMPC_DTYPE_I64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return double(v);
  }
  case AMPC_DTYPE_I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  default:
    return NAN;
  }
}

/// Copies samples order[first .. first + count) into the buffers from
/// `firstBuffer` on, each `repeat` times in a row.
void gather(const DataSet &set, const std::vector<int64_t> &order,
            int64_t first, int64_t count, std::vector<TensorBuffer> &buffers,
            size_t firstBuffer, int64_t repeat = 1) {
  for (size_t k = 0; k < set.data.size(); ++k) {
    size_t sb = set.sampleBytes[k];
    unsigned char *dst = buffers[firstBuffer + k].bytes.data();
    for (int64_t b = 0; b < count * repeat; ++b) {
      int64_t sample = order[size_t(first + b / repeat)];
      std::memcpy(dst + size_t(b) * sb, set.data[k].data() + size_t(sample) * sb,
                  sb);
    }
  }
}

struct EvalResult {
  double loss = NAN, accuracy = NAN;
};

class Trainer {
public:
  Trainer(Options options) : o(std::move(options)) {}
  int run();

private:
  void check(ampc_status status, const std::string &what) {
    if (status != AMPC_OK)
      die(what + ": " + ampc_last_error());
  }
  EvalResult evaluate();
  /// ampc_model_infer on the buffers (one per input, one per output).
  void infer(std::vector<TensorBuffer> &inputs,
             std::vector<TensorBuffer> &outputs);
  /// Whether the evaluation has an accuracy: logits [B, ..., C] in output 1
  /// and one integer label input [B, ...] matching its leading dimensions
  /// (a classifier; a regression has none).
  bool scoresAccuracy() const {
    if (outputInfo.size() < 2 || numLabels != 1)
      return false;
    const ampc_tensor_info &logits = outputInfo[1], &label = inputInfo.back();
    return (label.dtype == AMPC_DTYPE_I64 || label.dtype == AMPC_DTYPE_I32) &&
           logits.rank == label.rank + 1 &&
           std::equal(label.shape, label.shape + label.rank, logits.shape);
  }
  void progress(int64_t epoch, int64_t step, int64_t stepsInEpoch,
                double loss, double scale, double rate);
  void saveCheckpoint();
  /// --export-onnx and --predict, then release the model.
  int finish();
  void predict();

  Options o;
  ampc_model *model = nullptr;
  ampc_model_info info{};
  bool trains = false;
  int32_t numLabels = 0, numData = 0;
  int64_t batch = 0;
  /// Data parallel: this process's rank and the number of ranks.
  int32_t rank = 0, ranks = 1;
  DataSet train, eval;
  std::vector<ampc_tensor_info> inputInfo, outputInfo;
  bool interactive = false;
};

std::vector<TensorBuffer> makeBuffers(const std::vector<ampc_tensor_info> &infos) {
  std::vector<TensorBuffer> buffers;
  for (const ampc_tensor_info &t : infos)
    buffers.push_back(makeBuffer(t));
  return buffers;
}

void Trainer::infer(std::vector<TensorBuffer> &inputs,
                    std::vector<TensorBuffer> &outputs) {
  auto views = [](std::vector<TensorBuffer> &buffers) {
    std::vector<ampc_tensor> tensors;
    for (TensorBuffer &b : buffers) {
      b.tensor.data = b.bytes.data();
      tensors.push_back(b.tensor);
    }
    return tensors;
  };
  std::vector<ampc_tensor> in = views(inputs), out = views(outputs);
  check(ampc_model_infer(model, in.data(), int32_t(in.size()), out.data(),
                         int32_t(out.size())),
        o.library);
}

EvalResult Trainer::evaluate() {
  std::vector<TensorBuffer> inputs = makeBuffers(inputInfo),
                            outputs = makeBuffers(outputInfo);
  std::vector<int64_t> order = sampleOrder(eval.samples, false, 0, 0);
  bool canScore = scoresAccuracy();
  const ampc_tensor_info *logits = canScore ? &outputInfo[1] : nullptr;
  const ampc_tensor_info &label = inputInfo.back();
  auto run = [&] {
    infer(inputs, outputs);
    return scalarValue(outputInfo[0].dtype, outputs[0].bytes.data());
  };
  // The loss output is the batch's mean of per-sample losses, and infer runs
  // in eval mode, where a sample's loss does not depend on the others. The
  // last partial batch is padded with copies of its first sample s; a batch
  // of copies of s alone gives s's loss, which takes the padding out
  // exactly: sum over the valid samples = B * mean - (B - valid) * loss(s).
  double lossSum = 0;
  int64_t correct = 0, counted = 0;
  for (int64_t first = 0; first < eval.samples; first += batch) {
    int64_t valid = std::min(batch, eval.samples - first);
    std::vector<int64_t> rows(size_t(batch), order[size_t(first)]);
    for (int64_t b = 0; b < valid; ++b)
      rows[size_t(b)] = order[size_t(first + b)];
    if (valid < batch) {
      gather(eval, rows, 0, 1, inputs, 0, /*repeat=*/batch);
      lossSum -= double(batch - valid) * run();
    }
    gather(eval, rows, 0, batch, inputs, 0);
    lossSum += double(batch) * run();
    if (!canScore)
      continue;
    int64_t classes = logits->shape[logits->rank - 1];
    size_t perSample = inputs.back().bytes.size() / size_t(batch) /
                       ampc_dtype_size(label.dtype);
    size_t logitSize = ampc_dtype_size(logits->dtype);
    for (int64_t b = 0; b < valid; ++b)
      for (size_t j = 0; j < perSample; ++j) {
        size_t row = size_t(b) * perSample + j;
        const unsigned char *rowData =
            outputs[1].bytes.data() + row * size_t(classes) * logitSize;
        int64_t best = 0;
        double bestValue = -INFINITY;
        for (int64_t c = 0; c < classes; ++c) {
          double v = scalarValue(logits->dtype,
                                 rowData + size_t(c) * logitSize);
          if (v > bestValue)
            bestValue = v, best = c;
        }
        double want = scalarValue(
            label.dtype,
            inputs.back().bytes.data() + row * ampc_dtype_size(label.dtype));
        correct += double(best) == want;
        ++counted;
      }
  }
  EvalResult r;
  r.loss = lossSum / double(eval.samples);
  if (counted)
    r.accuracy = double(correct) / double(counted);
  return r;
}

void Trainer::progress(int64_t epoch, int64_t step, int64_t stepsInEpoch,
                       double loss, double scale, double rate) {
  constexpr int kWidth = 30;
  int filled = int(kWidth * step / std::max<int64_t>(1, stepsInEpoch));
  std::string bar(size_t(filled), '#');
  bar.resize(kWidth, '.');
  std::printf("\r\x1b[2Kepoch %lld [%s] %lld/%lld  loss %.4f  scale %g  %.1f "
              "samples/s",
              (long long)epoch, bar.c_str(), (long long)step,
              (long long)stepsInEpoch, loss, scale, rate);
  std::fflush(stdout);
}

void Trainer::saveCheckpoint() {
  check(ampc_model_save_checkpoint(model, o.checkpoint.c_str()),
        o.checkpoint);
}

int Trainer::run() {
  auto start = std::chrono::steady_clock::now();
  // The runtime reads it when it opens the ranks' communicator.
  if (!o.commTimeout.empty())
    ::setenv("AMPC_COMM_TIMEOUT", o.commTimeout.c_str(), 1);
  ampc_model_options options;
  ampc_model_options_init(&options);
  options.num_threads = o.threads;
  if (ampc_model_load(o.library.c_str(), &options, &model) != AMPC_OK)
    die(o.library + ": " + ampc_last_error());
  check(ampc_model_describe(model, &info), o.library);
  check(ampc_model_data_parallel(model, &rank, &ranks, nullptr), o.library);
  if (ranks > 1) {
    // Rank 0 speaks and writes for all: the ranks' parameters are the same.
    rankPrefix = "rank " + std::to_string(rank) + ": ";
    // A sharded optimizer's checkpoint is a collective: every rank saves
    // (gathering the moments), rank 0 writes.
    int32_t collective = 0;
    check(ampc_model_checkpoint_is_collective(model, &collective), o.library);
    if (rank != 0) {
      o.quiet = true;
      if (!collective)
        o.checkpoint.clear();
      o.metrics.clear(), o.plot.clear();
      o.exportOnnx.clear(), o.predict.clear(), o.outputs.clear();
      o.evalInputs.clear(), o.evalLabels.clear();
    }
  }
  ampc_training_info training;
  trains = ampc_model_training_info(model, &training) == AMPC_OK;
  if (!trains && (!o.inputs.empty() || !o.resume.empty() ||
                  !o.exportOnnx.empty()))
    die(o.library + ": not a training library with an optimizer (mode '" +
        info.mode + "'): " + ampc_last_error());
  numLabels = trains ? training.num_labels : 0;
  numData = info.num_inputs - numLabels;
  for (int32_t i = 0; i < info.num_inputs; ++i) {
    ampc_tensor_info t;
    check(ampc_model_input_info(model, i, &t), o.library);
    if (t.rank < 1)
      die(o.library + ": input '" + t.name +
          "' is a scalar; ampc-train feeds batches along dimension 0");
    if (i > 0 && t.shape[0] != inputInfo[0].shape[0])
      die(o.library + ": input '" + t.name + "' has batch size " +
          std::to_string(t.shape[0]) + ", input '" + inputInfo[0].name +
          "' " + std::to_string(inputInfo[0].shape[0]));
    inputInfo.push_back(t);
  }
  for (int32_t i = 0; i < info.num_outputs; ++i) {
    ampc_tensor_info t;
    check(ampc_model_output_info(model, i, &t), o.library);
    outputInfo.push_back(t);
  }
  if (trains && (outputInfo.empty() || outputInfo[0].rank != 0))
    die(o.library + ": output 0 is not a scalar loss");
  auto describeInputs = [&](int32_t first, int32_t count) {
    std::string s;
    for (int32_t i = first; i < first + count; ++i)
      s += std::string(i > first ? ", " : "") + "'" + inputInfo[size_t(i)].name +
           "' " + ampc_dtype_name(inputInfo[size_t(i)].dtype) + " " +
           shapeString(inputInfo[size_t(i)].shape, inputInfo[size_t(i)].rank);
    return s;
  };
  auto checkCount = [&](const char *option, size_t given, int32_t want,
                        int32_t first) {
    if (given != size_t(want))
      die(o.library + " takes " + std::to_string(want) + " " + option +
          " file(s) (" + describeInputs(first, want) + "), " +
          std::to_string(given) + " given");
  };
  batch = inputInfo.empty() ? 0 : inputInfo[0].shape[0];
  if (!o.predict.empty())
    checkCount("--predict", o.predict.size(), numData, 0);
  // The schedule's base: --lr, else the library's rate (before a checkpoint
  // replaces it with the rate it was at).
  // (In double, as torch computes it: a float base would round once more.)
  float libraryLr = 0;
  if (trains)
    check(ampc_model_get_learning_rate(model, &libraryLr), o.library);
  double baseLr = o.lr >= 0 ? o.lr : double(libraryLr);
  if (o.inputs.empty()) {
    if (!o.resume.empty())
      check(ampc_model_load_checkpoint(model, o.resume.c_str()), o.resume);
    return finish();
  }
  checkCount("--inputs", o.inputs.size(), numData, 0);
  checkCount("--labels", o.labels.size(), numLabels, numData);

  DataSet labels;
  loadInputs(o.library, model, 0, o.inputs, train, true);
  loadInputs(o.library, model, numData, o.labels, labels, true);
  if (labels.samples != train.samples)
    die(o.labels[0] + ": " + std::to_string(labels.samples) + " samples, " +
        o.inputs[0] + " has " + std::to_string(train.samples));
  for (size_t k = 0; k < labels.data.size(); ++k) {
    train.data.push_back(std::move(labels.data[k]));
    train.sampleBytes.push_back(labels.sampleBytes[k]);
  }
  if (!o.evalInputs.empty()) {
    checkCount("--eval-inputs", o.evalInputs.size(), numData, 0);
    checkCount("--eval-labels", o.evalLabels.size(), numLabels, numData);
    DataSet evalLabels;
    loadInputs(o.library, model, 0, o.evalInputs, eval, false);
    loadInputs(o.library, model, numData, o.evalLabels, evalLabels, false);
    if (evalLabels.samples != eval.samples)
      die(o.evalLabels[0] + ": " + std::to_string(evalLabels.samples) +
          " samples, " + o.evalInputs[0] + " has " +
          std::to_string(eval.samples));
    for (size_t k = 0; k < evalLabels.data.size(); ++k) {
      eval.data.push_back(std::move(evalLabels.data[k]));
      eval.sampleBytes.push_back(evalLabels.sampleBytes[k]);
    }
  }

  if (!o.resume.empty())
    check(ampc_model_load_checkpoint(model, o.resume.c_str()), o.resume);
  if (o.lr >= 0)
    check(ampc_model_set_learning_rate(model, float(o.lr)), o.library);
  ampc_scaler_state scaler;
  check(ampc_model_get_scaler_state(model, &scaler), o.library);

  int64_t shard = ranks > 1 ? shardSize(train.samples, ranks, o.dropLast)
                            : train.samples;
  if (shard < batch)
    die(o.inputs[0] + ": " + std::to_string(train.samples) + " samples over " +
        std::to_string(ranks) + " ranks, " + std::to_string(shard) +
        " per rank: fewer than the batch size " + std::to_string(batch) +
        " of " + o.library);
  int64_t stepsPerEpoch = shard / batch;
  int64_t globalStep, lastStep;
  if (__builtin_add_overflow(scaler.steps, scaler.skipped_steps, &globalStep))
    die(o.resume + ": the step count does not fit in 64 bits");
  if (o.steps >= 0)
    lastStep = o.steps;
  else if (__builtin_mul_overflow(o.epochs, stepsPerEpoch, &lastStep) ||
           lastStep > (int64_t(1) << 62))
    die("option --epochs: " + std::to_string(o.epochs) + " epochs of " +
        std::to_string(stepsPerEpoch) + " steps are more than 2^62 steps");
  if (lastStep > (int64_t(1) << 62))
    die("option --steps: more than 2^62 steps");
  if (o.schedule.kind == Schedule::OneCycle && lastStep > o.schedule.totalSteps)
    die("option --lr-schedule: onecycle's TOTAL_STEPS " +
        std::to_string(o.schedule.totalSteps) + " is less than the run's " +
        std::to_string(lastStep) + " steps");
  int64_t totalEpochs = (lastStep + stepsPerEpoch - 1) / stepsPerEpoch;
  if (std::string error;
      lastStep > globalStep &&
      !checkScheduleRange(o.schedule, o.scheduleSpec, baseLr, scaler.steps,
                          scaler.steps + (lastStep - globalStep) - 1, error))
    die(error);

  // The CSV grows in a temporary beside it and takes its name at the end
  // (an error on the way leaves no half file; exit() discards it).
  const bool metrics = !o.metrics.empty();
  auto writeMetrics = [&](const std::string &text) {
    std::string why;
    if (!metricsFile.write(text.data(), text.size(), why))
      die(o.metrics + ": cannot write: " + why);
  };
  if (metrics) {
    std::string why;
    if (!metricsFile.open(o.metrics, {}, why))
      die(o.metrics + ": cannot write: " + why);
    writeMetrics(std::string("step,epoch,loss,scale,skipped,lr") +
                 (!eval.samples      ? ""
                  : scoresAccuracy() ? ",eval_loss,accuracy"
                                     : ",eval_loss") +
                 "\n");
  }
  // (Under a job of several ranks mpirun forwards output through a pty:
  // lines, not a bar, as its log is rarely a terminal.)
  interactive = !o.quiet && ranks == 1 && ::isatty(STDOUT_FILENO);

  std::vector<TensorBuffer> inputs;
  for (const ampc_tensor_info &t : inputInfo)
    inputs.push_back(makeBuffer(t));
  TensorBuffer loss = makeBuffer(outputInfo[0]);
  std::vector<ampc_tensor> in;
  for (TensorBuffer &b : inputs) {
    b.tensor.data = b.bytes.data();
    in.push_back(b.tensor);
  }
  loss.tensor.data = loss.bytes.data();

  std::vector<double> plotSteps, plotLoss, plotScale;
  double lastEpochLoss = NAN;
  EvalResult lastEval;
  int64_t stepsRun = 0, savedAt = -1;
  // Which of the last 100 steps the loss scaler skipped: a run where it
  // skips most of them trains nothing, and says so once.
  std::deque<bool> recentSkips;
  int64_t recentSkipCount = 0, lastSkipped = scaler.skipped_steps;
  bool warnedSkips = false;
  while (globalStep < lastStep) {
    int64_t epoch = globalStep / stepsPerEpoch;
    int64_t first = globalStep % stepsPerEpoch;
    int64_t end = std::min(stepsPerEpoch, first + (lastStep - globalStep));
    std::vector<int64_t> order =
        sampleOrder(train.samples, o.shuffle, o.seed, epoch);
    if (ranks > 1)
      order = shardOrder(order, rank, ranks, o.dropLast);
    auto epochStart = std::chrono::steady_clock::now();
    auto lastDraw = epochStart - std::chrono::seconds(1);
    double lossSum = 0;
    int64_t lossCount = 0;
    for (int64_t s = first; s < end; ++s) {
      gather(train, order, s * batch, batch, inputs, 0);
      if (o.printSamples) {
        std::string line = ranks > 1 ? "rank " + std::to_string(rank) + " "
                                     : std::string();
        line += "step " + std::to_string(globalStep + 1) + ":";
        for (int64_t b = 0; b < batch; ++b)
          line += " " + std::to_string(order[size_t(s * batch + b)]);
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      }
      if (o.schedule.kind != Schedule::Constant)
        check(ampc_model_set_learning_rate(
                  model, float(o.schedule.rate(baseLr, scaler.steps))),
              "--lr-schedule");
      check(ampc_model_train_step(model, in.data(), int32_t(in.size()),
                                  &loss.tensor),
            o.library);
      // A CUDA model's loss is in its buffer once the stream gets there.
      check(ampc_model_synchronize(model), o.library);
      ++globalStep, ++stepsRun;
      double value = scalarValue(outputInfo[0].dtype, loss.bytes.data());
      if (std::isfinite(value))
        lossSum += value, ++lossCount;
      check(ampc_model_get_scaler_state(model, &scaler), o.library);
      bool skipped = scaler.skipped_steps != lastSkipped;
      lastSkipped = scaler.skipped_steps;
      recentSkips.push_back(skipped);
      recentSkipCount += skipped;
      if (recentSkips.size() > 100) {
        recentSkipCount -= recentSkips.front();
        recentSkips.pop_front();
      }
      if (!warnedSkips && rank == 0 && recentSkips.size() == 100 &&
          recentSkipCount > 50) {
        warnedSkips = true;
        std::fprintf(stderr,
                     "ampc-train: warning: the loss scaler skipped %lld of "
                     "the last 100 steps (step %lld, scale %g): the model "
                     "is hardly training, its gradients are not finite; "
                     "check the data (--inputs) and the learning rate\n",
                     (long long)recentSkipCount, (long long)globalStep,
                     double(scaler.scale));
      }
      float lr = 0;
      check(ampc_model_get_learning_rate(model, &lr), o.library);
      plotSteps.push_back(double(globalStep));
      plotLoss.push_back(value);
      plotScale.push_back(scaler.scale);
      bool epochEnd = s + 1 == end;
      if (epochEnd && eval.samples)
        lastEval = evaluate();
      if (metrics) {
        char row[256];
        std::snprintf(row, sizeof row, "%lld,%lld,%.9g,%.9g,%lld,%.9g",
                      (long long)globalStep, (long long)epoch + 1, value,
                      double(scaler.scale), (long long)scaler.skipped_steps,
                      double(lr));
        std::string line = row;
        if (eval.samples && epochEnd) {
          std::snprintf(row, sizeof row, ",%.9g", lastEval.loss);
          line += row;
          if (scoresAccuracy()) {
            std::snprintf(row, sizeof row, ",%.9g", lastEval.accuracy);
            line += row;
          }
        } else if (eval.samples) {
          line += scoresAccuracy() ? ",," : ",";
        }
        writeMetrics(line + "\n");
      }
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - epochStart)
                           .count();
      double rate = seconds > 0 ? double((s + 1 - first) * batch) / seconds : 0;
      if (interactive &&
          (epochEnd || std::chrono::steady_clock::now() - lastDraw >
                           std::chrono::milliseconds(100))) {
        progress(epoch + 1, s + 1, stepsPerEpoch,
                 lossCount ? lossSum / double(lossCount) : NAN, scaler.scale,
                 rate);
        lastDraw = std::chrono::steady_clock::now();
      }
      if (!epochEnd)
        continue;
      lastEpochLoss = lossCount ? lossSum / double(lossCount) : NAN;
      if (interactive)
        std::printf("\r\x1b[2K");
      if (!o.quiet) {
        std::printf("epoch %lld/%lld  loss %.4f  scale %g  skipped %lld  "
                    "%.1f samples/s",
                    (long long)epoch + 1, (long long)totalEpochs,
                    lastEpochLoss, double(scaler.scale),
                    (long long)scaler.skipped_steps, rate);
        if (eval.samples && std::isfinite(lastEval.accuracy))
          std::printf("  accuracy %.4f", lastEval.accuracy);
        else if (eval.samples)
          std::printf("  eval loss %.4f", lastEval.loss);
        std::printf("\n");
        std::fflush(stdout);
      }
      if (!o.checkpoint.empty()) {
        saveCheckpoint();
        savedAt = globalStep;
      }
    }
  }
  if (!o.checkpoint.empty() && savedAt != globalStep)
    saveCheckpoint();
  if (std::string why; metrics && !metricsFile.commit(why))
    die(o.metrics + ": cannot write: " + why);
  if (!o.plot.empty()) {
    std::string error;
    if (!writeTrainingPlot(o.plot, plotSteps, plotLoss, plotScale, error))
      die(error);
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  if (rank != 0)
    return finish();
  if (stepsRun == 0) {
    // A checkpoint already at or past the requested total: say so, and
    // still score the evaluation set with the loaded weights.
    std::printf("final: nothing to train (at step %lld, asked for %lld)",
                (long long)globalStep, (long long)lastStep);
    if (eval.samples) {
      lastEval = evaluate();
      if (std::isfinite(lastEval.accuracy))
        std::printf("  accuracy %.4f", lastEval.accuracy);
      else
        std::printf("  eval loss %.4f", lastEval.loss);
    }
    std::printf("  (0 steps, %.1f s)\n", seconds);
    return finish();
  }
  std::printf("final: loss %.4f", lastEpochLoss);
  if (eval.samples && std::isfinite(lastEval.accuracy))
    std::printf("  accuracy %.4f", lastEval.accuracy);
  else if (eval.samples)
    std::printf("  eval loss %.4f", lastEval.loss);
  std::printf("  (%lld steps, %.1f s)\n", (long long)stepsRun, seconds);
  return finish();
}

int Trainer::finish() {
  if (!o.exportOnnx.empty()) {
    check(ampc_model_export_onnx(model, o.exportOnnx.c_str()), o.exportOnnx);
    std::printf("exported %s\n", o.exportOnnx.c_str());
  }
  if (!o.predict.empty())
    predict();
  ampc_model_release(model);
  return 0;
}

void Trainer::predict() {
  DataSet set;
  loadInputs(o.library, model, 0, o.predict, set, false);
  // A training library's output 0 is the loss; the model's outputs follow.
  int32_t first = std::strcmp(info.mode, "train") == 0 ? 1 : 0;
  int32_t available = int32_t(outputInfo.size()) - first;
  if (int32_t(o.outputs.size()) > available)
    die(std::to_string(o.outputs.size()) + " --output files, " + o.library +
        " has " + std::to_string(available) + " model output(s)");
  for (size_t k = 0; k < o.outputs.size(); ++k) {
    const ampc_tensor_info &t = outputInfo[size_t(first) + k];
    if (t.rank < 1 || t.shape[0] != batch)
      die(o.outputs[k] + ": output '" + std::string(t.name) + "' " +
          shapeString(t.shape, t.rank) +
          " has no batch dimension to write per sample");
  }
  std::vector<TensorBuffer> inputs = makeBuffers(inputInfo),
                            outputs = makeBuffers(outputInfo);
  std::vector<int64_t> order = sampleOrder(set.samples, false, 0, 0);
  std::vector<std::vector<unsigned char>> written(o.outputs.size());
  for (int64_t start = 0; start < set.samples; start += batch) {
    // The last batch is padded with its first sample; the padding's
    // outputs are not written. Labels (a training library's) stay zero:
    // they only reach the loss.
    int64_t valid = std::min(batch, set.samples - start);
    gather(set, order, start, valid, inputs, 0);
    for (size_t k = 0; k < set.data.size(); ++k)
      for (int64_t b = valid; b < batch; ++b)
        std::memcpy(inputs[k].bytes.data() + size_t(b) * set.sampleBytes[k],
                    inputs[k].bytes.data(), set.sampleBytes[k]);
    infer(inputs, outputs);
    check(ampc_model_synchronize(model), o.library);
    for (size_t k = 0; k < o.outputs.size(); ++k) {
      const TensorBuffer &b = outputs[size_t(first) + k];
      size_t perSample = b.bytes.size() / size_t(batch);
      written[k].insert(written[k].end(), b.bytes.begin(),
                        b.bytes.begin() + std::ptrdiff_t(size_t(valid) * perSample));
    }
  }
  for (size_t k = 0; k < o.outputs.size(); ++k) {
    const ampc_tensor_info &t = outputInfo[size_t(first) + k];
    std::vector<int64_t> shape(t.shape, t.shape + t.rank);
    shape[0] = set.samples;
    std::string error;
    if (!writeNpy(o.outputs[k], t.dtype, shape, written[k].data(), error))
      die(error);
    std::printf("predicted %lld samples: %s\n", (long long)set.samples,
                o.outputs[k].c_str());
  }
}

} // namespace

int main(int argc, char **argv) {
  Options options = parseOptions(argc, argv);
  return Trainer(std::move(options)).run();
}
