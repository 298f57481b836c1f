// Tests for src/kvprof/sim/sim_config.cpp: fault specs, loopback checks, validation, flags.
#include "kvprof/sim/sim_config.hpp"

#include <gtest/gtest.h>

namespace kvprof::sim {
namespace {

TEST(SimConfig, ParsesFaultSpecs) {
  auto reset = parse_fault_spec("reset;after=5");
  ASSERT_TRUE(reset.has_value());
  EXPECT_EQ(reset->kind, FaultKind::reset);
  EXPECT_EQ(reset->after_tokens, 5u);
  auto too_many = parse_fault_spec(" 429 ; retry_after=2.5");
  ASSERT_TRUE(too_many.has_value());
  EXPECT_EQ(too_many->kind, FaultKind::status_429);
  EXPECT_DOUBLE_EQ(too_many->seconds, 2.5);
  EXPECT_EQ(parse_fault_spec("stall;after=1;seconds=0.2")->kind, FaultKind::stall);
  EXPECT_EQ(parse_fault_spec("malformed")->kind, FaultKind::malformed_sse);
  EXPECT_EQ(parse_fault_spec("SLOW_FIRST_TOKEN")->kind, FaultKind::slow_first_token);
  EXPECT_EQ(parse_fault_spec("500")->kind, FaultKind::status_500);
  EXPECT_EQ(parse_fault_spec("503")->kind, FaultKind::status_503);
  EXPECT_FALSE(parse_fault_spec("explode").has_value());
  EXPECT_FALSE(parse_fault_spec("reset;after").has_value());
  EXPECT_FALSE(parse_fault_spec("reset;after=-1").has_value());
  EXPECT_FALSE(parse_fault_spec("stall;seconds=1e9").has_value());
  EXPECT_FALSE(parse_fault_spec("reset;color=red").has_value());
  EXPECT_EQ(fault_kind_name(FaultKind::malformed_sse), "malformed");
}

TEST(SimConfig, OnlyLoopbackHostsAreAccepted) {
  // The host check itself is kvprof::is_loopback_host (tests/unit/util_net_test.cpp).
  SimConfig c;
  c.host = "127.1.2.3";
  EXPECT_TRUE(validate_sim_config(c).has_value());
  c.host = "0.0.0.0";
  const auto bad = validate_sim_config(c);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().kind, ErrorKind::usage);
  c.host = "127.0.0.1.nip.io";
  EXPECT_FALSE(validate_sim_config(c).has_value());
}

TEST(SimConfig, RejectsMaxModelLenBeyondKvCapacity) {
  SimConfig c;
  c.num_gpu_blocks = 10;
  c.block_size = 16;
  c.max_model_len = 161;
  EXPECT_FALSE(validate_sim_config(c).has_value());
  c.max_model_len = 160;
  EXPECT_TRUE(validate_sim_config(c).has_value());
}

TEST(SimConfig, StepTimeAndMemoryModels) {
  SimConfig c;
  c.step_base_ms = 2;
  c.prefill_us_per_token = 1;
  c.decode_us_per_token = 10;
  EXPECT_DOUBLE_EQ(sim_step_ms(c, 1000, 100), 2 + 1.0 + 1.0);
  c.num_gpu_blocks = 100;
  c.kv_bytes_per_block = 1000;
  c.weights_bytes = 1;
  c.non_torch_bytes = 10;
  c.cuda_graph_bytes = 100;
  c.activation_bytes_per_token = 7;
  EXPECT_EQ(sim_used_bytes(c, 3, 0), 111u + 100000u);  // preallocated: all blocks
  EXPECT_EQ(sim_used_bytes(c, 3, 2), 111u + 100000u + 14u);
  c.kv_pool_mode = KvPoolMode::on_demand;
  EXPECT_EQ(sim_used_bytes(c, 3, 0), 111u + 3000u);
}

TEST(SimConfig, FromFlagsSizesTheCacheFromTheGpu) {
  SimFlags f;
  f.model = "m";
  f.gpu = "H100";
  f.weights_bytes = 16ULL << 30;
  f.kv_bytes_per_block = 2ULL << 20;
  auto c = sim_config_from_flags(f);
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_GT(c->total_bytes, 70ULL << 30);
  // The KV pool fits in 90% of the GPU with the fixed parts.
  EXPECT_LE(sim_used_bytes(*c, 0, c->max_num_batched_tokens), c->total_bytes * 9 / 10);
  EXPECT_GT(c->num_gpu_blocks, 20000u);
  EXPECT_EQ(c->max_model_len, 8192u);

  f.num_gpu_blocks = 64;
  f.tokens_per_s = 100;
  f.fault_kind = "reset;after=1";
  c = sim_config_from_flags(f);
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->num_gpu_blocks, 64u);
  EXPECT_EQ(c->max_model_len, 1024u);  // capped by the KV capacity
  EXPECT_DOUBLE_EQ(c->step_base_ms, 10.0);
  EXPECT_EQ(c->fault.kind, FaultKind::reset);
  EXPECT_DOUBLE_EQ(c->fault_rate, 1.0);

  f.engine = "sglang";
  EXPECT_FALSE(sim_config_from_flags(f).has_value());
  f.engine = "vllm";
  f.host = "192.168.1.1";
  EXPECT_FALSE(sim_config_from_flags(f).has_value());
  f.host = "127.0.0.1";
  f.gpu = "no-such-gpu";
  EXPECT_FALSE(sim_config_from_flags(f).has_value());
}

}  // namespace
}  // namespace kvprof::sim
