// Running a planned sweep: each configuration is one profile run (profile::run_profile, in this
// process) against the server its entry names — a command kvprof launches and stops, an endpoint
// already running, or the built-in simulator — one after the other, with the state saved after
// each so that a stopped sweep resumes where it was. A configuration that fails is recorded with
// its reason and the sweep goes on; Ctrl-C ends the current run (its folder is kept) and stops.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kvprof/experiment/sweep_plan.hpp"
#include "kvprof/experiment/sweep_state.hpp"
#include "kvprof/gpu/memory_source.hpp"

namespace kvprof::experiment {

struct SweepOptions {
  std::filesystem::path output_dir = "results";  // run folders; the sweep under sweeps/<name>/
  std::string config_file;                       // as given, for sweep.json
  bool run_unfit = false;  // also run the configurations the plan says cannot fit
  // False in a cluster job: the kvprof that submitted it records the run in the history.
  bool record_runs = true;
  std::vector<unsigned> gpus;  // the GPUs each run samples; empty: all (a job: its own)
};

struct SweepDeps {
  gpu::MemorySource* memory = nullptr;  // for launched and endpoint servers; null: none
  std::string memory_source = "none";
  std::string memory_note;
  std::function<bool()> should_stop;
  std::function<void(const std::string&)> on_progress;      // the sweep's lines; null: quiet
  std::function<void(const std::string&)> on_run_progress;  // each profile's lines; null: quiet
  std::function<void(const std::string&)> on_run_status;    // a live status; null: none

  // Passes one line of the sweep's progress to on_progress, if set.
  void say(const std::string& line) const {
    if (on_progress) on_progress(line);
  }
};

struct SweepOutcome {
  std::filesystem::path dir;  // <output>/sweeps/<name>
  size_t n_ran = 0;           // runs made now
  size_t n_already = 0;       // finished before, skipped
  size_t n_done = 0, n_partial = 0, n_failed = 0, n_skipped = 0;
  bool interrupted = false;
  std::vector<std::string> failures;  // "id: reason"
};

// What the sweep's ETA is made of: the plan's expected seconds still ahead (the running
// configuration's included) and how the time so far compared with the plan — whole
// configurations finished, and the conditions of the running one that ended.
struct EtaInputs {
  double expected_left_s = 0;       // of the configurations not finished, the running one's whole
  double expected_ran_s = 0;        // of the configurations finished now
  double actual_ran_s = 0;          // what they took
  double condition_expected_s = 0;  // of the running configuration's conditions that ended
  double condition_actual_s = 0;    // what they took
  double running_expected_s = 0;    // the running configuration's whole expected time
  double running_elapsed_s = 0;     // since it started
};

// Seconds the sweep still needs: what is ahead at the pace measured so far; before any condition
// or configuration ended, the plan's time less what the running configuration has used.
double sweep_eta_s(const EtaInputs& in);

// The folder of sweep `name` under `output_dir`.
std::filesystem::path sweep_dir(const std::filesystem::path& output_dir, const std::string& name);

// A sweep's folder locked against another sweep in it, and its state loaded, named and dated:
// where every executor starts.
struct OpenSweep {
  std::filesystem::path dir;  // <output>/sweeps/<name>
  std::unique_ptr<SweepLock> lock;
  SweepState state;
};

// Opens the folder of `config`'s sweep under options.output_dir. Errors: usage (another sweep
// runs there), input (a state file that is not one), io.
Expected<OpenSweep> open_sweep(const SweepConfig& config, const SweepOptions& options);

// Saves the state (the conditions file of `fingerprint` only, when given: the others were saved
// as they changed) and the sweep's files with `out`'s ending, and records the sweep in the history.
Expected<void> close_sweep(const Plan& plan, const SweepOptions& options, const SweepState& state,
                           const SweepOutcome& out, const std::string* fingerprint = nullptr);

// The fingerprint of no configuration: with it save_state writes the state and no conditions file.
extern const std::string k_no_configuration;

// What an executor does with a configuration.
enum class Take : uint8_t { run, already_finished, skipped_unfit };

// Makes configuration `pc`'s record current (id, label, expected time) and says whether an
// executor runs it; one that already finished, or will not fit (without --run-unfit), is counted
// in `out` and said under `head`.
Take take_configuration(const PlannedConfig& pc, const std::string& head,
                        const SweepOptions& options, const SweepDeps& deps, SweepState& state,
                        SweepOutcome& out);

// Runs configuration `pc` of `config` in this process as one profile run and fills `rec` (status,
// reason, its run and figures); a configuration interrupted before runs only what it had left.
void run_configuration(const SweepConfig& config, const PlannedConfig& pc,
                       const SweepOptions& options, const SweepDeps& deps, ConfigRecord& rec);

// Records the sweep in folder `dir` in the history of options.output_dir, from the sweep.json
// just written there.
void record_sweep(const SweepOptions& options, const std::filesystem::path& dir);

// Runs `plan`. Errors: usage (another sweep runs in the same folder), input (a state file that is
// not one), io (the sweep folder cannot be written). Failed configurations are not errors.
Expected<SweepOutcome> run_sweep(const SweepConfig& config, const Plan& plan,
                                 const SweepOptions& options, const SweepDeps& deps);

}  // namespace kvprof::experiment
