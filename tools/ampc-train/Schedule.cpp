//===- Schedule.cpp - learning-rate schedules of ampc-train ---------------===//

#include "Schedule.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace ampc::train;

namespace {
const double kPi = 3.14159265358979323846;

std::vector<std::string> split(const std::string &s, char by) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = s.find(by, start)) != std::string::npos; start = at + 1)
    parts.push_back(s.substr(start, at - start));
  parts.push_back(s.substr(start));
  return parts;
}

bool number(const std::string &text, double &out) {
  char *end = nullptr;
  errno = 0;
  out = std::strtod(text.c_str(), &end);
  return !text.empty() && !*end && !errno && std::isfinite(out);
}

bool count(const std::string &text, int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  out = v;
  return !text.empty() && !*end && !errno && v >= 0;
}

/// torch.optim.lr_scheduler's _annealing_cos.
double annealCos(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1);
}
} // namespace

double Schedule::rate(double base, int64_t t) const {
  switch (kind) {
  case Constant:
    return base;
  case Step:
    return base * std::pow(gamma, double(t / stepSize));
  case MultiStep:
    return base * std::pow(gamma, double(std::upper_bound(milestones.begin(),
                                                          milestones.end(), t) -
                                         milestones.begin()));
  case Exponential:
    return base * std::pow(gamma, double(t));
  case Cosine:
    if (t < warmup)
      return base * (startFactor + (1 - startFactor) * double(t) / double(warmup));
    return etaMin + (base - etaMin) *
                        (1 + std::cos(kPi * double(t - warmup) / double(tMax))) / 2;
  case OneCycle: {
    double initial = maxLr / divFactor, minimum = initial / finalDivFactor;
    double phaseEnd = pctStart * double(totalSteps) - 1;
    if (double(t) <= phaseEnd)
      return annealCos(initial, maxLr, double(t) / phaseEnd);
    return annealCos(maxLr, minimum,
                     (double(t) - phaseEnd) / (double(totalSteps - 1) - phaseEnd));
  }
  }
  return base;
}

bool ampc::train::parseSchedule(const std::string &spec, Schedule &s,
                                std::string &error) {
  std::vector<std::string> p = split(spec, ':');
  const std::string &name = p[0];
  auto bad = [&](const std::string &why) {
    error = "option --lr-schedule '" + spec + "': " + why;
    return false;
  };
  auto arity = [&](size_t least, size_t most, const char *form) {
    if (p.size() - 1 < least || p.size() - 1 > most)
      return bad(std::string("expected ") + form);
    return true;
  };
  if (name == "step") {
    s.kind = Schedule::Step;
    if (!arity(1, 2, "step:STEP_SIZE[:GAMMA]"))
      return false;
    if (!count(p[1], s.stepSize) || s.stepSize < 1)
      return bad("STEP_SIZE must be an integer >= 1");
    if (p.size() > 2 && (!number(p[2], s.gamma) || s.gamma < 0))
      return bad("GAMMA must be a number >= 0");
  } else if (name == "multistep") {
    s.kind = Schedule::MultiStep;
    if (!arity(1, 2, "multistep:M1,M2,...[:GAMMA]"))
      return false;
    for (const std::string &m : split(p[1], ',')) {
      int64_t v;
      if (!count(m, v))
        return bad("milestone '" + m + "' is not an integer >= 0");
      if (!s.milestones.empty() && v <= s.milestones.back())
        return bad("milestones must increase");
      s.milestones.push_back(v);
    }
    if (p.size() > 2 && (!number(p[2], s.gamma) || s.gamma < 0))
      return bad("GAMMA must be a number >= 0");
  } else if (name == "exponential") {
    s.kind = Schedule::Exponential;
    if (!arity(1, 1, "exponential:GAMMA"))
      return false;
    if (!number(p[1], s.gamma) || s.gamma < 0)
      return bad("GAMMA must be a number >= 0");
  } else if (name == "cosine") {
    s.kind = Schedule::Cosine;
    if (!arity(1, 4, "cosine:T_MAX[:ETA_MIN[:WARMUP[:START_FACTOR]]]"))
      return false;
    if (!count(p[1], s.tMax) || s.tMax < 1)
      return bad("T_MAX must be an integer >= 1");
    if (p.size() > 2 && (!number(p[2], s.etaMin) || s.etaMin < 0 ||
                         !std::isfinite(float(s.etaMin))))
      return bad("ETA_MIN must be a number >= 0 that fits in f32");
    if (p.size() > 3 && !count(p[3], s.warmup))
      return bad("WARMUP must be an integer >= 0");
    if (p.size() > 4 && (!number(p[4], s.startFactor) || s.startFactor <= 0 ||
                         s.startFactor > 1))
      return bad("START_FACTOR must be in (0, 1]");
  } else if (name == "onecycle") {
    s.kind = Schedule::OneCycle;
    if (!arity(2, 5, "onecycle:MAX_LR:TOTAL_STEPS[:PCT_START[:DIV_FACTOR[:FINAL_DIV_FACTOR]]]"))
      return false;
    if (!number(p[1], s.maxLr) || s.maxLr <= 0 ||
        !std::isfinite(float(s.maxLr)))
      return bad("MAX_LR must be a number > 0 that fits in f32");
    if (!count(p[2], s.totalSteps) || s.totalSteps < 2)
      return bad("TOTAL_STEPS must be an integer >= 2");
    if (p.size() > 3 && (!number(p[3], s.pctStart) || s.pctStart <= 0 ||
                         s.pctStart >= 1))
      return bad("PCT_START must be in (0, 1)");
    if (p.size() > 4 && (!number(p[4], s.divFactor) || s.divFactor <= 0))
      return bad("DIV_FACTOR must be a number > 0");
    if (p.size() > 5 && (!number(p[5], s.finalDivFactor) || s.finalDivFactor <= 0))
      return bad("FINAL_DIV_FACTOR must be a number > 0");
    double phaseEnd = s.pctStart * double(s.totalSteps) - 1;
    if (phaseEnd <= 0 || phaseEnd >= double(s.totalSteps - 1))
      return bad("PCT_START * TOTAL_STEPS leaves a phase without steps");
  } else {
    return bad("unknown schedule '" + name +
               "' (step, multistep, exponential, cosine, onecycle)");
  }
  return true;
}

bool ampc::train::checkScheduleRange(const Schedule &s, const std::string &spec,
                                     double base, int64_t first, int64_t last,
                                     std::string &error) {
  // A rate is stored as an f32: it must stay finite and >= 0 in f32. Every
  // schedule moves monotonically between its ends, except cosine and
  // onecycle, which stay between their ends and base/ETA_MIN and MAX_LR.
  auto fits = [](double rate) {
    return rate >= 0 && std::isfinite(float(rate));
  };
  if (s.kind == Schedule::Constant || last < first)
    return true;
  if (fits(s.rate(base, first)) && fits(s.rate(base, last)))
    return true;
  // The first step whose rate does not fit (the rate is monotone).
  bool firstFits = fits(s.rate(base, first));
  int64_t lo = first, hi = last;
  while (firstFits && hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    (fits(s.rate(base, mid)) ? lo : hi) = mid;
  }
  int64_t at = firstFits ? hi : first;
  char rate[32];
  std::snprintf(rate, sizeof rate, "%g", s.rate(base, at));
  error = "option --lr-schedule '" + spec + "': from the base rate, the rate "
          "of optimizer step " + std::to_string(at + 1) + " of this run is " +
          rate + ", beyond the f32 it is stored in (largest 3.4e38)";
  return false;
}
