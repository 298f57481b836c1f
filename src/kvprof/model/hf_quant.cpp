// quantization_config of config.json: AWQ, GPTQ, compressed-tensors, fp8 (block scales),
// fbgemm_fp8, bitsandbytes, mxfp4 and ModelOpt, mapped onto Quantization.
#include <fmt/format.h>

#include "kvprof/model/hf_detail.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::model::hf {
namespace {

constexpr uint64_t k_max_group = 1ULL << 20;

std::string to_upper_ascii(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

// Appends the strings of `key` (a list or one string) to out.
Expected<void> append_modules(const json& qc, std::string_view key, std::vector<std::string>& out) {
  HF_TRY(list, get_string_list(qc, key));
  for (auto& s : list)
    out.push_back(std::move(s));
  return {};
}

Expected<int32_t> group_size_field(const json& qc, std::string_view key) {
  const json* v = find_field(qc, {key});
  if (v == nullptr) return -1;
  if (v->is_number_integer() && v->get<int64_t>() == -1) return -1;  // GPTQ: per channel
  HF_TRY(n, get_uint(qc, {key}, k_max_group));
  return n.value_or(0) == 0 ? -1 : static_cast<int32_t>(*n);
}

Expected<Quantization> parse_awq(const json& qc) {
  Quantization q;
  q.method = QuantMethod::awq;
  HF_TRY(bits, get_uint(qc, {"bits", "w_bit"}, 16));
  q.weight_bits = static_cast<uint32_t>(bits.value_or(4));
  HF_TRY(group, get_uint(qc, {"group_size", "q_group_size"}, k_max_group));
  q.group_size = group.value_or(128) == 0 ? -1 : static_cast<int32_t>(group.value_or(128));
  HF_TRY(zero, get_bool(qc, "zero_point"));
  q.zero_point = zero.value_or(true);
  HF_TRY(version, get_string(qc, "version"));
  q.format = version.value_or("gemm");
  if (auto r = append_modules(qc, "modules_to_not_convert", q.ignored_modules); !r) {
    return std::unexpected(r.error());
  }
  return q;
}

Expected<Quantization> parse_gptq(const json& qc) {
  Quantization q;
  q.method = QuantMethod::gptq;
  HF_TRY(bits, get_uint(qc, {"bits"}, 16));
  q.weight_bits = static_cast<uint32_t>(bits.value_or(4));
  HF_TRY(group, group_size_field(qc, "group_size"));
  q.group_size = group;
  HF_TRY(desc, get_bool(qc, "desc_act"));
  q.act_order = desc.value_or(false);
  HF_TRY(sym, get_bool(qc, "sym"));
  q.zero_point = !sym.value_or(true);
  HF_TRY(fmt_name, get_string(qc, "checkpoint_format"));
  q.format = fmt_name.value_or("gptq");
  if (auto r = append_modules(qc, "modules_to_not_convert", q.ignored_modules); !r) {
    return std::unexpected(r.error());
  }
  return q;
}

// One compressed-tensors quantization args object ({num_bits, type, strategy, ...}).
struct CtArgs {
  uint32_t bits = 16;
  bool is_float = false;
  std::string strategy;
  int32_t group_size = -1;
  bool symmetric = true;
  uint32_t block_rows = 0;
  uint32_t block_cols = 0;
};

Expected<CtArgs> parse_ct_args(const json& a, std::string_view where) {
  CtArgs out;
  if (!a.is_object()) return field_error(where, "must be an object");
  HF_TRY(bits, get_uint(a, {"num_bits"}, 64));
  if (!bits || *bits == 0) return field_error(fmt::format("{}.num_bits", where), "is missing");
  out.bits = static_cast<uint32_t>(*bits);
  HF_TRY(type, get_string(a, "type"));
  out.is_float = type.value_or("int") == "float";
  HF_TRY(strategy, get_string(a, "strategy"));
  out.strategy = strategy.value_or("tensor");
  HF_TRY(group, group_size_field(a, "group_size"));
  out.group_size = group;
  HF_TRY(sym, get_bool(a, "symmetric"));
  out.symmetric = sym.value_or(true);
  HF_TRY(block, get_uint_list(a, "block_structure", k_max_group));
  if (block && block->size() == 2) {
    out.block_rows = static_cast<uint32_t>((*block)[0]);
    out.block_cols = static_cast<uint32_t>((*block)[1]);
  }
  return out;
}

Expected<Quantization> parse_compressed_tensors(const json& qc,
                                                std::vector<std::string>& warnings) {
  Quantization q;
  q.method = QuantMethod::compressed_tensors;
  HF_TRY(format, get_string(qc, "format"));
  q.format = format.value_or("");
  const json* groups = find_field(qc, {"config_groups"});
  if (groups != nullptr && !groups->is_object())
    return field_error("config_groups", "must be an object");
  const json* chosen = nullptr;
  size_t n_groups = 0;
  if (groups != nullptr) {
    for (const auto& [name, g] : groups->items()) {
      if (!g.is_object())
        return field_error(fmt::format("config_groups.{}", name), "must be an object");
      if (find_field(g, {"weights"}) == nullptr) continue;
      ++n_groups;
      if (chosen == nullptr) chosen = &g;
    }
  }
  if (chosen == nullptr) {
    warnings.push_back(
        "compressed-tensors config without weight quantization; weights assumed unquantized");
    q.method = QuantMethod::none;
  } else {
    if (n_groups > 1) {
      warnings.push_back(fmt::format(
          "compressed-tensors config has {} weight schemes; using the first for all layers",
          n_groups));
    }
    HF_TRY(w, parse_ct_args(chosen->at("weights"), "config_groups.weights"));
    q.weight_bits = w.bits;
    q.weight_float = w.is_float;
    q.zero_point = !w.symmetric;
    q.group_size = w.strategy == "group" || w.strategy == "tensor_group" ? w.group_size : -1;
    if (w.strategy == "block") {
      q.block_rows = w.block_rows;
      q.block_cols = w.block_cols;
    }
    if (const json* in = find_field(*chosen, {"input_activations"}); in != nullptr) {
      HF_TRY(a, parse_ct_args(*in, "config_groups.input_activations"));
      q.activation_bits = a.bits;
    }
    if (q.format.starts_with("nvfp4") || (w.bits == 4 && w.is_float)) q.method = QuantMethod::nvfp4;
    if (q.format.empty()) q.format = fmt::format("w{}a{}", q.weight_bits, q.activation_bits);
  }
  if (auto r = append_modules(qc, "ignore", q.ignored_modules); !r)
    return std::unexpected(r.error());
  if (const json* kv = find_field(qc, {"kv_cache_scheme"}); kv != nullptr) {
    HF_TRY(a, parse_ct_args(*kv, "kv_cache_scheme"));
    q.has_kv_cache_scheme = true;
    if (a.bits == 8) {
      q.kv_cache_dtype_hint = a.is_float ? DType::f8_e4m3 : DType::i8;
    } else {
      warnings.push_back(
          fmt::format("kv_cache_scheme with {} bits is not modelled; assuming fp8", a.bits));
      q.kv_cache_dtype_hint = DType::f8_e4m3;
    }
  }
  return q;
}

Expected<Quantization> parse_fp8(const json& qc) {
  Quantization q;
  q.method = QuantMethod::fp8;
  q.weight_bits = 8;
  q.weight_float = true;
  q.activation_bits = 8;
  HF_TRY(scheme, get_string(qc, "activation_scheme"));
  q.format = scheme ? fmt::format("fp8 {} activations", *scheme) : "fp8";
  HF_TRY(block, get_uint_list(qc, "weight_block_size", k_max_group));
  if (block) {
    if (block->size() != 2 || (*block)[0] == 0 || (*block)[1] == 0) {
      return field_error("weight_block_size", "must be two positive integers");
    }
    q.block_rows = static_cast<uint32_t>((*block)[0]);
    q.block_cols = static_cast<uint32_t>((*block)[1]);
  }
  for (const auto* key : {"modules_to_not_convert", "ignored_layers"}) {
    if (auto r = append_modules(qc, key, q.ignored_modules); !r) return std::unexpected(r.error());
  }
  return q;
}

Expected<Quantization> parse_bitsandbytes(const json& qc) {
  Quantization q;
  q.method = QuantMethod::bitsandbytes;
  HF_TRY(four, get_bool(qc, "load_in_4bit"));
  HF_TRY(eight, get_bool(qc, "load_in_8bit"));
  if (four.value_or(false)) {
    q.weight_bits = 4;
    q.group_size = 64;  // bitsandbytes 4-bit blocksize
    HF_TRY(type, get_string(qc, "bnb_4bit_quant_type"));
    q.format = type.value_or("fp4");
    q.weight_float = true;
    HF_TRY(dq, get_bool(qc, "bnb_4bit_use_double_quant"));
    if (dq.value_or(false)) q.format += "+double_quant";
  } else if (eight.value_or(false)) {
    q.weight_bits = 8;
    q.group_size = -1;
    q.format = "int8";
  } else {
    return field_error("quantization_config", "bitsandbytes needs load_in_4bit or load_in_8bit");
  }
  if (auto r = append_modules(qc, "llm_int8_skip_modules", q.ignored_modules); !r) {
    return std::unexpected(r.error());
  }
  return q;
}

Expected<Quantization> parse_mxfp4(const json& qc) {
  Quantization q;
  q.method = QuantMethod::mxfp4;
  q.weight_bits = 4;
  q.weight_float = true;
  q.group_size = 32;
  q.format = "mxfp4";
  if (auto r = append_modules(qc, "modules_to_not_convert", q.ignored_modules); !r) {
    return std::unexpected(r.error());
  }
  return q;
}

Expected<Quantization> parse_modelopt(const json& qc) {
  HF_TRY(algo, get_string(qc, "quant_algo"));
  const std::string name = to_upper_ascii(algo.value_or(""));
  Quantization q;
  if (name == "FP8") {
    q.method = QuantMethod::fp8;
    q.weight_bits = 8;
    q.activation_bits = 8;
    q.weight_float = true;
  } else if (name == "NVFP4") {
    q.method = QuantMethod::nvfp4;
    q.weight_bits = 4;
    q.activation_bits = 4;
    q.weight_float = true;
    HF_TRY(group, get_uint(qc, {"group_size"}, k_max_group));
    q.group_size = static_cast<int32_t>(group.value_or(16));
  } else {
    return field_error("quant_algo",
                       fmt::format("'{}' of modelopt is not supported", algo.value_or("")));
  }
  q.format = fmt::format("modelopt {}", name);
  if (auto r = append_modules(qc, "exclude_modules", q.ignored_modules); !r) {
    return std::unexpected(r.error());
  }
  HF_TRY(kv_algo, get_string(qc, "kv_cache_quant_algo"));
  if (kv_algo && to_upper_ascii(*kv_algo) == "FP8") {
    q.has_kv_cache_scheme = true;
    q.kv_cache_dtype_hint = DType::f8_e4m3;
  }
  return q;
}

}  // namespace

Expected<Quantization> parse_quantization(const json& qc, std::vector<std::string>& warnings) {
  if (!qc.is_object()) return field_error("quantization_config", "must be an object");
  HF_TRY(method, get_string(qc, "quant_method"));
  std::string name = to_lower(method.value_or(""));
  if (name.empty()) {
    // bitsandbytes configs written by old transformers carry no quant_method.
    if (qc.contains("load_in_4bit") || qc.contains("load_in_8bit"))
      name = "bitsandbytes";
    else if (qc.contains("config_groups"))
      name = "compressed-tensors";
    else
      return field_error("quantization_config.quant_method", "is missing");
  }
  if (name == "awq") return parse_awq(qc);
  if (name == "gptq") return parse_gptq(qc);
  if (name == "compressed-tensors" || name == "compressed_tensors") {
    return parse_compressed_tensors(qc, warnings);
  }
  if (name == "fp8" || name == "fbgemm_fp8") return parse_fp8(qc);
  if (name == "bitsandbytes") return parse_bitsandbytes(qc);
  if (name == "mxfp4") return parse_mxfp4(qc);
  if (name == "modelopt") return parse_modelopt(qc);
  return field_error(
      "quantization_config.quant_method",
      fmt::format("'{}' is not supported (known: awq, gptq, compressed-tensors, fp8, "
                  "fbgemm_fp8, bitsandbytes, mxfp4, modelopt)",
                  method.value_or(name)));
}

}  // namespace kvprof::model::hf
