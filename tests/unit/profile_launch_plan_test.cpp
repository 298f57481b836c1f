// Tests for src/kvprof/profile/launch_plan.cpp's plan_from_props: a llama.cpp server at an
// endpoint planned from what its /props states, its slots' cache told apart where it can be.
#include "kvprof/profile/launch_plan.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/serve_process.hpp"

namespace kvprof::profile {
namespace {

namespace fs = std::filesystem;

class PlanFromProps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = fs::temp_directory_path() / ("kvprof_props_plan_" + std::to_string(::getpid()));
    fs::create_directories(s_dir);
    s_ok = test::write_dummy_llama(s_dir / "tiny.gguf");
  }
  static void TearDownTestSuite() { fs::remove_all(s_dir); }

  // /props of a llama-server with `slots` slots of `slot_ctx` tokens.
  static PropsFacts props(uint32_t slots, uint64_t slot_ctx) {
    PropsFacts p;
    p.model_path = (s_dir / "tiny.gguf").string();
    p.total_slots = slots;
    p.slot_context_tokens = slot_ctx;
    return p;
  }
  static workload::GridOptions grid() {
    workload::GridOptions g;
    g.input_lens = {64};
    g.output_lens = {16};
    g.concurrencies = {1, 4};
    return g;
  }
  static uint64_t kv_cells(const LaunchPlan& p) { return p.estimate.engine_report.kv_cache_tokens; }

  static inline fs::path s_dir;
  static inline bool s_ok = false;
};

TEST_F(PlanFromProps, SplitSlotsUnlessTheServerSaysOtherwiseAndTheNoteSaysSo) {
  ASSERT_TRUE(s_ok);
  // A real llama-server's /props: 4 slots of 512 tokens, which -c 2048 -np 4 and -c 512 -np 4
  // -kvu both answer. The plan is of split slots (the larger cache) and says what a shared one
  // would be.
  const auto plan = plan_from_props(props(4, 512), grid(), nullptr, 0);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(kv_cells(*plan), 2048U);
  EXPECT_EQ(plan->estimate.engine_report.max_model_len, 512U);  // each slot's context
  ASSERT_EQ(plan->notes.size(), 1U);
  EXPECT_NE(plan->notes[0].find("a shared cache would hold 512 cells"), std::string::npos)
      << plan->notes[0];
  EXPECT_EQ(plan->flags, "the server's /props (tiny.gguf; 4 slots of 512 tokens, split)");

  // kvprof serve states its cells: one cache of 512 shared by the 4 slots.
  auto shared = props(4, 512);
  shared.context_tokens = 512;
  const auto s = plan_from_props(shared, grid(), nullptr, 0);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(kv_cells(*s), 512U);
  EXPECT_EQ(s->estimate.engine_report.max_model_len, 512U);
  EXPECT_TRUE(s->notes.empty());

  // Or its KV buffer does: the plan whose cache is that size.
  auto by_buffer = props(4, 512);
  enginelog::EngineLogReport buffers;
  enginelog::MemoryFigure kv;
  kv.component = enginelog::Component::kv_cache;
  kv.device = "CPU";
  kv.size.bytes = s->estimate.engine_report.available_kv_cache_bytes;
  buffers.figures.push_back(kv);
  by_buffer.buffers = buffers;
  const auto b = plan_from_props(by_buffer, grid(), nullptr, 0);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(kv_cells(*b), 512U);
  EXPECT_NE(b->flags.find("one shared cache (from its KV buffer)"), std::string::npos) << b->flags;
}

TEST_F(PlanFromProps, NoPlanWithoutALocalModelOrASlotContext) {
  ASSERT_TRUE(s_ok);
  auto remote = props(1, 4096);
  remote.model_path = "/models/elsewhere.gguf";
  const auto r = plan_from_props(remote, grid(), nullptr, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::not_found);
  EXPECT_NE(r.error().message.find("not on this host"), std::string::npos) << r.error().message;
  auto no_ctx = props(1, 4096);
  no_ctx.slot_context_tokens.reset();
  EXPECT_FALSE(plan_from_props(no_ctx, grid(), nullptr, 0));
  // One slot: its context is the cache.
  const auto one = plan_from_props(props(1, 1024), grid(), nullptr, 0);
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(kv_cells(*one), 1024U);
}

// The server's release, from /props's build_info or what llama-server --version says, is the
// release the plan follows: b5640 had flash attention off by default and one slot.
TEST_F(PlanFromProps, TheServersReleaseIsPlanned) {
  ASSERT_TRUE(s_ok);
  auto p = props(1, 4096);
  p.build = "b5640-2e89f76";
  const auto plan = plan_from_props(p, grid(), nullptr, 0);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->assumptions.at("engine_version_modelled"), "b5640");
  EXPECT_EQ(plan->assumptions.at("settings").at("flash_attn").at("value"), "off");

  // llama-server --version prints "version: N (commit)" and its compiler on stderr.
  const fs::path bin = s_dir / "bin";
  fs::create_directories(bin);
  {
    std::ofstream script(bin / "llama-server");
    script << "#!/bin/sh\necho 'version: 5640 (2e89f76)' >&2\n"
              "echo 'built with cc (Debian 12.2.0-14) 12.2.0 for x86_64-linux-gnu' >&2\n";
  }
  fs::permissions(bin / "llama-server", fs::perms::owner_all);
  const auto launched = plan_from_launch(
      (bin / "llama-server").string() + " -m " + (s_dir / "tiny.gguf").string() + " -c 4096",
      grid(), nullptr, 0);
  ASSERT_TRUE(launched) << launched.error().message;
  EXPECT_EQ(launched->assumptions.at("engine_version_modelled"), "b5640");
  EXPECT_EQ(launched->estimate.settings.n_parallel, 1U);  // no 4 slots before b6925
  // A server that does not answer --version is planned at the newest release.
  const auto plain =
      plan_from_launch("llama-server -m " + (s_dir / "tiny.gguf").string(), grid(), nullptr, 0);
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(plain->assumptions.at("engine_version_modelled"), "v0.5.0 (b11146)");
}

}  // namespace
}  // namespace kvprof::profile
