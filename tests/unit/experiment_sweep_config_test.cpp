// The sweep file parser: the batch profiler's YAML as it is written, top-level defaults, and every
// problem of a bad file reported at once with its line and column.
#include "kvprof/experiment/sweep_config.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kvprof::experiment {
namespace {

bool has_error(const ConfigParse& p, int line, const std::string& text) {
  for (const auto& e : p.errors) {
    if (e.pos.line == line && e.message.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string all_errors(const ConfigParse& p) {
  std::string out;
  for (const auto& e : p.errors)
    out += format_issue("f.yaml", e) + "\n";
  return out;
}

TEST(SweepConfig, AFileNotInUtf8IsAnErrorAtItsLine) {
  // A Latin-1 e-acute (0xe9) in a model id.
  const auto p = parse_sweep_config("gpu: H100\nmodels:\n  - model_id: caf\xe9-7b\n");
  ASSERT_EQ(p.errors.size(), 1U) << all_errors(p);
  EXPECT_EQ(p.errors[0].pos.line, 3);
  EXPECT_EQ(p.errors[0].pos.column, 18);
  EXPECT_NE(p.errors[0].message.find("not UTF-8"), std::string::npos) << p.errors[0].message;
  // Valid UTF-8 of every length reads.
  const auto ok = parse_sweep_config(
      "gpu: H100\n# caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n"
      "input_lengths: [64]\noutput_lengths: [4]\nbatch_sizes: [1]\n"
      "models:\n  - model_id: meta-llama/Llama-3.1-8B-Instruct\n");
  EXPECT_TRUE(ok.errors.empty()) << all_errors(ok);
}

TEST(SweepConfig, ReadsTheBatchProfilerFileWithItsArchitectureKeys) {
  const auto p = parse_sweep_config(R"(models:
  - model_id: "meta-llama/Llama-2-7b-hf"
    container_name: "vllm-inference"
    input_lengths: [256, 512, 1024]
    output_lengths: [256, 512]
    batch_sizes: [1, 8, 16]
    dtype: "float16"
    tensor_parallel_size: 1
    quantization: null
    model_params: 6.7e9
    num_layers: 32
    num_heads: 32
    hidden_size: 4096

  - model_id: "meta-llama/Llama-2-70b-hf"
    input_lengths: [512, 1024]
    output_lengths: [256, 512]
    batch_sizes: [1, 4, 8]
    tensor_parallel_size: 4
    kv_cache_dtype: fp8
    gpu_memory_utilization: 0.85
    max_model_len: 4096
)");
  ASSERT_TRUE(p.ok()) << all_errors(p);
  ASSERT_EQ(p.config.models.size(), 2u);
  const auto& a = p.config.models[0];
  EXPECT_EQ(a.model_id, "meta-llama/Llama-2-7b-hf");
  EXPECT_EQ(a.input_lengths, (std::vector<uint32_t>{256, 512, 1024}));
  EXPECT_EQ(a.batch_sizes, (std::vector<uint32_t>{1, 8, 16}));
  EXPECT_EQ(a.dtype, "float16");
  EXPECT_TRUE(a.quantization.empty());
  EXPECT_DOUBLE_EQ(*a.model_params, 6.7e9);
  EXPECT_EQ(*a.num_layers, 32u);
  EXPECT_EQ(a.pos.line, 2);
  EXPECT_EQ(a.model_id_pos.line, 2);
  const auto& b = p.config.models[1];
  EXPECT_EQ(b.tensor_parallel_size, 4u);
  EXPECT_EQ(b.kv_cache_dtype, "fp8");
  EXPECT_DOUBLE_EQ(*b.gpu_memory_utilization, 0.85);
  EXPECT_EQ(*b.max_model_len, 4096u);
  EXPECT_FALSE(b.num_layers.has_value());
  // container_name names the server: measured where the container runtime says it listens.
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_EQ(a.container_name, "vllm-inference");
  EXPECT_TRUE(b.container_name.empty());
}

TEST(SweepConfig, AContainerIsTheServerSoLaunchOrEndpointBesideItIsAnError) {
  const auto p = parse_sweep_config(R"(models:
  - model_id: meta-llama/Llama-2-7b-hf
    container_name: vllm-inference
    endpoint: http://127.0.0.1:8000
    input_lengths: [128]
    output_lengths: [16]
    batch_sizes: [1]
)");
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_NE(p.errors[0].message.find("'container_name', 'launch' or 'endpoint', one of them"),
            std::string::npos)
      << p.errors[0].message;
}

TEST(SweepConfig, TopLevelKeysAreDefaultsThatAnEntryOverrides) {
  const auto p = parse_sweep_config(R"(name: grid-a
requests_per_condition: 3
baseline_s: 0.2
input_lengths: [128]
output_lengths: [16]
batch_sizes: [1, 2]
launch: "serve {model} --port {port} {engine_args}"
models:
  - model_id: a
  - model_id: b
    batch_sizes: [4]
    launch: null
    endpoint: http://127.0.0.1:9000/v1
)");
  ASSERT_TRUE(p.ok()) << all_errors(p);
  EXPECT_EQ(p.config.settings.name, "grid-a");
  EXPECT_EQ(p.config.settings.requests_per_condition, 3u);
  EXPECT_DOUBLE_EQ(p.config.settings.baseline_s, 0.2);
  const auto& a = p.config.models[0];
  EXPECT_EQ(a.batch_sizes, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(a.input_lengths, (std::vector<uint32_t>{128}));
  EXPECT_EQ(a.launch, "serve {model} --port {port} {engine_args}");
  const auto& b = p.config.models[1];
  EXPECT_EQ(b.batch_sizes, (std::vector<uint32_t>{4}));
  EXPECT_TRUE(b.launch.empty());
  EXPECT_EQ(b.endpoint, "http://127.0.0.1:9000/v1");
}

TEST(SweepConfig, EveryProblemOfABadFileAtOnceWithItsLine) {
  const auto p = parse_sweep_config(R"(models:
  - model_id: "meta-llama/Llama-3.1-8B-Instruct"
    input_lengths: "512"
    output_lengths: [128, 0]
    batch_size: [1, 8]
    tensor_parallel_size: two
  - input_lengths: [64]
    output_lengths: [4]
    batch_sizes: [1]
    gpu_memory_utilization: 1.5
    dtype: int3
  - model_id: x
    input_lengths: [64]
    output_lengths: [4]
    batch_sizes: [1, 1]
    launch: "serve {model} --port {prot}"
    gpu: H1000
)");
  EXPECT_FALSE(p.ok());
  const std::string all = all_errors(p);
  EXPECT_TRUE(has_error(p, 3, "models[0].input_lengths: expected a list of integers")) << all;
  EXPECT_TRUE(has_error(p, 4, "models[0].output_lengths[1]: 0 is out of range")) << all;
  EXPECT_TRUE(has_error(p, 5, "unknown key 'batch_size' (did you mean 'batch_sizes'?)")) << all;
  EXPECT_TRUE(has_error(p, 6, "tensor_parallel_size: expected an integer, got 'two'")) << all;
  EXPECT_TRUE(has_error(p, 2, "models[0]: missing required key 'batch_sizes'")) << all;
  // input_lengths was given, with a bad value: that is reported once, not as missing too.
  EXPECT_FALSE(has_error(p, 2, "missing required key 'input_lengths'")) << all;
  EXPECT_TRUE(has_error(p, 7, "models[1]: missing required key 'model_id'")) << all;
  EXPECT_TRUE(has_error(p, 10, "gpu_memory_utilization: 1.5 is out of range")) << all;
  EXPECT_TRUE(has_error(p, 11, "'int3' is not a dtype")) << all;
  EXPECT_TRUE(has_error(p, 15, "batch_sizes[1]: 1 appears twice")) << all;
  EXPECT_TRUE(has_error(p, 16, "unknown placeholder {prot} (did you mean {port}?)")) << all;
  EXPECT_TRUE(has_error(p, 17, "models[2].gpu:")) << all;
  // Columns point at the value.
  for (const auto& e : p.errors) {
    if (e.pos.line == 6) {
      EXPECT_EQ(e.pos.column, 27);
    }
  }
  EXPECT_EQ(format_issue("f.yaml", p.errors.front()).substr(0, 7), "f.yaml:");
}

TEST(SweepConfig, MissingOrEmptyModelsAndBrokenYamlAreErrorsWithAPosition) {
  auto p = parse_sweep_config("input_lengths: [1]\n");
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_NE(p.errors[0].message.find("missing required key 'models'"), std::string::npos);

  p = parse_sweep_config("models: []\n");
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_NE(p.errors[0].message.find("non-empty list"), std::string::npos);

  p = parse_sweep_config("models:\n  - model_id: x\n   bad indent: 1\n");
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_NE(p.errors[0].message.find("YAML syntax"), std::string::npos);
  EXPECT_EQ(p.errors[0].pos.line, 3);

  p = parse_sweep_config("model_id: a\nmodels:\n  - 42\n");
  EXPECT_TRUE(has_error(p, 1, "model_id belongs in an entry of 'models'"));
  EXPECT_TRUE(has_error(p, 3, "models[0]: expected a mapping"));
}

TEST(SweepConfig, DuplicatesAndBothServerKindsAreRefused) {
  const auto p = parse_sweep_config(R"(models:
  - model_id: a
    model_id: b
    input_lengths: [1]
    output_lengths: [1]
    batch_sizes: [1]
    launch: "serve {model} --port {port} --max-model-len {max_model_len}"
    endpoint: http://127.0.0.1:8000
)");
  const std::string all = all_errors(p);
  EXPECT_TRUE(has_error(p, 3, "'model_id' appears twice")) << all;
  EXPECT_TRUE(has_error(p, 7, "give 'launch' or 'endpoint', not both")) << all;
  EXPECT_TRUE(has_error(p, 7, "launch uses {max_model_len} but 'max_model_len' is not set")) << all;
}

TEST(SweepConfig, ReportsAreBoundedOnAHugeBadFile) {
  std::string text = "models:\n";
  for (int i = 0; i < 250; ++i)
    text += "  - {bad: 1}\n";
  const auto p = parse_sweep_config(text);
  EXPECT_EQ(p.errors.size(), k_max_reported_errors);
  EXPECT_GT(p.n_errors_dropped, 0u);
  EXPECT_FALSE(parse_sweep_config(std::string(k_max_config_bytes + 1, ' ')).ok());
}

}  // namespace
}  // namespace kvprof::experiment
