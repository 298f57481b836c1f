// The simulator's stand-in tokenizer. It is NOT a real tokenizer: text becomes one token per
// whitespace-separated word of up to 4 bytes, and one token per 4 bytes of a longer word
// (about what BPE tokenizers give for English). Token ids are a hash of the piece, so equal text
// gives equal ids and shared prefixes hit the prefix cache. Chat messages add 2 tokens each
// (role marker and end marker) and 1 generation-prompt token at the end.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::sim {

inline constexpr uint32_t k_sim_vocab_size = 32000;
inline constexpr uint32_t k_sim_max_token_id = (1U << 31) - 1;  // largest id a prompt may carry

// Tokenizes `text` as described above, appending to `out`.
void sim_tokenize_into(std::string_view text, std::vector<uint32_t>& out);

// Tokenizes `text` as described above.
std::vector<uint32_t> sim_tokenize(std::string_view text);

// The text of a generated token: a space and a short word that sim_tokenize() reads back as
// exactly one token.
std::string sim_token_text(uint32_t token_id);

// Tokenizes OpenAI chat `messages` (content as a string or a list of {"type":"text"} parts);
// an input error for anything else.
Expected<std::vector<uint32_t>> sim_tokenize_chat(const nlohmann::json& messages);

// Reads an OpenAI "prompt": a string, an array of token ids, or a one-element array of either;
// an input error for batches and anything else.
Expected<std::vector<uint32_t>> sim_tokenize_prompt(const nlohmann::json& prompt);

// The same token ids as the int32 the serving front end carries (ids are below 2^31).
inline std::vector<int32_t> token_ids_int32(const std::vector<uint32_t>& ids) {
  return {ids.begin(), ids.end()};
}

}  // namespace kvprof::sim
