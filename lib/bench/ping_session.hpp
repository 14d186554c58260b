#pragma once
// rping's two roles over one Endpoint, speaking rdma-core rping's wire protocol
// (see lib/wire/protocol.hpp). Both fill the report as they go and never print results.

#include <cstdint>
#include <optional>
#include <string>

#include "lib/core/persistent.hpp"
#include "lib/rdma/endpoint.hpp"

namespace rping {

struct PingOptions {
  bool verbose = false;     // print each ping's data
  bool validate = false;    // compare what came back with what was sent
  bool json = false;        // verbose lines go to stderr so stdout stays one JSON document
  std::uint32_t size = 64;  // client: payload size; server: largest payload accepted
  std::uint64_t count = 0;  // client: iterations, 0 = until Ctrl-C
};

// Connects to `destination` and runs the ping loop. Ctrl-C with count 0 is a normal end.
void run_client(const rdmakit::SocketAddress* source, const rdmakit::SocketAddress& destination,
                const rdmakit::EndpointOptions& endpoint_options, const PingOptions& options, rdmakit::Report& report);

// Accepts the connection in `endpoint` and echoes pings until the client disconnects
// between iterations (a normal end). Errors propagate as exceptions; `served` keeps the
// counts reached so far either way.
void serve_connection(rdmakit::Endpoint& endpoint, const PingOptions& options, rdmakit::Report& report,
                      rdmakit::ServedConnection& served);

}  // namespace rping
