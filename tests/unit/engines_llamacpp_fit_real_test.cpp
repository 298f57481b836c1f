// kvprof's --fit against llama.cpp's own: common_fit_params of the real libllama-common in npm's
// v0.5.0 and v0.4.0 builds (tests/llama_c_api/llama_fit_report.cpp), run on this machine's CPU
// build, where it fits the context of a model to the host's physical memory by dry runs. A model
// of 4 layers whose KV cache is 64 KiB a token and 64 GiB at its 1,048,576-token context: the
// context llama.cpp chooses for each --fit-target and --fit-ctx is the one kvprof plans, and every
// line kvprof says the fit logs is one llama.cpp logged.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kvprof/engines/registry.hpp"
#include "kvprof/model/resolve.hpp"
#include "kvprof/sys/host_info.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;

struct RealFit {
  int status = -1;  // 0 fitted, 1 failed, 2 error
  uint32_t n_ctx = 0;
  std::set<std::string> lines;  // every line llama.cpp logged
  std::string output;
};

RealFit real_fit(const fs::path& release_dir, const fs::path& gguf, uint64_t target_mib,
                 uint32_t n_ctx_min) {
  sys::CommandOptions o;
  o.timeout = std::chrono::seconds(120);
  o.env = {{"LD_LIBRARY_PATH", release_dir.string()}};
  auto r = sys::run_command({KVPROF_LLAMA_FIT_REPORT, release_dir.string(), gguf.string(),
                             std::to_string(target_mib << 20), std::to_string(n_ctx_min)},
                            o);
  RealFit out;
  if (!r) return out;
  out.output = r->stderr_text + r->stdout_text;
  std::istringstream in(out.output);
  for (std::string line; std::getline(in, line);) {
    out.lines.insert(line);
    unsigned n = 0;
    if (std::sscanf(line.c_str(), "kvprof-fit-report: status %d n_ctx %u", &out.status, &n) == 2)
      out.n_ctx = n;
  }
  return out;
}

class LlamaCppFitReal : public test::TempDirTest {
 protected:
  LlamaCppFitReal() : TempDirTest("kvprof_fit_real") {}
};

TEST_F(LlamaCppFitReal, TheHostContextIsTheOneLlamaCppChooses) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(installed);
  std::vector<std::pair<const char*, fs::path>> releases = {{"v0.5.0", *installed}};
  const fs::path v040 = fs::path(KVPROF_SOURCE_DIR) / ".deps/llama/releases/3.21.1";
  if (fs::exists(v040 / ".complete")) {
    releases.emplace_back("v0.4.0", v040);
  } else if (test::llama_required()) {
    FAIL() << "3.21.1 missing: run scripts/fetch_llama_releases.sh";
  }
  const fs::path config = m_dir / "config.json";
  std::ofstream(config) << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 1024, "num_hidden_layers": 4,
    "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128,
    "vocab_size": 32000, "max_position_embeddings": 1048576, "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0, "torch_dtype": "bfloat16", "tie_word_embeddings": false})";
  const fs::path gguf = m_dir / "long.gguf";
  sys::CommandOptions o;
  o.timeout = std::chrono::seconds(120);
  auto made = sys::run_command(
      {KVPROF_BIN, "make-gguf", "-m", config.string(), "-o", gguf.string(), "--type", "q8_0"}, o);
  ASSERT_TRUE(made && made->exit_code == 0) << (made ? made->stderr_text : "");
  const auto model = model::load_model(gguf.string());
  ASSERT_TRUE(model.has_value()) << model.error().message;
  const uint64_t host_bytes = sys::read_mem_info().total_bytes.value_or(0);
  ASSERT_GT(host_bytes, 0U);

  struct Case {
    uint64_t target_mib;
    uint32_t n_ctx_min;
  };
  // The context lowered by interpolation; a target that needs the context at its floor; one that
  // not even the floor meets (llama.cpp gives up).
  const uint64_t host_mib = host_bytes >> 20;
  const std::vector<Case> cases = {{1024, 4096}, {4096, 16384}, {host_mib - 200, 4096}};
  for (const auto& [release, dir] : releases) {
    for (const auto& c : cases) {
      const std::string what = std::string(release) + " --fit-target " +
                               std::to_string(c.target_mib) + " --fit-ctx " +
                               std::to_string(c.n_ctx_min);
      const RealFit real = real_fit(dir, gguf, c.target_mib, c.n_ctx_min);
      ASSERT_TRUE(real.status == 0 || real.status == 1) << what << ": " << real.output;
      estimate::EstimateInput in;
      in.model = *model;
      in.gpu = gpu::no_gpu();
      in.settings.engine = engines::Engine::llamacpp;
      in.settings.engine_version = release;
      in.settings.no_gpu = true;
      in.settings.fit = true;
      in.settings.fit_target_bytes = c.target_mib << 20;
      in.settings.fit_ctx = c.n_ctx_min;
      in.settings.host_memory_bytes = host_bytes;
      // libllama's own context defaults, as the report keeps them: outputs for a whole batch.
      in.settings.llamacpp_outputs_per_slot = false;
      const auto est = engines::plan(in);
      ASSERT_TRUE(est.has_value()) << what << ": " << est.error().message;
      ASSERT_TRUE(est->llamacpp.has_value());
      EXPECT_EQ(est->llamacpp->fit_success, real.status == 0) << what << ": " << real.output;
      if (real.status == 0) {
        // 0: llama.cpp left the model's context (a host with room for all of it).
        const uint32_t chosen = real.n_ctx == 0 ? 1048576 : real.n_ctx;
        EXPECT_EQ(*est->settings.max_model_len, chosen) << what << ": " << real.output;
      }
      for (const auto& line : est->llamacpp->fit_lines)
        EXPECT_TRUE(real.lines.contains(line))
            << what << ": kvprof's line\n  " << line << "\nis not llama.cpp's:\n"
            << real.output;
    }
  }
}

}  // namespace
}  // namespace kvprof
