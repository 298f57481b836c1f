// vLLM V1 KV cache grouping and block accounting (facts from vllm/v1/core/kv_cache_utils.py
// and kv_cache_interface.py: get_kv_cache_groups, get_num_blocks, _report_kv_cache_config,
// get_max_concurrency_for_kv_cache_config, SlidingWindowSpec.max_memory_usage_bytes).
#include "kvprof/engines/vllm/kv.hpp"
#include "kvprof/util/units.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner below every engine

namespace {

using model::AttentionKind;

bool is_state(AttentionKind k) {
  return k == AttentionKind::mamba || k == AttentionKind::linear;
}

using SpecKey = std::tuple<int, uint64_t, uint64_t, uint32_t>;

SpecKey key_of(const KvLayerSpec& l) {
  // Full attention and MLA layers allocate alike; windows distinguish sliding layers.
  const int kind = l.kind == AttentionKind::mla ? static_cast<int>(AttentionKind::full)
                                                : static_cast<int>(l.kind);
  return {kind, l.bytes_per_token, l.state_bytes, l.window_tokens};
}

uint64_t max_usage_blocks(const VllmKvSpec& s, uint64_t tokens, uint32_t mnbt) {
  switch (s.kind) {
    case AttentionKind::sliding: {
      const uint64_t n = std::min<uint64_t>(s.window_tokens - 1 + mnbt, tokens);
      return ceil_div(n, s.block_size) + 1;
    }
    case AttentionKind::chunked: {
      const uint64_t n = std::min<uint64_t>(s.window_tokens + mnbt, tokens);
      return ceil_div(n, s.block_size);
    }
    case AttentionKind::mamba:
    case AttentionKind::linear:
      return 1;
    default:
      return ceil_div(tokens, s.block_size);
  }
}

uint32_t state_block_size(uint64_t max_model_len) {
  return static_cast<uint32_t>(std::min<uint64_t>(max_model_len, UINT32_MAX));
}

}  // namespace

uint64_t vllm_blocks_per_request(const VllmKvGeometry& g, uint64_t tokens, uint32_t mnbt) {
  uint64_t blocks = 0;
  if (g.uniform_type) {
    return g.groups.empty() ? 0 : ceil_div(tokens, g.groups.front().spec.block_size);
  }
  for (const auto& group : g.groups)
    blocks += max_usage_blocks(group.spec, tokens, mnbt);
  return blocks;
}

VllmKvGeometry vllm_kv_geometry(const std::vector<KvLayout>& workers, uint32_t block_size_flag,
                                bool block_size_set) {
  VllmKvGeometry geo;
  const size_t n_workers = workers.size();
  geo.block_bytes_per_worker.assign(n_workers, 0);
  // 1. Merge the layers of all workers and group them by spec, in first-seen order.
  std::vector<SpecKey> order;
  std::map<SpecKey, std::vector<const KvLayerSpec*>> by_key;
  for (const auto& w : workers) {
    for (const auto& l : w.layers) {
      const SpecKey k = key_of(l);
      if (!by_key.contains(k)) order.push_back(k);
      by_key[k].push_back(&l);
    }
  }
  if (order.empty()) return geo;  // attention-free models: only the null block
  // 2. Specs with block sizes; hybrid attention + state models enlarge the attention block so
  //    one attention page covers a state page (vLLM HybridAttentionMambaModelConfig).
  uint64_t max_state = 0;
  uint64_t min_attn_token_bytes = 0;
  bool all_attention = true;
  for (const auto& k : order) {
    const auto* l = by_key[k].front();
    if (is_state(l->kind)) {
      max_state = std::max(max_state, l->state_bytes);
      all_attention = false;
    } else if (min_attn_token_bytes == 0 || l->bytes_per_token < min_attn_token_bytes) {
      min_attn_token_bytes = l->bytes_per_token;
    }
  }
  uint32_t block_size = std::max<uint32_t>(block_size_flag, 1);
  if (max_state > 0 && min_attn_token_bytes > 0 && !block_size_set) {
    // vLLM: block = 16 * ceil_div(mamba_page, 16 * attention bytes per token) (summed over layers
    // of a group it is one layer's page).
    const uint64_t per_16 = 16 * min_attn_token_bytes;
    block_size = static_cast<uint32_t>(std::max<uint64_t>(16, 16 * ceil_div(max_state, per_16)));
  }
  geo.attention_block_size = block_size;

  std::vector<VllmKvSpec> specs;
  for (const auto& k : order) {
    const auto* l = by_key[k].front();
    VllmKvSpec s;
    s.kind = l->kind;
    s.bytes_per_token = l->bytes_per_token;
    s.state_bytes = l->state_bytes;
    s.window_tokens = l->window_tokens;
    if (is_state(l->kind)) {
      s.block_size = 0;  // max_model_len: set where it is known
      s.page_bytes = l->state_bytes;
    } else {
      s.block_size = block_size;
      s.page_bytes = block_size * l->bytes_per_token;
    }
    specs.push_back(s);
  }

  // 3. One type, or several attention types of different widths (UniformTypeKVCacheSpecs).
  bool same_semantics = all_attention;
  for (const auto& s : specs) {
    same_semantics = same_semantics && s.kind == specs.front().kind &&
                     s.window_tokens == specs.front().window_tokens;
  }
  if (specs.size() == 1 || same_semantics) {
    geo.uniform_type = specs.size() > 1;
    VllmKvGroup g;
    g.spec = specs.front();
    for (const auto& k : order) {
      for (const auto* l : by_key[k])
        g.layers.push_back(l->layer);
    }
    geo.groups.push_back(std::move(g));
    for (size_t w = 0; w < n_workers; ++w) {
      for (const auto& l : workers[w].layers)
        geo.block_bytes_per_worker[w] += block_size * l.bytes_per_token;
    }
    return geo;
  }
  // 4. Hybrid: unify page sizes, split each type into groups of group_size layers.
  uint64_t page = 0;
  for (const auto& s : specs)
    page = std::max(page, s.page_bytes);
  for (auto& s : specs) {
    if (!is_state(s.kind) && s.page_bytes > 0 && s.page_bytes < page && page % s.page_bytes == 0) {
      s.block_size = static_cast<uint32_t>(s.block_size * (page / s.page_bytes));
    }
    s.page_bytes = page;
  }
  size_t min_layers = SIZE_MAX;
  size_t max_layers = 0;
  for (const auto& k : order) {
    min_layers = std::min(min_layers, by_key[k].size());
    max_layers = std::max(max_layers, by_key[k].size());
  }
  size_t group_size = min_layers;
  if (static_cast<double>(max_layers) < static_cast<double>(min_layers) * 1.5) {
    group_size = max_layers;
  }
  for (size_t t = 0; t < order.size(); ++t) {
    const auto& layers = by_key[order[t]];
    const size_t n_groups = ceil_div(layers.size(), group_size);
    for (size_t i = 0; i < n_groups; ++i) {
      VllmKvGroup g;
      g.spec = specs[t];
      for (size_t j = i; j < layers.size(); j += n_groups)
        g.layers.push_back(layers[j]->layer);
      geo.groups.push_back(std::move(g));
    }
  }
  // A block is one page for each layer of the worker's largest group (vLLM allocates
  // group_size tensors of num_blocks pages).
  for (size_t w = 0; w < n_workers; ++w) {
    size_t worker_group_size = 0;
    for (const auto& g : geo.groups) {
      size_t n = 0;
      for (uint32_t id : g.layers) {
        for (const auto& l : workers[w].layers)
          n += l.layer == id ? 1 : 0;
      }
      worker_group_size = std::max(worker_group_size, n);
    }
    geo.block_bytes_per_worker[w] = page * worker_group_size;
  }
  return geo;
}

uint64_t vllm_worker_blocks(const VllmKvGeometry& g, size_t worker, int64_t available_bytes) {
  const uint64_t block_bytes = g.block_bytes_per_worker[worker];
  const int64_t avail = std::max<int64_t>(available_bytes, 0);
  return block_bytes == 0 ? 0 : static_cast<uint64_t>(avail) / block_bytes;
}

VllmKvFigures vllm_kv_figures(const VllmKvGeometry& g, uint64_t num_blocks, const VllmKvParams& p) {
  VllmKvFigures f;
  if (g.groups.empty()) return f;
  uint32_t min_block = UINT32_MAX;
  for (const auto& group : g.groups) {
    const bool state = is_state(group.spec.kind);
    min_block =
        std::min(min_block, state ? state_block_size(p.max_model_len) : group.spec.block_size);
  }
  f.kv_cache_tokens = num_blocks / g.groups.size() * min_block;
  f.blocks_per_max_len_request =
      vllm_blocks_per_request(g, p.max_model_len, p.max_num_batched_tokens);
  f.max_concurrency = f.blocks_per_max_len_request == 0
                          ? 0
                          : static_cast<double>(num_blocks) / f.blocks_per_max_len_request;
  return f;
}

VllmKvConfig vllm_kv_config(const std::vector<KvLayout>& workers,
                            const std::vector<int64_t>& available_bytes, const VllmKvParams& p) {
  VllmKvConfig cfg;
  static_cast<VllmKvGeometry&>(cfg) = vllm_kv_geometry(workers, p.block_size, p.block_size_set);
  if (cfg.groups.empty()) {
    cfg.num_blocks = 1;  // attention-free models: only the null block
    return cfg;
  }
  for (auto& g : cfg.groups) {
    if (is_state(g.spec.kind)) g.spec.block_size = state_block_size(p.max_model_len);
  }
  // The smallest worker decides; an override replaces it.
  const size_t n_workers = workers.size();
  for (size_t w = 0; w < n_workers; ++w)
    cfg.blocks_per_worker.push_back(vllm_worker_blocks(cfg, w, available_bytes[w]));
  cfg.num_blocks = *std::min_element(cfg.blocks_per_worker.begin(), cfg.blocks_per_worker.end());
  if (p.num_gpu_blocks_override) cfg.num_blocks = *p.num_gpu_blocks_override;
  for (size_t w = 0; w < n_workers; ++w)
    cfg.pool_bytes_per_worker.push_back(cfg.block_bytes_per_worker[w] * cfg.num_blocks);
  const VllmKvFigures f = vllm_kv_figures(cfg, cfg.num_blocks, p);
  cfg.kv_cache_tokens = f.kv_cache_tokens;
  cfg.blocks_per_max_len_request = f.blocks_per_max_len_request;
  cfg.max_concurrency = f.max_concurrency;
  return cfg;
}

}  // namespace kvprof::engines
