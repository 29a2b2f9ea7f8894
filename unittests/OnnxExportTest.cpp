//===- OnnxExportTest.cpp - unit tests of the mixed-precision exporter ----===//

#include "ampc/Target/OnnxExport.h"
#include "ampc/Import/OnnxModel.h"

#include "OnnxFullCheck.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

using onnx::TensorProto;

namespace {

constexpr int F32 = TensorProto::FLOAT;
constexpr int F16 = TensorProto::FLOAT16;
constexpr int BF16 = TensorProto::BFLOAT16;

/// The result of one export.
struct Exported {
  bool ok = false;
  onnx::ModelProto model;
  std::string error;
  std::vector<std::string> warnings;
};

Exported exportText(const char *text, const ampc::NodePrecisions &decisions) {
  Exported r;
  onnx::ModelProto original;
  if (!ampc::parseOnnxModel(text, "t.onnxtext", original, r.error))
    return r;
  r.ok = ampc::exportMixedPrecisionOnnx(original, decisions, r.model, r.error,
                                        &r.warnings);
  return r;
}

using ampc::testing::fullCheck;

/// The graph's nodes as "Op(in, ...) -> out, ...", Casts as "Cast<DTYPE>".
std::vector<std::string> nodeList(const onnx::ModelProto &model) {
  std::vector<std::string> result;
  for (const onnx::NodeProto &node : model.graph().node()) {
    std::string s = node.op_type();
    if (node.op_type() == "Cast")
      for (const auto &attr : node.attribute())
        if (attr.name() == "to")
          s += "<" + std::to_string(attr.i()) + ">";
    s += "(";
    for (int i = 0; i < node.input_size(); ++i)
      s += (i ? ", " : "") + node.input(i);
    s += ") -> ";
    for (int i = 0; i < node.output_size(); ++i)
      s += (i ? ", " : "") + node.output(i);
    result.push_back(s);
  }
  return result;
}

/// Element type of every value of the exported model, as shape inference
/// sees it (value_info is cleared by the exporter, so this is re-inferred).
std::map<std::string, int> inferredTypes(const onnx::ModelProto &model) {
  onnx::ModelProto copy = model;
  onnx::shape_inference::InferShapes(copy);
  std::map<std::string, int> types;
  for (const auto &vi : copy.graph().value_info())
    types[vi.name()] = vi.type().tensor_type().elem_type();
  for (const auto &vi : copy.graph().input())
    types[vi.name()] = vi.type().tensor_type().elem_type();
  for (const auto &vi : copy.graph().output())
    types[vi.name()] = vi.type().tensor_type().elem_type();
  return types;
}

const TensorProto *initializer(const onnx::ModelProto &model,
                               const std::string &name) {
  for (const TensorProto &t : model.graph().initializer())
    if (t.name() == name)
      return &t;
  return nullptr;
}

/// The 16-bit values of a FLOAT16/BFLOAT16 tensor stored in raw_data.
std::vector<uint16_t> raw16(const TensorProto &t) {
  std::vector<uint16_t> bits(t.raw_data().size() / 2);
  for (size_t i = 0; i < bits.size(); ++i)
    bits[i] = static_cast<uint16_t>(
        static_cast<unsigned char>(t.raw_data()[2 * i]) |
        static_cast<unsigned char>(t.raw_data()[2 * i + 1]) << 8);
  return bits;
}

int outputType(const onnx::ModelProto &model, const std::string &name) {
  for (const auto &vi : model.graph().output())
    if (vi.name() == name)
      return vi.type().tensor_type().elem_type();
  return -1;
}

using Nodes = std::vector<std::string>;

//===----------------------------------------------------------------------===//

constexpr const char *kMlp = R"(
<ir_version: 8, opset_import: ["" : 17]>
mlp (float[2, 3] x) => (float[2, 2] y)
<float[3, 2] W = {1., 0.1, -2., 65504., 65520., 3.}>
{
  h = MatMul(x, W)
  r = Relu(h)
  y = Softmax(r)
}
)";

TEST(OnnxExportTest, CastsAroundDecidedNodesAndStoresWeightsInFp16) {
  Exported r = exportText(
      kMlp, {{"MatMul_0", F16}, {"Relu_1", F16}, {"Softmax_2", F32}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model), (Nodes{
                                   "Cast<10>(x) -> x_to_f16",
                                   "MatMul(x_to_f16, W) -> h",
                                   "Relu(h) -> r",
                                   "Cast<1>(r) -> r_to_f32",
                                   "Softmax(r_to_f32) -> y",
                               }));
  // W is used only in FP16: stored as FP16, rounded to nearest even
  // (65520 is the first value that rounds to infinity).
  const TensorProto *w = initializer(r.model, "W");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->data_type(), F16);
  EXPECT_EQ(w->float_data_size(), 0);
  EXPECT_EQ(raw16(*w), (std::vector<uint16_t>{0x3C00, 0x2E66, 0xC000, 0x7BFF,
                                              0x7C00, 0x4200}));
  EXPECT_EQ(r.model.graph().value_info_size(), 0);
  EXPECT_EQ(r.model.graph().input(0).type().tensor_type().elem_type(), F32);
  EXPECT_EQ(outputType(r.model, "y"), F32);
  std::map<std::string, int> types = inferredTypes(r.model);
  EXPECT_EQ(types["h"], F16);
  EXPECT_EQ(types["r"], F16);
  EXPECT_EQ(types["y"], F32);
  EXPECT_EQ(fullCheck(r.model), "");
  EXPECT_TRUE(r.warnings.empty());
}

TEST(OnnxExportTest, AllFp32DecisionsLeaveTheModelAsItWas) {
  onnx::ModelProto original;
  std::string error;
  ASSERT_TRUE(ampc::parseOnnxModel(kMlp, "t.onnxtext", original, error));
  onnx::ModelProto out;
  ASSERT_TRUE(ampc::exportMixedPrecisionOnnx(
      original, {{"MatMul_0", F32}, {"Relu_1", F32}}, out, error))
      << error;
  EXPECT_EQ(out.SerializeAsString(), original.SerializeAsString());
}

TEST(OnnxExportTest, UndecidedNodesFollowAndGraphOutputGetsFinalCast) {
  // Relu follows MatMul into FP16; y is declared FLOAT, so the computed value
  // moves to a fresh name and a final Cast produces y. z consumes y in FP32
  // through that same Cast.
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 2] y, float[2, 2] z)
<float[3, 2] W = {1., 2., 3., 4., 5., 6.}>
{
  h = MatMul(x, W)
  y = Relu(h)
  z = Softmax(y)
}
)",
                          {{"MatMul_0", F16}, {"Softmax_2", F32}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model), (Nodes{
                                   "Cast<10>(x) -> x_to_f16",
                                   "MatMul(x_to_f16, W) -> h",
                                   "Relu(h) -> y_f16",
                                   "Cast<1>(y_f16) -> y",
                                   "Softmax(y) -> z",
                               }));
  EXPECT_EQ(outputType(r.model, "y"), F32);
  EXPECT_EQ(outputType(r.model, "z"), F32);
  EXPECT_EQ(inferredTypes(r.model)["y_f16"], F16);
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, GraphOutputProducedInFp16GetsAppendedCast) {
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y)
{
  y = Relu(x)
}
)",
                          {{"Relu_0", F16}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model), (Nodes{
                                   "Cast<10>(x) -> x_to_f16",
                                   "Relu(x_to_f16) -> y_f16",
                                   "Cast<1>(y_f16) -> y",
                               }));
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, BatchNormOpset15KeepsFp32StatisticsForFp16Data) {
  // Opset 15: scale and B are T1, mean and var T2, independent of X's T.
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[1, 2, 3, 3] x) => (float[1, 2, 3, 3] y)
<float[2] s = {1., 2.}, float[2] b = {0., 1.}, float[2] m = {0., 0.}, float[2] v = {1., 1.}>
{
  y = BatchNormalization(x, s, b, m, v)
}
)",
                          {{"BatchNormalization_0", F16}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model),
            (Nodes{
                "Cast<10>(x) -> x_to_f16",
                "BatchNormalization(x_to_f16, s, b, m, v) -> y_f16",
                "Cast<1>(y_f16) -> y",
            }));
  for (const char *name : {"s", "b", "m", "v"})
    EXPECT_EQ(initializer(r.model, name)->data_type(), F32) << name;
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, BatchNormOpset9CastsEverything) {
  // Opsets 9 to 13 type every input T: the statistics go to FP16 as well,
  // and being used only there they are stored in FP16. (Opset 14 types
  // mean and var U, which keep FP32.)
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 9]>
g (float[1, 2, 3, 3] x) => (float[1, 2, 3, 3] y)
<float[2] s = {1., 2.}, float[2] b = {0., 1.}, float[2] m = {0., 0.}, float[2] v = {1., 1.}>
{
  y = BatchNormalization(x, s, b, m, v)
}
)",
                          {{"BatchNormalization_0", F16}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model),
            (Nodes{
                "Cast<10>(x) -> x_to_f16",
                "BatchNormalization(x_to_f16, s, b, m, v) -> y_f16",
                "Cast<1>(y_f16) -> y",
            }));
  for (const char *name : {"s", "b", "m", "v"})
    EXPECT_EQ(initializer(r.model, name)->data_type(), F16) << name;
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, LayerNormKeepsFp32MeanAndInvStdDev) {
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] x) => (float[2, 4] y, float[2, 1] mean, float[2, 1] isd)
<float[4] s = {1., 1., 1., 1.}, float[4] b = {0., 0., 0., 0.}>
{
  y, mean, isd = LayerNormalization <axis = -1> (x, s, b)
}
)",
                          {{"LayerNormalization_0", F16}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model),
            (Nodes{
                "Cast<10>(x) -> x_to_f16",
                "LayerNormalization(x_to_f16, s, b) -> y_f16, mean, isd",
                "Cast<1>(y_f16) -> y",
            }));
  EXPECT_EQ(initializer(r.model, "s")->data_type(), F16);
  EXPECT_EQ(initializer(r.model, "b")->data_type(), F16);
  std::map<std::string, int> types = inferredTypes(r.model);
  EXPECT_EQ(types["mean"], F32);
  EXPECT_EQ(types["isd"], F32);
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, WhereKeepsConditionAndFollowsWidestInput) {
  // Where_1 is decided FP16: its bool condition stays, both values are cast.
  // Where_2 follows: a is FP16 now, b FP32, so it computes in the wider FP32.
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (bool[4] c, float[4] x, float[4] b) => (float[4] y, float[4] z)
{
  a = Relu(x)
  y = Where(c, a, b)
  z = Where(c, a, b)
}
)",
                          {{"Relu_0", F16}, {"Where_1", F16}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model), (Nodes{
                                   "Cast<10>(x) -> x_to_f16",
                                   "Relu(x_to_f16) -> a",
                                   "Cast<10>(b) -> b_to_f16",
                                   "Where(c, a, b_to_f16) -> y_f16",
                                   "Cast<1>(a) -> a_to_f32",
                                   "Where(c, a_to_f32, b) -> z",
                                   "Cast<1>(y_f16) -> y",
                               }));
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, UserCastIsLeftAlone) {
  // The user's Cast to FLOAT keeps its FP16 input and its own output type
  // (its decision is ignored); Neg then follows FP32 without any Cast.
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4] x) => (float[4] y)
{
  a = Relu(x)
  c = Cast <to = 1> (a)
  y = Neg(c)
}
)",
                          {{"Relu_0", F16}, {"Cast_1", F16}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model), (Nodes{
                                   "Cast<10>(x) -> x_to_f16",
                                   "Relu(x_to_f16) -> a",
                                   "Cast<1>(a) -> c",
                                   "Neg(c) -> y",
                               }));
  EXPECT_EQ(r.model.graph().node(2).name(), "");
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, SharedInitializerUsedAtTwoDtypesStaysFp32) {
  // W feeds an FP16 MatMul and an FP32 one: one Cast serves the FP16 use and
  // W keeps its FP32 data. V feeds two FP16 MatMuls: stored in FP16.
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 2] x) => (float[2, 2] y, float[2, 2] z)
<float[2, 2] W = {1., 2., 3., 4.}, float[2, 2] V = {1., 0., 0., 1.}>
{
  a = MatMul(x, W)
  b = MatMul(a, V)
  y = MatMul(b, V)
  z = MatMul(x, W)
}
)",
                          {{"MatMul_0", F16},
                           {"MatMul_1", F16},
                           {"MatMul_2", F16},
                           {"MatMul_3", F32}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model), (Nodes{
                                   "Cast<10>(x) -> x_to_f16",
                                   "Cast<10>(W) -> W_to_f16",
                                   "MatMul(x_to_f16, W_to_f16) -> a",
                                   "MatMul(a, V) -> b",
                                   "MatMul(b, V) -> y_f16",
                                   "MatMul(x, W) -> z",
                                   "Cast<1>(y_f16) -> y",
                               }));
  EXPECT_EQ(initializer(r.model, "W")->data_type(), F32);
  EXPECT_EQ(initializer(r.model, "V")->data_type(), F16);
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, InitializerWantedInFp16AndBf16GetsTwoCasts) {
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y, float[2] z)
<float[2] w = {1., 2.}>
{
  y = Add(x, w)
  z = Mul(x, w)
}
)",
                          {{"Add_0", F16}, {"Mul_1", BF16}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model), (Nodes{
                                   "Cast<10>(x) -> x_to_f16",
                                   "Cast<10>(w) -> w_to_f16",
                                   "Add(x_to_f16, w_to_f16) -> y_f16",
                                   "Cast<16>(x) -> x_to_bf16",
                                   "Cast<16>(w) -> w_to_bf16",
                                   "Mul(x_to_bf16, w_to_bf16) -> z_bf16",
                                   "Cast<1>(y_f16) -> y",
                                   "Cast<1>(z_bf16) -> z",
                               }));
  EXPECT_EQ(initializer(r.model, "w")->data_type(), F32);
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, WeightsRoundToNearestEvenAndKeepNaNs) {
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even (1). 1 + 3 * 2^-8 is a
  // tie between 1 + 2^-7 and 1 + 2^-6: even (1 + 2^-6). 3.4e38 overflows to
  // infinity; a NaN stays a NaN.
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[5] x) => (float[5] y)
<float[5] w = {1.00390625, 1.01171875, -1.0, 3.4e38, 0.}>
{
  y = Mul(x, w)
}
)",
                          {{"Mul_0", BF16}});
  ASSERT_TRUE(r.ok) << r.error;
  const TensorProto *w = initializer(r.model, "w");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->data_type(), BF16);
  EXPECT_EQ(raw16(*w), (std::vector<uint16_t>{0x3F80, 0x3F82, 0xBF80, 0x7F80,
                                              0x0000}));
  EXPECT_EQ(fullCheck(r.model), "");

  // A NaN whose payload sits in the dropped half must stay a NaN.
  onnx::ModelProto original;
  std::string error;
  ASSERT_TRUE(ampc::parseOnnxModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1] x) => (float[1] y)
<float[1] w = {0.}>
{
  y = Mul(x, w)
}
)",
                                   "t.onnxtext", original, error));
  TensorProto *nan = original.mutable_graph()->mutable_initializer(0);
  nan->clear_float_data();
  nan->set_raw_data(std::string("\x01\x00\x80\x7F", 4)); // 0x7F800001
  onnx::ModelProto out;
  ASSERT_TRUE(
      ampc::exportMixedPrecisionOnnx(original, {{"Mul_0", BF16}}, out, error))
      << error;
  std::vector<uint16_t> bits = raw16(*initializer(out, "w"));
  ASSERT_EQ(bits.size(), 1u);
  EXPECT_EQ(bits[0] & 0x7F80, 0x7F80);
  EXPECT_NE(bits[0] & 0x007F, 0);
  // The same NaN in FP16 is the quiet NaN.
  ASSERT_TRUE(
      ampc::exportMixedPrecisionOnnx(original, {{"Mul_0", F16}}, out, error))
      << error;
  EXPECT_EQ(raw16(*initializer(out, "w")), (std::vector<uint16_t>{0x7E00}));
}

TEST(OnnxExportTest, ConstantNodesAreStoredInFp16) {
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x) => (float[3] y)
{
  k = Constant <value_floats = [0.5, 2., 4.]> ()
  y = Mul(x, k)
}
)",
                          {{"Mul_1", F16}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model), (Nodes{
                                   "Constant() -> k",
                                   "Cast<10>(x) -> x_to_f16",
                                   "Mul(x_to_f16, k) -> y_f16",
                                   "Cast<1>(y_f16) -> y",
                               }));
  const onnx::AttributeProto &value = r.model.graph().node(0).attribute(0);
  EXPECT_EQ(value.name(), "value");
  EXPECT_EQ(value.t().data_type(), F16);
  EXPECT_EQ(raw16(value.t()), (std::vector<uint16_t>{0x3800, 0x4000, 0x4400}));
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, OverridableAndExternalInitializersAreCast) {
  // `a` is an initializer listed as a graph input (callers may feed it): it
  // keeps its declared type. `e` has external data: it is never rewritten.
  onnx::ModelProto original;
  std::string error;
  ASSERT_TRUE(ampc::parseOnnxModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x, float[2] a = {1., 2.}) => (float[2] y)
<float[2] e = {3., 4.}>
{
  s = Add(x, a)
  y = Mul(s, e)
}
)",
                                   "t.onnxtext", original, error));
  TensorProto *e = original.mutable_graph()->mutable_initializer(1);
  ASSERT_EQ(e->name(), "e");
  e->clear_float_data();
  e->set_data_location(TensorProto::EXTERNAL);
  auto *location = e->add_external_data();
  location->set_key("location");
  location->set_value("weights.bin");
  onnx::ModelProto out;
  ASSERT_TRUE(ampc::exportMixedPrecisionOnnx(
      original, {{"Add_0", F16}, {"Mul_1", F16}}, out, error))
      << error;
  EXPECT_EQ(nodeList(out), (Nodes{
                               "Cast<10>(x) -> x_to_f16",
                               "Cast<10>(a) -> a_to_f16",
                               "Add(x_to_f16, a_to_f16) -> s",
                               "Cast<10>(e) -> e_to_f16",
                               "Mul(s, e_to_f16) -> y_f16",
                               "Cast<1>(y_f16) -> y",
                           }));
  EXPECT_EQ(initializer(out, "a")->data_type(), F32);
  EXPECT_EQ(initializer(out, "e")->data_type(), F32);
  EXPECT_EQ(initializer(out, "e")->data_location(), TensorProto::EXTERNAL);
}

TEST(OnnxExportTest, OtherTypeParametersKeepTheirTypes) {
  // Pow's exponent (T1), Dropout's ratio (T1) and mask (T2), Shape's int64
  // output, Reshape's shape and Gather's indices keep their types; Shape,
  // Reshape and Gather follow FP16.
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x, int64[2] idx) => (float[2, 3] y, bool[2, 3] mask, float[2, 3] t)
<float e = {2.}, float ratio = {0.5}>
{
  p = Pow(x, e)
  y, mask = Dropout(p, ratio)
  shape = Shape(y)
  n = Neg(y)
  flat = Reshape(n, shape)
  t = Gather(flat, idx)
}
)",
                          {{"Pow_0", F16}, {"Dropout_1", F16}, {"Neg_3", F16}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model), (Nodes{
                                   "Cast<10>(x) -> x_to_f16",
                                   "Pow(x_to_f16, e) -> p",
                                   "Dropout(p, ratio) -> y_f16, mask",
                                   "Shape(y_f16) -> shape",
                                   "Neg(y_f16) -> n",
                                   "Reshape(n, shape) -> flat",
                                   "Gather(flat, idx) -> t_f16",
                                   "Cast<1>(y_f16) -> y",
                                   "Cast<1>(t_f16) -> t",
                               }));
  EXPECT_EQ(initializer(r.model, "e")->data_type(), F32);
  EXPECT_EQ(initializer(r.model, "ratio")->data_type(), F32);
  std::map<std::string, int> types = inferredTypes(r.model);
  EXPECT_EQ(types["mask"], TensorProto::BOOL);
  EXPECT_EQ(types["shape"], TensorProto::INT64);
  EXPECT_EQ(types["flat"], F16);
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, OtherTypeParametersKeepChangedTypesOnlyWhereValid) {
  // Pow's exponent comes out of an FP16 Relu: T1 takes FP16, so no Cast.
  Exported pow = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4] x, float[4] z) => (float[4] p)
{
  e = Relu(z)
  p = Pow(x, e)
}
)",
                            {{"Relu_0", F16}, {"Pow_1", F32}});
  ASSERT_TRUE(pow.ok) << pow.error;
  EXPECT_EQ(nodeList(pow.model), (Nodes{
                                     "Cast<10>(z) -> z_to_f16",
                                     "Relu(z_to_f16) -> e",
                                     "Pow(x, e) -> p",
                                 }));
  EXPECT_EQ(fullCheck(pow.model), "");

  // BatchNormalization's T1 inputs now disagree (s FP16, b FP32), and T2
  // also types the running_mean/var outputs: both go back to FP32.
  Exported bn = exportText(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[1, 2, 2, 2] x, float[2] s0, float[2] b, float[2] m0, float[2] v0)
  => (float[1, 2, 2, 2] y, float[2] rm, float[2] rv)
{
  s = Relu(s0)
  m = Relu(m0)
  v = Relu(v0)
  y, rm, rv = BatchNormalization <training_mode = 1> (x, s, b, m, v)
}
)",
                           {{"Relu_0", F16},
                            {"Relu_1", F16},
                            {"Relu_2", F16},
                            {"BatchNormalization_3", F32}});
  ASSERT_TRUE(bn.ok) << bn.error;
  EXPECT_EQ(nodeList(bn.model),
            (Nodes{
                "Cast<10>(s0) -> s0_to_f16",
                "Relu(s0_to_f16) -> s",
                "Cast<10>(m0) -> m0_to_f16",
                "Relu(m0_to_f16) -> m",
                "Cast<10>(v0) -> v0_to_f16",
                "Relu(v0_to_f16) -> v",
                "Cast<1>(s) -> s_to_f32",
                "Cast<1>(m) -> m_to_f32",
                "Cast<1>(v) -> v_to_f32",
                "BatchNormalization(x, s_to_f32, b, m_to_f32, v_to_f32) -> y, "
                "rm, rv",
            }));
  EXPECT_EQ(fullCheck(bn.model), "");
}

TEST(OnnxExportTest, UnacceptedDtypeFallsBackToTheOriginal) {
  // Conv (opset 17) has no bfloat16: it computes in FP32 with a warning.
  // MaxPool follows Relu's BF16, which it does not take either: its input is
  // cast back to FP32 and its int64 Indices output keeps its type.
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 1, 4, 4] x) => (float[1, 1, 2, 2] y, int64[1, 1, 2, 2] i)
<float[1, 1, 1, 1] k = {2.}>
{
  c = Conv(x, k)
  r = Relu(c)
  y, i = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)
}
)",
                          {{"Conv_0", BF16}, {"Relu_1", BF16}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model), (Nodes{
                                   "Conv(x, k) -> c",
                                   "Cast<16>(c) -> c_to_bf16",
                                   "Relu(c_to_bf16) -> r",
                                   "Cast<1>(r) -> r_to_f32",
                                   "MaxPool(r_to_f32) -> y, i",
                               }));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("Conv_0"), std::string::npos) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find("BFLOAT16"), std::string::npos) << r.warnings[0];
  EXPECT_EQ(initializer(r.model, "k")->data_type(), F32);
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, UnsortedGraphIsSorted) {
  // Decisions are keyed by the original positions (Relu_1, MatMul_0 below
  // is listed second).
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 2] x) => (float[2, 2] y)
<float[2, 2] W = {1., 2., 3., 4.}>
{
  y = Relu(h)
  h = MatMul(x, W)
}
)",
                          {{"Relu_0", F32}, {"MatMul_1", F16}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model), (Nodes{
                                   "Cast<10>(x) -> x_to_f16",
                                   "MatMul(x_to_f16, W) -> h",
                                   "Cast<1>(h) -> h_to_f32",
                                   "Relu(h_to_f32) -> y",
                               }));
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, FreshNamesAvoidExistingOnes) {
  Exported r = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x, float[2] x_to_f16) => (float[2] y, float[2] y_f16)
{
  y = Add(x, x_to_f16)
  y_f16 = Identity(x_to_f16)
}
)",
                          {{"Add_0", F16}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(nodeList(r.model),
            (Nodes{
                "Cast<10>(x) -> x_to_f16_1",
                "Cast<10>(x_to_f16) -> x_to_f16_to_f16",
                "Add(x_to_f16_1, x_to_f16_to_f16) -> y_f16_1",
                "Identity(x_to_f16) -> y_f16",
                "Cast<1>(y_f16_1) -> y",
            }));
  EXPECT_EQ(fullCheck(r.model), "");
}

TEST(OnnxExportTest, ReportsBadDecisionsAndIgnoresUnknownNodes) {
  const char *relu = R"(
<ir_version: 8, opset_import: ["" : 12]>
g (float[2] x) => (float[2] y)
{
  y = Relu(x)
}
)";
  Exported unknown = exportText(relu, {{"NoSuchNode", F16}});
  ASSERT_TRUE(unknown.ok) << unknown.error;
  EXPECT_EQ(nodeList(unknown.model), (Nodes{"Relu(x) -> y"}));

  Exported bf16 = exportText(relu, {{"Relu_0", BF16}});
  EXPECT_FALSE(bf16.ok);
  EXPECT_NE(bf16.error.find("opset 13"), std::string::npos) << bf16.error;
  EXPECT_NE(bf16.error.find("Relu_0"), std::string::npos) << bf16.error;

  Exported f64 = exportText(relu, {{"Relu_0", TensorProto::DOUBLE}});
  EXPECT_FALSE(f64.ok);
  EXPECT_NE(f64.error.find("Relu_0"), std::string::npos) << f64.error;
}

TEST(OnnxExportTest, ReportsCyclesAndSubgraphs) {
  Exported cycle = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y)
{
  a = Add(x, b)
  b = Relu(a)
  y = Identity(b)
}
)",
                              {});
  EXPECT_FALSE(cycle.ok);
  EXPECT_NE(cycle.error.find("cycle"), std::string::npos) << cycle.error;

  Exported branch = exportText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (bool c, float[2] x) => (float[2] y)
{
  y = If (c) <then_branch = t () => (float[2] a) { a = Relu(x) },
              else_branch = e () => (float[2] b) { b = Neg(x) }>
}
)",
                               {});
  EXPECT_FALSE(branch.ok);
  EXPECT_NE(branch.error.find("subgraph"), std::string::npos) << branch.error;
}

TEST(OnnxExportTest, WritesAtomicallyAndReadsBack) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ampc-export", dir));
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, "m.onnx");

  Exported r = exportText(kMlp, {{"MatMul_0", F16}});
  ASSERT_TRUE(r.ok) << r.error;
  std::string error;
  ASSERT_TRUE(ampc::writeOnnxModel(r.model, path, error)) << error;
  // Overwriting replaces the file.
  ASSERT_TRUE(ampc::writeOnnxModel(r.model, path, error)) << error;
  onnx::ModelProto back;
  ASSERT_TRUE(ampc::readOnnxModel(path, back, error)) << error;
  EXPECT_EQ(back.SerializeAsString(), r.model.SerializeAsString());

  // Nothing but the model is left in the folder.
  std::error_code ec;
  unsigned entries = 0;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    ++entries;
  EXPECT_EQ(entries, 1u);

  llvm::SmallString<128> missing(dir);
  llvm::sys::path::append(missing, "no-such-folder", "m.onnx");
  EXPECT_FALSE(ampc::writeOnnxModel(r.model, missing, error));
  EXPECT_FALSE(error.empty());

  llvm::sys::fs::remove(path);
  llvm::sys::fs::remove(dir);
}

} // namespace
