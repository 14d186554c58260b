#pragma once
// send_bw's two sides: the client opens one connection per queue pair (its hello in the
// rdma_connect private data), runs the bandwidth or latency loops (lib/send_bw/loops) for each
// size, and disconnects; the server accepts a client's connections, refusing with a reason
// in rdma_reject's private data what it cannot serve, and receives, reflects or answers.

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/cpu_use.hpp"
#include "lib/base/report.hpp"
#include "lib/base/wait.hpp"
#include "lib/net/peer_gate.hpp"
#include "lib/send_bw/bw_json.hpp"
#include "lib/send_bw/bw_messages.hpp"
#include "lib/send_bw/datagram_end.hpp"
#include "lib/send_bw/loops.hpp"
#include "lib/send_bw/placement.hpp"
#include "lib/send_bw/port_counters.hpp"
#include "lib/tool/persistent.hpp"

namespace rdmakit {

struct BwResults;

// --retry-count's default, perftest's: the flag (lib/send_bw/bw_options) is wider than the byte.
inline constexpr std::uint8_t default_retry_count = 7;

// The defaults here are send_bw's and rdma_mesh's: their flags bind to these fields
// (lib/send_bw/bw_options), so each default is written once.
// A server's --max-memory where nothing else bounds what it may pin (root, or an infinite
// RLIMIT_MEMLOCK): 16 queue pairs of 64 MiB messages.
inline constexpr std::uint64_t default_max_memory = std::uint64_t{1} << 30;

struct BwSettings {
  std::string server;  // empty: the server side
  std::string bind;    // local address (server: where it listens)
  std::uint16_t port = 18515;
  std::string device;  // -d: checked against the device the address resolves to
  bw::Operation operation = bw::Operation::send;
  bw::Test test = bw::Test::bandwidth;
  std::vector<std::uint32_t> sizes;  // from -s or -a (bw_sizes)
  Budget budget{.iterations = 1000, .duration = std::nullopt};
  std::uint64_t warmup = 100;
  std::uint32_t depth = 128;
  std::uint32_t inline_size = 64;
  std::uint16_t queue_pairs = 1;
  bool bidirectional = false;
  // -c UD: datagrams over rdma_cm's UDP port space (send bandwidth; sizes up to the MTU, -a
  // sweeping only that far; the end of the stream counts what was lost).
  bool datagram = false;
  // --oob: perftest's default mode, the QPs' details over TCP and no rdma_cm
  // (lib/send_bw/perftest_oob): the client of a perftest server, or the server of one
  // perftest client.
  bool out_of_band = false;
  std::optional<std::uint32_t> gid_index;  // bind to the address of this GID
  unsigned ib_port = 1;                    // -i: the port whose GID table -x reads
  std::optional<ibv_mtu> mtu;
  std::optional<std::uint8_t> traffic_class;  // --tclass: rdma_cm's TOS (client)
  std::optional<std::uint8_t> ack_timeout;    // --ack-timeout: 4.096 us * 2^N
  std::uint8_t retry_count = default_retry_count;
  bool counters = false;                      // --counters: the port's counters around each row
  bool histogram = false;                     // --histogram: latency rows with their histogram
  bool cpu_util = false;                      // --cpu-util: the CPU time of each row (server: of the test)
  bool events = false;                        // -e: sleep on the completion channel instead of busy polling
  AtomicKind atomic = AtomicKind::fetch_add;  // --atomic, with --op atomic
  bool use_hugepages = false;                 // --use-hugepages: the buffers in huge pages
  // --disable-pcie-relaxed: the buffers without IBV_ACCESS_RELAXED_ORDERING, which perftest
  // sets by default (the device may then reorder its PCIe writes; an optional flag that
  // devices without it ignore).
  bool disable_pcie_relaxed = false;
  // --pin-core: the thread on this core and the memory on the device's NUMA node, placed
  // once the device is known (the first connection); where it went lands in `placed`,
  // shared by the copies of these settings.
  std::optional<int> pin_core;
  std::shared_ptr<std::optional<Placement>> placed = std::make_shared<std::optional<Placement>>();
  std::optional<std::chrono::nanoseconds> interval;  // --interval: a timed bandwidth run's time series
  // Progress while the client runs: each row as it completes (the results so far), and each
  // interval of --interval as it ends, with the message size.
  std::function<void(const BwResults&)> row_done;
  std::function<void(const IntervalSample&, std::uint32_t)> interval_done;
  // --rate-limit and --rate-units: software pacing of a bandwidth client, in MiB/s ('M'),
  // Gb/s ('g') or messages/s ('p').
  std::optional<double> rate_limit;
  char rate_units = 'M';
  std::uint32_t max_size = 64U << 20;  // server: largest message a client may ask for
  // Server: the most buffer memory one client's queue pairs may make it register (pin);
  // nullopt: what this process may pin (RLIMIT_MEMLOCK), or default_max_memory where nothing
  // bounds that.
  std::optional<std::uint64_t> max_memory;
  // Server: how long to wait for a client (with persistent: for each next one); none = forever.
  std::optional<std::chrono::milliseconds> accept_timeout;
  bool persistent = false;  // server: serve clients one after another until stopped
  GateLimits peers;         // server: who it serves (--allow, --max-clients, --peer-rate)
  RunLimits limits;         // every wait for the peer, and the stop signal
  // Server: a client that sends nothing for limits.timeout ends its test (timed out), even
  // while its connection seems up. send_bw's server bounds it so wherever it sees the
  // client's messages (SEND, write latency); in a WRITE, READ or atomic bandwidth test it
  // sees none and waits for the disconnect instead.
  bool bound_client_silence = false;
};

// A persistent server's record of one client, with the test that client ran.
struct BwServedClient {
  ServedConnection record;
  nlohmann::json test;
};

// send_bw's result in its report: the test and its rows with perftest's table, or a
// persistent server's clients.
struct BwResults final : ReportSection {
  std::vector<BandwidthRow> bandwidth;
  std::vector<LatencyRow> latency;
  // --counters: the port's counters' change over each row (bandwidth or latency), in order.
  std::vector<CounterDeltas> row_counters;
  // --cpu-util: this process's CPU time over each row, in order.
  std::vector<CpuUse> row_cpu;
  // --interval: the measured run's messages per interval (one size: -D runs one).
  std::vector<IntervalSample> intervals;
  // -c UD: each size's datagrams sent and received (both sides, after the run).
  std::vector<DatagramLoss> datagrams;
  nlohmann::json test = nlohmann::json::object();  // what ran: operation, depth, GID, MTU ...
  // The latest refusals; those before are only counted (refused_earlier).
  LatestEntries<BwRefusal> refused;
  std::uint64_t refused_earlier = 0;
  // What was asked that runs but will not work everywhere (-x naming a link-local entry).
  std::vector<std::string> warnings;
  std::uint64_t answered = 0;  // server of a latency test
  // Persistent server: a record per client, the latest; those before folded into totals.
  LatestEntries<BwServedClient> clients;
  EarlierConnections earlier_clients;
  bool persistent = false;  // a persistent server's: its clients, no rows
  bool gbits = false;       // the text table in Gb/s rather than MB/s

  void add_to(nlohmann::json& document) const override;
  void add_refusals_to(nlohmann::json& document) const;
  void add_clients_to(nlohmann::json& document) const;
  void refuse(BwRefusal refusal) {
    if (refused.add(std::move(refusal))) ++refused_earlier;
  }
  std::string text() const override;
};

// --rate-limit in messages a second at `size` bytes.
double messages_per_s(double rate, char units, std::uint32_t size);

// Progress lines while a client runs, as the text report prints them: the newest row
// (after the table's header for the first), and an interval of --interval (after its
// header for the `first`).
std::string newest_row_text(const BwResults& results);
std::string interval_progress_text(const IntervalSample& sample, std::uint32_t size, bool gbits, bool first);

// Adds `results` to `report` with the rows' totals (a persistent server counted its clients
// as they ended).
void report_results(BwResults results, Report& report);

// Both fill `results` as they go, so a failure leaves a partial report.
void run_bw_client(const BwSettings& settings, Report& report, BwResults& results);
void run_bw_server(const BwSettings& settings, Report& report, BwResults& results);

class Listener;

// The server side apart from its run: listening from construction (rdma_bind_addr and
// rdma_listen, timed as the report's "listen" step), so that a caller can tell a client to
// connect only once it is (rdma_mesh); serve_one() then serves one client's test.
class BwServer {
 public:
  BwServer(const BwSettings& settings, Report& report);
  BwServer(const BwServer&) = delete;
  BwServer& operator=(const BwServer&) = delete;
  BwServer(BwServer&&) = delete;
  BwServer& operator=(BwServer&&) = delete;
  ~BwServer();

  // Serves the first client whose test this server can run, refusing (with the reason)
  // those it cannot; waits for it until `deadline` (forever when none).
  void serve_one(Report& report, BwResults& results, std::optional<Clock::time_point> deadline);
  // -P: one client after another until the stop signal or --accept-timeout.
  void serve_persistently(Report& report, BwResults& results);
  std::shared_ptr<const PeerGate> gate() const { return gate_; }

 private:
  BwSettings settings_;
  std::unique_ptr<Listener> listener_;
  std::optional<std::string> gid_warning_;  // -x named an entry no routed network reaches
  std::shared_ptr<PeerGate> gate_;
};

// 256 -> IBV_MTU_256 ... 4096 -> IBV_MTU_4096; UsageError (naming -m) otherwise.
ibv_mtu mtu_from_bytes(std::uint32_t bytes);

}  // namespace rdmakit
