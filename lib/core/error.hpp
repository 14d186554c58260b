#pragma once
// Error types shared by every tool. An RDMA call that fails becomes an RdmaError that
// names the call, what it was applied to, the errno and, where we know one, a hint.

#include <stdexcept>
#include <string>
#include <system_error>

namespace rdmakit {

// Process exit codes; 77 is what CTest (SKIP_RETURN_CODE) and automake read as "skipped".
enum class ExitCode : int {
  ok = 0,
  run_failed = 1,
  cause_found = 1,  // diag-bind: the failure was explained
  usage = 2,
  unexplained = 3,  // diag-bind: the failure could not be explained
  no_device = 77,
  // A run stopped by a signal exits 128 + its number, as a shell reports a process it killed.
  interrupted = 130,  // SIGINT
  terminated = 143,   // SIGTERM
};

class RdmaError : public std::system_error {
 public:
  // `call` is the library function ("rdma_bind_addr"), `subject` what it acted on
  // ("10.0.0.9:7174"), possibly empty.
  RdmaError(std::string call, std::string subject, int errnum);

  const std::string& call() const noexcept { return call_; }
  const std::string& subject() const noexcept { return subject_; }
  int errnum() const noexcept { return code().value(); }
  const std::string& hint() const noexcept { return hint_; }

 private:
  std::string call_;
  std::string subject_;
  std::string hint_;
};

// Usage errors: bad or contradictory options. Exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The device cannot do what was asked (e.g. AF_IB addressing on a RoCE device). Exit 77,
// so test harnesses count it as skipped rather than failed.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The peer broke the protocol (bad length, bad advert) or the data did not validate.
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A work completion finished with an error status.
class CompletionError : public std::runtime_error {
 public:
  CompletionError(const std::string& what, int status) : std::runtime_error(what), status_(status) {}
  int status() const noexcept { return status_; }

 private:
  int status_;
};

// Why a run ended before it completed without any call failing.
enum class StopReason { interrupted, peer_disconnected, timed_out };
std::string to_string(StopReason reason);

class RunStopped : public std::runtime_error {
 public:
  RunStopped(StopReason reason, const std::string& detail);
  StopReason reason() const noexcept { return reason_; }

 private:
  StopReason reason_;
};

// For librdmacm calls that return nonzero and set errno: throws RdmaError(call, subject, errno).
void check_call(int rc, const char* call, const std::string& subject);

// The hint for a failed call, or "" when there is nothing useful to add. ENODEV and
// EADDRNOTAVAIL from address binding/resolution point at diag-bind with the address.
std::string hint_for(const std::string& call, const std::string& subject, int errnum);

// True when diag-bind can explain this failure (the cases whose hint points at it).
bool explained_by_diag_bind(const std::string& call, int errnum);

// Strips a ":port" or "[v6]:port" suffix so hints name the bare address.
std::string address_of(const std::string& subject);

}  // namespace rdmakit
