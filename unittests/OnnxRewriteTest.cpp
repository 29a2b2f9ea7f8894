//===- OnnxRewriteTest.cpp - the runtime's ONNX initializer rewrite --------===//
//
// The rewrite reads protobuf by hand; these tests build models with the
// protobuf library and parse its output back with it.
//
//===----------------------------------------------------------------------===//

#include "OnnxRewrite.h"

#include "ampc/Import/OnnxModel.h"

#include "OnnxFullCheck.h"

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

using ampc::runtime::NamedTensor;
using ampc::runtime::rewriteOnnxInitializers;
using onnx::TensorProto;

namespace {

/// A model with three initializers: "w" (raw_data), "b" (float_data) and
/// "table" (external data), and unknown fields in the model, the graph and
/// an initializer.
onnx::ModelProto smallModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("rewrite test");
  model.add_opset_import()->set_version(17);
  onnx::GraphProto *graph = model.mutable_graph();
  graph->set_name("g");
  TensorProto *w = graph->add_initializer();
  w->set_name("w");
  w->set_data_type(TensorProto::FLOAT);
  w->add_dims(2);
  w->add_dims(3);
  std::vector<float> values{1, 2, 3, 4, 5, 6};
  w->set_raw_data(values.data(), values.size() * 4);
  w->set_doc_string("the weight");
  TensorProto *b = graph->add_initializer();
  b->set_data_type(TensorProto::FLOAT);
  b->add_dims(3);
  for (float v : {0.5f, 0.25f, 0.125f})
    b->add_float_data(v);
  b->set_name("b");
  TensorProto *table = graph->add_initializer();
  table->set_name("table");
  table->set_data_type(TensorProto::INT64);
  table->add_dims(4);
  table->set_data_location(TensorProto::EXTERNAL);
  onnx::StringStringEntryProto *location = table->add_external_data();
  location->set_key("location");
  location->set_value("table.bin");
  graph->add_node()->set_op_type("Identity");
  return model;
}

std::string serialize(const onnx::ModelProto &model) {
  std::string bytes;
  EXPECT_TRUE(model.SerializeToString(&bytes));
  return bytes;
}

struct Rewritten {
  bool ok = false;
  std::string bytes, error;
};

Rewritten rewrite(const std::string &model,
                  const std::vector<NamedTensor> &replacements) {
  Rewritten r;
  r.ok = rewriteOnnxInitializers(
      reinterpret_cast<const unsigned char *>(model.data()), model.size(),
      replacements, r.bytes, r.error);
  return r;
}

const TensorProto *findInitializer(const onnx::ModelProto &model,
                                   const std::string &name) {
  for (const TensorProto &t : model.graph().initializer())
    if (t.name() == name)
      return &t;
  return nullptr;
}

TEST(OnnxRewriteTest, ReplacesInitializersAndKeepsTheRest) {
  std::string original = serialize(smallModel());
  std::vector<float> w{-1, -2, -3, -4, -5, -6};
  std::vector<double> b{7, 8};
  Rewritten r = rewrite(
      original, {{"w", 1, {2, 3}, w.data(), w.size() * 4},
                 {"b", 11, {2}, b.data(), b.size() * 8}});
  ASSERT_TRUE(r.ok) << r.error;

  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(r.bytes));
  EXPECT_EQ(parsed.producer_name(), "rewrite test");
  EXPECT_EQ(parsed.graph().name(), "g");
  ASSERT_EQ(parsed.graph().initializer_size(), 3);
  // Order is kept.
  EXPECT_EQ(parsed.graph().initializer(0).name(), "w");
  EXPECT_EQ(parsed.graph().initializer(1).name(), "b");
  EXPECT_EQ(parsed.graph().initializer(2).name(), "table");

  const TensorProto *newW = findInitializer(parsed, "w");
  EXPECT_EQ(newW->data_type(), TensorProto::FLOAT);
  EXPECT_EQ(std::vector<int64_t>(newW->dims().begin(), newW->dims().end()),
            (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(newW->raw_data().size(), 24u);
  EXPECT_EQ(0, std::memcmp(newW->raw_data().data(), w.data(), 24));
  EXPECT_FALSE(newW->has_doc_string());

  const TensorProto *newB = findInitializer(parsed, "b");
  EXPECT_EQ(newB->data_type(), TensorProto::DOUBLE);
  EXPECT_EQ(newB->float_data_size(), 0);
  ASSERT_EQ(newB->raw_data().size(), 16u);
  EXPECT_EQ(0, std::memcmp(newB->raw_data().data(), b.data(), 16));

  const TensorProto *table = findInitializer(parsed, "table");
  EXPECT_EQ(table->SerializeAsString(),
            smallModel().graph().initializer(2).SerializeAsString());
  EXPECT_EQ(parsed.graph().node_size(), 1);

  // Exactly what protobuf writes for the same edit.
  onnx::ModelProto expected = smallModel();
  TensorProto *ew = expected.mutable_graph()->mutable_initializer(0);
  ew->Clear();
  ew->add_dims(2);
  ew->add_dims(3);
  ew->set_data_type(TensorProto::FLOAT);
  ew->set_name("w");
  ew->set_raw_data(w.data(), 24);
  TensorProto *eb = expected.mutable_graph()->mutable_initializer(1);
  eb->Clear();
  eb->add_dims(2);
  eb->set_data_type(TensorProto::DOUBLE);
  eb->set_name("b");
  eb->set_raw_data(b.data(), 16);
  EXPECT_EQ(r.bytes, serialize(expected));
}

TEST(OnnxRewriteTest, NoReplacementsIsAnIdentity) {
  std::string original = serialize(smallModel());
  Rewritten r = rewrite(original, {});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.bytes, original);
}

TEST(OnnxRewriteTest, UnknownFieldsKeptByteForByte) {
  // Field 999 (varint 5) after the model's fields, and field 1000 (fixed32),
  // a group (field 1001) and field 1002 (fixed64) appended inside the graph.
  std::string unknownModel = std::string("\xb8\x3e\x05", 3);
  std::string unknownGraph =
      std::string("\xc5\x3e\x01\x02\x03\x04", 6) +         // 1000: fixed32
      std::string("\xcb\x3e\x08\x01\xcc\x3e", 6) +         // 1001: group
      std::string("\xd1\x3e\x01\x02\x03\x04\x05\x06\x07\x08", 10); // 1002
  onnx::ModelProto model = smallModel();
  std::string graph = model.graph().SerializeAsString() + unknownGraph;
  model.clear_graph();
  std::string bytes = serialize(model);
  bytes += '\x3a'; // field 7, length-delimited
  size_t length = graph.size();
  while (length >= 0x80) {
    bytes += static_cast<char>((length & 0x7f) | 0x80);
    length >>= 7;
  }
  bytes += static_cast<char>(length);
  bytes += graph + unknownModel;

  std::vector<float> w(6, 9.0f);
  Rewritten r = rewrite(bytes, {{"w", 1, {2, 3}, w.data(), 24}});
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_GE(r.bytes.size(), unknownModel.size());
  EXPECT_EQ(r.bytes.substr(r.bytes.size() - unknownModel.size()), unknownModel);
  EXPECT_NE(r.bytes.find(unknownGraph), std::string::npos);
  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(r.bytes));
  EXPECT_EQ(findInitializer(parsed, "w")->raw_data(),
            std::string(reinterpret_cast<const char *>(w.data()), 24));
  EXPECT_EQ(parsed.graph().initializer_size(), 3);
}

TEST(OnnxRewriteTest, PackedDimsInTheOriginal) {
  // dims written packed (field 1, length-delimited) by another producer.
  std::string tensor = std::string("\x0a\x02\x02\x03", 4) + // dims [2, 3]
                       std::string("\x10\x01", 2) +         // FLOAT
                       std::string("\x42\x01w", 3);         // name "w"
  std::string graph = "\x2a" + std::string(1, char(tensor.size())) + tensor;
  std::string model = std::string("\x08\x08", 2) + "\x3a" +
                      std::string(1, char(graph.size())) + graph;
  std::vector<float> w(6, 1.0f);
  Rewritten r = rewrite(model, {{"w", 1, {2, 3}, w.data(), 24}});
  ASSERT_TRUE(r.ok) << r.error;
  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(r.bytes));
  EXPECT_EQ(parsed.ir_version(), 8);
  EXPECT_EQ(parsed.graph().initializer(0).raw_data().size(), 24u);
}

TEST(OnnxRewriteTest, BadReplacements) {
  std::string original = serialize(smallModel());
  std::vector<float> w(6);
  Rewritten r = rewrite(original, {{"x", 1, {2, 3}, w.data(), 24}});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "'x' is not an initializer of the model's graph");
  EXPECT_TRUE(r.bytes.empty());

  r = rewrite(original, {{"w", 1, {2, 3}, w.data(), 20}});
  EXPECT_EQ(r.error, "replacement 'w' has 20 bytes of data, its dtype and "
                     "shape need 24");
  r = rewrite(original, {{"w", 1, {2, 3}, w.data(), 24},
                         {"w", 1, {2, 3}, w.data(), 24}});
  EXPECT_EQ(r.error, "two replacements for initializer 'w'");
  r = rewrite(original, {{"w", 99, {2, 3}, w.data(), 24}});
  EXPECT_EQ(r.error, "replacement 'w' has unknown dtype 99");
  r = rewrite(original, {{"w", 1, {-2, 3}, w.data(), 24}});
  EXPECT_EQ(r.error, "replacement 'w' has a negative dimension");
}

TEST(OnnxRewriteTest, MalformedInputs) {
  std::vector<float> w(6);
  std::vector<NamedTensor> replacements{{"w", 1, {2, 3}, w.data(), 24}};
  struct Case {
    std::string bytes, error;
  };
  std::vector<Case> cases = {
      {std::string("\x08", 1), "truncated varint at byte 1"},
      {std::string("\x08\x80\x80", 3), "truncated varint at byte 3"},
      {std::string("\x3a\x05\x2a", 3),
       "field runs past the end of its message at byte 2"},
      {std::string("\x3a\x03\x2a\x05\x42", 5),
       "field runs past the end of its message at byte 4"},
      {std::string("\x0f", 1), "invalid wire type 7 at byte 1"},
      {std::string("\x00\x01", 2), "invalid field number at byte 1"},
      {std::string("\x0c", 1), "unexpected end of group at byte 1"},
      {std::string("\x0b\x14", 2), "mismatched end of group at byte 2"},
      {std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12),
       "varint longer than 10 bytes at byte 11"},
  };
  for (const Case &c : cases) {
    Rewritten r = rewrite(c.bytes, replacements);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "malformed ONNX model: " + c.error);
  }
  Rewritten r = rewrite(std::string("\x38\x01", 2), replacements);
  EXPECT_EQ(r.error, "malformed ONNX model: the graph is not a message");
  r = rewrite(std::string("\x3a\x02\x28\x01", 4), replacements);
  EXPECT_EQ(r.error, "malformed ONNX model: an initializer is not a message");
  r = rewrite(std::string("\x3a\x04\x2a\x02\x40\x01", 6), replacements);
  EXPECT_EQ(r.error,
            "malformed ONNX model: an initializer's name is not a string");
}

TEST(OnnxRewriteTest, EveryTruncationIsHandled) {
  std::string original = serialize(smallModel());
  std::vector<float> w(6);
  for (size_t length = 0; length < original.size(); ++length) {
    Rewritten r = rewrite(original.substr(0, length),
                          {{"w", 1, {2, 3}, w.data(), 24}});
    // A cut at a field boundary is a valid, shorter message; whatever else
    // is refused with a one-line message.
    if (!r.ok)
      EXPECT_EQ(r.error.find('\n'), std::string::npos);
    else
      EXPECT_TRUE(onnx::ModelProto().ParseFromString(r.bytes));
  }
}

TEST(OnnxRewriteTest, RewrittenExampleModelPassesTheFullCheck) {
  std::ifstream in(AMPC_SOURCE_DIR "/examples/mlp.onnxtext");
  std::string text(std::istreambuf_iterator<char>(in), {});
  ASSERT_FALSE(text.empty());
  onnx::ModelProto model;
  std::string error;
  ASSERT_TRUE(ampc::parseOnnxModel(text, "mlp.onnxtext", model, error))
      << error;
  ASSERT_EQ(ampc::testing::fullCheck(model), "");

  std::vector<float> fc1(32, 0.5f), bias(8, -1.0f);
  Rewritten r = rewrite(serialize(model),
                        {{"fc1_weight", 1, {8, 4}, fc1.data(), 128},
                         {"fc1_bias", 1, {8}, bias.data(), 32}});
  ASSERT_TRUE(r.ok) << r.error;
  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(r.bytes));
  EXPECT_EQ(ampc::testing::fullCheck(parsed), "");
  const TensorProto *t = findInitializer(parsed, "fc1_bias");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->raw_data(),
            std::string(reinterpret_cast<const char *>(bias.data()), 32));
  EXPECT_EQ(findInitializer(parsed, "fc2_weight")->SerializeAsString(),
            findInitializer(model, "fc2_weight")->SerializeAsString());
}

} // namespace

//===----------------------------------------------------------------------===//
// Eval mode (rewriteOnnxEvalMode) and optional replacements
//===----------------------------------------------------------------------===//

namespace {

/// x -> BatchNormalization (training_mode 1, three outputs) -> Dropout
/// (ratio, training_mode inputs) -> y; a Relu in another domain that must
/// stay as it is.
onnx::ModelProto trainingModeModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto *graph = model.mutable_graph();
  onnx::NodeProto *bn = graph->add_node();
  bn->set_op_type("BatchNormalization");
  bn->set_name("bn");
  for (const char *in : {"x", "s", "b", "m", "v"})
    bn->add_input(in);
  for (const char *out : {"t", "m_out", "v_out"})
    bn->add_output(out);
  onnx::AttributeProto *epsilon = bn->add_attribute();
  epsilon->set_name("epsilon");
  epsilon->set_type(onnx::AttributeProto::FLOAT);
  epsilon->set_f(1e-3f);
  onnx::AttributeProto *mode = bn->add_attribute();
  mode->set_name("training_mode");
  mode->set_type(onnx::AttributeProto::INT);
  mode->set_i(1);
  onnx::NodeProto *dropout = graph->add_node();
  dropout->set_op_type("Dropout");
  for (const char *in : {"t", "ratio", "training"})
    dropout->add_input(in);
  dropout->add_output("y");
  dropout->add_output("mask");
  onnx::NodeProto *other = graph->add_node();
  other->set_op_type("Dropout");
  other->set_domain("com.example");
  for (const char *in : {"y", "ratio", "training"})
    other->add_input(in);
  other->add_output("z");
  graph->add_output()->set_name("z");
  return model;
}

Rewritten evalMode(const std::string &model) {
  Rewritten r;
  r.ok = ampc::runtime::rewriteOnnxEvalMode(
      reinterpret_cast<const unsigned char *>(model.data()), model.size(),
      r.bytes, r.error);
  return r;
}

} // namespace

TEST(OnnxRewriteTest, EvalModeTurnsOffBatchNormAndDropoutTraining) {
  Rewritten r = evalMode(serialize(trainingModeModel()));
  ASSERT_TRUE(r.ok) << r.error;
  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(r.bytes));
  const onnx::GraphProto &g = parsed.graph();
  ASSERT_EQ(g.node_size(), 3);
  const onnx::NodeProto &bn = g.node(0);
  EXPECT_EQ(bn.name(), "bn");
  EXPECT_EQ(bn.input_size(), 5);
  ASSERT_EQ(bn.output_size(), 1);
  EXPECT_EQ(bn.output(0), "t");
  ASSERT_EQ(bn.attribute_size(), 2);
  EXPECT_EQ(bn.attribute(0).name(), "epsilon");
  EXPECT_FLOAT_EQ(bn.attribute(0).f(), 1e-3f);
  EXPECT_EQ(bn.attribute(1).name(), "training_mode");
  EXPECT_EQ(bn.attribute(1).type(), onnx::AttributeProto::INT);
  EXPECT_EQ(bn.attribute(1).i(), 0);
  const onnx::NodeProto &dropout = g.node(1);
  ASSERT_EQ(dropout.input_size(), 2);
  EXPECT_EQ(dropout.input(1), "ratio");
  EXPECT_EQ(dropout.output_size(), 2);
  // Another domain's op of the same name is not ONNX's Dropout.
  EXPECT_EQ(g.node(2).input_size(), 3);
  EXPECT_EQ(g.output(0).name(), "z");
}

TEST(OnnxRewriteTest, EvalModeRefusesRunningStatisticsTheGraphReads) {
  onnx::ModelProto model = trainingModeModel();
  model.mutable_graph()->add_output()->set_name("v_out");
  Rewritten r = evalMode(serialize(model));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "cannot write the eval-mode model: BatchNormalization "
                     "node 'bn' has its running statistics 'v_out' read by "
                     "the graph");
}

TEST(OnnxRewriteTest, EvalModeRefusesMalformedModels) {
  std::string bytes = serialize(trainingModeModel());
  Rewritten r = evalMode(bytes.substr(0, bytes.size() - 3));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("malformed ONNX model"), std::string::npos)
      << r.error;
}

TEST(OnnxRewriteTest, OptionalReplacementsNeedNoInitializer) {
  std::string original = serialize(smallModel());
  std::vector<float> w{-1, -2, -3, -4, -5, -6}, lr{0.5f};
  NamedTensor missing{"ampc.lr", 1, {}, lr.data(), 4};
  missing.optional = true;
  NamedTensor present{"w", 1, {2, 3}, w.data(), w.size() * 4};
  present.optional = true;
  Rewritten r = rewrite(original, {missing, present});
  ASSERT_TRUE(r.ok) << r.error;
  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(r.bytes));
  EXPECT_EQ(findInitializer(parsed, "w")->raw_data().size(), 24u);
  EXPECT_EQ(findInitializer(parsed, "ampc.lr"), nullptr);
  missing.optional = false;
  EXPECT_FALSE(rewrite(original, {missing}).ok);
}
