#pragma once
// rdma_smoke's cases: which tools run, with which command lines, on which address and
// ports, and what says a server is ready. Pure, so the unit tests check the plan without a
// device; lib/smoke/run.hpp carries it out.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rdmakit::smoke {

// The tools in the order they run; --tools and --skip take these names.
const std::vector<std::string>& smoke_tools();

// Which way a case's traffic goes. local: server and client on this host; across two hosts
// (rdma_smoke --peer against --serve), forward: the --peer side's clients to the serving
// side's servers; reverse: the serving side's clients to servers on the --peer side.
enum class Direction { local, forward, reverse };
inline constexpr std::array<std::string_view, 3> direction_names{"local", "forward", "reverse"};
std::string to_string(Direction direction);

// The ports one plan may take from its first port on; the next address's plan (or the
// other direction's) starts after them.
inline constexpr std::uint16_t ports_per_plan = 16;

struct PlanOptions {
  std::string address;  // numeric, where every server listens and every client goes ("": diag-bind only)
  // This host's address where it differs from `address` (the peer's, with --peer): what
  // diag-bind checks and the mckey sender binds. "" : `address`.
  std::string local_address;
  std::uint16_t first_port = 0;    // each case that listens takes the next port from here
  bool quick = false;              // the smallest meaningful run: fewer cases, fewer iterations
  double timeout_s = 5;            // each tool's own --timeout (its waits for the peer)
  double case_seconds = 60;        // each case's bound, server and client together
  std::vector<std::string> tools;  // empty: all
  std::vector<std::string> skip;
  Direction direction = Direction::local;
};

// The other direction's plan: the servers on `local_address`, the clients going there from
// `address`, on the ports after this plan's, its cases named NAME.reverse.
PlanOptions reversed(const PlanOptions& forward);

// One run of a tool, as a command line of the tool's name (the runner finds the program).
struct Command {
  std::string tool;
  std::vector<std::string> args;
};

struct SmokeCase {
  std::string name;     // "rping", "send_bw.latency", "rping.reverse": the JUnit test case and the table's row
  std::string tool;     // the --tools name it belongs to
  std::string address;  // where the servers listen and the clients go
  Direction direction = Direction::local;
  std::vector<Command> servers;  // started first, in order, each awaited until ready
  Command client;
  std::uint16_t port = 0;  // where the servers listen (rdma_cm), 0 when none does
  std::string ready_line;  // a server is ready when its stderr has this ("" : when it listens)
  double seconds = 60;
};

// Throws UsageError for a tool name that is not one of smoke_tools() or an empty selection.
std::vector<SmokeCase> plan_cases(const PlanOptions& options);

}  // namespace rdmakit::smoke
