//===- Schedule.h - learning-rate schedules of ampc-train ------*- C++ -*-===//
//
// PyTorch's torch.optim.lr_scheduler semantics, as closed forms of the
// number of optimizer steps taken (skipped steps not counted, as with
// GradScaler, which skips optimizer.step()).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TRAIN_SCHEDULE_H
#define AMPC_TRAIN_SCHEDULE_H

#include <cstdint>
#include <string>
#include <vector>

namespace ampc::train {

struct Schedule {
  enum Kind { Constant, Step, MultiStep, Exponential, Cosine, OneCycle };
  Kind kind = Constant;
  double gamma = 0.1;
  int64_t stepSize = 1;
  std::vector<int64_t> milestones;
  // cosine: CosineAnnealingLR(T_max, eta_min) after `warmup` steps of
  // LinearLR(start_factor, total_iters=warmup) (SequentialLR).
  int64_t tMax = 1, warmup = 0;
  double etaMin = 0, startFactor = 1.0 / 3.0;
  // onecycle: OneCycleLR(max_lr, total_steps, pct_start, anneal_strategy
  // "cos", div_factor, final_div_factor), without momentum cycling.
  double maxLr = 0, pctStart = 0.3, divFactor = 25, finalDivFactor = 1e4;
  int64_t totalSteps = 0;

  /// The learning rate of the step after `steps` optimizer steps, from the
  /// base rate `base` (the library's, or --lr).
  double rate(double base, int64_t steps) const;
};

/// Parses --lr-schedule's value (see ampc-train --help); false with `error`.
bool parseSchedule(const std::string &spec, Schedule &out, std::string &error);

/// Whether the rates of optimizer steps `first`..`last` (counted from 0)
/// from the base rate `base` fit in the library's f32 rate (finite, >= 0);
/// false with `error` naming the first step that does not. Checked before
/// the first step, so that a schedule fails at the start, not in a setter
/// after a while.
bool checkScheduleRange(const Schedule &s, const std::string &spec,
                        double base, int64_t first, int64_t last,
                        std::string &error);

} // namespace ampc::train

#endif // AMPC_TRAIN_SCHEDULE_H
