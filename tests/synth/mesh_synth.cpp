#include "tests/synth/mesh_synth.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "lib/mesh/mesh_plan.hpp"

namespace rdmakit::synth {
namespace {

using mesh::CellState;
using mesh::MeshTable;
using mesh::TestMatrix;

constexpr std::array<std::pair<FaultKind, std::string_view>, 6> fault_names{{{FaultKind::none, "none"},
                                                                             {FaultKind::node, "node"},
                                                                             {FaultKind::nic, "nic"},
                                                                             {FaultKind::link, "link"},
                                                                             {FaultKind::leaf_uplink, "leaf"},
                                                                             {FaultKind::failed_node, "failed"}}};
constexpr int leaves_per_spine = 16;

// mt19937_64 is specified bit for bit; the standard's distributions are not, and a seed must
// give the same mesh with every standard library.
class Draw {
 public:
  explicit Draw(std::uint64_t seed) : engine_(seed) {}
  double unit() { return static_cast<double>(engine_() >> 11U) * 0x1.0p-53; }
  double between(double low, double high) { return low + (high - low) * unit(); }
  int below(int count) { return static_cast<int>(engine_() % static_cast<std::uint64_t>(count)); }

 private:
  std::mt19937_64 engine_;
};

std::string numbered(std::string_view prefix, int number, int width) {
  return fmt::format("{}{:0{}}", prefix, number, width);
}

int digits(int count) {
  return static_cast<int>(std::to_string(count).size());
}

void check(const SynthSpec& spec) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument("mesh_synth: " + what); };
  if (spec.ranks_per_host < 1 || spec.ranks % spec.ranks_per_host != 0) {
    fail(fmt::format("{} ranks do not divide into hosts of {}", spec.ranks, spec.ranks_per_host));
  }
  if (spec.ranks / spec.ranks_per_host < 2) fail("a mesh needs two hosts at least");
  if (spec.hosts_per_leaf < 1) fail("a leaf needs a host at least");
  if (spec.test != "bw" && spec.test != "lat") fail("test must be bw or lat, not " + spec.test);
  if (spec.fault.kind == FaultKind::nic && spec.ranks_per_host < 2) fail("a nic fault needs two ranks a host");
  const int hosts = spec.ranks / spec.ranks_per_host;
  if (spec.fault.kind == FaultKind::leaf_uplink && hosts <= spec.hosts_per_leaf) {
    fail("a leaf fault needs two leaves at least");
  }
}

nlohmann::json failed_verdict(const std::string& cause, const std::string& address) {
  return {{"cause", cause},
          {"exit_code", 1},
          {"summary", fmt::format("{} is on eth1, and no RDMA device has a GID on eth1", address)},
          {"fix", "rdma link add rxe_eth1 type rxe netdev eth1"},
          {"next", "on a RoCE NIC, use an address on the netdev of its port instead"},
          {"details", nlohmann::json::array()},
          {"warnings", nlohmann::json::array()}};
}

std::vector<mesh::Node> make_nodes(const SynthSpec& spec) {
  std::vector<mesh::Node> nodes;
  nodes.reserve(static_cast<std::size_t>(spec.ranks));
  for (int rank = 0; rank < spec.ranks; ++rank) {
    const int host = rank / spec.ranks_per_host;
    const int local = rank % spec.ranks_per_host;
    mesh::Node node;
    node.rank = rank;
    node.host = numbered("node", host + 1, std::max(4, digits(spec.ranks)));
    node.address = fmt::format("10.{}.{}.{}", 1 + local, host / 250, 1 + host % 250);
    node.address_choice = fmt::format("mlx5_{} port 1 (ib{}), the first ACTIVE port with an address", local, local);
    node.device = fmt::format("mlx5_{}", local);
    node.port = 1;
    node.gid = "::ffff:" + node.address;
    node.gid_index = 3;
    node.gid_type = "RoCE v2";
    node.mtu = 4096;
    node.usable = true;
    nodes.push_back(std::move(node));
  }
  return nodes;
}

mesh::Topology make_topology(const std::vector<mesh::Node>& nodes, int hosts_per_leaf) {
  mesh::Topology topology;
  topology.origin = "mesh_synth";
  std::vector<std::string> hosts;
  for (const auto& node : nodes) {
    if (hosts.empty() || hosts.back() != node.host) hosts.push_back(node.host);
  }
  const int host_count = static_cast<int>(hosts.size());
  const int leaves = (host_count + hosts_per_leaf - 1) / hosts_per_leaf;
  const int spines = (leaves + leaves_per_spine - 1) / leaves_per_spine;
  for (int h = 0; h < host_count; ++h) {
    topology.leaf_of_host[hosts[static_cast<std::size_t>(h)]] =
        numbered("leaf", h / hosts_per_leaf + 1, std::max(2, digits(leaves)));
  }
  for (int leaf = 0; leaf < leaves; ++leaf) {
    const auto spine = numbered("spine", leaf / leaves_per_spine + 1, std::max(2, digits(spines)));
    topology.parent_of_switch[numbered("leaf", leaf + 1, std::max(2, digits(leaves)))] = spine;
    if (spines > 1) topology.parent_of_switch[spine] = "core";
  }
  return topology;
}

// Which directions the fault touches, and how.
struct Plant {
  FaultKind kind = FaultKind::none;
  std::set<int> ranks;        // node, nic, failed_node: the victim's ranks; link: the first host's
  std::set<int> other_ranks;  // link: the second host's
  std::vector<bool> in_leaf;  // leaf_uplink: by rank, under the victim leaf
  bool touches(int source, int destination) const {
    switch (kind) {
      case FaultKind::none: return false;
      case FaultKind::node:
      case FaultKind::nic:
      case FaultKind::failed_node: return ranks.contains(source) || ranks.contains(destination);
      case FaultKind::link:
        return (ranks.contains(source) && other_ranks.contains(destination)) ||
               (ranks.contains(destination) && other_ranks.contains(source));
      case FaultKind::leaf_uplink:
        return in_leaf[static_cast<std::size_t>(source)] != in_leaf[static_cast<std::size_t>(destination)];
    }
    return false;
  }
};

std::set<int> ranks_of_host(int host, int ranks_per_host) {
  std::set<int> ranks;
  for (int local = 0; local < ranks_per_host; ++local) ranks.insert(host * ranks_per_host + local);
  return ranks;
}

// Draws the victim and says what locate_culprits should name.
std::pair<Plant, std::optional<Expected>> plant_fault(const SynthSpec& spec, Synth& synth, Draw& draw) {
  const int hosts = spec.ranks / spec.ranks_per_host;
  Plant plant;
  plant.kind = spec.fault.kind;
  const auto& table = synth.table;
  switch (spec.fault.kind) {
    case FaultKind::none: return {plant, std::nullopt};
    case FaultKind::node:
    case FaultKind::failed_node: {
      const int host = draw.below(hosts);
      plant.ranks = ranks_of_host(host, spec.ranks_per_host);
      if (spec.fault.kind == FaultKind::node) {
        return {plant, Expected{mesh::CulpritKind::node, table.host_of(*plant.ranks.begin())}};
      }
      return {plant, Expected{mesh::CulpritKind::cause, spec.fault.cause}};
    }
    case FaultKind::nic: {
      const int rank = draw.below(spec.ranks);
      plant.ranks = {rank};
      const auto& node = table.nodes[static_cast<std::size_t>(rank)];
      return {plant, Expected{mesh::CulpritKind::nic, fmt::format("{}/{} (rank {})", node.host, node.device, rank)}};
    }
    case FaultKind::link: {
      const int first = draw.below(hosts);
      const int second = (first + 1 + draw.below(hosts - 1)) % hosts;
      plant.ranks = ranks_of_host(first, spec.ranks_per_host);
      plant.other_ranks = ranks_of_host(second, spec.ranks_per_host);
      return {plant, Expected{mesh::CulpritKind::link,
                              link_name(table, first * spec.ranks_per_host, second * spec.ranks_per_host)}};
    }
    case FaultKind::leaf_uplink: {
      const int leaves = (hosts + spec.hosts_per_leaf - 1) / spec.hosts_per_leaf;
      const int leaf = draw.below(leaves);
      plant.in_leaf.assign(static_cast<std::size_t>(spec.ranks), false);
      for (int rank = 0; rank < spec.ranks; ++rank) {
        plant.in_leaf[static_cast<std::size_t>(rank)] = rank / spec.ranks_per_host / spec.hosts_per_leaf == leaf;
      }
      const auto name = synth.topology.leaf_of_host.at(table.host_of(leaf * spec.hosts_per_leaf * spec.ranks_per_host));
      return {plant, Expected{mesh::CulpritKind::switch_uplinks, name}};
    }
  }
  return {plant, std::nullopt};
}

void mark_failed_nodes(const SynthSpec& spec, const Plant& plant, MeshTable& table) {
  for (const int rank : plant.ranks) {
    auto& node = table.nodes[static_cast<std::size_t>(rank)];
    node.usable = false;
    node.device.clear();
    node.address_choice = "--bind";
    node.port = 0;
    node.gid.clear();
    node.gid_index = -1;
    node.gid_type.clear();
    node.mtu = 0;
    node.verdict = failed_verdict(spec.fault.cause, node.address);
  }
}

void fill_matrix(const SynthSpec& spec, const Plant& plant, double severity, Draw& draw, MeshTable& table) {
  auto& matrix = table.tests.front();
  const bool higher = matrix.better == mesh::Better::higher;
  for (int source = 0; source < spec.ranks; ++source) {
    for (int destination = 0; destination < spec.ranks; ++destination) {
      if (source == destination) continue;
      const auto cell = matrix.index(source, destination);
      const double noise = draw.between(1 - spec.noise, 1 + spec.noise);
      const bool hit = plant.touches(source, destination);
      if (hit && plant.kind == FaultKind::failed_node) {
        const int victim = plant.ranks.contains(source) ? source : destination;
        const auto& node = table.nodes[static_cast<std::size_t>(victim)];
        matrix.state[cell] = CellState::failed;
        matrix.failures.push_back(
            {source, destination, spec.fault.cause,
             fmt::format("rank {} ({}, {}) cannot take part: {}: {}", victim, node.host, node.address, spec.fault.cause,
                         node.verdict.value("summary", std::string()))});
        continue;
      }
      const double factor = hit ? severity : 1.0;
      const double figure = higher ? spec.base * noise * factor : spec.base * noise / factor;
      matrix.first[cell] = figure;
      matrix.last[cell] = figure;
      matrix.state[cell] = CellState::measured;
    }
  }
}

// --- the report ---------------------------------------------------------------------------

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string number_or_null(double value) {
  return std::isnan(value) ? std::string("null") : fmt::format("{}", value);
}
std::string number_or_null(const std::optional<double>& value) {
  return value ? fmt::format("{}", *value) : "null";
}

constexpr int bw_size = 65536;
constexpr int bw_iterations = 1000;
constexpr int lat_size = 2;
constexpr int lat_count = 1000;
constexpr double mib = 1048576.0;

struct TestText {
  std::string_view unit;
  std::string_view figure;
};

TestText test_text(const TestMatrix& matrix) {
  if (matrix.test == "lat") return {"us", "median latency"};
  if (matrix.test == "cm") return {"ms", "median connection set-up (resolve, route, connect)"};
  return {"MiB/s", "average bandwidth"};
}

void append_figures(fmt::memory_buffer& out, const TestMatrix& matrix, double figure) {
  if (std::isnan(figure)) {
    fmt::format_to(std::back_inserter(out), "{{}}");
  } else if (matrix.test == "lat") {
    fmt::format_to(std::back_inserter(out),
                   R"({{"avg":{},"count":{},"max":{},"min":{},"p50":{},"p99":{},"p99.9":{},"size":{},"stdev":{}}})",
                   figure * 1.01, lat_count, figure * 1.6, figure * 0.9, figure, figure * 1.3, figure * 1.5, lat_size,
                   figure * 0.05);
  } else if (matrix.test == "cm") {
    fmt::format_to(
        std::back_inserter(out),
        R"({{"connect_ms":{},"connections":4,"resolve_addr_ms":{},"resolve_route_ms":{},"setup_max_ms":{},"setup_ms":{}}})",
        figure * 0.6, figure * 0.2, figure * 0.2, figure * 1.2, figure);
  } else {
    const double bytes = static_cast<double>(bw_size) * bw_iterations;
    fmt::format_to(
        std::back_inserter(out),
        R"({{"bw_average_gbit_per_s":{},"bw_average_mib_per_s":{},"bw_peak_mib_per_s":{},"bytes":{},"iterations":{},"msg_rate_mpps":{},"seconds":{},"size":{}}})",
        figure * mib * 8 / 1e9, figure, figure * 1.02, static_cast<std::uint64_t>(bytes), bw_iterations,
        figure * mib / bw_size / 1e6, bytes / (figure * mib), bw_size);
  }
}

struct Judged {
  const TestMatrix* matrix = nullptr;
  std::vector<std::size_t> cells;  // the sample index -> cell
  mesh::Analysis analysis;
  std::optional<double> first_pass_median;
  double threshold = 0;
  std::vector<bool> outlier;  // by cell
};

Judged judge(const TestMatrix& matrix, const ReportSettings& settings) {
  Judged judged;
  judged.matrix = &matrix;
  const bool higher = matrix.better == mesh::Better::higher;
  judged.threshold = higher ? settings.threshold : mesh::default_time_threshold;
  std::vector<mesh::Sample> firsts;
  std::vector<mesh::Sample> lasts;
  for (std::size_t cell = 0; cell < matrix.cell_count(); ++cell) {
    if (matrix.state[cell] == CellState::not_measured) continue;
    const int source = static_cast<int>(cell / static_cast<std::size_t>(matrix.ranks));
    const int destination = static_cast<int>(cell % static_cast<std::size_t>(matrix.ranks));
    const auto as_figure = [](double v) { return std::isnan(v) ? std::nullopt : std::optional<double>(v); };
    firsts.push_back({source, destination, as_figure(matrix.first[cell])});
    lasts.push_back({source, destination, as_figure(matrix.last[cell])});
    judged.cells.push_back(cell);
  }
  judged.first_pass_median = mesh::median_of_figures(firsts);
  judged.analysis = mesh::analyse(lasts, {.better = matrix.better,
                                          .threshold = judged.threshold,
                                          .slowest_count = 5,
                                          .reference_median = judged.first_pass_median});
  judged.outlier.assign(matrix.cell_count(), false);
  for (const auto& outlier : judged.analysis.outliers) judged.outlier[judged.cells[outlier.sample]] = true;
  return judged;
}

class ReportWriter {
 public:
  ReportWriter(std::FILE* out, const MeshTable& table, const ReportSettings& settings)
      : out_(out), table_(table), settings_(settings) {
    for (const auto& matrix : table.tests) judged_.push_back(judge(matrix, settings));
    for (const auto& matrix : table.tests) {
      for (const auto& f : matrix.failures) failure_of_[{&matrix, {f.source, f.destination}}] = &f;
    }
  }

  void write() {
    const auto rounds = mesh::round_robin(table_.ranks);
    append("{{");
    write_head(rounds.size());
    append(R"(,"pairs":[)");
    first_pair_ = true;
    write_pairs(rounds, true);
    write_pairs(rounds, false);
    append("]");
    write_tail(rounds.size());
    append("}}\n");
    flush();
  }

 private:
  template <typename... Args>
  void append(fmt::format_string<Args...> format, Args&&... args) {
    fmt::format_to(std::back_inserter(buffer_), format, std::forward<Args>(args)...);
    if (buffer_.size() > (1U << 20U)) flush();
  }
  void flush() {
    if (std::fwrite(buffer_.data(), 1, buffer_.size(), out_) != buffer_.size()) {
      throw std::runtime_error("mesh_synth: writing the report failed");
    }
    buffer_.clear();
  }

  std::pair<std::size_t, std::size_t> counts() const {
    std::size_t failed = 0;
    std::size_t outliers = 0;
    for (const auto& judged : judged_) {
      failed += judged.analysis.failed;
      outliers += judged.analysis.outliers.size();
    }
    return {failed, outliers};
  }

  std::string error_line() const {
    const auto [failed, outliers] = counts();
    std::size_t directions = 0;
    for (const auto& judged : judged_) directions += judged.cells.size();
    std::string unusable;
    for (const auto& node : table_.nodes) {
      if (node.usable) continue;
      unusable += fmt::format("{}rank {}: {}", unusable.empty() ? "" : ", ", node.rank,
                              node.verdict.value("cause", std::string("unknown")));
    }
    auto line =
        fmt::format("{} of {} directions failed, {} outlier(s) after the retests", failed, directions, outliers);
    if (!unusable.empty()) line += fmt::format(" (cannot take part: {})", unusable);
    return line;
  }

  std::string arguments() const {
    std::string tests;
    for (const auto& matrix : table_.tests) tests += (tests.empty() ? "" : ",") + json_string(matrix.test);
    return fmt::format(
        R"({{"bind":"","connections":4,"debug":false,"depth":128,"duration_s":0.0,"ib_dev":"","inline":0,"iterations":{},"json":true,"json_file":"","lat_size":{},"lat_threshold":{},"log_level":"warn","netdev":"","one_way":false,"operation":"send","pairs":"","port":18515,"retests":1,"serial":false,"size":{},"tests":[{}],"threshold":{},"timeout_s":5.0,"warmup":100}})",
        bw_iterations, lat_size, mesh::default_time_threshold, bw_size, tests, settings_.threshold);
  }

  void write_head(std::size_t rounds) {
    const auto [failed, outliers] = counts();
    const bool clean = failed == 0 && outliers == 0;
    std::uint64_t bytes = 0;
    for (const auto& judged : judged_) {
      if (judged.matrix->test == "bw") bytes += judged.analysis.measured * std::uint64_t{bw_size} * bw_iterations;
    }
    const double duration = settings_.duration_s > 0 ? settings_.duration_s : 0.25 * static_cast<double>(rounds);
    append(R"("arguments":{},"bytes":{},"cm_timings_ms":{{}},"timings_ms":{{}},"duration_s":{},"errors":[{}],)",
           arguments(), bytes, duration, clean ? std::string() : R"({"message":)" + json_string(error_line()) + "}");
    append(R"("exit_code":{},"iterations":{{"completed":0,"requested":0}},"local_address":{},"nodes":[)", clean ? 0 : 1,
           json_string(table_.nodes.empty() ? "" : table_.nodes.front().address));
    bool first = true;
    for (const auto& node : table_.nodes) {
      append("{}{}", first ? "" : ",", to_json(node).dump());
      first = false;
    }
    append(R"(],"outcome":{})", clean ? R"("completed")" : R"("failed")");
  }

  const mesh::Failure* failure(const TestMatrix& matrix, int source, int destination) const {
    const auto found = failure_of_.find(std::pair{&matrix, std::pair{source, destination}});
    return found == failure_of_.end() ? nullptr : found->second;
  }

  void write_pairs(const std::vector<mesh::Round>& rounds, bool unusable_first) {
    for (std::size_t round = 0; round < rounds.size(); ++round) {
      for (const auto& pair : rounds[round]) {
        for (const auto& [source, destination] : {std::pair{pair.low, pair.high}, std::pair{pair.high, pair.low}}) {
          for (const auto& judged : judged_) write_direction(judged, source, destination, round + 1, unusable_first);
        }
      }
    }
  }

  void write_direction(const Judged& judged, int source, int destination, std::size_t round, bool unusable_first) {
    const auto& matrix = *judged.matrix;
    const auto cell = matrix.index(source, destination);
    if (matrix.state[cell] == CellState::not_measured) return;
    const auto* failed = matrix.state[cell] == CellState::failed ? failure(matrix, source, destination) : nullptr;
    const bool unusable = failed != nullptr && !failed->cause.empty();
    if (unusable != unusable_first) return;
    const auto text = test_text(matrix);
    const auto outcome = [](double figure) { return std::isnan(figure) ? R"("failed")" : R"("completed")"; };
    const auto error = [&](double figure) {
      if (!std::isnan(figure)) return std::string("null");
      return R"({"message":)" + json_string(failed != nullptr ? failed->message : "the direction failed") + "}";
    };
    append(R"({}{{"cause":{},"destination":{},"error":{},"figure":{},"figures":)", first_pair_ ? "" : ",",
           unusable ? json_string(failed->cause) : "null", destination, error(matrix.first[cell]),
           number_or_null(matrix.first[cell]));
    append_figures(buffer_, matrix, matrix.first[cell]);
    append(R"(,"final_figure":{},"final_outcome":{},"outcome":{},"outlier":{},"retests":[)",
           number_or_null(matrix.last[cell]), outcome(matrix.last[cell]), outcome(matrix.first[cell]),
           judged.outlier[cell]);
    for (int attempt = 0; attempt < matrix.retests[cell]; ++attempt) {
      append(R"({}{{"error":{},"figure":{},"figures":)", attempt == 0 ? "" : ",", error(matrix.last[cell]),
             number_or_null(matrix.last[cell]));
      append_figures(buffer_, matrix, matrix.last[cell]);
      append(R"(,"outcome":{}}})", outcome(matrix.last[cell]));
    }
    append(R"(],"round":{},"source":{},"test":{},"unit":{}}})", round, source, json_string(matrix.test),
           json_string(text.unit));
    first_pair_ = false;
  }

  void write_summary(const Judged& judged) {
    const auto& matrix = *judged.matrix;
    const auto& a = judged.analysis;
    const auto text = test_text(matrix);
    const auto at = [&](std::size_t sample) {
      const auto cell = judged.cells[sample];
      return std::pair{static_cast<int>(cell / static_cast<std::size_t>(matrix.ranks)),
                       static_cast<int>(cell % static_cast<std::size_t>(matrix.ranks))};
    };
    append(
        R"({}:{{"failed":{},"figure":{},"max":{},"measured":{},"median":{},"first_pass_median":{},"min":{},"node_problems":[)",
        json_string(matrix.test), a.failed, json_string(text.figure), number_or_null(a.max), a.measured,
        number_or_null(a.median), number_or_null(judged.first_pass_median), number_or_null(a.min));
    for (std::size_t i = 0; i < a.node_problems.size(); ++i) {
      const auto& problem = a.node_problems[i];
      append(R"({}{{"host":{},"links":{},"rank":{}}})", i == 0 ? "" : ",", json_string(table_.host_of(problem.rank)),
             problem.links, problem.rank);
    }
    append(R"(],"outliers":[)");
    for (std::size_t i = 0; i < a.outliers.size(); ++i) {
      const auto [source, destination] = at(a.outliers[i].sample);
      const auto cell = judged.cells[a.outliers[i].sample];
      append(R"({}{{"destination":{},"figure":{},"first_figure":{},"ratio":{},"source":{}}})", i == 0 ? "" : ",",
             destination, matrix.last[cell], number_or_null(matrix.first[cell]), a.outliers[i].ratio, source);
    }
    append(R"(],"slowest":[)");
    for (std::size_t i = 0; i < a.slowest.size(); ++i) {
      const auto [source, destination] = at(a.slowest[i]);
      append(R"({}{{"destination":{},"figure":{},"source":{}}})", i == 0 ? "" : ",", destination,
             matrix.last[judged.cells[a.slowest[i]]], source);
    }
    append(R"(],"threshold":{},"unit":{}}})", judged.threshold, json_string(text.unit));
  }

  void write_tail(std::size_t rounds) {
    append(R"(,"peer_address":"","ranks":{},"role":"","rounds":{},"rounds_completed":{},"finished":true,)",
           table_.ranks, rounds, rounds);
    append(R"("rtt_us":null,"schema_version":4,"summary":{{)");
    for (std::size_t i = 0; i < judged_.size(); ++i) {
      if (i != 0) append(",");
      write_summary(judged_[i]);
    }
    std::string tests;
    for (const auto& matrix : table_.tests) tests += (tests.empty() ? "" : ",") + json_string(matrix.test);
    append(R"(}},"tests":[{}],"tool":"rdma_mesh")", tests);
  }

  std::FILE* out_;
  const MeshTable& table_;
  ReportSettings settings_;
  std::vector<Judged> judged_;
  fmt::memory_buffer buffer_;
  bool first_pair_ = true;
  std::map<std::pair<const TestMatrix*, std::pair<int, int>>, const mesh::Failure*> failure_of_;
};

// --- topology.conf --------------------------------------------------------------------------

// "node0001", "node0002", "node0004" -> "node[0001-0002,0004]": names that end in digits of one
// width after one prefix share brackets; anything else stays as it is.
std::string hostlist_of(const std::vector<std::string>& names) {
  std::map<std::pair<std::string, std::size_t>, std::vector<long>> groups;
  std::vector<std::string> plain;
  for (const auto& name : names) {
    const auto digits_at = name.find_last_not_of("0123456789") + 1;
    if (digits_at >= name.size()) {
      plain.push_back(name);
      continue;
    }
    groups[{name.substr(0, digits_at), name.size() - digits_at}].push_back(std::stol(name.substr(digits_at)));
  }
  std::string out;
  for (auto& [key, numbers] : groups) {
    std::sort(numbers.begin(), numbers.end());
    std::string ranges;
    for (std::size_t i = 0; i < numbers.size();) {
      std::size_t j = i;
      while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1) ++j;
      const int width = static_cast<int>(key.second);
      ranges += fmt::format("{}{:0{}}", ranges.empty() ? "" : ",", numbers[i], width);
      if (j > i) ranges += fmt::format("-{:0{}}", numbers[j], width);
      i = j + 1;
    }
    const bool single = numbers.size() == 1;
    out += fmt::format("{}{}{}{}{}", out.empty() ? "" : ",", key.first, single ? "" : "[", ranges, single ? "" : "]");
  }
  for (const auto& name : plain) out += (out.empty() ? "" : ",") + name;
  return out;
}

}  // namespace

std::string_view to_string(FaultKind kind) {
  for (const auto& [k, name] : fault_names) {
    if (k == kind) return name;
  }
  return "?";
}

std::optional<FaultKind> parse_fault(std::string_view text) {
  for (const auto& [kind, name] : fault_names) {
    if (name == text) return kind;
  }
  return std::nullopt;
}

std::string link_name(const MeshTable& table, int a, int b) {
  return fmt::format("{} <-> {}", table.host_of(std::min(a, b)), table.host_of(std::max(a, b)));
}

Synth make_mesh(const SynthSpec& spec) {
  check(spec);
  Synth synth;
  synth.table.ranks = spec.ranks;
  synth.table.nodes = make_nodes(spec);
  synth.topology = make_topology(synth.table.nodes, spec.hosts_per_leaf);
  const auto better = spec.test == "bw" ? mesh::Better::higher : mesh::Better::lower;
  synth.table.tests.emplace_back(spec.test, better, spec.ranks);
  Draw draw(spec.seed);
  auto [plant, expected] = plant_fault(spec, synth, draw);
  synth.expected = std::move(expected);
  synth.severity = spec.fault.kind == FaultKind::none ? 1.0
                   : spec.fault.severity > 0          ? spec.fault.severity
                                                      : draw.between(0.3, 0.6);
  if (plant.kind == FaultKind::failed_node) mark_failed_nodes(spec, plant, synth.table);
  fill_matrix(spec, plant, synth.severity, draw, synth.table);
  return synth;
}

void write_report(const MeshTable& table, std::FILE* out, const ReportSettings& settings) {
  ReportWriter(out, table, settings).write();
}

void write_topology_conf(const mesh::Topology& topology, std::FILE* out) {
  std::map<std::string, std::vector<std::string>> hosts_of;
  for (const auto& [host, leaf] : topology.leaf_of_host) hosts_of[leaf].push_back(host);
  std::map<std::string, std::vector<std::string>> children_of;
  for (const auto& [child, parent] : topology.parent_of_switch) children_of[parent].push_back(child);
  std::string text = "# Written by mesh_synth (tests/synth): Slurm's topology/tree form.\n";
  for (const auto& [leaf, hosts] : hosts_of) text += fmt::format("SwitchName={} Nodes={}\n", leaf, hostlist_of(hosts));
  for (const auto& [parent, children] : children_of) {
    text += fmt::format("SwitchName={} Switches={}\n", parent, hostlist_of(children));
  }
  if (std::fwrite(text.data(), 1, text.size(), out) != text.size()) {
    throw std::runtime_error("mesh_synth: writing the topology failed");
  }
}

}  // namespace rdmakit::synth
