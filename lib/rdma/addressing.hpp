#pragma once
// Addresses before any connection exists: rdma_getaddrinfo's answer held (AddrInfo), and
// port spaces and address lookup as the stock rdma_cm tools read them (-P/-p, -f, -s/-b).

#include <rdma/rdma_cma.h>

#include <memory>
#include <string>

namespace rdmakit {

bool is_datagram(rdma_port_space port_space);

// Port spaces as the stock tools name them: -P udp|ipoib|tcp|ib, or -p 0x111 / 0x2 / 0x106 / 0x13f.
rdma_port_space parse_port_space(const std::string& text);  // throws UsageError
std::string port_space_name(rdma_port_space port_space);

// -f name|ip|ipv6|gid as the stock tools read it: hints for rdma_getaddrinfo.
rdma_addrinfo addressing_hints(const std::string& format, rdma_port_space port_space);  // throws UsageError

// rdma_getaddrinfo's answer, freed with it.
class AddrInfo {
 public:
  // Throws UsageError when the host names nothing, std::runtime_error when the resolver
  // failed (EAI_AGAIN), RdmaError("rdma_getaddrinfo", ...) when librdmacm itself failed.
  AddrInfo(const std::string& host, const std::string& port, bool passive);
  // With explicit hints (port space, family, flags); `host` or `port` may be empty.
  AddrInfo(const std::string& host, const std::string& port, const rdma_addrinfo& hints);
  ~AddrInfo();
  AddrInfo(const AddrInfo&) = delete;
  AddrInfo& operator=(const AddrInfo&) = delete;
  rdma_addrinfo* get() const noexcept { return info_; }

 private:
  rdma_addrinfo* info_ = nullptr;
};

// The stock tools' address lookup. Passive (no destination): the local address to listen
// on, from `source` (empty = any). Active: the destination, with `source` bound if given.
std::unique_ptr<AddrInfo> lookup_addresses(const std::string& source, const std::string& destination,
                                           const std::string& port, rdma_addrinfo hints);

}  // namespace rdmakit
