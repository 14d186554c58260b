#pragma once
// Where each host hangs in the fabric, for rdma_mesh's culprits: Slurm's topology.conf (the
// tree plugin's form: "SwitchName=leaf1 Nodes=node[01-16]", "SwitchName=spine1
// Switches=leaf[1-4]") or a plain two-column "host switch" file.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rdmakit::mesh {

struct Topology {
  std::map<std::string, std::string> leaf_of_host;      // host -> the switch it hangs from
  std::map<std::string, std::string> parent_of_switch;  // switch -> the switch above it; roots absent
  std::string origin;                                   // the file it came from, for messages

  bool empty() const { return leaf_of_host.empty(); }
  // The host's leaf switch, "" when the topology does not name the host.
  std::string leaf_of(const std::string& host) const;
  // The switches from the host's leaf up to its root, leaf first; empty when not named.
  std::vector<std::string> path_of(const std::string& host) const;
  // Switches a packet between the two hosts crosses: 1 under one leaf, 3 through a spine
  // above both leaves, ...; -1 when either host is not named or their trees do not meet.
  int switch_hops(const std::string& a, const std::string& b) const;
  // The hosts under `leaf` (directly), sorted.
  std::vector<std::string> hosts_under(const std::string& leaf) const;
};

// Parses topology.conf. Blank lines and text after '#' are ignored, a trailing '\' joins the
// next line, keys are case-insensitive (Slurm's are), LinkSpeed= and other keys are accepted
// and ignored. Throws UsageError "ORIGIN:LINE: ..." for a line without SwitchName=, a
// switch with neither Nodes= nor Switches=, a bad hostlist, a switch defined twice, a host
// under two leaves, a child switch never defined, or a loop (a switch above itself).
Topology parse_slurm_topology(std::string_view text, std::string_view origin);

// Parses "host switch" lines (whitespace between, '#' comments): every host's leaf; no
// switch above the leaves. Throws UsageError "ORIGIN:LINE: ..." for a line that is not two
// words or a host given twice with different switches.
Topology parse_host_switch(std::string_view text, std::string_view origin);

// Reads `path` in whichever form it is: topology.conf when any line sets SwitchName=, else
// the two-column form. Throws UsageError naming the file when it cannot be read.
Topology read_topology(const std::string& path);

// Under Slurm (SLURM_JOB_ID set), the topology.conf beside the slurm.conf Slurm reads: in
// SLURM_CONF's folder when that is set, else /etc/slurm; none when not under Slurm or when that
// file is missing or unreadable. `getenv_fn` is std::getenv outside tests.
std::optional<std::string> slurm_topology_file(const std::function<const char*(const char*)>& getenv_fn);

}  // namespace rdmakit::mesh
