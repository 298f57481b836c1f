// TGI's launcher flags read into a plan's settings (see launch_reading.hpp):
// `text-generation-launcher --model-id MODEL` with the flags that decide its memory, or a
// `docker run ... ghcr.io/huggingface/text-generation-inference:TAG --model-id MODEL`, whose
// entry point is the launcher (the tag, when it is a version, is the release planned). Flags
// kvprof does not plan are left to the caller's settings.
#include <cctype>

#include "kvprof/engines/tgi/tgi.hpp"
#include "kvprof/estimate/launch_flags.hpp"
#include "kvprof/util/command_flags.hpp"

namespace kvprof::engines {

namespace {

using estimate::LaunchSetting;

// TGI's flags by its own names, and the setting of kvprof's plan each stands for (its shards are
// tensor parallel ranks, its total tokens the longest request, its prefill tokens the batch
// budget, its CUDA memory fraction the share of the GPU it may use).
const estimate::LaunchFlag k_tgi_flags[] = {
    {{"--model-id"}, LaunchSetting::model, nullptr},
    {{"--num-shard"}, LaunchSetting::tensor_parallel_size, "tensor-parallel-size"},
    {{"--max-input-tokens", "--max-input-length"},
     LaunchSetting::max_input_tokens,
     "max-input-tokens"},
    {{"--max-total-tokens"}, LaunchSetting::max_model_len, "max-model-len"},
    {{"--max-batch-prefill-tokens"},
     LaunchSetting::max_num_batched_tokens,
     "max-num-batched-tokens"},
    {{"--max-batch-size"}, LaunchSetting::max_num_seqs, "max-num-seqs"},
    {{"--cuda-memory-fraction"}, LaunchSetting::gpu_memory_utilization, "gpu-memory-utilization"},
    {{"--cuda-graphs"}, LaunchSetting::cuda_graph_sizes, "cuda-graph-max-bs"},
    {{"--kv-cache-dtype"}, LaunchSetting::kv_cache_dtype, "kv-cache-dtype"},
    {{"--dtype"}, LaunchSetting::dtype, "dtype"},
    {{"--quantize"}, LaunchSetting::quantization, "quantization"},
};

// The release a TGI image's tag names ("ghcr.io/huggingface/text-generation-inference:2.2.0" ->
// "2.2.0"); "" for "latest", "sha-..." and images without a tag.
std::string tgi_image_release(std::string_view image) {
  const size_t colon = image.rfind(':');
  if (colon == std::string_view::npos || image.find('/', colon) != std::string_view::npos)
    return "";
  const auto tag = image.substr(colon + 1);
  if (tag.empty() || tag.size() > 16 || !std::isdigit(static_cast<unsigned char>(tag.front())))
    return "";
  return std::string(tag);
}

}  // namespace

bool read_tgi_command(std::span<const std::string> words, estimate::LaunchReading& out) {
  if (words.empty()) return false;
  const auto program = program_name(words.front());
  const bool launcher = program == "text-generation-launcher";
  // `docker run` reaches here from its image's word: the words after it are the launcher's.
  const bool image = !launcher &&
                     words.front().find("text-generation-inference") != std::string::npos &&
                     !words.front().starts_with("-");
  if (!launcher && !image) return false;
  out.program = "text-generation-launcher";
  auto& s = out.settings;
  s.engine = Engine::tgi;
  if (image) {
    if (auto release = tgi_image_release(words.front()); !release.empty())
      s.engine_version = std::move(release);
  }
  FlagWalk w(words.subspan(1));
  estimate::read_launch_flags(w, k_tgi_flags, out);
  return true;
}

}  // namespace kvprof::engines
