// ggml tensor types (ids, names, block sizes from ggml's type traits) and llama.cpp file type
// names (general.file_type).
#include <array>
#include <string_view>

#include "kvprof/model/gguf.hpp"

namespace kvprof::model {
namespace {

struct TypeRow {
  uint32_t id;
  std::string_view name;
  uint32_t block_elements;
  uint32_t block_bytes;
  bool is_float;
};

// (elements per block, bytes per block) as ggml's block structs lay them out; ids 4, 5, 31-33
// and 36-38 were removed from ggml and are rejected.
constexpr std::array k_types{
    TypeRow{0, "F32", 1, 4, true},
    TypeRow{1, "F16", 1, 2, true},
    TypeRow{2, "Q4_0", 32, 18, false},       // f16 scale + 16 bytes of nibbles
    TypeRow{3, "Q4_1", 32, 20, false},       // f16 scale, f16 min + 16 bytes
    TypeRow{6, "Q5_0", 32, 22, false},       // f16 scale + 4 bytes high bits + 16 bytes
    TypeRow{7, "Q5_1", 32, 24, false},       // f16 scale, f16 min + 4 + 16
    TypeRow{8, "Q8_0", 32, 34, false},       // f16 scale + 32 int8
    TypeRow{9, "Q8_1", 32, 36, false},       // f16 scale, f16 sum + 32 int8
    TypeRow{10, "Q2_K", 256, 84, false},     // 16 scales + 64 quants + 2 f16
    TypeRow{11, "Q3_K", 256, 110, false},    // 32 hmask + 64 quants + 12 scales + f16
    TypeRow{12, "Q4_K", 256, 144, false},    // 2 f16 + 12 scales + 128 quants
    TypeRow{13, "Q5_K", 256, 176, false},    // 2 f16 + 12 scales + 32 high bits + 128 quants
    TypeRow{14, "Q6_K", 256, 210, false},    // 128 low + 64 high + 16 scales + f16
    TypeRow{15, "Q8_K", 256, 292, false},    // f32 scale + 256 int8 + 16 int16 sums
    TypeRow{16, "IQ2_XXS", 256, 66, false},  // f16 + 32 uint16
    TypeRow{17, "IQ2_XS", 256, 74, false},   // f16 + 32 uint16 + 8 scales
    TypeRow{18, "IQ3_XXS", 256, 98, false},  // f16 + 96 bytes
    TypeRow{19, "IQ1_S", 256, 50, false},    // f16 + 32 + 8 uint16
    TypeRow{20, "IQ4_NL", 32, 18, false},    // f16 + 16 bytes
    TypeRow{21, "IQ3_S", 256, 110, false},   // f16 + 64 + 8 + 32 signs + 4 scales
    TypeRow{22, "IQ2_S", 256, 82, false},    // f16 + 64 + 8 + 8 scales
    TypeRow{23, "IQ4_XS", 256, 136, false},  // f16 + uint16 + 4 + 128
    TypeRow{24, "I8", 1, 1, false},
    TypeRow{25, "I16", 1, 2, false},
    TypeRow{26, "I32", 1, 4, false},
    TypeRow{27, "I64", 1, 8, false},
    TypeRow{28, "F64", 1, 8, true},
    TypeRow{29, "IQ1_M", 256, 56, false},  // 32 + 16 + 8 scales (no separate f16)
    TypeRow{30, "BF16", 1, 2, true},
    TypeRow{34, "TQ1_0", 256, 54, false},  // 48 base-3 bytes + 4 + f16
    TypeRow{35, "TQ2_0", 256, 66, false},  // 64 bytes of 2-bit + f16
    TypeRow{39, "MXFP4", 32, 17, false},   // e8m0 scale + 16 bytes of e2m1
    TypeRow{40, "NVFP4", 64, 36, false},   // 4 e4m3 scales + 32 bytes of e2m1
};

const TypeRow* find_type(uint32_t id) {
  for (const auto& row : k_types) {
    if (row.id == id) return &row;
  }
  return nullptr;
}

// llama_ftype values (llama.h); 4-6 and 33-35 were removed.
constexpr std::array<std::pair<uint32_t, std::string_view>, 34> k_file_types{{
    {0, "F32"},      {1, "F16"},      {2, "Q4_0"},       {3, "Q4_1"},    {7, "Q8_0"},
    {8, "Q5_0"},     {9, "Q5_1"},     {10, "Q2_K"},      {11, "Q3_K_S"}, {12, "Q3_K_M"},
    {13, "Q3_K_L"},  {14, "Q4_K_S"},  {15, "Q4_K_M"},    {16, "Q5_K_S"}, {17, "Q5_K_M"},
    {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"},    {21, "Q2_K_S"}, {22, "IQ3_XS"},
    {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"},    {26, "IQ3_S"},  {27, "IQ3_M"},
    {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"},    {31, "IQ1_M"},  {32, "BF16"},
    {36, "TQ1_0"},   {37, "TQ2_0"},   {38, "MXFP4_MOE"}, {39, "NVFP4"},
}};

}  // namespace

std::optional<GgmlBlock> ggml_block(uint32_t ggml_type) {
  const TypeRow* row = find_type(ggml_type);
  if (row == nullptr) return std::nullopt;
  return GgmlBlock{row->block_elements, row->block_bytes};
}

std::optional<uint64_t> ggml_tensor_bytes(uint32_t ggml_type, uint64_t n_elements) {
  const TypeRow* row = find_type(ggml_type);
  if (row == nullptr || n_elements % row->block_elements != 0) return std::nullopt;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n_elements / row->block_elements, uint64_t{row->block_bytes},
                             &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

std::optional<std::string> ggml_type_name(uint32_t ggml_type) {
  const TypeRow* row = find_type(ggml_type);
  if (row == nullptr) return std::nullopt;
  return std::string(row->name);
}

bool ggml_type_is_float(uint32_t ggml_type) {
  const TypeRow* row = find_type(ggml_type);
  return row != nullptr && row->is_float;
}

std::optional<std::string> llama_file_type_name(uint64_t file_type) {
  for (const auto& [id, name] : k_file_types) {
    if (id == file_type) return std::string(name);
  }
  return std::nullopt;
}

}  // namespace kvprof::model
