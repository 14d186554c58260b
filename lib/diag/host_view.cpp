#include "lib/diag/host_view.hpp"

#include <linux/capability.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#ifdef RDMAKIT_HAVE_NFTABLES
#include <nftables/libnftables.h>
#endif

#include "lib/base/host_name.hpp"
#include "lib/base/process_limits.hpp"
#include "lib/diag/cm_listeners.hpp"
#include "lib/diag/host_probe.hpp"
#include "lib/diag/host_view_read.hpp"

namespace rdmakit::diag {

Firewall read_firewall() {
  Firewall firewall;
#ifdef RDMAKIT_HAVE_NFTABLES
  // Asked without it, libnftables also writes its complaint to our stderr.
  if (!has_capability(CAP_NET_ADMIN)) {
    firewall.error = "not readable: Operation not permitted (reading the ruleset needs CAP_NET_ADMIN)";
    return firewall;
  }
  const std::unique_ptr<nft_ctx, decltype(&nft_ctx_free)> context(nft_ctx_new(NFT_CTX_DEFAULT), &nft_ctx_free);
  if (!context || nft_ctx_buffer_output(context.get()) != 0 || nft_ctx_buffer_error(context.get()) != 0) {
    firewall.error = "nftables not available: no libnftables context";
    return firewall;
  }
  nft_ctx_output_set_flags(context.get(), NFT_CTX_OUTPUT_JSON | NFT_CTX_OUTPUT_HANDLE);
  if (nft_run_cmd_from_buffer(context.get(), "list ruleset") != 0) {
    // "netlink: Error: cache initialization failed: Operation not permitted": its last part.
    std::string error = nft_ctx_get_error_buffer(context.get());
    error = error.substr(0, error.find('\n'));
    firewall.error =
        "not readable: " + error.substr(error.rfind(": ") == std::string::npos ? 0 : error.rfind(": ") + 2);
    return firewall;
  }
  const auto document = nlohmann::json::parse(nft_ctx_get_output_buffer(context.get()), nullptr, false);
  if (document.is_discarded()) {
    firewall.error = "not readable: nft's answer is not JSON";
    return firewall;
  }
  return firewall_from_nft_json(document);
#else
  firewall.error = "built without libnftables";
  return firewall;
#endif
}

HostView read_host_view(const HostViewOptions& options) {
  ProbeOptions probe;
  probe.sysfs_root = options.sysfs_root;
  auto view = view_from(collect_inventory(probe));
  view.host_name = host_name();
  read_net_files(options.procfs_root, options.sysfs_root, options.configfs_root, view);
  if (options.read_firewall) {
    view.firewall = read_firewall();
  } else {
    view.firewall.error = "not read";
  }
  view.listeners_known = read_cm_listeners(view);
  return view;
}

}  // namespace rdmakit::diag
