#pragma once
// The bind diagnoser: a model of what the host looks like to the kernel and to user space,
// the record of a real bind/resolve attempt, and the pure function that turns both into a
// verdict. Nothing here touches a device: the live facts come from lib/diag/host_probe.hpp, the
// test facts from fixture trees (lib/diag/sysfs.hpp reads any root).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"
#include "lib/base/error.hpp"
#include "lib/base/report.hpp"
#include "lib/diag/causes.hpp"
#include "lib/rdma/gid.hpp"

namespace rdmakit::diag {

struct KernelPort {
  int number = 0;
  int state_code = 0;  // 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER
  std::string state;
  int phys_state_code = 0;  // 5 LinkUp
  std::string phys_state;
  std::string link_layer;  // "Ethernet" (RoCE) or "InfiniBand"
  std::string rate;
  std::vector<GidEntry> gids;
  // InfiniBand only: the port's LID and its subnet manager's, both 0 until an SM has swept the
  // subnet; -1 unread. And the P_Key table the SM gave the port (its non-zero entries).
  int lid = -1;
  int sm_lid = -1;
  std::vector<std::uint16_t> pkeys;
};

struct KernelDevice {
  std::string name;
  std::optional<int> index;  // from RDMA netlink; what ibv_get_device_index() must agree with
  std::string node_guid;     // "2451:1eff:fe78:02bb"
  std::string node_type;
  std::string driver;         // kernel driver, "rdma_rxe" for soft-RoCE
  std::string parent_netdev;  // soft-RoCE/iWARP: the netdev the device was created on
  std::string bus_device;     // a NIC's PCI function ("0000:3b:00.0"), "" for a software device
  std::string uverbs;         // "uverbs0", "" when no verbs char device exists
  std::vector<KernelPort> ports;
};

struct Netdev {
  std::string name;
  int ifindex = 0;
  std::string type;  // "ether", "infiniband", "loopback" or the ARPHRD number
  std::string operstate;
  bool up = false;  // IFF_UP
  int mtu = 0;
  std::vector<std::string> addresses;  // "10.55.0.1/24"
  std::optional<int> vlan;             // the VLAN id of a VLAN netdev (/proc/net/vlan/config)
  std::string ipoib_gid;               // an IPoIB netdev: the GID of its port, from its hardware address
  std::string bus_device;              // the PCI function it belongs to ("0000:3b:00.0"), "" for a virtual one
  int pkey = -1;                       // an IPoIB netdev's P_Key (0xffff for ib0, 0x8001 for ib0.8001), else -1
};

struct UserPort {
  int number = 0;
  std::string state;
  int active_mtu = 0;
  // Entries the port's GID table has room for (ibv_port_attr.gid_tbl_len), 0 when unknown:
  // sysfs lists every slot, a fixture only the populated ones.
  int gid_table_len = 0;
};

struct UserDevice {
  std::string name;
  std::string node_guid;
  std::optional<int> index;  // ibv_get_device_index(); unknown on old kernels
  int open_errno = 0;        // ibv_open_device() failure, 0 when it opened
  std::vector<UserPort> ports;
};

struct DeviceNode {
  std::string path;
  bool exists = false;
  std::string mode;      // "crw-rw-rw-"
  int access_errno = 0;  // access(R_OK|W_OK) failure for this process
};

struct Memlock {
  std::optional<std::uint64_t> soft_bytes;  // nullopt = unlimited
  std::optional<std::uint64_t> hard_bytes;
  bool cap_ipc_lock = false;  // the limit does not apply to us
};

// The RDMA modules modprobe could load into the running kernel (modules.dep and
// modules.builtin under /lib/modules/RELEASE): whether "modprobe rdma_rxe" can work here.
struct KernelModules {
  std::string release;                 // uname -r
  bool known = false;                  // looked for (a report or fixture from before may not say)
  std::vector<std::string> available;  // of the RDMA modules diag-bind names, those present
  bool has(std::string_view module) const;
};

struct Inventory {
  KernelModules kernel_modules;
  bool rdma_core_present = false;  // the kernel's RDMA core is loaded (class/infiniband exists)
  bool kernel_indices_known = false;
  std::vector<KernelDevice> kernel_devices;
  int userspace_list_errno = 0;  // ibv_get_device_list() failed
  std::vector<UserDevice> user_devices;
  std::string provider_dir;                   // where libibverbs looks for provider libraries
  std::vector<std::string> provider_drivers;  // drivers named in libibverbs.d/*.driver whose library exists
  DeviceNode rdma_cm;
  std::vector<DeviceNode> uverbs_nodes;
  std::vector<std::string> modules;  // RDMA-related kernel modules that are loaded
  Memlock memlock;
  std::vector<Netdev> netdevs;
};

// One library call of the real attempt; errnum 0 means it succeeded.
struct Step {
  std::string call;
  std::string subject;
  int errnum = 0;
  std::string detail;  // what the success yielded ("rxe0 port 1") or extra failure context
  bool ok() const { return errnum == 0; }
};

struct Attempt {
  std::vector<Step> steps;
  std::string device;  // device the cm_id was attached to, "" when none
  int port = 0;
  std::string route_source;   // for a remote address: the source address the kernel routes from
  std::string route_netdev;   // and the netdev its route leaves by ("" when unknown)
  std::string route_gateway;  // and the gateway it goes through ("" when on-link or unknown)
  const Step* find(std::string_view call) const;
};

// What to diagnose. `host` is numeric once parsed; empty means "no address, inventory only".
struct Target {
  std::string host;
  int family = 0;  // AF_INET / AF_INET6, 0 when host is empty
  std::uint16_t port = 0;
  std::string port_space = "tcp";
  bool wildcard = false;
  bool loopback = false;
};

// Parses a numeric address (IPv4, IPv6, optional %scope); throws UsageError otherwise.
Target make_target(const std::string& numeric_host, std::uint16_t port, const std::string& port_space);

// How one area of the host looks: right, doubtful, broken, or only described.
enum class CheckStatus : std::uint8_t { ok, warn, fail, info };
// "ok", "warn", "fail", "info": the report's names (doc/schema/diag-bind.schema.json).
std::string_view to_string(CheckStatus status);

// Inventory line: one area of the host and whether it looks right.
struct Check {
  std::string area;
  CheckStatus status = CheckStatus::info;
  std::string text;
};
std::vector<Check> assess(const Inventory& inventory);

struct Verdict {
  BindCause cause = "unknown";                 // stable code, see man/diag-bind.1
  ExitCode exit_code = ExitCode::unexplained;  // ok: usable, cause_found: cause named
  std::string summary;
  // A command that fixes it on this host, names filled in; "" where none does, or where
  // the operator must choose (which netdev, which gateway, which host owns the address).
  std::string fix;
  // What to do when `fix` alone is not the answer: a check to run, a choice to make.
  std::string next;
  std::vector<std::string> details;
  std::vector<std::string> warnings;
};

// A next step that runs diag-bind names it as `siblings` has it.
Verdict diagnose(const Target& target, const Inventory& inventory, const Attempt& attempt,
                 const SiblingNames& siblings);

// Helpers shared with the live probe and the tests.
std::string gid_text(std::string_view sysfs_gid);  // "0000:...:ffff:0a37:0001" -> "::ffff:10.55.0.1"
const Netdev* netdev_owning(const Inventory& inventory, const std::string& numeric_host);
bool address_is_local(const Inventory& inventory, const std::string& numeric_host);

// Applies the facts sysfs cannot show (netlink indices, the user-space view, device nodes,
// addresses, VLAN ids, memlock, the attempt) from a JSON object, as tests/fixtures/diag/capture.sh
// writes it, and returns its "address" ("" when none). A document that does not fit - not an
// object, a member of the wrong JSON type (a string where a number belongs, an array for an
// object), a fractional number - throws UsageError naming the member; `inventory` and
// `attempt` may then hold part of it.
std::string apply_facts(const nlohmann::json& facts, Inventory& inventory, Attempt& attempt);

// A captured host, as `diag-bind --replay DIR` reads it: DIR/sys, its sysfs tree
// (lib/diag/sysfs.hpp), with DIR/facts.json applied over it.
struct Replay {
  Inventory inventory;
  Attempt attempt;
  std::string address;  // the address the facts were captured for, "" when none
};
// Throws UsageError, naming DIR and facts.json, when the file cannot be read, is not JSON or
// does not fit apply_facts, which is then named too.
Replay load_replay(const std::filesystem::path& dir);

nlohmann::json to_json(const Inventory& inventory);
nlohmann::json to_json(const Attempt& attempt);
nlohmann::json to_json(const Verdict& verdict);
nlohmann::json to_json(const Check& check);

std::string render_text(const Target& target, const Inventory& inventory, const Attempt& attempt,
                        const Verdict& verdict);

// Everything diag-bind knows about one address: the host, the attempt and the verdict.
struct Diagnosis {
  Target target;
  Inventory inventory;
  Attempt attempt;
  Verdict verdict;
};

nlohmann::json to_json(const Diagnosis& diagnosis);
// Each described struct of the host model and its schema definition
// (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> diag_bind_json_shapes();

// diag-bind's result in its report: the diagnosis's keys beside the common ones, its text,
// and the verdict's cause as the report's outcome.
class DiagnosisResult final : public ReportSection {
 public:
  explicit DiagnosisResult(Diagnosis diagnosis) : diagnosis_(std::move(diagnosis)) {}
  void add_to(nlohmann::json& document) const override;
  std::string text() const override;
  std::optional<std::string> outcome() const override { return std::string(diagnosis_.verdict.cause.name()); }

 private:
  Diagnosis diagnosis_;
};
// The verdict alone, for other tools' --diagnose.
std::string render_verdict(const Verdict& verdict);

}  // namespace rdmakit::diag
