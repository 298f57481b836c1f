// Synthetic SPM vocabulary: special tokens, byte fallback, and prefix-closed "▁wK" word pieces.
#include "kvprof/model/dummy_vocab.hpp"

#include <fmt/format.h>

namespace kvprof::model {
namespace {

constexpr const char* k_space = "\xE2\x96\x81";  // U+2581, SentencePiece's word boundary
constexpr int32_t k_normal = 1, k_unknown = 2, k_control = 3, k_byte = 6;

}  // namespace

uint32_t dummy_word_count(uint32_t vocab_size) {
  return vocab_size >= k_dummy_vocab_min ? vocab_size - k_dummy_first_word_id : 0;
}

Expected<DummyVocab> make_dummy_vocab(uint32_t vocab_size,
                                      std::span<const std::string_view> trailing_controls) {
  if (vocab_size < k_dummy_vocab_min) {
    return fail(ErrorKind::input,
                fmt::format("vocabulary of {} tokens is too small for the synthetic tokenizer "
                            "(at least {})",
                            vocab_size, k_dummy_vocab_min));
  }
  DummyVocab v;
  v.tokens.reserve(vocab_size);
  v.scores.reserve(vocab_size);
  v.token_types.reserve(vocab_size);
  const auto add = [&v](std::string piece, float score, int32_t type) {
    v.tokens.push_back(std::move(piece));
    v.scores.push_back(score);
    v.token_types.push_back(type);
  };
  add("<unk>", 0.0F, k_unknown);
  add("<s>", 0.0F, k_control);
  add("</s>", 0.0F, k_control);
  for (uint32_t b = 0; b < 256; ++b)
    add(fmt::format("<0x{:02X}>", b), 0.0F, k_byte);
  add(k_space, -1.0F, k_normal);
  add(fmt::format("{}w", k_space), -2.0F, k_normal);
  const size_t words_end = vocab_size - trailing_controls.size();
  for (uint32_t k = 0; v.tokens.size() < words_end; ++k)
    add(fmt::format("{}w{}", k_space, k), -3.0F - static_cast<float>(k), k_normal);
  for (std::string_view control : trailing_controls)
    add(std::string(control), 0.0F, k_control);
  return v;
}

std::string dummy_prompt(uint32_t n_words, uint32_t vocab_size) {
  const uint32_t words = dummy_word_count(vocab_size);
  std::string text;
  for (uint32_t i = 0; i < n_words && words > 0; ++i) {
    if (i > 0) text += ' ';
    text += fmt::format("w{}", i % words);
  }
  return text;
}

}  // namespace kvprof::model
