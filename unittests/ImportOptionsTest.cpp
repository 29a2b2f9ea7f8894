//===- ImportOptionsTest.cpp - parsing --shape and --bind-input -----------===//
//
// The command-line bindings of an import, parsed apart from the importer
// (ImportOptions.h): what each accepts, what it refuses and the message.
//
//===----------------------------------------------------------------------===//

#include "ampc/Import/ImportOptions.h"

#include <gtest/gtest.h>

namespace {

using Dims = llvm::SmallVector<int64_t>;

TEST(ShapeBinding, ParsesDimensions) {
  ampc::ImportOptions options;
  std::string error;
  EXPECT_TRUE(ampc::parseShapeBinding("input=32x3x224x224", options, error));
  EXPECT_EQ(options.shapes["input"], (Dims{32, 3, 224, 224}));
  EXPECT_TRUE(ampc::parseShapeBinding("v=7", options, error));
  EXPECT_EQ(options.shapes["v"], (Dims{7}));
  // An empty dimension is a dimension (zero elements).
  EXPECT_TRUE(ampc::parseShapeBinding("e=0x4", options, error));
  EXPECT_EQ(options.shapes["e"], (Dims{0, 4}));
  EXPECT_TRUE(error.empty()) << error;
}

TEST(ShapeBinding, ScalarIsNameAndEquals) {
  ampc::ImportOptions options;
  std::string error;
  EXPECT_TRUE(ampc::parseShapeBinding("scalar=", options, error));
  ASSERT_EQ(options.shapes.count("scalar"), 1u);
  EXPECT_TRUE(options.shapes["scalar"].empty());
}

TEST(ShapeBinding, LaterBindingOfANameWins) {
  ampc::ImportOptions options;
  std::string error;
  EXPECT_TRUE(ampc::parseShapeBinding("x=2x3", options, error));
  EXPECT_TRUE(ampc::parseShapeBinding("x=4x5", options, error));
  EXPECT_EQ(options.shapes["x"], (Dims{4, 5}));
  EXPECT_EQ(options.shapes.size(), 1u);
}

TEST(ShapeBinding, NameContainingEqualsSplitsAtTheFirst) {
  // "a=b=3": the name is "a", and "b" is not a dimension.
  ampc::ImportOptions options;
  std::string error;
  EXPECT_FALSE(ampc::parseShapeBinding("a=b=3", options, error));
  EXPECT_EQ(error, "--shape a: 'b=3' is not a dimension (expected "
                   "NAME=DxDx..., e.g. x=32x784)");
}

TEST(ShapeBinding, Rejects) {
  ampc::ImportOptions options;
  std::string error;
  EXPECT_FALSE(ampc::parseShapeBinding("input", options, error));
  EXPECT_EQ(error, "--shape expects NAME=DxDx..., got 'input'");
  EXPECT_FALSE(ampc::parseShapeBinding("=3", options, error));
  EXPECT_EQ(error, "--shape expects NAME=DxDx..., got '=3'");
  EXPECT_FALSE(ampc::parseShapeBinding("x=3xy", options, error));
  EXPECT_EQ(error, "--shape x: 'y' is not a dimension (expected "
                   "NAME=DxDx..., e.g. x=32x784)");
  EXPECT_FALSE(ampc::parseShapeBinding("x=-3", options, error));
  EXPECT_EQ(error, "--shape x: '-3' is not a dimension (expected "
                   "NAME=DxDx..., e.g. x=32x784)");
  // A trailing or doubled 'x' leaves an empty dimension.
  EXPECT_FALSE(ampc::parseShapeBinding("x=3x", options, error));
  EXPECT_EQ(error, "--shape x: '' is not a dimension (expected "
                   "NAME=DxDx..., e.g. x=32x784)");
  EXPECT_FALSE(ampc::parseShapeBinding("x=3xx4", options, error));
  // Nothing refused is bound.
  EXPECT_TRUE(options.shapes.empty());
}

TEST(InputBinding, ParsesAndRejects) {
  ampc::ImportOptions options;
  std::string error;
  EXPECT_TRUE(ampc::parseInputBinding("shape=dir/input_1.pb", options, error));
  EXPECT_EQ(options.constantInputs["shape"], "dir/input_1.pb");
  // The path may hold '=' (only the first one splits).
  EXPECT_TRUE(ampc::parseInputBinding("k=a=b.pb", options, error));
  EXPECT_EQ(options.constantInputs["k"], "a=b.pb");
  EXPECT_FALSE(ampc::parseInputBinding("shape=", options, error));
  EXPECT_EQ(error, "--bind-input expects NAME=FILE.pb, got 'shape='");
  EXPECT_FALSE(ampc::parseInputBinding("=x.pb", options, error));
  EXPECT_FALSE(ampc::parseInputBinding("shape", options, error));
  EXPECT_EQ(options.constantInputs.size(), 2u);
}

} // namespace
