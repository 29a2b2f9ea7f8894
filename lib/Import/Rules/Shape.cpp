//===- Shape.cpp - shape and layout ops -----------------------------------===//
//
// Reshape, Expand, Transpose, Flatten, Squeeze, Unsqueeze, Concat, Slice,
// Size, Shape, Split, Tile, DepthToSpace, SpaceToDepth and Pad.
//
//===----------------------------------------------------------------------===//

#include "ImportRules.h"
#include "TensorConversion.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/TensorSize.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

using namespace mlir;

namespace ampc::detail {

FailureOr<Outputs> importReshape(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> target = nc.constantInts(1, "shape");
  if (failed(target))
    return failure();
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  bool allowZero = nc.getInt("allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  int64_t known = 1, inferred = -1;
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= in.getRank())
        return nc.error("shape " + formatDims(*target) + " copies dim " +
                        Twine(i) + " of a rank-" + Twine(in.getRank()) +
                        " input");
      d = in.getDimSize(i);
    }
    if (d == -1) {
      if (inferred >= 0)
        return nc.error("shape " + formatDims(*target) + " has more than one -1");
      inferred = i;
    } else if (d < 0) {
      return nc.error("shape " + formatDims(*target) + " has invalid dim " +
                      Twine(d));
    } else if (llvm::MulOverflow(known, d, known)) {
      return nc.error("shape " + formatDims(*target) + " has more than 2^63 "
                      "elements");
    }
    shape.push_back(d);
  }
  if (inferred >= 0) {
    if (known == 0 || in.getNumElements() % known != 0)
      return nc.error("cannot reshape " + formatDims(in.getShape()) + " to " +
                      formatDims(*target));
    shape[inferred] = in.getNumElements() / known;
  }
  return nc.build<ampc::ReshapeOp>(
      nc.input(0), {}, 1, RankedTensorType::get(shape, in.getElementType()));
}

FailureOr<Outputs> importExpand(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> target = nc.constantInts(1, "shape");
  if (failed(target))
    return failure();
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (llvm::any_of(*target, [](int64_t d) { return d < 0; }))
    return nc.error("shape " + formatDims(*target) + " has a negative dim");
  std::optional<SmallVector<int64_t>> shape =
      ampc::broadcastShapes({in.getShape(), *target});
  if (!shape)
    return nc.error("cannot expand " + formatDims(in.getShape()) + " to " +
                    formatDims(*target));
  return nc.build<ampc::ExpandOp>(
      nc.input(0), {}, 1, RankedTensorType::get(*shape, in.getElementType()));
}

FailureOr<Outputs> importTranspose(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  SmallVector<int64_t> perm;
  if (auto p = nc.getInts("perm"))
    perm = *p;
  else
    for (int64_t i = in.getRank() - 1; i >= 0; --i)
      perm.push_back(i);
  return buildSame<ampc::TransposeOp>(nc, {nc.ints("perm", perm)});
}

FailureOr<Outputs> importFlatten(NodeContext &nc) {
  return buildSame<ampc::FlattenOp>(nc, {nc.i64("axis", nc.getInt("axis", 1))});
}

/// Squeeze/Unsqueeze/Reduce*: axes from the attribute (older opsets) or from
/// the constant input 1 (newer ones).
FailureOr<SmallVector<int64_t>> axesOf(NodeContext &nc, int64_t inputSince) {
  if (nc.opset >= inputSince) {
    if (nc.attr("axes"))
      {
      (void)nc.error("'axes' is an input from opset " + Twine(inputSince) +
                      ", not an attribute");
      return failure();
    }
    if (!nc.input(1))
      return SmallVector<int64_t>();
    return nc.constantInts(1, "axes");
  }
  if (nc.inputs.size() > 1)
    {
      (void)nc.error("takes 'axes' as an attribute before opset " +
                    Twine(inputSince));
      return failure();
    }
  return nc.getInts("axes").value_or(SmallVector<int64_t>());
}

FailureOr<Outputs> importSqueeze(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> axes = axesOf(nc, 13);
  if (failed(axes))
    return failure();
  return nc.build<ampc::SqueezeOp>(nc.input(0), {nc.ints("axes", *axes)});
}

FailureOr<Outputs> importUnsqueeze(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> axes = axesOf(nc, 13);
  if (failed(axes))
    return failure();
  if (axes->empty())
    return nc.error("'axes' must not be empty");
  return nc.build<ampc::UnsqueezeOp>(nc.input(0), {nc.ints("axes", *axes)});
}

FailureOr<Outputs> importConcat(NodeContext &nc) {
  if (!nc.attr("axis"))
    return nc.error("attribute 'axis' is required");
  return buildSame<ampc::ConcatOp>(nc, {nc.i64("axis", nc.getInt("axis", 0))});
}

FailureOr<Outputs> importSlice(NodeContext &nc) {
  FailureOr<SmallVector<int64_t>> starts = nc.constantInts(1, "starts");
  if (failed(starts))
    return failure();
  FailureOr<SmallVector<int64_t>> ends = nc.constantInts(2, "ends");
  if (failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps(starts->size(), 1);
  for (size_t i = 0; i < starts->size(); ++i)
    axes.push_back(i);
  if (nc.input(3)) {
    FailureOr<SmallVector<int64_t>> a = nc.constantInts(3, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  }
  if (nc.input(4)) {
    FailureOr<SmallVector<int64_t>> s = nc.constantInts(4, "steps");
    if (failed(s))
      return failure();
    steps = *s;
  }
  return nc.build<ampc::SliceOp>(
      nc.input(0), {nc.ints("starts", *starts), nc.ints("ends", *ends),
                    nc.ints("axes", axes), nc.ints("steps", steps)});
}

/// Size: the element count, known at compile time.
FailureOr<Outputs> importSize(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  auto type = RankedTensorType::get({}, nc.b.getI64Type());
  return constant(nc, DenseElementsAttr::get(
                          type, nc.b.getI64IntegerAttr(in.getNumElements())));
}

/// Split: one Slice per output along `axis`, sizes from input 1 (opset
/// 13+), the `split` attribute, or `num_outputs` / the output count (the
/// last part smaller when it does not divide).
FailureOr<Outputs> importSplit(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  std::optional<int64_t> axis =
      ampc::normalizeAxis(nc.getInt("axis", 0), in.getRank());
  if (!axis)
    return nc.error("axis " + Twine(nc.getInt("axis", 0)) +
                    " is out of range for rank " + Twine(in.getRank()));
  int64_t dim = in.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  if (nc.input(1)) {
    FailureOr<SmallVector<int64_t>> s = nc.constantInts(1, "split");
    if (failed(s))
      return failure();
    sizes = *s;
  } else if (auto s = nc.getInts("split")) {
    sizes = *s;
  } else {
    int64_t n = nc.getInt("num_outputs", static_cast<int64_t>(nc.numOutputs()));
    if (n <= 0 || n != static_cast<int64_t>(nc.numOutputs()))
      return nc.error("cannot split into " + Twine(n) + " parts for " +
                      Twine(nc.numOutputs()) + " outputs");
    int64_t each = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(each, dim - i * each)));
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0 || llvm::AddOverflow(total, s, total))
      return nc.error("split sizes " + formatDims(sizes) +
                      " must be non-negative and sum to dim " + Twine(dim));
  }
  if (sizes.size() != nc.numOutputs() || total != dim)
    return nc.error("split sizes " + formatDims(sizes) + " do not cover dim " +
                    Twine(dim) + " in " + Twine(nc.numOutputs()) + " outputs");
  Outputs outs;
  int64_t start = 0;
  for (int64_t s : sizes) {
    Value v = part<ampc::SliceOp>(
        nc, nc.input(0),
        {nc.ints("starts", {start}), nc.ints("ends", {start + s}),
         nc.ints("axes", {*axis}), nc.ints("steps", {1})});
    if (!v)
      return failure();
    outs.push_back(v);
    start += s;
  }
  return outs;
}

/// Tile: x reshaped to (1, d0, 1, d1, ...), expanded to (r0, d0, r1, d1,
/// ...), reshaped to (r0 d0, r1 d1, ...).
FailureOr<Outputs> importTile(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  FailureOr<SmallVector<int64_t>> repeats = nc.constantInts(1, "repeats");
  if (failed(repeats))
    return failure();
  if (static_cast<int64_t>(repeats->size()) != in.getRank())
    return nc.error("repeats " + formatDims(*repeats) + " must have one entry "
                    "per dimension of the rank-" + Twine(in.getRank()) +
                    " input");
  SmallVector<int64_t> interleaved, expanded, out;
  for (auto [d, r] : llvm::zip(in.getShape(), *repeats)) {
    int64_t tiled;
    if (r < 0 || llvm::MulOverflow(r, d, tiled))
      return nc.error("repeats " + formatDims(*repeats) +
                      " must be non-negative and keep every dim below 2^63");
    interleaved.append({1, d});
    expanded.append({r, d});
    out.push_back(tiled);
  }
  if (!ampc::checkedProduct(out))
    return nc.error("the tiled tensor has more than 2^63 elements");
  Value v = reshaped(nc, nc.input(0), interleaved);
  if (v)
    v = part<ampc::ExpandOp>(nc, v, {}, in.clone(expanded));
  if (v)
    v = reshaped(nc, v, out);
  if (!v)
    return failure();
  return Outputs{v};
}

namespace {

/// DepthToSpace (DCR or CRD) and SpaceToDepth on NCHW: a reshape to six
/// dimensions, a transpose, a reshape back (as the ONNX definitions).
FailureOr<Outputs> importDepthSpace(NodeContext &nc, bool toSpace) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() != 4)
    return nc.error("needs an NCHW tensor of rank 4");
  int64_t b = nc.getInt("blocksize", 0);
  if (b <= 0)
    return nc.error("'blocksize' must be positive, got " + Twine(b));
  int64_t n = in.getDimSize(0), c = in.getDimSize(1), h = in.getDimSize(2),
          w = in.getDimSize(3);
  // blocksize^2 and the dimensions it multiplies are checked: a blocksize
  // of 2^32 squared wraps to 0 (and divided by it).
  int64_t bb;
  if (llvm::MulOverflow(b, b, bb))
    return nc.error("'blocksize' " + Twine(b) + " squared does not fit in "
                    "int64");
  SmallVector<int64_t> first, perm, last;
  if (toSpace) {
    int64_t hb, wb;
    if (c % bb)
      return nc.error("channels " + Twine(c) + " are not a multiple of " +
                      Twine(bb) + " ('blocksize' " + Twine(b) + " squared)");
    if (llvm::MulOverflow(h, b, hb) || llvm::MulOverflow(w, b, wb))
      return nc.error("height " + Twine(h) + " and width " + Twine(w) +
                      " times 'blocksize' " + Twine(b) +
                      " do not fit in int64");
    bool crd = nc.getString("mode", "DCR") == "CRD";
    if (crd) {
      first = {n, c / bb, b, b, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      first = {n, b, b, c / bb, h, w};
      perm = {0, 3, 4, 1, 5, 2};
    }
    last = {n, c / bb, hb, wb};
  } else {
    int64_t cbb;
    if (h % b || w % b)
      return nc.error("height " + Twine(h) + " and width " + Twine(w) +
                      " must be multiples of 'blocksize' " + Twine(b));
    if (llvm::MulOverflow(c, bb, cbb))
      return nc.error("channels " + Twine(c) + " times 'blocksize' " +
                      Twine(b) + " squared do not fit in int64");
    first = {n, c, h / b, b, w / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    last = {n, cbb, h / b, w / b};
  }
  Value v = reshaped(nc, nc.input(0), first);
  if (v)
    v = part<ampc::TransposeOp>(nc, v, {nc.ints("perm", perm)});
  if (v)
    v = reshaped(nc, v, last);
  if (!v)
    return failure();
  return Outputs{v};
}

} // namespace

FailureOr<Outputs> importDepthToSpace(NodeContext &nc) {
  return importDepthSpace(nc, /*toSpace=*/true);
}

FailureOr<Outputs> importSpaceToDepth(NodeContext &nc) {
  return importDepthSpace(nc, /*toSpace=*/false);
}

namespace {

/// A 1-D int64 constant holding `values`.
Value indexVector(NodeContext &nc, ArrayRef<int64_t> values) {
  int64_t n = static_cast<int64_t>(values.size());
  if (failed(checkComputedConstant(nc, {n}, nc.b.getI64Type(),
                                   "an index vector of " + Twine(n) +
                                       " elements")))
    return Value();
  auto type = RankedTensorType::get({n}, nc.b.getI64Type());
  FailureOr<Outputs> c = constant(nc, DenseElementsAttr::get(type, values));
  return failed(c) ? Value() : (*c)[0];
}

/// The source index of position `i` (in [-before, dim + after)) of an axis
/// of `dim` elements padded in `mode`: reflect mirrors about the end
/// elements (numpy's "reflect": the edge is not repeated; a one-element
/// axis repeats it), edge repeats them, wrap is cyclic.
int64_t padSource(StringRef mode, int64_t i, int64_t dim) {
  if (mode == "edge" || dim == 1)
    return std::clamp<int64_t>(i, 0, dim - 1);
  if (mode == "wrap")
    return ((i % dim) + dim) % dim;
  int64_t period = 2 * (dim - 1);
  int64_t j = ((i % period) + period) % period;
  return j < dim ? j : period - j;
}

/// The longest axis Pad's reflect, edge and wrap modes build an index
/// vector for.
constexpr int64_t kMaxPadIndexVector = kMaxComputedElements;

} // namespace

/// Pad (opsets 2-21; modes constant, reflect, edge and wrap; `axes` from
/// opset 18). Negative pads crop first (a Slice); then each padded axis in
/// turn: constant mode concatenates blocks of the value (a scalar expanded)
/// on both sides, the other modes gather along the axis with an index
/// vector computed here. The gradient is Slice's, Concat's and Gather's.
FailureOr<Outputs> importPad(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  int64_t rank = in.getRank();
  std::string mode = nc.getString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      mode != "wrap")
    return nc.error("'mode' must be constant, reflect, edge or wrap, got '" +
                    mode + "'");
  SmallVector<int64_t> pads, axes;
  double value = 0;
  if (nc.opset < 11) {
    std::optional<SmallVector<int64_t>> p = nc.getInts("pads");
    if (!p)
      return nc.error("attribute 'pads' is required");
    pads = *p;
    value = nc.getFloat("value", 0.0f);
  } else {
    FailureOr<SmallVector<int64_t>> p = nc.constantInts(1, "pads");
    if (failed(p))
      return failure();
    pads = *p;
    if (nc.input(2)) {
      FailureOr<DenseElementsAttr> v = nc.constantInput(2, "constant_value");
      if (failed(v))
        return failure();
      if (v->getNumElements() != 1)
        return nc.error("input 2 (constant_value) must hold one value");
      if (isa<FloatType>(v->getElementType()))
        value = (*v->getValues<APFloat>().begin()).convertToDouble();
      else if (isa<IntegerType>(v->getElementType()))
        value = static_cast<double>((*v->getValues<APInt>().begin()).getSExtValue());
      else
        return nc.error("input 2 (constant_value) must be a number");
    }
    if (nc.input(3)) {
      FailureOr<SmallVector<int64_t>> a = nc.constantInts(3, "axes");
      if (failed(a))
        return failure();
      axes = *a;
    }
  }
  if (axes.empty() && !(nc.opset >= 18 && nc.input(3)))
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  if (pads.size() != 2 * axes.size())
    return nc.error("'pads' " + formatDims(pads) + " must hold " +
                    Twine(2 * axes.size()) + " values (begin and end of " +
                    Twine(axes.size()) + " axes)");
  SmallVector<int64_t> before(rank, 0), after(rank, 0);
  SmallVector<bool> seen(rank, false);
  for (auto [i, a] : llvm::enumerate(axes)) {
    std::optional<int64_t> axis = ampc::normalizeAxis(a, rank);
    if (!axis)
      return nc.error("axis " + Twine(a) + " is out of range for rank " +
                      Twine(rank));
    if (seen[*axis])
      return nc.error("axis " + Twine(a) + " is named twice");
    seen[*axis] = true;
    before[*axis] = pads[i];
    after[*axis] = pads[i + axes.size()];
  }
  // The padded shape, checked before anything is built.
  SmallVector<int64_t> outShape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size;
    if (llvm::AddOverflow(in.getDimSize(d), before[d], size) ||
        llvm::AddOverflow(size, after[d], size) || size < 0)
      return nc.error("pads " + formatDims(pads) + " give axis " + Twine(d) +
                      " of " + Twine(in.getDimSize(d)) +
                      " a negative or overflowing size");
    outShape.push_back(size);
  }
  // Within the tensor size limit before an index vector of an axis's
  // padded length is built.
  std::string tooLarge =
      ampc::checkTensorSize(in.clone(outShape), nc.importer.maxTensorBytes());
  if (!tooLarge.empty())
    return nc.error("the padded tensor: " + tooLarge);
  Value v = nc.input(0);
  // Negative pads crop.
  for (int64_t d = 0; d < rank && v; ++d) {
    if (before[d] >= 0 && after[d] >= 0)
      continue;
    int64_t dim = in.getDimSize(d);
    int64_t start = before[d] < 0 ? -before[d] : 0;
    int64_t end = after[d] < 0 ? dim + after[d] : dim;
    v = part<ampc::SliceOp>(nc, v,
                            {nc.ints("starts", {start}), nc.ints("ends", {end}),
                             nc.ints("axes", {d}), nc.ints("steps", {1})});
    before[d] = std::max<int64_t>(before[d], 0);
    after[d] = std::max<int64_t>(after[d], 0);
  }
  for (int64_t d = 0; d < rank && v; ++d) {
    if (!before[d] && !after[d])
      continue;
    auto type = cast<RankedTensorType>(v.getType());
    int64_t dim = type.getDimSize(d);
    if (mode == "constant") {
      Value fill = scalarOf(nc, type.getElementType(), value);
      SmallVector<Value> pieces;
      for (int64_t width : {before[d], int64_t(-1), after[d]}) {
        if (width < 0) {
          pieces.push_back(v);
          continue;
        }
        if (!width)
          continue;
        SmallVector<int64_t> shape(type.getShape());
        shape[d] = width;
        pieces.push_back(part<ampc::ExpandOp>(nc, fill, {}, type.clone(shape)));
      }
      v = part<ampc::ConcatOp>(nc, pieces, {nc.i64("axis", d)});
      continue;
    }
    if (dim == 0)
      return nc.error("cannot pad the empty axis " + Twine(d) + " in mode '" +
                      mode + "'");
    // The index vector has the padded axis's length: bounded as Resize's.
    if (dim + before[d] + after[d] > kMaxPadIndexVector)
      return nc.error("axis " + Twine(d) + " padded to " +
                      Twine(dim + before[d] + after[d]) + " elements in mode '" +
                      mode + "': at most 2^24");
    SmallVector<int64_t> source;
    for (int64_t i = -before[d]; i < dim + after[d]; ++i)
      source.push_back(padSource(mode, i, dim));
    v = part<ampc::GatherOp>(nc, {v, indexVector(nc, source)},
                             {nc.i64("axis", d)});
  }
  if (!v)
    return failure();
  return Outputs{v};
}

FailureOr<Outputs> importShape(NodeContext &nc) {
  SmallVector<NamedAttribute> attrs = {nc.i64("start", nc.getInt("start", 0))};
  if (nc.attr("end"))
    attrs.push_back(nc.i64("end", nc.getInt("end", 0)));
  return nc.build<ampc::ShapeOp>(nc.input(0), attrs);
}

} // namespace ampc::detail
