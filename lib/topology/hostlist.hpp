#pragma once
// Slurm's hostlist expressions ("node[01-16,20]", "r[1-2]n[01-04]", "gpu1,cpu[3-4]"), as
// topology.conf, SLURM_JOB_NODELIST and scontrol write them.

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rdmakit::mesh {

// A hostlist that does not parse; what() says what and where ("unclosed '[' in 'node[01-0'").
class HostlistError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every host the expression names, in its order: a range keeps its zero padding (node[08-10]:
// node08 node09 node10), several bracket groups multiply out (r[1-2]n[1-2]: r1n1 r1n2 r2n1
// r2n2), top-level commas separate items. Throws HostlistError for an empty item, an unclosed
// or nested bracket, a range whose end is below its start, or one of more than 1,000,000 hosts.
std::vector<std::string> expand_hostlist(std::string_view expression);

}  // namespace rdmakit::mesh
