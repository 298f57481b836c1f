// Test-only: a fixture with the in-process simulated vLLM (kvprof serve-sim's engine) for tests
// that drive `kvprof profile` against it: a fresh folder per test (TempDirTest) and the server
// stopped afterwards.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "kvprof/sim/sim_server.hpp"
#include "support/temp_dir.hpp"

namespace kvprof::test {

class SimServerTest : public TempDirTest {
 protected:
  using TempDirTest::TempDirTest;
  void TearDown() override {
    if (m_server) m_server->stop();
    TempDirTest::TearDown();
  }

  // A small simulated vLLM whose KV pool shows in GPU memory as it fills (written to live.txt in
  // m_dir, which the tests' fake NVML reads): 2048 blocks of 16 tokens, 4 MiB each, on an 80 GiB
  // GPU holding 8 GiB of weights; each engine step takes `step_base_ms` plus its work.
  [[nodiscard]] sim::SimConfig small_vllm(double step_base_ms) const {
    sim::SimConfig c;
    c.model = "sim-model";
    c.num_gpu_blocks = 2048;
    c.block_size = 16;
    c.max_model_len = 4096;
    c.total_bytes = 80ULL << 30;
    c.weights_bytes = 8ULL << 30;
    c.kv_bytes_per_block = 4ULL << 20;
    c.kv_pool_mode = sim::KvPoolMode::on_demand;
    c.step_base_ms = step_base_ms;
    c.live_state_path = (m_dir / "live.txt").string();
    c.live_state_min_interval_ms = 1.0;
    c.quiet = true;
    return c;
  }

  // Starts the simulator with `config` (a test failure when it cannot).
  void start_server(const sim::SimConfig& config) {
    auto s = sim::SimServer::start(config);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    m_server = std::move(*s);
  }

  std::unique_ptr<sim::SimServer> m_server;
};

}  // namespace kvprof::test
