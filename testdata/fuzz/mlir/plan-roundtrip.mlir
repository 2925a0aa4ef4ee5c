//
// Every plan instruction prints and parses back to the same IR.

plan.program @roundtrip attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 4, source = "job.json"} {
  plan.layer "embedding" embedding params 128 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 32
  plan.layer "block.0" block params 1024 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 32
  plan.layer "head" head params 128 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 4
  plan.stage 0 rank 0 layers [0, 1) params 128 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 3) params 1152 samples [0, 2]
  plan.rank 0 events 2 slots [64, 64] {
    plan.all_gather stage 0 bytes 512 group 0 on 2
    plan.signal event 0 on 2
    plan.wait event 0 on 0
    plan.forward stage 0 mb 0 on 0
    plan.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 64 on 1
    plan.forward stage 0 mb 1 on 0
    plan.send activation stage 0 mb 1 to 1 stage 1 mb 0 samples [1, 2) bytes 64 batch 3 on 1
    plan.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 64 slot 0 batch 3 on 1
    plan.signal event 1 on 1
    plan.wait event 1 on 0
    plan.backward stage 0 mb 0 slot 0 on 0
    plan.recv gradient stage 0 mb 1 from 1 stage 1 mb 0 samples [1, 2) bytes 64 slot 1 on 1
    plan.backward stage 0 mb 1 slot 1 on 0
    plan.free stage 0 on 0
    plan.reduce_scatter stage 0 bytes 512 group 0 on 2
    plan.optimizer_step stage 0 on 0
  }
  plan.rank 1 events 0 slots [128] {
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 64 slot 0 on 1
    plan.recv activation stage 1 mb 0 from 0 stage 0 mb 1 samples [1, 2) bytes 64 slot 0 on 1
    plan.forward stage 1 mb 0 slot 0 on 0
    plan.expert_dispatch stage 1 mb 0 bytes 256 group 1 behind -1 -1 on 0
    plan.expert_combine stage 1 mb 0 bytes 256 group 1 behind -1 -1 on 0
    plan.backward stage 1 mb 0 on 0
    plan.expert_combine stage 1 mb 0 bytes 256 group 1 behind 1 0 on 0
    plan.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 64 on 1
    plan.send gradient stage 1 mb 0 to 0 stage 0 mb 1 samples [1, 2) bytes 64 on 1
    plan.all_reduce stage 1 bytes 2304 group 1 on 2
    plan.tie_grads stage 1 with 0 stage 0 bytes 512 on 1
    plan.optimizer_step stage 1 on 0
  }
}
