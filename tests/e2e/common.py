"""Helpers shared by the end-to-end tests: building small jobs, compiling them, and running
plans under mpirun with the settings a test machine needs (shared-memory transport, more
processes than cores, running as root in containers)."""

import argparse
import array
import json
import os
import re
import struct
import subprocess
import sys

ENV = dict(os.environ,
           OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl="self,vader", OMPI_MCA_rmaps_base_oversubscribe="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none")
# A step line: the loss, then the losses conduit-run prints beside it (aux_loss, z_loss,
# mtp_loss), each as its name and value.
STEP = re.compile(r"^step (\d+) loss (\S+)((?: [a-z_]+ \S+)*)$", re.M)


def arguments():
    """The parser of the options every end-to-end test takes, --bin BUILD/bin and --work DIR;
    a test adds its own."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--compiler-bin",
                        help="where conduit-compile is, when not in --bin (a runtime-only build)")
    return parser


def small_gpt(parallelism, layers=6, microbatch_size=1, **training):
    """A GPT small enough that a step takes milliseconds on a CPU. Its attention is "eager",
    what the CPU runtime computes, so that the plan's memory is the runtime's."""
    job = {
        "model": {"kind": "transformer", "num_layers": layers, "hidden_size": 32,
                  "num_heads": 4, "seq_length": 16, "vocab_size": 64, "attention": "eager"},
        "parallelism": dict({"microbatch_size": microbatch_size}, **parallelism),
        "cluster": {"preset": "a100-80gb"},
        "training": dict({"dtype": "fp32", "optimizer": "adam", "seed": 7,
                          "learning_rate": 0.003}, **training),
    }
    return job


def small_llama(parallelism, layers=6, microbatch_size=1, **training):
    """small_gpt's size as a Llama-style model: grouped-query attention (2 key/value heads of
    4), rotary positions, a SwiGLU MLP, RMSNorm, no biases and tied embeddings."""
    job = small_gpt(parallelism, layers, microbatch_size, **training)
    job["model"].update({"num_kv_heads": 2, "ffn_hidden_size": 48, "mlp": "swiglu",
                         "norm": "rmsnorm", "position": "rotary", "bias": "none",
                         "tie_embeddings": True})
    return job


def scaled_hf(config_path):
    """The model section of a job on a shipped Hugging Face config, scaled down to small_gpt's
    size by the job's own keys (as `--set model.num_layers=4 ...` would); the config's heads
    per key/value head and its other keys (rope_theta, rms_norm_eps, biases, tying) are kept."""
    return {"kind": "hf", "path": config_path, "num_layers": 4, "hidden_size": 32,
            "num_heads": 4, "ffn_hidden_size": 48, "seq_length": 16, "vocab_size": 64,
            "attention": "eager"}


class Tools:
    def __init__(self, bin_dir, work, compiler_dir=None):
        self.compiler = os.path.join(compiler_dir or bin_dir, "conduit-compile")
        self.runner = os.path.join(bin_dir, "conduit-run")
        self.work = work
        os.makedirs(work, exist_ok=True)

    def compile(self, job, name, *flags):
        """Writes the job and compiles it with conduit-compile's `flags`; returns the plan
        path."""
        path = os.path.join(self.work, name + ".json")
        with open(path, "w") as f:
            json.dump(job, f)
        plan = os.path.join(self.work, name + ".plan")
        result = subprocess.run([self.compiler, path, "-o", plan] + list(flags),
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"conduit-compile {name} failed:\n{result.stderr}")
        return plan

    def emit(self, job_path, what, *flags):
        """conduit-compile JOB --emit=WHAT with conduit-compile's `flags`; returns standard
        output."""
        result = subprocess.run([self.compiler, job_path, f"--emit={what}"] + list(flags),
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"conduit-compile {job_path} --emit={what} failed:\n{result.stderr}")
        return result.stdout

    def run(self, plan, processes, *args, timeout=120):
        """mpirun -np PROCESSES conduit-run PLAN ARGS; returns the CompletedProcess."""
        command = ["mpirun", "-np", str(processes), self.runner, plan] + list(args)
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ENV)

    def run_threads(self, plan, ranks, *args, timeout=300):
        """conduit-run PLAN --ranks-per-process=RANKS ARGS: every rank a thread of one
        process."""
        command = [self.runner, plan, f"--ranks-per-process={ranks}"] + list(args)
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ENV)

    def dump(self, plan):
        """The plan as conduit-run --dump writes it (JSON)."""
        result = subprocess.run([self.runner, "--dump", plan], capture_output=True, text=True,
                                env=ENV, check=True)
        return json.loads(result.stdout)

    def stage_samples(self, plan):
        """Each stage's micro-batch boundaries, from conduit-run --dump."""
        return [stage["samples"] for stage in self.dump(plan)["stages"]]

    def reference(self, plan, *args, timeout=120):
        return subprocess.run([self.runner, "--reference", plan] + list(args),
                              capture_output=True, text=True, timeout=timeout, env=ENV)


def read_safetensors(path):
    """({name: array of floats}, metadata) of a safetensors file of F32 tensors, as
    --save-params writes it; raises ValueError unless the tensors tile the data exactly."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + length].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    start, covered, tensors = 8 + length, 0, {}
    for name, t in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        begin, end = t["data_offsets"]
        count = 1
        for d in t["shape"]:
            count *= d
        if t["dtype"] != "F32" or begin != covered or end - begin != 4 * count:
            raise ValueError(f"{path}: tensor {name} is not F32 data at {covered}")
        values = array.array("f")
        values.frombytes(data[start + begin:start + end])
        tensors[name] = values
        covered = end
    if start + covered != len(data):
        raise ValueError(f"{path}: {len(data) - start - covered} bytes belong to no tensor")
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: (dtype, shape, bytes)} as a safetensors file, in this order."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, data in tensors.values():
            f.write(data)


def losses(output):
    """{step: loss} from conduit-run's output."""
    return {int(s): float(l) for s, l, _ in STEP.findall(output)}


def aux_losses(output):
    """{step: the values printed beside the loss, in order} from conduit-run's output: a
    mixture of experts' aux_loss (with the router z_loss when it has one), the multi-token
    prediction modules' mtp_loss; steps with none are left out."""
    return {int(s): tuple(float(v) for v in rest.split()[1::2])
            for s, _, rest in STEP.findall(output) if rest}


FAILED = []


def check(name, condition, detail=""):
    """One named check of a test script: prints ok or FAILED as it runs and keeps the detail of
    a failure for finish()."""
    print(("ok: " if condition else "FAILED: ") + name, flush=True)
    if not condition:
        FAILED.append(f"{name}\n{detail}")


def finish(success):
    """Ends a script of checks: the failures' details and exit 1, or the line `success`."""
    if FAILED:
        print("\n\n".join(FAILED))
        sys.exit(1)
    print(success)
