#pragma once
// Which local address a tool that is given none should use (rdma_mesh on every rank):
// the address of a named netdev, of a named device's ACTIVE port, or of the first ACTIVE
// port that has one. Pure over the host model, so fixtures test it.

#include <string>
#include <vector>

#include "lib/diag/diagnosis.hpp"

namespace rdmakit::diag {

struct AddressChoice {
  std::string address;  // numeric, no prefix length; "" when none was found
  std::string how;      // why this one, for the report: "rxe0 port 1 (rxenet0), the first ACTIVE port with an address"
  std::string problem;  // when none was found: why, in one sentence
};

// `netdev`: that netdev's first IPv4 address, else its first global IPv6 one, whether or
// not an RDMA device serves it (binding then tells why not). `device`: the first ACTIVE
// port of that device with an address. Neither: the first ACTIVE port of any device.
AddressChoice choose_address(const Inventory& inventory, const std::string& netdev, const std::string& device);

// Every port's address, ACTIVE or not, in device and port order and without repeats: what
// rdma_smoke tests when it is given none (a port that is down then fails with its cause).
std::vector<AddressChoice> every_port_address(const Inventory& inventory);

}  // namespace rdmakit::diag
