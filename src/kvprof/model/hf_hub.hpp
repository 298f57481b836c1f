// A model's files from the Hugging Face Hub, without downloading weights: config.json, then for
// exact bytes only the safetensors *headers* (model.safetensors.index.json, then per shard an
// HTTP Range request for its 8-byte length and one for its JSON header). The local HF cache
// (HF_HUB_CACHE, HF_HOME/hub or ~/.cache/huggingface/hub) is read first and answers are written
// back to it: config.json and the index in the standard snapshot layout, the headers beside it
// under kvprof-headers/ (a header alone is not a .safetensors file other tools could use).
// HF_ENDPOINT (mirrors, the tests' fake Hub), HF_TOKEN and HF_HUB_OFFLINE are honoured; the
// token is sent to the Hub only, never written anywhere.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::model {

struct HubOptions {
  std::string endpoint = "https://huggingface.co";
  std::optional<std::string> token;  // gated and private repos
  bool offline = false;              // the cache only
  std::filesystem::path cache_dir;   // the hub cache (models--ORG--NAME/ folders)
  std::string revision = "main";     // branch, tag or commit
  uint32_t timeout_ms = 15'000;      // per request
};

// Options from the environment: HF_ENDPOINT, HF_TOKEN (or HUGGING_FACE_HUB_TOKEN), HF_HUB_OFFLINE
// (1/true/yes/on), HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, HOME.
HubOptions hub_options_from_env();

// What the Hub (or the cache) holds for a model.
struct HubFiles {
  std::string repo_id;              // "Qwen/Qwen2.5-7B-Instruct"
  std::string commit;               // the snapshot's commit ("" when the Hub gave none)
  std::string config_text;          // config.json
  std::vector<TensorInfo> tensors;  // every safetensors header; empty when there are none
  std::string source;               // "<endpoint>/<repo> @ <commit>" or the cache folder
  std::vector<std::string> notes;   // e.g. no safetensors on the Hub, cache not writable
  bool from_cache = false;
};

// True when `ref` has the form of a Hub repo id: ORG/NAME, each 1..96 of [A-Za-z0-9._-], not
// starting or ending with '.' or '-', no "..".
bool is_hub_repo_id(std::string_view ref);

// The HF cache folder of a repo: <cache_dir>/models--ORG--NAME.
std::filesystem::path hub_cache_folder(const HubOptions& options, std::string_view repo_id);

// Reads `repo_id` from the cache, else (unless offline) from the Hub. Errors: not_found for a
// repo the Hub does not have (404) or that is not cached while offline; network for a gated
// repo without a token or with a refused one (401/403, naming HF_TOKEN), an unreachable Hub, or
// a slow answer; input for a malformed config, index, Range answer or header.
Expected<HubFiles> fetch_hub_files(std::string_view repo_id, const HubOptions& options);

// "bytes 0-7/12345" -> 12345 (the full size); nothing for a malformed or unbounded value.
std::optional<uint64_t> parse_content_range_size(std::string_view content_range);

}  // namespace kvprof::model
