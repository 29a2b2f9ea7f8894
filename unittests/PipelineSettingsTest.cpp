//===- PipelineSettingsTest.cpp - every pipeline option declared once ------===//
//
// PipelineSettings::bindOptions is the one declaration of the pipeline's
// options (ampc/Support/OptionsBinder.h): a pass pipeline's options parse
// into the same fields the `ampc` flags do, the description lists each
// option once with its default, values outside an option's words are
// refused with the driver's message, and the defaults of the per-pass
// options in Passes.td (for running one pass in ampc-opt) are pinned to the
// pipeline's.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/PipelineSettings.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

namespace {

/// A pass pipeline's option struct bound to a PipelineSettings, as
/// ampc-opt's --ampc-pipeline builds it.
struct BoundOptions : public mlir::PassPipelineOptions<BoundOptions> {
  BoundOptions() { settings.bindOptions(binder); }
  ampc::PipelineSettings settings;
  ampc::OptionsBinder binder = ampc::OptionsBinder::passPipeline(*this);
};

TEST(PipelineSettings, PassPipelineOptionsFillTheFields) {
  BoundOptions parsed;
  ASSERT_TRUE(succeeded(parsed.parseFromString(
      "mode=infer lr=0.5 keep-fp32=op:Softmax,node:x nesterov=true "
      "weight-decay=0.25 accumulate=4 channels-last=on")));
  parsed.binder.apply();
  const ampc::PipelineSettings &s = parsed.settings;
  EXPECT_EQ(s.mode, "infer");
  EXPECT_EQ(s.lr, 0.5);
  EXPECT_EQ(s.keepFp32, (std::vector<std::string>{"op:Softmax", "node:x"}));
  EXPECT_TRUE(s.nesterov);
  ASSERT_TRUE(s.weightDecay.has_value());
  EXPECT_EQ(*s.weightDecay, 0.25);
  EXPECT_EQ(s.accumulate, 4);
  EXPECT_EQ(s.channelsLast, "on");
  // What was not given keeps the declaration's default, and an option
  // without one stays unset.
  EXPECT_EQ(s.precision, "fp16");
  EXPECT_EQ(s.beta2, 0.999);
  EXPECT_FALSE(s.huberDelta.has_value());
}

TEST(PipelineSettings, DescribedOnceEach) {
  ampc::PipelineSettings settings;
  ampc::OptionsBinder binder = ampc::OptionsBinder::describe();
  settings.bindOptions(binder);
  llvm::StringSet<> names;
  for (const ampc::OptionInfo &info : binder.options()) {
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_FALSE(info.spec.help.empty()) << info.name;
  }
  // Every field of PipelineSettings is an option (57 today, 6 of them
  // --precision=fp8's, --sync-batchnorm and --shard-optimizer: a new field
  // without a declaration would not reach either tool).
  EXPECT_EQ(binder.options().size(), 57u);
  auto find = [&](llvm::StringRef name) -> const ampc::OptionInfo & {
    for (const ampc::OptionInfo &info : binder.options())
      if (info.name == name)
        return info;
    ADD_FAILURE() << name.str();
    return binder.options().front();
  };
  EXPECT_EQ(find("lr").type, "float");
  EXPECT_EQ(find("lr").defaultJson, "0.001");
  EXPECT_EQ(find("eps").defaultJson, "1e-08");
  EXPECT_EQ(find("precision").defaultJson, "\"fp16\"");
  EXPECT_EQ(find("accumulate").type, "int");
  EXPECT_TRUE(find("freeze").list);
  EXPECT_TRUE(find("weight-decay").optional);
  EXPECT_EQ(find("mode").spec.choices,
            (std::vector<std::string>{"train", "infer"}));
  // The words of --loss are the ODS enum's.
  EXPECT_EQ(find("loss").spec.choices.front(), "cross_entropy");
  EXPECT_FALSE(find("target").spec.onCommandLine);
}

TEST(PipelineSettings, RefusesWordsOutsideTheDeclaration) {
  ampc::PipelineOptions options;
  std::string error;
  ampc::PipelineSettings settings;
  settings.precision = "fp4";
  EXPECT_FALSE(settings.toPipelineOptions(options, "--", error));
  EXPECT_EQ(error,
            "--precision must be fp16, bf16, fp32, fp64 or fp8, got 'fp4'");
  settings = {};
  settings.mode = "eval";
  EXPECT_FALSE(settings.toPipelineOptions(options, "", error));
  EXPECT_EQ(error, "mode must be train or infer, got 'eval'");
  settings = {};
  settings.optimizer = "lion";
  EXPECT_FALSE(settings.toPipelineOptions(options, "--", error));
  EXPECT_EQ(error, "--optimizer must be sgd, adam, adamw or none, got 'lion'");
  // fuse-attention also takes the old true/false.
  settings = {};
  settings.fuseAttention = "false";
  EXPECT_TRUE(settings.toPipelineOptions(options, "--", error)) << error;
  EXPECT_FALSE(options.fuseAttention);
  // --precision=fp8's own options only with it (issue 42).
  settings = {};
  settings.fp8Margin = 2;
  EXPECT_FALSE(settings.toPipelineOptions(options, "--", error));
  EXPECT_EQ(error, "--fp8-margin needs --precision=fp8, got --precision=fp16");
  settings.precision = "fp8";
  EXPECT_TRUE(settings.toPipelineOptions(options, "--", error)) << error;
  EXPECT_TRUE(options.fp8);
  EXPECT_EQ(options.precision.dtype, ampc::LowPrecisionType::BF16);
  EXPECT_EQ(options.fp8Options.margin, 2);
  EXPECT_EQ(options.fp8Options.amaxHistory, 1024);
  EXPECT_EQ(options.fp8Options.minGemm, int64_t(1) << 31);
  EXPECT_EQ(options.lossScaling.mode, ampc::LossScalingMode::None);
}

// Every float option the declaration lists is checked against f32's
// range (the library keeps it in f32), lists and set optionals too.
TEST(PipelineSettings, FloatOptionsFitF32) {
  ampc::PipelineOptions options;
  std::string error;
  ampc::PipelineSettings settings;
  settings.growthFactor = 1e39;
  EXPECT_FALSE(settings.toPipelineOptions(options, "--", error));
  EXPECT_EQ(error, "--growth-factor value 1e+39 is beyond f32, the type the "
                   "library keeps it in (largest 3.4028235e38)");
  settings = {};
  settings.classWeights = {1.0, 1e-50};
  EXPECT_FALSE(settings.toPipelineOptions(options, "", error));
  EXPECT_EQ(error, "class-weights value 1e-50 rounds to 0 in f32, the type "
                   "the library keeps it in (smallest 1.4e-45)");
  settings = {};
  settings.huberDelta = -1e40;
  EXPECT_FALSE(settings.toPipelineOptions(options, "--", error));
  EXPECT_EQ(error.rfind("--huber-delta value -1e+40 is beyond f32", 0), 0u)
      << error;
}

// Passes.td keeps options for running one pass alone in ampc-opt; their
// defaults are the pipeline's (docs/design.md, Options). A default changed
// on one side only fails here.
TEST(PipelineSettings, PassDefaultsAreThePipelines) {
  ampc::PipelineOptions options;
  std::string error;
  ASSERT_TRUE(ampc::PipelineSettings().toPipelineOptions(options, "--", error))
      << error;
  const ampc::AttachOptimizerPassOptions optimizer;
  EXPECT_EQ(options.optimizer.kind, optimizer.kind);
  EXPECT_EQ(options.optimizer.lr, optimizer.lr);
  EXPECT_EQ(options.optimizer.momentum, optimizer.momentum);
  EXPECT_EQ(options.optimizer.dampening, optimizer.dampening);
  EXPECT_EQ(options.optimizer.nesterov, optimizer.nesterov);
  EXPECT_EQ(options.optimizer.weightDecay, optimizer.weightDecay);
  EXPECT_EQ(options.optimizer.beta1, optimizer.beta1);
  EXPECT_EQ(options.optimizer.beta2, optimizer.beta2);
  EXPECT_EQ(options.optimizer.eps, optimizer.eps);
  EXPECT_EQ(options.optimizer.clipGradNorm, optimizer.clipGradNorm);
  const ampc::InsertLossScalingPassOptions scaling;
  // fp16's scaling is the pass's default mode.
  EXPECT_EQ(options.lossScaling.mode, scaling.mode);
  EXPECT_EQ(options.lossScaling.initScale, scaling.initScale);
  EXPECT_EQ(options.lossScaling.growthFactor, scaling.growthFactor);
  EXPECT_EQ(options.lossScaling.backoffFactor, scaling.backoffFactor);
  EXPECT_EQ(options.lossScaling.growthInterval, scaling.growthInterval);
  EXPECT_EQ(options.lossScaling.minScale, scaling.minScale);
  EXPECT_EQ(options.lossScaling.maxScale, scaling.maxScale);
  const ampc::AttachLossPassOptions loss;
  EXPECT_EQ(options.loss.loss, loss.loss);
  EXPECT_EQ(options.loss.label, loss.label);
  EXPECT_EQ(options.loss.ignoreIndex, loss.ignoreIndex);
  EXPECT_EQ(options.loss.labelSmoothing, loss.labelSmoothing);
  EXPECT_EQ(options.loss.softTargets, loss.softTargets);
  EXPECT_EQ(options.loss.huberDelta, loss.huberDelta);
  EXPECT_EQ(options.loss.smoothL1Beta, loss.smoothL1Beta);
  const ampc::AssignPrecisionPassOptions precision;
  EXPECT_EQ(options.precision.dtype, precision.dtype);
  EXPECT_EQ(options.precision.propagation, precision.propagation);
  EXPECT_EQ(options.accumulation.microBatches,
            ampc::AccumulateGradientsPassOptions().microBatches);
  EXPECT_EQ(options.maxTensorBytes, ampc::kDefaultMaxTensorBytes);
}

} // namespace
