#pragma once
// What send_bw's test needs of the device (-d, -t, -s, -m, --op atomic, -c UD), checked against
// the device's own numbers before a connection is made: what it cannot do is a usage error
// (or Unsupported) naming the device and its limit.

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <string>

namespace rdmakit {

struct BwDeviceNeeds {
  std::string device;  // -d, checked
  std::uint32_t send_depth = 0;
  std::uint32_t recv_depth = 0;
  // A one-sided bandwidth client's heartbeat (sends_heartbeats): a send slot beyond -t.
  std::uint32_t heartbeat_slots = 0;
  std::uint32_t largest = 1;
  std::optional<ibv_mtu> mtu;
  bool atomics = false;   // --op atomic: the device must do them
  bool datagram = false;  // -c UD: `largest` must fit one packet
};

// Why a device with these attributes cannot serve atomics, if it cannot.
std::optional<std::string> atomics_missing(const ibv_device_attr& device, const std::string& name);

// Throws UsageError (Unsupported for atomics) for what the device on `port` cannot do.
void check_device_limits(ibv_context* context, std::uint8_t port, const BwDeviceNeeds& limits);

}  // namespace rdmakit
