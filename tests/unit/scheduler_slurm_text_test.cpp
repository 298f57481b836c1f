// What Slurm's commands print, read back: scontrol's Key=Value lines (values with blanks, "(null)",
// signals in ExitCode), squeue's lines, Slurm's job states as phases, and a job's GPU list. The
// lines are as Slurm 22.05 (Debian 12) printed them on the test cluster.
#include "kvprof/scheduler/slurm_text.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kvprof/scheduler/job_environment.hpp"

namespace kvprof::scheduler {
namespace {

TEST(SlurmText, ScontrolLinesGiveStateReasonNodeAndExitCode) {
  const auto jobs = parse_scontrol_jobs(
      "JobId=1 JobName=kvprof-test UserId=root(0) Account=(null) JobState=COMPLETED Reason=None "
      "ExitCode=0:0 NodeList=vm BatchHost=vm WorkDir=/tmp/a b StdErr=/tmp/j-1.out\n"
      "JobId=7 JobName=kvprof.grid.63bd JobState=PENDING Reason=Resources ExitCode=0:0 "
      "NodeList=(null)\n"
      "JobId=8 JobName=x JobState=CANCELLED by 0 Reason=None ExitCode=0:15 NodeList=vm\n"
      "JobId=9 JobName=y JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 NodeList=vm\n");
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 4U);
  const auto& done = jobs->at(0);
  EXPECT_EQ(done.id, "1");
  EXPECT_EQ(done.name, "kvprof-test");
  EXPECT_EQ(done.state, "COMPLETED");
  EXPECT_EQ(done.phase, JobPhase::ended);
  EXPECT_EQ(done.reason, "");  // "None" says nothing
  EXPECT_EQ(done.node, "vm");
  EXPECT_TRUE(done.ended_by_itself());
  const auto& pending = jobs->at(1);
  EXPECT_EQ(pending.phase, JobPhase::pending);
  EXPECT_EQ(pending.reason, "Resources");
  EXPECT_EQ(pending.node, "");  // "(null)"
  const auto& cancelled = jobs->at(2);
  EXPECT_EQ(cancelled.state, "CANCELLED");
  EXPECT_EQ(cancelled.exit_code, 128 + 15);
  EXPECT_FALSE(cancelled.ended_by_itself());
  EXPECT_EQ(jobs->at(3).exit_code, 3);
  EXPECT_TRUE(jobs->at(3).ended_by_itself());

  EXPECT_FALSE(parse_scontrol_jobs("JobName=x JobState=RUNNING\n").has_value());
  EXPECT_TRUE(parse_scontrol_jobs("No jobs in the system\n")->empty());
}

TEST(SlurmText, SqueueLinesAndTheirPhases) {
  const auto jobs = parse_squeue_jobs(
      "5|kvprof.grid.63bd|PENDING||Priority\n6|kvprof.grid.3d80|RUNNING|vm|None\n"
      "7|kvprof.grid.aaaa|COMPLETING|vm|reason|with a bar\n");
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 3U);
  EXPECT_EQ(jobs->at(0).phase, JobPhase::pending);
  EXPECT_EQ(jobs->at(0).reason, "Priority");
  EXPECT_EQ(jobs->at(1).phase, JobPhase::running);
  EXPECT_EQ(jobs->at(1).node, "vm");
  EXPECT_EQ(jobs->at(2).phase, JobPhase::running);
  EXPECT_EQ(jobs->at(2).reason, "reason|with a bar");
  EXPECT_FALSE(parse_squeue_jobs("5|name\n").has_value());
  EXPECT_TRUE(parse_squeue_jobs("")->empty());
  for (const char* s : {"OUT_OF_MEMORY", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                        "DEADLINE", "COMPLETED", "FAILED"})
    EXPECT_EQ(slurm_phase(s), JobPhase::ended) << s;
}

TEST(JobEnvironment, GpuListsAreSmallNumbersOnly) {
  EXPECT_EQ(gpu_index_list("0,2,3"), (std::vector<unsigned>{0, 2, 3}));
  EXPECT_EQ(gpu_index_list("1"), (std::vector<unsigned>{1}));
  for (const char* bad : {"", "GPU-5c3e7a2b", "0,,1", "0,", "-1", "1 ,2", "99999"})
    EXPECT_FALSE(gpu_index_list(bad).has_value()) << bad;
}

// A process inside a Slurm job of two nodes: its node, the job's nodes, and the step that runs
// a program on each of them; a job of one node has no such step.
TEST(JobEnvironment, AJobOfSeveralNodesSaysHowToRunOnEach) {
  const std::vector<std::pair<const char*, const char*>> vars = {{"SLURM_JOB_ID", "41"},
                                                                 {"SLURM_JOB_NUM_NODES", "2"},
                                                                 {"SLURMD_NODENAME", "gpu-b7"},
                                                                 {"SLURM_JOB_GPUS", "2,3"}};
  // Unset again however the test ends (the variables would make later tests' kvprof a job's).
  struct Unset {
    const std::vector<std::pair<const char*, const char*>>& vars;
    ~Unset() {
      for (const auto& [name, value] : vars)
        ::unsetenv(name);
    }
  } unset{vars};
  for (const auto& [name, value] : vars)
    ::setenv(name, value, 1);
  auto job = current_job();
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->job_id, "41");
  EXPECT_EQ(job->node, "gpu-b7");
  EXPECT_EQ(job->nodes, 2U);
  EXPECT_EQ(job->gpus, (std::vector<unsigned>{2, 3}));
  ASSERT_GE(job->every_node_prefix.size(), 4U);
  EXPECT_EQ(job->every_node_prefix[0], "srun");
  EXPECT_NE(std::ranges::find(job->every_node_prefix, "--overlap"), job->every_node_prefix.end());
  EXPECT_NE(std::ranges::find(job->every_node_prefix, "--ntasks-per-node=1"),
            job->every_node_prefix.end());
  EXPECT_NE(std::ranges::find(job->every_node_prefix, "--nodes=2"), job->every_node_prefix.end());
  for (const char* one : {"1", "", "two", "0"}) {
    ::setenv("SLURM_JOB_NUM_NODES", one, 1);
    job = current_job();
    ASSERT_TRUE(job.has_value());
    EXPECT_EQ(job->nodes, 1U) << one;
    EXPECT_TRUE(job->every_node_prefix.empty()) << one;
  }
}

}  // namespace
}  // namespace kvprof::scheduler
