#pragma once
// Port spaces and address lookup as the stock rdma_cm tools read them (-P/-p, -f, -s/-b):
// what udaddy, ucmatose and mckey share before any connection exists.

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

class AddrInfo;
// The stock tools' address lookup. Passive (no destination): the local address to listen
// on, from `source` (empty = any). Active: the destination, with `source` bound if given.
std::unique_ptr<AddrInfo> lookup_addresses(const std::string& source, const std::string& destination,
                                           const std::string& port, rdma_addrinfo hints);

}  // namespace rdmakit
