module {
  pipe.model @deepseek_tiny phase communicating attributes {architecture = #pipe.transformer<num_layers = 4, hidden_size = 64, num_heads = 4, num_kv_heads = 4, ffn_hidden_size = 160, seq_length = 32, vocab_size = 128, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", norm_eps = 1.0e-06, attention = "eager", latent_attention = <q_lora_rank = 32, kv_lora_rank = 24, qk_nope_head_dim = 16, qk_rope_head_dim = 8, v_head_dim = 16>, moe = <num_experts = 8, top_k = 2, expert_ffn_hidden_size = 32, router = "sigmoid", normalize_top_k = true, aux_loss_coefficient = 0.0001, shared_experts = 1, shared_ffn_hidden_size = 32, dense_layers = 1, imbalance = 2.0, router_groups = 4, router_group_top_k = 2, bias_update_rate = 0.001>>, cluster = #pipe.cluster<preset = "h100-80gb", peak_flops = 989000000000000.0, efficiency = 0.6744186046511628, memory_bandwidth = 3350000000000.0, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 370800000000.0, inter_node_bandwidth = 48000000000.0, latency_s = 1.0e-05, launch_overhead_s = 0.0, profile = "">, parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 2, schedule = "dualpipev", group_size = 2, microbatches = 4, microbatch_size = 2, sharding = "optimizer", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner", placement = "v", split_backward = true, expert = 2>, source = "testdata/jobs/deepseek-tiny.json", tokens_per_sample = 32 : i64, training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.003>} {
    pipe.layer "embedding" embedding params 8192 fwd 2048.0 bwd 2048.0 wgrad 2048.0 activation 128 checkpoint 128 output 8192 wgrad_bytes 8320 replicated_params 0 replicated_activation 128
    pipe.layer "block.0" block params 45240 fwd 3211264.0 bwd 6422528.0 wgrad 2883584.0 activation 166912 checkpoint 8192 output 8192 wgrad_bytes 201728 replicated_params 4280 replicated_activation 48128 selective 16384
    pipe.layer "block.1" block params 70336 fwd 2457600.0 bwd 4915200.0 wgrad 2129920.0 activation 161280 checkpoint 8192 output 8192 wgrad_bytes 219136 replicated_params 4800 replicated_activation 48128 selective 16384 expert_params 49152
    pipe.layer "block.2" block params 70336 fwd 2457600.0 bwd 4915200.0 wgrad 2129920.0 activation 161280 checkpoint 8192 output 8192 wgrad_bytes 219136 replicated_params 4800 replicated_activation 48128 selective 16384 expert_params 49152
    pipe.layer "block.3" block params 70336 fwd 2457600.0 bwd 4915200.0 wgrad 2129920.0 activation 161280 checkpoint 8192 output 8192 wgrad_bytes 219136 replicated_params 4800 replicated_activation 48128 selective 16384 expert_params 49152
    pipe.layer "head" head params 8256 fwd 524288.0 bwd 1048576.0 wgrad 524288.0 activation 32768 checkpoint 8192 output 4 wgrad_bytes 40960 replicated_params 64 replicated_activation 16384
    pipe.stage 0 layers [0, 2) rank 0 samples [0, 2, 4, 6, 8]
    pipe.stage 1 layers [2, 3) rank 1 samples [0, 2, 4, 6, 8]
    pipe.stage 2 layers [3, 4) rank 1 samples [0, 2, 4, 6, 8]
    pipe.stage 3 layers [4, 6) rank 0 samples [0, 2, 4, 6, 8]
    pipe.rank 0 attributes {peak_memory = 3425296 : i64} {
      pipe.gather_params stage 0 bytes 213728
      pipe.gather_params stage 3 bytes 216064
      pipe.forward stage 0 mb 0
      pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 2) bytes 16384
      pipe.forward stage 0 mb 1
      pipe.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [2, 4) bytes 16384
      pipe.forward stage 0 mb 2
      pipe.send activation stage 0 mb 2 to 1 stage 1 mb 2 samples [4, 6) bytes 16384 batch 0
      pipe.recv activation stage 3 mb 0 from 1 stage 2 mb 0 samples [0, 2) bytes 16384 batch 0
      pipe.forward stage 3 mb 0
      pipe.backward_input stage 3 mb 0
      pipe.recv activation stage 3 mb 1 from 1 stage 2 mb 1 samples [2, 4) bytes 16384 batch 1
      pipe.send gradient stage 3 mb 0 to 1 stage 2 mb 0 samples [0, 2) bytes 16384 batch 1
      pipe.backward_weight stage 3 mb 0
      pipe.forward stage 3 mb 1
      pipe.forward stage 0 mb 3 paired
      pipe.backward stage 3 mb 1
      pipe.send activation stage 0 mb 3 to 1 stage 1 mb 3 samples [6, 8) bytes 16384
      pipe.send gradient stage 3 mb 1 to 1 stage 2 mb 1 samples [2, 4) bytes 16384 batch 2
      pipe.recv activation stage 3 mb 2 from 1 stage 2 mb 2 samples [4, 6) bytes 16384 batch 2
      pipe.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 2) bytes 16384
      pipe.forward stage 3 mb 2 paired
      pipe.backward stage 0 mb 0
      pipe.backward stage 3 mb 2
      pipe.send gradient stage 3 mb 2 to 1 stage 2 mb 2 samples [4, 6) bytes 16384 batch 3
      pipe.recv activation stage 3 mb 3 from 1 stage 2 mb 3 samples [6, 8) bytes 16384 batch 3
      pipe.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [2, 4) bytes 16384
      pipe.forward stage 3 mb 3 paired
      pipe.backward stage 0 mb 1
      pipe.backward stage 3 mb 3
      pipe.reduce_grad stage 3 bytes 216064 reduce_scatter
      pipe.recv gradient stage 0 mb 2 from 1 stage 1 mb 2 samples [4, 6) bytes 16384
      pipe.send gradient stage 3 mb 3 to 1 stage 2 mb 3 samples [6, 8) bytes 16384
      pipe.backward_input stage 0 mb 2
      pipe.backward_weight stage 0 mb 2
      pipe.recv gradient stage 0 mb 3 from 1 stage 1 mb 3 samples [6, 8) bytes 16384
      pipe.backward_input stage 0 mb 3
      pipe.backward_weight stage 0 mb 3
      pipe.reduce_grad stage 0 bytes 213728 reduce_scatter
      pipe.optimizer_step stage 3
      pipe.optimizer_step stage 0
    }
    pipe.rank 1 attributes {peak_memory = 3467520 : i64} {
      pipe.gather_params stage 1 bytes 183040
      pipe.gather_params stage 2 bytes 183040
      pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 2) bytes 16384
      pipe.forward stage 1 mb 0
      pipe.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [2, 4) bytes 16384
      pipe.forward stage 2 mb 0
      pipe.recv activation stage 1 mb 2 from 0 stage 0 mb 2 samples [4, 6) bytes 16384 batch 0
      pipe.send activation stage 2 mb 0 to 0 stage 3 mb 0 samples [0, 2) bytes 16384 batch 0
      pipe.forward stage 1 mb 1
      pipe.forward stage 2 mb 1
      pipe.send activation stage 2 mb 1 to 0 stage 3 mb 1 samples [2, 4) bytes 16384 batch 1
      pipe.forward stage 1 mb 2
      pipe.recv gradient stage 2 mb 0 from 0 stage 3 mb 0 samples [0, 2) bytes 16384 batch 1
      pipe.backward stage 2 mb 0
      pipe.forward stage 2 mb 2 paired
      pipe.backward stage 1 mb 0
      pipe.recv activation stage 1 mb 3 from 0 stage 0 mb 3 samples [6, 8) bytes 16384
      pipe.recv gradient stage 2 mb 1 from 0 stage 3 mb 1 samples [2, 4) bytes 16384 batch 2
      pipe.send activation stage 2 mb 2 to 0 stage 3 mb 2 samples [4, 6) bytes 16384 batch 2
      pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 2) bytes 16384
      pipe.forward stage 1 mb 3 paired
      pipe.backward stage 2 mb 1
      pipe.forward stage 2 mb 3 paired
      pipe.backward stage 1 mb 1
      pipe.recv gradient stage 2 mb 2 from 0 stage 3 mb 2 samples [4, 6) bytes 16384 batch 3
      pipe.send activation stage 2 mb 3 to 0 stage 3 mb 3 samples [6, 8) bytes 16384 batch 3
      pipe.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [2, 4) bytes 16384
      pipe.backward stage 2 mb 2
      pipe.backward stage 1 mb 2
      pipe.send gradient stage 1 mb 2 to 0 stage 0 mb 2 samples [4, 6) bytes 16384
      pipe.recv gradient stage 2 mb 3 from 0 stage 3 mb 3 samples [6, 8) bytes 16384
      pipe.backward_input stage 2 mb 3
      pipe.backward_input stage 1 mb 3
      pipe.send gradient stage 1 mb 3 to 0 stage 0 mb 3 samples [6, 8) bytes 16384
      pipe.backward_weight stage 2 mb 3
      pipe.reduce_grad stage 2 bytes 183040 reduce_scatter
      pipe.backward_weight stage 1 mb 3
      pipe.reduce_grad stage 1 bytes 183040 reduce_scatter
      pipe.optimizer_step stage 2
      pipe.optimizer_step stage 1
    }
  }
}

