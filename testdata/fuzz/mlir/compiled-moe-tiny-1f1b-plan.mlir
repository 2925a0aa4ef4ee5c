module {
  plan.program @moe_tiny attributes {architecture = #pipe.transformer<num_layers = 4, hidden_size = 64, num_heads = 4, num_kv_heads = 2, ffn_hidden_size = 160, seq_length = 32, vocab_size = 128, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", attention = "eager", moe = <num_experts = 4, top_k = 2, expert_ffn_hidden_size = 48, normalize_top_k = true, aux_loss_coefficient = 0.01, shared_experts = 1, shared_ffn_hidden_size = 32, dense_layers = 1, imbalance = 1.0735881264072171>>, cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 312000000000000.0, efficiency = 0.8131410256410256, memory_bandwidth = 2039000000000.0, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 240000000000.0, inter_node_bandwidth = 24000000000.0, latency_s = 1.0e-05, launch_overhead_s = 0.0, profile = "">, groups = [array<i64: 0>, array<i64: 1>], parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 4, microbatch_size = 2, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner", expert = 2>, source = "testdata/jobs/moe-tiny.json", tokens_per_sample = 32 : i64, training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.003>} {
    plan.layer "embedding" embedding params 8192 fwd 2048.0 bwd 2048.0 wgrad 2048.0 activation 128 checkpoint 128 output 8192 wgrad_bytes 8320 replicated_params 0 replicated_activation 128
    plan.layer "block.0" block params 43136 fwd 3014656.0 bwd 6029312.0 wgrad 2752512.0 activation 135168 checkpoint 8192 output 8192 wgrad_bytes 151552 replicated_params 128 replicated_activation 32768 selective 16384
    plan.layer "block.1" block params 55680 fwd 2637824.0 bwd 5275648.0 wgrad 2375680.0 activation 140800 checkpoint 8192 output 8192 wgrad_bytes 180736 replicated_params 384 replicated_activation 32768 selective 16384 expert_params 36864
    plan.layer "block.2" block params 55680 fwd 2637824.0 bwd 5275648.0 wgrad 2375680.0 activation 140800 checkpoint 8192 output 8192 wgrad_bytes 180736 replicated_params 384 replicated_activation 32768 selective 16384 expert_params 36864
    plan.layer "block.3" block params 55680 fwd 2637824.0 bwd 5275648.0 wgrad 2375680.0 activation 140800 checkpoint 8192 output 8192 wgrad_bytes 180736 replicated_params 384 replicated_activation 32768 selective 16384 expert_params 36864
    plan.layer "head" head params 8256 fwd 524288.0 bwd 1048576.0 wgrad 524288.0 activation 32768 checkpoint 8192 output 4 wgrad_bytes 40960 replicated_params 64 replicated_activation 16384
    plan.stage 0 rank 0 layers [0, 3) params 107008 samples [0, 2, 4, 6, 8]
    plan.stage 1 rank 1 layers [3, 6) params 119616 samples [0, 2, 4, 6, 8]
    plan.rank 0 events 10 slots [16384, 16384] attributes {peak_memory = 2586424 : i64} {
      plan.forward stage 0 mb 0 on 0
      plan.expert_dispatch stage 0 mb 0 bytes 35328 group 0 behind -1 -1 on 0
      plan.expert_combine stage 0 mb 0 bytes 35328 group 0 behind -1 -1 on 0
      plan.signal event 0 on 0
      plan.wait event 0 on 1
      plan.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 2) bytes 16384 on 1
      plan.forward stage 0 mb 1 on 0
      plan.expert_dispatch stage 0 mb 1 bytes 35328 group 0 behind -1 -1 on 0
      plan.expert_combine stage 0 mb 1 bytes 35328 group 0 behind -1 -1 on 0
      plan.signal event 1 on 0
      plan.wait event 1 on 1
      plan.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [2, 4) bytes 16384 on 1
      plan.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 2) bytes 16384 slot 0 on 1
      plan.signal event 2 on 1
      plan.wait event 2 on 0
      plan.backward stage 0 mb 0 slot 0 on 0
      plan.expert_combine stage 0 mb 0 bytes 35328 group 0 behind -1 -1 on 0
      plan.expert_dispatch stage 0 mb 0 bytes 35328 group 0 behind -1 -1 on 0
      plan.forward stage 0 mb 2 on 0
      plan.expert_dispatch stage 0 mb 2 bytes 35328 group 0 behind -1 -1 on 0
      plan.expert_combine stage 0 mb 2 bytes 35328 group 0 behind -1 -1 on 0
      plan.signal event 3 on 0
      plan.wait event 3 on 1
      plan.send activation stage 0 mb 2 to 1 stage 1 mb 2 samples [4, 6) bytes 16384 batch 0 on 1
      plan.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [2, 4) bytes 16384 slot 0 batch 0 on 1
      plan.signal event 4 on 1
      plan.wait event 4 on 0
      plan.backward stage 0 mb 1 slot 0 on 0
      plan.expert_combine stage 0 mb 1 bytes 35328 group 0 behind -1 -1 on 0
      plan.expert_dispatch stage 0 mb 1 bytes 35328 group 0 behind -1 -1 on 0
      plan.forward stage 0 mb 3 on 0
      plan.expert_dispatch stage 0 mb 3 bytes 35328 group 0 behind -1 -1 on 0
      plan.expert_combine stage 0 mb 3 bytes 35328 group 0 behind -1 -1 on 0
      plan.signal event 5 on 0
      plan.wait event 5 on 1
      plan.send activation stage 0 mb 3 to 1 stage 1 mb 3 samples [6, 8) bytes 16384 batch 1 on 1
      plan.recv gradient stage 0 mb 2 from 1 stage 1 mb 2 samples [4, 6) bytes 16384 slot 0 batch 1 on 1
      plan.signal event 6 on 1
      plan.wait event 6 on 0
      plan.backward stage 0 mb 2 slot 0 on 0
      plan.expert_combine stage 0 mb 2 bytes 35328 group 0 behind -1 -1 on 0
      plan.expert_dispatch stage 0 mb 2 bytes 35328 group 0 behind -1 -1 on 0
      plan.recv gradient stage 0 mb 3 from 1 stage 1 mb 3 samples [6, 8) bytes 16384 slot 1 on 1
      plan.signal event 7 on 1
      plan.wait event 7 on 0
      plan.backward stage 0 mb 3 slot 1 on 0
      plan.expert_combine stage 0 mb 3 bytes 35328 group 0 behind -1 -1 on 0
      plan.expert_dispatch stage 0 mb 3 bytes 35328 group 0 behind -1 -1 on 0
      plan.signal event 8 on 0
      plan.wait event 8 on 2
      plan.all_reduce stage 0 bytes 354304 group 0 on 2
      plan.signal event 9 on 2
      plan.wait event 9 on 0
      plan.optimizer_step stage 0 on 0
    }
    plan.rank 1 events 10 slots [16384, 16384] attributes {peak_memory = 2017592 : i64} {
      plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 2) bytes 16384 slot 0 on 1
      plan.signal event 0 on 1
      plan.wait event 0 on 0
      plan.forward stage 1 mb 0 slot 0 on 0
      plan.expert_dispatch stage 1 mb 0 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_combine stage 1 mb 0 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_dispatch stage 1 mb 0 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_combine stage 1 mb 0 bytes 35328 group 1 behind -1 -1 on 0
      plan.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [2, 4) bytes 16384 slot 1 on 1
      plan.signal event 2 on 1
      plan.backward stage 1 mb 0 on 0
      plan.expert_combine stage 1 mb 0 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_dispatch stage 1 mb 0 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_combine stage 1 mb 0 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_dispatch stage 1 mb 0 bytes 35328 group 1 behind -1 -1 on 0
      plan.signal event 1 on 0
      plan.wait event 1 on 1
      plan.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 2) bytes 16384 on 1
      plan.wait event 2 on 0
      plan.forward stage 1 mb 1 slot 1 on 0
      plan.expert_dispatch stage 1 mb 1 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_combine stage 1 mb 1 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_dispatch stage 1 mb 1 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_combine stage 1 mb 1 bytes 35328 group 1 behind -1 -1 on 0
      plan.backward stage 1 mb 1 on 0
      plan.expert_combine stage 1 mb 1 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_dispatch stage 1 mb 1 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_combine stage 1 mb 1 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_dispatch stage 1 mb 1 bytes 35328 group 1 behind -1 -1 on 0
      plan.signal event 3 on 0
      plan.wait event 3 on 1
      plan.recv activation stage 1 mb 2 from 0 stage 0 mb 2 samples [4, 6) bytes 16384 slot 0 batch 0 on 1
      plan.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [2, 4) bytes 16384 batch 0 on 1
      plan.signal event 4 on 1
      plan.wait event 4 on 0
      plan.forward stage 1 mb 2 slot 0 on 0
      plan.expert_dispatch stage 1 mb 2 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_combine stage 1 mb 2 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_dispatch stage 1 mb 2 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_combine stage 1 mb 2 bytes 35328 group 1 behind -1 -1 on 0
      plan.signal event 5 on 0
      plan.backward stage 1 mb 2 on 0
      plan.expert_combine stage 1 mb 2 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_dispatch stage 1 mb 2 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_combine stage 1 mb 2 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_dispatch stage 1 mb 2 bytes 35328 group 1 behind -1 -1 on 0
      plan.signal event 6 on 0
      plan.wait event 5 on 1
      plan.wait event 6 on 1
      plan.recv activation stage 1 mb 3 from 0 stage 0 mb 3 samples [6, 8) bytes 16384 slot 0 batch 1 on 1
      plan.send gradient stage 1 mb 2 to 0 stage 0 mb 2 samples [4, 6) bytes 16384 batch 1 on 1
      plan.signal event 7 on 1
      plan.wait event 7 on 0
      plan.forward stage 1 mb 3 slot 0 on 0
      plan.expert_dispatch stage 1 mb 3 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_combine stage 1 mb 3 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_dispatch stage 1 mb 3 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_combine stage 1 mb 3 bytes 35328 group 1 behind -1 -1 on 0
      plan.backward stage 1 mb 3 on 0
      plan.expert_combine stage 1 mb 3 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_dispatch stage 1 mb 3 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_combine stage 1 mb 3 bytes 35328 group 1 behind -1 -1 on 0
      plan.expert_dispatch stage 1 mb 3 bytes 35328 group 1 behind -1 -1 on 0
      plan.signal event 8 on 0
      plan.wait event 8 on 2
      plan.all_reduce stage 1 bytes 331008 group 1 on 2
      plan.signal event 9 on 2
      plan.wait event 8 on 1
      plan.send gradient stage 1 mb 3 to 0 stage 0 mb 3 samples [6, 8) bytes 16384 on 1
      plan.wait event 9 on 0
      plan.optimizer_step stage 1 on 0
    }
  }
}

