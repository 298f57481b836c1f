#!/usr/bin/env python3
"""HF transformers in-process on a real GPU: the memory `kvprof estimate --engine hf` plans.

  gpu_hf_inprocess.py OUT.json CONFIG.json [CONFIG.json ...]

For each model (a Hugging Face config.json; random weights, nothing downloaded): bf16, SDPA,
built on the GPU; then model.generate() (greedy, exactly --new-tokens tokens) over a batch x
prompt-length grid. Recorded after the load and at each point: torch.cuda.max_memory_allocated,
max_memory_reserved, memory_allocated/reserved after the point, and NVML's used memory of the
device (the process's CUDA context included). Runs on the GPU machine (PyTorch, transformers and
nvidia-ml-py are there); docs/benchmarks.md, "Real GPU", reads its output.
"""
import argparse
import gc
import json
import os
import sys
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM

try:
    import pynvml
except ImportError:  # NVML's figures are then absent, the rest is measured
    pynvml = None

MIB = 1024 * 1024


def nvml_used_bytes(handle):
    """Device memory NVML counts as used, or None without NVML."""
    if handle is None:
        return None
    return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)


def torch_figures():
    """What PyTorch's caching allocator holds now and held at most since the last reset."""
    return {
        "allocated_bytes": torch.cuda.memory_allocated(),
        "reserved_bytes": torch.cuda.memory_reserved(),
        "max_allocated_bytes": torch.cuda.max_memory_allocated(),
        "max_reserved_bytes": torch.cuda.max_memory_reserved(),
    }


def build_model(config_path):
    """The model of `config_path` with random bf16 weights on the GPU, SDPA attention."""
    with open(config_path) as f:
        fields = json.load(f)
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    kwargs = {"attn_implementation": "sdpa"}
    with torch.device("cuda"):
        try:
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, **kwargs)
        except TypeError:  # transformers before 4.56 names it torch_dtype
            model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16, **kwargs)
    model.eval()
    return config, model


def run_point(model, vocab_size, batch, prompt_tokens, new_tokens, nvml):
    """One generate() of `batch` prompts of `prompt_tokens` random tokens; its memory figures."""
    ids = torch.randint(3, vocab_size - 1, (batch, prompt_tokens), device="cuda")
    mask = torch.ones_like(ids)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.monotonic()
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    seconds = time.monotonic() - start
    point = {"batch": batch, "prompt_tokens": prompt_tokens, "new_tokens": new_tokens,
             "generated_tokens": int(out.shape[1] - prompt_tokens), "seconds": round(seconds, 3)}
    point.update(torch_figures())
    point["nvml_used_bytes"] = nvml_used_bytes(nvml)
    del out, ids, mask
    gc.collect()
    torch.cuda.empty_cache()
    return point


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--prompt-tokens", default="512,2048")
    parser.add_argument("--new-tokens", type=int, default=16)
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    prompts = [int(p) for p in args.prompt_tokens.split(",")]

    nvml = None
    if pynvml is not None:
        pynvml.nvmlInit()
        nvml = pynvml.nvmlDeviceGetHandleByIndex(0)
    torch.cuda.init()
    result = {"torch": torch.__version__, "cuda": torch.version.cuda,
              "device": torch.cuda.get_device_name(0),
              "device_total_bytes": torch.cuda.get_device_properties(0).total_memory,
              "nvml_used_before_context_bytes": nvml_used_bytes(nvml), "models": []}
    torch.zeros(1, device="cuda")  # the CUDA context, before any model
    result["nvml_used_with_context_bytes"] = nvml_used_bytes(nvml)
    import transformers
    result["transformers"] = transformers.__version__

    for config_path in args.configs:
        entry = {"config": os.path.basename(config_path), "points": []}
        try:
            torch.cuda.reset_peak_memory_stats()
            start = time.monotonic()
            config, model = build_model(config_path)
            torch.cuda.synchronize()
            entry["load_seconds"] = round(time.monotonic() - start, 2)
            entry["parameter_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
            entry["buffer_bytes"] = sum(b.numel() * b.element_size() for b in model.buffers())
            entry["after_load"] = torch_figures()
            entry["after_load"]["nvml_used_bytes"] = nvml_used_bytes(nvml)
            limit = getattr(config, "max_position_embeddings", None) or 1 << 30
            for prompt_tokens in prompts:
                if prompt_tokens + args.new_tokens > limit:
                    continue
                for batch in batches:
                    point = run_point(model, config.vocab_size, batch, prompt_tokens,
                                      args.new_tokens, nvml)
                    entry["points"].append(point)
                    print(f"{entry['config']}: batch {batch} x {prompt_tokens} tokens: peak "
                          f"{point['max_allocated_bytes'] / MIB:.0f} MiB allocated, "
                          f"{point['max_reserved_bytes'] / MIB:.0f} MiB reserved, "
                          f"{point['seconds']} s", flush=True)
            del model
        except Exception as error:  # one model's failure leaves the others measured
            entry["error"] = f"{type(error).__name__}: {error}"
            print(f"{entry['config']}: {entry['error']}", file=sys.stderr, flush=True)
        gc.collect()
        torch.cuda.empty_cache()
        result["models"].append(entry)
        with open(args.output, "w") as f:  # after each model: a later failure loses nothing
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
