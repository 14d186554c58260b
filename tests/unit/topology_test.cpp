#include "lib/topology/topology.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "lib/base/error.hpp"
#include "lib/topology/hostlist.hpp"
#include "tests/unit/file_tree.hpp"

namespace rdmakit::mesh {
namespace {

using HostNames = std::vector<std::string>;

TEST(Hostlist, PlainNamesAndLists) {
  EXPECT_EQ(expand_hostlist("node1"), HostNames({"node1"}));
  EXPECT_EQ(expand_hostlist(" gpu1 , cpu2,cpu3 "), HostNames({"gpu1", "cpu2", "cpu3"}));
  EXPECT_TRUE(expand_hostlist("").empty());
  EXPECT_TRUE(expand_hostlist("  ").empty());
}

TEST(Hostlist, RangesKeepTheirPadding) {
  EXPECT_EQ(expand_hostlist("node[08-10]"), HostNames({"node08", "node09", "node10"}));
  EXPECT_EQ(expand_hostlist("node[8-10]"), HostNames({"node8", "node9", "node10"}));
  EXPECT_EQ(expand_hostlist("n[0001-0002]"), HostNames({"n0001", "n0002"}));
  EXPECT_EQ(expand_hostlist("node[01-03,20]"), HostNames({"node01", "node02", "node03", "node20"}));
  EXPECT_EQ(expand_hostlist("node[5]-ib"), HostNames({"node5-ib"}));
  EXPECT_EQ(expand_hostlist("node[1-2]-ib,x"), HostNames({"node1-ib", "node2-ib", "x"}));
}

TEST(Hostlist, BracketGroupsMultiplyOut) {
  EXPECT_EQ(expand_hostlist("r[1-2]n[01-02]"), HostNames({"r1n01", "r1n02", "r2n01", "r2n02"}));
  EXPECT_EQ(expand_hostlist("gpu1,r[1,3]n[7-8],cpu[3-4]"),
            HostNames({"gpu1", "r1n7", "r1n8", "r3n7", "r3n8", "cpu3", "cpu4"}));
  EXPECT_EQ(expand_hostlist("node[0001-1024]").size(), 1024U);
}

TEST(Hostlist, BadExpressionsSayWhatAndWhere) {
  const std::map<std::string, std::string> bad = {
      {"node[01-0", "unclosed '[' in 'node[01-0'"},
      {"node[1-[2]]", "nested '['"},
      {"node1]", "']' without '['"},
      {"a,,b", "an empty item"},
      {"a,", "an empty item"},
      {"node[]", "empty '[]'"},
      {"node[1,]", "an empty range"},
      {"node[3-1]", "range 3-1 ends below its start"},
      {"node[a-b]", "'a' is not a number"},
      {"node[1-]", "a range bound is empty"},
      {"no de", "a space inside a host name"},
      {"node[1-1000001]", "more than 1000000 hosts"},
      {"r[1-1000]n[1-1001]", "more than 1000000 hosts"},
      {"node[1-999999999999999999999]", "is too long"},
  };
  for (const auto& [expression, message] : bad) {
    SCOPED_TRACE(expression);
    try {
      expand_hostlist(expression);
      ADD_FAILURE() << "no error";
    } catch (const HostlistError& error) {
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
  }
}

// The message of the UsageError that parsing `text` throws, "" when it parses.
template <typename Parse>
std::string parse_refusal(Parse parse, const std::string& text) {
  try {
    parse(text, "topo.conf");
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

std::string slurm_refusal(const std::string& text) {
  return parse_refusal(parse_slurm_topology, text);
}

TEST(SlurmTopology, ThreeLevelsWithContinuationCommentsAndMixedCase) {
  const Topology topology = parse_slurm_topology(
      "# a comment line\n"
      "\n"
      "SwitchName=core Switches=spine[1-2]   # the top\n"
      "switchname=spine1 SWITCHES=leaf1,leaf2 LinkSpeed=100\n"
      "SwitchName=spine2 \\\n"
      "   Switches=leaf3\n"
      "SwitchName=leaf1 Nodes=node[01-02]\n"
      "SwitchName=leaf2 nodes=node[03-04] linkspeed=200\n"
      "SwitchName=leaf3 Nodes=node05,\\\n"
      "node06\n",
      "topo.conf");
  EXPECT_EQ(topology.origin, "topo.conf");
  EXPECT_EQ(topology.leaf_of_host.size(), 6U);
  EXPECT_EQ(topology.leaf_of("node06"), "leaf3");
  EXPECT_EQ(topology.leaf_of("node03"), "leaf2");
  EXPECT_EQ(topology.leaf_of("nobody"), "");
  EXPECT_EQ(topology.path_of("node01"), HostNames({"leaf1", "spine1", "core"}));
  EXPECT_EQ(topology.path_of("node05"), HostNames({"leaf3", "spine2", "core"}));
  EXPECT_TRUE(topology.path_of("nobody").empty());
  EXPECT_EQ(topology.parent_of_switch.count("core"), 0U);

  EXPECT_EQ(topology.switch_hops("node01", "node02"), 1);
  EXPECT_EQ(topology.switch_hops("node01", "node03"), 3);
  EXPECT_EQ(topology.switch_hops("node01", "node05"), 5);
  EXPECT_EQ(topology.switch_hops("node01", "nobody"), -1);
  EXPECT_EQ(topology.switch_hops("nobody", "node01"), -1);
  EXPECT_EQ(topology.hosts_under("leaf2"), HostNames({"node03", "node04"}));
  EXPECT_TRUE(topology.hosts_under("spine1").empty());
}

TEST(SlurmTopology, HopsAcrossUnevenDepthsAndSeparateTrees) {
  const Topology topology = parse_slurm_topology(
      "SwitchName=core Switches=spine,short\n"
      "SwitchName=spine Switches=deep\n"
      "SwitchName=deep Nodes=a\n"
      "SwitchName=short Nodes=b\n"
      "SwitchName=island Nodes=c\n",
      "topo.conf");
  EXPECT_EQ(topology.switch_hops("a", "b"), 4);  // deep, spine, core, short
  EXPECT_EQ(topology.switch_hops("b", "a"), 4);
  EXPECT_EQ(topology.switch_hops("a", "c"), -1);
  EXPECT_EQ(topology.path_of("c"), HostNames({"island"}));
}

TEST(SlurmTopology, EachBadLineNamesItsLine) {
  EXPECT_EQ(slurm_refusal("SwitchName=a Nodes=x\n\nNodes=y\n"), "topo.conf:3: no SwitchName= on this line");
  EXPECT_EQ(slurm_refusal("# c\nSwitchName=a LinkSpeed=1\n"), "topo.conf:2: switch a has neither Nodes= nor Switches=");
  EXPECT_EQ(slurm_refusal("SwitchName=a Nodes=x[1-\n"), "topo.conf:1: Nodes=x[1-: unclosed '[' in 'x[1-'");
  EXPECT_EQ(slurm_refusal("SwitchName=a Nodes=x\nSwitchName=a Nodes=y\n"),
            "topo.conf:2: switch a is defined twice (first on line 1)");
  EXPECT_EQ(slurm_refusal("SwitchName=a Nodes=n[1-3]\nSwitchName=b \\\n Nodes=n3\n"),
            "topo.conf:2: host n3 is under a (line 1) and b");
  EXPECT_EQ(slurm_refusal("SwitchName=top Switches=a,ghost\nSwitchName=a Nodes=x\n"),
            "topo.conf:1: switch top names ghost in Switches=, which is never defined");
  EXPECT_EQ(slurm_refusal("SwitchName=spine1 Switches=leaf1\nSwitchName=leaf1 Switches=spine1\n"),
            "topo.conf:2: switches in a loop: leaf1 is above itself (leaf1 > spine1 > leaf1)");
  EXPECT_EQ(slurm_refusal("SwitchName=a Nodes=x\nSwitchName=b Switches=b\n"),
            "topo.conf:2: switches in a loop: b is above itself (b > b)");
  EXPECT_EQ(slurm_refusal("SwitchName=s1 Switches=a\nSwitchName=s2 Switches=a\nSwitchName=a Nodes=x\n"),
            "topo.conf:2: switch a is under s1 (line 1) and s2");
  EXPECT_EQ(slurm_refusal("SwitchName=a Nodes\n"), "topo.conf:1: 'Nodes' is not KEY=VALUE");
  EXPECT_EQ(slurm_refusal("SwitchName= Nodes=x\n"), "topo.conf:1: SwitchName= names no switch");
}

TEST(SlurmTopology, ALongerLoopIsReportedWhereItCloses) {
  EXPECT_EQ(slurm_refusal("SwitchName=a Switches=b\n"
                          "SwitchName=c Switches=a\n"
                          "# the edit that closed it\n"
                          "SwitchName=b Switches=c\n"),
            "topo.conf:4: switches in a loop: b is above itself (b > c > a > b)");
}

TEST(HostSwitch, TwoColumns) {
  const Topology topology = parse_host_switch(
      "# host switch\n"
      "node1 leaf1\n"
      "\n"
      "node2\tleaf1   # trailing comment\n"
      "node3 leaf2\n"
      "node1 leaf1\n",
      "hosts.txt");
  EXPECT_EQ(topology.leaf_of_host.size(), 3U);
  EXPECT_TRUE(topology.parent_of_switch.empty());
  EXPECT_EQ(topology.switch_hops("node1", "node2"), 1);
  EXPECT_EQ(topology.switch_hops("node1", "node3"), -1);
  EXPECT_EQ(topology.path_of("node3"), HostNames({"leaf2"}));
  EXPECT_EQ(topology.hosts_under("leaf1"), HostNames({"node1", "node2"}));
}

TEST(HostSwitch, BadLinesNameTheirLine) {
  EXPECT_EQ(parse_refusal(parse_host_switch, "a leaf1\nb\n"), "topo.conf:2: expected 'HOST SWITCH', found 1 words");
  EXPECT_EQ(parse_refusal(parse_host_switch, "a leaf1 x\n"), "topo.conf:1: expected 'HOST SWITCH', found 3 words");
  EXPECT_EQ(parse_refusal(parse_host_switch, "a leaf1\n# c\na leaf2\n"),
            "topo.conf:3: host a is under leaf1 (line 1) and leaf2");
}

std::string topology_fixture(const std::string& name) {
  return std::string(RDMAKIT_SOURCE_DIR) + "/tests/fixtures/topology/" + name;
}

TEST(ReadTopology, DetectsTheFormAndReadsTheFixtures) {
  const Topology tree = read_topology(topology_fixture("tree64.conf"));
  EXPECT_EQ(tree.leaf_of_host.size(), 1024U);
  EXPECT_EQ(tree.origin, topology_fixture("tree64.conf"));
  EXPECT_EQ(tree.path_of("node0017"), HostNames({"leaf02", "spine1", "core"}));
  EXPECT_EQ(tree.hosts_under("leaf64").size(), 16U);
  EXPECT_EQ(tree.switch_hops("node0001", "node0016"), 1);
  EXPECT_EQ(tree.switch_hops("node0001", "node0017"), 3);
  EXPECT_EQ(tree.switch_hops("node0001", "node1024"), 5);

  const Topology small = read_topology(topology_fixture("small.conf"));
  const Topology columns = read_topology(topology_fixture("hosts.txt"));
  EXPECT_EQ(small.leaf_of_host, columns.leaf_of_host);
  EXPECT_EQ(small.parent_of_switch.size(), 3U);
  EXPECT_TRUE(columns.parent_of_switch.empty());
}

TEST(ReadTopology, LowerCaseSwitchNameMeansTopologyConf) {
  const auto root = fixture::fresh_tree("topology-form-" + std::to_string(::getpid()));
  fixture::write_file(root / "lower.conf", "# SwitchName=x in a comment does not count\nswitchname=l Nodes=h[1-2]\n");
  EXPECT_EQ(read_topology((root / "lower.conf").string()).leaf_of("h2"), "l");
  fixture::write_file(root / "columns.txt", "# SwitchName=x\nh1 l\n");
  EXPECT_EQ(read_topology((root / "columns.txt").string()).leaf_of("h1"), "l");
}

TEST(ReadTopology, UnreadableFilesAreUsageErrors) {
  const auto root = fixture::fresh_tree("topology-unreadable-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root);
  EXPECT_THROW(read_topology((root / "missing.conf").string()), UsageError);
  try {
    read_topology(root.string());
    ADD_FAILURE() << "a folder was read";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find(root.string() + ": cannot read it"), std::string::npos) << error.what();
  }
}

TEST(SlurmTopologyFile, BesideSlurmConfUnderSlurmOnly) {
  const auto root = fixture::fresh_tree("topology-slurm-" + std::to_string(::getpid()));
  std::map<std::string, std::string> environment;
  const auto getenv_fn = [&environment](const char* name) -> const char* {
    const auto value = environment.find(name);
    return value == environment.end() ? nullptr : value->second.c_str();
  };
  environment["SLURM_CONF"] = (root / "slurm.conf").string();
  fixture::write_file(root / "topology.conf", "SwitchName=l Nodes=h1\n");
  EXPECT_EQ(slurm_topology_file(getenv_fn), std::nullopt) << "not under Slurm";

  environment["SLURM_JOB_ID"] = "";
  EXPECT_EQ(slurm_topology_file(getenv_fn), std::nullopt) << "an empty job id";

  environment["SLURM_JOB_ID"] = "42";
  EXPECT_EQ(slurm_topology_file(getenv_fn), (root / "topology.conf").string());

  environment["SLURM_CONF"] = (root / "elsewhere" / "slurm.conf").string();
  EXPECT_EQ(slurm_topology_file(getenv_fn), std::nullopt) << "no topology.conf beside that slurm.conf";
  std::filesystem::create_directories(root / "elsewhere" / "topology.conf");
  EXPECT_EQ(slurm_topology_file(getenv_fn), std::nullopt) << "a folder is not a topology.conf";

  environment.erase("SLURM_CONF");
  const bool etc_has_one = ::access("/etc/slurm/topology.conf", R_OK) == 0;
  EXPECT_EQ(slurm_topology_file(getenv_fn).has_value(), etc_has_one);
  if (etc_has_one) {
    EXPECT_EQ(slurm_topology_file(getenv_fn), "/etc/slurm/topology.conf");
  }
}

}  // namespace
}  // namespace rdmakit::mesh
