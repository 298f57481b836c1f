// The simulator's stand-in tokenizer (see tokenizer.hpp for the rules).
#include "kvprof/sim/tokenizer.hpp"

#include <fmt/format.h>

namespace kvprof::sim {

namespace {

constexpr uint32_t k_first_text_id = 256;  // ids below are "special" (role/end markers)
constexpr size_t k_bytes_per_piece = 4;
constexpr size_t k_max_messages = 100000;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

uint32_t piece_id(std::string_view piece) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : piece) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ULL;
  }
  return k_first_text_id + static_cast<uint32_t>(h % (k_sim_vocab_size - k_first_text_id));
}

uint32_t role_id(std::string_view role) {
  if (role == "system") return 1;
  if (role == "user") return 2;
  if (role == "assistant") return 3;
  if (role == "tool") return 4;
  return 5;
}

constexpr uint32_t k_end_of_message_id = 6;
constexpr uint32_t k_generation_prompt_id = 7;

}  // namespace

void sim_tokenize_into(std::string_view text, std::vector<uint32_t>& out) {
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i]))
      ++i;
    size_t end = i;
    while (end < text.size() && !is_space(text[end]))
      ++end;
    for (size_t p = i; p < end; p += k_bytes_per_piece) {
      out.push_back(piece_id(text.substr(p, std::min(k_bytes_per_piece, end - p))));
    }
    i = end;
  }
}

std::vector<uint32_t> sim_tokenize(std::string_view text) {
  std::vector<uint32_t> out;
  sim_tokenize_into(text, out);
  return out;
}

std::string sim_token_text(uint32_t token_id) {
  // " w" + base-36 digits of (id mod 36^3): a word of at most 4 bytes, so one token.
  static constexpr char k_digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  uint32_t v = token_id % (36 * 36 * 36);
  std::string digits;
  do {
    digits.insert(digits.begin(), k_digits[v % 36]);
    v /= 36;
  } while (v != 0);
  return " w" + digits;
}

Expected<std::vector<uint32_t>> sim_tokenize_chat(const nlohmann::json& messages) {
  if (!messages.is_array() || messages.empty()) {
    return fail(ErrorKind::input, "'messages' must be a non-empty array");
  }
  if (messages.size() > k_max_messages) return fail(ErrorKind::input, "too many messages");
  std::vector<uint32_t> out;
  for (const auto& m : messages) {
    if (!m.is_object()) return fail(ErrorKind::input, "each message must be an object");
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return fail(ErrorKind::input, "each message needs a string 'role'");
    }
    out.push_back(role_id(role->get_ref<const std::string&>()));
    const auto content = m.find("content");
    if (content != m.end() && content->is_string()) {
      sim_tokenize_into(content->get_ref<const std::string&>(), out);
    } else if (content != m.end() && content->is_array()) {
      for (const auto& part : *content) {
        if (!part.is_object()) return fail(ErrorKind::input, "content parts must be objects");
        const auto text = part.find("text");
        if (text != part.end() && text->is_string()) {
          sim_tokenize_into(text->get_ref<const std::string&>(), out);
        }
      }
    } else if (content != m.end() && !content->is_null()) {
      return fail(ErrorKind::input, "message 'content' must be a string or a list of parts");
    }
    out.push_back(k_end_of_message_id);
  }
  out.push_back(k_generation_prompt_id);
  return out;
}

Expected<std::vector<uint32_t>> sim_tokenize_prompt(const nlohmann::json& prompt) {
  if (prompt.is_string()) return sim_tokenize(prompt.get_ref<const std::string&>());
  if (!prompt.is_array() || prompt.empty()) {
    return fail(ErrorKind::input, "'prompt' must be a string or a non-empty array of token ids");
  }
  if (prompt.size() == 1 && (prompt[0].is_string() || prompt[0].is_array())) {
    return sim_tokenize_prompt(prompt[0]);
  }
  std::vector<uint32_t> out;
  out.reserve(prompt.size());
  for (const auto& t : prompt) {
    if (!t.is_number_integer()) {
      return fail(ErrorKind::input,
                  "batched prompts are not supported by the simulator; send one prompt (a "
                  "string or an array of token ids) per request");
    }
    const auto v = t.get<int64_t>();
    if (v < 0 || v > k_sim_max_token_id) {
      return fail(ErrorKind::input, fmt::format("token id {} is out of range", v));
    }
    out.push_back(static_cast<uint32_t>(v));
  }
  return out;
}

}  // namespace kvprof::sim
