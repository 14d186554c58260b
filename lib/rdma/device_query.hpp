#pragma once
// The capability model (lib/rdma/device_caps) of a live device's port: ibv_query_device,
// ibv_query_port and the device's own transport, read once where a tool first holds the
// device.

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "lib/base/error.hpp"
#include "lib/rdma/device_caps.hpp"

namespace rdmakit {

// Throws RdmaError when the device or the port cannot be queried.
DeviceCaps read_device_caps(ibv_context* context, std::uint8_t port);

// A UD QP that `device` would not make, as the tool exits with it: EOPNOTSUPP (a provider
// without unreliable datagrams, whatever its transport says) becomes Unsupported (exit 77)
// with the sentence; any other error is thrown as it is.
[[noreturn]] void throw_datagram_refusal(const RdmaError& error, const std::string& device);

}  // namespace rdmakit
