// Tests of the built-in model catalog (data/models.json via src/kvprof/model/catalog.cpp):
// uniqueness of ids and aliases, required entries, well-formed configs, lookup and search.
#include "kvprof/model/catalog.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "kvprof/estimate/tensors.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::model {
namespace {

TEST(ModelCatalog, HasAtLeastOneHundredThirtyFourEntries) {
  EXPECT_GE(model_catalog().size(), 324U);
}

TEST(ModelCatalog, IdsAndAliasesAreUniqueIgnoringCase) {
  std::set<std::string> seen;
  for (const auto& e : model_catalog()) {
    EXPECT_TRUE(seen.insert(to_lower(e.id)).second) << "duplicate id " << e.id;
    for (const auto& a : e.aliases) {
      EXPECT_TRUE(seen.insert(to_lower(a)).second)
          << "duplicate alias " << a << " (" << e.id << ")";
    }
  }
}

TEST(ModelCatalog, RequiredIdsArePresentExactly) {
  const char* required[] = {
      "codellama/CodeLlama-7b-hf",
      "google/gemma-2-27b-it",
      "google/gemma-2-2b-it",
      "google/gemma-2-9b-it",
      "ibm-granite/granite-3.1-2b-instruct",
      "ibm-granite/granite-3.1-8b-instruct",
      "ibm-granite/granite-vision-3.3-2b",
      "meta-llama/Llama-3.1-8B-Instruct",
      "microsoft/phi-2",
      "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
      "moonshotai/Kimi-VL-A3B-Instruct",
      "Qwen/Qwen1.5-MoE-A2.7B",
      "Qwen/Qwen2.5-7B-Instruct",
      "Qwen/Qwen2.5-72B-Instruct",
      "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8",
      "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
      "RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic",
      "RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic",
      "RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8",
  };
  for (const char* id : required) {
    const CatalogEntry* e = find_catalog_entry(id);
    ASSERT_NE(e, nullptr) << id;
    EXPECT_EQ(e->id, id);
  }
}

TEST(ModelCatalog, EveryEntryCitesItsSourceAndHasAnHfConfig) {
  for (const auto& e : model_catalog()) {
    EXPECT_FALSE(e.source.empty()) << e.id;
    EXPECT_FALSE(e.family.empty()) << e.id;
    EXPECT_GT(e.params_b, 0.0) << e.id;
    EXPECT_FALSE(e.tags.empty()) << e.id;
    ASSERT_TRUE(e.config.is_object()) << e.id;
    ASSERT_TRUE(e.config.contains("architectures")) << e.id;
    EXPECT_TRUE(e.config["architectures"].is_array()) << e.id;
    EXPECT_FALSE(e.config["architectures"].empty()) << e.id;
    ASSERT_TRUE(e.config.contains("model_type")) << e.id;
    EXPECT_TRUE(e.config["model_type"].is_string()) << e.id;
  }
}

TEST(ModelCatalog, TagsComeFromTheKnownSet) {
  const std::set<std::string> known{
      "dense",     "moe", "mla", "gqa",  "mha",  "mqa",   "sliding", "hybrid",    "ssm", "vlm",
      "quantized", "fp8", "awq", "gptq", "w8a8", "w4a16", "mxfp4",   "reasoning", "code"};
  for (const auto& e : model_catalog()) {
    for (const auto& t : e.tags)
      EXPECT_TRUE(known.contains(t)) << e.id << " tag " << t;
  }
}

TEST(ModelCatalog, QuantizedEntriesCarryAQuantizationConfig) {
  for (const auto& e : model_catalog()) {
    const bool tagged = std::find(e.tags.begin(), e.tags.end(), "quantized") != e.tags.end();
    EXPECT_EQ(tagged, e.config.contains("quantization_config")) << e.id;
  }
  const CatalogEntry* v3 = find_catalog_entry("deepseek-v3");
  ASSERT_NE(v3, nullptr);
  EXPECT_EQ(v3->config["quantization_config"]["weight_block_size"], nlohmann::json({128, 128}));
}

TEST(ModelCatalog, EveryEntryParsesToAModel) {
  for (const auto& e : model_catalog()) {
    const auto spec = catalog_model(e.id);
    ASSERT_TRUE(spec.has_value()) << e.id << ": " << spec.error().message;
    EXPECT_GT(spec->n_layer, 0U) << e.id;
    EXPECT_GT(spec->hidden_size, 0U) << e.id;
    EXPECT_GT(spec->vocab_size, 0U) << e.id;
    EXPECT_EQ(spec->id, e.id);
  }
}

// A mistyped dimension in a config (a hidden or intermediate size, a vocabulary, an expert count)
// moves the parameter count kvprof derives from it away from the publisher's figure. The tolerance
// allows for publishers who state a rounded size (Qwen3-VL-8B is listed as 8B); quantized
// checkpoints are left out (their published counts follow the packed tensors). MoE entries are
// held too: Nemotron-H's relu2 experts (an up projection, no gate) counted 46B for a 31.6B model
// until experts followed the model's MLP shape.
TEST(ModelCatalog, UnquantizedConfigsCountTheParametersTheirPublisherStates) {
  constexpr double k_tolerance = 0.10;
  size_t checked = 0;
  size_t moe = 0;
  for (const auto& e : model_catalog()) {
    const auto has = [&](const char* tag) {
      return std::find(e.tags.begin(), e.tags.end(), tag) != e.tags.end();
    };
    if (has("quantized")) continue;
    const auto spec = catalog_model(e.id);
    ASSERT_TRUE(spec.has_value()) << e.id;
    const double counted =
        static_cast<double>(estimate::count_params(estimate::decoder_tensors(*spec)));
    const double published = e.params_b * 1e9;
    EXPECT_NEAR(counted / published, 1.0, k_tolerance)
        << e.id << ": counted " << counted / 1e9 << "B, catalog says " << e.params_b << "B";
    ++checked;
    if (has("moe")) ++moe;
  }
  EXPECT_GE(checked, 150U);
  EXPECT_GE(moe, 25U);
}

TEST(ModelCatalog, LookupIgnoresCaseAndAcceptsAliasesAndBareNames) {
  const CatalogEntry* a = find_catalog_entry("QWEN/qwen2.5-7b-instruct");
  const CatalogEntry* b = find_catalog_entry("qwen2.5-7b");
  const CatalogEntry* c = find_catalog_entry("Qwen2.5-7B-Instruct");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  EXPECT_EQ(a->id, "Qwen/Qwen2.5-7B-Instruct");
  for (const char* alias : {"llama-3.1-8b", "gemma-2-9b", "gpt-oss-20b", "deepseek-v3"}) {
    EXPECT_NE(find_catalog_entry(alias), nullptr) << alias;
  }
}

TEST(ModelCatalog, MisspeltIdGivesNotFoundWithHint) {
  const auto spec = catalog_model("meta-llama/Llama-3.1-8B-Instuct");
  ASSERT_FALSE(spec.has_value());
  EXPECT_EQ(spec.error().kind, ErrorKind::not_found);
  EXPECT_NE(spec.error().message.find("did you mean"), std::string::npos) << spec.error().message;
  EXPECT_NE(spec.error().message.find("Llama-3.1-8B-Instruct"), std::string::npos)
      << spec.error().message;
}

TEST(ModelCatalog, SearchFindsQwen3Models) {
  const auto hits = search_catalog("qwen3");
  EXPECT_GE(hits.size(), 8U);
  for (const auto* e : hits) {
    const std::string text = to_lower(e->id + " " + e->family);
    EXPECT_NE(text.find("qwen3"), std::string::npos) << e->id;
  }
  bool found_moe = false;
  for (const auto* e : hits)
    found_moe = found_moe || e->id == "Qwen/Qwen3-30B-A3B";
  EXPECT_TRUE(found_moe);
  EXPECT_EQ(search_catalog("").size(), model_catalog().size());
}

}  // namespace
// Offline, a distill or fine-tune is planned as the model its name says it is built on.
TEST(ModelCatalog, ADistillOrFineTuneIsTheBaseItsNameSays) {
  const auto id_of = [](std::string_view name) {
    const auto v = find_catalog_variant(name);
    return v.entry != nullptr ? v.entry->id + (v.quantization.empty() ? "" : " " + v.quantization)
                              : std::string("-");
  };
  // The R1 distills by the base the R1 model card lists: "Qwen-14B" is a Qwen2.5-14B.
  EXPECT_EQ(id_of("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"), "Qwen/Qwen2.5-14B-Instruct");
  EXPECT_EQ(id_of("deepseek-ai/DeepSeek-R1-Distill-Llama-8B"), "meta-llama/Llama-3.1-8B");
  // A fine-tune naming its base, with the longest name that stands alone in it.
  EXPECT_EQ(id_of("someone/my-finetune-of-Mistral-7B-v0.3"), "mistralai/Mistral-7B-Instruct-v0.3");
  EXPECT_EQ(id_of("Qwen/Qwen2.5-Coder-7B-Instruct"), "Qwen/Qwen2.5-7B-Instruct");
  // Another release of a catalog model, by its date: Mistral Large 2411 is 2407's architecture.
  EXPECT_EQ(id_of("mistralai/Mistral-Large-Instruct-2411"),
            "mistralai/Mistral-Large-Instruct-2407");
  EXPECT_EQ(id_of("mistralai/Devstral-Small-2505"), "mistralai/Devstral-Small-2507");
  EXPECT_EQ(id_of("mistralai/Mistral-Nemo-Instruct-2099-oops"), "-");
  // A quantized one keeps its quantization.
  EXPECT_EQ(id_of("nvidia/Llama-3.1-8B-Instruct-FP8"),
            "meta-llama/Llama-3.1-8B-Instruct fp8-block");
  // No size, no base: "llama" alone, or a size inside another word, names nothing.
  EXPECT_EQ(id_of("someone/my-llama-tune"), "-");
  EXPECT_EQ(id_of("someone/xqwen2.5-7b"), "-");
  EXPECT_EQ(id_of("random/thing-2b"), "-");
}

// Models air-gapped clusters serve, offline: DeepSeek V2 and V2.5 (MLA, 160 experts), Zephyr
// (a Mistral 7B fine-tune whose name does not say so), Ministral 8B.
TEST(ModelCatalog, BigDeploymentFamiliesResolveOffline) {
  for (const char* id :
       {"deepseek-ai/DeepSeek-V2", "deepseek-ai/DeepSeek-V2-Chat", "deepseek-ai/DeepSeek-V2.5"}) {
    const auto m = catalog_model(id);
    ASSERT_TRUE(m.has_value()) << id;
    EXPECT_EQ(m->moe.n_expert, 160U) << id;
    EXPECT_EQ(m->mla.kv_lora_rank, 512U) << id;
    EXPECT_EQ(m->n_layer, 60U) << id;
  }
  const auto zephyr = catalog_model("HuggingFaceH4/zephyr-7b-beta");
  ASSERT_TRUE(zephyr.has_value());
  EXPECT_EQ(zephyr->n_head_kv, 8U);
  EXPECT_EQ(zephyr->hidden_size, 4096U);
  const auto ministral = catalog_model("mistralai/Ministral-8B-Instruct-2410");
  ASSERT_TRUE(ministral.has_value());
  EXPECT_EQ(ministral->n_layer, 36U);
  // Mistral Large 2 (123B) and GLM-4-9B-Chat (ChatGLM's own field names, its q/k/v biases).
  const auto large = catalog_model("mistral-large-2407");
  ASSERT_TRUE(large.has_value());
  EXPECT_EQ(large->n_layer, 88U);
  EXPECT_EQ(large->n_head_kv, 8U);
  EXPECT_EQ(large->hidden_size, 12288U);
  const auto glm = catalog_model("THUDM/glm-4-9b-chat");
  ASSERT_TRUE(glm.has_value());
  EXPECT_EQ(glm->n_layer, 40U);
  EXPECT_EQ(glm->n_head_kv, 2U);
  EXPECT_EQ(glm->intermediate_size, 13696U);
  EXPECT_EQ(glm->vocab_size, 151552U);
  EXPECT_TRUE(glm->attention_bias);
  EXPECT_TRUE(glm->warnings.empty()) << glm->warnings.front();
}

}  // namespace kvprof::model
