#pragma once
// The flags udaddy and ucmatose share with their stock namesakes (-s -b -f -c -C -S -t),
// and the setup both run on them: without -s listen and accept, with -s connect.

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "lib/core/cli.hpp"
#include "lib/rdma/connection_group.hpp"

namespace rdmakit {

struct ConnectionFlags {
  std::string server;
  std::string bind;
  std::string format = "name";
  std::uint16_t port = 0;
  std::size_t connections = 1;
  std::uint32_t count = 10;
  std::uint32_t size = 100;
  std::optional<int> type_of_service;
  double accept_timeout_s = 0;

  // Adds the shared flags to the tool's command line; `size_help` says what -S limits apply.
  void add_to(ToolRunner& tool, const std::string& count_help, std::uint32_t max_size, const std::string& size_help);
  // Throws UsageError for an address format or a -s/-b host that cannot work; no RDMA needed.
  void check(rdma_port_space port_space) const;
  GroupOptions group_options(rdma_port_space port_space, const CommonOptions& common, int stop_fd) const;
  bool is_server() const { return server.empty(); }
};

// Server (no -s): binds, listens and accepts every connection. Client: connects them all.
void establish(ConnectionGroup& group, const ConnectionFlags& flags, rdma_port_space port_space, Report& report);

}  // namespace rdmakit
