// llama-server's flags, and `kvprof serve`'s (the same names), read into a plan's settings (see
// launch_reading.hpp). The slot rule is llama-server's, by release (releases.hpp): from b6925 a
// server left at one slot (no -np, or -np 1) without -kvu runs 4 slots over one shared KV cache;
// given -np N, each slot holds -c / N cells unless -kvu shares them.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "kvprof/engines/llamacpp/llamacpp.hpp"
#include "kvprof/engines/llamacpp/tensor_overrides.hpp"
#include "kvprof/estimate/launch_reading.hpp"
#include "kvprof/util/command_flags.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::engines {

namespace {

// llama-server's -c when none is given.
constexpr uint64_t k_default_ctx = 4096;

// The settings both programs share; `kvu` and `n_parallel` are returned to the caller's rule.
struct ReadFlags {
  std::optional<uint64_t> n_parallel;
  bool ctx_of_model = false;  // -c 0: the context the model was trained with
  bool kv_unified = false;
  bool draft = false;
  std::optional<bool> fit;  // -fit on|off
  uint32_t devices = 0;     // -dev with more than one GPU
};

void read_flags(std::span<const std::string> args, estimate::LaunchReading& out, ReadFlags& f) {
  auto& s = out.settings;
  FlagWalk w(args);
  const auto unread = [&out](std::string_view flag, const std::optional<std::string>& v) {
    out.notes.push_back(
        fmt::format("{} '{}' is not a number: left at llama.cpp's default", flag, v.value_or("")));
  };
  while (w.next()) {
    const std::string flag(w.name());
    if (w.is({"-m", "--model"})) {
      out.model = w.value().value_or("");
    } else if (w.is({"-hf", "--hf-repo", "-mu", "--model-url", "-hfr"})) {
      out.notes.push_back(fmt::format(
          "{} downloads the model: kvprof plans a local GGUF (give -m FILE.gguf)", flag));
      w.value();
    } else if (w.is({"-c", "--ctx-size"})) {
      const auto v = w.value();
      if (auto n = read_count(v)) {
        if (*n > 0) s.max_model_len = *n;
        f.ctx_of_model = *n == 0;
        out.given.insert("max-model-len");
      } else {
        unread(flag, v);
      }
    } else if (w.is({"-np", "--parallel"})) {
      const auto v = w.value();
      if (auto n = read_count(v); n && *n > 0 && *n <= 4096) {
        f.n_parallel = *n;
        out.given.insert("parallel");
      } else {
        unread(flag, v);
      }
    } else if (w.is({"-ngl", "--gpu-layers", "--n-gpu-layers"})) {
      const auto v = w.value();
      if (auto n = read_count(v)) {
        s.n_gpu_layers = static_cast<uint32_t>(std::min<uint64_t>(*n, 100000));
        out.given.insert("n-gpu-layers");
      } else if (v && (*v == "auto" || *v == "all")) {
        s.n_gpu_layers.reset();
      } else {
        unread(flag, v);
      }
    } else if (w.is({"-fa", "--flash-attn"})) {
      const std::string v = to_lower(w.optional_value().value_or("on"));
      s.flash_attn = v != "off" && v != "0" && v != "false";
      s.flash_attn_auto = v == "auto";
      if (v != "auto") out.given.insert("flash-attn");
    } else if (w.is({"-ctk", "--cache-type-k"})) {
      s.cache_type_k = w.value().value_or("");
      out.given.insert("cache-type-k");
    } else if (w.is({"-ctv", "--cache-type-v"})) {
      s.cache_type_v = w.value().value_or("");
      out.given.insert("cache-type-v");
    } else if (w.is({"-b", "--batch-size"})) {
      const auto v = w.value();
      if (auto n = read_count(v); n && *n > 0) {
        s.n_batch = static_cast<uint32_t>(std::min<uint64_t>(*n, 1u << 24));
        out.given.insert("batch-size");
      } else {
        unread(flag, v);
      }
    } else if (w.is({"-ub", "--ubatch-size"})) {
      const auto v = w.value();
      if (auto n = read_count(v); n && *n > 0) {
        s.n_ubatch = static_cast<uint32_t>(std::min<uint64_t>(*n, 1u << 24));
        out.given.insert("ubatch-size");
      } else {
        unread(flag, v);
      }
    } else if (w.is({"--no-mmap"})) {
      s.use_mmap = false;
      out.given.insert("no-mmap");
    } else if (w.is({"--mmap"})) {
      s.use_mmap = true;
    } else if (w.is({"--no-op-offload"})) {
      s.op_offload = false;
      out.given.insert("no-op-offload");
    } else if (w.is({"--op-offload"})) {
      s.op_offload = true;
    } else if (w.is({"--swa-full"})) {
      s.swa_full = true;
      out.given.insert("swa-full");
    } else if (w.is({"-kvu", "--kv-unified"})) {
      f.kv_unified = true;
      out.given.insert("no-kv-unified");
    } else if (w.is({"--no-kv-unified"})) {
      f.kv_unified = false;
      out.given.insert("no-kv-unified");
    } else if (w.is({"-ot", "--override-tensor"})) {
      const auto v = w.value();
      if (auto parsed = parse_override_tensor(v.value_or("")); parsed && v) {
        s.tensor_overrides.insert(s.tensor_overrides.end(), parsed->begin(), parsed->end());
        out.given.insert("override-tensor");
      } else {
        out.notes.push_back(parsed ? fmt::format("{} without a value: not in the plan", flag)
                                   : parsed.error().message + ": not in the plan");
      }
    } else if (w.is({"-cmoe", "--cpu-moe"})) {
      s.tensor_overrides.push_back(cpu_moe_override());
      out.given.insert("override-tensor");
    } else if (w.is({"-ncmoe", "--n-cpu-moe"})) {
      const auto v = w.value();
      const auto n = read_count(v);
      if (auto overrides = n && *n <= UINT32_MAX ? n_cpu_moe_overrides(static_cast<uint32_t>(*n))
                                                 : fail(ErrorKind::usage, "")) {
        s.tensor_overrides.insert(s.tensor_overrides.end(), overrides->begin(), overrides->end());
        out.given.insert("override-tensor");
      } else {
        unread(flag, v);
      }
    } else if (w.is({"-ts", "--tensor-split"})) {
      s.tensor_split.clear();
      out.given.insert("tensor-split");
      for (const auto& part : split(w.value().value_or(""), ',')) {
        double share = 0;
        const auto t = trim(part);
        const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), share);
        if (ec == std::errc{} && p == t.data() + t.size() && share >= 0)
          s.tensor_split.push_back(share);
      }
    } else if (w.is({"-dev", "--device"})) {
      const auto v = w.value();
      if (auto devices = parse_device_list(v.value_or("")); devices && v) {
        if (devices->empty()) {
          s.no_gpu = true;
        } else if (devices->size() > 1) {
          f.devices = static_cast<uint32_t>(devices->size());
        }
        out.given.insert("device");
      } else {
        out.notes.push_back(
            (devices ? std::string("-dev without a value") : devices.error().message) +
            ": not in the plan");
      }
    } else if (w.is({"-fit", "--fit"})) {
      const std::string v = to_lower(w.value().value_or("on"));
      f.fit = v != "off" && v != "0" && v != "false";
      out.given.insert("fit");
    } else if (w.is({"-fitt", "--fit-target"})) {
      // One MiB value per device; kvprof plans the busiest GPU with the first.
      const auto v = w.value();
      const auto first = trim(split(v.value_or(""), ',').front());
      if (auto n = read_count(std::optional<std::string>(first)); n && *n <= (1ULL << 30)) {
        s.fit_target_bytes = *n << 20;
        out.given.insert("fit-target");
      } else {
        unread(flag, v);
      }
    } else if (w.is({"-fitc", "--fit-ctx"})) {
      const auto v = w.value();
      if (auto n = read_count(v); n && *n > 0 && *n <= UINT32_MAX) {
        s.fit_ctx = static_cast<uint32_t>(*n);
        out.given.insert("fit-ctx");
      } else {
        unread(flag, v);
      }
    } else if (w.is({"-md", "--model-draft", "-hfd", "--hf-repo-draft"})) {
      f.draft = true;
      out.notes.push_back(fmt::format("{}: the draft model is not in the plan", flag));
      w.value();
    }
  }
}

}  // namespace

bool read_llamacpp_command(std::span<const std::string> words, estimate::LaunchReading& out) {
  if (words.empty()) return false;
  const auto program = program_name(words.front());
  const bool llama_server = program == "llama-server" || program == "llama-server.exe";
  const bool kvprof_serve = program == "kvprof" && words.size() > 1 && words[1] == "serve";
  if (!llama_server && !kvprof_serve) return false;
  out.program = kvprof_serve ? "kvprof serve" : "llama-server";
  out.settings.engine = Engine::llamacpp;
  ReadFlags f;
  read_flags(words.subspan(kvprof_serve ? 2 : 1), out, f);
  auto& s = out.settings;
  // The release the server is (when known: its --version, its /props) decides its defaults.
  const auto release = parse_llamacpp_release(s.engine_version);
  const LlamaCppReleaseRules& rules = release ? *release->rules : llamacpp_latest_release();
  // -dev CUDA0,CUDA1 without -ts: the layers split evenly over them.
  if (f.devices > 1) s.n_devices = f.devices;
  // --fit: llama-server's default from b7407 (-fit off turns it off); kvprof serve has none.
  const bool has_fit = !kvprof_serve && rules.first_build >= 7407;
  if (has_fit) s.fit = f.fit.value_or(true);
  if (!s.max_model_len) {
    if (f.ctx_of_model && !kvprof_serve) {
      s.max_model_len = 0;  // the model's own context, never lowered by --fit (b7826)
      out.notes.push_back("-c 0: the model's own context");
    } else if (f.ctx_of_model) {
      s.max_model_len = k_default_ctx;
      out.notes.push_back(fmt::format(
          "-c 0 (the model's own context): planned with {} cells; give -c", k_default_ctx));
    } else if (!kvprof_serve && rules.server_default_ctx == 0) {
      s.ctx_of_model = true;
      out.notes.push_back(fmt::format(
          "no -c: this llama-server starts with the model's own context ({}){}",
          rules.first_build >= 7407 ? "from b7407" : "before b4014",
          s.fit.value_or(false) ? ", which --fit lowers to what leaves --fit-target free" : ""));
    } else {
      s.max_model_len = k_default_ctx;
      out.notes.push_back(
          fmt::format("no -c: planned with {} cells, {}'s default", k_default_ctx, out.program));
    }
  }
  if (kvprof_serve || !rules.server_auto_slots) {
    // kvprof serve, and llama-server before b6925: one slot unless -np says more.
    s.n_parallel = static_cast<uint32_t>(f.n_parallel.value_or(1));
    s.kv_unified = f.kv_unified;
  } else if (f.n_parallel.value_or(1) == 1 && !f.kv_unified && !f.draft) {
    s.n_parallel = 4;
    s.kv_unified = true;
    out.notes.push_back(
        "llama-server runs 4 slots sharing one KV cache when left at one slot (from b6925; add "
        "-kvu to keep one slot, -np N for N slots)");
  } else {
    s.n_parallel = static_cast<uint32_t>(f.n_parallel.value_or(1));
    s.kv_unified = f.kv_unified;
  }
  return true;
}

}  // namespace kvprof::engines
