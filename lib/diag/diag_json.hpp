#pragma once
// What diag-bind's and diag-connect's JSON descriptions share (lib/base/described_json.hpp):
// a GID entry, diag-bind's verdict (diag-connect embeds it as "host"), verdict exit codes and
// causes, written and read by name. Each diagnoser's codec derives from DiagJson and adds its
// own structs (diagnosis_report.cpp, connect_json.cpp).

#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"
#include "lib/base/error.hpp"
#include "lib/diag/causes.hpp"
#include "lib/diag/diagnosis.hpp"
#include "lib/rdma/gid.hpp"

namespace rdmakit::diag {

struct DiagJson {
  // Reports and captures of older versions lack the keys added since.
  static constexpr auto missing_keys = described::MissingKeys::keep_defaults;

  static void members(described::Describes<GidEntry> auto& gid, auto&& visit) {
    visit("index", gid.index);
    visit("gid", gid.gid);
    visit("type", gid.type);
    visit("netdev", gid.netdev);
  }

  static void members(described::Describes<Verdict> auto& verdict, auto&& visit) {
    visit("cause", verdict.cause);
    visit("exit_code", verdict.exit_code);
    visit("summary", verdict.summary);
    visit("fix", verdict.fix);
    visit("next", verdict.next);
    visit("details", verdict.details);
    visit("warnings", verdict.warnings);
  }

  // A verdict's exit code: 0 (usable), 1 (a cause named) or 3 (none found).
  static nlohmann::json write_leaf(ExitCode code) { return static_cast<int>(code); }
  static void read_leaf(const nlohmann::json& value, const described::Path& path, ExitCode& out) {
    int code = 0;
    described::read_integer(value, path, code);
    if (code != static_cast<int>(ExitCode::ok) && code != static_cast<int>(ExitCode::cause_found) &&
        code != static_cast<int>(ExitCode::unexplained)) {
      described::reject(path, fmt::format("{} is no verdict's exit code (0, 1 or 3)", code));
    }
    out = static_cast<ExitCode>(code);
  }
  static nlohmann::json leaf_shape(const ExitCode* /*kind*/) {
    return {{"type", "integer"},
            {"enum",
             {static_cast<int>(ExitCode::ok), static_cast<int>(ExitCode::cause_found),
              static_cast<int>(ExitCode::unexplained)}}};
  }

  // A cause is one of its diagnoser's (causes.hpp).
  template <const auto& table>
  static nlohmann::json write_leaf(const Cause<table>& cause) {
    return cause.name();
  }
  template <const auto& table>
  static void read_leaf(const nlohmann::json& value, const described::Path& path, Cause<table>& out) {
    described::read_named(value, path, out, Cause<table>::named, table);
  }
  template <const auto& table>
  static nlohmann::json leaf_shape(const Cause<table>* /*kind*/) {
    return described::named_shape(table);
  }
};

}  // namespace rdmakit::diag
