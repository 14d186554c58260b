#pragma once
// diag-bind --gids: every port's GID table as show_gids prints it, and for an address the
// index each index-taking stack should be given (lib/rdma/gid.hpp advise_gid decides; this
// lays it out). Pure: everything comes from an Inventory, so fixtures feed it as the live
// host does.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"
#include "lib/base/report.hpp"
#include "lib/diag/diagnosis.hpp"
#include "lib/rdma/gid.hpp"

namespace rdmakit::diag {

// One populated entry of one port, with what show_gids derives from it.
struct GidRow {
  std::string device;
  int port = 0;
  GidEntry entry;
  std::string ipv4;         // the mapped IPv4 address, "" for any other GID
  std::optional<int> vlan;  // the VLAN id of the entry's netdev, when it is a VLAN netdev
  bool link_local = false;  // fe80::/10: no router forwards it
};

// Every populated entry of every port, device by device, port by port, index by index.
std::vector<GidRow> gid_rows(const Inventory& inventory);

// "rxenet0.100    | 100  | rxenet0" lines of /proc/net/vlan/config -> {"rxenet0.100": 100}.
// The two header lines and anything that does not parse are left out.
std::map<std::string, int> parse_vlan_config(std::string_view text);

// What --gids ADDRESS answers: the address asked about, the one whose GID the stacks need
// (the address itself when it is this host's, else the source the kernel routes it from),
// and advise_gid's advice for that one.
struct GidLookup {
  std::string address;  // canonical
  std::string source;   // canonical; "" when the kernel has no route to `address`
  GidAdvice advice;
  std::vector<StackSetting> settings;  // empty without an entry
};
// `route_source` is what the kernel routes `address` from (lib/probe's route_source, or a
// replay's attempt); it is used only when `address` is not one of the inventory's.
GidLookup look_up_gid(const Inventory& inventory, const std::string& address, const std::string& route_source);

nlohmann::json to_json(const GidRow& row);
nlohmann::json to_json(const GidLookup& lookup);
// The rows' and the advice's shapes and their schema definitions (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> gid_table_shapes();
// The table with a header line, columns as show_gids has them.
std::string render_gid_table(const std::vector<GidRow>& rows);
std::string render_gid_lookup(const GidLookup& lookup, const SiblingNames& siblings);

// diag-bind --gids in its report: "gids", and "advice" when an address was given. The
// outcome is "ok" for the table alone or an advice with an entry, "no_gid" otherwise.
class GidReport final : public ReportSection {
 public:
  // `siblings`: how the lookup's next step names diag-bind.
  GidReport(std::vector<GidRow> rows, std::optional<GidLookup> lookup, SiblingNames siblings)
      : rows_(std::move(rows)), lookup_(std::move(lookup)), siblings_(std::move(siblings)) {}
  void add_to(nlohmann::json& document) const override;
  std::string text() const override;
  std::optional<std::string> outcome() const override;
  // 0 for the table alone or an advice with an entry; 1 (cause found) for an address with none.
  ExitCode exit_code() const;

 private:
  std::vector<GidRow> rows_;
  std::optional<GidLookup> lookup_;
  SiblingNames siblings_;
};

}  // namespace rdmakit::diag
