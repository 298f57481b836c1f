// SHA-256 of prompts through OpenSSL's EVP digest.
#include "kvprof/workload/prompt_hash.hpp"

#include <openssl/evp.h>

#include <array>
#include <bit>
#include <memory>
#include <vector>

namespace kvprof::workload {

std::string prompt_sha256(const RequestSpec& r) {
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                    &EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  if (r.prompt_format == PromptFormat::tokens) {
    static_assert(std::endian::native == std::endian::little, "token IDs are hashed little-endian");
    EVP_DigestUpdate(ctx.get(), r.prompt_token_ids.data(),
                     r.prompt_token_ids.size() * sizeof(uint32_t));
  } else {
    EVP_DigestUpdate(ctx.get(), r.prompt_text.data(), r.prompt_text.size());
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx.get(), digest.data(), &n);
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size_t{n} * 2);
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(k_hex[digest[i] >> 4]);
    out.push_back(k_hex[digest[i] & 15]);
  }
  return out;
}

}  // namespace kvprof::workload
