// send_bw's result as JSON (rows named as perftest's columns) and as perftest's text table.

#include <fmt/format.h>

#include "lib/base/stats_json.hpp"
#include "lib/send_bw/send_bw_session.hpp"

namespace rdmakit {

namespace {

double unit_scale(bool gbits) {
  return gbits ? 1048576.0 * 8 / 1e9 : 1.0;  // MiB/s -> Gb/s
}

std::string table_header(const BandwidthRow* /*kind*/, bool gbits) {
  const char* unit = gbits ? "Gb/sec" : "MB/sec";  // perftest's MB: 2^20 bytes
  return fmt::format(" {:>10} {:>12} {:>16} {:>19} {:>14}\n", "#bytes", "#iterations", fmt::format("BW peak[{}]", unit),
                     fmt::format("BW average[{}]", unit), "MsgRate[Mpps]");
}

std::string table_line(const BandwidthRow& row, bool gbits) {
  const double scale = unit_scale(gbits);
  return fmt::format(" {:>10} {:>12} {:>16.2f} {:>19.2f} {:>14.6f}\n", row.size, row.iterations,
                     row.peak_mib_per_s * scale, row.average_mib_per_s * scale, row.message_rate_mpps);
}

std::string table_header(const LatencyRow* /*kind*/, bool /*gbits*/) {
  return fmt::format(" {:>10} {:>12} {:>11} {:>11} {:>14} {:>11} {:>13} {:>11} {:>13}\n", "#bytes", "#iterations",
                     "t_min[us]", "t_max[us]", "t_median[us]", "t_avg[us]", "t_stdev[us]", "p99[us]", "p99.9[us]");
}

std::string table_line(const LatencyRow& row, bool /*gbits*/) {
  const auto& s = row.summary;
  return fmt::format(" {:>10} {:>12} {:>11.2f} {:>11.2f} {:>14.2f} {:>11.2f} {:>13.2f} {:>11.2f} {:>13.2f}\n", row.size,
                     s.count, s.min_us, s.max_us, s.p50_us, s.avg_us, s.stdev_us, s.p99_us, s.p999_us);
}

// perftest's table: its header, a line per row.
template <typename Row>
std::string table(const std::vector<Row>& rows, bool gbits) {
  std::string text = table_header(static_cast<const Row*>(nullptr), gbits);
  for (const auto& row : rows) text += table_line(row, gbits);
  return text;
}

// The newest row of `rows` as a line of the table, after the header for the first.
template <typename Row>
std::string newest_line(const std::vector<Row>& rows, bool gbits) {
  if (rows.empty()) return {};
  const auto header = rows.size() == 1 ? table_header(static_cast<const Row*>(nullptr), gbits) : std::string();
  return header + table_line(rows.back(), gbits);
}

std::string interval_header(bool gbits) {
  return fmt::format(" {:>10} {:>12} {:>19} {:>14}\n", "#end[s]", "#messages",
                     fmt::format("BW average[{}]", gbits ? "Gb/sec" : "MB/sec"), "MsgRate[Mpps]");
}

// One interval's rates at the row's message size (-D measures one size).
struct IntervalRates {
  double mib_per_s = 0;
  double mpps = 0;
};

IntervalRates rates_of(const IntervalSample& sample, std::uint32_t size) {
  if (sample.seconds <= 0) return {};
  const auto messages = static_cast<double>(sample.messages);
  return {.mib_per_s = messages * size / sample.seconds / 1048576.0, .mpps = messages / sample.seconds / 1e6};
}

std::uint32_t interval_size(const BwResults& results) {
  return results.bandwidth.empty() ? 0 : results.bandwidth.front().size;
}

nlohmann::json intervals_json(const BwResults& results) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& sample : results.intervals) {
    const auto rates = rates_of(sample, interval_size(results));
    items.push_back(to_json(IntervalRecord{.end_s = sample.end_s,
                                           .seconds = sample.seconds,
                                           .messages = sample.messages,
                                           .bw_average_mib_per_s = rates.mib_per_s,
                                           .message_rate_mpps = rates.mpps}));
  }
  return items;
}

std::string interval_line(const IntervalSample& sample, std::uint32_t size, bool gbits) {
  const auto rates = rates_of(sample, size);
  return fmt::format(" {:>10.3f} {:>12} {:>19.2f} {:>14.6f}\n", sample.end_s, sample.messages,
                     rates.mib_per_s * unit_scale(gbits), rates.mpps);
}

// --interval: under the table, a line per interval.
std::string intervals_text(const BwResults& results) {
  if (results.intervals.empty()) return {};
  std::string text = interval_header(results.gbits);
  for (const auto& sample : results.intervals) text += interval_line(sample, interval_size(results), results.gbits);
  return text;
}

// Row `i`'s message size and messages, bandwidth or latency (a run has one kind); the
// per-row extras (row_cpu, row_counters) follow the rows' order.
std::pair<std::uint32_t, std::uint64_t> row_at(const BwResults& results, std::size_t i) {
  if (i < results.bandwidth.size()) return {results.bandwidth[i].size, results.bandwidth[i].iterations};
  if (i < results.latency.size()) return {results.latency[i].size, results.latency[i].summary.count};
  return {0, 0};
}

// --cpu-util: under the table, each row's CPU time.
std::string cpu_text(const BwResults& results) {
  if (results.row_cpu.empty()) return {};
  std::string text = "CPU, per row (this side):\n";
  for (std::size_t i = 0; i < results.row_cpu.size(); ++i) {
    const auto& use = results.row_cpu[i];
    const auto [bytes, messages] = row_at(results, i);
    text +=
        fmt::format(" {:>10} user {:.3f} s, system {:.3f} s, {:.0f}% of one core over {:.3f} s, {:.2f} us/message\n",
                    bytes, use.user_s, use.system_s, use.utilization() * 100, use.wall_s, use.us_per_message(messages));
  }
  return text;
}

// --counters: under the table, each row's counters that moved (all of them are in the JSON).
std::string counters_text(const BwResults& results) {
  if (results.row_counters.empty()) return {};
  std::string text = "port counters that changed, per row:\n";
  for (std::size_t i = 0; i < results.row_counters.size(); ++i) {
    const auto bytes = row_at(results, i).first;
    std::string moved;
    for (const auto& [name, delta] : results.row_counters[i]) {
      if (delta != 0) moved += fmt::format(" {} {:+}", name, delta);
    }
    if (results.row_counters[i].empty()) moved = " (the device shows no counters in sysfs)";
    text += fmt::format(" {:>10}{}\n", bytes, moved.empty() ? " none" : moved);
  }
  return text;
}

// -c UD: under the table, each size's datagrams (warm-up included), as both sides know them.
std::string datagrams_text(const BwResults& results) {
  std::string text;
  for (const auto& loss : results.datagrams) {
    const double share = loss.sent > 0 ? 100.0 * static_cast<double>(loss.lost()) / static_cast<double>(loss.sent) : 0;
    text += fmt::format(" {:>10} datagrams: {} sent, {} received, {} lost ({:.2f}%)", loss.size, loss.sent,
                        loss.received, loss.lost(), share);
    for (const auto& row : results.latency) {
      if (row.size == loss.size) text += fmt::format("; {} measured pings unanswered", row.unanswered);
    }
    text += "\n";
  }
  return text;
}

// The server of a latency test answers; it measures nothing itself.
bool answers_pings(const BwResults& results) {
  return results.latency.empty() && results.test.value("test", "") == "lat";
}

}  // namespace

void BwResults::add_refusals_to(nlohmann::json& document) const {
  if (refused.entries().empty()) return;
  nlohmann::json refusals = nlohmann::json::array();
  for (const auto& refusal : refused.entries()) refusals.push_back(to_json(refusal));
  document["refused"] = std::move(refusals);
  if (refused_earlier > 0) document["refused_earlier"] = refused_earlier;
}

void BwResults::add_clients_to(nlohmann::json& document) const {
  nlohmann::json records = nlohmann::json::array();
  for (const auto& client : clients.entries()) {
    auto record = to_json(client.record);
    record["test"] = client.test;
    records.push_back(std::move(record));
  }
  document["connections"] = std::move(records);
  if (earlier_clients.count > 0) document["earlier_connections"] = to_json(earlier_clients);
}

void BwResults::add_to(nlohmann::json& document) const {
  if (!warnings.empty()) document["warnings"] = warnings;
  add_refusals_to(document);
  if (persistent) {
    add_clients_to(document);
    return;
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : bandwidth) rows.push_back(to_json(row));
  for (const auto& row : latency) rows.push_back(to_json(row));
  for (std::size_t i = 0; i < row_counters.size() && i < rows.size(); ++i) rows[i]["counters"] = row_counters[i];
  for (std::size_t i = 0; i < row_cpu.size() && i < rows.size(); ++i) {
    rows[i]["cpu"] = cpu_json(row_cpu[i], row_at(*this, i).second);
  }
  // -c UD: each row's datagrams (a latency row's pings, and those of its measured pings
  // whose answer never came), and all of them on their own: a size none of whose datagrams
  // arrived has no row on the server, and a latency server has no rows at all.
  nlohmann::json losses = nlohmann::json::array();
  for (const auto& loss : datagrams) {
    const RowDatagrams counts{.sent = loss.sent, .received = loss.received, .lost = loss.lost()};
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i]["bytes"] != loss.size) continue;
      rows[i]["datagrams"] = i < latency.size()
                                 ? to_json(PingDatagrams{.counts = counts, .unanswered = latency[i].unanswered})
                                 : to_json(counts);
    }
    losses.push_back(to_json(DatagramRecord{.counts = counts, .bytes = loss.size}));
  }
  if (!datagrams.empty()) document["datagrams"] = std::move(losses);
  document["test"] = test;
  document["rows"] = std::move(rows);
  if (!intervals.empty()) document["intervals"] = intervals_json(*this);
  if (answers_pings(*this)) document["answered"] = answered;
}

std::string BwResults::text() const {
  if (persistent) return fmt::format("served {} clients\n", clients.entries().size() + earlier_clients.count);
  if (answers_pings(*this)) return fmt::format("answered {} messages\n", answered) + datagrams_text(*this);
  auto text = latency.empty() ? table(bandwidth, gbits) : table(latency, gbits);
  return text + datagrams_text(*this) + intervals_text(*this) + cpu_text(*this) + counters_text(*this);
}

std::string newest_row_text(const BwResults& results) {
  return results.latency.empty() ? newest_line(results.bandwidth, results.gbits)
                                 : newest_line(results.latency, results.gbits);
}

std::string interval_progress_text(const IntervalSample& sample, std::uint32_t size, bool gbits, bool first) {
  return (first ? interval_header(gbits) : std::string()) + interval_line(sample, size, gbits);
}

void report_results(BwResults results, Report& report) {
  for (const auto& row : results.bandwidth) {
    report.bytes += row.bytes;
    report.iterations_completed += row.iterations;
  }
  for (const auto& row : results.latency) {
    report.bytes += std::uint64_t{row.size} * row.summary.count;
    report.iterations_completed += row.summary.count;
  }
  report.add(std::move(results));
}

}  // namespace rdmakit
