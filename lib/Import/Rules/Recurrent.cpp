//===- Recurrent.cpp - LSTM, GRU and RNN unrolled into ampc ops -----------===//
//
// ONNX's recurrent ops as compositions of ampc ops over the static sequence
// length, so that their kernels, precision decisions and gradients are the
// parts' (docs/ops.md). Per direction, one Gemm projects every step's input
// at once (X W^T + Wb); then each step, in the direction's order, a Gemm of
// the previous hidden state (H R^T + Rb) and the cell's elementwise ops.
// The three ops differ only in their cell (lstmCell, gruCell, rnnCell);
// the rest (checking the inputs, directions, layouts, activations,
// sequence_lens masks, the outputs) is importRecurrent's, once.
//
//===----------------------------------------------------------------------===//

#include "ImportRules.h"

#include "ampc/Dialect/TensorSize.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace ampc::detail {
namespace {

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// A function the `activations` attribute may name: the part that builds
/// the ampc op computing it (null for Affine and ScaledTanh, composed of
/// Mul, Add and Tanh) and whether it reads alpha and beta, with the
/// defaults of the ONNX op of the name. activation_alpha and activation_beta are consumed in order by the
/// activations that read a value, as ONNX Runtime does.
struct ActivationKind {
  const char *name;
  mlir::Value (*op)(ampc::Composer &, mlir::ValueRange,
                    llvm::ArrayRef<mlir::NamedAttribute>, mlir::Type);
  bool readsAlpha, readsBeta;
  float alpha, beta;
};

constexpr ActivationKind kActivations[] = {
    {"Affine", nullptr, true, true, 1.0f, 0.0f}, // alpha x + beta
    {"Elu", part<ampc::EluOp>, true, false, 1.0f, 0.0f},
    {"HardSigmoid", part<ampc::HardSigmoidOp>, true, true, 0.2f, 0.5f},
    {"LeakyRelu", part<ampc::LeakyReluOp>, true, false, 0.01f, 0.0f},
    {"Relu", part<ampc::ReluOp>, false, false, 0.0f, 0.0f},
    {"ScaledTanh", nullptr, true, true, 1.0f, 1.0f}, // alpha Tanh(beta x)
    {"Sigmoid", part<ampc::SigmoidOp>, false, false, 0.0f, 0.0f},
    {"Softplus", part<ampc::SoftplusOp>, false, false, 0.0f, 0.0f},
    {"Softsign", part<ampc::SoftsignOp>, false, false, 0.0f, 0.0f},
    {"Tanh", part<ampc::TanhOp>, false, false, 0.0f, 0.0f},
    {"ThresholdedRelu", part<ampc::ThresholdedReluOp>, true, false, 1.0f, 0.0f},
};

struct Activation {
  const ActivationKind *kind;
  float alpha, beta;
};

Value activate(NodeContext &nc, const Activation &a, Value x) {
  if (!x)
    return x;
  Type element = cast<RankedTensorType>(x.getType()).getElementType();
  StringRef name = a.kind->name;
  if (name == "Affine")
    return part<ampc::AddOp>(
        nc, {part<ampc::MulOp>(nc, {x, scalarOf(nc, element, a.alpha)}),
             scalarOf(nc, element, a.beta)});
  if (name == "ScaledTanh")
    return part<ampc::MulOp>(
        nc, {part<ampc::TanhOp>(
                 nc, part<ampc::MulOp>(nc, {x, scalarOf(nc, element, a.beta)})),
             scalarOf(nc, element, a.alpha)});
  SmallVector<NamedAttribute> attrs;
  if (a.kind->readsAlpha)
    attrs.push_back(nc.f32("alpha", a.alpha));
  if (a.kind->readsBeta)
    attrs.push_back(nc.f32("beta", a.beta));
  return a.kind->op(nc, x, attrs, Type());
}

/// The node's activations with their alphas and betas, those of each
/// direction in turn (`defaults` when the attribute is absent; one set,
/// alphas and betas included, serves both directions of a bidirectional
/// node).
FailureOr<SmallVector<Activation>> activations(NodeContext &nc,
                                               ArrayRef<const char *> defaults,
                                               int64_t directions) {
  size_t perDirection = defaults.size();
  SmallVector<std::string> names;
  if (const auto *a = nc.attr("activations"))
    names.assign(a->strings().begin(), a->strings().end());
  else
    names.assign(defaults.begin(), defaults.end());
  bool shared = directions == 2 && names.size() == perDirection;
  if (!shared && names.size() != perDirection * directions)
    return nc.error("'activations' must name " +
                    Twine(perDirection * directions) + " functions (" +
                    Twine(perDirection) + " per direction), got " +
                    Twine(names.size()));
  SmallVector<float> alphas, betas;
  if (const auto *a = nc.attr("activation_alpha"))
    alphas.assign(a->floats().begin(), a->floats().end());
  if (const auto *a = nc.attr("activation_beta"))
    betas.assign(a->floats().begin(), a->floats().end());
  size_t nextAlpha = 0, nextBeta = 0;
  SmallVector<Activation> out;
  for (const std::string &name : names) {
    // ONNX Runtime reads the names case-insensitively; so does ampc.
    const ActivationKind *kind =
        llvm::find_if(kActivations, [&](const ActivationKind &k) {
          return StringRef(k.name).equals_insensitive(name);
        });
    if (kind == std::end(kActivations)) {
      std::string known;
      for (const ActivationKind &k : kActivations)
        known += (known.empty() ? "" : ", ") + std::string(k.name);
      return nc.error("activation '" + name + "' is not one ampc composes (" +
                      known + ")");
    }
    Activation act{kind, kind->alpha, kind->beta};
    if (kind->readsAlpha && nextAlpha < alphas.size())
      act.alpha = alphas[nextAlpha++];
    if (kind->readsBeta && nextBeta < betas.size())
      act.beta = betas[nextBeta++];
    out.push_back(act);
  }
  // Values no activation reads were meant for other functions than these.
  if (nextAlpha < alphas.size() || nextBeta < betas.size())
    return nc.error("'activation_alpha' and 'activation_beta' hold " +
                    Twine(alphas.size()) + " and " + Twine(betas.size()) +
                    " values; the activations read " + Twine(nextAlpha) +
                    " and " + Twine(nextBeta));
  if (shared)
    out.append(SmallVector<Activation>(out));
  return out;
}

//===----------------------------------------------------------------------===//
// The parts of a cell
//===----------------------------------------------------------------------===//

/// `v` sliced to [begin, end) with `step` along `axis` (itself when that is
/// all of it).
Value sliced(NodeContext &nc, Value v, int64_t axis, int64_t begin, int64_t end,
             int64_t step = 1) {
  if (!v)
    return v;
  if (begin == 0 && step == 1 &&
      end == cast<RankedTensorType>(v.getType()).getDimSize(axis))
    return v;
  return part<ampc::SliceOp>(nc, v,
                             {nc.ints("starts", {begin}),
                              nc.ints("ends", {end}), nc.ints("axes", {axis}),
                              nc.ints("steps", {step})});
}

/// Gate `k` (columns [k H, (k + 1) H)) of a (batch, gates x H) value, or the
/// k-th H elements of a vector.
Value gate(NodeContext &nc, Value v, int64_t k, int64_t hidden) {
  if (!v)
    return v;
  int64_t axis = cast<RankedTensorType>(v.getType()).getRank() - 1;
  return sliced(nc, v, axis, k * hidden, (k + 1) * hidden);
}

/// x W^T + bias (no bias where null): a Gemm, on the precision lists' allow
/// list.
Value linear(NodeContext &nc, Value x, Value w, Value bias) {
  SmallVector<Value> operands = {x, w};
  if (bias)
    operands.push_back(bias);
  return part<ampc::GemmOp>(
      nc, operands, {nc.i64("transB", 1), gemmSegments(nc, operands.size())});
}

Value add(NodeContext &nc, Value a, Value b) {
  return part<ampc::AddOp>(nc, {a, b});
}
Value mul(NodeContext &nc, Value a, Value b) {
  return part<ampc::MulOp>(nc, {a, b});
}

/// `values` concatenated along `axis` (the value itself when there is one).
Value concatenated(NodeContext &nc, ArrayRef<Value> values, int64_t axis) {
  if (values.size() == 1)
    return values[0];
  return part<ampc::ConcatOp>(nc, values, {nc.i64("axis", axis)});
}

//===----------------------------------------------------------------------===//
// The cells
//===----------------------------------------------------------------------===//

enum class CellKind { LSTM, GRU, RNN };

/// What importRecurrent needs to know of each op.
struct CellSpec {
  CellKind kind;
  /// Blocks of H rows in W and R: 4 (LSTM, iofc), 3 (GRU, zrh), 1.
  int64_t gates;
  /// ONNX's default activations of one direction.
  ArrayRef<const char *> defaultActivations;
};

/// What every step of the node reads, checked.
struct Recurrence {
  const CellSpec &spec;
  int64_t hidden;
  Type element;
  /// The activations of each direction in turn, with their alpha and beta.
  SmallVector<Activation> activations;
  std::optional<float> clip;
  bool inputForget = false;       // LSTM
  bool linearBeforeReset = false; // GRU
};

/// One direction's weights, sliced from W, R, B and P.
struct Direction {
  ArrayRef<Activation> activations; // f, g, h of ONNX's equations
  Value w, r;                       // (G H, I), (G H, H)
  Value wb, rb;                     // (G H), null without B
  /// GRU with linear_before_reset 0: the hidden gate's rows of R and Rb,
  /// applied to r ⊙ H (r and rb then hold the z and r gates' rows).
  Value rHidden, rbHidden;
  /// LSTM with P: its i, o and f parts, (H) each.
  Value peepholeIn, peepholeOut, peepholeForget;
};

/// A cell's state between steps: H, and the LSTM's C.
struct State {
  Value h, c;
};

/// The input of an activation: clipped to [-clip, clip] when the node says.
Value clipped(NodeContext &nc, const Recurrence &rec, Value v) {
  if (!rec.clip || !v)
    return v;
  return part<ampc::ClipOp>(nc, {v, scalarOf(nc, rec.element, -*rec.clip),
                                 scalarOf(nc, rec.element, *rec.clip)});
}

/// 1 - `value`, where `value` = `a`(`in`): Sigmoid(-in) for a Sigmoid,
/// which keeps what 1 - value rounds away where value is within an ulp of
/// 1 (in fp16: an input past 8 or so).
Value complement(NodeContext &nc, const Recurrence &rec, const Activation &a,
                 Value in, Value value) {
  if (StringRef(a.kind->name) == "Sigmoid")
    return activate(nc, a, part<ampc::NegOp>(nc, in));
  return part<ampc::SubOp>(nc, {scalarOf(nc, rec.element, 1.0), value});
}

/// it = f(Xt Wi + Ht-1 Ri + Pi ⊙ Ct-1 + Wbi + Rbi), ft likewise (1 - it
/// with input_forget), ct = g(Xt Wc + Ht-1 Rc + Wbc + Rbc), Ct = ft ⊙ Ct-1
/// + it ⊙ ct, ot = f(Xt Wo + Ht-1 Ro + Po ⊙ Ct + Wbo + Rbo), Ht = ot ⊙
/// h(Ct). `x` is the step's input projection, (batch, 4 H).
State lstmCell(NodeContext &nc, const Recurrence &rec, const Direction &d,
               Value x, State prev) {
  int64_t h = rec.hidden;
  const Activation &f = d.activations[0], &g = d.activations[1],
                   &hAct = d.activations[2];
  Value gates = add(nc, x, linear(nc, prev.h, d.r, d.rb));
  Value in = gate(nc, gates, 0, h), out = gate(nc, gates, 1, h),
        forget = gate(nc, gates, 2, h), cell = gate(nc, gates, 3, h);
  if (d.peepholeIn) {
    in = add(nc, in, mul(nc, d.peepholeIn, prev.c));
    forget = add(nc, forget, mul(nc, d.peepholeForget, prev.c));
  }
  Value inClipped = clipped(nc, rec, in);
  in = activate(nc, f, inClipped);
  forget = rec.inputForget ? complement(nc, rec, f, inClipped, in)
                           : activate(nc, f, clipped(nc, rec, forget));
  // One op per statement: the order of a call's arguments is unspecified,
  // and the IR (and its tests) must not depend on the host compiler.
  Value kept = mul(nc, forget, prev.c);
  Value candidate = activate(nc, g, clipped(nc, rec, cell));
  Value c = add(nc, kept, mul(nc, in, candidate));
  if (d.peepholeOut)
    out = add(nc, out, mul(nc, d.peepholeOut, c));
  out = activate(nc, f, clipped(nc, rec, out));
  return {mul(nc, out, activate(nc, hAct, c)), c};
}

/// zt = f(Xt Wz + Ht-1 Rz + Wbz + Rbz), rt likewise, ht = g(Xt Wh + (rt ⊙
/// Ht-1) Rh + Rbh + Wbh), or with linear_before_reset g(Xt Wh + rt ⊙ (Ht-1
/// Rh + Rbh) + Wbh), Ht = (1 - zt) ⊙ ht + zt ⊙ Ht-1.
State gruCell(NodeContext &nc, const Recurrence &rec, const Direction &d,
              Value x, State prev) {
  int64_t h = rec.hidden;
  const Activation &f = d.activations[0], &g = d.activations[1];
  Value recurrent = linear(nc, prev.h, d.r, d.rb);
  // One op per statement where a call would create two: the order of a
  // call's arguments is unspecified (GCC and Clang differ).
  Value xz = gate(nc, x, 0, h);
  Value zIn = clipped(nc, rec, add(nc, xz, gate(nc, recurrent, 0, h)));
  Value z = activate(nc, f, zIn);
  Value xr = gate(nc, x, 1, h);
  Value r =
      activate(nc, f, clipped(nc, rec, add(nc, xr, gate(nc, recurrent, 1, h))));
  Value hidden = rec.linearBeforeReset
                     ? mul(nc, r, gate(nc, recurrent, 2, h))
                     : linear(nc, mul(nc, r, prev.h), d.rHidden, d.rbHidden);
  Value candidate =
      activate(nc, g, clipped(nc, rec, add(nc, gate(nc, x, 2, h), hidden)));
  Value keep = complement(nc, rec, f, zIn, z);
  Value fresh = mul(nc, keep, candidate);
  return {add(nc, fresh, mul(nc, z, prev.h)), Value()};
}

/// Ht = f(Xt Wi + Ht-1 Ri + Wbi + Rbi).
State rnnCell(NodeContext &nc, const Recurrence &rec, const Direction &d,
              Value x, State prev) {
  Value pre = add(nc, x, linear(nc, prev.h, d.r, d.rb));
  return {activate(nc, d.activations[0], clipped(nc, rec, pre)), Value()};
}

State cell(NodeContext &nc, const Recurrence &rec, const Direction &d, Value x,
           State prev) {
  switch (rec.spec.kind) {
  case CellKind::LSTM:
    return lstmCell(nc, rec, d, x, prev);
  case CellKind::GRU:
    return gruCell(nc, rec, d, x, prev);
  case CellKind::RNN:
    return rnnCell(nc, rec, d, x, prev);
  }
  llvm_unreachable("unknown cell");
}

//===----------------------------------------------------------------------===//
// The shared part: inputs, directions, steps, outputs
//===----------------------------------------------------------------------===//

constexpr int kB = 3, kSequenceLens = 4, kInitialH = 5, kInitialC = 6, kP = 7;

/// The longest sequence the cells are unrolled over (X's seq_length).
constexpr int64_t kMaxRecurrentSteps = int64_t(1) << 16;

/// Checks that input `i` (if present) is `shape` of the node's element
/// type; `what` names its dimensions.
LogicalResult checkInput(NodeContext &nc, size_t i, StringRef name,
                         ArrayRef<int64_t> shape, StringRef what,
                         Type element) {
  Value v = nc.input(i);
  if (!v)
    return success();
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() != shape)
    return nc.error(name + " must be " + formatDims(shape) + " (" + what +
                    "), got " + formatDims(type.getShape()));
  if (type.getElementType() != element)
    return nc.error(name + " must have X's element type");
  return success();
}

/// A (rows, cols) zero constant of `element`.
Value zeros(NodeContext &nc, Type element, int64_t rows, int64_t cols) {
  auto type = RankedTensorType::get({rows, cols}, element);
  FailureOr<Outputs> c = constant(
      nc, DenseElementsAttr::get(type, nc.b.getFloatAttr(element, 0.0)));
  return failed(c) ? Value() : (*c)[0];
}

FailureOr<Outputs> importRecurrent(NodeContext &nc, const CellSpec &spec) {
  bool lstm = spec.kind == CellKind::LSTM;
  std::string direction = nc.getString("direction", "forward");
  SmallVector<bool> reverse;
  if (direction == "forward")
    reverse = {false};
  else if (direction == "reverse")
    reverse = {true};
  else if (direction == "bidirectional")
    reverse = {false, true};
  else
    return nc.error(
        "'direction' must be forward, reverse or bidirectional, got '" +
        direction + "'");
  int64_t layout = nc.getInt("layout", 0);
  if (layout != 0 && layout != 1)
    return nc.error("'layout' must be 0 or 1, got " + Twine(layout));
  if (nc.attr("layout") && nc.opset < 14)
    return nc.error(
        "'layout' is an attribute from opset 14 (the model is at opset " +
        Twine(nc.opset) + ")");

  auto xt = cast<RankedTensorType>(nc.input(0).getType());
  if (xt.getRank() != 3)
    return nc.error(Twine("X must have rank 3 (") +
                    (layout ? "[batch_size, seq_length, input_size]"
                            : "[seq_length, batch_size, input_size]") +
                    "), got " + formatDims(xt.getShape()));
  if (!isa<FloatType>(xt.getElementType()))
    return nc.error("X must be a float tensor");
  int64_t dirs = reverse.size(), g = spec.gates;
  int64_t timeAxis = layout, batchAxis = 1 - layout;
  int64_t steps = xt.getDimSize(timeAxis), batch = xt.getDimSize(batchAxis),
          inputSize = xt.getDimSize(2);
  Type element = xt.getElementType();
  // hidden_size is optional: R's last dimension says it too.
  auto rt = cast<RankedTensorType>(nc.input(2).getType());
  if (!nc.attr("hidden_size") && rt.getRank() != 3)
    return nc.error("R must have rank 3 ([num_directions, gates x "
                    "hidden_size, hidden_size]), got " +
                    formatDims(rt.getShape()));
  int64_t hidden =
      nc.attr("hidden_size") ? nc.getInt("hidden_size", 0) : rt.getDimSize(2);
  if (hidden <= 0)
    return nc.error("'hidden_size' must be positive, got " + Twine(hidden));
  // Every state tensor has hidden_size elements per row, so it is at most
  // kMaxTensorBytes; the products with the gate count below then fit.
  if (hidden > ampc::kMaxTensorBytes)
    return nc.error("'hidden_size' " + Twine(hidden) +
                    " is larger than any tensor ampc makes (2^48 bytes)");
  if (steps == 0 || batch == 0)
    return nc.error("X has no steps or no batch: " + formatDims(xt.getShape()));
  // The cell is unrolled, some twenty ops a step: an X of a few hundred MB
  // with 2^27 steps would take hours and hundreds of GB to import.
  if (steps > kMaxRecurrentSteps)
    return nc.error("seq_length " + Twine(steps) + ": ampc unrolls at most " +
                    Twine(kMaxRecurrentSteps) + " (2^16) steps");
  std::string gh = g == 1 ? "hidden_size" : Twine(g).str() + " hidden_size";
  SmallVector<int64_t> stateShape =
      layout ? SmallVector<int64_t>{batch, dirs, hidden}
             : SmallVector<int64_t>{dirs, batch, hidden};
  StringRef stateDims = layout ? "[batch_size, num_directions, hidden_size]"
                               : "[num_directions, batch_size, hidden_size]";
  if (failed(checkInput(nc, 1, "W", {dirs, g * hidden, inputSize},
                        "[num_directions, " + gh + ", input_size]", element)) ||
      failed(checkInput(nc, 2, "R", {dirs, g * hidden, hidden},
                        "[num_directions, " + gh + ", hidden_size]",
                        element)) ||
      failed(checkInput(nc, kB, "B", {dirs, 2 * g * hidden},
                        "[num_directions, 2 " + gh + "]", element)) ||
      failed(checkInput(nc, kInitialH, "initial_h", stateShape, stateDims,
                        element)) ||
      (lstm &&
       (failed(checkInput(nc, kInitialC, "initial_c", stateShape, stateDims,
                          element)) ||
        failed(checkInput(nc, kP, "P", {dirs, 3 * hidden},
                          "[num_directions, 3 hidden_size]", element)))))
    return failure();

  Recurrence rec{spec, hidden, element, {}, {}};
  FailureOr<SmallVector<Activation>> acts =
      activations(nc, spec.defaultActivations, dirs);
  if (failed(acts))
    return failure();
  rec.activations = std::move(*acts);
  if (nc.attr("clip")) {
    float clip = nc.getFloat("clip", 0.0f);
    if (!(clip > 0.0f))
      return nc.error("'clip' must be positive, got " + formatNumber(clip));
    rec.clip = clip;
  }
  for (auto [name, flag] :
       {std::pair<StringRef, bool *>{"input_forget", &rec.inputForget},
        {"linear_before_reset", &rec.linearBeforeReset}}) {
    int64_t v = nc.getInt(name, 0);
    if (v != 0 && v != 1)
      return nc.error("'" + name + "' must be 0 or 1, got " + Twine(v));
    *flag = v;
  }

  // sequence_lens: steps at or past a batch entry's length leave its state
  // as it was and output zeros (Where over a mask), so that the reverse
  // direction starts at each entry's last valid step. Lengths known to be
  // full need no mask.
  Value lens = nc.input(kSequenceLens);
  if (lens) {
    auto lt = cast<RankedTensorType>(lens.getType());
    if (lt.getShape() != ArrayRef<int64_t>{batch} ||
        !(lt.getElementType().isInteger(32) ||
          lt.getElementType().isInteger(64)))
      return nc.error("sequence_lens must be int32 [" + Twine(batch) +
                      "] (one length per batch entry), got " +
                      formatDims(lt.getShape()));
    DenseElementsAttr known;
    if (matchPattern(lens, m_Constant(&known))) {
      bool full = true;
      for (const APInt &len : known.getValues<APInt>()) {
        if (len.isNegative() || len.getSExtValue() > steps)
          return nc.error("sequence_lens holds " + Twine(len.getSExtValue()) +
                          ", outside [0, " + Twine(steps) + "] (seq_length " +
                          Twine(steps) + ")");
        full &= len.getSExtValue() == steps;
      }
      if (full)
        lens = Value();
    }
    if (lens)
      lens = reshaped(nc, lens, {batch, 1});
  }

  // X as rows of (batch_size x seq_length, input_size): step t's rows are
  // [t B, (t + 1) B) in layout 0, every T-th from t in layout 1.
  Value x = reshaped(nc, nc.input(0), {steps * batch, inputSize});
  // The initial state where initial_h or initial_c is absent; the masked
  // steps' Y.
  Value zeroState = zeros(nc, element, batch, hidden);
  Value zero = lens ? scalarOf(nc, element, 0.0) : Value();
  int64_t perDirection = spec.defaultActivations.size();
  SmallVector<Value> ys, yhs, ycs;
  for (auto [d, rev] : llvm::enumerate(reverse)) {
    int64_t di = d;
    auto ofDirection = [&](size_t i, ArrayRef<int64_t> shape,
                           int64_t axis = 0) {
      Value v = nc.input(i);
      return v ? reshaped(nc, sliced(nc, v, axis, di, di + 1), shape) : v;
    };
    Direction dir;
    dir.activations =
        ArrayRef(rec.activations).slice(di * perDirection, perDirection);
    dir.w = ofDirection(1, {g * hidden, inputSize});
    dir.r = ofDirection(2, {g * hidden, hidden});
    if (Value bias = ofDirection(kB, {2 * g * hidden})) {
      dir.wb = sliced(nc, bias, 0, 0, g * hidden);
      dir.rb = sliced(nc, bias, 0, g * hidden, 2 * g * hidden);
    }
    if (Value p = lstm ? ofDirection(kP, {3 * hidden}) : Value()) {
      dir.peepholeIn = gate(nc, p, 0, hidden);
      dir.peepholeOut = gate(nc, p, 1, hidden);
      dir.peepholeForget = gate(nc, p, 2, hidden);
    }
    if (spec.kind == CellKind::GRU && !rec.linearBeforeReset) {
      dir.rHidden = sliced(nc, dir.r, 0, 2 * hidden, 3 * hidden);
      dir.rbHidden = sliced(nc, dir.rb, 0, 2 * hidden, 3 * hidden);
      dir.r = sliced(nc, dir.r, 0, 0, 2 * hidden);
      dir.rb = sliced(nc, dir.rb, 0, 0, 2 * hidden);
    }
    State state;
    state.h = ofDirection(kInitialH, {batch, hidden}, layout);
    if (!state.h)
      state.h = zeroState;
    if (lstm) {
      state.c = ofDirection(kInitialC, {batch, hidden}, layout);
      if (!state.c)
        state.c = zeroState;
    }
    Value projected = linear(nc, x, dir.w, dir.wb);
    SmallVector<Value> outputs(steps);
    for (int64_t k = 0; k < steps; ++k) {
      int64_t t = rev ? steps - 1 - k : k;
      Value xStep = layout
                        ? sliced(nc, projected, 0, t, steps * batch, steps)
                        : sliced(nc, projected, 0, t * batch, (t + 1) * batch);
      State next = cell(nc, rec, dir, xStep, state);
      if (lens) {
        Value valid = part<ampc::LessOp>(
            nc, {scalarOf(nc, getElementTypeOrSelf(lens), t), lens});
        outputs[t] = part<ampc::WhereOp>(nc, {valid, next.h, zero});
        next.h = part<ampc::WhereOp>(nc, {valid, next.h, state.h});
        if (lstm)
          next.c = part<ampc::WhereOp>(nc, {valid, next.c, state.c});
      } else {
        outputs[t] = next.h;
      }
      state = next;
    }
    // Y is (T, D, B, H) in layout 0, (B, T, D, H) in layout 1; Y_h and Y_c
    // (D, B, H) or (B, D, H).
    SmallVector<int64_t> stepShape =
        layout ? SmallVector<int64_t>{batch, 1, 1, hidden}
               : SmallVector<int64_t>{1, 1, batch, hidden};
    SmallVector<int64_t> finalShape =
        layout ? SmallVector<int64_t>{batch, 1, hidden}
               : SmallVector<int64_t>{1, batch, hidden};
    if (nc.outputUsed(0)) {
      for (Value &y : outputs)
        y = reshaped(nc, y, stepShape);
      ys.push_back(concatenated(nc, outputs, timeAxis));
    }
    yhs.push_back(reshaped(nc, state.h, finalShape));
    if (lstm)
      ycs.push_back(reshaped(nc, state.c, finalShape));
  }
  Outputs results(lstm ? 3 : 2);
  if (nc.outputUsed(0))
    results[0] = concatenated(nc, ys, layout + 1);
  results[1] = concatenated(nc, yhs, layout);
  if (lstm)
    results[2] = concatenated(nc, ycs, layout);
  for (auto [i, v] : llvm::enumerate(results))
    if (nc.outputUsed(i) && !v)
      return failure();
  // The final states carry every step: one that failed left them null.
  if (!results[1] || (lstm && !results[2]))
    return failure();
  return results;
}

constexpr const char *kLstmActivations[] = {"Sigmoid", "Tanh", "Tanh"};
constexpr const char *kGruActivations[] = {"Sigmoid", "Tanh"};
constexpr const char *kRnnActivations[] = {"Tanh"};

} // namespace

FailureOr<Outputs> importLSTM(NodeContext &nc) {
  static const CellSpec spec{CellKind::LSTM, 4, kLstmActivations};
  return importRecurrent(nc, spec);
}

FailureOr<Outputs> importGRU(NodeContext &nc) {
  static const CellSpec spec{CellKind::GRU, 3, kGruActivations};
  return importRecurrent(nc, spec);
}

FailureOr<Outputs> importRNN(NodeContext &nc) {
  static const CellSpec spec{CellKind::RNN, 1, kRnnActivations};
  return importRecurrent(nc, spec);
}

} // namespace ampc::detail
