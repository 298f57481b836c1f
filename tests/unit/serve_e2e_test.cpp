// `kvprof serve` end to end: the binary serves a tiny random-weight GGUF with the real libllama;
// a streamed completion, /slots, /props, /metrics (llamacpp: names), /tokenize and the
// exceed-context 400; `kvprof profile --endpoint` against it (every request succeeds, KV usage
// read from /slots, host memory of the serving process); and the bad inputs (a file the engine
// refuses, no libllama, a port in use).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "kvprof/report/html/run_data.hpp"
#include "support/run_folders.hpp"
#include "support/run_kvprof.hpp"
#include "support/serve_process.hpp"
#include "support/tiny_llama.hpp"

namespace {
namespace fs = std::filesystem;
using kvprof::test::http_request;
using kvprof::test::ServeProcess;
using nlohmann::json;

class ServeE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = fs::temp_directory_path() / ("kvprof_serve_e2e_" + std::to_string(::getpid()));
    fs::create_directories(s_dir);
    // 32000 tokens: profile's token-ID prompts (ids 1000..30000) are all in the vocabulary.
    s_ok = kvprof::test::write_dummy_llama(s_dir / "tiny.gguf", 32000);
  }
  static void TearDownTestSuite() { fs::remove_all(s_dir); }

  static std::vector<std::string> args(const fs::path& lib, std::vector<std::string> extra) {
    std::vector<std::string> a = {"-m",          (s_dir / "tiny.gguf").string(),
                                  "--llama-lib", lib.string(),
                                  "--port",      "0",
                                  "-t",          "1",
                                  "--quiet"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  static inline fs::path s_dir;
  static inline bool s_ok = false;
};

TEST_F(ServeE2E, StreamsSlotsMetricsTokenize) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_ok);
  ServeProcess serve(args(*lib_dir, {"-c", "1024", "-np", "2", "--metrics", "--alias", "tiny"}));
  ASSERT_NE(serve.port(), 0) << serve.first_line();
  const uint16_t port = serve.port();

  auto health = http_request(port, "GET", "/health");
  EXPECT_EQ(health.status, 200);
  auto models = json::parse(http_request(port, "GET", "/v1/models").body);
  EXPECT_EQ(models["data"][0]["id"], "tiny");

  auto tok = http_request(port, "POST", "/tokenize", R"({"content":"w0 w1 w2"})");
  EXPECT_EQ(json::parse(tok.body)["tokens"], json::array({261, 262, 263}));
  auto detok = http_request(port, "POST", "/detokenize", R"({"tokens":[261,262]})");
  EXPECT_EQ(json::parse(detok.body)["content"], " w0 w1");

  // A streamed completion: SSE chunks, then usage, then [DONE].
  auto stream = http_request(
      port, "POST", "/v1/completions",
      R"({"model":"tiny","prompt":"w0 w1 w2 w3","max_tokens":5,"stream":true,"ignore_eos":true,
          "stream_options":{"include_usage":true}})");
  EXPECT_EQ(stream.status, 200);
  size_t chunks = 0;
  for (size_t p = 0; (p = stream.body.find("\"text_completion\"", p)) != std::string::npos; ++p)
    ++chunks;
  EXPECT_EQ(chunks, 6U) << stream.body;  // 5 tokens + the usage chunk
  EXPECT_NE(stream.body.find("\"completion_tokens\":5"), std::string::npos);
  EXPECT_NE(stream.body.find("\"prompt_tokens\":5"), std::string::npos);  // BOS + 4 words
  EXPECT_NE(stream.body.find("data: [DONE]"), std::string::npos);

  // Token-ID prompts are taken, as llama-server's tokenize_input_prompts does.
  auto ids = http_request(port, "POST", "/v1/completions",
                          R"({"prompt":[1,261,262,263,264],"max_tokens":5,"ignore_eos":true})");
  ASSERT_EQ(ids.status, 200) << ids.body;
  auto whole = json::parse(ids.body);
  EXPECT_EQ(whole["usage"]["completion_tokens"], 5);
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");

  auto chat = http_request(port, "POST", "/v1/chat/completions",
                           R"({"messages":[{"role":"user","content":"w5 w6"}],"max_tokens":2})");
  EXPECT_EQ(chat.status, 200) << chat.body;

  auto too_long =
      http_request(port, "POST", "/v1/completions", R"({"prompt":"w0 w1","max_tokens":600})");
  EXPECT_EQ(too_long.status, 400);
  auto err = json::parse(too_long.body);
  EXPECT_EQ(err["error"]["type"], "exceed_context_size_error");
  EXPECT_EQ(err["error"]["n_ctx"], 512);
  EXPECT_EQ(err["error"]["message"],
            "request (603 tokens) exceeds the available context size (512 tokens), try "
            "increasing it");

  auto slots = json::parse(http_request(port, "GET", "/slots").body);
  ASSERT_EQ(slots.size(), 2U);
  EXPECT_EQ(slots[0]["n_ctx"], 512);
  EXPECT_EQ(slots[0]["is_processing"], false);
  EXPECT_TRUE(slots[0].contains("id_task"));
  EXPECT_EQ(slots[0]["next_token"][0]["n_decoded"].is_number(), true);

  auto props = json::parse(http_request(port, "GET", "/props").body);
  EXPECT_EQ(props["default_generation_settings"]["n_ctx"], 512);
  EXPECT_EQ(props["total_slots"], 2);
  EXPECT_GT(props["kvprof"]["memory"]["context_bytes"].get<uint64_t>(), 0U);  // the KV cache

  const auto metrics = http_request(port, "GET", "/metrics").body;
  for (const char* name :
       {"llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total",
        "llamacpp:prompt_seconds_total", "llamacpp:tokens_predicted_seconds_total",
        "llamacpp:n_decode_total", "llamacpp:n_busy_slots_per_decode",
        "llamacpp:requests_processing", "llamacpp:requests_deferred"}) {
    EXPECT_NE(metrics.find(std::string("\n") + name + " "), std::string::npos) << name;
  }
  EXPECT_NE(metrics.find("llamacpp:tokens_predicted_total 12"), std::string::npos) << metrics;
  EXPECT_EQ(serve.stop(), 0);  // Ctrl-C: a clean stop
}

TEST_F(ServeE2E, SlotsSharingOneCacheAreMeasuredAgainstThatCacheNotTheirSum) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_ok);
  // -kvu: each of the 2 slots may use all 1024 cells, and /slots says n_ctx 1024 for each, as
  // llama-server does; the cache is 1024 cells, not 2048.
  // The KV capacity a short profile of `server` (--endpoint URL or --launch CMD) wrote.
  const auto capacity_of = [](const std::string& server, const fs::path& out) {
    const auto r = kvprof::test::run_kvprof(
        "profile " + server + " --output-dir " + out.string() +
        " --input-lens 64 --output-lens 8 --concurrencies 2 --n-per-condition 1 --baseline-s 0.1 "
        "--post-warmup-s 0.1 --warmup-requests 1 --metrics-interval-ms 20 --prefix-modes low -q");
    EXPECT_EQ(r.rc, 0) << r.out;
    std::ifstream in(kvprof::test::first_run_folder(out) / "summary.json");
    const json summary = json::parse(in, nullptr, false);
    return summary.is_discarded() ? json() : summary["server_metrics"]["kv_cache_capacity_tokens"];
  };
  ServeProcess serve(args(*lib_dir, {"-c", "1024", "-np", "2", "--kv-unified", "--alias", "tiny"}));
  ASSERT_NE(serve.port(), 0) << serve.first_line();
  EXPECT_EQ(capacity_of("--endpoint " + serve.url(), s_dir / "results_kvu"), 1024);
  // Launched: its startup log's "kv_unified = true" says so (a launch does not read /props for it).
  std::string launch = std::string(KVPROF_BIN) + " serve --port {port}";
  for (const auto& a : args(*lib_dir, {"-c", "1024", "-np", "2", "--kv-unified"})) {
    if (a != "--port" && a != "0" && a != "--quiet") launch += " " + a;  // its log read
  }
  EXPECT_EQ(capacity_of("--launch '" + launch + "'", s_dir / "results_kvu_launch"), 1024);
}

TEST_F(ServeE2E, ProfileEndpointReadsKvUsageFromSlots) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_ok);
  // No --metrics, as llama-server by default: KV usage can only come from /slots.
  ServeProcess serve(args(*lib_dir, {"-c", "2048", "-np", "4", "--alias", "tiny"}));
  ASSERT_NE(serve.port(), 0) << serve.first_line();
  const fs::path out = s_dir / "results";
  const auto r = kvprof::test::run_kvprof(
      "profile --endpoint " + serve.url() + " --output-dir " + out.string() +
      " --input-lens 64,200 --output-lens 32 --concurrencies 1,4 "
      "--n-per-condition 2 --baseline-s 0.2 --post-warmup-s 0.2 --warmup-requests 1 "
      "--metrics-interval-ms 20 --prefix-modes low --json -q");
  ASSERT_EQ(r.rc, 0) << r.out;
  const fs::path run = kvprof::test::first_run_folder(out);
  std::ifstream in(run / "summary.json");
  const json summary = json::parse(in, nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << r.out;
  const auto& conditions = summary["conditions"];
  ASSERT_FALSE(conditions.empty());
  double peak = 0;
  EXPECT_EQ(summary["requests"]["n_errors"], 0) << summary["requests"].dump();
  EXPECT_EQ(summary["requests"]["n_ok"], summary["requests"]["n_requests"]);
  for (const auto& c : conditions) {
    if (c["peak_kv_cache_usage"].is_number())
      peak = std::max(peak, c["peak_kv_cache_usage"].get<double>());
    // The serving process's host memory, its peak in each condition's window.
    EXPECT_GT(c.value("peak_rss_bytes", 0.0), 1e6) << c.dump(1);
  }
  EXPECT_GT(peak, 0.0) << summary.dump(1);
  EXPECT_LE(peak, 1.0);
  EXPECT_EQ(summary["server_metrics"]["kv_cache_usage_source"], "/slots")
      << summary["server_metrics"].dump(1);
  // The serving process's host memory was sampled (the endpoint's listening pid).
  std::ifstream host(run / "host_mem_trace.csv");
  std::string header, row;
  std::getline(host, header);
  EXPECT_TRUE(static_cast<bool>(std::getline(host, row))) << "no host memory rows";
  std::ifstream trace(run / "metrics_trace.csv");
  std::string all((std::istreambuf_iterator<char>(trace)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find(",slots"), std::string::npos);
  // llama.cpp's own buffers as the server's /props states them, and its build as the version.
  const json props = json::parse(http_request(serve.port(), "GET", "/props").body);
  const json& memory = props["kvprof"]["memory"];
  const json& reported = summary["engine_reported"];
  ASSERT_TRUE(reported.is_object()) << summary.dump(1);
  EXPECT_EQ(reported["source"], "/props");
  const json& parts = reported["components"];
  // Each part is the buffer of its kind that /props lists (one buffer type holds each here).
  for (const auto& [part, key] :
       {std::pair{"weights", "model_bytes"}, std::pair{"kv_cache", "context_bytes"},
        std::pair{"compute", "compute_bytes"}}) {
    uint64_t stated = 0;
    for (const auto& b : memory["buffers"])
      stated += b[key].get<uint64_t>();
    EXPECT_GT(stated, 0U) << part;
    EXPECT_EQ(parts[part]["bytes"], stated) << part << ": " << memory.dump(1);
  }
  EXPECT_EQ(parts["compute"]["confidence"], "reported by engine");
  EXPECT_EQ(summary["engine_metadata"]["engine_version"], props["build_info"]);
  // No --estimate-with: the server is planned from what its /props states (the GGUF, 4 slots of
  // 512 tokens split from -c 2048), and the plan's buffers are the bytes /props states to the
  // plan's printed digit (its log lines say MiB to two decimals: half of 0.01 MiB).
  const json& cmp = summary["estimate_comparison"];
  ASSERT_TRUE(cmp.is_object()) << summary.dump(1);
  EXPECT_EQ(cmp["estimate_flags"],
            "the server's /props (tiny.gguf; 4 slots of 512 tokens, split (2048 cells, as it "
            "states))");
  size_t stated = 0;
  for (const auto& part : cmp["rows"]) {
    if (part["measured_source"] != "/props") continue;
    ++stated;
    EXPECT_LE(std::abs(part["estimated"].get<double>() - part["measured"].get<double>()),
              0.005 * 1024 * 1024)
        << part.dump();
  }
  EXPECT_EQ(stated, 3U) << cmp.dump(1);  // weights, KV cache, compute buffers
  // The report draws the server's host memory (no GPU was sampled), each condition's peak from
  // the process's samples in its window.
  const auto data = kvprof::report::html::load_run_data(run);
  ASSERT_TRUE(data.has_value()) << data.error().message;
  EXPECT_EQ(data->memory_kind, "host");
  ASSERT_EQ(data->points.size(), conditions.size());
  for (const auto& p : data->points)
    EXPECT_GT(p.peak_bytes.value_or(0), 0.0) << p.label;
}

// KV usage from whatever each release exposes, with kvprof serve answering /slots and /metrics as
// three llama-server releases wrote them (their sources: b3889 examples/server/server.cpp, the
// slot's integer "state" and the kv_cache_usage_ratio / kv_cache_tokens gauges; b5640
// tools/server/server.cpp slot to_json: is_processing, no token counts, no KV gauge; v0.4.0
// tools/server/server-context.cpp: n_prompt_tokens and next_token[0].n_decoded). The table says
// where each came from; b5640's is derived from kvprof's own records of the in-flight requests.
TEST_F(ServeE2E, KvUsageComesFromWhatEachReleaseExposes) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_ok);
  struct Case {
    const char* release;
    const char* source;  // summary.json's server_metrics.kv_cache_usage_source
    const char* footnote;
  };
  for (const Case& c : {Case{"b3889", "/metrics", "KV peak: the server's KV gauge in /metrics"},
                        Case{"b5640", "", "~ KV peak derived: the in-flight requests'"},
                        Case{"v0.4.0", "/slots", "KV peak: /slots, the busy slots' tokens"}}) {
    ServeProcess serve(args(*lib_dir, {"-c", "2048", "-np", "4", "--metrics", "--alias", "tiny",
                                       "--api-release", c.release}));
    ASSERT_NE(serve.port(), 0) << serve.first_line();
    const json slots = json::parse(http_request(serve.port(), "GET", "/slots").body);
    ASSERT_TRUE(slots.is_array() && !slots.empty()) << c.release;
    EXPECT_EQ(slots[0].contains("state"), std::string(c.release) == "b3889") << slots.dump();
    EXPECT_FALSE(slots[0].contains("n_past")) << slots.dump();
    const fs::path out = s_dir / (std::string("results-") + c.release);
    const auto r = kvprof::test::run_kvprof(
        "profile --endpoint " + serve.url() + " --output-dir " + out.string() +
        " --input-lens 200 --output-lens 32 --concurrencies 4 --n-per-condition 4 "
        "--baseline-s 0.2 --post-warmup-s 0.2 --warmup-requests 1 --metrics-interval-ms 20 "
        "--prefix-modes low");
    ASSERT_EQ(r.rc, 0) << c.release << ": " << r.out;
    EXPECT_NE(r.out.find(c.footnote), std::string::npos) << c.release << ": " << r.out;
    std::ifstream in(kvprof::test::first_run_folder(out) / "summary.json");
    const json summary = json::parse(in, nullptr, false);
    ASSERT_FALSE(summary.is_discarded()) << r.out;
    const json& source = summary["server_metrics"]["kv_cache_usage_source"];
    if (*c.source == '\0') {
      EXPECT_TRUE(source.is_null()) << source;
      // Derived: the requests' tokens over the 2048 cells of the slots.
      double usage = 0;
      for (const auto& cond : summary["conditions"]) {
        const json& pr = cond["kv_usage"]["per_request"];
        EXPECT_EQ(pr["capacity_tokens"], 2048) << pr.dump();
        usage = std::max(usage, pr["peak_usage"].get<double>());
      }
      EXPECT_GT(usage, 0.0);
      EXPECT_NE(r.out.find("~"), std::string::npos) << r.out;
    } else {
      EXPECT_EQ(source, c.source) << summary["server_metrics"].dump(1);
    }
  }
}

// llama-server answers for any model name it is sent: a short name that its /v1/models does not
// list is used, with a warning, where vLLM's refusal would stop the run (ProfileProbe's test).
TEST_F(ServeE2E, ProfileEndpointTakesAModelNameTheServerAnswersFor) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_ok);
  ServeProcess serve(args(*lib_dir, {"-c", "1024", "-np", "1", "--alias", "tiny"}));
  ASSERT_NE(serve.port(), 0) << serve.first_line();
  const fs::path out = s_dir / "short-name";
  const auto r = kvprof::test::run_kvprof(
      "profile --endpoint " + serve.url() + " --model m_small --output-dir " + out.string() +
      " --input-lens 32 --output-lens 4 --concurrencies 1 --n-per-condition 1 --baseline-s 0.1 "
      "--post-warmup-s 0.1 --warmup-requests 0 --prefix-modes low --json -q");
  ASSERT_EQ(r.rc, 0) << r.out;
  std::ifstream in(kvprof::test::first_run_folder(out) / "summary.json");
  const json summary = json::parse(in, nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << r.out;
  EXPECT_EQ(summary["requests"]["n_errors"], 0);
  bool warned = false;
  for (const auto& w : summary["warnings"])
    warned =
        warned || w.get<std::string>().find("answers for --model 'm_small'") != std::string::npos;
  EXPECT_TRUE(warned) << summary["warnings"].dump();
}

TEST_F(ServeE2E, ProfileLaunchPlansTheServerFromItsOwnFlags) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_ok);
  // No --estimate-with: the plan comes from the launch command (-c 2048 -np 2, the GGUF), on the
  // CPU, and its buffers are compared with those the server logs.
  const fs::path out = s_dir / "results_launch";
  const std::string launch = std::string(KVPROF_BIN) + " serve -m " +
                             (s_dir / "tiny.gguf").string() + " --llama-lib " + lib_dir->string() +
                             " -t 1 --port {port} -c 2048 -np 2";
  const auto r = kvprof::test::run_kvprof_env(
      "KVPROF_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1",
      "profile --launch '" + launch + "' --output-dir " + out.string() +
          " --input-lens 64 --output-lens 8 --concurrencies 1,2 --prefix-modes low "
          "--baseline-s 0.2 --post-warmup-s 0.2 --min-condition-s 0.3 --warmup-requests 1");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("compute buffers (server.log): stated "), std::string::npos) << r.out;
  const fs::path run = kvprof::test::first_run_folder(out);
  std::ifstream in(run / "summary.json");
  const json summary = json::parse(in, nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  const json& cmp = summary["estimate_comparison"];
  EXPECT_NE(cmp["estimate_flags"].get<std::string>().find("the launch command (kvprof serve"),
            std::string::npos)
      << cmp.dump(1);
  size_t stated = 0;
  for (const auto& row : cmp["rows"]) {
    if (row["measured_source"] == "server.log") {
      ++stated;
      // The plan's buffers are the ones the engine logs, to the printed digit.
      EXPECT_EQ(row["error_pct"].get<double>(), 0.0) << row.dump();
    }
    if (row["component"] == "kv_cache_tokens") {
      EXPECT_EQ(row["measured"], 2048);
    }
    if (row["component"] == "total") {
      EXPECT_EQ(row["measured_source"], "host RSS");
    }
  }
  EXPECT_EQ(stated, 3U) << cmp.dump(1);  // weights, KV cache, compute buffers
  EXPECT_EQ(cmp["assumptions"]["gpu"]["origin"], "detected") << cmp["assumptions"].dump(1);
}

TEST_F(ServeE2E, TheStartupLogKeepsEveryBufferLineForParseLog) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_ok);
  // 48 layers: llama.cpp logs hundreds of debug lines after its buffer lines (tensors, graph
  // inputs per layer), more than a log kept by line count holds.
  const fs::path config = s_dir / "deep" / "config.json";
  fs::create_directories(config.parent_path());
  std::ofstream(config)
      << R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
        "intermediate_size":128,"num_attention_heads":2,"num_key_value_heads":1,
        "num_hidden_layers":48,"vocab_size":512,"max_position_embeddings":4096,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})";
  const fs::path deep = config.parent_path() / "deep.gguf";
  ASSERT_EQ(kvprof::test::run_kvprof("make-gguf -m " + config.string() + " -o " + deep.string()).rc,
            0);
  // Not quiet: llama.cpp's startup log on stderr, as llama-server prints it (no debug lines).
  auto a = args(*lib_dir, {"-c", "512", "--duration", "0.2"});
  a.erase(std::find(a.begin(), a.end(), "--quiet"));
  a[1] = deep.string();
  std::string line = "serve";
  for (const auto& word : a)
    line += " " + word;
  const auto r = kvprof::test::run_kvprof(line);
  ASSERT_EQ(r.rc, 0) << r.out;
  const fs::path log = s_dir / "serve_startup.log";
  std::ofstream(log) << r.out;
  const auto parsed = kvprof::test::run_kvprof("parse-log " + log.string() + " --json");
  ASSERT_EQ(parsed.rc, 0) << parsed.out;
  const json j = kvprof::test::json_in(parsed.out);
  std::set<std::string> components;
  for (const auto& f : j["figures"])
    components.insert(f["component"].get<std::string>());
  for (const char* c : {"weights", "kv_cache", "compute"})
    EXPECT_TRUE(components.contains(c)) << c << " missing from:\n" << r.out;
  EXPECT_EQ(j["engine"], "llamacpp");
  EXPECT_EQ(r.out.find("create_tensor: loading tensor"), std::string::npos);  // a debug line
}

TEST_F(ServeE2E, ApiKeyGuardsTheOpenAiEndpointsAsLlamaServerDoes) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_ok);
  ServeProcess serve(args(*lib_dir, {"-c", "256", "--api-key", "s3cret"}));
  ASSERT_NE(serve.port(), 0) << serve.first_line();
  const uint16_t port = serve.port();
  const std::string body = R"({"prompt":"w0 w1","max_tokens":2})";
  auto refused = http_request(port, "POST", "/v1/completions", body);
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(json::parse(refused.body)["error"]["message"], "Invalid API Key") << refused.body;
  EXPECT_EQ(http_request(port, "GET", "/v1/models", "", "Authorization: Bearer wrong\r\n").status,
            401);
  EXPECT_EQ(http_request(port, "GET", "/health").status, 200);  // health stays open
  auto answered =
      http_request(port, "POST", "/v1/completions", body, "Authorization: Bearer s3cret\r\n");
  EXPECT_EQ(answered.status, 200) << answered.body;
  EXPECT_EQ(json::parse(answered.body)["usage"]["completion_tokens"], 2) << answered.body;
}

TEST_F(ServeE2E, EachSlotsContextAsLlamaServerGivesIt) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_ok);
  // -np 2 alone: each slot holds -c / 2 cells; -kvu: one cache, each slot may use all of it.
  for (const auto& [extra, slot_ctx] :
       {std::pair{std::vector<std::string>{"-c", "1024", "-np", "2"}, 512},
        std::pair{std::vector<std::string>{"-c", "1024", "-np", "2", "-kvu"}, 1024}}) {
    ServeProcess serve(args(*lib_dir, extra));
    ASSERT_NE(serve.port(), 0) << serve.first_line();
    const json props = json::parse(http_request(serve.port(), "GET", "/props").body);
    EXPECT_EQ(props["default_generation_settings"]["n_ctx"], slot_ctx) << props.dump(1);
    EXPECT_EQ(props["total_slots"], 2);
  }
}

TEST_F(ServeE2E, CorsOnlyWhenAsked) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_ok);
  {
    ServeProcess plain(args(*lib_dir, {"-c", "256"}));
    ASSERT_NE(plain.port(), 0) << plain.first_line();
    const auto health = http_request(plain.port(), "GET", "/health");
    EXPECT_EQ(health.headers.find("Access-Control"), std::string::npos) << health.headers;
  }
  ServeProcess cors(
      args(*lib_dir, {"-c", "256", "--cors", "http://localhost:3000", "--api-key", "k"}));
  ASSERT_NE(cors.port(), 0) << cors.first_line();
  // A browser's preflight carries no key and is answered; every answer names the origin.
  const auto pre = http_request(cors.port(), "OPTIONS", "/v1/chat/completions", "",
                                "Origin: http://localhost:3000\r\n"
                                "Access-Control-Request-Method: POST\r\n");
  EXPECT_EQ(pre.status, 200);
  EXPECT_NE(pre.headers.find("Access-Control-Allow-Origin: http://localhost:3000\r\n"),
            std::string::npos)
      << pre.headers;
  EXPECT_NE(pre.headers.find("Access-Control-Allow-Headers: Authorization, Content-Type"),
            std::string::npos)
      << pre.headers;
  const auto models =
      http_request(cors.port(), "GET", "/v1/models", "", "Authorization: Bearer k\r\n");
  EXPECT_EQ(models.status, 200);
  EXPECT_NE(models.headers.find("Access-Control-Allow-Origin: http://localhost:3000"),
            std::string::npos)
      << models.headers;
  // An origin that would split the header is refused.
  const auto bad = kvprof::test::run_kvprof("serve -m " + (s_dir / "tiny.gguf").string() +
                                            " --llama-lib " + lib_dir->string() +
                                            " --quiet --cors \"$(printf 'a\\r\\nX-Evil: 1')\"");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("--cors"), std::string::npos) << bad.out;
}

TEST_F(ServeE2E, BadInputsAreOneLineErrors) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(s_ok);
  // A file llama.cpp refuses.
  std::ofstream(s_dir / "broken.gguf") << "GGUF this is not a model";
  auto r = kvprof::test::run_kvprof("serve -m " + (s_dir / "broken.gguf").string() +
                                    " --llama-lib " + lib_dir->string() + " --quiet");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("kvprof: error: llama.cpp could not load"), std::string::npos) << r.out;
  // No libllama.
  r = kvprof::test::run_kvprof("serve -m " + (s_dir / "tiny.gguf").string() + " --llama-lib " +
                               (s_dir / "nowhere").string() + " --quiet");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("kvprof: error:"), std::string::npos) << r.out;
  // A port in use.
  ServeProcess first(args(*lib_dir, {"-c", "256"}));
  ASSERT_NE(first.port(), 0);
  r = kvprof::test::run_kvprof("serve -m " + (s_dir / "tiny.gguf").string() + " --llama-lib " +
                               lib_dir->string() + " --quiet --port " +
                               std::to_string(first.port()));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("cannot listen on"), std::string::npos) << r.out;
}

}  // namespace
