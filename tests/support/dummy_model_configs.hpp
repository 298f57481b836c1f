// Tiny HF configs (a few layers, hidden 128, vocabulary 1024) of every architecture make-gguf
// supports, shared by the dummy GGUF tests.
#pragma once

#include <cstdint>

namespace kvprof::test {

struct DummyCase {
  const char* name;
  const char* config;  // HF config.json
  const char* arch;    // expected llama.cpp architecture
};

inline constexpr uint32_t k_dummy_vocab_size = 1024;

inline const DummyCase k_dummy_cases[] = {
    {"llama",
     R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":2048,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})",
     "llama"},
    {"mistral",
     R"({"architectures":["MistralForCausalLM"],"model_type":"mistral","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":1,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":2048,
        "sliding_window":null,"torch_dtype":"bfloat16"})",
     "llama"},
    {"mixtral",
     R"({"architectures":["MixtralForCausalLM"],"model_type":"mixtral","hidden_size":128,
        "intermediate_size":64,"num_attention_heads":4,"num_key_value_heads":2,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":2048,
        "num_local_experts":4,"num_experts_per_tok":2,"torch_dtype":"bfloat16"})",
     "llama"},
    {"qwen2",
     R"({"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":2048,
        "tie_word_embeddings":true,"torch_dtype":"bfloat16"})",
     "qwen2"},
    {"qwen3",
     R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":64,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":2048,
        "tie_word_embeddings":true,"torch_dtype":"bfloat16"})",
     "qwen3"},
    {"qwen3moe",
     R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe","hidden_size":128,
        "intermediate_size":256,"moe_intermediate_size":64,"num_experts":8,
        "num_experts_per_tok":2,"decoder_sparse_step":1,"mlp_only_layers":[],
        "num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"num_hidden_layers":2,
        "vocab_size":1024,"max_position_embeddings":2048,"tie_word_embeddings":false,
        "torch_dtype":"bfloat16"})",
     "qwen3moe"},
    {"phi3",
     R"({"architectures":["Phi3ForCausalLM"],"model_type":"phi3","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":4,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":4096,
        "sliding_window":2047,"tie_word_embeddings":false,"torch_dtype":"bfloat16"})",
     "phi3"},
    {"gemma2",
     R"({"architectures":["Gemma2ForCausalLM"],"model_type":"gemma2","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":2048,
        "sliding_window":64,"query_pre_attn_scalar":32,"torch_dtype":"bfloat16"})",
     "gemma2"},
    {"gemma3",
     R"({"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":32,
        "num_hidden_layers":3,"vocab_size":1024,"max_position_embeddings":2048,
        "sliding_window":64,"sliding_window_pattern":2,"query_pre_attn_scalar":32,
        "torch_dtype":"bfloat16"})",
     "gemma3"},
};

}  // namespace kvprof::test
