// SimMemorySource: the SIMULATED GPU of an in-process SimServer as a gpu::MemorySource, so
// `kvprof profile` without a GPU samples the simulated memory through the same sampler as NVML.
// One GPU, named "kvprof-sim (SIMULATED <GPU>)"; no process rows.
#pragma once

#include <string>

#include "kvprof/gpu/memory_source.hpp"
#include "kvprof/sim/sim_server.hpp"

namespace kvprof::sim {

class SimMemorySource final : public gpu::MemorySource {
 public:
  // `server` must outlive the source; `gpu_name` is the simulated GPU (e.g. "H100-SXM").
  SimMemorySource(const SimServer& server, std::string gpu_name);

  Expected<unsigned> device_count() override { return 1U; }
  Expected<gpu::DeviceInfo> device_info(unsigned gpu) override;
  // used = sim_used_bytes(config, blocks in use, tokens of the running step).
  Expected<gpu::DeviceMemory> sample_device(unsigned gpu) override;
  Expected<std::vector<gpu::ProcessMemory>> sample_processes(unsigned gpu) override;
  using MemorySource::sample_processes;
  gpu::DriverInfo driver_info() override { return {}; }

 private:
  const SimServer& m_server;
  std::string m_name;
};

}  // namespace kvprof::sim
