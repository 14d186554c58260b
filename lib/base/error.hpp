#pragma once
// Error types shared by every tool. An RDMA call that fails becomes an RdmaError that
// names the call, what it was applied to, the errno and, where we know one, a hint.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "lib/base/sibling_names.hpp"

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
  hung_up = 129,      // SIGHUP (rdma_pingmesh rereads its pinglist instead)
  interrupted = 130,  // SIGINT
  terminated = 143,   // SIGTERM
};

// A failed libibverbs or librdmacm call (or a system call under them).
class RdmaError : public std::runtime_error {
 public:
  // `call` is the library function ("rdma_bind_addr"), `subject` what it acted on
  // ("10.0.0.9:7174"), possibly empty; `errnum` the errno it reported. `address` is the bare
  // host address the call was about ("10.0.0.9"), for calls that bind or resolve one: hints
  // and --diagnose name it. Empty for every other call.
  RdmaError(const std::string& call, const std::string& subject, int errnum, std::string address = {});

  // A call that failed without an errno (ibv_poll_cq's negative count, a CM event whose
  // status is no errno): `detail` says what it reported instead. errnum() is 0.
  static RdmaError without_errno(std::string call, std::string subject, const std::string& detail,
                                 std::string address = {});

  const std::string& call() const noexcept { return call_; }
  const std::string& subject() const noexcept { return subject_; }
  const std::string& address() const noexcept { return address_; }
  int errnum() const noexcept { return errnum_; }
  // What to do about it, "" when there is nothing useful to add; a sibling it tells the
  // operator to run is named as `siblings` has it (hint_for).
  std::string hint(const SiblingNames& siblings) const;

 private:
  RdmaError(std::string call, std::string subject, int errnum, std::string address, const std::string& what);

  std::string call_;
  std::string subject_;
  std::string address_;
  int errnum_ = 0;
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

// What a work completion that failed said: its ibv_wc_status, that status as libibverbs
// words it (ibv_wc_status_str), and the vendor's own error code.
struct CompletionStatus {
  int status = 0;
  std::string text;
  std::uint32_t vendor_error = 0;
};

// A work completion finished with an error status.
class CompletionError : public std::runtime_error {
 public:
  CompletionError(const std::string& what, CompletionStatus status)
      : std::runtime_error(what), status_(std::move(status)) {}
  const CompletionStatus& status() const noexcept { return status_; }

 private:
  CompletionStatus status_;
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

// The three ways libibverbs and librdmacm report a failure, one checker each; each throws
// RdmaError(call, subject, errno[, address]).
//
// A nonzero return with errno set: librdmacm's calls, and the verbs that wrap a system call
// (ibv_get_cq_event).
void check_errno(int rc, const char* call, const std::string& subject, const std::string& address = {});

// The error number as the return value, errno untouched: most verbs (ibv_post_send,
// ibv_post_recv, ibv_modify_qp, ibv_query_port, ibv_query_qp, ibv_req_notify_cq).
void check_returned(int rc, const char* call, const std::string& subject);

// A null pointer with errno set: the constructors (ibv_alloc_pd, ibv_create_cq, ibv_reg_mr,
// rdma_create_event_channel, ...). Returns the pointer.
[[noreturn]] void throw_null_result(const char* call, const std::string& subject);
template <typename Object>
Object* check_pointer(Object* object, const char* call, const std::string& subject) {
  if (object == nullptr) throw_null_result(call, subject);
  return object;
}

// The hint for a failed call, or "" when there is nothing useful to add. ENODEV and
// EADDRNOTAVAIL from address binding/resolution point at diag-bind with the address; failures
// to reach the peer point at diag-connect with the address and, when known, the port, each
// named as installed beside the tool (`siblings`).
std::string hint_for(const std::string& call, const std::string& address, int errnum, std::uint16_t port,
                     const SiblingNames& siblings);

// True when diag-bind can explain this failure (the cases whose hint points at it).
bool explained_by_diag_bind(const std::string& call, int errnum);
// True when diag-connect can explain this failure: the peer's address did not resolve, the
// connect was refused or went unanswered, for an error that names the peer's address.
bool explained_by_diag_connect(const RdmaError& error);
// The rdma_cm port in a call's subject ("10.0.0.9:7174", "[fd00::1]:7174"), 0 when none.
std::uint16_t port_in_subject(const std::string& subject);

}  // namespace rdmakit
