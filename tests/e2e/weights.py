#!/usr/bin/env python3
"""Parameters out and in as Hugging Face safetensors: --save-params writes model.safetensors
(GPT-2's names, the Qwen MoE ones, DeepSeek-V3's; contiguous F32 data) and config.json; a run
started with --init from the file written after step 4 continues with bitwise the losses and
final parameters of an uninterrupted run (with SGD, which keeps no optimizer state: the file
holds parameters only), under mpirun, as rank threads and in the reference, for sharded and
replicated plans, and from the same parameters cut into the files and index of a large
Hugging Face model; files that do not hold exactly the model's tensors are refused with exit code
1 and a message naming the tensor.

Usage: weights.py --bin BUILD/bin --work DIR
"""

import json
import os
import shutil
import struct
import subprocess

from common import (ENV, Tools, arguments, check, finish, losses, read_safetensors, small_gpt,
                    small_llama, write_safetensors)

LAYERS = 6
PARALLELISM = {
    "full": {"pipeline": 2, "data": 2, "stages_per_device": 2, "schedule": "breadth-first",
             "microbatches": 4, "sharding": "full"},
    "optimizer": {"pipeline": 2, "data": 2, "schedule": "1f1b", "microbatches": 4,
                  "sharding": "optimizer"},
}


def step_lines(output):
    return [l for l in output.splitlines() if l.startswith("step ")]


def gpt2_names(layers):
    names = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight",
             "transformer.ln_f.bias", "lm_head.weight"}
    for n in range(layers):
        for suffix in ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                       "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                       "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
                       "mlp.c_proj.bias"]:
            names.add(f"transformer.h.{n}.{suffix}")
    return names


def same_bytes(a, b):
    with open(a, "rb") as f, open(b, "rb") as g:
        return f.read() == g.read()


def round_trip(tools, name, parallelism):
    plan = tools.compile(small_gpt(parallelism, layers=LAYERS, optimizer="sgd"), f"weights-{name}")
    dirs = {k: os.path.join(tools.work, f"{name}-{k}") for k in
            ("whole", "four", "mpi", "threads", "reference", "shards", "from-shards")}
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
    whole = tools.run(plan, 4, "--steps=6", f"--save-params={dirs['whole']}")
    check(f"{name}: an uninterrupted run of 6 steps", whole.returncode == 0, whole.stderr)
    four = tools.run(plan, 4, "--steps=4", f"--save-params={dirs['four']}")
    check(f"{name}: a run of 4 steps saves its parameters", four.returncode == 0, four.stderr)
    if whole.returncode or four.returncode:
        return
    saved = os.path.join(dirs["four"], "model.safetensors")
    tensors, metadata = read_safetensors(saved)
    check(f"{name}: model.safetensors holds GPT-2's tensors, F32, contiguous",
          set(tensors) == gpt2_names(LAYERS)
          and len(tensors["transformer.h.0.attn.c_attn.weight"]) == 32 * 96
          and metadata.get("format") == "pt" and metadata.get("conduit.step") == "4",
          f"{sorted(tensors)} {metadata}")
    with open(os.path.join(dirs["four"], "config.json")) as f:
        config = json.load(f)
    check(f"{name}: config.json describes the model",
          config["architectures"] == ["GPT2LMHeadModel"] and config["n_layer"] == LAYERS
          and config["n_embd"] == 32 and config["n_head"] == 4 and config["vocab_size"] == 64
          and config["n_positions"] == 16 and config["activation_function"] == "gelu_new"
          and config["tie_word_embeddings"] is False, json.dumps(config))

    expected = step_lines(whole.stdout)[4:]
    runs = {
        "mpi": tools.run(plan, 4, "--steps=2", f"--init={saved}",
                         f"--save-params={dirs['mpi']}"),
        "threads": tools.run_threads(plan, 4, "--steps=2", f"--init={saved}",
                                     f"--save-params={dirs['threads']}"),
        "reference": tools.reference(plan, "--steps=2", f"--init={saved}",
                                     f"--save-params={dirs['reference']}"),
    }
    # The same parameters in three files and an index, as the transformers library saves a
    # large model: the folder reads as the one file.
    split_into_shards(saved, dirs["shards"])
    runs["from-shards"] = tools.run(plan, 4, "--steps=2", f"--init={dirs['shards']}",
                                    f"--save-params={dirs['from-shards']}")
    final = os.path.join(dirs["whole"], "model.safetensors")
    for kind, result in runs.items():
        check(f"{name}: {kind} run from --init continues with bitwise the uninterrupted losses",
              result.returncode == 0 and step_lines(result.stdout) == expected
              and "continuing after step 4" in result.stdout,
              f"{result.stdout}{result.stderr}\nexpected {expected}")
        check(f"{name}: and ends with bitwise its parameters",
              result.returncode == 0
              and same_bytes(os.path.join(dirs[kind], "model.safetensors"), final)
              and same_bytes(os.path.join(dirs[kind], "config.json"),
                             os.path.join(dirs["whole"], "config.json")))


def split_into_shards(saved, folder, parts=3):
    """Writes the tensors of the safetensors file `saved` into `parts` files and an index in
    `folder`, as the transformers library saves a large model (model-0000k-of-0000n.safetensors
    and model.safetensors.index.json), each file with the original's metadata."""
    with open(saved, "rb") as f:
        data = f.read()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + length].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    names = sorted(header, key=lambda n: header[n]["data_offsets"])
    os.makedirs(folder, exist_ok=True)
    weight_map = {}
    for k in range(parts):
        file = f"model-{k + 1:05d}-of-{parts:05d}.safetensors"
        chosen = names[k * len(names) // parts:(k + 1) * len(names) // parts]
        tensors = {}
        for name in chosen:
            t = header[name]
            begin, end = t["data_offsets"]
            tensors[name] = (t["dtype"], t["shape"], data[8 + length + begin:8 + length + end])
            weight_map[name] = file
        write_safetensors(os.path.join(folder, file), tensors, metadata)
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": len(data) - 8 - length}, "weight_map": weight_map},
                  f)


def six_and_four(tools, plan, label, prefix, extra=()):
    """Runs `plan` on 4 ranks for 6 steps and for 4, each saving its parameters; returns the
    folders ("whole", "four", and "mpi" and `extra` for later runs) and the 6-step run, or None
    when a run failed."""
    dirs = {k: os.path.join(tools.work, f"{prefix}-{k}") for k in ("whole", "four", "mpi", *extra)}
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
    whole = tools.run(plan, 4, "--steps=6", f"--save-params={dirs['whole']}")
    four = tools.run(plan, 4, "--steps=4", f"--save-params={dirs['four']}")
    check(f"{label}: runs of 6 and of 4 steps",
          whole.returncode == 0 and four.returncode == 0, whole.stderr + four.stderr)
    if whole.returncode or four.returncode:
        return None
    return dirs, whole


def continues_from(tools, plan, label, saved, dirs, whole):
    """A run of `plan` from --init=`saved` (written after step 4) continues with bitwise the
    6-step run's losses and ends with bitwise its parameters."""
    resumed = tools.run(plan, 4, "--steps=2", f"--init={saved}", f"--save-params={dirs['mpi']}")
    check(f"{label}: a run from --init continues with bitwise the uninterrupted losses",
          resumed.returncode == 0 and step_lines(resumed.stdout) == step_lines(whole.stdout)[4:],
          f"{resumed.stdout}{resumed.stderr}\nexpected {step_lines(whole.stdout)[4:]}")
    check(f"{label}: and ends with bitwise its parameters",
          resumed.returncode == 0 and same_bytes(os.path.join(dirs["mpi"], "model.safetensors"),
                                                 os.path.join(dirs["whole"], "model.safetensors")))


def moe_round_trip(tools, expert, qwen3=False, gated=False, mixtral=False):
    """A mixture of experts with a shared expert goes out with Qwen2-MoE's names (its shared
    expert's gate zero, its down projection doubled) and comes back in bit for bit; with
    `qwen3`, Qwen3-MoE's attention (heads of their own width, q/k norms) and no shared expert,
    with Qwen3-MoE's names; with `gated`, Qwen2-MoE itself (q, k and v biases, the shared
    expert's own gate); with `mixtral`, Mixtral itself (experts in every block, no shared one),
    with Mixtral's names. The config.json of the last two, compiled, plan the model the file
    continues bitwise. With expert parallelism (`expert` > 1) each rank holds its own experts:
    the file gathers them from the expert group, and --init gives each rank its own."""
    parallelism = {"pipeline": 2, "data": 2, "schedule": "1f1b", "microbatches": 4,
                   "sharding": "full", "expert": expert}
    job = small_llama(parallelism, layers=4, optimizer="sgd")
    job["model"]["moe"] = {"num_experts": 4, "top_k": 2, "expert_ffn_hidden_size": 24,
                           "aux_loss_coefficient": 0.01, "dense_layers": 1}
    if qwen3:
        job["model"].update(head_dim=12, qk_norm=True)
    elif mixtral:
        # Mixtral's config says one width, its experts' (intermediate_size), and renormalises
        # the chosen experts' weights.
        job["model"]["ffn_hidden_size"] = 24
        job["model"]["moe"].update(dense_layers=0, normalize_top_k=True)
    else:
        job["model"]["moe"].update(shared_experts=1, shared_ffn_hidden_size=32)
    if gated:
        job["model"]["bias"] = "qkv"
        job["model"]["moe"]["shared_expert_gate"] = True
    kind = ("qwen3-moe" if qwen3 else "moe-gated" if gated else "mixtral" if mixtral
            else "moe")
    from_config = gated or mixtral
    label = f"{kind} E={expert}"
    prefix = f"{kind}-ep{expert}"
    plan = tools.compile(job, f"weights-{prefix}")
    runs = six_and_four(tools, plan, label, prefix, extra=("hf",) if from_config else ())
    if not runs:
        return
    dirs, whole = runs
    saved = os.path.join(dirs["four"], "model.safetensors")
    tensors, _ = read_safetensors(saved)
    with open(os.path.join(dirs["four"], "config.json")) as f:
        config = json.load(f)
    last = "model.layers.1.mlp.experts.3."
    names = (all(last + m + ".weight" in tensors for m in ("gate_proj", "up_proj", "down_proj"))
             and "model.layers.1.mlp.gate.weight" in tensors
             and "model.layers.0.mlp.gate_proj.weight" in tensors
             and config.get("num_experts") == 4 and config.get("mlp_only_layers") == [0])
    if mixtral:
        moe = [f"model.layers.{b}.block_sparse_moe." for b in range(4)]
        check(f"{label}: Mixtral's names in every block, and its config",
              all(m + "gate.weight" in tensors and f"{m}experts.3.{w}.weight" in tensors
                  for m in moe for w in ("w1", "w2", "w3"))
              and not any(".mlp." in n for n in tensors)
              and len(tensors["model.layers.3.block_sparse_moe.experts.3.w2.weight"]) == 32 * 24
              and config["architectures"] == ["MixtralForCausalLM"]
              and config["num_local_experts"] == 4 and config["num_experts_per_tok"] == 2
              and config["intermediate_size"] == 24 and config["router_aux_loss_coef"] == 0.01
              and config["output_router_logits"] is True,
              f"{sorted(tensors)} {json.dumps(config)}")
    elif qwen3:
        check(f"{label}: Qwen3-MoE's names, its q/k norms' gains, and its config",
              names and len(tensors["model.layers.2.self_attn.q_norm.weight"]) == 12
              and len(tensors["model.layers.2.self_attn.q_proj.weight"]) == 48 * 32
              and not any("shared_expert" in n for n in tensors)
              and config["architectures"] == ["Qwen3MoeForCausalLM"] and config["head_dim"] == 12,
              f"{sorted(tensors)} {json.dumps(config)}")
    else:
        gate = tensors["model.layers.2.mlp.shared_expert_gate.weight"]
        check(f"{label}: Qwen2-MoE's names, " + ("the shared expert's gate" if gated
                                                  else "a zero shared-expert gate")
              + ", and its config",
              names and len(gate) == 32 and (set(gate) != {0.0}) == gated
              and config["architectures"] == ["Qwen2MoeForCausalLM"],
              f"{sorted(tensors)} {json.dumps(config)}")
    check(f"{label}: the step lines carry aux_loss",
          all(" aux_loss " in line for line in step_lines(whole.stdout)), whole.stdout)
    continues_from(tools, plan, label, saved, dirs, whole)
    if from_config:
        # Qwen2-MoE's config gates its shared expert, Mixtral's renormalises: the written
        # config, compiled, is the job's model, and the file continues it bitwise.
        hf_job = dict(job, model={"kind": "hf", "path": os.path.join(dirs["four"], "config.json"),
                                  "attention": "eager", "seq_length": job["model"]["seq_length"]})
        hf_plan = tools.compile(hf_job, f"weights-{prefix}-hf")
        from_hf = tools.run(hf_plan, 4, "--steps=2", f"--init={saved}",
                            f"--save-params={dirs['hf']}")
        check(f"{label}: its config.json, compiled, plans the model the file continues bitwise",
              from_hf.returncode == 0
              and step_lines(from_hf.stdout) == step_lines(whole.stdout)[4:],
              f"{from_hf.stdout}{from_hf.stderr}\nexpected {step_lines(whole.stdout)[4:]}")


def deepseek_round_trip(tools, interleave, mtp=False):
    """DeepSeek-V3's shape (latent attention, a dense first block, sigmoid-routed experts with a
    shared one, over expert groups of 2) goes out with DeepSeek-V3's names and config and comes
    back in bit for bit; and the config.json written, read by conduit-compile as a Hugging Face
    config, plans the same model: the file starts that plan's run, which continues with bitwise
    the uninterrupted losses. With `interleave`, in DeepSeek's released layout (the rotary
    columns in interleaved pairs, rope_interleave true) and with DeepSeek-V3's own function (yarn
    rotary positions with its softmax factor, the routed experts' weights times 2.5), which the
    config carries back. With `mtp`, a multi-token prediction module after the blocks, written
    and read as DeepSeek's layer after them (its embed_tokens, enorm, hnorm, eh_proj,
    shared_head and block), which a job on the config plans with model.mtp_layers beside its
    path."""
    parallelism = {"pipeline": 2, "data": 2, "schedule": "1f1b", "microbatches": 4,
                   "sharding": "full", "expert": 2}
    job = small_llama(parallelism, layers=4, optimizer="sgd")
    job["model"].update(num_kv_heads=4, latent_attention={
        "q_lora_rank": 16, "kv_lora_rank": 12, "qk_nope_head_dim": 8, "qk_rope_head_dim": 6,
        "v_head_dim": 8, "rope_interleave": interleave})
    job["model"]["moe"] = {"num_experts": 4, "top_k": 2, "expert_ffn_hidden_size": 24,
                           "router": "sigmoid", "normalize_top_k": True, "shared_experts": 1,
                           "shared_ffn_hidden_size": 24, "aux_loss_coefficient": 0.01,
                           "dense_layers": 1, "imbalance": 1.5}
    if interleave:
        job["model"]["rope_scaling"] = {"rope_type": "yarn", "factor": 4,
                                        "original_max_position_embeddings": 8, "mscale": 1,
                                        "mscale_all_dim": 1}
        job["model"]["moe"]["routed_scaling_factor"] = 2.5
    if mtp:
        # Untied, as DeepSeek-V3: the module's copy of the token table is its own tensor.
        job["model"].update(mtp_layers=1, tie_embeddings=False)
    label = "DeepSeek-V3 shape E=2" + (", interleaved rotary, yarn, routed x2.5" if interleave
                                       else "") + (", a prediction module" if mtp else "")
    prefix = "deepseek" + ("-interleaved" if interleave else "") + ("-mtp" if mtp else "")
    plan = tools.compile(job, f"weights-{prefix}")
    runs = six_and_four(tools, plan, label, prefix, extra=("hf",))
    if not runs:
        return
    dirs, whole = runs
    saved = os.path.join(dirs["four"], "model.safetensors")
    tensors, _ = read_safetensors(saved)
    config_path = os.path.join(dirs["four"], "config.json")
    with open(config_path) as f:
        config = json.load(f)
    attention = "model.layers.2.self_attn."
    shapes = {"q_a_proj": 16 * 32, "q_a_layernorm": 16, "q_b_proj": 4 * 14 * 16,
              "kv_a_proj_with_mqa": (12 + 6) * 32, "kv_a_layernorm": 12,
              "kv_b_proj": 4 * 16 * 12, "o_proj": 32 * 4 * 8}
    experts = "model.layers.1.mlp."
    check(f"{label}: DeepSeek-V3's names and config",
          all(len(tensors.get(attention + m + ".weight", [])) == n for m, n in shapes.items())
          and experts + "gate.e_score_correction_bias" in tensors
          and experts + "shared_experts.down_proj.weight" in tensors
          and experts + "experts.3.up_proj.weight" in tensors
          and "model.layers.0.mlp.gate_proj.weight" in tensors
          and not any("q_proj" in n or "shared_expert." in n for n in tensors)
          and config["architectures"] == ["DeepseekV3ForCausalLM"]
          and config["rope_interleave"] is interleave and config["n_shared_experts"] == 1
          and config["first_k_dense_replace"] == 1 and config["scoring_func"] == "sigmoid"
          and config["routed_scaling_factor"] == (2.5 if interleave else 1.0)
          and ("rope_scaling" in config) == interleave
          and (not interleave or config["rope_scaling"]["rope_type"] == "yarn"
               and config["rope_scaling"]["mscale_all_dim"] == 1
               and config["max_position_embeddings"] == 32),
          f"{sorted(tensors)} {json.dumps(config)}")
    if mtp:
        module = "model.layers.4."
        # shared_head.head is written from the head's own matrix; the module's embed_tokens is
        # its copy of the table, which the tie keeps equal to the embedding's after 4 steps.
        check(f"{label}: the module's names, its table and head copies, and the config's count",
              all(module + n + ".weight" in tensors
                  for n in ("embed_tokens", "enorm", "hnorm", "eh_proj", "shared_head.norm",
                            "shared_head.head", "self_attn.kv_b_proj", "mlp.experts.3.up_proj"))
              and len(tensors[module + "eh_proj.weight"]) == 32 * 64
              and tensors[module + "shared_head.head.weight"] == tensors["lm_head.weight"]
              and tensors[module + "embed_tokens.weight"] == tensors["model.embed_tokens.weight"]
              and config["num_nextn_predict_layers"] == 1
              and "mtp_loss" in step_lines(whole.stdout)[0],
              f"{sorted(tensors)} {json.dumps(config)}")
    continues_from(tools, plan, label, saved, dirs, whole)
    # The written config as a Hugging Face model of a job: the same layers, the same math.
    # A yarn model's config states its extended context as its positions: the job trains the
    # sequence it trained.
    hf_job = dict(job, model={"kind": "hf", "path": config_path, "attention": "eager",
                              "seq_length": job["model"]["seq_length"],
                              "moe": {"imbalance": 1.5},
                              **({"mtp_layers": 1} if mtp else {})})
    hf_plan = tools.compile(hf_job, f"weights-{prefix}-hf")
    from_hf = tools.run(hf_plan, 4, "--steps=2", f"--init={saved}",
                        f"--save-params={dirs['hf']}")
    check(f"{label}: its config.json, compiled, plans the model the file continues bitwise",
          from_hf.returncode == 0 and step_lines(from_hf.stdout) == step_lines(whole.stdout)[4:],
          f"{from_hf.stdout}{from_hf.stderr}\nexpected {step_lines(whole.stdout)[4:]}")
    if interleave:
        # Each of DeepSeek's choices left out, the same file is another model: the rotary
        # layout, the rope scaling and the routed scaling are applied, not read past.
        for what, change in (
                ("read as halves", {"latent_attention": {"rope_interleave": False}}),
                ("without its rope scaling", {"rope_scaling": {"rope_type": "default"}}),
                ("with unit routed scaling",
                 {"moe": {"imbalance": 1.5, "routed_scaling_factor": 1}})):
            other_job = dict(hf_job, model=dict(hf_job["model"], **change))
            name = f"weights-{prefix}-" + what.replace(" ", "-")
            other = tools.run(tools.compile(other_job, name), 4, "--steps=2", f"--init={saved}")
            check(f"{label}: {what}, the file trains another model",
                  other.returncode == 0
                  and step_lines(other.stdout) != step_lines(whole.stdout)[4:],
                  f"{other.stdout}{other.stderr}")


def refusals(tools):
    parallelism = PARALLELISM["full"]
    plan = tools.compile(small_gpt(parallelism, layers=LAYERS, optimizer="sgd"), "weights-bad")
    source = os.path.join(tools.work, "bad-source")
    shutil.rmtree(source, ignore_errors=True)
    result = tools.reference(plan, "--steps=1", f"--save-params={source}")
    check("the reference saves its parameters", result.returncode == 0, result.stderr)
    good = os.path.join(source, "model.safetensors")
    tensors, _ = read_safetensors(good)
    with open(good, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        shapes = {n: t["shape"] for n, t in json.loads(f.read(length)).items()
                  if n != "__metadata__"}

    def variant(name, edit):
        """The file with `edit` applied to {name: (dtype, shape, bytes)}, without metadata."""
        table = {n: ("F32", shapes[n], v.tobytes()) for n, v in tensors.items()}
        edit(table)
        path = os.path.join(tools.work, f"bad-{name}.safetensors")
        write_safetensors(path, table)
        return path

    def flat(table, name, shape):
        dtype, _, data = table[name]
        table[name] = (dtype, shape, data)

    with open(good, "rb") as f:
        data = f.read()
    truncated = os.path.join(tools.work, "bad-truncated.safetensors")
    with open(truncated, "wb") as f:
        f.write(data[:len(data) - 100])
    huge = os.path.join(tools.work, "bad-huge-header.safetensors")
    with open(huge, "wb") as f:
        f.write(struct.pack("<Q", 1 << 40) + b"{}")
    bf16 = variant("bf16", lambda t: t.update(
        {n: ("BF16", shape, b"".join(d[i + 2:i + 4] for i in range(0, len(d), 4)))
         for n, (_, shape, d) in list(t.items())}))
    cases = [
        ("a truncated file", truncated, "lie beyond the data section"),
        ("a header length of 2^40", huge, "a safetensors header has at most 104857600"),
        ("a missing file", os.path.join(tools.work, "none.safetensors"), "cannot read"),
        ("a missing tensor", variant("missing", lambda t: t.pop("transformer.h.3.ln_2.bias")),
         'tensor "transformer.h.3.ln_2.bias" is missing (the model needs [32])'),
        ("an extra tensor", variant("extra", lambda t: t.update(
            {"transformer.h.6.ln_1.weight": ("F32", [32], bytes(128))})),
         'tensor "transformer.h.6.ln_1.weight" is not a parameter of this model'),
        ("a tensor of another shape", variant("shape", lambda t: flat(
            t, "transformer.h.0.attn.c_attn.weight", [96, 32])),
         'tensor "transformer.h.0.attn.c_attn.weight" has shape [96, 32]; the model needs '
         '[32, 96]'),
        ("an integer tensor", variant("dtype", lambda t: t.update(
            {"transformer.ln_f.bias": ("I32", [32], bytes(128))})),
         'tensor "transformer.ln_f.bias" has dtype I32; conduit-run reads F32, BF16, F16 and F8_E4M3 with block scales'),
    ]
    for what, path, message in cases:
        result = tools.run(plan, 4, "--steps=1", f"--init={path}", timeout=60)
        check(f"--init with {what} is refused with exit code 1",
              result.returncode == 1 and message in result.stderr
              and "step 1" not in result.stdout, result.stderr)
    result = tools.reference(plan, "--steps=1", f"--init={cases[3][1]}")
    check("--reference --init refuses it too",
          result.returncode == 1 and cases[3][2] in result.stderr, result.stderr)
    # BF16 parameters (the upper halves of the floats) are read as floats; without Conduit's
    # metadata the run starts at step 1.
    result = tools.run(plan, 4, "--steps=1", f"--init={bf16}", timeout=60)
    check("--init reads BF16 tensors", result.returncode == 0
          and step_lines(result.stdout)[0].startswith("step 1 loss "), result.stderr)

    for args, message in [([f"--init={good}", f"--resume={source}"], "--init and --resume"),
                          (["--init"], "--init needs a value")]:
        result = subprocess.run([tools.runner, plan] + args, capture_output=True, text=True,
                                timeout=60, env=ENV)
        check(f"{' '.join(args)} exits 2", result.returncode == 2 and message in result.stderr,
              result.stderr)


def main():
    parser = arguments()
    args = parser.parse_args()
    tools = Tools(args.bin, args.work, args.compiler_bin)
    for name, parallelism in PARALLELISM.items():
        round_trip(tools, name, parallelism)
    for expert in (1, 2):
        moe_round_trip(tools, expert)
    moe_round_trip(tools, 2, qwen3=True)
    moe_round_trip(tools, 2, gated=True)
    moe_round_trip(tools, 2, mixtral=True)
    for interleave in (False, True):
        deepseek_round_trip(tools, interleave)
    deepseek_round_trip(tools, False, mtp=True)
    refusals(tools)
    finish("parameters go out and in as safetensors, bit for bit")


if __name__ == "__main__":
    main()
