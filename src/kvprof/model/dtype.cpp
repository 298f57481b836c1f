// DType sizes and names.
#include "kvprof/model/dtype.hpp"

#include <array>
#include <utility>

#include "kvprof/util/strings.hpp"

namespace kvprof::model {

uint32_t dtype_bits(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64:
      return 64;
    case DType::f32:
    case DType::i32:
      return 32;
    case DType::f16:
    case DType::bf16:
    case DType::i16:
      return 16;
    case DType::f8_e4m3:
    case DType::f8_e5m2:
    case DType::f8_e8m0:
    case DType::i8:
    case DType::u8:
    case DType::boolean:
      return 8;
    case DType::i4:
    case DType::f4_e2m1:
      return 4;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f64:
      return "f64";
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::f8_e4m3:
      return "fp8_e4m3";
    case DType::f8_e5m2:
      return "fp8_e5m2";
    case DType::f8_e8m0:
      return "fp8_e8m0";
    case DType::i64:
      return "i64";
    case DType::i32:
      return "i32";
    case DType::i16:
      return "i16";
    case DType::i8:
      return "i8";
    case DType::u8:
      return "u8";
    case DType::boolean:
      return "bool";
    case DType::i4:
      return "i4";
    case DType::f4_e2m1:
      return "fp4_e2m1";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, DType>, 34> k_names{{
      {"f64", DType::f64},
      {"float64", DType::f64},
      {"double", DType::f64},
      {"f32", DType::f32},
      {"float32", DType::f32},
      {"float", DType::f32},
      {"fp32", DType::f32},
      {"f16", DType::f16},
      {"float16", DType::f16},
      {"half", DType::f16},
      {"fp16", DType::f16},
      {"bf16", DType::bf16},
      {"bfloat16", DType::bf16},
      {"f8_e4m3", DType::f8_e4m3},
      {"fp8", DType::f8_e4m3},
      {"fp8_e4m3", DType::f8_e4m3},
      {"float8_e4m3fn", DType::f8_e4m3},
      {"f8_e5m2", DType::f8_e5m2},
      {"fp8_e5m2", DType::f8_e5m2},
      {"float8_e5m2", DType::f8_e5m2},
      {"f8_e8m0", DType::f8_e8m0},
      {"float8_e8m0fnu", DType::f8_e8m0},
      {"i64", DType::i64},
      {"int64", DType::i64},
      {"i32", DType::i32},
      {"int32", DType::i32},
      {"i16", DType::i16},
      {"int16", DType::i16},
      {"i8", DType::i8},
      {"int8", DType::i8},
      {"u8", DType::u8},
      {"uint8", DType::u8},
      {"bool", DType::boolean},
      {"fp4", DType::f4_e2m1},
  }};
  const std::string lower = to_lower(text);
  const std::string_view key =
      lower.starts_with("torch.") ? std::string_view(lower).substr(6) : std::string_view(lower);
  for (const auto& [name, t] : k_names) {
    if (key == name) return t;
  }
  return std::nullopt;
}

}  // namespace kvprof::model
