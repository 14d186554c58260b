#pragma once
// send_bw's report sections beside its rows (lib/base/stats_json), each described once
// (lib/base/described_json.hpp): --interval's intervals, --cpu-util's CPU time, -c UD's
// datagram counts, and the clients a gated server refused. The writer and the shape the
// schema is held to (tests/unit/described_json_test.cpp) come from the one description.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/cpu_use.hpp"
#include "lib/base/described_json.hpp"

namespace rdmakit {

// One interval of a timed run (--interval), at the row's message size.
struct IntervalRecord {
  double end_s = 0;
  double seconds = 0;
  std::uint64_t messages = 0;
  double bw_average_mib_per_s = 0;
  double message_rate_mpps = 0;
};

// A size's datagrams (-c UD), warm-up included, as both sides counted them: under a
// bandwidth row; in the report's own list, with the size; under a latency row, with the
// measured pings whose answer never came.
struct RowDatagrams {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::uint64_t lost = 0;
};
struct DatagramRecord {
  RowDatagrams counts;
  std::uint32_t bytes = 0;
};
struct PingDatagrams {
  RowDatagrams counts;
  std::uint64_t unanswered = 0;
};

// A connection a gated server refused, and why.
struct BwRefusal {
  std::string peer;
  std::string reason;
};

nlohmann::json to_json(const IntervalRecord& interval);
nlohmann::json to_json(const DatagramRecord& datagrams);
nlohmann::json to_json(const RowDatagrams& datagrams);
nlohmann::json to_json(const PingDatagrams& datagrams);
nlohmann::json to_json(const BwRefusal& refusal);
// --cpu-util: `use` over a measurement of `messages` messages.
nlohmann::json cpu_json(const CpuUse& use, std::uint64_t messages);

// The sections' shapes and their schema definitions.
std::vector<described::SchemaShape> bw_json_shapes();

}  // namespace rdmakit
