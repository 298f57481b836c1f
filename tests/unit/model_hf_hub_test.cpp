// Models from the Hugging Face Hub without downloading weights, against a fake Hub on loopback
// that answers like the real one: /ORG/NAME/resolve/REV/FILE with X-Repo-Commit, a redirect of
// weight files to a CDN path that honours Range, 401 + X-Error-Code for gated and unknown
// repos, 404 for missing files; and hostile answers (a header length beyond the file, a server
// that ignores Range, a truncated header, a slow answer). Checks that only headers are fetched,
// that the token goes to the Hub and nowhere else, and that the cache answers offline.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kvprof/model/hf_hub.hpp"
#include "kvprof/model/resolve.hpp"
#include "support/run_kvprof.hpp"
#include "support/scripted_http_server.hpp"
#include "support/temp_dir.hpp"

namespace kvprof::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

const fs::path k_fixtures = fs::path(KVPROF_FIXTURES_DIR) / "hf";
constexpr const char* k_commit = "0123456789abcdef0123456789abcdef01234567";
constexpr const char* k_token = "hf_testtoken123";

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A safetensors file's header (8-byte length + JSON) for `tensors` (name, dtype, shape); the
// data that would follow is `*data_bytes` long.
std::string safetensors_prefix(
    const std::vector<std::tuple<std::string, std::string, std::vector<uint64_t>>>& tensors,
    uint64_t* data_bytes) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, dtype, shape] : tensors) {
    uint64_t n = dtype == "BF16" ? 2 : 4;
    for (const auto d : shape)
      n *= d;
    header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  header["__metadata__"] = {{"format", "pt"}};
  const std::string text = header.dump();
  std::string out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>(static_cast<uint64_t>(text.size()) >> (8 * i)));
  *data_bytes = offset;
  return out + text;
}

// A file the fake Hub serves: its first bytes and its full size (the rest reads as zeros and is
// never materialised: a 16 GB shard costs nothing).
struct FakeFile {
  std::string prefix;
  uint64_t size_bytes = 0;
};

struct FakeRepo {
  std::map<std::string, FakeFile> files;
  bool gated = false;
  bool ignores_range = false;
  int delay_ms = 0;
};

// The two shards and index of a small Llama-shaped checkpoint (bf16), with its config.
FakeRepo llama_repo() {
  FakeRepo repo;
  repo.files["config.json"] = {read_text(k_fixtures / "llama-3.1-8b.json"), 0};
  uint64_t data1 = 0, data2 = 0;
  const std::string shard1 =
      safetensors_prefix({{"model.embed_tokens.weight", "BF16", {128256, 4096}},
                          {"model.layers.0.self_attn.q_proj.weight", "BF16", {4096, 4096}}},
                         &data1);
  const std::string shard2 =
      safetensors_prefix({{"model.layers.31.mlp.down_proj.weight", "BF16", {4096, 14336}},
                          {"lm_head.weight", "BF16", {128256, 4096}}},
                         &data2);
  repo.files["model-00001-of-00002.safetensors"] = {shard1, shard1.size() + data1};
  repo.files["model-00002-of-00002.safetensors"] = {shard2, shard2.size() + data2};
  const json index = {
      {"metadata", {{"total_size", data1 + data2}}},
      {"weight_map",
       {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
        {"model.layers.0.self_attn.q_proj.weight", "model-00001-of-00002.safetensors"},
        {"model.layers.31.mlp.down_proj.weight", "model-00002-of-00002.safetensors"},
        {"lm_head.weight", "model-00002-of-00002.safetensors"}}}};
  repo.files["model.safetensors.index.json"] = {index.dump(), 0};
  for (auto& [name, f] : repo.files) {
    if (f.size_bytes == 0) f.size_bytes = f.prefix.size();
  }
  return repo;
}

class FakeHub {
 public:
  FakeHub()
      : m_server([this](testing::ScriptedHttpServer::Connection& c, uint64_t) {
          answer(c);
          return testing::AfterResponse::close;
        }) {}

  [[nodiscard]] std::string url() const {
    const std::string u = m_server.url("");
    return u.ends_with('/') ? u.substr(0, u.size() - 1) : u;
  }
  // The same server under another host name, as the Hub's CDN is another host.
  [[nodiscard]] std::string cdn_url() const {
    return "http://localhost:" + std::to_string(m_server.port());
  }

  // Serves `repo` under `id`. The lock orders this with the server thread even when the client
  // is another process (a kvprof the test starts), whose requests order nothing in this one.
  void add(const std::string& id, FakeRepo repo) {
    const std::lock_guard lock(m_mutex);
    m_repos[id] = std::move(repo);
  }
  // A copy of the repo served under `id`.
  [[nodiscard]] FakeRepo repo(const std::string& id) const {
    const std::lock_guard lock(m_mutex);
    return m_repos.at(id);
  }

  std::atomic<uint64_t> weight_bytes_served{0};
  std::atomic<int> requests{0};
  std::atomic<int> authorized_cdn_requests{0};  // the token must not follow the redirect

 private:
  static std::string header_value(const std::string& head, const std::string& name) {
    const auto at = head.find("\r\n" + name + ":");
    if (at == std::string::npos) return {};
    const auto start = head.find_first_not_of(' ', at + name.size() + 3);
    return head.substr(start, head.find("\r\n", start) - start);
  }

  static void send(testing::ScriptedHttpServer::Connection& c, const std::string& status,
                   const std::string& body, const std::vector<std::string>& headers = {}) {
    std::string out = "HTTP/1.1 " + status + "\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\nConnection: close\r\n";
    for (const auto& h : headers)
      out += h + "\r\n";
    c.write(out + "\r\n" + body);
  }

  void answer(testing::ScriptedHttpServer::Connection& c) {
    ++requests;
    const std::string& head = c.request_head();
    const auto sp = head.find(' ');
    const std::string path = head.substr(sp + 1, head.find(' ', sp + 1) - sp - 1);
    const bool cdn = path.starts_with("/cdn/");
    // /ORG/NAME/resolve/REV/FILE or /cdn/ORG/NAME/FILE
    std::vector<std::string> parts;
    for (size_t i = 1; i <= path.size();) {
      const auto j = std::min(path.find('/', i), path.size());
      parts.push_back(path.substr(i, j - i));
      i = j + 1;
    }
    if (cdn) parts.erase(parts.begin());
    const std::string repo_id = parts.size() >= 2 ? parts[0] + "/" + parts[1] : "";
    const std::string file =
        cdn ? (parts.size() >= 3 ? parts[2] : "") : (parts.size() >= 5 ? parts[4] : "");
    const std::string auth = header_value(head, "Authorization");
    if (cdn && !auth.empty()) ++authorized_cdn_requests;
    std::optional<FakeRepo> served;
    {
      const std::lock_guard lock(m_mutex);
      if (const auto it = m_repos.find(repo_id); it != m_repos.end()) served = it->second;
    }
    if (!served) {
      send(c, "401 Unauthorized", R"({"error":"Repository not found"})",
           {"X-Error-Code: RepoNotFound"});
      return;
    }
    if (served->delay_ms > 0) c.wait_ms(served->delay_ms);
    if (!cdn && served->gated && auth != std::string("Bearer ") + k_token) {
      send(c, auth.empty() ? "401 Unauthorized" : "403 Forbidden",
           R"({"error":"Access to model is restricted"})", {"X-Error-Code: GatedRepo"});
      return;
    }
    const auto f = served->files.find(file);
    if (f == served->files.end()) {
      send(c, "404 Not Found", R"({"error":"Entry not found"})",
           {"X-Error-Code: EntryNotFound", std::string("X-Repo-Commit: ") + k_commit});
      return;
    }
    const bool weights = file.ends_with(".safetensors");
    if (weights && !cdn) {  // like the Hub's LFS files: a redirect to a CDN on another host
      send(c, "302 Found", "",
           {"Location: " + cdn_url() + "/cdn/" + repo_id + "/" + file,
            std::string("X-Repo-Commit: ") + k_commit});
      return;
    }
    const FakeFile& ff = f->second;
    const auto bytes = [&](uint64_t from, uint64_t to) {  // inclusive
      std::string out;
      for (uint64_t i = from; i <= to && i < ff.size_bytes; ++i)
        out.push_back(i < ff.prefix.size() ? ff.prefix[i] : '\0');
      if (weights) weight_bytes_served += out.size();
      return out;
    };
    const std::string range = header_value(head, "Range");
    std::vector<std::string> headers{std::string("X-Repo-Commit: ") + k_commit};
    if (range.starts_with("bytes=") && !served->ignores_range) {
      const auto dash = range.find('-');
      const uint64_t from = std::stoull(range.substr(6, dash - 6));
      const uint64_t to =
          std::min<uint64_t>(std::stoull(range.substr(dash + 1)), ff.size_bytes - 1);
      headers.push_back("Content-Range: bytes " + std::to_string(from) + "-" + std::to_string(to) +
                        "/" + std::to_string(ff.size_bytes));
      send(c, "206 Partial Content", bytes(from, to), headers);
      return;
    }
    send(c, "200 OK", bytes(0, std::min<uint64_t>(ff.size_bytes, 4U << 20) - 1), headers);
  }

  mutable std::mutex m_mutex;
  std::map<std::string, FakeRepo> m_repos;
  testing::ScriptedHttpServer m_server;
};

HubOptions options_for(const FakeHub& hub, const fs::path& cache) {
  HubOptions o;
  o.endpoint = hub.url();
  o.cache_dir = cache;
  o.timeout_ms = 3000;
  return o;
}

TEST(HfHub, ReadsConfigAndOnlyTheSafetensorsHeadersOfEveryShard) {
  FakeHub hub;
  hub.add("meta-llama/Llama-3.1-8B", llama_repo());
  test::ScopedTempDir cache("kvprof_hub_cache");
  auto files = fetch_hub_files("meta-llama/Llama-3.1-8B", options_for(hub, cache.path));
  ASSERT_TRUE(files) << files.error().message;
  EXPECT_FALSE(files->from_cache);
  EXPECT_EQ(files->commit, k_commit);
  ASSERT_EQ(files->tensors.size(), 4U);
  uint64_t total = 0;
  for (const auto& t : files->tensors)
    total += t.bytes;
  EXPECT_EQ(total, (2ULL * 128256 * 4096 + 4096ULL * 4096 + 4096ULL * 14336) * 2);
  // Two Range requests per shard: 8 bytes, then exactly the JSON header; no tensor data.
  const FakeRepo repo = hub.repo("meta-llama/Llama-3.1-8B");
  EXPECT_EQ(hub.weight_bytes_served.load(),
            repo.files.at("model-00001-of-00002.safetensors").prefix.size() +
                repo.files.at("model-00002-of-00002.safetensors").prefix.size());

  // The answers are in the standard cache layout, the headers beside them.
  const fs::path folder = cache.path / "models--meta-llama--Llama-3.1-8B";
  EXPECT_EQ(read_text(folder / "refs" / "main"), k_commit);
  EXPECT_TRUE(fs::is_regular_file(folder / "snapshots" / k_commit / "config.json"));
  EXPECT_TRUE(
      fs::is_regular_file(folder / "snapshots" / k_commit / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(folder / "snapshots" / k_commit / "model-00001-of-00002.safetensors"))
      << "a header alone must not pose as a .safetensors file";

  // Offline, the cache answers alone, with the same tensors.
  const int before = hub.requests.load();
  HubOptions offline = options_for(hub, cache.path);
  offline.offline = true;
  auto cached = fetch_hub_files("meta-llama/Llama-3.1-8B", offline);
  ASSERT_TRUE(cached) << cached.error().message;
  EXPECT_TRUE(cached->from_cache);
  EXPECT_EQ(hub.requests.load(), before);
  ASSERT_EQ(cached->tensors.size(), files->tensors.size());
  for (size_t i = 0; i < cached->tensors.size(); ++i) {
    EXPECT_EQ(cached->tensors[i].name, files->tensors[i].name);
    EXPECT_EQ(cached->tensors[i].bytes, files->tensors[i].bytes);
  }
}

TEST(HfHub, TheModelIsTheSameAsFromALocalFolder) {
  // An id the catalog lacks (a catalog id is read from the catalog, offline and at once).
  FakeHub hub;
  hub.add("someorg/Llama-Derivative-8B", llama_repo());
  test::ScopedTempDir cache("kvprof_hub_cache");
  LoadOptions load;
  load.hub = options_for(hub, cache.path);
  auto from_hub = load_model("someorg/Llama-Derivative-8B", load);
  ASSERT_TRUE(from_hub) << from_hub.error().message;
  EXPECT_EQ(from_hub->id, "someorg/Llama-Derivative-8B");
  EXPECT_EQ(from_hub->origin, ModelSpec::Origin::safetensors);
  EXPECT_NE(from_hub->source.find(k_commit), std::string::npos) << from_hub->source;
  // The same config and tensors in a folder: the same model, the same warnings.
  test::ScopedTempDir folder("kvprof_hub_folder");
  const FakeRepo served = hub.repo("someorg/Llama-Derivative-8B");
  for (const auto& [name, f] : served.files) {
    std::ofstream(folder.path / name, std::ios::binary) << f.prefix << std::string(0, '\0');
  }
  // Local shards need their data: write sparse files of the full size.
  for (const auto& [name, f] : served.files) {
    if (name.ends_with(".safetensors")) fs::resize_file(folder.path / name, f.size_bytes);
  }
  auto local = load_model(folder.path.string());
  ASSERT_TRUE(local) << local.error().message;
  EXPECT_EQ(from_hub->n_layer, local->n_layer);
  EXPECT_EQ(from_hub->tensors.size(), local->tensors.size());
  EXPECT_EQ(from_hub->warnings, local->warnings);  // e.g. "2 decoder layers ... says 32"
}

TEST(HfHub, GatedReposNeedTheTokenWhichNeverFollowsARedirect) {
  FakeHub hub;
  FakeRepo gated = llama_repo();
  gated.gated = true;
  hub.add("meta-llama/Llama-3.1-8B", gated);
  test::ScopedTempDir cache("kvprof_hub_cache");
  HubOptions o = options_for(hub, cache.path);
  auto refused = fetch_hub_files("meta-llama/Llama-3.1-8B", o);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::network);
  EXPECT_NE(refused.error().message.find("gated or private"), std::string::npos);
  EXPECT_NE(refused.error().message.find("HF_TOKEN"), std::string::npos);
  o.token = "hf_wrong";
  auto wrong = fetch_hub_files("meta-llama/Llama-3.1-8B", o);
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("refused the token (HTTP 403)"), std::string::npos)
      << wrong.error().message;
  o.token = k_token;
  auto ok = fetch_hub_files("meta-llama/Llama-3.1-8B", o);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->tensors.size(), 4U);
  EXPECT_EQ(hub.authorized_cdn_requests.load(), 0);
  // The token is in no file of the cache.
  for (const auto& e : fs::recursive_directory_iterator(cache.path)) {
    if (e.is_regular_file()) {
      EXPECT_EQ(read_text(e.path()).find(k_token), std::string::npos) << e.path();
    }
  }
}

TEST(HfHub, UnknownReposMissingFilesAndOfflineMissesAreNotFound) {
  FakeHub hub;
  FakeRepo config_only;
  config_only.files["config.json"] = {read_text(k_fixtures / "qwen2.5-7b.json"), 0};
  config_only.files["config.json"].size_bytes = config_only.files["config.json"].prefix.size();
  hub.add("Qwen/pytorch-bin-only", config_only);
  test::ScopedTempDir cache("kvprof_hub_cache");
  const HubOptions o = options_for(hub, cache.path);

  auto unknown = fetch_hub_files("nobody/nothing", o);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().kind, ErrorKind::not_found);
  EXPECT_NE(unknown.error().message.find("no such model on the Hugging Face Hub"),
            std::string::npos);

  // A repo without safetensors (only .bin weights): the config alone, with a note.
  auto bin_only = fetch_hub_files("Qwen/pytorch-bin-only", o);
  ASSERT_TRUE(bin_only) << bin_only.error().message;
  EXPECT_TRUE(bin_only->tensors.empty());
  ASSERT_EQ(bin_only->notes.size(), 1U);
  EXPECT_NE(bin_only->notes[0].find("no safetensors"), std::string::npos);

  HubOptions offline = o;
  offline.offline = true;
  const int before = hub.requests.load();
  auto missing = fetch_hub_files("meta-llama/Llama-3.1-70B", offline);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::not_found);
  EXPECT_NE(missing.error().message.find("offline"), std::string::npos);
  EXPECT_EQ(hub.requests.load(), before);

  EXPECT_FALSE(fetch_hub_files("../etc/passwd", o));
  EXPECT_FALSE(fetch_hub_files("a/b/c", o));
}

TEST(HfHub, HostileAndSlowAnswersAreClearErrors) {
  FakeHub hub;
  test::ScopedTempDir cache("kvprof_hub_cache");
  HubOptions o = options_for(hub, cache.path);  // 3 s: a loaded machine still answers in time

  FakeRepo huge = llama_repo();
  auto& shard = huge.files["model-00001-of-00002.safetensors"];
  shard.prefix.replace(0, 8, std::string("\x00\x00\x00\x00\x00\x01\x00\x00", 8));  // 2^40
  hub.add("evil/huge-header", huge);
  auto e1 = fetch_hub_files("evil/huge-header", o);
  ASSERT_FALSE(e1);
  EXPECT_EQ(e1.error().kind, ErrorKind::input);
  EXPECT_NE(e1.error().message.find("header length"), std::string::npos) << e1.error().message;

  FakeRepo truncated = llama_repo();
  auto& t = truncated.files["model-00002-of-00002.safetensors"];
  t.prefix.resize(t.prefix.size() - 10);  // the JSON header is cut short
  t.size_bytes = t.prefix.size();
  hub.add("evil/truncated", truncated);
  auto e2 = fetch_hub_files("evil/truncated", o);
  ASSERT_FALSE(e2);
  EXPECT_EQ(e2.error().kind, ErrorKind::input) << e2.error().message;

  FakeRepo no_range = llama_repo();
  no_range.ignores_range = true;
  hub.add("evil/no-range", no_range);
  auto e3 = fetch_hub_files("evil/no-range", o);
  ASSERT_FALSE(e3);
  EXPECT_LT(hub.weight_bytes_served.load(), 8U << 20) << "a Range-less answer must be cut short";

  FakeRepo bad_index = llama_repo();
  bad_index.files["model.safetensors.index.json"].prefix =
      R"({"weight_map":{"x":"../../../etc/passwd"}})";
  hub.add("evil/index", bad_index);
  auto e4 = fetch_hub_files("evil/index", o);
  ASSERT_FALSE(e4);
  EXPECT_NE(e4.error().message.find("not a file name"), std::string::npos) << e4.error().message;

  FakeRepo slow = llama_repo();
  slow.delay_ms = 2000;
  hub.add("slow/model", slow);
  const auto start = std::chrono::steady_clock::now();
  o.timeout_ms = 500;
  auto e5 = fetch_hub_files("slow/model", o);
  ASSERT_FALSE(e5);
  EXPECT_EQ(e5.error().kind, ErrorKind::network);
  EXPECT_NE(e5.error().message.find("did not answer"), std::string::npos) << e5.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1900ms);
}

TEST(HfHub, ContentRangeAndRepoIds) {
  EXPECT_EQ(parse_content_range_size("bytes 0-7/16060522496"), 16060522496ULL);
  EXPECT_EQ(parse_content_range_size(" bytes 8-100/101 "), 101U);
  EXPECT_FALSE(parse_content_range_size("bytes 0-7/*"));
  EXPECT_FALSE(parse_content_range_size("bytes 0-7/99999999999999999999"));
  EXPECT_FALSE(parse_content_range_size("items 0-7/10"));
  EXPECT_TRUE(is_hub_repo_id("Qwen/Qwen3-235B-A22B-Instruct-2507"));
  EXPECT_TRUE(is_hub_repo_id("deepseek-ai/DeepSeek-R1-0528"));
  for (const char* bad :
       {"noslash", "a/b/c", "../x", "a/..", "a/.hidden", "a/b c", "/a", "a/", "a/b?c", "a/-x"}) {
    EXPECT_FALSE(is_hub_repo_id(bad)) << bad;
  }
}

TEST(HfHub, EstimateReadsAModelTheCatalogLacksFromTheHubThenOffline) {
  FakeHub hub;
  hub.add("someorg/Llama-Derivative-8B", llama_repo());
  test::ScopedTempDir cache("kvprof_hub_cache");
  const std::string env = "HF_ENDPOINT=" + hub.url() + " HF_HUB_CACHE=" + cache.path.string() +
                          " HF_TOKEN= HF_HUB_OFFLINE= ";
  auto r = test::run_kvprof_env(env,
                                "estimate --model someorg/Llama-Derivative-8B --gpu H100 "
                                "--json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const json online = test::json_in(r.out);
  ASSERT_TRUE(online.is_object()) << r.out;
  EXPECT_NE(online.dump().find("someorg/Llama-Derivative-8B"), std::string::npos);
  auto offline = test::run_kvprof_env(env + "HF_HUB_OFFLINE=1 ",
                                      "estimate --model someorg/Llama-Derivative-8B --gpu H100 "
                                      "--json");
  ASSERT_EQ(offline.rc, 0) << offline.out;
  json cached = test::json_in(offline.out);
  ASSERT_TRUE(cached.is_object()) << offline.out;
  // The same figures; the source says where each came from.
  EXPECT_NE(online["model"]["source"].get<std::string>().find(hub.url() + "/someorg/"),
            std::string::npos);
  EXPECT_NE(cached["model"]["source"].get<std::string>().find(cache.path.string()),
            std::string::npos);
  EXPECT_EQ(cached["per_gpu"], online["per_gpu"]);
  EXPECT_TRUE(cached["weights_detail"]["from_checkpoint_tensors"].get<bool>());
  cached["model"]["source"] = online["model"]["source"];
  EXPECT_EQ(cached, online);
  // An unknown repo: the Hub's answer and the catalog's suggestions, exit 2.
  auto unknown = test::run_kvprof_env(env, "estimate --model someorg/nothing-here --gpu H100");
  EXPECT_EQ(unknown.rc, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("no such model on the Hugging Face Hub"), std::string::npos)
      << unknown.out;
}

TEST(HfHub, AnUnreachableHubIsOneLineWithoutTheEndpointsPassword) {
  test::ScopedTempDir cache("kvprof_hub_cache");
  auto r = test::run_kvprof_env("HF_ENDPOINT=http://bob:s3cret@127.0.0.1:1 HF_HUB_CACHE=" +
                                    cache.path.string() + " HF_HUB_OFFLINE=",
                                "estimate --model someorg/unreachable-model");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("did not answer for someorg/unreachable-model"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("s3cret"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

// Qwen2.5-VL's 32B and 72B offline: the text model of that size (Qwen2.5-72B-Instruct) with the
// vision tower every Qwen2.5-VL size shares (the catalog's 7B's), its merger projecting to the
// text width.
TEST(HfHub, AVisionModelOfAnotherSizeIsComposedFromTheCatalog) {
  test::ScopedTempDir cache("kvprof_hub_cache");
  LoadOptions load;
  load.hub.cache_dir = cache.path;
  load.hub.offline = true;
  auto vl = load_model("Qwen/Qwen2.5-VL-72B-Instruct", load);
  ASSERT_TRUE(vl) << vl.error().message;
  EXPECT_EQ(vl->id, "Qwen/Qwen2.5-VL-72B-Instruct");
  EXPECT_EQ(vl->n_layer, 80U);
  EXPECT_EQ(vl->hidden_size, 8192U);
  EXPECT_EQ(vl->n_head_kv, 8U);
  EXPECT_GT(vl->extra_params, 500'000'000U);  // the vision tower and its merger
  ASSERT_FALSE(vl->warnings.empty());
  const std::string& said = vl->warnings.back();
  EXPECT_NE(said.find("Qwen/Qwen2.5-72B-Instruct's text model with "
                      "Qwen/Qwen2.5-VL-7B-Instruct's vision tower"),
            std::string::npos)
      << said;
  // A size whose text model the catalog lacks is not made up.
  EXPECT_FALSE(load_model("Qwen/Qwen2.5-VL-13B-Instruct", load).has_value());
}

TEST(HfHub, AVariantOfACatalogModelIsDescribedByItWithANote) {
  test::ScopedTempDir cache("kvprof_hub_cache");
  LoadOptions load;
  load.hub.cache_dir = cache.path;
  load.hub.offline = true;
  auto base = load_model("Qwen/Qwen2-0.5B", load);  // the catalog has only the Instruct
  ASSERT_TRUE(base) << base.error().message;
  EXPECT_EQ(base->id, "Qwen/Qwen2-0.5B-Instruct");
  ASSERT_FALSE(base->warnings.empty());
  EXPECT_NE(base->warnings[0].find("described by the built-in catalog's "
                                   "Qwen/Qwen2-0.5B-Instruct"),
            std::string::npos)
      << base->warnings[0];
  auto renamed = load_model("meta-llama/Meta-Llama-3.1-8B-Instruct", load);
  ASSERT_TRUE(renamed) << renamed.error().message;
  EXPECT_EQ(renamed->id, "meta-llama/Llama-3.1-8B-Instruct");
  // A dated release of the same architecture.
  auto dated = load_model("deepseek-ai/DeepSeek-R1-0528", load);
  ASSERT_TRUE(dated) << dated.error().message;
  EXPECT_EQ(dated->id, "deepseek-ai/DeepSeek-R1");
  auto qwen = load_model("Qwen/Qwen3-235B-A22B-Instruct-2507", load);
  ASSERT_TRUE(qwen) << qwen.error().message;
  EXPECT_EQ(qwen->id, "Qwen/Qwen3-235B-A22B");
  // A quantized checkpoint of a catalog model: that model, priced as such checkpoints are, and
  // the note says so.
  auto awq = load_model("Qwen/Qwen2.5-72B-Instruct-AWQ", load);
  ASSERT_TRUE(awq) << awq.error().message;
  EXPECT_EQ(awq->id, "Qwen/Qwen2.5-72B-Instruct");
  EXPECT_EQ(awq->quant.method, QuantMethod::awq);
  EXPECT_EQ(awq->quant.weight_bits, 4U);
  EXPECT_TRUE(awq->quant.from_checkpoint);
  EXPECT_NE(awq->warnings.back().find("Qwen/Qwen2.5-72B-Instruct with awq quantization"),
            std::string::npos)
      << awq->warnings.back();
  auto fp8 = load_model("meta-llama/Meta-Llama-3.1-70B-Instruct-FP8-dynamic", load);
  ASSERT_TRUE(fp8) << fp8.error().message;
  EXPECT_EQ(fp8->id, "meta-llama/Llama-3.1-70B-Instruct");
  EXPECT_EQ(fp8->quant.method, QuantMethod::compressed_tensors);
  EXPECT_EQ(load_model("Qwen/Qwen2.5-72B-Instruct-FP8", load).value().quant.block_rows, 128U);
  // A name that is no variant of anything stays an error, quantized or not.
  EXPECT_FALSE(load_model("meta-llama/Llama-9-1T", load));
  EXPECT_FALSE(load_model("meta-llama/Llama-9-1T-AWQ", load));
}

}  // namespace
}  // namespace kvprof::model
