#pragma once
// The measurements' JSON, from one description each (lib/base/described_json.hpp): a latency
// summary (a report's "rtt_us") and send_bw's rows (named as perftest's columns). What the
// reports write, what send_bw --baseline and rdma_smoke read back, and the shapes
// common.schema.json's latency_summary and send_bw.schema.json's bandwidth_row and latency_row
// must have, --histogram's buckets included. The keys other parts of a report add to a row
// (--counters, --cpu-util, -c UD) are written beside it by send_bw and left alone by the reader.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"
#include "lib/base/stats.hpp"

namespace rdmakit {

nlohmann::json to_json(const LatencySummary& summary);
nlohmann::json to_json(const BandwidthRow& row);
nlohmann::json to_json(const LatencyRow& row);

// Each throws ProtocolError naming the first thing wrong at `path` ("rows[2].bytes:
// missing"): a key missing, of the wrong type or out of range, or more rows than a report has.
LatencySummary latency_summary_from_json(const nlohmann::json& summary, const std::string& path);
std::vector<BandwidthRow> bandwidth_rows_from_json(const nlohmann::json& rows);
std::vector<LatencyRow> latency_rows_from_json(const nlohmann::json& rows);

// Each description's shape and its schema definition (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> stats_json_shapes();

}  // namespace rdmakit
