//
// Every pipe op at the communication level prints and parses back to the same IR, in the
// custom and in the generic form.

pipe.model @roundtrip phase communicating attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "full", fsdp_window = 2, rank_order = "pipeline-inner", gradient_reduction = "run", recompute_modules = ["layernorm", "mlp"]>,
  cluster = #pipe.cluster<preset = "h100-80gb", peak_flops = 9.89e14, efficiency = 0.45, memory_bandwidth = 3.35e12, memory_bytes = 85899345920, gpus_per_node = 4, intra_node_bandwidth = 4.5e11, inter_node_bandwidth = 5.0e10, latency_s = 1.0e-5, launch_overhead_s = 2.0e-5, profile = "p.json">,
  training = #pipe.training<dtype = "fp32", optimizer = "sgd", seed = 7, learning_rate = 0.25>,
  architecture = #pipe.transformer<num_layers = 1, hidden_size = 8, num_heads = 2, num_kv_heads = 1, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = true, bias = "qkv">,
  stage_layers = array<i64: 1, 2>,
  microbatch_partitions = [array<i64: 1, 1>, array<i64: 2>],
  source = "job.json"} {
  pipe.layer "embedding" embedding params 128 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 32
  pipe.layer "block.0" block params 1024 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 32 selective 8
  pipe.layer "head" head params 128 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 3) rank 1 samples [0, 2]
  pipe.rank 0 {
    pipe.unshard stage 0 bytes 512
    pipe.forward stage 0 mb 0
    pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 64
    pipe.forward stage 0 mb 1
    pipe.send activation stage 0 mb 1 to 1 stage 1 mb 0 samples [1, 2) bytes 64 batch 0
    pipe.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 64 batch 0
    pipe.backward stage 0 mb 0
    pipe.recv gradient stage 0 mb 1 from 1 stage 1 mb 0 samples [1, 2) bytes 64
    pipe.backward stage 0 mb 1
    pipe.reshard stage 0
    pipe.reduce_grad stage 0 bytes 512 reduce_scatter
    pipe.optimizer_step stage 0
  }
  pipe.rank 1 {
    pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 64
    pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 1 samples [1, 2) bytes 64
    pipe.forward stage 1 mb 0
    pipe.backward stage 1 mb 0
    pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 64
    pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 1 samples [1, 2) bytes 64
    pipe.reduce_grad stage 1 bytes 1024 all_reduce
    pipe.optimizer_step stage 1
    pipe.gather_params stage 1 bytes 1024
  }
}
