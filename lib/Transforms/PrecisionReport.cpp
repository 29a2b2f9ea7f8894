//===- PrecisionReport.cpp - per-node precision decisions, and why --------===//

#include "ampc/Transforms/PrecisionReport.h"
#include "ampc/Transforms/Precision.h"
#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Fp8.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <functional>
#include <optional>

using namespace mlir;
using llvm::StringRef;

namespace {
/// Follows `value` back through casts to where it was produced; sets `cast`
/// to "f32->f16" when a compiler-inserted cast lies on the way.
Value traceSource(Value value, std::string &cast) {
  while (auto c = value.getDefiningOp<ampc::CastOp>()) {
    if (!ampc::isAutocast(c))
      break;
    cast = ampc::dtypeName(c.getInput().getType()) + "->" +
           ampc::dtypeName(c.getType());
    value = c.getInput();
  }
  return value;
}

/// `bytes` for a person: "640 bytes", "10.0 KiB", "1.2 MiB", "3.4 GiB".
std::string formatBytes(int64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " bytes";
  const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = bytes / 1024.0;
  int unit = 0;
  while (value >= 1024 && unit < 3)
    value /= 1024, ++unit;
  return llvm::formatv("{0:F1} {1}", value, units[unit]).str();
}

std::string join(const std::vector<std::string> &items) {
  return llvm::join(items.begin(), items.end(), ",");
}

std::string escapeHtml(StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '&': out += "&amp;"; break;
    case '"': out += "&quot;"; break;
    default: out += c;
    }
  }
  return out;
}

/// Fill colours of the drawn nodes, by compute dtype.
StringRef colourOf(StringRef dtype) {
  if (dtype == "f16")
    return "#8ecae6";
  if (dtype == "bf16")
    return "#c3a6e8";
  if (dtype == "f32")
    return "#ffb703";
  return "#e0e0e0";
}

std::string dotQuote(StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string buildDot(const ampc::PrecisionReport &r) {
  using ampc::PrecisionReport;
  std::string dot;
  llvm::raw_string_ostream os(dot);
  os << "digraph precision {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", "
        "fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=8];\n";
  for (auto [i, name] : llvm::enumerate(r.inputs))
    os << "  in" << i << " [label=" << dotQuote(name)
       << ", shape=ellipse, fillcolor=\"#ffffff\"];\n";
  for (auto [i, name] : llvm::enumerate(r.outputs))
    os << "  out" << i << " [label=" << dotQuote(name)
       << ", shape=ellipse, fillcolor=\"#ffffff\"];\n";
  for (auto [i, n] : llvm::enumerate(r.nodes))
    os << "  n" << i << " [label=" << dotQuote(n.name + "\n" + n.op + " · " + n.compute)
       << ", fillcolor=\"" << colourOf(n.compute) << "\", tooltip="
       << dotQuote(n.rule) << "];\n";
  for (auto [i, c] : llvm::enumerate(r.casts))
    os << "  c" << i << " [label=" << dotQuote("cast " + c.from + "->" + c.to)
       << ", shape=box, style=\"filled\", fillcolor=\"#ffffff\", "
          "color=\"#d62828\", fontcolor=\"#d62828\", fontsize=8];\n";
  for (auto [i, name] : llvm::enumerate(r.sources))
    os << "  s" << i << " [label=" << dotQuote(name)
       << ", shape=note, fillcolor=\"#ffffff\", fontsize=8];\n";
  auto endpoint = [](PrecisionReport::Endpoint e) {
    static const char *const prefix[] = {"n", "in", "out", "c", "s"};
    return prefix[e.kind] + std::to_string(e.index);
  };
  for (const auto &e : r.edges) {
    bool cast = e.from.kind == PrecisionReport::Endpoint::Cast ||
                e.to.kind == PrecisionReport::Endpoint::Cast;
    os << "  " << endpoint(e.from) << " -> " << endpoint(e.to) << " [label="
       << dotQuote(e.dtype) << ", color=\""
       << (cast ? "#d62828\", fontcolor=\"#d62828\"" : "#555555\"") << "];\n";
  }
  os << "}\n";
  return dot;
}

/// Runs `dot -Tsvg`; empty when Graphviz is missing or fails.
std::string renderSvg(const std::string &dot, std::string &warning) {
  auto program = llvm::sys::findProgramByName("dot");
  if (!program) {
    warning = "Graphviz 'dot' not found (Debian package graphviz); the page "
              "has the table only";
    return "";
  }
  llvm::SmallString<128> in, out;
  if (llvm::sys::fs::createTemporaryFile("ampc-precision", "dot", in) ||
      llvm::sys::fs::createTemporaryFile("ampc-precision", "svg", out)) {
    warning = "cannot create a temporary file for dot; the page has the table only";
    return "";
  }
  llvm::FileRemover removeIn(in), removeOut(out);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(in, ec);
    if (ec) {
      warning = "cannot write " + in.str().str();
      return "";
    }
    os << dot;
  }
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(out),
                                          StringRef("")};
  StringRef args[] = {*program, "-Tsvg", in};
  if (llvm::sys::ExecuteAndWait(*program, args, std::nullopt, redirects) != 0) {
    warning = "Graphviz 'dot' failed; the page has the table only";
    return "";
  }
  auto svg = llvm::MemoryBuffer::getFile(out);
  if (!svg) {
    warning = "cannot read dot's output; the page has the table only";
    return "";
  }
  // Drop the XML prolog and doctype so the SVG can sit inline in HTML.
  StringRef text = (*svg)->getBuffer();
  size_t start = text.find("<svg");
  return start == StringRef::npos ? "" : text.substr(start).str();
}
} // namespace

std::string ampc::PrecisionReport::InputPrecision::line() const {
  return "input " + name + ": " + dtype + ", " + why;
}

std::string ampc::PrecisionReport::summary() const {
  unsigned converted = 0;
  for (const Node &n : nodes)
    converted += n.compute == lowp && lowp != "f32";
  std::string s;
  llvm::raw_string_ostream os(s);
  if (lowp == "f32")
    os << "kept all " << nodes.size() << " nodes in f32 with " << castsAfter
       << " casts";
  else
    os << "converted " << converted << "/" << nodes.size() << " nodes to "
       << lowp << " with " << castsAfter << " casts (" << castsBefore
       << " before cast optimisation)";
  return s;
}

std::string ampc::PrecisionReport::Fp8Gemm::line() const {
  return "fp8 " + node + " (" + op + "): " + format + ": " + reason;
}

std::string ampc::PrecisionReport::fp8Summary() const {
  size_t decided = llvm::count_if(
      fp8Gemms, [](const Fp8Gemm &g) { return g.format != kFp8StaysBf16; });
  // No FP8 GEMM kernel exists yet (issue 42, step 4): say what runs.
  return llvm::formatv("fp8: {0} of {1} GEMMs decided FP8; computed in "
                       "BF16: FP8 kernels not built yet (delayed scaling: "
                       "amax history {2}, margin {3}, {4})",
                       decided, fp8Gemms.size(), fp8AmaxHistory, fp8Margin,
                       fp8AmaxAlgo)
      .str();
}

ampc::PrecisionReport ampc::buildPrecisionReport(ModuleOp module,
                                                 StringRef model,
                                                 StringRef lowp,
                                                 unsigned castsBefore) {
  PrecisionReport r;
  r.model = model.str();
  r.lowp = lowp.str();
  r.castsBefore = castsBefore;
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return r;
  r.castsAfter = countAutocasts(forward);

  using Endpoint = PrecisionReport::Endpoint;
  for (auto [i, arg] : llvm::enumerate(forward.getArguments())) {
    auto name = forward.getArgAttrOfType<StringAttr>(i, ampc::kNameAttr);
    r.inputs.push_back(name ? name.str() : "input" + std::to_string(i));
    if (auto why = forward.getArgAttrOfType<StringAttr>(
            i, ampc::kInputPrecisionAttr))
      r.inputPrecision.push_back(
          {r.inputs.back(), dtypeName(arg.getType()), why.str()});
  }
  for (unsigned i = 0; i < forward.getNumResults(); ++i) {
    auto name = forward.getResultAttrOfType<StringAttr>(i, ampc::kNameAttr);
    r.outputs.push_back(name ? name.str() : "output" + std::to_string(i));
  }
  // Where each drawn value comes from: decided nodes as they are met, casts
  // (with an edge from what they read) and their sources when first used.
  llvm::DenseMap<Operation *, Endpoint> drawn;
  std::function<std::optional<Endpoint>(Value, bool)> endpointOf =
      [&](Value v, bool forCast) -> std::optional<Endpoint> {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return Endpoint{Endpoint::Input, static_cast<int>(arg.getArgNumber())};
    Operation *def = v.getDefiningOp();
    if (auto it = drawn.find(def); it != drawn.end())
      return it->second;
    if (auto c = dyn_cast<ampc::CastOp>(def); c && ampc::isAutocast(c)) {
      Endpoint e{Endpoint::Cast, static_cast<int>(r.casts.size())};
      r.casts.push_back({dtypeName(c.getInput().getType()), dtypeName(c.getType())});
      drawn[def] = e;
      if (std::optional<Endpoint> from = endpointOf(c.getInput(), true))
        r.edges.push_back({*from, e, dtypeName(c.getInput().getType())});
      return e;
    }
    // Parameters and constants are drawn only where a cast reads them.
    if (!forCast)
      return std::nullopt;
    Endpoint e{Endpoint::Source, static_cast<int>(r.sources.size())};
    if (auto p = dyn_cast<ampc::LoadParameterOp>(def))
      r.sources.push_back(p.getParameter().str());
    else
      r.sources.push_back(def->getName().stripDialect().str());
    drawn[def] = e;
    return e;
  };
  auto addEdge = [&](Value v, Endpoint to) {
    if (!isa<FloatType>(cast<ShapedType>(v.getType()).getElementType()))
      return;
    if (std::optional<Endpoint> from = endpointOf(v, false))
      r.edges.push_back({*from, to, dtypeName(v.getType())});
  };

  for (Operation &op : forward.getBody().getOps()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands()))
        addEdge(v, Endpoint{Endpoint::Output, static_cast<int>(i)});
      continue;
    }
    std::optional<PrecisionDecision> decision = getPrecisionDecision(&op);
    if (!decision)
      continue;
    PrecisionReport::Node n;
    n.name = onnxNodeName(&op);
    n.op = onnxOpType(&op);
    n.ampcOp = op.getName().getStringRef().str();
    for (Value operand : op.getOperands()) {
      std::string unused;
      n.inputs.push_back(dtypeName(traceSource(operand, unused).getType()));
    }
    n.compute = dtypeName(decision->compute);
    for (Value result : op.getResults())
      n.outputs.push_back(dtypeName(result.getType()));
    n.category = stringifyPrecisionCategory(decision->category).str();
    n.rule = decision->rule;
    Endpoint to{Endpoint::Node, static_cast<int>(r.nodes.size())};
    r.nodes.push_back(std::move(n));
    for (Value operand : op.getOperands())
      addEdge(operand, to);
    drawn[&op] = to;
  }
  if (auto recipe = module->getAttrOfType<DictionaryAttr>(kFp8RecipeAttr)) {
    r.fp8 = true;
    r.fp8AmaxHistory = recipe.getAs<IntegerAttr>("amax_history").getInt();
    r.fp8Margin = recipe.getAs<IntegerAttr>("margin").getInt();
    r.fp8AmaxAlgo = recipe.getAs<StringAttr>("amax_algo").str();
  }
  forward.walk([&](Operation *op) {
    if (auto fp8 = op->getAttrOfType<DictionaryAttr>(kFp8Attr))
      r.fp8Gemms.push_back({onnxNodeName(op), onnxOpType(op),
                            fp8.getAs<StringAttr>("format").str(),
                            fp8.getAs<StringAttr>("reason").str()});
  });
  forward.walk([&](Operation *op) {
    if (auto shape = op->getAttrOfType<StringAttr>(ampc::kGemmShapeAttr))
      r.gemmShapes.push_back(shape.str());
    if (auto layout = op->getAttrOfType<StringAttr>(ampc::kLayoutAttr))
      r.layout.push_back(layout.str());
    if (auto conv = dyn_cast<ampc::ConvOp>(op); conv && conv.getChannelsLast()) {
      // (N, H, W, C) by (M, kH, kW, C/group).
      int64_t c = cast<RankedTensorType>(conv.getInput().getType())
                      .getShape()
                      .back(),
              m = cast<RankedTensorType>(conv.getWeight().getType())
                      .getDimSize(0);
      std::string line = llvm::formatv("{0}: channels-last, C {1}, M {2}",
                                       ampc::nodeDescription(op), c, m);
      // ampc-pad-channels' decision (also listed in gemm_shapes): the
      // counts above are the padded ones where it padded.
      if (op->hasAttr(ampc::kGemmShapeAttr)) {
        if (c % 8 || m % 8)
          line += " (not multiples of 8; see gemm_shapes for why)";
      } else if (c % 8 || m % 8) {
        line += " (not multiples of 8: not padded (--pad-channels=off); "
                "cuDNN picks a kernel for them)";
      }
      r.layout.push_back(line);
    }
    std::string node = onnxNodeName(op);
    if (auto a = dyn_cast<ampc::AttentionOp>(op)) {
      auto shape = [](Value v, ArrayRef<int64_t> perm) {
        return ampc::attentionLogicalShape(
            cast<ShapedType>(v.getType()).getShape(), perm);
      };
      SmallVector<int64_t, 4> q = shape(a.getQ(), a.getQPerm());
      SmallVector<int64_t, 4> k = shape(a.getK(), a.getKPerm());
      std::string line;
      llvm::raw_string_ostream os(line);
      os << "attention " << node << ": fused, ";
      // [B·H, S, D] in the model: one dimension, not a batch of 1.
      if (op->hasAttr(ampc::kAttentionMergedHeadsAttr))
        os << "batch x heads " << q[1] << " (one dimension in the model)";
      else
        os << "batch " << q[0] << ", heads " << q[1];
      os << ", sequence " << q[2] << " x " << k[2] << ", head dim "
         << q[3] << ", " << (a.getCausal() ? "causal" : "not causal")
         << (a.getBias() ? ", additive mask" : "");
      if (auto saves = op->getAttrOfType<IntegerAttr>(ampc::kAttentionSavesAttr))
        os << ", saves " << formatBytes(saves.getInt()) << " per step";
      r.attention.push_back(line);
    } else if (auto why =
                   op->getAttrOfType<StringAttr>(ampc::kAttentionUnfusedAttr)) {
      r.attention.push_back("attention at " + node +
                            ": not fused: " + why.str());
    }
  });
  // Every cast the summary counts is drawn, also one whose user is not.
  forward.walk([&](ampc::CastOp c) {
    if (ampc::isAutocast(c))
      endpointOf(c.getResult(), false);
  });
  return r;
}

void ampc::printPrecisionTable(const PrecisionReport &r, llvm::raw_ostream &os) {
  size_t nameWidth = 4, opWidth = 2, inWidth = 6, outWidth = 6;
  for (const auto &n : r.nodes) {
    nameWidth = std::max(nameWidth, n.name.size());
    opWidth = std::max(opWidth, n.op.size());
    inWidth = std::max(inWidth, join(n.inputs).size());
    outWidth = std::max(outWidth, join(n.outputs).size());
  }
  auto row = [&](StringRef name, StringRef op, StringRef in, StringRef compute,
                 StringRef out, StringRef rule) {
    os << llvm::left_justify(name, nameWidth) << "  "
       << llvm::left_justify(op, opWidth) << "  "
       << llvm::left_justify(in, inWidth) << "  "
       << llvm::left_justify(compute, 7) << "  "
       << llvm::left_justify(out, outWidth) << "  " << rule << "\n";
  };
  row("node", "op", "inputs", "compute", "output", "rule");
  for (const auto &n : r.nodes)
    row(n.name, n.op, join(n.inputs), n.compute, join(n.outputs),
        n.rule);
  for (const std::string &shape : r.gemmShapes)
    os << "gemm " << shape << "\n";
  for (const std::string &line : r.layout)
    os << "layout " << line << "\n";
  for (const std::string &line : r.attention)
    os << line << "\n";
  for (const PrecisionReport::InputPrecision &input : r.inputPrecision)
    os << input.line() << "\n";
  for (const PrecisionReport::Fp8Gemm &gemm : r.fp8Gemms)
    os << gemm.line() << "\n";
  if (r.fp8)
    os << r.model << ": " << r.fp8Summary() << "\n";
  for (const std::string &line : r.syncBatchNorm)
    os << "sync-batchnorm " << line << "\n";
  os << r.model << ": " << r.summary() << "\n";
}

void ampc::writePrecisionJson(const PrecisionReport &r, llvm::raw_ostream &os) {
  llvm::json::Array nodes;
  auto strings = [](const std::vector<std::string> &items) {
    llvm::json::Array a;
    for (const auto &s : items)
      a.push_back(s);
    return a;
  };
  for (const auto &n : r.nodes)
    nodes.push_back(llvm::json::Object{
        {"name", n.name},
        {"op", n.op},
        {"ampc_op", n.ampcOp},
        {"inputs", strings(n.inputs)},
        {"compute", n.compute},
        {"outputs", strings(n.outputs)},
        {"category", n.category},
        {"rule", n.rule},
    });
  unsigned converted = 0;
  for (const auto &n : r.nodes)
    converted += n.compute == r.lowp && r.lowp != "f32";
  llvm::json::Object top{
      {"model", r.model},
      {"dtype", r.lowp},
      {"nodes", std::move(nodes)},
      {"converted", converted},
      {"total", static_cast<int64_t>(r.nodes.size())},
      {"casts", r.castsAfter},
      {"casts_before_optimisation", r.castsBefore},
      {"summary", r.summary()},
      {"gemm_shapes", strings(r.gemmShapes)},
      {"layout", strings(r.layout)},
      // Each attention found, fused or not and why (the text report's
      // lines; issue 38, item 4).
      {"attention", strings(r.attention)},
  };
  // With --sync-batchnorm: the BatchNorms synchronised over the ranks.
  if (!r.syncBatchNorm.empty())
    top["sync_batchnorm"] = strings(r.syncBatchNorm);
  // With --input-precision=auto: the type of each f32 input and why.
  if (!r.inputPrecision.empty()) {
    llvm::json::Array inputs;
    for (const PrecisionReport::InputPrecision &input : r.inputPrecision)
      inputs.push_back(llvm::json::Object{
          {"name", input.name}, {"dtype", input.dtype}, {"why", input.why}});
    top["input_precision"] = std::move(inputs);
  }
  // With --precision=fp8: each GEMM's decision and why, the recipe.
  if (r.fp8) {
    llvm::json::Array gemms;
    for (const PrecisionReport::Fp8Gemm &gemm : r.fp8Gemms)
      gemms.push_back(llvm::json::Object{{"node", gemm.node},
                                         {"op", gemm.op},
                                         {"format", gemm.format},
                                         {"reason", gemm.reason}});
    top["fp8"] = llvm::json::Object{
        {"gemms", std::move(gemms)},
        {"computed_in", "bf16"},
        {"summary", r.fp8Summary()},
        {"recipe", llvm::json::Object{{"amax_history", r.fp8AmaxHistory},
                                      {"margin", r.fp8Margin},
                                      {"amax_algo", r.fp8AmaxAlgo}}}};
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(top))) << "\n";
}

bool ampc::writePrecisionHtml(const PrecisionReport &r, StringRef path,
                              const std::vector<ProtectedFile> &inputs,
                              std::string &warning, std::string &error) {
  std::string svg = renderSvg(buildDot(r), warning);
  std::string page;
  llvm::raw_string_ostream os(page);
  os << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n<title>"
     << escapeHtml(r.model) << " precision</title>\n<style>\n"
     << "body{font-family:Helvetica,Arial,sans-serif;margin:1.5em}"
     << "table{border-collapse:collapse;font-size:12px}"
     << "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
     << ".swatch{display:inline-block;width:1em;height:1em;margin:0 .3em 0 1em;"
        "vertical-align:middle;border:1px solid #888}"
     << ".graph svg{max-width:100%;height:auto}\n</style></head><body>\n";
  os << "<h1>" << escapeHtml(r.model) << "</h1>\n<p>" << escapeHtml(r.summary())
     << "</p>\n<p>compute dtype:";
  for (StringRef d : {"f16", "bf16", "f32"})
    os << "<span class=\"swatch\" style=\"background:" << colourOf(d)
       << "\"></span>" << d;
  os << "<span class=\"swatch\" style=\"background:#fff;border-color:#d62828\">"
        "</span>red: the "
     << r.casts.size() << " casts ampc inserted, each drawn</p>\n";
  if (!svg.empty())
    os << "<div class=\"graph\">\n" << svg << "</div>\n";
  else
    os << "<p><em>" << escapeHtml(warning) << "</em></p>\n";
  os << "<table>\n<tr><th>node</th><th>op</th><th>inputs</th><th>compute</th>"
        "<th>outputs</th><th>category</th><th>rule</th></tr>\n";
  for (const auto &n : r.nodes)
    os << "<tr><td>" << escapeHtml(n.name) << "</td><td>" << escapeHtml(n.op)
       << "</td><td>" << join(n.inputs) << "</td><td style=\"background:"
       << colourOf(n.compute) << "\">" << n.compute << "</td><td>"
       << join(n.outputs) << "</td><td>" << n.category << "</td><td>"
       << escapeHtml(n.rule) << "</td></tr>\n";
  os << "</table>\n";
  if (r.fp8) {
    os << "<h2>FP8</h2>\n<p>" << escapeHtml(r.fp8Summary()) << "</p>\n<ul>\n";
    for (const PrecisionReport::Fp8Gemm &gemm : r.fp8Gemms)
      os << "<li>" << escapeHtml(gemm.line()) << "</li>\n";
    os << "</ul>\n";
  }
  if (!r.attention.empty() || !r.inputPrecision.empty()) {
    os << "<ul>\n";
    for (const std::string &line : r.attention)
      os << "<li>" << escapeHtml(line) << "</li>\n";
    for (const PrecisionReport::InputPrecision &input : r.inputPrecision)
      os << "<li>" << escapeHtml(input.line()) << "</li>\n";
    os << "</ul>\n";
  }
  os << "</body></html>\n";
  // The output rules of every ampc output (docs/design.md, Output files).
  std::string why;
  if (!writeOutputFile(path.str(), {{page.data(), page.size()}}, inputs, why)) {
    error = path.str() + ": cannot write: " + why;
    return false;
  }
  return true;
}
