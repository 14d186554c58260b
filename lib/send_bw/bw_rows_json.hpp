#pragma once
// send_bw's rows as JSON, from one description (lib/base/described_json.hpp): what the report
// writes (named as perftest's columns), what --baseline reads back, and the shape
// doc/schema/send_bw.schema.json's bandwidth_row and latency_row must have. The keys other
// parts of the report add to a row (--counters, --cpu-util, -c UD, --histogram) are written
// beside it by BwResults and left alone by the reader.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"
#include "lib/base/stats.hpp"

namespace rdmakit {

nlohmann::json to_json(const BandwidthRow& row);
nlohmann::json to_json(const LatencyRow& row);

// `rows` as a report's rows; ProtocolError naming the first thing wrong ("rows[2].bytes:
// missing"): a key missing, of the wrong type or out of range, or more rows than a report has.
std::vector<BandwidthRow> bandwidth_rows_from_json(const nlohmann::json& rows);
std::vector<LatencyRow> latency_rows_from_json(const nlohmann::json& rows);

// Each row's shape and its schema definition (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> bw_rows_shapes();

}  // namespace rdmakit
