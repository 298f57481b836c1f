// The simulated GPU as a memory source (see sim_memory_source.hpp).
#include "kvprof/sim/sim_memory_source.hpp"

#include <fmt/format.h>

namespace kvprof::sim {

namespace {

Expected<void> check_index(unsigned gpu) {
  if (gpu != 0) return fail(ErrorKind::driver, fmt::format("simulated GPU {} does not exist", gpu));
  return {};
}

}  // namespace

SimMemorySource::SimMemorySource(const SimServer& server, std::string gpu_name)
    : m_server(server), m_name(std::move(gpu_name)) {}

Expected<gpu::DeviceInfo> SimMemorySource::device_info(unsigned gpu) {
  if (auto ok = check_index(gpu); !ok) return std::unexpected(ok.error());
  return gpu::DeviceInfo{0, fmt::format("kvprof-sim (SIMULATED {})", m_name), "SIM-GPU-0"};
}

Expected<gpu::DeviceMemory> SimMemorySource::sample_device(unsigned gpu) {
  if (auto ok = check_index(gpu); !ok) return std::unexpected(ok.error());
  const SimConfig& config = m_server.config();
  const EngineStats engine = m_server.stats().engine;
  const uint64_t used = std::min(
      config.total_bytes, sim_used_bytes(config, engine.num_used_blocks, engine.last_step_tokens));
  gpu::DeviceMemory memory;
  memory.gpu = 0;
  memory.total_bytes = config.total_bytes;
  memory.reserved_bytes = config.reserved_bytes;
  memory.used_bytes = used;
  memory.free_bytes = config.total_bytes - used;
  return memory;
}

Expected<std::vector<gpu::ProcessMemory>> SimMemorySource::sample_processes(unsigned gpu) {
  if (auto ok = check_index(gpu); !ok) return std::unexpected(ok.error());
  return std::vector<gpu::ProcessMemory>{};
}

}  // namespace kvprof::sim
