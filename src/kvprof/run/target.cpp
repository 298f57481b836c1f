// Where a run's server and its memory come from (see target.hpp).
#include "kvprof/run/target.hpp"

#include <fmt/format.h>

#include <vector>

#include "kvprof/client/raw_request.hpp"
#include "kvprof/profile/server_probe.hpp"
#include "kvprof/sim/sim_jitter.hpp"
#include "kvprof/sim/sim_memory_source.hpp"

namespace kvprof::run {

namespace {

// The simulator started in this process, and its memory.
Expected<void> open_simulator(const TargetSpec& spec, Target& t,
                              std::unique_ptr<sim::SimServer>& server,
                              std::unique_ptr<gpu::MemorySource>& memory) {
  auto config = sim::sim_config_from_flags(spec.sim);
  if (!config) return std::unexpected(config.error());
  config->quiet = true;
  if (!spec.sim_sizing.empty()) config->sizing = spec.sim_sizing;
  auto started = sim::SimServer::start(*config);
  if (!started) return std::unexpected(started.error());
  server = std::move(*started);
  t.endpoint = server->base_url();
  t.simulation = config->sizing;
  t.simulation_details = {
      {"sizing", config->sizing},
      {"gpu", spec.sim.gpu},
      {"jitter", config->jitter ? sim::jitter_json(*config->jitter) : nlohmann::json()}};
  memory = std::make_unique<sim::SimMemorySource>(*server, spec.sim.gpu);
  t.memory = memory.get();
  t.memory_name = "simulated";
  return {};
}

// Where the launched server will listen and its command.
Expected<void> fill_launch(const TargetSpec& spec, Target& t, std::string& host, uint16_t& port) {
  const LaunchSpec& ls = spec.launch;
  host = ls.host;
  if (!spec.endpoint.empty()) {
    auto url = client::parse_http_url(spec.endpoint);
    if (!url) return std::unexpected(url.error());
    host = url->host;
    port = url->port;
    t.endpoint = spec.endpoint;
  } else {
    port = ls.port;
    if (port == 0) {
      auto free = profile::free_port(host);
      if (!free) return std::unexpected(free.error());
      port = *free;
    }
    t.endpoint = fmt::format("http://{}:{}/v1", host, port);
  }
  auto command =
      ls.fill ? ls.fill(host, port)
              : profile::fill_placeholders(
                    ls.command_template, {{"model", ls.model},
                                          {"port", std::to_string(port)},
                                          {"host", host},
                                          {"max_concurrency", std::to_string(ls.max_concurrency)}});
  if (!command) return std::unexpected(command.error());
  t.launch_command = *command;
  return {};
}

// The launched server started now, once it answers.
Expected<std::unique_ptr<profile::LaunchedServer>> start_now(const TargetSpec& spec,
                                                             const Target& t,
                                                             const std::string& host, uint16_t port,
                                                             const std::function<bool()>& stop) {
  if (profile::port_in_use(host, port)) {
    return fail(ErrorKind::network,
                fmt::format("port {} on {} is already in use; nothing was started", port, host));
  }
  auto launched = profile::LaunchedServer::start(t.launch_command, spec.launch.log_path,
                                                 [](const profile::LogLine&) {});
  if (!launched) return std::unexpected(launched.error());
  std::vector<std::string> headers;
  if (!spec.launch.api_key.empty())
    headers.push_back("Authorization: Bearer " + spec.launch.api_key);
  const auto ready = (*launched)->wait_ready(
      profile::server_root(t.endpoint), headers, spec.launch.ready_timeout_s,
      stop ? stop : [] { return false; });
  if (!ready) {
    (*launched)->stop(spec.launch.grace_s);
    return std::unexpected(ready.error());
  }
  return launched;
}

}  // namespace

std::string_view target_kind_name(TargetKind kind) {
  switch (kind) {
    case TargetKind::simulator:
      return "built-in simulator";
    case TargetKind::endpoint:
      return "endpoint";
    case TargetKind::launch:
      return "launch";
    case TargetKind::in_process:
      return "in-process engine";
  }
  return "endpoint";
}

Target::~Target() {
  stop();
}

void Target::stop() {
  if (m_launched) {
    m_launched->stop(m_grace_s);
    m_launched.reset();
  }
  if (m_simulator) m_simulator->stop();
}

Expected<std::unique_ptr<Target>> open_target(const TargetSpec& spec,
                                              const std::function<bool()>& should_stop) {
  auto t = std::make_unique<Target>();
  t->kind = spec.kind;
  t->m_grace_s = spec.launch.grace_s;
  if (spec.kind == TargetKind::simulator) {
    if (auto ok = open_simulator(spec, *t, t->m_simulator, t->m_owned_memory); !ok)
      return std::unexpected(ok.error());
    return t;
  }
  std::string host;
  uint16_t port = 0;
  if (spec.kind == TargetKind::launch) {
    if (auto ok = fill_launch(spec, *t, host, port); !ok) return std::unexpected(ok.error());
  } else if (spec.kind == TargetKind::in_process) {
    // The engine runs here: only this machine's GPUs can be its.
    if (spec.gpu_source && spec.gpu_source->kind != gpu::GpuSourceKind::automatic &&
        spec.gpu_source->kind != gpu::GpuSourceKind::nvml &&
        spec.gpu_source->kind != gpu::GpuSourceKind::none) {
      return fail(ErrorKind::usage,
                  "the in-process engine runs on this machine: --gpu-source auto, nvml or none");
    }
  } else {
    t->endpoint = spec.endpoint;
  }
  // The memory source before the server starts: a wrong monitoring URL fails before anything
  // runs.
  if (spec.held_memory != nullptr || !spec.gpu_source) {
    t->memory = spec.held_memory;
    t->memory_name = spec.held_memory ? spec.held_memory_name : "none";
    t->memory_note = spec.held_memory_note;
  } else {
    auto choice = gpu::open_gpu_source(*spec.gpu_source, spec.gpu_selector,
                                       spec.kind == TargetKind::endpoint ? t->endpoint : "",
                                       spec.gpu_min_refresh_ms);
    if (!choice) return std::unexpected(choice.error());
    t->m_owned_memory = std::move(choice->source);
    t->memory = t->m_owned_memory.get();
    t->memory_name = choice->name;
    t->memory_note = choice->note;
    t->memory_warn = choice->warn;
    t->memory_remote = choice->remote;
  }
  if (spec.kind != TargetKind::launch) return t;
  if (spec.launch.start_now) {
    auto launched = start_now(spec, *t, host, port, should_stop);
    if (!launched) return std::unexpected(launched.error());
    t->m_launched = std::move(*launched);
    t->started_pid = t->m_launched->pid();
    return t;
  }
  profile::LaunchSettings ls;
  ls.command = t->launch_command;
  ls.host = host;
  ls.port = port;
  ls.ready_timeout_s = spec.launch.ready_timeout_s;
  ls.grace_s = spec.launch.grace_s;
  t->launch = std::move(ls);
  return t;
}

}  // namespace kvprof::run
