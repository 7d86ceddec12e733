"""The fields of real Hugging Face `config.json` files that the lab reads (values as published on
huggingface.co/<repo>/blob/main/config.json; other fields left out). Used to check that
`engine.config.hfconfig` reproduces the presets and the models' published parameter counts."""

LLAMA_31_8B = {  # meta-llama/Llama-3.1-8B
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "attention_bias": False, "mlp_bias": False,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
}
LLAMA_31_70B = {**LLAMA_31_8B, "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64,
                "num_hidden_layers": 80}  # meta-llama/Llama-3.1-70B
LLAMA_31_405B = {**LLAMA_31_8B, "hidden_size": 16384, "intermediate_size": 53248, "num_attention_heads": 128,
                 "num_hidden_layers": 126}  # meta-llama/Llama-3.1-405B
QWEN3_30B_A3B = {  # Qwen/Qwen3-30B-A3B
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
    "intermediate_size": 6144, "moe_intermediate_size": 768, "num_attention_heads": 32, "num_key_value_heads": 4,
    "head_dim": 128, "num_hidden_layers": 48, "num_experts": 128, "num_experts_per_tok": 8,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "attention_bias": False, "sliding_window": None, "use_sliding_window": False,
}
QWEN3_235B_A22B = {**QWEN3_30B_A3B, "hidden_size": 4096, "intermediate_size": 12288, "moe_intermediate_size": 1536,
                   "num_attention_heads": 64, "num_hidden_layers": 94}  # Qwen/Qwen3-235B-A22B
DEEPSEEK_V3 = {  # deepseek-ai/DeepSeek-V3 (DeepSeek-R1 has the same fields)
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
    "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_attention_heads": 128,
    "num_key_value_heads": 128, "num_hidden_layers": 61, "first_k_dense_replace": 3, "moe_layer_freq": 1,
    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "kv_lora_rank": 512,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "num_nextn_predict_layers": 1, "vocab_size": 129280, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
}
DEEPSEEK_V2_LITE = {  # deepseek-ai/DeepSeek-V2-Lite
    "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "hidden_size": 2048,
    "intermediate_size": 10944, "moe_intermediate_size": 1408, "num_attention_heads": 16,
    "num_key_value_heads": 16, "num_hidden_layers": 27, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6, "kv_lora_rank": 512,
    "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "vocab_size": 102400, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}
GPT_OSS_120B = {  # openai/gpt-oss-120b
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_hidden_layers": 36,
    "num_local_experts": 128, "num_experts_per_tok": 4, "experts_per_token": 4, "attention_bias": True,
    "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 18, "vocab_size": 201088,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
}

# published totals and active parameters (B) where the model card states them, and whether the card's
# active count includes the input embedding (Qwen's does; DeepSeek's and OpenAI's leave it out)
PUBLISHED = {
    "Llama-3.1-8B": (LLAMA_31_8B, 8.03, None, None), "Llama-3.1-70B": (LLAMA_31_70B, 70.6, None, None),
    "Llama-3.1-405B": (LLAMA_31_405B, 405.9, None, None), "Qwen3-30B-A3B": (QWEN3_30B_A3B, 30.5, 3.3, True),
    "Qwen3-235B-A22B": (QWEN3_235B_A22B, 235.0, 22.0, True), "DeepSeek-V3": (DEEPSEEK_V3, 671.0, 37.0, False),
    "DeepSeek-V2-Lite": (DEEPSEEK_V2_LITE, 15.7, 2.4, False), "gpt-oss-120b": (GPT_OSS_120B, 116.8, 5.1, False),
}
