#include "lib/base/error.hpp"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace rdmakit {

namespace {

std::string describe(const std::string& call, const std::string& subject) {
  return subject.empty() ? call : call + "(" + subject + ")";
}

}  // namespace

RdmaError::RdmaError(const std::string& call, const std::string& subject, int errnum, std::string address)
    : RdmaError(call, subject, errnum, std::move(address), describe(call, subject) + ": " + std::strerror(errnum)) {}

RdmaError::RdmaError(std::string call, std::string subject, int errnum, std::string address, const std::string& what)
    : std::runtime_error(what),
      call_(std::move(call)),
      subject_(std::move(subject)),
      address_(std::move(address)),
      errnum_(errnum) {}

std::string RdmaError::hint(const SiblingNames& siblings) const {
  return hint_for(call_, address_, errnum_, port_in_subject(subject_), siblings);
}

RdmaError RdmaError::without_errno(std::string call, std::string subject, const std::string& detail,
                                   std::string address) {
  const auto what = describe(call, subject) + ": " + detail;
  return RdmaError(std::move(call), std::move(subject), 0, std::move(address), what);
}

std::string to_string(StopReason reason) {
  switch (reason) {
    case StopReason::interrupted: return "interrupted";
    case StopReason::peer_disconnected: return "peer_disconnected";
    case StopReason::timed_out: return "timed_out";
  }
  return "unknown";
}

RunStopped::RunStopped(StopReason reason, const std::string& detail) : std::runtime_error(detail), reason_(reason) {}

namespace {

bool reaches_peer(const std::string& call) {
  return call == "rdma_resolve_addr" || call == "rdma_resolve_route" || call == "rdma_connect";
}

bool peer_unreachable(int errnum) {
  return errnum == ETIMEDOUT || errnum == EHOSTUNREACH || errnum == ENETUNREACH || errnum == ECONNREFUSED ||
         errnum == ECONNRESET;
}

// A multicast group (mckey's) is no peer diag-connect could probe.
bool is_multicast(const std::string& address) {
  if (address.find(':') != std::string::npos)
    return address.size() >= 2 && (address.starts_with("ff") || address.starts_with("FF"));
  const auto dot = address.find('.');
  int first = -1;
  if (dot != std::string::npos) std::from_chars(address.data(), address.data() + dot, first);
  return first >= 224 && first <= 239;
}

bool is_addressing(const std::string& call) {
  return call == "rdma_bind_addr" || call == "rdma_resolve_addr" || call == "rdma_resolve_route" ||
         call == "rdma_getaddrinfo" || call == "rdma_create_ep";
}

}  // namespace

bool explained_by_diag_bind(const std::string& call, int errnum) {
  return (is_addressing(call) && (errnum == ENODEV || errnum == EADDRNOTAVAIL)) ||
         (call == "rdma_create_event_channel" && errnum == ENODEV);
}

bool explained_by_diag_connect(const RdmaError& error) {
  return !error.address().empty() && !is_multicast(error.address()) && reaches_peer(error.call()) &&
         peer_unreachable(error.errnum());
}

std::uint16_t port_in_subject(const std::string& subject) {
  // The subject starts with "v4:port" or "[v6]:port" and may go on with words of its own
  // ("10.0.0.9:7174: the peer is unreachable"); a bare IPv6 address carries no port.
  std::size_t colon = std::string::npos;
  if (subject.starts_with('[')) {
    const auto close = subject.find("]:");
    if (close != std::string::npos) colon = close + 1;
  } else {
    colon = subject.find(':');
    if (colon != std::string::npos && subject.find_first_of(" :", 0) != colon) return 0;
  }
  if (colon == std::string::npos) return 0;
  unsigned port = 0;
  std::size_t i = colon + 1;
  for (; i < subject.size() && subject[i] >= '0' && subject[i] <= '9'; ++i) {
    port = port * 10 + static_cast<unsigned>(subject[i] - '0');
    if (port > 65535) return 0;
  }
  const bool ends_there = i == subject.size() || subject[i] == ' ' || subject[i] == ':' || subject[i] == ')';
  return i > colon + 1 && ends_there ? static_cast<std::uint16_t>(port) : 0;
}

void check_errno(int rc, const char* call, const std::string& subject, const std::string& address) {
  if (rc != 0) {
    const int errnum = errno;
    if (errnum == 0)
      throw RdmaError::without_errno(call, subject, fmt::format("returned {} without errno", rc), address);
    throw RdmaError(call, subject, errnum, address);
  }
}

void check_returned(int rc, const char* call, const std::string& subject) {
  if (rc != 0) {
    // Some providers return -errno rather than errno.
    throw RdmaError(call, subject, rc < 0 ? -rc : rc);
  }
}

void throw_null_result(const char* call, const std::string& subject) {
  const int errnum = errno;
  if (errnum == 0) throw RdmaError::without_errno(call, subject, "returned NULL without errno");
  throw RdmaError(call, subject, errnum);
}

namespace {

// Hints for the calls that reach the peer: those diag-connect can explain.
std::string peer_hint(const std::string& call, const std::string& address, int errnum, std::uint16_t port,
                      const SiblingNames& siblings) {
  // The port the tool used: diag-connect probes its own default otherwise, not the failing one.
  const std::string probe = address + (port != 0 ? " -p " + std::to_string(port) : std::string());
  const std::string ask_diag_connect = address.empty() || is_multicast(address)
                                           ? std::string()
                                           : "; run '" + siblings.diag_connect() + " " + probe + "' (with '" +
                                                 siblings.diag_connect() +
                                                 " --serve' on the peer, or add --diagnose) to see why";
  if (errnum == ETIMEDOUT && call.starts_with("rdma_")) {
    return "no answer from the peer; is the server running and reachable over RDMA?" +
           (reaches_peer(call) ? ask_diag_connect : std::string());
  }
  if (call == "rdma_connect" && errnum == EHOSTUNREACH) {
    return "the peer is unreachable or nothing listens there (for UD: no server answered the SIDR request); "
           "is a server running on that address and port, in the same port space?" +
           ask_diag_connect;
  }
  if (errnum == ECONNREFUSED) {
    return "the peer rejected the connection; is a server listening on that address and port?" +
           (reaches_peer(call) ? ask_diag_connect : std::string());
  }
  if (reaches_peer(call) && (errnum == EHOSTUNREACH || errnum == ENETUNREACH)) {
    return "no route to the peer or it does not answer" + ask_diag_connect;
  }
  return {};
}

}  // namespace

std::string hint_for(const std::string& call, const std::string& address, int errnum, std::uint16_t port,
                     const SiblingNames& siblings) {
  const bool addressing = is_addressing(call);
  if (addressing && (errnum == ENODEV || errnum == EADDRNOTAVAIL)) {
    if (address.empty()) {
      return "no RDMA device serves this address; run '" + siblings.diag_bind() + "' (or add --diagnose) to see why";
    }
    return "no RDMA device serves " + address + "; run '" + siblings.diag_bind() + " " + address +
           "' (or add --diagnose) to see why";
  }
  if (call == "rdma_create_event_channel" && errnum == ENODEV) {
    return "no RDMA device or rdma_ucm module; run '" + siblings.diag_bind() + "' (or add --diagnose) to see why";
  }
  if (call == "rdma_create_event_channel" && (errnum == ENOENT || errnum == EACCES)) {
    return "cannot open /dev/infiniband/rdma_cm; is rdma_ucm loaded and are you allowed to open it?";
  }
  if (call == "ibv_reg_mr" && (errnum == ENOMEM || errnum == EPERM || errnum == EAGAIN)) {
    return "memory registration refused; raise the locked-memory limit (ulimit -l)";
  }
  if (call == "mmap" && errnum == ENOMEM) {
    return "too few free huge pages; reserve them first (sysctl vm.nr_hugepages=N; HugePages_Free in /proc/meminfo)";
  }
  return peer_hint(call, address, errnum, port, siblings);
}

}  // namespace rdmakit
