//===- ampc-import-sweep.cpp - extreme attribute values through the importer -===//
//
// ampc-import-sweep [--all-bases] [--ops=A,B] [--verbose] NODE_TEST_DIR
//
// Takes base models from the ONNX node tests (one-node graphs that import
// as they are, compile-time inputs bound to the test's own values as
// Constant nodes) and, for every op of the importer's rule table, sets each
// integer attribute it reads, each element of its integer-list attributes,
// and each element of its compile-time inputs (OneHot's depth, Range's
// limits, Pad's pads, ...) to the extreme values 0, -1, 2^31, 2^32, 2^62,
// INT64_MIN and INT64_MAX (float inputs also NaN and infinity). Each case
// is imported in a child process held to an address-space limit and a time
// limit. A case passes when the model imports and verifies, or when the
// importer refuses it with one error line naming the node; a signal, an
// abort, a timeout, a peak memory over the limit, a message without the
// node, or several lines fail it.
//
// By default one base per op (the node test setting most of the op's
// integer attributes); --all-bases takes every one-node node test. Ops
// with no one-node node test (Gelu, Mish, LpNormalization,
// GroupNormalization in Debian's test data) have a base written here.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Import/Diagnostics.h"
#include "ampc/Import/OnnxImporter.h"
#include "ampc/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

using namespace llvm;

#if defined(__SANITIZE_ADDRESS__)
#define AMPC_SWEEP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AMPC_SWEEP_ASAN 1
#endif
#endif

namespace {
cl::OptionCategory category("ampc-import-sweep options");
cl::opt<std::string> nodeTests(cl::Positional, cl::desc("<node-test dir>"),
                               cl::Required, cl::cat(category));
cl::opt<bool> allBases("all-bases",
                       cl::desc("sweep every one-node node test, not one "
                                "per op"),
                       cl::cat(category));
cl::list<std::string> onlyOps("ops", cl::desc("sweep these ops only"),
                              cl::CommaSeparated, cl::cat(category));
cl::opt<unsigned> memoryMiB(
    "memory-mib",
    cl::desc("memory a case may add to the sweep's own (address space and "
             "peak resident size, MiB; default 1024)"),
    cl::init(1024), cl::cat(category));
cl::opt<unsigned> timeoutSeconds("timeout",
                                 cl::desc("seconds a case may take (default "
                                          "20)"),
                                 cl::init(20), cl::cat(category));
cl::opt<bool> verbose("verbose", cl::desc("print every case and its outcome"),
                      cl::cat(category));
// The sweep's own test: the first case does this before its import, so
// that a test sees the sweep fail it and go on with the next.
cl::opt<std::string> injectFailure(
    "inject-failure",
    cl::desc("segv, abort, hang or memory in the first case (tests the "
             "sweep)"),
    cl::Hidden, cl::cat(category));

constexpr int64_t kValues[] = {0,
                               -1,
                               int64_t(1) << 31,
                               int64_t(1) << 32,
                               int64_t(1) << 62,
                               std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max()};
/// Elements of a list attribute or a compile-time input swept one by one.
constexpr int kMaxElements = 8;

/// A one-node model from a node test, its compile-time inputs made Constant
/// nodes in front of it.
struct Base {
  std::string name;
  onnx::ModelProto model;
  int node = 0; // index of the swept node in the graph
  int64_t rank0 = 1;
  std::vector<int> constants; // indices of the bound Constant nodes
};

struct Case {
  std::string label;
  std::string bytes;
};

std::string valueText(int64_t v) {
  switch (v) {
  case std::numeric_limits<int64_t>::min():
    return "INT64_MIN";
  case std::numeric_limits<int64_t>::max():
    return "INT64_MAX";
  case int64_t(1) << 31:
    return "2^31";
  case int64_t(1) << 32:
    return "2^32";
  case int64_t(1) << 62:
    return "2^62";
  default:
    return std::to_string(v);
  }
}

bool readFile(const std::string &path, std::string &out) {
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return false;
  out = (*buffer)->getBuffer().str();
  return true;
}

/// Bases for the ops that have no one-node node test (in ONNX text).
const char *const kBuiltinBases[][2] = {
    {"builtin_gelu", R"(<ir_version: 9, opset_import: ["" : 20]>
g (float[2, 3] x) => (float[2, 3] y) { y = Gelu <approximate = "tanh"> (x) })"},
    {"builtin_mish", R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[2, 3] x) => (float[2, 3] y) { y = Mish (x) })"},
    {"builtin_lp_normalization", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3, 4] x) => (float[2, 3, 4] y) {
  y = LpNormalization <axis = 1, p = 2> (x)
})"},
    {"builtin_group_normalization", R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[2, 4, 3, 3] x, float[2] scale, float[2] bias) => (float[2, 4, 3, 3] y) {
  y = GroupNormalization <epsilon = 0.00001, num_groups = 2> (x, scale, bias)
})"},
};

/// Makes graph inputs that feed a compile-time operand of the node Constant
/// nodes holding test_data_set_0's values. False when a value is missing.
bool bindCompileTimeInputs(const std::string &folder, Base &base) {
  onnx::GraphProto *graph = base.model.mutable_graph();
  const onnx::NodeProto node = graph->node(0);
  llvm::StringSet<> initializers;
  for (const auto &t : graph->initializer())
    initializers.insert(t.name());
  std::vector<onnx::NodeProto> constants;
  // input_N.pb is the graph's N-th input as the test declares them.
  std::vector<std::string> declared;
  for (const auto &in : graph->input())
    declared.push_back(in.name());
  for (int k : ampc::compileTimeInputs(node.op_type())) {
    if (k >= node.input_size() || node.input(k).empty() ||
        initializers.contains(node.input(k)))
      continue;
    auto found = llvm::find(declared, node.input(k));
    if (found == declared.end())
      continue;
    int index = found - declared.begin();
    std::string bytes;
    onnx::TensorProto value;
    if (!readFile(folder + "/test_data_set_0/input_" + std::to_string(index) +
                      ".pb",
                  bytes) ||
        !value.ParseFromString(bytes))
      return false;
    value.set_name(node.input(k));
    onnx::NodeProto c;
    c.set_op_type("Constant");
    c.set_name("bound_" + node.input(k));
    c.add_output(node.input(k));
    onnx::AttributeProto *a = c.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = value;
    constants.push_back(c);
    for (int i = 0; i < graph->input_size(); ++i)
      if (graph->input(i).name() == node.input(k)) {
        graph->mutable_input()->DeleteSubrange(i, 1);
        break;
      }
  }
  // The bound Constants go first, the node after them.
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (onnx::NodeProto &c : constants) {
    base.constants.push_back(nodes.size());
    *nodes.Add() = std::move(c);
  }
  base.node = nodes.size();
  *nodes.Add() = node;
  graph->mutable_node()->Swap(&nodes);
  if (graph->node(base.node).name().empty())
    graph->mutable_node(base.node)->set_name(node.op_type() + "_node");
  return true;
}

onnx::AttributeProto *attribute(onnx::NodeProto &node, StringRef name) {
  for (auto &a : *node.mutable_attribute())
    if (a.name() == name)
      return &a;
  onnx::AttributeProto *a = node.add_attribute();
  a->set_name(name.str());
  return a;
}

const onnx::AttributeProto *findAttribute(const onnx::NodeProto &node,
                                          StringRef name) {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

/// The values of a tensor the sweep can change (int32, int64, float,
/// double), or false.
bool tensorValues(const onnx::TensorProto &t, std::vector<double> &floats,
                  std::vector<int64_t> &ints) {
  const std::string &raw = t.raw_data();
  auto fromRaw = [&](auto tag, auto &out) {
    using T = decltype(tag);
    for (size_t i = 0; i + sizeof(T) <= raw.size(); i += sizeof(T)) {
      T v;
      std::memcpy(&v, raw.data() + i, sizeof(T));
      out.push_back(v);
    }
  };
  switch (t.data_type()) {
  case onnx::TensorProto::INT64:
    if (t.has_raw_data())
      fromRaw(int64_t(), ints);
    else
      ints.assign(t.int64_data().begin(), t.int64_data().end());
    return true;
  case onnx::TensorProto::INT32:
    if (t.has_raw_data())
      fromRaw(int32_t(), ints);
    else
      ints.assign(t.int32_data().begin(), t.int32_data().end());
    return true;
  case onnx::TensorProto::FLOAT:
    if (t.has_raw_data())
      fromRaw(float(), floats);
    else
      floats.assign(t.float_data().begin(), t.float_data().end());
    return true;
  case onnx::TensorProto::DOUBLE:
    if (t.has_raw_data())
      fromRaw(double(), floats);
    else
      floats.assign(t.double_data().begin(), t.double_data().end());
    return true;
  default:
    return false;
  }
}

void setTensorValues(onnx::TensorProto &t, const std::vector<double> &floats,
                     const std::vector<int64_t> &ints) {
  t.clear_raw_data();
  t.clear_int64_data();
  t.clear_int32_data();
  t.clear_float_data();
  t.clear_double_data();
  for (int64_t v : ints) {
    if (t.data_type() == onnx::TensorProto::INT64)
      t.add_int64_data(v);
    else
      t.add_int32_data(static_cast<int32_t>(static_cast<uint64_t>(v)));
  }
  for (double v : floats) {
    if (t.data_type() == onnx::TensorProto::DOUBLE)
      t.add_double_data(v);
    else
      t.add_float_data(static_cast<float>(v));
  }
}

/// Every case of one base: extreme values in each integer attribute the
/// op's rule reads, each element of its integer lists, and each element of
/// its bound compile-time inputs.
std::vector<Case> casesOf(const Base &base, const ampc::SupportedOp &rule) {
  std::vector<Case> cases;
  auto add = [&](const std::string &what, const onnx::ModelProto &m) {
    Case c;
    c.label = base.name + ": " + what;
    m.SerializeToString(&c.bytes);
    cases.push_back(std::move(c));
  };
  const onnx::NodeProto &node = base.model.graph().node(base.node);
  for (const ampc::SupportedAttribute &attr : rule.attributes) {
    if (attr.kind == ampc::OnnxAttributeKind::Int) {
      for (int64_t v : kValues) {
        onnx::ModelProto m = base.model;
        onnx::AttributeProto *a =
            attribute(*m.mutable_graph()->mutable_node(base.node), attr.name);
        a->Clear();
        a->set_name(attr.name.str());
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(v);
        add(attr.name.str() + "=" + valueText(v), m);
      }
      continue;
    }
    if (attr.kind != ampc::OnnxAttributeKind::Ints)
      continue;
    const onnx::AttributeProto *given = findAttribute(node, attr.name);
    if (given && given->ints_size()) {
      // Each element in turn, the others as the test has them.
      int n = std::min(given->ints_size(), kMaxElements);
      for (int i = 0; i < n; ++i)
        for (int64_t v : kValues) {
          onnx::ModelProto m = base.model;
          attribute(*m.mutable_graph()->mutable_node(base.node), attr.name)
              ->set_ints(i, v);
          add(attr.name.str() + "[" + std::to_string(i) + "]=" +
                  valueText(v),
              m);
        }
      continue;
    }
    // Absent: a list of one, and one as long as the first input's rank
    // (axes, perm), every element the value.
    SmallVector<int64_t> lengths = {1};
    if (base.rank0 > 1)
      lengths.push_back(base.rank0);
    for (int64_t length : lengths)
      for (int64_t v : kValues) {
        onnx::ModelProto m = base.model;
        onnx::AttributeProto *a =
            attribute(*m.mutable_graph()->mutable_node(base.node), attr.name);
        a->Clear();
        a->set_name(attr.name.str());
        a->set_type(onnx::AttributeProto::INTS);
        for (int64_t i = 0; i < length; ++i)
          a->add_ints(v);
        add(attr.name.str() + "=[" + valueText(v) +
                (length > 1 ? " x" + std::to_string(length) : "") + "]",
            m);
      }
  }
  for (int c : base.constants) {
    const onnx::NodeProto &constant = base.model.graph().node(c);
    const onnx::TensorProto &t = constant.attribute(0).t();
    std::vector<double> floats;
    std::vector<int64_t> ints;
    if (!tensorValues(t, floats, ints))
      continue;
    size_t count = std::max(floats.size(), ints.size());
    for (size_t i = 0; i < std::min<size_t>(count, kMaxElements); ++i) {
      std::vector<std::pair<std::string, double>> floatValues;
      for (int64_t v : kValues)
        floatValues.push_back({valueText(v), static_cast<double>(v)});
      floatValues.push_back({"nan", std::nan("")});
      floatValues.push_back({"inf", std::numeric_limits<double>::infinity()});
      floatValues.push_back(
          {"-inf", -std::numeric_limits<double>::infinity()});
      size_t cases = ints.empty() ? floatValues.size() : std::size(kValues);
      for (size_t j = 0; j < cases; ++j) {
        std::vector<double> f = floats;
        std::vector<int64_t> n = ints;
        std::string text;
        if (ints.empty()) {
          f[i] = floatValues[j].second;
          text = floatValues[j].first;
        } else {
          n[i] = kValues[j];
          text = valueText(kValues[j]);
        }
        onnx::ModelProto m = base.model;
        setTensorValues(*m.mutable_graph()
                             ->mutable_node(c)
                             ->mutable_attribute(0)
                             ->mutable_t(),
                        f, n);
        add("input '" + t.name() + "'[" + std::to_string(i) + "]=" + text, m);
      }
    }
  }
  return cases;
}

enum class Outcome { Imported, Refused, Failed };

struct Result {
  Outcome outcome = Outcome::Failed;
  std::string detail; // the error line, or why the case failed
  double seconds = 0;
  long peakKiB = 0; // resident memory the case added at its peak
};

/// A /proc file's text (its size reads as 0, so it is read to the end).
std::string readProcFile(const char *path) {
  std::string text;
  if (FILE *f = std::fopen(path, "r")) {
    char chunk[4096];
    for (size_t n; (n = std::fread(chunk, 1, sizeof(chunk), f)) > 0;)
      text.append(chunk, n);
    std::fclose(f);
  }
  return text;
}

/// A line of /proc/self/status ("VmHWM:", "VmRSS:") in KiB, or -1.
long statusKiB(StringRef field) {
  std::string status = readProcFile("/proc/self/status");
  size_t at = status.find(field.str());
  if (at == std::string::npos)
    return -1;
  return std::strtol(status.c_str() + at + field.size(), nullptr, 10);
}

#ifndef AMPC_SWEEP_ASAN
/// This process's address space (/proc/self/statm) in bytes, or 0.
rlim_t addressSpace() {
  std::string statm = readProcFile("/proc/self/statm");
  return std::strtoull(statm.c_str(), nullptr, 10) *
         static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
}
#endif

/// Imports one case in this process: the outcome and, for a refusal, the
/// error lines.
Result importCase(mlir::MLIRContext &context, const Case &c,
                  StringRef nodeName) {
  Result result;
  std::string lines;
  unsigned errors = 0;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
      ++errors;
    lines += ampc::formatDiagnostic(d) + "\n";
    return mlir::success();
  });
  ampc::ImportOptions options;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      ampc::importOnnxBuffer(context, c.bytes, "sweep.onnx", "", options);
  StringRef text = StringRef(lines).trim();
  if (module && lines.empty()) {
    if (failed(mlir::verify(*module)))
      result.detail = "the imported module does not verify";
    else
      result.outcome = Outcome::Imported;
    return result;
  }
  if (module) {
    result.detail = "imported with messages: " + text.str();
    return result;
  }
  if (errors == 0) {
    result.detail = "refused without an error: " + text.str();
    return result;
  }
  SmallVector<StringRef> split;
  text.split(split, '\n');
  if (split.size() != 1)
    result.detail = std::to_string(split.size()) + " lines: " + text.str();
  else if (!text.contains(("node '" + nodeName + "'").str()))
    result.detail = "the message does not name the node: " + text.str();
  else {
    result.outcome = Outcome::Refused;
    result.detail = text.str();
  }
  return result;
}

/// Runs `cases` in a worker process, one after the other, each under the
/// time limit, the worker under the address-space limit. A worker that
/// dies (a signal, an abort, a failed allocation, the alarm) fails the
/// case it was running; a new one goes on with the next.
std::vector<Result> runCases(const std::vector<Case> &cases,
                             const std::vector<std::string> &nodeNames,
                             bool inject) {
  std::vector<Result> results(cases.size());
  size_t next = 0;
  while (next < cases.size()) {
    size_t first = next;
    int fds[2];
    if (pipe(fds) != 0) {
      results[next].detail = "pipe failed";
      ++next;
      continue;
    }
    std::fflush(nullptr);
    outs().flush();
    // The worker's stderr (LLVM's "LLVM ERROR: ..." before an abort) goes
    // to a file: its last line says why a worker died.
    FILE *log = std::tmpfile();
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      if (log)
        dup2(fileno(log), STDERR_FILENO);
      // LLVM's crash handlers (InitLLVM) print a symbolized stack, which
      // can take longer than the time limit under the memory limit: a
      // crash here is only counted, with its signal. (ASan and UBSan
      // findings do not go through these: they print and exit.)
      for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP,
                      SIGSYS, SIGXCPU, SIGXFSZ})
        signal(sig, SIG_DFL);
#ifndef AMPC_SWEEP_ASAN
      // ASan reserves terabytes of address space for its shadow; under it
      // only the peak resident size is checked.
      if (rlim_t now = addressSpace()) {
        struct rlimit limit;
        limit.rlim_cur = limit.rlim_max =
            now + static_cast<rlim_t>(memoryMiB) * 1024 * 1024;
        setrlimit(RLIMIT_AS, &limit);
      }
#endif
      std::unique_ptr<mlir::MLIRContext> context;
      for (size_t i = next; i < cases.size(); ++i) {
        // A fresh context now and then: it keeps every attribute it
        // interned, constants included.
        if (!context || (i - next) % 64 == 0) {
          context.reset();
          context = std::make_unique<mlir::MLIRContext>(
              mlir::MLIRContext::Threading::DISABLED);
          context->loadDialect<ampc::AMPCDialect, mlir::func::FuncDialect>();
          context->printOpOnDiagnostic(false);
        }
        // The peak resident size restarts at the current one ("5" to
        // clear_refs), so VmHWM after the case is the case's own peak.
        {
          int fd = ::open("/proc/self/clear_refs", O_WRONLY);
          if (fd >= 0) {
            (void)!::write(fd, "5", 1);
            ::close(fd);
          }
        }
        long before = statusKiB("VmRSS:");
        // Tell the parent which case runs, in case it is the last.
        std::string start = "S\t" + std::to_string(i) + "\n";
        (void)!::write(fds[1], start.data(), start.size());
        alarm(timeoutSeconds);
        auto t0 = std::chrono::steady_clock::now();
        if (!inject || i != 0)
          ;
        else if (injectFailure == "segv")
          raise(SIGSEGV);
        else if (injectFailure == "abort")
          std::abort();
        else if (injectFailure == "hang")
          for (;;)
            pause();
        else if (injectFailure == "memory") {
          // 1.5 times the limit, touched: the address-space limit stops
          // it, or (under ASan) the peak resident size shows it.
          size_t bytes = static_cast<size_t>(memoryMiB) * 1536 * 1024;
          if (char *p = static_cast<char *>(std::malloc(bytes))) {
            for (size_t at = 0; at < bytes; at += 4096)
              p[at] = 1;
            asm volatile("" : : "r"(p) : "memory");
            std::free(p);
          } else {
            std::abort();
          }
        }
        Result r = importCase(*context, cases[i], nodeNames[i]);
        r.seconds = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
        alarm(0);
        r.peakKiB = statusKiB("VmHWM:") - before;
        std::string detail = r.detail;
        std::replace(detail.begin(), detail.end(), '\n', ' ');
        std::string line = "R\t" + std::to_string(i) + "\t" +
                           std::to_string(static_cast<int>(r.outcome)) +
                           "\t" + std::to_string(r.seconds) + "\t" +
                           std::to_string(r.peakKiB) + "\t" + detail + "\n";
        for (size_t done = 0; done < line.size();) {
          ssize_t n = ::write(fds[1], line.data() + done, line.size() - done);
          if (n <= 0)
            _exit(3);
          done += n;
        }
      }
      _exit(0);
    }
    close(fds[1]);
    if (pid < 0) {
      close(fds[0]);
      if (log)
        std::fclose(log);
      results[next].detail = "fork failed";
      ++next;
      continue;
    }
    std::string pending;
    char buffer[65536];
    constexpr size_t kNone = ~size_t(0);
    size_t running = kNone; // the case the worker started and not reported
    auto started = std::chrono::steady_clock::now();
    for (ssize_t n; (n = ::read(fds[0], buffer, sizeof(buffer))) > 0;) {
      pending.append(buffer, n);
      size_t eol;
      while ((eol = pending.find('\n')) != std::string::npos) {
        SmallVector<StringRef, 6> fields;
        StringRef(pending).take_front(eol).split(fields, '\t', 5);
        if (fields[0] == "S") {
          running = std::stoul(fields[1].str());
          started = std::chrono::steady_clock::now();
        } else if (fields.size() == 6) {
          size_t i = std::stoul(fields[1].str());
          Result &r = results[i];
          r.outcome = static_cast<Outcome>(std::stoi(fields[2].str()));
          r.seconds = std::stod(fields[3].str());
          r.peakKiB = std::stol(fields[4].str());
          r.detail = fields[5].str();
          if (r.outcome != Outcome::Failed &&
              r.peakKiB > static_cast<long>(memoryMiB) * 1024) {
            r.outcome = Outcome::Failed;
            r.detail = "peak memory " + std::to_string(r.peakKiB / 1024) +
                       " MiB: " + r.detail;
          }
          running = kNone;
          next = i + 1;
        }
        pending.erase(0, eol + 1);
      }
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (running == kNone) {
      if (log)
        std::fclose(log);
      // Every case reported, or the worker died between two cases: go on
      // from the next one (a worker that starts none fails that one).
      if (next == first && next < cases.size()) {
        results[next].detail = "the worker died before starting the case";
        ++next;
      }
      continue;
    }
    Result &r = results[running];
    r.outcome = Outcome::Failed;
    r.seconds = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - started)
                    .count();
    if (WIFSIGNALED(status)) {
      int sig = WTERMSIG(status);
      r.detail = sig == SIGALRM
                     ? "timed out after " + std::to_string(timeoutSeconds) +
                           " s"
                     : std::string("killed by signal ") + std::to_string(sig) +
                           " (" + strsignal(sig) + ")";
    } else {
      r.detail = "the importer exited with status " +
                 std::to_string(WEXITSTATUS(status));
    }
    if (log) {
      std::string text;
      std::rewind(log);
      char chunk[4096];
      for (size_t n; (n = std::fread(chunk, 1, sizeof(chunk), log)) > 0;)
        text.append(chunk, n);
      StringRef last = StringRef(text).trim();
      last = last.substr(last.rfind('\n') + 1);
      if (!last.empty())
        r.detail += ": " + last.str();
    }
    next = running + 1;
    if (log)
      std::fclose(log);
  }
  return results;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter(ampc::printVersion);
  cl::ParseCommandLineOptions(
      argc, argv,
      "ampc-import-sweep: extreme integer attributes and compile-time input "
      "values through the importer\n\n"
      "  ampc-import-sweep [--all-bases] [--ops=A,B] NODE_TEST_DIR\n");

  std::map<std::string, ampc::SupportedOp> rules;
  for (ampc::SupportedOp &op : ampc::supportedOnnxOpTable())
    rules[op.onnxOp.str()] = op;
  if (!injectFailure.empty() && injectFailure != "segv" &&
      injectFailure != "abort" && injectFailure != "hang" &&
      injectFailure != "memory") {
    errs() << "error: --inject-failure must be segv, abort, hang or memory\n";
    return 1;
  }
  for (const std::string &op : onlyOps)
    if (!rules.count(op)) {
      errs() << "error: --ops: '" << op << "' is not an op ampc imports\n";
      return 1;
    }

  std::vector<std::pair<std::string, std::string>> builtins;
  for (const auto &[name, text] : kBuiltinBases)
    builtins.push_back({name, text});
  std::vector<std::string> folders;
  std::error_code ec;
  for (sys::fs::directory_iterator it(nodeTests, ec), end; it != end && !ec;
       it.increment(ec))
    if (sys::fs::exists(it->path() + "/model.onnx"))
      folders.push_back(it->path());
  if (ec || folders.empty()) {
    errs() << "error: " << nodeTests << ": no node-test folders\n";
    return 1;
  }
  llvm::sort(folders);

  // Candidate bases: one-node graphs of a supported op that import as they
  // are once their compile-time inputs are bound. Their outputs lose their
  // declared shapes, so that a changed attribute reaches the node's own
  // checks, not the graph output's.
  std::vector<Base> candidates;
  unsigned oneNode = 0, notImported = 0;
  for (const auto &[name, text] : builtins)
    folders.push_back(name);
  for (const std::string &folder : folders) {
    std::string bytes;
    Base base;
    auto builtin = llvm::find_if(
        builtins, [&](const auto &b) { return b.first == folder; });
    if (builtin != builtins.end()) {
      if (!onnx::OnnxParser::Parse(base.model, builtin->second.c_str())
               .IsOK()) {
        errs() << "error: the built-in base " << folder << " does not parse\n";
        return 1;
      }
    } else if (!readFile(folder + "/model.onnx", bytes) ||
               !base.model.ParseFromString(bytes)) {
      continue;
    }
    if (base.model.graph().node_size() != 1)
      continue;
    // A copy: binding the inputs rebuilds the graph's node list.
    const onnx::NodeProto node = base.model.graph().node(0);
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      continue;
    if (!rules.count(node.op_type()) ||
        (!onlyOps.empty() && !llvm::is_contained(onlyOps, node.op_type())))
      continue;
    ++oneNode;
    base.name = sys::path::filename(folder).str();
    for (const auto &in : base.model.graph().input())
      if (node.input_size() && in.name() == node.input(0) &&
          in.type().has_tensor_type() &&
          in.type().tensor_type().has_shape())
        base.rank0 = in.type().tensor_type().shape().dim_size();
    if (!bindCompileTimeInputs(folder, base)) {
      ++notImported;
      continue;
    }
    for (auto &out : *base.model.mutable_graph()->mutable_output())
      if (out.type().has_tensor_type())
        out.mutable_type()->mutable_tensor_type()->clear_shape();
    candidates.push_back(std::move(base));
  }
  std::vector<Case> plain;
  std::vector<std::string> plainNodes;
  for (const Base &base : candidates) {
    plain.push_back({base.name, ""});
    base.model.SerializeToString(&plain.back().bytes);
    plainNodes.push_back(base.model.graph().node(base.node).name());
  }
  std::vector<Result> baseline = runCases(plain, plainNodes, /*inject=*/false);
  std::map<std::string, std::vector<Base>> bases;
  for (auto [base, r] : llvm::zip(candidates, baseline)) {
    if (r.outcome != Outcome::Imported) {
      if (verbose)
        outs() << "not a base: " << base.name << ": " << r.detail << "\n";
      ++notImported;
      continue;
    }
    std::string op = base.model.graph().node(base.node).op_type();
    bases[op].push_back(std::move(base));
  }
  // One base per op unless --all-bases: the one that sets most of the
  // op's integer attributes (the first in name order on a tie).
  if (!allBases)
    for (auto &[op, list] : bases) {
      auto setCount = [&, &op = op](const Base &b) {
        unsigned n = 0;
        for (const ampc::SupportedAttribute &a : rules[op].attributes)
          if ((a.kind == ampc::OnnxAttributeKind::Int ||
               a.kind == ampc::OnnxAttributeKind::Ints) &&
              findAttribute(b.model.graph().node(b.node), a.name))
            ++n;
        return n;
      };
      size_t best = 0;
      for (size_t i = 1; i < list.size(); ++i)
        if (setCount(list[i]) > setCount(list[best]))
          best = i;
      Base keep = std::move(list[best]);
      list.clear();
      list.push_back(std::move(keep));
    }

  std::vector<Case> cases;
  std::vector<std::string> nodeNames;
  unsigned attributeCount = 0, inputCount = 0;
  SmallVector<std::string> withoutBase;
  for (auto &[name, rule] : rules) {
    if (!onlyOps.empty() && !llvm::is_contained(onlyOps, name))
      continue;
    if (!bases.count(name)) {
      withoutBase.push_back(name);
      continue;
    }
    for (const ampc::SupportedAttribute &a : rule.attributes)
      if (a.kind == ampc::OnnxAttributeKind::Int ||
          a.kind == ampc::OnnxAttributeKind::Ints)
        ++attributeCount;
    inputCount += bases[name].front().constants.size();
    for (const Base &base : bases[name])
      for (Case &c : casesOf(base, rule)) {
        cases.push_back(std::move(c));
        nodeNames.push_back(base.model.graph().node(base.node).name());
      }
  }
  auto started = std::chrono::steady_clock::now();
  std::vector<Result> results = runCases(cases, nodeNames, /*inject=*/true);
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - started)
                       .count();
  unsigned imported = 0, refused = 0, failed = 0;
  long peakKiB = 0;
  double slowest = 0;
  std::string slowestCase, largestCase;
  for (auto [c, r] : llvm::zip(cases, results)) {
    if (r.peakKiB > peakKiB) {
      peakKiB = r.peakKiB;
      largestCase = c.label;
    }
    if (r.seconds > slowest) {
      slowest = r.seconds;
      slowestCase = c.label;
    }
    switch (r.outcome) {
    case Outcome::Imported:
      ++imported;
      break;
    case Outcome::Refused:
      ++refused;
      break;
    case Outcome::Failed:
      ++failed;
      outs() << "FAIL: " << c.label << ": " << r.detail << "\n";
      break;
    }
    if (verbose && r.outcome != Outcome::Failed)
      outs() << (r.outcome == Outcome::Imported ? "imported: " : "refused: ")
             << c.label << (r.detail.empty() ? "" : ": ") << r.detail << "\n";
  }
  unsigned baseCount = 0;
  for (auto &[op, list] : bases)
    baseCount += list.size();
  outs() << "bases: " << baseCount << " of " << oneNode
         << " one-node node tests of supported ops (" << notImported
         << " do not import as they are); ops without one: "
         << (withoutBase.empty() ? std::string("none")
                                 : llvm::join(withoutBase, ", "))
         << "\n";
  outs() << "swept " << bases.size() << " ops, " << attributeCount
         << " integer attributes, " << inputCount
         << " compile-time inputs: " << cases.size() << " cases, " << imported
         << " imported, " << refused << " refused with one line, " << failed
         << " failed\n";
  // Timings vary from run to run: on stderr, out of what tests compare.
  errs() << format("%.1f", seconds) << " s; slowest case "
         << format("%.3f", slowest) << " s (" << slowestCase
         << "); largest peak " << std::max<long>(0, peakKiB) / 1024
         << " MiB (" << largestCase << ")\n";
  return failed ? 1 : 0;
}
