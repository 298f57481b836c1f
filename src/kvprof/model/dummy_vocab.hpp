// A synthetic SentencePiece-style ("llama") vocabulary of any size >= k_dummy_vocab_min, for
// GGUF files with dummy weights. Layout (like Llama 2's): 0 <unk>, 1 <s> (BOS), 2 </s> (EOS),
// 3..258 byte-fallback tokens <0x00>..<0xFF>, 259 "▁", 260 "▁w", then word pieces "▁w0",
// "▁w1", ... up to the vocabulary size. The pieces are closed under prefixes, so llama.cpp's
// SPM tokenizer turns the text "wA wB wC" (words wK with K < dummy_word_count(), one space
// apart) into exactly one token per word (token id k_dummy_first_word_id + K), plus BOS when
// special tokens are added. `trailing_controls` (e.g. "<|end|>", which llama.cpp's vocabulary
// loader looks up for phi3) take the last ids as control tokens.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::model {

inline constexpr uint32_t k_dummy_vocab_min = 300;
inline constexpr uint32_t k_dummy_first_word_id = 261;

struct DummyVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> token_types;  // llama.cpp: 1 normal, 2 unknown, 3 control, 6 byte
  uint32_t unk_id = 0;
  uint32_t bos_id = 1;
  uint32_t eos_id = 2;
};

// The vocabulary of exactly `vocab_size` tokens; input error below k_dummy_vocab_min.
Expected<DummyVocab> make_dummy_vocab(uint32_t vocab_size,
                                      std::span<const std::string_view> trailing_controls = {});

// Number of "wK" words a vocabulary of `vocab_size` tokens has (0 when too small).
uint32_t dummy_word_count(uint32_t vocab_size);

// A text of `n_words` words ("w0 w1 ...", cycling through the vocabulary's words) that
// tokenizes to exactly `n_words` tokens without special tokens.
std::string dummy_prompt(uint32_t n_words, uint32_t vocab_size);

}  // namespace kvprof::model
