// LlamaModel / LlamaContext: loading, context creation and batched greedy decoding.
#include "kvprof/llama/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "kvprof/client/transport.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::llama {
namespace {

// The last few lines llama.cpp logged, joined for an error message.
std::string last_lines(const LlamaLib& lib, size_t n) {
  std::string out;
  for (const auto& line : lib.recent_log(n)) {
    if (line.empty()) continue;
    out += (out.empty() ? "" : " | ") + line;
  }
  return out.empty() ? "llama.cpp logged nothing" : "llama.cpp said: " + out;
}

}  // namespace

Expected<FlashAttn> parse_flash_attn(const std::string& value) {
  const std::string v = to_lower(value);
  if (v == "on" || v == "1" || v == "true" || v == "enabled") return FlashAttn::on;
  if (v == "off" || v == "0" || v == "false" || v == "disabled") return FlashAttn::off;
  if (v == "auto" || v == "-1") return FlashAttn::auto_;
  return fail(ErrorKind::usage, fmt::format("-fa takes on, off or auto, not '{}'", value));
}

const char* flash_attn_name(FlashAttn fa) {
  switch (fa) {
    case FlashAttn::on:
      return "on";
    case FlashAttn::off:
      return "off";
    case FlashAttn::auto_:
      break;
  }
  return "auto";
}

Expected<std::unique_ptr<LlamaModel>> LlamaModel::load(std::shared_ptr<LlamaLib> lib,
                                                       const LlamaSettings& settings) {
  std::unique_ptr<LlamaModel> model(new LlamaModel());
  model->m_lib = std::move(lib);
  const auto& f = model->m_lib->fn();
  abi::ModelParams params = model->m_lib->default_model_params();
  params.n_gpu_layers = settings.n_gpu_layers;
  params.load_mode = settings.use_mmap ? 1 : 0;  // mmap, or read into memory
  // -ot: each override's buffer type is a device's ("CPU", "CUDA0"), named as llama.cpp names it.
  std::vector<abi::TensorBuftOverride> overrides;
  for (const auto& [pattern, buffer] : settings.tensor_overrides) {
    void* buft = nullptr;
    std::string names;
    for (size_t i = 0; i < f.backend_dev_count() && buft == nullptr; ++i) {
      abi::BackendDevice* dev = f.backend_dev_get(i);
      const std::string name = f.backend_dev_name(dev);
      names += (names.empty() ? "" : ", ") + name;
      if (name == buffer) buft = f.backend_dev_buffer_type(dev);
    }
    if (buft == nullptr) {
      return fail(ErrorKind::usage, fmt::format("-ot {}={}: this libllama has no buffer type '{}' "
                                                "(its devices: {})",
                                                pattern, buffer, buffer, names));
    }
    overrides.push_back({pattern.c_str(), buft});
  }
  if (!overrides.empty()) {
    overrides.push_back({nullptr, nullptr});
    params.tensor_buft_overrides = overrides.data();
  }
  model->m_model = f.model_load_from_file(settings.model_path.c_str(), params);
  if (model->m_model == nullptr) {
    return fail(ErrorKind::input, fmt::format("llama.cpp could not load {} ({})",
                                              settings.model_path, last_lines(*model->m_lib, 3)));
  }
  model->m_vocab = f.model_get_vocab(model->m_model);
  auto& facts = model->m_facts;
  char desc[256] = {};
  f.model_desc(model->m_model, desc, sizeof desc);
  facts.description = desc;
  facts.size_bytes = f.model_size(model->m_model);
  facts.n_params = f.model_n_params(model->m_model);
  facts.n_layer = f.model_n_layer(model->m_model);
  facts.n_embd = f.model_n_embd(model->m_model);
  facts.n_ctx_train = f.model_n_ctx_train(model->m_model);
  facts.n_vocab = model->m_vocab != nullptr ? f.vocab_n_tokens(model->m_vocab) : 0;
  return model;
}

Expected<std::vector<int32_t>> LlamaModel::tokenize(std::string_view text, bool add_special) const {
  const auto& f = m_lib->fn();
  if (text.size() > static_cast<size_t>(INT32_MAX / 2)) {
    return fail(ErrorKind::input, "text too long to tokenize");
  }
  const auto len = static_cast<int32_t>(text.size());
  std::vector<int32_t> tokens(text.size() + 2);
  int32_t n = f.tokenize(m_vocab, text.data(), len, tokens.data(),
                         static_cast<int32_t>(tokens.size()), add_special, /*parse_special=*/true);
  if (n < 0) {  // -n tokens are needed
    tokens.resize(static_cast<size_t>(-n));
    n = f.tokenize(m_vocab, text.data(), len, tokens.data(), static_cast<int32_t>(tokens.size()),
                   add_special, true);
  }
  if (n < 0) return fail(ErrorKind::input, "llama.cpp could not tokenize the text");
  tokens.resize(static_cast<size_t>(n));
  return tokens;
}

std::string LlamaModel::token_piece(int32_t token) const {
  if (token < 0 || token >= m_facts.n_vocab) return {};
  const auto& f = m_lib->fn();
  std::string piece(32, '\0');
  int32_t n = f.token_to_piece(m_vocab, token, piece.data(), static_cast<int32_t>(piece.size()), 0,
                               /*special=*/true);
  if (n < 0) {
    piece.resize(static_cast<size_t>(-n));
    n = f.token_to_piece(m_vocab, token, piece.data(), static_cast<int32_t>(piece.size()), 0, true);
  }
  piece.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return piece;
}

bool LlamaModel::is_eog(int32_t token) const {
  return m_lib->fn().vocab_is_eog(m_vocab, token);
}

LlamaModel::~LlamaModel() {
  if (m_model != nullptr) m_lib->fn().model_free(m_model);
}

Expected<std::unique_ptr<LlamaContext>> LlamaContext::create(LlamaModel& model,
                                                             const LlamaSettings& settings) {
  auto type_k = kv_cache_type_id(settings.cache_type_k);
  if (!type_k) return std::unexpected(type_k.error());
  auto type_v = kv_cache_type_id(settings.cache_type_v);
  if (!type_v) return std::unexpected(type_v.error());
  if (settings.n_ctx == 0 || settings.n_seq_max == 0 || settings.n_batch == 0 ||
      settings.n_ubatch == 0) {
    return fail(ErrorKind::usage, "-c, -np, -b and -ub must be at least 1");
  }
  auto& lib = model.lib();
  const auto& f = lib.fn();
  abi::ContextParams params = lib.default_context_params();
  params.n_ctx = settings.n_ctx;
  params.n_seq_max = settings.n_seq_max;
  params.n_batch = settings.n_batch;
  params.n_ubatch = std::min(settings.n_ubatch, settings.n_batch);
  params.flash_attn_type = static_cast<int32_t>(settings.flash_attn);
  params.type_k = *type_k;
  params.type_v = *type_v;
  const int32_t threads =
      settings.n_threads > 0
          ? settings.n_threads
          : static_cast<int32_t>(std::max(1U, std::thread::hardware_concurrency()));
  params.n_threads = threads;
  params.n_threads_batch = threads;
  params.kv_unified = settings.kv_unified;
  if (settings.n_outputs_max > 0) {
    params.n_outputs_max = settings.n_outputs_max;
    params.n_outputs_max_per_seq = 1;
  }
  params.swa_full = settings.swa_full;
  params.no_perf = false;
  std::unique_ptr<LlamaContext> ctx(new LlamaContext());
  ctx->m_model = &model;
  ctx->m_ctx = f.init_from_model(model.raw(), params);
  if (ctx->m_ctx == nullptr) {
    return fail(ErrorKind::driver,
                fmt::format("llama.cpp could not create a context of {} cells x {} sequences ({})",
                            settings.n_ctx, settings.n_seq_max, last_lines(lib, 3)));
  }
  ctx->m_n_vocab = model.facts().n_vocab;
  ctx->m_batch_capacity = static_cast<int32_t>(f.n_batch(ctx->m_ctx));
  ctx->m_batch = f.batch_init(ctx->m_batch_capacity, 0, 1);
  return ctx;
}

LlamaContext::~LlamaContext() {
  const auto& f = m_model->lib().fn();
  if (m_batch.token != nullptr) f.batch_free(m_batch);
  if (m_ctx != nullptr) f.free(m_ctx);
}

uint32_t LlamaContext::n_ctx() const {
  return m_model->lib().fn().n_ctx(m_ctx);
}
uint32_t LlamaContext::n_batch() const {
  return m_model->lib().fn().n_batch(m_ctx);
}
uint32_t LlamaContext::n_ubatch() const {
  return m_model->lib().fn().n_ubatch(m_ctx);
}
uint32_t LlamaContext::n_seq_max() const {
  return m_model->lib().fn().n_seq_max(m_ctx);
}

void LlamaContext::clear() {
  const auto& f = m_model->lib().fn();
  f.memory_clear(f.get_memory(m_ctx), true);
}

Expected<void> LlamaContext::decode(int32_t n_tokens) {
  m_batch.n_tokens = n_tokens;
  const int32_t status = m_model->lib().fn().decode(m_ctx, m_batch);
  if (status == 0) return {};
  if (status == 1) {
    return fail(ErrorKind::driver,
                fmt::format("{} for {} tokens (raise -c)", k_no_kv_room, n_tokens));
  }
  return fail(ErrorKind::driver, fmt::format("llama_decode failed with status {} ({})", status,
                                             last_lines(m_model->lib(), 2)));
}

int32_t LlamaContext::argmax(int32_t batch_index) const {
  const float* logits = m_model->lib().fn().get_logits_ith(m_ctx, batch_index);
  if (logits == nullptr || m_n_vocab <= 0) return 0;
  return static_cast<int32_t>(std::max_element(logits, logits + m_n_vocab) - logits);
}

Expected<LlamaContext::PrefillResult> LlamaContext::prefill(
    const std::vector<std::vector<int32_t>>& prompts, const std::function<bool()>& stop) {
  PrefillResult out;
  out.next_tokens.assign(prompts.size(), 0);
  out.done_mono_ns.assign(prompts.size(), 0);
  // Which sequence's last prompt token sits at each batch slot.
  std::vector<std::pair<int32_t, int32_t>> finishing;  // (batch index, sequence)
  int32_t used = 0;
  auto flush = [&]() -> Expected<void> {
    if (used == 0) return {};
    if (auto ok = decode(used); !ok) return ok;
    const int64_t now = monotonic_now_ns();
    for (auto [index, seq] : finishing) {
      out.next_tokens[seq] = argmax(index);
      out.done_mono_ns[seq] = now;
    }
    finishing.clear();
    used = 0;
    if (stop && stop()) return fail(ErrorKind::interrupted, "interrupted during prefill");
    return {};
  };
  for (size_t seq = 0; seq < prompts.size(); ++seq) {
    const auto& prompt = prompts[seq];
    for (size_t pos = 0; pos < prompt.size(); ++pos) {
      if (used == m_batch_capacity) {
        if (auto ok = flush(); !ok) return std::unexpected(ok.error());
      }
      const bool last = pos + 1 == prompt.size();
      m_batch.token[used] = prompt[pos];
      m_batch.pos[used] = static_cast<int32_t>(pos);
      m_batch.n_seq_id[used] = 1;
      m_batch.seq_id[used][0] = static_cast<int32_t>(seq);
      m_batch.logits[used] = last ? 1 : 0;
      if (last) finishing.emplace_back(used, static_cast<int32_t>(seq));
      ++used;
    }
  }
  if (auto ok = flush(); !ok) return std::unexpected(ok.error());
  return out;
}

Expected<std::vector<int32_t>> LlamaContext::step(const std::vector<int32_t>& seq_ids,
                                                  const std::vector<int32_t>& tokens,
                                                  const std::vector<int32_t>& positions) {
  const auto n = static_cast<int32_t>(seq_ids.size());
  if (n > m_batch_capacity || tokens.size() != seq_ids.size() ||
      positions.size() != seq_ids.size()) {
    return fail(ErrorKind::internal, "decode step larger than the batch");
  }
  for (int32_t i = 0; i < n; ++i) {
    m_batch.token[i] = tokens[i];
    m_batch.pos[i] = positions[i];
    m_batch.n_seq_id[i] = 1;
    m_batch.seq_id[i][0] = seq_ids[i];
    m_batch.logits[i] = 1;
  }
  if (auto ok = decode(n); !ok) return std::unexpected(ok.error());
  std::vector<int32_t> next(n);
  for (int32_t i = 0; i < n; ++i)
    next[i] = argmax(i);
  return next;
}

Expected<std::vector<int32_t>> LlamaContext::decode_greedy(std::span<const BatchToken> tokens) {
  if (tokens.empty()) return std::vector<int32_t>{};
  if (tokens.size() > static_cast<size_t>(m_batch_capacity)) {
    return fail(ErrorKind::internal, "decode batch larger than n_batch");
  }
  const auto n = static_cast<int32_t>(tokens.size());
  for (int32_t i = 0; i < n; ++i) {
    const BatchToken& t = tokens[static_cast<size_t>(i)];
    m_batch.token[i] = t.token;
    m_batch.pos[i] = t.pos;
    m_batch.n_seq_id[i] = 1;
    m_batch.seq_id[i][0] = t.seq_id;
    m_batch.logits[i] = t.logits ? 1 : 0;
  }
  if (auto ok = decode(n); !ok) return std::unexpected(ok.error());
  std::vector<int32_t> next;
  for (int32_t i = 0; i < n; ++i) {
    if (tokens[static_cast<size_t>(i)].logits) next.push_back(argmax(i));
  }
  return next;
}

void LlamaContext::remove_sequence(int32_t seq_id) {
  const auto& f = m_model->lib().fn();
  f.memory_seq_rm(f.get_memory(m_ctx), seq_id, -1, -1);
}

LlamaPerf LlamaContext::perf() const {
  const abi::PerfContextData d = m_model->lib().fn().perf_context(m_ctx);
  return LlamaPerf{d.t_p_eval_ms, d.t_eval_ms, d.n_p_eval, d.n_eval};
}

void LlamaContext::reset_perf() {
  m_model->lib().fn().perf_context_reset(m_ctx);
}

}  // namespace kvprof::llama
