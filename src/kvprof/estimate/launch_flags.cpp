// The plan settings a server's flags set (see launch_flags.hpp).
#include "kvprof/estimate/launch_flags.hpp"

#include <algorithm>
#include <type_traits>

#include "kvprof/model/dtype.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::estimate {

namespace {

// Sets `setting` from the current flag of `walk`; whether it was set.
bool set_one(FlagWalk& walk, LaunchSetting setting, LaunchReading& out) {
  EngineSettings& s = out.settings;
  const auto positive = [&](auto& field) {
    const auto n = read_count(walk.value());
    if (!n || *n == 0) return false;
    field = static_cast<std::remove_reference_t<decltype(field)>>(*n);
    return true;
  };
  const auto positive_optional = [&](auto& field) {
    const auto n = read_count(walk.value());
    if (!n || *n == 0) return false;
    field = static_cast<typename std::remove_reference_t<decltype(field)>::value_type>(*n);
    return true;
  };
  switch (setting) {
    case LaunchSetting::model:
      out.model = walk.value().value_or("");
      return !out.model.empty();
    case LaunchSetting::tensor_parallel_size:
      return positive(s.tensor_parallel_size);
    case LaunchSetting::pipeline_parallel_size:
      return positive(s.pipeline_parallel_size);
    case LaunchSetting::data_parallel_size:
      return positive(s.data_parallel_size);
    case LaunchSetting::enable_expert_parallel:
      s.enable_expert_parallel = true;
      return true;
    case LaunchSetting::max_model_len: {
      const auto n = parse_count(walk.value().value_or(""));
      if (!n || *n == 0) return false;
      s.max_model_len = *n;
      return true;
    }
    case LaunchSetting::gpu_memory_utilization: {
      const auto u = read_number(walk.value());
      if (!u) return false;
      s.gpu_memory_utilization = u;
      return true;
    }
    case LaunchSetting::max_num_seqs:
      return positive_optional(s.max_num_seqs);
    case LaunchSetting::max_num_batched_tokens:
      return positive_optional(s.max_num_batched_tokens);
    case LaunchSetting::block_size:
      return positive_optional(s.block_size);
    case LaunchSetting::cuda_graph_max_bs:
      return positive_optional(s.cuda_graph_max_bs);
    case LaunchSetting::num_gpu_blocks_override:
      return positive_optional(s.num_gpu_blocks_override);
    case LaunchSetting::enforce_eager:
      s.enforce_eager = true;
      return true;
    case LaunchSetting::kv_cache_dtype: {
      const auto kv = parse_kv_cache_dtype(walk.value().value_or(""));
      if (!kv) return false;
      s.kv_cache_dtype = *kv;
      return true;
    }
    case LaunchSetting::dtype: {
      const auto v = to_lower(walk.value().value_or("auto"));
      if (v == "auto") return false;
      const auto d = model::parse_dtype(v);
      if (!d) return false;
      s.dtype = *d;
      return true;
    }
    case LaunchSetting::quantization:
      s.quantization = walk.value().value_or("");
      return !s.quantization.empty();
    case LaunchSetting::enable_dp_attention:
      s.enable_dp_attention = true;
      return true;
    case LaunchSetting::expert_parallel_size:
      return positive(s.expert_parallel_size);
    case LaunchSetting::moe_dense_tp_size:
      return positive_optional(s.moe_dense_tp_size);
    case LaunchSetting::enable_dp_lm_head:
      s.enable_dp_lm_head = true;
      return true;
    case LaunchSetting::moe_a2a_backend:
      if (!moe_backend_splits_experts(walk.value().value_or(""))) return false;
      s.enable_expert_parallel = true;
      return true;
    case LaunchSetting::max_input_tokens: {
      const auto n = parse_count(walk.value().value_or(""));
      if (!n || *n == 0) return false;
      s.max_input_tokens = *n;
      return true;
    }
    case LaunchSetting::cuda_graph_sizes: {
      uint64_t largest = 0;
      for (const auto& size : split(walk.value().value_or(""), ',')) {
        const auto n = read_count(std::optional<std::string>(trim(size)));
        if (!n) return false;
        largest = std::max<uint64_t>(largest, *n);
      }
      if (largest == 0) {
        s.enforce_eager = true;
      } else {
        s.cuda_graph_max_bs = static_cast<uint32_t>(std::min<uint64_t>(largest, UINT32_MAX));
      }
      return true;
    }
    case LaunchSetting::cpu_offload_gib:
    case LaunchSetting::swap_space_gib:
    case LaunchSetting::kv_offloading_gib: {
      const auto gib = read_number(walk.value());
      if (!gib || !(*gib >= 0) || *gib > 1e6) return false;
      const auto bytes = static_cast<uint64_t>(*gib * static_cast<double>(1ULL << 30));
      (setting == LaunchSetting::cpu_offload_gib  ? s.cpu_offload_bytes
       : setting == LaunchSetting::swap_space_gib ? s.swap_space_bytes
                                                  : s.kv_offloading_bytes) = bytes;
      return true;
    }
    case LaunchSetting::kv_transfer_config:
      s.kv_transfer_config = walk.value().value_or("");
      return !s.kv_transfer_config.empty();
    case LaunchSetting::kv_cache_memory_bytes: {
      const auto b = parse_bytes(walk.value().value_or(""));
      if (!b) return false;
      s.kv_cache_memory_bytes = *b;
      return true;
    }
  }
  return false;
}

}  // namespace

void read_launch_flags(FlagWalk& walk, std::span<const LaunchFlag> flags, LaunchReading& out) {
  while (walk.next()) {
    for (const LaunchFlag& f : flags) {
      if (!walk.is(f.names)) continue;
      if (set_one(walk, f.setting, out) && f.given != nullptr) out.given.insert(f.given);
      break;
    }
  }
}

}  // namespace kvprof::estimate
