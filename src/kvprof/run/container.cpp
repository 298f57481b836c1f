// A server in a container, found through its runtime's `container inspect` (see container.hpp).
#include "kvprof/run/container.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/engines/engine.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "kvprof/util/command_flags.hpp"
#include "kvprof/util/json_input.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/utf8.hpp"

namespace kvprof::run {

namespace {

using nlohmann::json;

constexpr size_t k_max_inspect_depth = 32;
constexpr size_t k_max_name_chars = 253;
constexpr size_t k_max_args = 4096;
constexpr size_t k_max_field_chars = 4096;

// Member `key` of object `j`, or null when `j` is no object or has none (read in place, no copy).
const json& member(const json& j, const char* key) {
  static const json k_none;
  if (!j.is_object()) return k_none;
  const auto it = j.find(key);
  return it == j.end() ? k_none : *it;
}

// A string member of object `j` (at most k_max_field_chars), empty when absent or not a string.
std::string text_of(const json& j, const char* key) {
  if (!j.is_object()) return {};
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  const auto& s = it->get_ref<const std::string&>();
  return s.size() <= k_max_field_chars ? s : std::string();
}

// A member as kvprof prints it: one printable line of at most 256 bytes.
std::string shown_text_of(const json& j, const char* key) {
  return one_line(text_of(j, key), 256);
}

// The container's argv: Path and Args as it was started, else Config's Entrypoint and Cmd.
std::vector<std::string> argv_of(const json& c) {
  std::vector<std::string> argv;
  const auto add_all = [&argv](const json& list) {
    if (!list.is_array()) return;
    for (const auto& a : list) {
      if (argv.size() >= k_max_args) return;
      if (a.is_string() && a.get_ref<const std::string&>().size() <= k_max_field_chars)
        argv.push_back(a.get<std::string>());
    }
  };
  if (const auto path = text_of(c, "Path"); !path.empty()) {
    argv.push_back(path);
    add_all(member(c, "Args"));
    return argv;
  }
  add_all(member(member(c, "Config"), "Entrypoint"));
  add_all(member(member(c, "Config"), "Cmd"));
  return argv;
}

// The value of the first of `flags` in `argv` ("--flag VALUE" or "--flag=VALUE").
std::optional<std::string> flag_value(const std::vector<std::string>& argv,
                                      std::initializer_list<std::string_view> flags) {
  FlagWalk walk(argv);
  while (walk.next()) {
    if (walk.is(flags)) return walk.value();
  }
  return std::nullopt;
}

// A TCP port (1-65535) written as a whole number; none for anything else.
std::optional<uint16_t> port_number(std::string_view text) {
  const auto v = read_count(std::string(text));
  if (!v || *v == 0 || *v > 65535) return std::nullopt;
  return static_cast<uint16_t>(*v);
}

// The model the command line serves: --model, --model-path (SGLang), --model-id (TGI), -m and
// --hf-repo (llama-server; a Python's -m names a module), or `vllm serve MODEL`; TGI's MODEL_ID
// in the environment.
std::string model_of(const std::vector<std::string>& argv, const json& c) {
  if (auto m = flag_value(argv, {"--model", "--model-path", "--model-id", "--hf-repo"})) return *m;
  const bool python = !argv.empty() && program_name(argv.front()).starts_with("python");
  if (auto m = flag_value(argv, {"-m"}); m && !python) return *m;
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "serve" && !argv[i + 1].starts_with('-')) return argv[i + 1];
  }
  if (const json& env = member(member(c, "Config"), "Env"); env.is_array()) {
    for (const auto& e : env) {
      if (e.is_string() && e.get_ref<const std::string&>().starts_with("MODEL_ID="))
        return e.get<std::string>().substr(9);
    }
  }
  return {};
}

// The release an image tag names: "v0.6.3" -> "0.6.3", "server-b4753" -> "b4753"; empty for
// "latest" and other words.
std::string version_of_tag(std::string_view image) {
  const auto colon = image.rfind(':');
  if (colon == std::string_view::npos || image.find('/', colon) != std::string_view::npos)
    return {};
  std::string_view tag = image.substr(colon + 1);
  if (const auto at = tag.find('@'); at != std::string_view::npos) tag = tag.substr(0, at);
  for (size_t i = 0; i + 1 < tag.size(); ++i) {  // llama.cpp's "server-b4753", "full-cuda-b5640"
    if (tag[i] == 'b' && (i == 0 || tag[i - 1] == '-') &&
        std::isdigit(static_cast<unsigned char>(tag[i + 1])))
      return std::string(tag.substr(i));
  }
  if (tag.size() > 1 && tag[0] == 'v' && std::isdigit(static_cast<unsigned char>(tag[1])))
    return std::string(tag.substr(1));
  if (!tag.empty() && std::isdigit(static_cast<unsigned char>(tag[0]))) return std::string(tag);
  return {};
}

// The first binding of `port`/tcp in NetworkSettings.Ports: {host address, host port}.
std::optional<std::pair<std::string, uint16_t>> binding_of(const json& ports, uint16_t port) {
  const auto it = ports.find(fmt::format("{}/tcp", port));
  if (it == ports.end() || !it->is_array()) return std::nullopt;
  for (const auto& b : *it) {
    const auto host_port = port_number(text_of(b, "HostPort"));
    if (!host_port) continue;
    std::string ip = text_of(b, "HostIp");
    // Published on every address: this machine reaches it on the loopback.
    if (ip.empty() || ip == "0.0.0.0" || ip == "::") ip = "127.0.0.1";
    return std::pair{ip, *host_port};
  }
  return std::nullopt;
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > k_max_name_chars) return false;
  if (!std::isalnum(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-';
  });
}

Expected<ContainerInfo> read_inspect(const json& answer, std::string_view name) {
  if (!answer.is_array() || answer.size() != 1 || !answer.at(0).is_object()) {
    return fail(ErrorKind::input,
                fmt::format("container {}: the runtime's answer is not one container", name));
  }
  const json& c = answer.at(0);
  ContainerInfo info;
  info.name = shown_text_of(c, "Name");
  if (info.name.starts_with('/')) info.name.erase(0, 1);
  if (info.name.empty()) info.name = std::string(name);
  info.id = text_of(c, "Id");
  const json& state = member(c, "State");
  info.status = shown_text_of(state, "Status");
  const json& running_value = member(state, "Running");
  const bool running = running_value.is_boolean() && running_value.get<bool>();
  if (!running) {
    return fail(ErrorKind::input,
                fmt::format("container {} is not running ({}); start it, or give --endpoint",
                            info.name, info.status.empty() ? "no state" : info.status));
  }
  const json& config = member(c, "Config");
  info.image = shown_text_of(config, "Image");
  if (info.image.empty()) info.image = shown_text_of(c, "ImageName");  // podman
  const auto engine = engines::engine_of_image(info.image);
  if (engine) info.engine = std::string(engines::engine_name(*engine));
  info.engine_version = version_of_tag(info.image);
  const auto argv = argv_of(c);
  info.model = one_line(model_of(argv, c), 256);
  const auto port_flag = flag_value(argv, {"--port"});
  const auto port = port_flag ? port_number(*port_flag) : std::nullopt;
  info.engine_port = port ? *port : engine ? engines::engine_row(*engine).server_port : 0;

  const json& host_config = member(c, "HostConfig");
  info.host_network = text_of(host_config, "NetworkMode") == "host";
  if (info.host_network) {
    if (info.engine_port == 0) {
      return fail(ErrorKind::input,
                  fmt::format("container {} shares this machine's network, but its command gives "
                              "no --port and its image ({}) names no engine kvprof knows the port "
                              "of; give --endpoint",
                              info.name, info.image));
    }
    info.host = "127.0.0.1";
    info.host_port = info.engine_port;
    return info;
  }
  const json& ports = member(member(c, "NetworkSettings"), "Ports");
  std::optional<std::pair<std::string, uint16_t>> found;
  if (info.engine_port != 0) found = binding_of(ports, info.engine_port);
  if (!found) {  // the one TCP port it publishes, whatever the engine's
    std::vector<std::pair<std::string, uint16_t>> published;
    for (const auto& [key, value] : ports.items()) {
      const auto slash = key.find('/');
      if (slash == std::string::npos || key.substr(slash) != "/tcp") continue;
      const auto p = port_number(std::string_view(key).substr(0, slash));
      if (!p) continue;
      if (auto b = binding_of(ports, *p)) {
        published.push_back(*b);
        if (info.engine_port == 0 || published.size() == 1) info.engine_port = *p;
      }
    }
    if (published.size() == 1) found = published.front();
  }
  if (!found) {
    return fail(
        ErrorKind::input,
        fmt::format("container {} publishes no port kvprof can reach{}; publish it "
                    "(docker run -p {}:{} ...), or give --endpoint",
                    info.name,
                    info.engine_port ? fmt::format(" for its engine's port {}", info.engine_port)
                                     : std::string(),
                    info.engine_port ? info.engine_port : 8000,
                    info.engine_port ? info.engine_port : 8000));
  }
  info.host = found->first;
  info.host_port = found->second;
  return info;
}

}  // namespace

std::string ContainerInfo::endpoint() const {
  const bool v6 = host.find(':') != std::string::npos;
  return fmt::format("http://{}{}{}:{}/v1", v6 ? "[" : "", host, v6 ? "]" : "", host_port);
}

Expected<ContainerInfo> parse_container_inspect(std::string_view json_text, std::string_view name) {
  const std::string source = fmt::format("container {}", name);
  if (json_text.size() > k_max_container_inspect_bytes) {
    return fail(ErrorKind::input, fmt::format("{}: the runtime's answer is larger than {} MiB",
                                              source, k_max_container_inspect_bytes >> 20));
  }
  if (json_nesting_depth(json_text) > k_max_inspect_depth) {
    return fail(ErrorKind::input, fmt::format("{}: the runtime's answer is nested deeper than {}",
                                              source, k_max_inspect_depth));
  }
  auto answer = parse_json_input(json_text, source);
  if (!answer) return std::unexpected(answer.error());
  return read_json_input(source, [&] { return read_inspect(*answer, name); });
}

Expected<std::string> container_runtime() {
  if (const char* given = std::getenv("KVPROF_CONTAINER_RUNTIME"); given && *given) {
    return std::string(given);
  }
  const char* path = std::getenv("PATH");
  for (const char* runtime : {"docker", "podman"}) {
    if (sys::find_executable(runtime, path ? path : "")) return std::string(runtime);
  }
  return fail(ErrorKind::not_found,
              "neither docker nor podman is on PATH: kvprof asks one of them where a container "
              "listens (or give --endpoint)");
}

Expected<ContainerInfo> inspect_container(std::string_view name) {
  if (!valid_name(name)) {
    return fail(ErrorKind::usage,
                fmt::format("'{}' is not a container name or id (letters, digits, '_', '.', '-', "
                            "starting with a letter or digit, at most {} characters)",
                            one_line(name, 80), k_max_name_chars));
  }
  auto runtime = container_runtime();
  if (!runtime) return std::unexpected(runtime.error());
  sys::CommandOptions o;
  o.timeout = std::chrono::seconds(30);
  o.max_output_bytes = k_max_container_inspect_bytes + 1;
  auto r = sys::run_command({*runtime, "container", "inspect", std::string(name)}, o);
  if (!r) return std::unexpected(r.error());
  if (r->timed_out) {
    return fail(ErrorKind::network,
                fmt::format("{} container inspect {} did not answer in 30 s", *runtime, name));
  }
  if (r->exit_code != 0) {
    std::string why = trim(r->stderr_text.substr(0, r->stderr_text.find('\n')));
    if (why.empty()) why = fmt::format("exit code {}", r->exit_code);
    // No such container: a name that does not exist; anything else: the runtime unreachable.
    const bool missing = to_lower(why).find("no such container") != std::string::npos;
    return fail(missing ? ErrorKind::not_found : ErrorKind::network,
                fmt::format("{} cannot tell where container {} listens: {}", *runtime, name,
                            one_line(why, 300)));
  }
  return parse_container_inspect(r->stdout_text, name);
}

}  // namespace kvprof::run
