// Command-line options of the request runner, shared by `kvprof requests` and `kvprof profile`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "kvprof/client/runner.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::client {

struct RunCliValues {
  std::string endpoint = "http://127.0.0.1:8000";
  std::string model;
  std::string api = "completions";
  double request_timeout_s = 600.0;
  double connect_timeout_s = 30.0;
  std::string api_key;
  std::string transport = "auto";
  uint32_t read_interval_us = RunOptions::k_default_read_interval_us;
};

// Adds --endpoint (env KVPROF_URL), --model (KVPROF_MODEL), --api, --request-timeout
// (KVPROF_REQUEST_TIMEOUT), --connect-timeout, --api-key (OPENAI_API_KEY), --transport
// (KVPROF_TRANSPORT) and --read-interval-us (KVPROF_READ_INTERVAL_US) to `cmd`.
void add_run_options(CLI::App* cmd, RunCliValues& values);

// The RunOptions the values describe; a usage error for a bad value.
Expected<RunOptions> resolve(const RunCliValues& values);

}  // namespace kvprof::client
