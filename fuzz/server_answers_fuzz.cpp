// libFuzzer target for the readers of a server's answers before a profile run (/v1/models,
// /version, llama.cpp's /props, /tokenize, error bodies): whatever the body, each reader returns
// a value, keeps within its bounds, and what it keeps is valid UTF-8 (a run's JSON files are
// written from it; a JSON dump of invalid UTF-8 throws, which ends the run here as a finding).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kvprof/profile/server_answers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvprof::profile;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  kvprof::profile::ServerInfo info;
  if (read_model_list(body, info)) {
    if (info.models.size() > 64 || info.owned_by.size() > 128) std::abort();
    (void)nlohmann::json({{"models", info.models},
                          {"owned_by", info.owned_by},
                          {"max_model_len", info.max_model_len_tokens}})
        .dump();
  }
  const std::string version = read_server_version(body);
  if (version.size() > 128) std::abort();
  (void)nlohmann::json(version).dump();
  const std::string message = server_message(body);
  if (message.size() > 303) std::abort();
  (void)nlohmann::json(message).dump();
  if (const auto props = read_props_facts(body)) {
    if (props->build.size() > 128) std::abort();  // bounded, as the version
    if (props->model_path.size() > 4096) std::abort();
    if (props->buffers && props->buffers->figures.size() > 3 * 64) std::abort();
  }
  (void)read_tokenize_count(body);
  return 0;
}
