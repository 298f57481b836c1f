// ContinuousBatcher: admission into slots, mixed decode + chunked-prefill batches, greedy
// sampling, and llama-server's counters.
#include "kvprof/serve/batcher.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kvprof/client/transport.hpp"

namespace kvprof::serve {

ContinuousBatcher::ContinuousBatcher(const llama::LlamaModel& model, llama::LlamaContext& ctx,
                                     BatcherSettings settings)
    : m_model(model), m_ctx(ctx), m_settings(settings) {
  m_settings.n_slots = std::max(1U, m_settings.n_slots);
  m_settings.n_batch = std::max(1U, m_settings.n_batch);
  m_slots.resize(m_settings.n_slots);
  for (size_t i = 0; i < m_slots.size(); ++i)
    m_slots[i].id = static_cast<int32_t>(i);
}

Expected<void> ContinuousBatcher::check_request(size_t n_prompt_tokens, uint32_t max_tokens) const {
  if (n_prompt_tokens == 0) return fail(ErrorKind::input, "the prompt is empty");
  const uint64_t n_ctx = m_settings.n_ctx_slot;
  const uint64_t needed = n_prompt_tokens + uint64_t{max_tokens};
  if (n_prompt_tokens >= n_ctx || needed > n_ctx) {
    return fail(ErrorKind::input,
                fmt::format("request ({} tokens) exceeds the available context size ({} tokens), "
                            "try increasing it",
                            n_prompt_tokens >= n_ctx ? n_prompt_tokens : needed, n_ctx));
  }
  return {};
}

void ContinuousBatcher::add(uint64_t task_id, std::vector<int32_t> prompt, uint32_t max_tokens,
                            bool ignore_eos) {
  m_waiting.push_back(Waiting{task_id, std::move(prompt), std::max(1U, max_tokens), ignore_eos});
}

bool ContinuousBatcher::cancel(uint64_t task_id) {
  for (auto it = m_waiting.begin(); it != m_waiting.end(); ++it) {
    if (it->task_id == task_id) {
      m_waiting.erase(it);
      return true;
    }
  }
  for (auto& slot : m_slots) {
    if (slot.state != State::idle && slot.task_id == static_cast<int64_t>(task_id)) {
      release(slot, monotonic_now_ns());
      return true;
    }
  }
  return false;
}

bool ContinuousBatcher::has_work() const {
  return !m_waiting.empty() || std::any_of(m_slots.begin(), m_slots.end(),
                                           [](const Slot& s) { return s.state != State::idle; });
}

TaskEvent ContinuousBatcher::event_for(const Slot& slot, int64_t now_ns) const {
  TaskEvent ev;
  ev.task_id = static_cast<uint64_t>(slot.task_id);
  ev.n_prompt_tokens = static_cast<uint32_t>(slot.prompt.size());
  ev.n_decoded = slot.n_decoded;
  const int64_t prompt_end = slot.prompt_done_ns > 0 ? slot.prompt_done_ns : now_ns;
  ev.prompt_ms = static_cast<double>(prompt_end - slot.start_ns) / 1e6;
  ev.predicted_ms =
      slot.prompt_done_ns > 0 ? static_cast<double>(now_ns - slot.prompt_done_ns) / 1e6 : 0.0;
  return ev;
}

void ContinuousBatcher::release(Slot& slot, int64_t now_ns) {
  if (slot.state == State::idle) return;
  if (slot.n_decoded > 0) {
    m_stats.tokens_predicted_total += slot.n_decoded;
    m_stats.tokens_predicted_seconds_total +=
        static_cast<double>(now_ns - slot.prompt_done_ns) / 1e9;
  }
  m_ctx.remove_sequence(slot.id);
  slot.state = State::idle;
  slot.n_past = 0;
}

void ContinuousBatcher::on_token(Slot& slot, int32_t token, int64_t now_ns,
                                 std::vector<TaskEvent>& events) {
  ++slot.n_decoded;
  TaskEvent ev = event_for(slot, now_ns);
  const bool eog = !slot.ignore_eos && m_model.is_eog(token);
  if (!eog) ev.tokens.push_back(token);
  // The token just sampled needs a cell of its own before it can be decoded.
  const bool context_full = slot.n_past + 1 > m_settings.n_ctx_slot;
  if (eog || slot.n_decoded >= slot.max_tokens || context_full) {
    ev.finished = true;
    ev.finish_reason = eog ? "stop" : "length";
    release(slot, now_ns);
  } else {
    slot.next_token = token;
    slot.state = State::generating;
  }
  events.push_back(std::move(ev));
}

Expected<std::vector<TaskEvent>> ContinuousBatcher::step() {
  std::vector<TaskEvent> events;
  const int64_t admit_ns = monotonic_now_ns();
  for (auto& slot : m_slots) {
    if (m_waiting.empty()) break;
    if (slot.state != State::idle) continue;
    Waiting w = std::move(m_waiting.front());
    m_waiting.pop_front();
    slot.state = State::prompt;
    slot.task_id = static_cast<int64_t>(w.task_id);
    slot.prompt = std::move(w.prompt);
    slot.max_tokens = w.max_tokens;
    slot.ignore_eos = w.ignore_eos;
    slot.n_prompt_done = 0;
    slot.n_past = 0;
    slot.n_decoded = 0;
    slot.start_ns = admit_ns;
    slot.prompt_done_ns = 0;
  }

  // Decode tokens first (one per generating slot), then prompt chunks in slot order.
  std::vector<llama::LlamaContext::BatchToken> batch;
  std::vector<Slot*> outputs;  // the slot of each logits entry, in batch order
  std::vector<Slot*> prefilled;
  const size_t cap = m_settings.n_batch;
  for (auto& slot : m_slots) {
    if (slot.state != State::generating || batch.size() >= cap) continue;
    batch.push_back({slot.next_token, static_cast<int32_t>(slot.n_past), slot.id, true});
    outputs.push_back(&slot);
  }
  for (auto& slot : m_slots) {
    if (slot.state != State::prompt || batch.size() >= cap) continue;
    const size_t left = slot.prompt.size() - slot.n_prompt_done;
    const size_t take = std::min(left, cap - batch.size());
    for (size_t i = 0; i < take; ++i) {
      const uint32_t pos = slot.n_prompt_done + static_cast<uint32_t>(i);
      const bool last = pos + 1 == slot.prompt.size();
      batch.push_back({slot.prompt[pos], static_cast<int32_t>(pos), slot.id, last});
      if (last) outputs.push_back(&slot);
    }
    slot.n_prompt_done += static_cast<uint32_t>(take);
    slot.n_past = slot.n_prompt_done;
    prefilled.push_back(&slot);
  }
  if (batch.empty()) return events;

  uint64_t busy = 0;
  for (const auto& slot : m_slots)
    busy += slot.state != State::idle ? 1 : 0;
  auto next = m_ctx.decode_greedy(batch);
  const int64_t now_ns = monotonic_now_ns();
  ++m_stats.n_decode_total;
  m_stats.n_busy_slots_total += busy;
  m_stats.n_tokens_max = std::max<uint64_t>(m_stats.n_tokens_max, batch.size());
  if (!next) {
    for (auto& slot : m_slots) {
      if (slot.state == State::idle) continue;
      TaskEvent ev = event_for(slot, now_ns);
      ev.finished = true;
      ev.finish_reason = "error";
      events.push_back(std::move(ev));
      release(slot, now_ns);
    }
    return std::unexpected(next.error());
  }
  for (Slot* slot : prefilled) {
    if (slot->n_prompt_done == slot->prompt.size()) {
      slot->prompt_done_ns = now_ns;
      m_stats.prompt_tokens_total += slot->prompt.size();
      m_stats.prompt_seconds_total += static_cast<double>(now_ns - slot->start_ns) / 1e9;
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    Slot& slot = *outputs[i];
    if (slot.state == State::generating) ++slot.n_past;  // the token fed this step
    on_token(slot, (*next)[i], now_ns, events);
  }
  return events;
}

std::vector<SlotView> ContinuousBatcher::slots() const {
  std::vector<SlotView> out;
  out.reserve(m_slots.size());
  for (const auto& slot : m_slots) {
    SlotView v;
    v.id = slot.id;
    v.n_ctx = m_settings.n_ctx_slot;
    v.is_processing = slot.state != State::idle;
    v.id_task = slot.task_id;
    v.n_prompt_tokens = static_cast<uint32_t>(slot.prompt.size());
    v.n_prompt_tokens_processed = slot.n_prompt_done;
    v.n_decoded = slot.n_decoded;
    v.n_remain = v.is_processing ? static_cast<int64_t>(slot.max_tokens) - slot.n_decoded : -1;
    v.has_next_token = v.is_processing;
    v.n_past = slot.n_past;
    out.push_back(v);
  }
  return out;
}

BatcherStats ContinuousBatcher::stats() const {
  BatcherStats s = m_stats;
  s.requests_deferred = static_cast<uint32_t>(m_waiting.size());
  s.requests_processing = 0;
  s.kv_cells_used = 0;
  for (const auto& slot : m_slots) {
    if (slot.state != State::idle) ++s.requests_processing;
    s.kv_cells_used += slot.n_past;
  }
  return s;
}

}  // namespace kvprof::serve
