// KV cache dtype names and the MoE backends that decide an expert split.
#include "kvprof/estimate/settings.hpp"

#include <fmt/format.h>

#include "kvprof/util/strings.hpp"

namespace kvprof::estimate {

bool moe_backend_splits_experts(std::string_view backend) {
  const std::string b = to_lower(trim(backend));
  return b == "deepep" || b == "mooncake";
}

Expected<KvCacheDtype> parse_kv_cache_dtype(std::string_view text) {
  const std::string s = to_lower(trim(text));
  if (s == "auto") return KvCacheDtype::auto_;
  if (s == "fp16" || s == "f16" || s == "float16" || s == "half") return KvCacheDtype::f16;
  if (s == "bf16" || s == "bfloat16") return KvCacheDtype::bf16;
  if (s == "fp32" || s == "f32" || s == "float32") return KvCacheDtype::f32;
  if (s == "fp8" || s == "fp8_e4m3" || s == "fp8_e4m3fn" || s == "fp8_inc")
    return KvCacheDtype::fp8_e4m3;
  if (s == "fp8_e5m2") return KvCacheDtype::fp8_e5m2;
  if (s == "q8_0") return KvCacheDtype::q8_0;
  if (s == "q4_0") return KvCacheDtype::q4_0;
  return fail(ErrorKind::usage,
              fmt::format("unknown KV cache dtype '{}' (use auto, fp16, bf16, fp8, fp8_e4m3, "
                          "fp8_e5m2, q8_0, q4_0)",
                          text));
}

std::string_view kv_cache_dtype_name(KvCacheDtype t) {
  switch (t) {
    case KvCacheDtype::auto_:
      return "auto";
    case KvCacheDtype::f16:
      return "fp16";
    case KvCacheDtype::bf16:
      return "bf16";
    case KvCacheDtype::f32:
      return "fp32";
    case KvCacheDtype::fp8_e4m3:
      return "fp8_e4m3";
    case KvCacheDtype::fp8_e5m2:
      return "fp8_e5m2";
    case KvCacheDtype::q8_0:
      return "q8_0";
    case KvCacheDtype::q4_0:
      return "q4_0";
  }
  return "?";
}

}  // namespace kvprof::estimate
