// Tests for src/kvprof/profile/summary.cpp: the request totals of a run, sent and planned counted
// apart.
#include "kvprof/profile/summary.hpp"

#include <gtest/gtest.h>

namespace kvprof::profile {
namespace {

TEST(RequestTotals, SentWithRepeatsIsNeverSetAgainstThePlan) {
  ProfileReport r;
  r.n_planned_requests = 5500;
  ConditionReport c;
  c.requests.n_requests = 16800;  // 11300 of them repeats to fill --min-condition-s
  c.requests.n_repeated = 11300;
  c.requests.n_ok = 16771;
  c.requests.n_cancelled = 29;
  r.conditions.push_back(c);
  const RequestTotals t = request_totals(r);
  EXPECT_EQ(t.n_planned, 5500U);
  EXPECT_EQ(t.n_not_sent, 0U);
  EXPECT_EQ(t.n_repeated, 11300U);
  EXPECT_EQ(request_totals_text(t),
            "16771 of 16800 requests sent completed (11300 sent again to fill "
            "--min-condition-s), 0 failed, 29 cancelled; 0 of the 5500 planned not sent");
}

}  // namespace
}  // namespace kvprof::profile
