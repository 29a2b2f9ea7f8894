//===- PrecisionReport.cpp - per-node precision decisions, and why --------===//

#include "ampc/Transforms/PrecisionReport.h"
#include "ampc/Transforms/Precision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

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
  auto endpoint = [](int index, bool isSource) {
    if (index >= 0)
      return "n" + std::to_string(index);
    return (isSource ? "in" : "out") + std::to_string(-1 - index);
  };
  for (const auto &e : r.edges) {
    os << "  " << endpoint(e.from, true) << " -> " << endpoint(e.to, false);
    if (!e.cast.empty())
      os << " [label=" << dotQuote("cast " + e.cast)
         << ", color=\"#d62828\", fontcolor=\"#d62828\", style=bold]";
    else
      os << " [label=" << dotQuote(e.dtype) << ", color=\"#555555\"]";
    os << ";\n";
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

  llvm::DenseMap<Operation *, int> index;
  for (auto [i, arg] : llvm::enumerate(forward.getArguments())) {
    auto name = forward.getArgAttrOfType<StringAttr>(i, ampc::kNameAttr);
    r.inputs.push_back(name ? name.str() : "input" + std::to_string(i));
  }
  for (unsigned i = 0; i < forward.getNumResults(); ++i) {
    auto name = forward.getResultAttrOfType<StringAttr>(i, ampc::kNameAttr);
    r.outputs.push_back(name ? name.str() : "output" + std::to_string(i));
  }
  auto addEdges = [&](Operation *user, int to) {
    for (Value operand : user->getOperands()) {
      if (!isa<FloatType>(cast<ShapedType>(operand.getType()).getElementType()))
        continue;
      std::string castText;
      Value source = traceSource(operand, castText);
      int from;
      if (auto arg = dyn_cast<BlockArgument>(source))
        from = -1 - static_cast<int>(arg.getArgNumber());
      else if (auto it = index.find(source.getDefiningOp()); it != index.end())
        from = it->second;
      else
        continue; // parameters and constants are not drawn
      r.edges.push_back({from, to, dtypeName(source.getType()), castText});
    }
  };

  for (Operation &op : forward.getBody().getOps()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        std::string castText;
        Value source = traceSource(v, castText);
        if (auto it = index.find(source.getDefiningOp()); it != index.end())
          r.edges.push_back({it->second, -1 - static_cast<int>(i),
                             dtypeName(source.getType()), castText});
        else if (auto arg = dyn_cast<BlockArgument>(source))
          r.edges.push_back({-1 - static_cast<int>(arg.getArgNumber()),
                             -1 - static_cast<int>(i),
                             dtypeName(source.getType()), castText});
      }
      continue;
    }
    std::optional<PrecisionDecision> decision = getPrecisionDecision(&op);
    if (!decision)
      continue;
    PrecisionReport::Node n;
    n.name = onnxNodeName(&op);
    n.op = onnxOpType(&op);
    for (Value operand : op.getOperands()) {
      std::string unused;
      n.inputs.push_back(dtypeName(traceSource(operand, unused).getType()));
    }
    n.compute = dtypeName(decision->compute);
    for (Value result : op.getResults())
      n.outputs.push_back(dtypeName(result.getType()));
    n.category = stringifyPrecisionCategory(decision->category).str();
    n.rule = decision->rule;
    int to = static_cast<int>(r.nodes.size());
    index[&op] = to;
    r.nodes.push_back(std::move(n));
    addEdges(&op, to);
  }
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
  };
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(top))) << "\n";
}

bool ampc::writePrecisionHtml(const PrecisionReport &r, StringRef path,
                              std::string &warning, std::string &error) {
  std::string svg = renderSvg(buildDot(r), warning);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = "cannot write " + path.str() + ": " + ec.message();
    return false;
  }
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
        "</span>red edges carry a cast</p>\n";
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
  os << "</table>\n</body></html>\n";
  os.close();
  if (os.has_error()) {
    error = "cannot write " + path.str() + ": " + os.error().message();
    os.clear_error();
    return false;
  }
  return true;
}
