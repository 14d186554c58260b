#include "lib/core/error.hpp"

#include <cerrno>

namespace rdmakit {

namespace {

std::string describe(const std::string& call, const std::string& subject) {
  return subject.empty() ? call : call + "(" + subject + ")";
}

}  // namespace

RdmaError::RdmaError(std::string call, std::string subject, int errnum)
    : std::system_error(errnum, std::generic_category(), describe(call, subject)),
      call_(std::move(call)),
      subject_(std::move(subject)),
      hint_(hint_for(call_, subject_, errnum)) {}

std::string to_string(StopReason reason) {
  switch (reason) {
    case StopReason::interrupted: return "interrupted";
    case StopReason::peer_disconnected: return "peer_disconnected";
    case StopReason::timed_out: return "timed_out";
  }
  return "unknown";
}

RunStopped::RunStopped(StopReason reason, const std::string& detail) : std::runtime_error(detail), reason_(reason) {}

std::string address_of(const std::string& subject) {
  if (subject.starts_with('[')) {
    const auto close = subject.find(']');
    return close == std::string::npos ? subject : subject.substr(1, close - 1);
  }
  // One colon means host:port; several mean a bare IPv6 address.
  const auto colon = subject.find(':');
  if (colon != std::string::npos && subject.find(':', colon + 1) == std::string::npos) {
    return subject.substr(0, colon);
  }
  return subject;
}

namespace {

bool is_addressing(const std::string& call) {
  return call == "rdma_bind_addr" || call == "rdma_resolve_addr" || call == "rdma_resolve_route" ||
         call == "rdma_getaddrinfo" || call == "rdma_create_ep";
}

}  // namespace

bool explained_by_diag_bind(const std::string& call, int errnum) {
  return (is_addressing(call) && (errnum == ENODEV || errnum == EADDRNOTAVAIL)) ||
         (call == "rdma_create_event_channel" && errnum == ENODEV);
}

void check_call(int rc, const char* call, const std::string& subject) {
  if (rc != 0) {
    throw RdmaError(call, subject, errno);
  }
}

std::string hint_for(const std::string& call, const std::string& subject, int errnum) {
  const bool addressing = is_addressing(call);
  const std::string address = address_of(subject);
  if (addressing && (errnum == ENODEV || errnum == EADDRNOTAVAIL)) {
    return "no RDMA device serves " + (address.empty() ? std::string("this address") : address) + "; run 'diag-bind " +
           address + "' (or add --diagnose) to see why";
  }
  if (call == "rdma_create_event_channel" && errnum == ENODEV) {
    return "no RDMA device or rdma_ucm module; run 'diag-bind' (or add --diagnose) to see why";
  }
  if (call == "rdma_create_event_channel" && (errnum == ENOENT || errnum == EACCES)) {
    return "cannot open /dev/infiniband/rdma_cm; is rdma_ucm loaded and are you allowed to open it?";
  }
  if (call == "ibv_reg_mr" && (errnum == ENOMEM || errnum == EPERM || errnum == EAGAIN)) {
    return "memory registration refused; raise the locked-memory limit (ulimit -l)";
  }
  if (errnum == ETIMEDOUT && call.starts_with("rdma_")) {
    return "no answer from the peer; is the server running and reachable over RDMA?";
  }
  if (call == "rdma_connect" && errnum == EHOSTUNREACH) {
    return "the peer is unreachable or nothing listens there (for UD: no server answered the SIDR request); "
           "is a server running on that address and port, in the same port space?";
  }
  if (errnum == ECONNREFUSED) {
    return "the peer rejected the connection; is a server listening on that address and port?";
  }
  return {};
}

}  // namespace rdmakit
