// Ctrl-C handling shared by every long-running loop: SIGINT/SIGTERM/SIGHUP set a process-wide "stop
// requested" flag and make a self-pipe readable, so loops can either check the flag or poll() the
// fd together with their own. A second signal while a stop is pending kills the process the
// default way (a stuck loop can still be interrupted).
#pragma once

#include <chrono>

namespace kvprof::sys {

// Installs the SIGINT, SIGTERM and SIGHUP handlers (idempotent, thread-safe).
void install_stop_handlers();

// True once SIGINT/SIGTERM/SIGHUP arrived or request_stop() was called.
bool stop_requested();

// The signal that requested the stop (SIGINT, SIGTERM, SIGHUP), 0 for request_stop() or none yet.
int stop_signal();

// A file descriptor that becomes readable (and stays so) once a stop is requested; poll it for
// POLLIN. Valid after install_stop_handlers(); -1 before.
int stop_fd();

// Requests a stop as a signal would (from any thread).
void request_stop();

// Waits up to `timeout` for a stop request; returns stop_requested().
bool wait_for_stop(std::chrono::milliseconds timeout);

// Clears the flag and drains the pipe (tests, or a command that handles several stops).
void reset_stop();

}  // namespace kvprof::sys
