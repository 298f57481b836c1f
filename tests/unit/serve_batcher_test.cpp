// ContinuousBatcher on the real libllama and a tiny random-weight GGUF: requests decoded together
// give the tokens each gives alone (greedy), prompts chunked over several steps too; slots and KV
// cells are freed when requests end or are cancelled; a request longer than a slot is refused
// with llama.cpp's wording.
#include "kvprof/serve/batcher.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "kvprof/model/dummy_vocab.hpp"
#include "support/serve_process.hpp"
#include "support/tiny_llama.hpp"

namespace {
namespace fs = std::filesystem;
using kvprof::serve::BatcherSettings;
using kvprof::serve::ContinuousBatcher;

class ServeBatcher : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = fs::temp_directory_path() / ("kvprof_serve_batcher_" + std::to_string(::getpid()));
    fs::create_directories(s_dir);
    s_ok = kvprof::test::write_dummy_llama(s_dir / "tiny.gguf");
  }
  static void TearDownTestSuite() { fs::remove_all(s_dir); }

  // Loads the model and a context of `n_ctx` cells for `n_slots` slots.
  void load(const fs::path& lib_dir, uint32_t n_slots, uint32_t n_ctx, uint32_t n_batch) {
    ASSERT_TRUE(s_ok);
    kvprof::llama::LlamaLibOptions lo;
    lo.path = lib_dir.string();
    auto lib = kvprof::llama::LlamaLib::load(lo);
    ASSERT_TRUE(lib.has_value()) << lib.error().message;
    kvprof::llama::LlamaSettings s;
    s.model_path = (s_dir / "tiny.gguf").string();
    s.n_ctx = n_ctx;
    s.n_seq_max = n_slots;
    s.n_batch = n_batch;
    s.n_ubatch = n_batch;
    s.n_threads = 1;
    auto model = kvprof::llama::LlamaModel::load(*lib, s);
    ASSERT_TRUE(model.has_value()) << model.error().message;
    m_model = std::move(*model);
    auto ctx = kvprof::llama::LlamaContext::create(*m_model, s);
    ASSERT_TRUE(ctx.has_value()) << ctx.error().message;
    m_ctx = std::move(*ctx);
    m_batcher = std::make_unique<ContinuousBatcher>(
        *m_model, *m_ctx, BatcherSettings{n_slots, m_ctx->n_ctx() / n_slots, n_batch});
  }

  // Runs until every request is done; the tokens each produced, by task id.
  std::map<uint64_t, std::vector<int32_t>> drain(size_t* max_busy = nullptr) {
    std::map<uint64_t, std::vector<int32_t>> out;
    for (int guard = 0; m_batcher->has_work() && guard < 10000; ++guard) {
      auto events = m_batcher->step();
      EXPECT_TRUE(events.has_value()) << events.error().message;
      if (!events) break;
      if (max_busy != nullptr) {
        *max_busy = std::max<size_t>(*max_busy, m_batcher->stats().requests_processing);
      }
      for (const auto& ev : *events)
        out[ev.task_id].insert(out[ev.task_id].end(), ev.tokens.begin(), ev.tokens.end());
    }
    return out;
  }

  std::vector<int32_t> prompt(uint32_t n_words, uint32_t first) const {
    auto tokens = m_model->tokenize(kvprof::model::dummy_prompt(n_words + first, 1024), true);
    EXPECT_TRUE(tokens.has_value());
    // Drop the first `first` words (keep BOS) so prompts differ.
    std::vector<int32_t> out = {(*tokens)[0]};
    out.insert(out.end(), tokens->begin() + 1 + first, tokens->end());
    return out;
  }

  static inline fs::path s_dir;
  static inline bool s_ok = false;
  std::unique_ptr<kvprof::llama::LlamaModel> m_model;
  std::unique_ptr<kvprof::llama::LlamaContext> m_ctx;
  std::unique_ptr<ContinuousBatcher> m_batcher;
};

TEST_F(ServeBatcher, TogetherGivesTheSameTokensAsAlone) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  load(*lib_dir, 4, 1024, 64);  // n_batch 64: the 90-token prompt is prefilled in chunks
  const std::vector<std::vector<int32_t>> prompts = {prompt(10, 0), prompt(30, 5), prompt(90, 3),
                                                     prompt(3, 100)};
  std::map<uint64_t, std::vector<int32_t>> alone;
  for (uint64_t i = 0; i < prompts.size(); ++i) {
    m_batcher->add(i, prompts[i], 12, /*ignore_eos=*/true);
    alone.merge(drain());
  }
  for (uint64_t i = 0; i < prompts.size(); ++i)
    m_batcher->add(100 + i, prompts[i], 12, true);
  size_t max_busy = 0;
  auto together = drain(&max_busy);
  EXPECT_EQ(max_busy, 4U);  // all four decoded in the same steps
  for (uint64_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(alone[i].size(), 12U) << i;
    EXPECT_EQ(together[100 + i], alone[i]) << "request " << i;
  }
  // The tokens are not all the same (random weights): the comparison means something.
  EXPECT_NE(alone[0], alone[1]);
  const auto stats = m_batcher->stats();
  EXPECT_EQ(stats.tokens_predicted_total, 8U * 12U);
  EXPECT_GT(stats.n_busy_slots_total, stats.n_decode_total);
  EXPECT_EQ(stats.n_tokens_max, 64U);
}

TEST_F(ServeBatcher, MoreRequestsThanSlotsWaitAndSlotsAreFreed) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  load(*lib_dir, 2, 512, 512);
  for (uint64_t i = 0; i < 5; ++i)
    m_batcher->add(i, prompt(8, static_cast<uint32_t>(i)), 4, true);
  auto first = m_batcher->step();
  ASSERT_TRUE(first.has_value());
  auto stats = m_batcher->stats();
  EXPECT_EQ(stats.requests_processing, 2U);
  EXPECT_EQ(stats.requests_deferred, 3U);
  EXPECT_EQ(stats.kv_cells_used, 2U * 9U);  // BOS + 8 words each
  const auto slots = m_batcher->slots();
  ASSERT_EQ(slots.size(), 2U);
  EXPECT_TRUE(slots[0].is_processing);
  EXPECT_EQ(slots[0].n_ctx, 256U);
  EXPECT_EQ(slots[0].n_decoded, 1U);
  const auto out = drain();
  EXPECT_EQ(out.size(), 5U);
  stats = m_batcher->stats();
  EXPECT_EQ(stats.requests_processing, 0U);
  EXPECT_EQ(stats.requests_deferred, 0U);
  EXPECT_EQ(stats.kv_cells_used, 0U);
  EXPECT_EQ(stats.prompt_tokens_total, 5U * 9U);
  for (const auto& s : m_batcher->slots())
    EXPECT_FALSE(s.is_processing);
}

TEST_F(ServeBatcher, CancelFreesTheSlot) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  load(*lib_dir, 1, 256, 256);
  m_batcher->add(1, prompt(8, 0), 100, true);
  m_batcher->add(2, prompt(8, 1), 3, true);
  ASSERT_TRUE(m_batcher->step().has_value());
  EXPECT_EQ(m_batcher->stats().requests_deferred, 1U);
  EXPECT_TRUE(m_batcher->cancel(1));
  EXPECT_FALSE(m_batcher->cancel(1));
  EXPECT_EQ(m_batcher->stats().kv_cells_used, 0U);
  const auto out = drain();
  EXPECT_EQ(out.at(2).size(), 3U);
  EXPECT_EQ(out.count(1), 0U);
}

TEST_F(ServeBatcher, RequestLongerThanASlotIsRefusedInLlamaCppWords) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  load(*lib_dir, 4, 512, 512);  // 128 cells per slot
  EXPECT_TRUE(m_batcher->check_request(100, 28).has_value());
  const auto too_long = m_batcher->check_request(100, 29);
  ASSERT_FALSE(too_long.has_value());
  EXPECT_EQ(too_long.error().message,
            "request (129 tokens) exceeds the available context size (128 tokens), try "
            "increasing it");
  const auto prompt_too_long = m_batcher->check_request(200, 1);
  ASSERT_FALSE(prompt_too_long.has_value());
  EXPECT_NE(prompt_too_long.error().message.find("request (200 tokens)"), std::string::npos);
  EXPECT_FALSE(m_batcher->check_request(0, 4).has_value());
}

}  // namespace
