#include "lib/topology/topology.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "lib/base/config_lines.hpp"
#include "lib/base/error.hpp"
#include "lib/topology/hostlist.hpp"

namespace rdmakit::mesh {
namespace {

std::string lowercase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

[[noreturn]] void refuse_at(std::string_view origin, std::size_t line, const std::string& why) {
  throw UsageError(fmt::format("{}:{}: {}", origin, line, why));
}

// One "SwitchName=... Nodes=... Switches=..." entry; keys Slurm has but a tree does not need
// (LinkSpeed=) are read past.
struct SwitchEntry {
  std::string name;
  std::vector<std::string> hosts;
  std::vector<std::string> children;
  std::size_t line = 0;
};

std::vector<std::string> expanded_value(std::string_view key, std::string_view value, std::string_view origin,
                                        std::size_t line) {
  try {
    return expand_hostlist(value);
  } catch (const HostlistError& error) {
    refuse_at(origin, line, fmt::format("{}={}: {}", key, value, error.what()));
  }
}

SwitchEntry switch_entry(const NumberedLine& line, std::string_view origin) {
  SwitchEntry entry;
  entry.line = line.number;
  bool named = false;
  for (const std::string_view word : words_in(line.text)) {
    const std::size_t equals = word.find('=');
    if (equals == std::string_view::npos) refuse_at(origin, line.number, fmt::format("'{}' is not KEY=VALUE", word));
    const std::string key = lowercase(word.substr(0, equals));
    const std::string_view value = word.substr(equals + 1);
    if (key == "switchname") {
      if (value.empty()) refuse_at(origin, line.number, "SwitchName= names no switch");
      entry.name = std::string(value);
      named = true;
    } else if (key == "nodes") {
      for (std::string& host : expanded_value(word.substr(0, equals), value, origin, line.number)) {
        entry.hosts.push_back(std::move(host));
      }
    } else if (key == "switches") {
      for (std::string& child : expanded_value(word.substr(0, equals), value, origin, line.number)) {
        entry.children.push_back(std::move(child));
      }
    }
  }
  if (!named) refuse_at(origin, line.number, "no SwitchName= on this line");
  if (entry.hosts.empty() && entry.children.empty()) {
    refuse_at(origin, line.number, fmt::format("switch {} has neither Nodes= nor Switches=", entry.name));
  }
  return entry;
}

// The tree as it is read, with the line each fact came from for the messages that follow.
class TreeReader {
 public:
  explicit TreeReader(std::string_view origin) : origin_(origin) { topology_.origin = std::string(origin); }

  void add(const SwitchEntry& entry) {
    const auto [defined, fresh] = defined_at_.emplace(entry.name, entry.line);
    if (!fresh) {
      refuse_at(origin_, entry.line,
                fmt::format("switch {} is defined twice (first on line {})", entry.name, defined->second));
    }
    for (const std::string& host : entry.hosts) add_host(host, entry);
    for (const std::string& child : entry.children) add_child(child, entry);
  }

  Topology finish() {
    // The first such line in the file, whatever the names' order.
    const std::pair<const std::string, std::pair<std::string, std::size_t>>* first_undefined = nullptr;
    for (const auto& named : named_at_) {
      const bool earlier = first_undefined == nullptr || named.second.second < first_undefined->second.second;
      if (!defined_at_.contains(named.first) && earlier) first_undefined = &named;
    }
    if (first_undefined != nullptr) {
      const auto& [child, parent_and_line] = *first_undefined;
      refuse_at(origin_, parent_and_line.second,
                fmt::format("switch {} names {} in Switches=, which is never defined", parent_and_line.first, child));
    }
    refuse_loops();
    return std::move(topology_);
  }

 private:
  void add_host(const std::string& host, const SwitchEntry& entry) {
    const auto [leaf, fresh] = topology_.leaf_of_host.emplace(host, entry.name);
    if (fresh) {
      host_line_[host] = entry.line;
    } else if (leaf->second != entry.name) {
      refuse_at(origin_, entry.line,
                fmt::format("host {} is under {} (line {}) and {}", host, leaf->second, host_line_[host], entry.name));
    }
  }

  void add_child(const std::string& child, const SwitchEntry& entry) {
    const auto [parent, fresh] = topology_.parent_of_switch.emplace(child, entry.name);
    if (fresh) {
      named_at_[child] = {entry.name, entry.line};
    } else if (parent->second != entry.name) {
      refuse_at(origin_, entry.line,
                fmt::format("switch {} is under {} (line {}) and {}", child, parent->second, named_at_[child].second,
                            entry.name));
    }
  }

  // A switch above itself: reported on the line that closes the loop (the latest of its links),
  // since that is the one an operator most likely just edited.
  void refuse_loops() {
    const std::size_t most_steps = topology_.parent_of_switch.size();
    for (const auto& [start, unused] : topology_.parent_of_switch) {
      std::vector<std::string> upward{start};
      for (std::size_t step = 0; step <= most_steps; ++step) {
        const auto parent = topology_.parent_of_switch.find(upward.back());
        if (parent == topology_.parent_of_switch.end()) break;
        if (parent->second == start) refuse_loop(upward);
        upward.push_back(parent->second);
      }
    }
  }

  [[noreturn]] void refuse_loop(const std::vector<std::string>& ring) {
    // ring[i]'s parent is ring[i + 1], the last one's is ring[0]; the latest link names its top.
    std::size_t latest = 0;
    for (std::size_t i = 0; i < ring.size(); ++i) {
      if (named_at_[ring[i]].second > named_at_[ring[latest]].second) latest = i;
    }
    // Written downwards from the switch on that line, as the file reads: "a > b > a".
    const std::string& top = named_at_[ring[latest]].first;
    std::string chain = top;
    for (std::size_t i = 0; i < ring.size(); ++i) {
      chain += " > " + ring[(latest + ring.size() - i) % ring.size()];
    }
    refuse_at(origin_, named_at_[ring[latest]].second,
              fmt::format("switches in a loop: {} is above itself ({})", top, chain));
  }

  std::string_view origin_;
  Topology topology_;
  std::map<std::string, std::size_t> defined_at_;
  std::map<std::string, std::size_t> host_line_;
  std::map<std::string, std::pair<std::string, std::size_t>> named_at_;  // child -> its parent, that line
};

// The switch above `name`, nullptr at a root.
const std::string* parent_switch(const Topology& topology, const std::string& name) {
  const auto parent = topology.parent_of_switch.find(name);
  return parent == topology.parent_of_switch.end() ? nullptr : &parent->second;
}

// Switches above `leaf`; -1 when a hand-built topology loops.
int switch_depth(const Topology& topology, const std::string& leaf) {
  int depth = 0;
  for (const std::string* at = parent_switch(topology, leaf); at != nullptr; at = parent_switch(topology, *at)) {
    if (static_cast<std::size_t>(++depth) > topology.parent_of_switch.size()) return -1;
  }
  return depth;
}

bool sets_switch_name(std::string_view text) {
  for (const NumberedLine& line : entries_of(text, true)) {
    for (const std::string_view word : words_in(line.text)) {
      if (lowercase(word.substr(0, 11)) == "switchname=") return true;
    }
  }
  return false;
}

}  // namespace

std::string Topology::leaf_of(const std::string& host) const {
  const auto leaf = leaf_of_host.find(host);
  return leaf == leaf_of_host.end() ? std::string() : leaf->second;
}

std::vector<std::string> Topology::path_of(const std::string& host) const {
  std::vector<std::string> path;
  const auto leaf = leaf_of_host.find(host);
  if (leaf == leaf_of_host.end()) return path;
  path.push_back(leaf->second);
  for (const std::string* at = parent_switch(*this, leaf->second);
       at != nullptr && path.size() <= parent_of_switch.size(); at = parent_switch(*this, *at)) {
    path.push_back(*at);
  }
  return path;
}

int Topology::switch_hops(const std::string& a, const std::string& b) const {
  const auto leaf_a = leaf_of_host.find(a);
  const auto leaf_b = leaf_of_host.find(b);
  if (leaf_a == leaf_of_host.end() || leaf_b == leaf_of_host.end()) return -1;
  if (leaf_a->second == leaf_b->second) return 1;
  int depth_a = switch_depth(*this, leaf_a->second);
  int depth_b = switch_depth(*this, leaf_b->second);
  if (depth_a < 0 || depth_b < 0) return -1;
  // Climb the deeper side to the other's level, then both together until they meet; every
  // step up adds the switch stepped to. Pointers into the maps: no copies on this hot path.
  const std::string* up_a = &leaf_a->second;
  const std::string* up_b = &leaf_b->second;
  int hops = 1;
  for (; depth_a > depth_b; --depth_a, ++hops) up_a = parent_switch(*this, *up_a);
  for (; depth_b > depth_a; --depth_b, ++hops) up_b = parent_switch(*this, *up_b);
  while (*up_a != *up_b) {
    up_a = parent_switch(*this, *up_a);
    up_b = parent_switch(*this, *up_b);
    if (up_a == nullptr || up_b == nullptr) return -1;
    hops += 2;
  }
  return hops;
}

std::vector<std::string> Topology::hosts_under(const std::string& leaf) const {
  std::vector<std::string> hosts;
  for (const auto& [host, its_leaf] : leaf_of_host) {
    if (its_leaf == leaf) hosts.push_back(host);
  }
  return hosts;
}

Topology parse_slurm_topology(std::string_view text, std::string_view origin) {
  TreeReader reader(origin);
  for (const NumberedLine& line : entries_of(text, true)) reader.add(switch_entry(line, origin));
  return reader.finish();
}

Topology parse_host_switch(std::string_view text, std::string_view origin) {
  Topology topology;
  topology.origin = std::string(origin);
  std::map<std::string, std::size_t> host_line;
  for (const NumberedLine& line : entries_of(text, false)) {
    const std::vector<std::string_view> words = words_in(line.text);
    if (words.size() != 2) {
      refuse_at(origin, line.number, fmt::format("expected 'HOST SWITCH', found {} words", words.size()));
    }
    const auto [leaf, fresh] = topology.leaf_of_host.emplace(words[0], words[1]);
    if (fresh) {
      host_line[leaf->first] = line.number;
    } else if (leaf->second != words[1]) {
      refuse_at(origin, line.number,
                fmt::format("host {} is under {} (line {}) and {}", words[0], leaf->second, host_line[leaf->first],
                            words[1]));
    }
  }
  return topology;
}

Topology read_topology(const std::string& path) {
  const std::string text = read_config_text(path);
  return sets_switch_name(text) ? parse_slurm_topology(text, path) : parse_host_switch(text, path);
}

std::optional<std::string> slurm_topology_file(const std::function<const char*(const char*)>& getenv_fn) {
  const char* job = getenv_fn("SLURM_JOB_ID");
  if (job == nullptr || *job == '\0') return std::nullopt;
  const char* conf = getenv_fn("SLURM_CONF");
  std::filesystem::path folder = conf != nullptr && *conf != '\0' ? std::filesystem::path(conf).parent_path()
                                                                  : std::filesystem::path("/etc/slurm");
  if (folder.empty()) folder = ".";
  const std::filesystem::path file = folder / "topology.conf";
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error) || ::access(file.c_str(), R_OK) != 0) return std::nullopt;
  return file.string();
}

}  // namespace rdmakit::mesh
