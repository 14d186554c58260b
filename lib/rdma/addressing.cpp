#include "lib/rdma/addressing.hpp"

#include <netdb.h>

#include "lib/base/error.hpp"
#include "lib/rdma/cm.hpp"

namespace rdmakit {

namespace {

rdma_addrinfo tcp_hints(bool passive) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  if (passive) hints.ai_flags = RAI_PASSIVE;
  return hints;
}

}  // namespace

AddrInfo::AddrInfo(const std::string& host, const std::string& port, bool passive)
    : AddrInfo(host, port, tcp_hints(passive)) {}

AddrInfo::AddrInfo(const std::string& host, const std::string& port, const rdma_addrinfo& hints) {
  // Not asked at all: the resolver could only answer "try again" where no DNS server is reachable.
  if (reserved_invalid_name(host)) throw_unresolved(host, EAI_NONAME);
  const int rc =
      rdma_getaddrinfo(host.empty() ? nullptr : host.c_str(), port.empty() ? nullptr : port.c_str(), &hints, &info_);
  if (rc == 0) return;
  // getaddrinfo's EAI_* code comes back as the return value, errno then being unreliable;
  // librdmacm's own failures (no device for ucma_init, say) return -1 with errno set.
  if (rc != -1 && rc != EAI_SYSTEM) throw_unresolved(host, rc);
  check_errno(rc, "rdma_getaddrinfo", host + ":" + port, host);
}

AddrInfo::~AddrInfo() {
  rdma_freeaddrinfo(info_);
}

bool is_datagram(rdma_port_space port_space) {
  return port_space == RDMA_PS_UDP || port_space == RDMA_PS_IPOIB;
}

rdma_port_space parse_port_space(const std::string& text) {
  if (text == "udp" || text == "0x111" || text == "273") return RDMA_PS_UDP;
  if (text == "ipoib" || text == "0x2" || text == "2") return RDMA_PS_IPOIB;
  if (text == "tcp" || text == "0x106" || text == "262") return RDMA_PS_TCP;
  if (text == "ib" || text == "0x13f" || text == "319") return RDMA_PS_IB;
  throw UsageError("unknown port space '" + text + "' (udp/0x111, ipoib/0x2, tcp/0x106, ib/0x13f)");
}

std::string port_space_name(rdma_port_space port_space) {
  switch (port_space) {
    case RDMA_PS_UDP: return "udp";
    case RDMA_PS_IPOIB: return "ipoib";
    case RDMA_PS_TCP: return "tcp";
    case RDMA_PS_IB: return "ib";
  }
  return std::to_string(static_cast<int>(port_space));
}

rdma_addrinfo addressing_hints(const std::string& format, rdma_port_space port_space) {
  rdma_addrinfo hints{};
  hints.ai_port_space = port_space;
  if (format == "ip") {
    hints.ai_flags = RAI_NUMERICHOST;
  } else if (format == "ipv6") {
    hints.ai_flags = RAI_NUMERICHOST | RAI_FAMILY;
    hints.ai_family = AF_INET6;
  } else if (format == "gid") {
    hints.ai_flags = RAI_NUMERICHOST | RAI_FAMILY;
    hints.ai_family = AF_IB;
  } else if (format != "name") {
    throw UsageError("unknown address format '" + format + "' (name, ip, ipv6 or gid)");
  }
  return hints;
}

std::unique_ptr<AddrInfo> lookup_addresses(const std::string& source, const std::string& destination,
                                           const std::string& port, rdma_addrinfo hints) {
  try {
    if (destination.empty()) {
      hints.ai_flags |= RAI_PASSIVE;
      return std::make_unique<AddrInfo>(source, port, hints);
    }
    if (source.empty()) {
      return std::make_unique<AddrInfo>(destination, port, hints);
    }
    auto passive = hints;
    passive.ai_flags |= RAI_PASSIVE;
    const AddrInfo local(source, "", passive);
    hints.ai_src_addr = local.get()->ai_src_addr;
    hints.ai_src_len = local.get()->ai_src_len;
    return std::make_unique<AddrInfo>(destination, port, hints);  // copies the source address
  } catch (const RdmaError& error) {
    if (hints.ai_family == AF_IB) {
      throw Unsupported("AF_IB addressing (-f gid) is not available here (" + std::string(error.what()) +
                        "); it needs an InfiniBand device and the ib_cm kernel support; use -f ip or -f ipv6");
    }
    throw;
  }
}

}  // namespace rdmakit
