// sweep_eta_s: the sweep's ETA follows the pace measured so far — from the first condition of the
// first configuration on, not only after whole configurations.
#include <gtest/gtest.h>

#include "kvprof/experiment/sweep_runner.hpp"

namespace kvprof::experiment {
namespace {

TEST(SweepEta, BeforeAnythingEndedItIsThePlanLessTheTimeUsed) {
  EtaInputs in;
  in.expected_left_s = 133;  // the plan: 2 min 13 s
  in.running_expected_s = 70;
  in.running_elapsed_s = 3;
  EXPECT_DOUBLE_EQ(sweep_eta_s(in), 130);
  in.running_elapsed_s = 500;
  EXPECT_DOUBLE_EQ(sweep_eta_s(in), 0);  // never negative
}

TEST(SweepEta, TheFirstConditionRescalesTheRest) {
  // The plan gave the first condition 10 s; it took 1 s: the other 123 s are 12.3 s.
  EtaInputs in;
  in.expected_left_s = 133;
  in.running_expected_s = 70;
  in.condition_expected_s = 10;
  in.condition_actual_s = 1;
  EXPECT_NEAR(sweep_eta_s(in), 12.3, 1e-9);
}

TEST(SweepEta, FinishedConfigurationsAndConditionsCountTogether) {
  // One configuration expected 60 s took 30 s; in the next, conditions expected 10 s took 20 s:
  // 50 s for 70 s of plan, so the 40 s of plan left are 40 * 50/70.
  EtaInputs in;
  in.expected_left_s = 50;
  in.expected_ran_s = 60;
  in.actual_ran_s = 30;
  in.condition_expected_s = 10;
  in.condition_actual_s = 20;
  EXPECT_NEAR(sweep_eta_s(in), 40.0 * 50.0 / 70.0, 1e-9);
  // Without a condition ended yet, the configurations' pace alone (half the plan).
  in.condition_expected_s = 0;
  in.condition_actual_s = 0;
  in.running_elapsed_s = 5;
  EXPECT_NEAR(sweep_eta_s(in), 50 * 0.5 - 5, 1e-9);
}

}  // namespace
}  // namespace kvprof::experiment
