#include "lib/send_bw/bw_json.hpp"

namespace rdmakit {

namespace {

using described::Describes;

// --cpu-util's figures over one measurement.
struct CpuRecord {
  double user_s = 0;
  double system_s = 0;
  double wall_s = 0;
  double utilization = 0;
  double us_per_message = 0;
};

struct BwJson {
  static constexpr described::ReadLimits limits{};
  static constexpr auto missing_keys = described::MissingKeys::refused;

  static void members(Describes<IntervalRecord> auto& interval, auto&& visit) {
    visit("end_s", interval.end_s);
    visit("seconds", interval.seconds);
    visit("messages", interval.messages);
    visit("bw_average_mib_per_s", interval.bw_average_mib_per_s);
    visit("message_rate_mpps", interval.message_rate_mpps);
  }
  static void members(Describes<RowDatagrams> auto& datagrams, auto&& visit) {
    visit("sent", datagrams.sent);
    visit("received", datagrams.received);
    visit("lost", datagrams.lost);
  }
  // The counts' keys beside the size, or the pings unanswered.
  static void members(Describes<DatagramRecord> auto& datagrams, auto&& visit) {
    members(datagrams.counts, visit);
    visit("bytes", datagrams.bytes);
  }
  static void members(Describes<PingDatagrams> auto& datagrams, auto&& visit) {
    members(datagrams.counts, visit);
    visit("unanswered", datagrams.unanswered);
  }
  static void members(Describes<BwRefusal> auto& refusal, auto&& visit) {
    visit("peer", refusal.peer);
    visit("reason", refusal.reason);
  }
  static void members(Describes<CpuRecord> auto& cpu, auto&& visit) {
    visit("user_s", cpu.user_s);
    visit("system_s", cpu.system_s);
    visit("wall_s", cpu.wall_s);
    visit("utilization", cpu.utilization);
    visit("us_per_message", cpu.us_per_message);
  }
};

template <typename Record>
described::SchemaShape send_bw_shape(const std::string& pointer) {
  return {.schema = "send_bw", .pointer = pointer, .shape = described::shape<BwJson, Record>(), .extra_keys = {}};
}

}  // namespace

nlohmann::json to_json(const IntervalRecord& interval) {
  return described::write<BwJson>(interval);
}
nlohmann::json to_json(const DatagramRecord& datagrams) {
  return described::write<BwJson>(datagrams);
}
nlohmann::json to_json(const RowDatagrams& datagrams) {
  return described::write<BwJson>(datagrams);
}
nlohmann::json to_json(const PingDatagrams& datagrams) {
  return described::write<BwJson>(datagrams);
}
nlohmann::json to_json(const BwRefusal& refusal) {
  return described::write<BwJson>(refusal);
}

nlohmann::json cpu_json(const CpuUse& use, std::uint64_t messages) {
  return described::write<BwJson>(CpuRecord{.user_s = use.user_s,
                                            .system_s = use.system_s,
                                            .wall_s = use.wall_s,
                                            .utilization = use.utilization(),
                                            .us_per_message = use.us_per_message(messages)});
}

std::vector<described::SchemaShape> bw_json_shapes() {
  return {send_bw_shape<IntervalRecord>("/properties/intervals/items"),
          send_bw_shape<DatagramRecord>("/properties/datagrams/items"),
          send_bw_shape<RowDatagrams>("/$defs/bandwidth_row/properties/datagrams"),
          send_bw_shape<PingDatagrams>("/$defs/latency_row/properties/datagrams"),
          send_bw_shape<BwRefusal>("/$defs/refusal"),
          send_bw_shape<CpuRecord>("/$defs/cpu")};
}

}  // namespace rdmakit
