//===- DriverTest.cpp - the driver library and the artifact ---------------===//
//
// The artifact's text form (Artifact.h) and the driver's steps
// (ampc/Driver/Driver.h): the model file read once, the emitter's pieces
// the ones the compile used to cut out of the text (so the compile
// cache's keys did not change).
//
//===----------------------------------------------------------------------===//

#include "ampc/Driver/Driver.h"

#include "ampc/Import/OnnxModel.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using ampc::Artifact;
using ampc::emit::kDataMarker;
using ampc::emit::kPieceMarker;

namespace {

void expectSame(const Artifact &a, const Artifact &b) {
  EXPECT_EQ(a.shared, b.shared);
  EXPECT_EQ(a.pieces, b.pieces);
  EXPECT_EQ(a.data, b.data);
}

TEST(ArtifactTest, TextFormHasTheMarkers) {
  Artifact a;
  a.shared = "#include \"k.h\"\nint p0();\nint p1();\n\n";
  a.pieces = {"int p0() {}\n\n", "int p1() {}\n\n", "int main() {}\n\n"};
  a.data = "\nconst int size = 3;\n";
  std::string m = (kPieceMarker + "\n").str();
  EXPECT_EQ(a.text(), a.shared + m + a.pieces[0] + m + a.pieces[1] + m +
                          a.pieces[2] + kDataMarker.str() + *a.data);
  expectSame(Artifact::parse(a.text()), a);
}

TEST(ArtifactTest, OnePieceHasNoMarker) {
  Artifact a;
  a.pieces = {"int main() {}\n"};
  EXPECT_EQ(a.text(), "int main() {}\n");
  expectSame(Artifact::parse(a.text()), a);
  a.data = "\nint d;\n";
  EXPECT_EQ(a.text(), "int main() {}\n" + kDataMarker.str() + "\nint d;\n");
  expectSame(Artifact::parse(a.text()), a);
}

TEST(ArtifactTest, SeveralDataMarkersAreOneTranslationUnit) {
  // Two models' sources combined: compiled whole, the markers comments.
  std::string one = "int a;\n" + kDataMarker.str() + "\nint d;\n";
  Artifact combined = Artifact::parse(one + one);
  EXPECT_FALSE(combined.data);
  ASSERT_EQ(combined.pieces.size(), 1u);
  EXPECT_EQ(combined.pieces[0], one + one);
  // A marker that does not start a line is no marker.
  Artifact inLine = Artifact::parse("int a; " + kDataMarker.str() + "\n");
  EXPECT_FALSE(inLine.data);
}

constexpr const char *kMlp = R"(
<ir_version: 8, opset_import: ["" : 17]>
mlp (float[N, 4] x, float[3, 4] w = {1.,2.,3.,4.,5.,6.,7.,8.,9.,10.,11.,12.}) => (float[N, 3] y)
{
  t = Gemm <transB: int = 1> (x, w)
  y = Relu (t)
}
)";

class DriverTest : public ::testing::Test {
protected:
  DriverTest() : context(registry()) {}
  static mlir::DialectRegistry registry() {
    mlir::DialectRegistry r;
    ampc::registerAllDialects(r);
    return r;
  }
  mlir::MLIRContext context;
};

TEST_F(DriverTest, ModelFileReadOnce) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(
      llvm::sys::fs::createTemporaryFile("ampc-driver", "onnxtext", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(path, ec);
    ASSERT_FALSE(ec);
    out << kMlp;
  }
  ampc::ImportOptions options;
  options.batch = 2;
  ampc::Model model;
  ASSERT_TRUE(ampc::loadModel(context, path, options, model));
  // Everything after the import works from the bytes kept.
  llvm::sys::fs::remove(path);
  std::string bytes, error;
  ASSERT_TRUE(ampc::embeddedModel(model, /*keepTied=*/false, bytes, error))
      << error;
  onnx::ModelProto embedded;
  ASSERT_TRUE(ampc::parseOnnxModel(bytes, "embedded.onnx", embedded, error));
  EXPECT_EQ(embedded.graph().node_size(), 2);

  ampc::PipelineOptions pipeline;
  ASSERT_TRUE(succeeded(ampc::runPipeline(
      *model.module, pipeline, ampc::PipelinePart::Graph, error)))
      << error;
  onnx::ModelProto exported;
  std::vector<std::string> warnings;
  ASSERT_TRUE(ampc::exportModel(model, *model.module, exported, error,
                                warnings))
      << error;
  // The Gemm and the Relu, and the casts of their fp16 decisions.
  EXPECT_GT(exported.graph().node_size(), 2);
}

TEST_F(DriverTest, EmittedPiecesAreTheTextFormsPieces) {
  ampc::Model model;
  model.path = "mlp.onnxtext";
  model.bytes = kMlp;
  ampc::ImportOptions options;
  options.batch = 2;
  ASSERT_TRUE(ampc::importModel(context, model, options));
  ampc::PipelineOptions pipeline;
  std::string error;
  ASSERT_TRUE(succeeded(ampc::runPipeline(
      *model.module, pipeline, ampc::PipelinePart::All, error)))
      << error;
  ampc::LibraryOptions library;
  library.parameterFile = "/nonexistent/mlp.params.bin";
  library.pieceBytes = 1; // every op a piece of its own
  std::optional<Artifact> artifact =
      ampc::emitArtifact(*model.module, ampc::Target::Cpu, library);
  ASSERT_TRUE(artifact);
  EXPECT_GT(artifact->pieces.size(), 1u);
  EXPECT_FALSE(artifact->shared.empty());
  ASSERT_TRUE(artifact->data);
  EXPECT_EQ(artifact->parameterFile, library.parameterFile);
  EXPECT_GE(artifact->parameters.size(), 12u * 2); // w, in fp16 or fp32
  // What the compile used to cut out of the text (its cache keys are the
  // shared code and each piece): the emitter's own pieces.
  expectSame(Artifact::parse(artifact->text()), *artifact);
  for (const std::string &piece : artifact->pieces)
    EXPECT_EQ(llvm::StringRef(piece).find("// ---- ampc:"), llvm::StringRef::npos);
}

} // namespace
