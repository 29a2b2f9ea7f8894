//===- Convolution.cpp - Gemm, convolutions and pooling -------------------===//
//
// Gemm, Conv, ConvTranspose (a gather-padded Conv), the window poolings,
// GlobalMaxPool and MaxUnpool.
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

FailureOr<Outputs> importGemm(NodeContext &nc) {
  return buildSame<ampc::GemmOp>(
      nc, {nc.f32("alpha", nc.getFloat("alpha", 1.0f)),
           nc.f32("beta", nc.getFloat("beta", 1.0f)),
           nc.i64("transA", nc.getInt("transA", 0)),
           nc.i64("transB", nc.getInt("transB", 0)),
           gemmSegments(nc, llvm::count_if(nc.inputs, [](Value v) {
                          return static_cast<bool>(v);
                        }))});
}

namespace {

/// Resolves `auto_pad` into explicit pads (begins, then ends) for a window op
/// whose spatial input sizes, kernel, strides and dilations are given.
FailureOr<SmallVector<int64_t>>
resolvePads(NodeContext &nc, ArrayRef<int64_t> spatial, ArrayRef<int64_t> kernel,
            ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations) {
  std::string autoPad = nc.getString("auto_pad", "NOTSET");
  size_t n = spatial.size();
  if (autoPad == "NOTSET") {
    SmallVector<int64_t> pads =
        nc.getInts("pads").value_or(SmallVector<int64_t>(2 * n, 0));
    return pads;
  }
  if (nc.attr("pads"))
    {
      (void)nc.error("'pads' and auto_pad '" + autoPad +
                    "' must not both be given");
      return failure();
    }
  SmallVector<int64_t> pads(2 * n, 0);
  if (autoPad == "VALID")
    return pads;
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    {
      (void)nc.error("'auto_pad' must be NOTSET, VALID, SAME_UPPER or "
                    "SAME_LOWER, got '" +
                    autoPad + "'");
      return failure();
    }
  if (kernel.size() != n || strides.size() != n || dilations.size() != n)
    {
      (void)nc.error("window attributes do not match " + Twine(n) +
                    " spatial dimensions");
      return failure();
    }
  for (size_t i = 0; i < n; ++i) {
    if (strides[i] < 1)
      {
      (void)nc.error("'strides' values must be >= 1");
      return failure();
    }
    // In 128 bits: kernel, strides and dilations are the model's numbers
    // (a dilation of 2^62 over a kernel of 3 passes 2^63).
    using Wide = __int128;
    Wide out = (Wide(spatial[i]) + strides[i] - 1) / strides[i];
    Wide span = (Wide(kernel[i]) - 1) * dilations[i] + 1;
    Wide total = std::max<Wide>(0, (out - 1) * strides[i] + span - spatial[i]);
    if (total > std::numeric_limits<int64_t>::max()) {
      (void)nc.error("auto_pad '" + autoPad + "': the padding of spatial dim " +
                     Twine(i) + " (kernel " + Twine(kernel[i]) +
                     ", stride " + Twine(strides[i]) + ", dilation " +
                     Twine(dilations[i]) + ") does not fit in int64");
      return failure();
    }
    int64_t small = static_cast<int64_t>(total / 2),
            large = static_cast<int64_t>(total) - small;
    pads[i] = autoPad == "SAME_UPPER" ? small : large;
    pads[i + n] = autoPad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

} // namespace

FailureOr<Outputs> importConv(NodeContext &nc) {
  auto x = cast<RankedTensorType>(nc.input(0).getType());
  auto w = cast<RankedTensorType>(nc.input(1).getType());
  if (x.getRank() < 3 || w.getRank() != x.getRank())
    return nc.error("X " + formatDims(x.getShape()) + " and W " +
                    formatDims(w.getShape()) +
                    " must be (N, C, spatial...) and (M, C/group, kernel...)");
  size_t n = x.getRank() - 2;
  SmallVector<int64_t> kernel(w.getShape().drop_front(2));
  if (auto ks = nc.getInts("kernel_shape"); ks && *ks != kernel)
    return nc.error("'kernel_shape' " + formatDims(*ks) +
                    " differs from the weight's spatial shape " +
                    formatDims(kernel));
  SmallVector<int64_t> strides =
      nc.getInts("strides").value_or(SmallVector<int64_t>(n, 1));
  SmallVector<int64_t> dilations =
      nc.getInts("dilations").value_or(SmallVector<int64_t>(n, 1));
  FailureOr<SmallVector<int64_t>> pads =
      resolvePads(nc, x.getShape().drop_front(2), kernel, strides, dilations);
  if (failed(pads))
    return failure();
  return buildSame<ampc::ConvOp>(nc, {nc.ints("strides", strides),
                                      nc.ints("pads", *pads),
                                      nc.ints("dilations", dilations),
                                      nc.i64("group", nc.getInt("group", 1))});
}

namespace {

/// MaxPool and AveragePool share their window attributes.
FailureOr<SmallVector<NamedAttribute>> poolAttributes(NodeContext &nc) {
  auto x = cast<RankedTensorType>(nc.input(0).getType());
  if (x.getRank() < 3)
    {
      (void)nc.error("X must be (N, C, spatial...), got " +
                    formatDims(x.getShape()));
      return failure();
    }
  size_t n = x.getRank() - 2;
  std::optional<SmallVector<int64_t>> kernel = nc.getInts("kernel_shape");
  if (!kernel)
    {
      (void)nc.error("attribute 'kernel_shape' is required");
      return failure();
    }
  SmallVector<int64_t> strides =
      nc.getInts("strides").value_or(SmallVector<int64_t>(n, 1));
  SmallVector<int64_t> dilations =
      nc.getInts("dilations").value_or(SmallVector<int64_t>(n, 1));
  FailureOr<SmallVector<int64_t>> pads =
      resolvePads(nc, x.getShape().drop_front(2), *kernel, strides, dilations);
  if (failed(pads))
    return failure();
  return SmallVector<NamedAttribute>{
      nc.ints("kernel_shape", *kernel), nc.ints("strides", strides),
      nc.ints("pads", *pads), nc.ints("dilations", dilations),
      nc.i64("ceil_mode", nc.getInt("ceil_mode", 0))};
}

} // namespace

FailureOr<Outputs> importMaxPool(NodeContext &nc) {
  FailureOr<SmallVector<NamedAttribute>> attrs = poolAttributes(nc);
  if (failed(attrs))
    return failure();
  attrs->push_back(nc.i64("storage_order", nc.getInt("storage_order", 0)));
  return buildSame<ampc::MaxPoolOp>(nc, *attrs, 2);
}

FailureOr<Outputs> importAveragePool(NodeContext &nc) {
  FailureOr<SmallVector<NamedAttribute>> attrs = poolAttributes(nc);
  if (failed(attrs))
    return failure();
  attrs->push_back(
      nc.i64("count_include_pad", nc.getInt("count_include_pad", 0)));
  return buildSame<ampc::AveragePoolOp>(nc, *attrs);
}

/// ConvTranspose as a Conv: the input with stride - 1 zeros between its
/// elements and (k - 1) * d - pad zeros around them (a crop where that is
/// negative, output_padding more at the end), convolved at stride 1 with
/// the weight transposed per group, (C_in, C_out / g, k...) to (C_out,
/// C_in / g, k...), and flipped along the kernel axes. Each spatial axis
/// is one Gather from the input with one zero slice appended, whose
/// indices say which source element (or the zero) each position holds;
/// an axis that needs no zeros inside and no crop is padded by the Conv.
FailureOr<Outputs> importConvTranspose(NodeContext &nc) {
  Value x = nc.input(0), w = nc.input(1);
  auto xt = cast<RankedTensorType>(x.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  int64_t rank = xt.getRank();
  if (rank < 3 || wt.getRank() != rank)
    return nc.error("X " + formatDims(xt.getShape()) + " and W " +
                    formatDims(wt.getShape()) +
                    " must be (N, C, spatial...) and (C, M/group, kernel...)");
  size_t n = rank - 2;
  int64_t group = nc.getInt("group", 1);
  int64_t cin = xt.getDimSize(1), coutPerGroup = wt.getDimSize(1);
  int64_t cout;
  if (group < 1 || group > std::max<int64_t>(cin, 1) || cin % group ||
      wt.getDimSize(0) != cin ||
      llvm::MulOverflow(group, coutPerGroup, cout))
    return nc.error("W " + formatDims(wt.getShape()) + " must have the " +
                    Twine(cin) + " input channels of X, in 'group' " +
                    Twine(group) + " groups");
  SmallVector<int64_t> kernel(wt.getShape().drop_front(2));
  if (auto ks = nc.getInts("kernel_shape"); ks && *ks != kernel)
    return nc.error("'kernel_shape' " + formatDims(*ks) +
                    " differs from the weight's spatial shape " +
                    formatDims(kernel));
  auto spatial = [&](StringRef name, int64_t dflt, size_t size,
                     int64_t least) -> FailureOr<SmallVector<int64_t>> {
    SmallVector<int64_t> v = nc.getInts(name).value_or(
        SmallVector<int64_t>(size, dflt));
    if (v.size() != size)
      return nc.error("'" + name + "' " + formatDims(v) + " must have " +
                      Twine(size) + " values");
    for (int64_t e : v)
      if (e < least || e > kMaxComposedAxis)
        return nc.error("'" + name + "' " + formatDims(v) +
                        " values must be between " + Twine(least) +
                        " and 2^24");
    return v;
  };
  FailureOr<SmallVector<int64_t>> strides = spatial("strides", 1, n, 1);
  FailureOr<SmallVector<int64_t>> dilations = spatial("dilations", 1, n, 1);
  FailureOr<SmallVector<int64_t>> outputPadding =
      spatial("output_padding", 0, n, 0);
  if (failed(strides) || failed(dilations) || failed(outputPadding))
    return failure();

  // Pads (begins, then ends), from `pads`, or from the output size that
  // `output_shape` or auto_pad SAME_* asks for: the total padding is
  // split evenly, the odd one at the end for SAME_UPPER and at the
  // beginning otherwise (as ONNX's reference; a negative total extends the
  // output with zeros).
  std::string autoPad = nc.getString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return nc.error("'auto_pad' must be NOTSET, VALID, SAME_UPPER or "
                    "SAME_LOWER, got '" + autoPad + "'");
  // stride * (in - 1) + output_padding + (k - 1) * dilation + 1 per axis:
  // every term is at most 2^24 and in is a dim, so __int128 holds it.
  SmallVector<__int128> full;
  for (size_t i = 0; i < n; ++i) {
    int64_t in = xt.getDimSize(2 + i);
    if (in < 1 || kernel[i] < 1)
      return nc.error("X and W must have non-empty spatial dims");
    full.push_back(static_cast<__int128>((*strides)[i]) * (in - 1) +
                   (*outputPadding)[i] +
                   static_cast<__int128>(kernel[i] - 1) * (*dilations)[i] + 1);
  }
  SmallVector<__int128> pads(2 * n, 0);
  std::optional<SmallVector<int64_t>> outputShape = nc.getInts("output_shape");
  if (outputShape && outputShape->size() == n + 2)
    outputShape->erase(outputShape->begin(), outputShape->begin() + 2);
  if (outputShape || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    if (outputShape && outputShape->size() != n)
      return nc.error("'output_shape' " + formatDims(*outputShape) +
                      " must have " + Twine(n) + " spatial dims");
    for (size_t i = 0; i < n; ++i) {
      __int128 out = outputShape
                         ? static_cast<__int128>((*outputShape)[i])
                         : static_cast<__int128>(xt.getDimSize(2 + i)) *
                               (*strides)[i];
      if (out < 1 || out > kMaxComposedAxis)
        return nc.error("output dim " + Twine(i) + " must be between 1 and "
                        "2^24");
      __int128 total = full[i] - out;
      // Floor division: a negative total pads the end.
      __int128 half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      bool upper = autoPad == "SAME_UPPER";
      pads[i] = upper ? half : total - half;
      pads[i + n] = upper ? total - half : half;
    }
  } else if (autoPad == "NOTSET") {
    FailureOr<SmallVector<int64_t>> given = spatial("pads", 0, 2 * n, 0);
    if (failed(given))
      return failure();
    for (size_t i = 0; i < 2 * n; ++i)
      pads[i] = (*given)[i];
  }

  // The input: per spatial axis, the positions of the dilated, padded
  // input the stride-1 Conv reads; -1 marks a zero.
  Value v = x;
  SmallVector<int64_t> convPads(2 * n, 0);
  for (size_t i = 0; i < n; ++i) {
    int64_t axis = 2 + i, in = xt.getDimSize(axis), s = (*strides)[i];
    __int128 span = static_cast<__int128>(kernel[i] - 1) * (*dilations)[i];
    __int128 before = span - pads[i];
    __int128 after = span - pads[i + n] + (*outputPadding)[i];
    __int128 length = before + static_cast<__int128>(s) * (in - 1) + 1 + after;
    if (length - span < 1)
      return nc.error("spatial dim " + Twine(i) +
                      " of the output would be empty (pads too large)");
    if (length > kMaxComposedAxis)
      return nc.error("spatial dim " + Twine(i) + " of the padded input "
                      "would have more than 2^24 elements");
    if (s == 1 && before >= 0 && after >= 0) {
      convPads[i] = static_cast<int64_t>(before);
      convPads[i + n] = static_cast<int64_t>(after);
      continue;
    }
    SmallVector<int64_t> indices;
    bool zero = false;
    for (int64_t p = 0; p < static_cast<int64_t>(length); ++p) {
      __int128 u = p - before;
      bool hit = u >= 0 && u % s == 0 && u / s < in;
      indices.push_back(hit ? static_cast<int64_t>(u / s) : in);
      zero |= !hit;
    }
    if (zero) {
      auto type = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> slab(type.getShape());
      slab[axis] = 1;
      auto slabType = type.clone(slab);
      FailureOr<Outputs> zeros = constant(
          nc, DenseElementsAttr::get(
                  slabType, nc.b.getZeroAttr(type.getElementType())));
      if (failed(zeros))
        return failure();
      v = part<ampc::ConcatOp>(nc, {v, (*zeros)[0]}, {nc.i64("axis", axis)});
    }
    v = gatherAlong(nc, v, axis, indices);
    if (!v)
      return failure();
  }

  // The weight: (C_in, C_out/g, k...) -> (g, C_in/g, C_out/g, k...) ->
  // (g, C_out/g, C_in/g, k...) -> (C_out, C_in/g, k...), flipped.
  SmallVector<int64_t> grouped = {group, cin / group, coutPerGroup};
  grouped.append(kernel);
  SmallVector<int64_t> perm = {0, 2, 1};
  SmallVector<int64_t> convWeight = {cout, cin / group};
  for (size_t i = 0; i < n; ++i) {
    perm.push_back(3 + i);
    convWeight.push_back(kernel[i]);
  }
  // Swapping C_in/g and C_out/g moves no element when either is 1.
  Value weight = w;
  if (cin / group > 1 && coutPerGroup > 1) {
    weight = reshaped(nc, w, grouped);
    if (weight)
      weight = part<ampc::TransposeOp>(nc, weight, {nc.ints("perm", perm)});
  }
  if (weight)
    weight = reshaped(nc, weight, convWeight);
  for (size_t i = 0; i < n && weight; ++i) {
    SmallVector<int64_t> reversed;
    for (int64_t k = kernel[i] - 1; k >= 0; --k)
      reversed.push_back(k);
    weight = gatherAlong(nc, weight, 2 + i, reversed);
  }
  if (!v || !weight)
    return failure();
  SmallVector<Value> operands = {v, weight};
  if (nc.input(2))
    operands.push_back(nc.input(2));
  Value y = part<ampc::ConvOp>(nc, operands,
                               {nc.ints("strides", SmallVector<int64_t>(n, 1)),
                                nc.ints("pads", convPads),
                                nc.ints("dilations", *dilations),
                                nc.i64("group", group)});
  if (!y)
    return failure();
  return Outputs{y};
}

/// MaxUnpool: X's values written at the flat output positions MaxPool's
/// Indices gave (ampc.scatter into zeros), the output's spatial dims
/// (in - 1) * stride + kernel - pads, or `output_shape` (input 2, a
/// compile-time input).
FailureOr<Outputs> importMaxUnpool(NodeContext &nc) {
  Value x = nc.input(0), indices = nc.input(1);
  auto xt = cast<RankedTensorType>(x.getType());
  auto it = cast<RankedTensorType>(indices.getType());
  int64_t rank = xt.getRank(), spatial = rank - 2;
  if (rank < 3)
    return nc.error("X must have rank 3 or more (N, C, spatial...)");
  if (it.getShape() != xt.getShape() || !it.getElementType().isInteger(64))
    return nc.error("I must be int64 of X's shape " +
                    formatDims(xt.getShape()) + ", got " +
                    formatDims(it.getShape()));
  std::optional<SmallVector<int64_t>> kernel = nc.getInts("kernel_shape");
  if (!kernel || static_cast<int64_t>(kernel->size()) != spatial)
    return nc.error("'kernel_shape' must hold " + Twine(spatial) + " values");
  SmallVector<int64_t> strides =
      nc.getInts("strides").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> pads =
      nc.getInts("pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  if (static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial)
    return nc.error("'strides' must hold " + Twine(spatial) +
                    " values and 'pads' " + Twine(2 * spatial));
  SmallVector<int64_t> shape(xt.getShape());
  for (int64_t i = 0; i < spatial; ++i) {
    // (in - 1) stride + kernel - pad begin - pad end, in 128 bits: each
    // term is the model's (pads of INT64_MIN passed 2^63).
    __int128 d = (__int128(shape[2 + i]) - 1) * strides[i] + (*kernel)[i] -
                 pads[i] - pads[spatial + i];
    if (d <= 0 || d > std::numeric_limits<int64_t>::max() ||
        strides[i] <= 0 || (*kernel)[i] <= 0)
      return nc.error("spatial axis " + Twine(i) + ": the unpooled size "
                      "(in - 1) * stride + kernel - pads must be between 1 "
                      "and 2^63 - 1 (stride " + Twine(strides[i]) +
                      ", kernel " + Twine((*kernel)[i]) + ", pads " +
                      Twine(pads[i]) + " and " + Twine(pads[spatial + i]) +
                      ")");
    shape[2 + i] = static_cast<int64_t>(d);
  }
  SmallVector<int64_t> outShape = shape;
  if (nc.input(2)) {
    FailureOr<SmallVector<int64_t>> given = nc.constantInts(2, "output_shape");
    if (failed(given))
      return failure();
    if (static_cast<int64_t>(given->size()) != rank ||
        llvm::any_of(llvm::zip(*given, shape), [](auto p) {
          return std::get<0>(p) < std::get<1>(p);
        }))
      return nc.error("output_shape " + formatDims(*given) + " must hold " +
                      Twine(rank) + " dims, each at least the unpooled " +
                      formatDims(shape));
    outShape = *given;
  }
  auto outType = xt.clone(outShape);
  if (std::string problem =
          ampc::checkTensorSize(outType, nc.importer.maxTensorBytes());
      !problem.empty())
    return nc.error("the output " + problem + " (--max-tensor-bytes)");
  // The indices are flat positions in the unpooled shape; a larger
  // output_shape pads each axis at its end (ONNX's reference), so they are
  // moved to the same coordinates of the larger shape.
  Value flat = reshaped(nc, indices, {xt.getNumElements()});
  if (outShape != shape) {
    auto i64 = nc.b.getI64Type();
    Value rest = flat, moved = scalarOf(nc, i64, 0.0);
    int64_t stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      Value dim = scalarOf(nc, i64, static_cast<double>(shape[d]));
      Value coordinate = part<ampc::ModOp>(nc, {rest, dim});
      rest = part<ampc::DivOp>(nc, {rest, dim});
      moved = part<ampc::AddOp>(
          nc,
          {moved, part<ampc::MulOp>(
                      nc, {coordinate,
                           scalarOf(nc, i64, static_cast<double>(stride))})});
      stride *= outShape[d];
    }
    flat = moved;
  }
  shape = outShape;
  int64_t total = outType.getNumElements();
  Value zeros =
      part<ampc::ExpandOp>(nc, scalarOf(nc, xt.getElementType(), 0.0), {},
                           RankedTensorType::get({total}, xt.getElementType()));
  Value r = part<ampc::ScatterOp>(
      nc, {zeros, flat, reshaped(nc, x, {xt.getNumElements()})},
      {nc.i64("axis", 0),
       nc.b.getNamedAttr("reduction", nc.b.getStringAttr("none"))});
  r = r ? reshaped(nc, r, shape) : Value();
  if (!r)
    return failure();
  return Outputs{r};
}

/// GlobalMaxPool: ReduceMax over the spatial dimensions, kept.
FailureOr<Outputs> importGlobalMaxPool(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() < 3)
    return nc.error("needs an (N, C, D1, ...) input of rank 3 or more");
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < in.getRank(); ++d)
    axes.push_back(d);
  return nc.build<ampc::ReduceMaxOp>(
      nc.input(0), {nc.ints("axes", axes), nc.i64("keepdims", 1)});
}

} // namespace ampc::detail
