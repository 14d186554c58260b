# rdma_mesh cases: the ranks started by mpirun in one guest, all on its rxe device (or one
# given an address without RDMA), the schedule and the report checked from the JSON.

# Open MPI as root in the guest; TCP between the ranks instead of its shared-memory
# transport, whose segment files in the guest's fresh /tmp have failed to unlink there;
# more ranks than the guest's two CPUs, not bound to any.
# Under ASan, LeakSanitizer is off for the ranks: Open MPI's own allocations, made in the
# components it loads and unloads, are reported as leaks with no frame it could suppress by,
# and the check at exit in the guest outlasted the case. A small quarantine: with the
# default 256 MiB, four sanitized ranks ran the 2 GiB guest out of memory (490 MiB each).
# ASan's other checks stay on.
MESH_MPIRUN=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp
  "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:quarantine_size_mb=8"
  mpirun --oversubscribe --bind-to none)

require_mpirun() {
  command -v mpirun > /dev/null || { echo "SKIP: mpirun missing (Debian package openmpi-bin)"; exit 77; }
  [[ -x $OURS_RDMA_MESH ]] || { echo "SKIP: rdma_mesh not built (no MPI at configure time)"; exit 77; }
}

# A block of ports for RANKS ranks: rank r listens on $PORT + r.
mesh_ports() {
  next_port
  port_counter=$((port_counter + $1))
}

# Outliers are not this case's subject: the guest's CPUs are shared by every rank, so its
# figures vary by more than any threshold a cluster would use.
NO_OUTLIERS=(--threshold 0.01 --lat-threshold 1000)

# expect_full_mesh FILE RANKS TESTS: every ordered pair of RANKS ranks measured once per
# test in TESTS (a jq array), each with a positive figure, and every unordered pair in a
# round of its own kind: no rank twice in one round.
expect_full_mesh() {
  local file=$1 ranks=$2 tests=$3
  expect_jq ".ranks == $ranks and .tests == $tests and (.nodes | length) == $ranks
    and all(.nodes[]; .usable and .address != \"\" and .device != \"\")" "$file"
  # Each rank's GID is its address's own entry, RoCE v2 (rxe makes no other): one fabric.
  expect_jq 'all(.nodes[]; .gid_type == "RoCE v2" and .gid_index > 0 and .gid == "::ffff:" + .address)
    and (has("warnings") | not)' "$file"
  expect_jq "(.pairs | length) == $ranks * ($ranks - 1) * ($tests | length)" "$file"
  expect_jq "[.pairs[] | [.source, .destination, .test]] | unique | length == ($ranks * ($ranks - 1) * ($tests | length))" "$file"
  expect_jq 'all(.pairs[]; .outcome == "completed" and .figure > 0 and .source != .destination)' "$file"
  expect_jq '[.pairs[] | {round, rank: (.source, .destination), test}]
    | group_by([.round, .test, .rank]) | all(length == 2)' "$file"
  expect_jq "(.rounds == (if $ranks % 2 == 0 then $ranks - 1 else $ranks end)) and .rounds_completed == .rounds
    and .finished" "$file"
}

# alone (every mesh_ case): four or five rdma_mesh ranks at once would take the guest's CPUs (and,
# sanitized, its memory) from the cases beside them
# ctest: integration alone
case_mesh_ranks() {
  require_device
  require_mpirun
  # Five: an odd count, so every round has a rank left out (the pairing's hard case), beside
  # two pairs measuring at once; three, below, with every test (the even meshes are the
  # other cases': mesh_quick, mesh_pairs_retest, mesh_unusable_rank). A mesh of two is one
  # pair, which the plan's unit tests cover. Each rank's start and each pair's test cost
  # far more than the measuring: the case took 80 CPU-s of the guest's with four ranks
  # there, 64-67 with three.
  local ranks=5
  mesh_ports "$ranks"
  run "mesh$ranks" 240 "${MESH_MPIRUN[@]}" -np "$ranks" "$OURS_RDMA_MESH" -p "$PORT" -s 4096 -n 100 --warmup 10 \
    --timeout 10 "${NO_OUTLIERS[@]}" --json --json-file "$T/mesh$ranks.file.json"
  expect_rc 0 "mpirun -np $ranks rdma_mesh"
  expect_full_mesh "mesh$ranks.out" "$ranks" '["bw"]'
  expect_jq 'all(.pairs[]; .figures.size == 4096 and .figures.iterations == 100 and .unit == "MiB/s")' "mesh$ranks.out"
  # The report's totals are the last attempts' rows summed (each row's bytes: size x iterations).
  expect_jq '.bytes == ([.pairs[] | select(.figures.bytes != null) | .figures.bytes] | add)' "mesh$ranks.out"
  expect_jq '.summary.bw.measured == (.pairs | length) and .summary.bw.failed == 0
    and .summary.bw.min <= .summary.bw.median and .summary.bw.median <= .summary.bw.max' "mesh$ranks.out"
  expect_same_report "mesh$ranks.out" "mesh$ranks.file.json"
  expect_schema rdma_mesh "mesh$ranks.out"
  note "$ranks ranks: $(jq -c '.summary.bw | {min, median, max}' "$T/mesh$ranks.out"), ${ELAPSED_MS} ms"
  # Three ranks, every test: latency and connection set-up beside bandwidth.
  mesh_ports 3
  run mesh3 300 "${MESH_MPIRUN[@]}" -np 3 "$OURS_RDMA_MESH" -p "$PORT" -s 4096 -n 100 --warmup 10 --test bw,lat,cm -c 2 \
    --timeout 10 "${NO_OUTLIERS[@]}" --json
  expect_rc 0 "mpirun -np 3 rdma_mesh --test bw,lat,cm"
  expect_full_mesh mesh3.out 3 '["bw","lat","cm"]'
  expect_jq 'all(.pairs[] | select(.test == "lat"); .figures.count == 100 and .figures.p99_us >= .figures.p50_us)' mesh3.out
  expect_jq 'all(.pairs[] | select(.test == "cm"); .figures.connections == 2 and .figures.connect_ms > 0)' mesh3.out
  expect_schema rdma_mesh mesh3.out
  note "3 ranks: lat $(jq -c '.summary.lat | {median}' "$T/mesh3.out") us, cm $(jq -c '.summary.cm | {median}' "$T/mesh3.out") ms, ${ELAPSED_MS} ms"
}

# One rank on the netdev without RDMA: its pairs fail with the bind diagnosis's cause, the
# others complete, rank 0 names it as a node problem, exit 1, within a bound.
# ctest: integration alone
case_mesh_unusable_rank() {
  require_device
  require_mpirun
  mesh_ports 4
  local common=(-p "$PORT" -s 4096 -n 100 --warmup 10 --timeout 10 "${NO_OUTLIERS[@]}")
  run mesh 240 "${MESH_MPIRUN[@]}" -np 3 "$OURS_RDMA_MESH" "${common[@]}" --json \
    : -np 1 "$OURS_RDMA_MESH" "${common[@]}" --bind "$PLAIN_ADDR" --json
  expect_rc 1 "rdma_mesh with rank 3 on $PLAIN_ADDR"
  ((ELAPSED_MS < 120000)) || fail "the mesh with an unusable rank took ${ELAPSED_MS} ms"
  expect_jq '.nodes[3].usable == false and .nodes[3].verdict.cause == "netdev_without_rdma"
    and .nodes[3].address == env.PLAIN_ADDR and .nodes[3].gid_type == "" and .nodes[3].gid_index == -1' mesh.out
  expect_jq '[.pairs[] | select(.source == 3 or .destination == 3)]
    | length == 6 and all(.outcome == "failed" and .cause == "netdev_without_rdma" and .figure == null
      and (.error.message | contains("netdev_without_rdma")))' mesh.out
  expect_jq '[.pairs[] | select(.source != 3 and .destination != 3)] | length == 6 and all(.outcome == "completed")' mesh.out
  expect_jq '[.summary.bw.node_problems[].rank] == [3]' mesh.out
  expect_jq '.summary.bw.culprits[0] | .kind == "cause" and .name == "netdev_without_rdma" and .ranks == [3]' mesh.out
  expect_schema rdma_mesh mesh.out
  note "rank 3 on $PLAIN_ADDR: exit 1 in ${ELAPSED_MS} ms, $(jq -c '.summary.bw | {measured, failed}' "$T/mesh.out")"
}

# One slow node among four, named by the report. The guest is one host, so four ranks are
# made to look like four: each runs in a UTS namespace of its own named node1..node4 (MPI's
# processor name, the report's nodes[].host) on an address of its own, on a veth of its own
# whose other end is a port of a bridge in a namespace (the switch), with an rxe device on
# the veth. rxe's UDP socket lives in the root namespace only, so the veths' node ends and
# their devices stay there. Traffic between two local addresses would take lo, where rxe
# drops it: policy routes send what each address sends out by its own veth (rules for
# locally sent packets, before the local table), and accept_local takes it in on the
# other's veth. The neighbours are static (four interfaces on one subnet answer each other's
# ARP otherwise), and MPI's own TCP stays off the bridge. node4 is slowed with netem both
# ways (what its veth sends, what its switch port sends it) to 0.5 Mbit/s (0.06 MiB/s).
# With four ranks half the directions are node4's, so the median falls between theirs and
# the others': one unshaped direction as slow as node4's would drag it down far enough to
# hide node4 (at 1 Mbit/s it did, once in four runs). An unshaped pair reached 8 to 30 MiB/s
# in the guest, and as little as 0.13 while other guests loaded the host (a load of 8 on
# its two cores). The pairs run one at a time (--serial): in parallel rounds on the loaded
# host an unshaped pair fell to 0.06 MiB/s, the pairs of a round sharing the guest's CPUs.
# Like every mesh_* case it runs alone (tests/CMakeLists.txt), which matters the more here:
# while it runs, the local table's rule is moved for the whole guest.
SLOW_NET=10.74.0
SLOW_SWITCH=rdmakit_switch

# slow_node_setup COUNT: nodes 1..COUNT (ranks 0..COUNT-1), as above. In batches (ip
# -batch, sysctls written in place): one process a command took 37 s of the guest's
# CPU in all while other guests loaded the host.
slow_node_setup() {
  local count=$1 n m mac rp_all
  read -r rp_all < /proc/sys/net/ipv4/conf/all/rp_filter || fail "cannot read rp_filter"
  restore "slow_node_undo $count $rp_all"
  ip netns add "$SLOW_SWITCH" || fail "ip netns add $SLOW_SWITCH"
  : > "$T/veths" && : > "$T/switch" && : > "$T/routes"
  echo "link add br0 type bridge" >> "$T/switch"
  for ((n = 0; n < count; n++)); do
    echo "link add mn$n type veth peer name ms$n netns $SLOW_SWITCH" >> "$T/veths"
    printf 'link set ms%s master br0\nlink set ms%s up\n' "$n" "$n" >> "$T/switch"
    printf '%s\n' "link set mn$n up" "addr add $SLOW_NET.$((n + 1))/24 dev mn$n" \
      "route add $SLOW_NET.0/24 dev mn$n src $SLOW_NET.$((n + 1)) table $((100 + n))" \
      "rule add pref $((100 + n)) from $SLOW_NET.$((n + 1)) iif lo lookup $((100 + n))" >> "$T/routes"
  done
  echo "link set br0 up" >> "$T/switch"
  printf '%s\n' "rule add pref 1000 lookup local" "rule del pref 0 lookup local" >> "$T/routes"
  ip -batch "$T/veths" && ip -n "$SLOW_SWITCH" -batch "$T/switch" || fail "veths and the bridge"
  echo 0 > /proc/sys/net/ipv4/conf/all/rp_filter || fail "cannot turn rp_filter off"
  for ((n = 0; n < count; n++)); do
    echo 0 > "/proc/sys/net/ipv4/conf/mn$n/rp_filter" && echo 1 > "/proc/sys/net/ipv4/conf/mn$n/accept_local" &&
      echo 1 > "/proc/sys/net/ipv4/conf/mn$n/arp_ignore" && echo 2 > "/proc/sys/net/ipv4/conf/mn$n/arp_announce" ||
      fail "sysctls of mn$n"
  done
  for ((m = 0; m < count; m++)); do
    read -r mac < "/sys/class/net/mn$m/address" || fail "no address for mn$m"
    for ((n = 0; n < count; n++)); do
      ((n == m)) || echo "neigh replace $SLOW_NET.$((m + 1)) lladdr $mac dev mn$n nud permanent" >> "$T/routes"
    done
  done
  ip -batch "$T/routes" || fail "addresses, routes, rules or neighbours (ip -batch $T/routes)"
  # One rdma a device: its -batch refused link add in the guest.
  for ((n = 0; n < count; n++)); do
    rdma link add "rxm$n" type rxe netdev "mn$n" || fail "rxe device on mn$n"
  done
}

# slow_node_undo COUNT RP_FILTER: the devices first (deleting them is synchronous; the
# namespace's, left to its deletion, would go after this returns), then the rules.
slow_node_undo() {
  local n
  : > "$T/undo-ip"
  for ((n = 0; n < $1; n++)); do
    rdma link delete "rxm$n" 2> /dev/null
    printf '%s\n' "link delete mn$n" "rule del pref $((100 + n))" >> "$T/undo-ip"
  done
  printf '%s\n' "rule add pref 0 lookup local" "rule del pref 1000 lookup local" >> "$T/undo-ip"
  ip -force -batch "$T/undo-ip" 2> /dev/null
  ip netns delete "$SLOW_SWITCH" 2> /dev/null
  echo "$2" > /proc/sys/net/ipv4/conf/all/rp_filter
  ip rule show | grep -q '^0:.*lookup local'
}

# long: four ranks in namespaces, one slowed by netem, named the culprit (37 s alone); the culprit
# rules on a slow node run on synthetic meshes in MeshTrials.BadNodeNamed, the measurement end to
# end in mesh_ranks
# ctest: integration long alone
case_mesh_slow_node() {
  require_device
  require_mpirun
  require_root
  command -v unshare > /dev/null || { echo "SKIP: unshare missing (util-linux)"; exit 77; }
  slow_node_setup 4
  tc qdisc add dev mn3 root netem rate 500kbit limit 10000 &&
    ip netns exec "$SLOW_SWITCH" tc qdisc add dev ms3 root netem rate 500kbit limit 10000 || fail "tc netem on node4"
  mesh_ports 4
  # Bounded by time (-D), not count, so that node4's directions take no longer than the
  # others. 4 KiB x 2 in flight keeps netem's queue short (0.13 s at 0.5 Mbit/s): a queue that
  # outlasts the transport's ack timeout sets off retransmissions. No retests: the first
  # pass is what names the culprit, and six more rounds would double the run.
  local contexts=() n
  for n in 0 1 2 3; do
    ((n == 0)) || contexts+=(:)
    # shellcheck disable=SC2016  # expanded by the rank's shell
    contexts+=(-np 1 unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh "node$((n + 1))"
      "$OURS_RDMA_MESH" -p "$PORT" --bind "$SLOW_NET.$((n + 1))" -s 4096 -t 2 -D 0.5 --warmup 10 --serial --retest 0
      --timeout 10 --json)
  done
  run mesh 120 "${MESH_MPIRUN[@]}" --mca btl_tcp_if_exclude "127.0.0.1/8,$SLOW_NET.0/24" \
    --mca oob_tcp_if_exclude "$SLOW_NET.0/24" "${contexts[@]}"
  expect_rc 1 "rdma_mesh with node4 slowed"
  expect_jq '[.nodes[] | [.host, .address, .device]]
    == [range(4) | ["node\(. + 1)", "'"$SLOW_NET"'.\(. + 1)", "rxm\(.)"]]' mesh.out
  expect_jq '(.pairs | length) == 12 and all(.pairs[]; .outcome == "completed")' mesh.out
  # Every direction of node4's is an outlier; whatever else the guest's noise made one, no
  # other node has all its directions low.
  expect_jq 'all(.pairs[] | select(.source == 3 or .destination == 3); .outlier)' mesh.out
  expect_jq '[.summary.bw.node_problems[] | [.rank, .host]] == [[3, "node4"]]' mesh.out
  # The culprit, named by host and first: node4 as a node, all six of its directions low,
  # and no other host as a node (noise may still name a link).
  expect_jq '[.summary.bw.culprits[] | select(.kind == "node") | {name, ranks, low, total}]
    == [{name: "node4", ranks: [3], low: 6, total: 6}] and .summary.bw.culprits[0].name == "node4"' mesh.out
  expect_schema rdma_mesh mesh.out
  # The median of node4's six directions against the report's median (of all twelve, six of
  # them node4's) and against the median of the six that do not touch node4.
  local figures
  figures=$(jq -c 'def median: sort | (.[(length - 1) / 2 | floor] + .[length / 2 | floor]) / 2;
    def r3: . * 1000 | round / 1000;
    ([.pairs[] | select(.source == 3 or .destination == 3) | .final_figure] | median) as $slow
    | ([.pairs[] | select(.source != 3 and .destination != 3) | .final_figure] | median) as $others
    | {median: (.summary.bw.median | r3), others: ($others | r3), node4: ($slow | r3),
       ratio: ($slow / .summary.bw.median | r3), ratio_to_others: ($slow / $others | r3)}' "$T/mesh.out")
  note "node4 at 0.5 Mbit/s (MiB/s): $figures, ${ELAPSED_MS} ms"
  note "culprits: $(jq -c '[.summary.bw.culprits[] | {kind, name, low, total, median_ratio, confidence}]' "$T/mesh.out")"
}

# --pairs and --serial: only the listed pairs, one per round; a strict threshold makes
# outliers, and each is measured again alone (--serial holds for the retests), the first
# figure kept beside the retest's. The latency test with --lat-threshold 1.0001 flags every
# direction above the median, so some are always flagged; bandwidth's strictest threshold
# (0.99) flagged none in one run, where four of the six directions came within 1% of each
# other (47.09-47.54 MiB/s, 75f0906).
# ctest: integration alone
case_mesh_pairs_retest() {
  require_device
  require_mpirun
  mesh_ports 4
  printf '# the links to check\n0 1\n2-3\n\n0,3  # a diagonal\n' > "$T/pairs"
  run mesh 240 "${MESH_MPIRUN[@]}" -np 4 "$OURS_RDMA_MESH" -p "$PORT" -s 4096 -n 100 --warmup 10 --timeout 10 \
    --pairs "$T/pairs" --serial --test lat --lat-threshold 1.0001 --retest 1 --json
  [[ $RC -eq 0 || $RC -eq 1 ]] || fail "rdma_mesh --pairs: exit $RC"
  expect_jq '.rounds == 3 and ([.pairs[] | [.source, .destination]] | sort) == [[0,1],[0,3],[1,0],[2,3],[3,0],[3,2]]' mesh.out
  expect_jq 'all(.pairs[]; .outcome == "completed")' mesh.out
  # A strict threshold retests whatever fell below it; the retest's figure is the final one.
  expect_jq '[.pairs[] | select(.retests | length > 0)] | length > 0
    and all(.final_figure == .retests[-1].figure)' mesh.out
  expect_jq 'all(.pairs[] | select(.retests | length == 0); .final_figure == .figure)' mesh.out
  expect_jq "($RC == 1) == ((.summary.lat.outliers | length) > 0)" mesh.out
  expect_jq '(.retest_passes | length) == 1 and all(.retest_passes[].rounds[]; length == 1) and .left_out == []' mesh.out
  expect_schema rdma_mesh mesh.out
  note "retested: $(jq -c '[.pairs[] | select(.retests | length > 0) | [.source, .destination, .figure, .final_figure]]' "$T/mesh.out")"
}

# Retests in rounds: six ranks, the full mesh, a strict threshold (0.99 x the median) that
# flags about half the directions, so seven or more of the 15 pairs; pairs that share no
# rank among them (any six pairs of six ranks hold two such) are retested in one round, at
# once. Every pass after the first runs on fewer pairs than the one before, at most
# --retest 3 passes. (Ranks slowed with SIGSTOP, 200 ms of every 210, were not told from
# the TCG guest's noise: their links came out at half the others' pace, not a tenth.)
# long: six ranks, retests of disjoint pairs in one round, 35-40 s alone; the retest plan is unit-
# tested, --retest runs in mesh_pairs_retest
# ctest: integration long alone
case_mesh_retest_rounds() {
  require_device
  require_mpirun
  mesh_ports 6
  run mesh 240 "${MESH_MPIRUN[@]}" -np 6 "$OURS_RDMA_MESH" -p "$PORT" -s 4096 -n 100 --warmup 10 --timeout 10 \
    --threshold 0.99 --lat-threshold 1000 --retest 3 --json
  [[ $RC -eq 0 || $RC -eq 1 ]] || fail "rdma_mesh --retest 3: exit $RC"
  expect_jq 'all(.pairs[]; .outcome == "completed") and .rounds == 5 and (.pairs | length) == 30 and .left_out == []' \
    mesh.out
  # Every retest round's pairs share no rank; some round ran two pairs or more at once.
  expect_jq '(.retest_passes | length) >= 1 and (.retest_passes | length) <= 3
    and all(.retest_passes[].rounds[]; (flatten | length) == (flatten | unique | length))
    and any(.retest_passes[].rounds[]; length >= 2)
    and all(.retest_passes[]; .pairs == ([.rounds[][]] | length))' mesh.out
  # Each pass on fewer pairs than the one before, each a subset of it; why they ended.
  expect_jq '[.retest_passes[] | [.rounds[][]] | sort] as $p
    | all(range(1; $p | length); ($p[.] | length) < ($p[. - 1] | length) and ($p[.] - $p[. - 1]) == [])
    and (.retests_ended | IN("cleared", "no_smaller", "cap"))
    and (.retests_ended != "cap" or ($p | length) == 3)' \
    mesh.out
  # A pair retested k times is in the first k passes; its directions' retests are that many.
  expect_jq '[.retest_passes[] | [.rounds[][]]] as $p | all(.pairs[];
    ([.source, .destination] | sort) as $pair | (.retests | length) == ([$p[] | select(index([$pair]))] | length))' mesh.out
  expect_jq "($RC == 1) == ((.summary.bw.outliers | length) > 0)" mesh.out
  expect_schema rdma_mesh mesh.out
  note "retest passes: $(jq -c '[.retest_passes[] | .rounds]' "$T/mesh.out"), ended $(jq -r .retests_ended "$T/mesh.out"), ${ELAPSED_MS} ms"
}

# --quick: a health check between jobs, one round of disjoint pairs (rank r with r + N/2),
# both directions, the analysis as after a full mesh. Four ranks: 2 pairs, 4 directions;
# three: one pair, rank 2 in none, which the report and the text name.
# ctest: integration alone
case_mesh_quick() {
  require_device
  require_mpirun
  mesh_ports 4
  run quick4 240 "${MESH_MPIRUN[@]}" -np 4 "$OURS_RDMA_MESH" -p "$PORT" -s 4096 -n 100 --warmup 10 --timeout 10 \
    "${NO_OUTLIERS[@]}" --quick --json
  expect_rc 0 "rdma_mesh --quick with 4 ranks"
  expect_jq '.arguments.quick and .rounds == 1 and .rounds_completed == 1 and .finished and .left_out == []
    and ([.pairs[] | [.source, .destination]] | sort) == [[0,2],[1,3],[2,0],[3,1]]
    and all(.pairs[]; .round == 1 and .outcome == "completed" and .figure > 0)
    and .summary.bw.measured == 4 and .retest_passes == [] and .retests_ended == "cleared"' quick4.out
  expect_schema rdma_mesh quick4.out
  note "4 ranks, --quick: $(jq -c '[.pairs[] | [.source, .destination, (.figure | floor)]]' "$T/quick4.out") MiB/s, ${ELAPSED_MS} ms"
  mesh_ports 3
  run quick3 240 "${MESH_MPIRUN[@]}" -np 3 "$OURS_RDMA_MESH" -p "$PORT" -s 4096 -n 100 --warmup 10 --timeout 10 \
    "${NO_OUTLIERS[@]}" --quick --json-file "$T/quick3.json"
  expect_rc 0 "rdma_mesh --quick with 3 ranks"
  expect_jq '.rounds == 1 and .left_out == [2] and ([.pairs[] | [.source, .destination]] | sort) == [[0,1],[1,0]]' \
    quick3.json
  expect_grep '^coverage: 1 of 3 pairs measured; in no pair: rank 2$' quick3.out
  expect_schema rdma_mesh quick3.json
}

# A rank killed mid-run ends the MPI job (MPI's model); the JSON file rank 0 rewrites after
# every round keeps the rounds that finished.
# ctest: integration alone
case_mesh_rank_killed() {
  require_device
  require_mpirun
  mesh_ports 4
  start mesh "${MESH_MPIRUN[@]}" -np 4 "$OURS_RDMA_MESH" -p "$PORT" -s 4096 -D 1 --timeout 10 "${NO_OUTLIERS[@]}" \
    --json-file "$T/progress.json"
  poll_until 120 "no round finished" jq -e '.rounds_completed >= 1' "$T/progress.json"
  local victim
  victim=$(pgrep -f "$OURS_RDMA_MESH -p $PORT" | tail -1)
  [[ -n $victim ]] || fail "no rdma_mesh process to kill"
  kill -9 "$victim"
  finish mesh 60
  [[ $RC -ne 0 && $RC -ne 124 ]] || fail "mpirun after a killed rank: exit $RC"
  expect_jq '.tool == "rdma_mesh" and .rounds_completed >= 1 and .rounds == 3 and (.pairs | length) >= 2
    and .finished == false
    and (.rounds_completed as $done | all(.pairs[]; .round <= $done))' progress.json
  expect_schema rdma_mesh progress.json
  note "killed pid $victim: mpirun exit $RC, file kept $(jq .rounds_completed "$T/progress.json") round(s)"
}

# Bad options on one rank or all: exit 2 on every rank with one line each, nothing hangs.
# No device needed (the options are refused before any is opened): label nodevice. Each mpirun
# is bounded at 120 s: at nice 19 beside the pair guests, Open MPI's start and teardown alone
# once took 35 s, and the second run passed its old 60 s after both ranks had said their line.
# two mpirun runs of up to 120 s each; its sanitized copy is left out of the suite: each rank's
# Open MPI start under ASan cost it 48 CPU-s for option checks the plain build runs too
# ctest: nodevice not_sanitized
case_mesh_bad_flags() {
  require_mpirun
  run all 120 "${MESH_MPIRUN[@]}" -np 2 "$OURS_RDMA_MESH" --threshold 2
  expect_rc 2 "--threshold 2 on every rank"
  [[ $(grep -c '^rdma_mesh\[[01]\]: --threshold' "$T/all.err") -eq 2 ]] || fail "expected one line per rank"
  run one 120 "${MESH_MPIRUN[@]}" -np 1 "$OURS_RDMA_MESH" : -np 1 "$OURS_RDMA_MESH" --op nope
  expect_rc 2 "--op nope on rank 1"
  expect_grep '^rdma_mesh\[1\]: --op' one.err
  expect_grep '^rdma_mesh\[0\]: rank 1 refused its options: --op' one.err
  # Every rank must measure alike; its own address may differ. Rank 0 writes the report, so
  # --json on both (with it on rank 1 alone, there was no JSON to check, which jq 1.6's -e
  # took for a pass).
  run unlike 60 "${MESH_MPIRUN[@]}" -np 1 "$OURS_RDMA_MESH" -s 4096 --bind 127.0.0.1 --json \
    : -np 1 "$OURS_RDMA_MESH" -s 8192 --bind 127.0.0.2 --json
  expect_rc 2 "-s differing between ranks"
  expect_jq '.outcome == "usage_error" and (.errors[0].message | startswith("rank 1'"'"'s options differ from rank 0'"'"'s in size:"))' unlike.out
  run combo 60 "${MESH_MPIRUN[@]}" -np 2 "$OURS_RDMA_MESH" -n 5 -D 1
  expect_rc 2 "-n with -D"
  printf '0 7\n' > "$T/pairs"
  run pairs 60 "${MESH_MPIRUN[@]}" -np 2 "$OURS_RDMA_MESH" --pairs "$T/pairs" --json
  expect_rc 2 "--pairs naming rank 7 of 2"
  expect_jq '.outcome == "usage_error" and (.errors[0].message | contains("line 1"))' pairs.out
}

# Two guests (scripts/rxe-vm.sh --pair): mpirun on this one starts two ranks here and two
# on the peer, through tests/integration/mpi-rsh-agent.sh in place of ssh; every rank on
# the wire's device, so that the pairs across the guests cross the wire.
# ctest: pair long
case_pair_mesh() {
  require_peer
  require_mpirun
  mesh_ports 4
  local wire=${WIRE_ADDR%.*}.0/24
  run mesh 300 "${MESH_MPIRUN[@]}" --host rxevm-b:2,rxevm-a:2 -np 4 \
    --mca plm_rsh_agent "$HARNESS_ROOT/tests/integration/mpi-rsh-agent.sh" \
    --mca oob_tcp_if_include "$wire" --mca btl_tcp_if_include "$wire" \
    "$OURS_RDMA_MESH" -d "$WIRE_DEV" -p "$PORT" -s 4096 -n 50 --warmup 5 --timeout 10 "${NO_OUTLIERS[@]}" --json
  expect_rc 0 "mpirun across two guests"
  expect_full_mesh mesh.out 4 '["bw"]'
  expect_jq '[.nodes[] | [.host, .address, .device]] == [["rxevm-b", env.WIRE_ADDR, env.WIRE_DEV],
    ["rxevm-b", env.WIRE_ADDR, env.WIRE_DEV], ["rxevm-a", env.PEER_ADDR, env.WIRE_DEV],
    ["rxevm-a", env.PEER_ADDR, env.WIRE_DEV]]' mesh.out
  expect_jq '[.pairs[] | select((.source < 2) != (.destination < 2))] | length == 8' mesh.out
  expect_schema rdma_mesh mesh.out
  note "across the wire: $(jq -c '[.pairs[] | select((.source < 2) != (.destination < 2)) | .figure] | {min: min, max: max}' "$T/mesh.out") MiB/s, ${ELAPSED_MS} ms"
}

# On a host without RDMA (the build host): every rank says why, exit 77. No device needed:
# label nodevice; skipped where the host has one.
# ctest: nodevice skip_77 not_sanitized
case_mesh_no_device() {
  require_mpirun
  if ls /sys/class/infiniband/ 2> /dev/null | grep -q .; then
    echo "SKIP: this host has an RDMA device"
    exit 77
  fi
  run none 60 "${MESH_MPIRUN[@]}" -np 2 "$OURS_RDMA_MESH" --json
  expect_rc 77 "rdma_mesh on a host without RDMA"
  expect_jq 'all(.nodes[]; .usable == false and .verdict.cause == "no_rdma_device")
    and (.errors[0].message | startswith("no RDMA device on any rank"))' none.out
  expect_schema rdma_mesh none.out
}

# The heatmap of a report (scripts/bench-plot.sh), from a sample with outliers and from one
# with a rank that could not take part.
# ctest: nodevice skip_77
case_mesh_heatmap() {
  local root=$HARNESS_ROOT sample
  command -v gnuplot > /dev/null || { echo "SKIP: gnuplot missing (Debian package gnuplot-nox)"; exit 77; }
  for sample in rdma_mesh-rxe-5-ranks-outliers rdma_mesh-netdev-without-rdma; do
    run "$sample" 60 "$root/scripts/bench-plot.sh" "$T/$sample.svg" "$root/tests/schema/samples/$sample.json"
    expect_rc 0 "bench-plot.sh $sample"
    grep -q '<svg' "$T/$sample.svg" || fail "$sample.svg is not an SVG"
  done
  run mixed 60 "$root/scripts/bench-plot.sh" "$T/mixed.svg" "$root/tests/schema/samples/rdma_mesh-rxe-2-ranks.json" \
    "$root/tests/schema/samples/rdma_mesh-rxe-2-ranks.json"
  expect_rc 2 "bench-plot.sh with two mesh reports"
  # The matrix form: a cell a direction at 6 ranks; at 256, 64 blocks a side, or one a leaf
  # switch with --topology (16 leaves of tree64.conf and the block of the host it does not name).
  local ranks
  for ranks in 6 256; do
    jq -n --argjson n "$ranks" -f "$root/tests/integration/mesh_matrix_report.jq" > "$T/matrix-$ranks.json"
    run "matrix-$ranks" 60 "$root/scripts/bench-plot.sh" "$T/matrix-$ranks.svg" "$T/matrix-$ranks.json"
    expect_rc 0 "bench-plot.sh on a $ranks-rank report in the matrix form"
    grep -q '<svg' "$T/matrix-$ranks.svg" || fail "matrix-$ranks.svg is not an SVG"
  done
  grep -q '(6 ranks; X: failed' "$T/matrix-6.svg" || fail "matrix-6.svg: not drawn a cell a direction"
  grep -q '(256 ranks, 64 blocks: mean of each' "$T/matrix-256.svg" || fail "matrix-256.svg: not drawn in 64 blocks"
  run leaves 60 "$root/scripts/bench-plot.sh" --topology "$root/tests/fixtures/topology/tree64.conf" "$T/leaves.png" \
    "$T/matrix-256.json"
  expect_rc 0 "bench-plot.sh --topology on a 256-rank report"
  [[ $(od -An -tx1 -N8 "$T/leaves.png" | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "leaves.png is not a PNG"
  grep -q '1 host(s) of the report not in the topology' "$T/leaves.err" || fail "no word of the host tree64.conf lacks"
  run leaves_sweep 60 "$root/scripts/bench-plot.sh" --topology "$root/tests/fixtures/topology/hosts.txt" "$T/sweep.svg" \
    "$root/tests/schema/samples/send_bw-client-sweep-bw-rxe.json"
  expect_rc 2 "bench-plot.sh --topology with a send_bw report"
}

# The sender falls silent mid-measurement (SIGSTOP, its connection still up): the listening
# side ends the test after --timeout by its silence bound instead of waiting for a
# disconnect that never comes, the direction is recorded failed, and the job goes on to
# its end (exit 1) once the sender runs again. (Cutting the link instead, by taking the rxe
# netdev down under traffic, left this kernel's rxe unable to connect for the cases after.)
# ctest: integration alone
case_mesh_peer_silent() {
  require_device
  require_mpirun
  mesh_ports 2
  start mesh "${MESH_MPIRUN[@]}" -np 2 "$OURS_RDMA_MESH" -p "$PORT" -s 4096 -D 20 --warmup 0 --timeout 3 \
    --one-way --retest 0 --json
  # Rank 0 (the source of the one direction): the process Open MPI started with that rank
  # in its environment (mpirun's own command line names the program too).
  sender=""
  find_rank_0() {
    local pid
    for pid in $(pgrep -f "$OURS_RDMA_MESH -p $PORT"); do
      tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx OMPI_COMM_WORLD_RANK=0 && sender=$pid
    done
    [[ -n $sender ]]
  }
  poll_until 60 "no rank 0 started" find_rank_0
  poll_until 60 "rank 0 never connected" has_connected_qp "$sender"
  tick 1
  kill -STOP "$sender"
  tick 6
  kill -CONT "$sender"
  finish mesh 60
  expect_rc 1 "rdma_mesh with its sender stopped for 6 s"
  expect_jq '(.pairs | length) == 1 and .pairs[0].outcome != "completed" and .finished
    and (.pairs[0].figures.receiver_error.message | contains("nothing from the peer for 3000 ms"))' mesh.out
  expect_schema rdma_mesh mesh.out
  note "sender stopped: $(jq -c '.pairs[0] | {outcome, error: .error.message, receiver: .figures.receiver_error.message}' "$T/mesh.out")"
}

# Slurm in the guest (slurm_start): munged, slurmctld and slurmd from a generated
# slurm.conf (slurm_write_conf), their files in $T/slurm, the configuration and logs in $T
# (a failure prints them). One node, named mesh01 while the guest is rxevm: Slurm's name
# for a node need not be the host's, and the report must use Slurm's. Its CPUs are nproc's
# but at least 4 (config_overrides: the guest has 2, and each rank takes one). The guest's
# /etc is the host's, read only, so none of Slurm's or munge's defaults are used:
# SLURM_CONF points srun, sbatch and sinfo at the file here. MpiDefault=pmix: Debian's
# Open MPI 4.1 has no PMI-2 client (doc/mesh.md, Slurm). slurmd 22.05 starts a cgroup
# plugin whatever the process tracking, and stops where /sys/fs/cgroup has nothing mounted
# (the guest): its cgroup.conf points cgroup/v1 at an empty folder, which nothing uses.
# MinJobAge=4: sbatch --wait looks at the job after 2 s, then waits four times as long each
# time while that stays under half of MinJobAge; at the default (300 s) it looked at 2, 10
# and 42 s, so a job of 15 s held mesh_slurm for 42. At 4 it looks every 2 s, and a
# finished job's record outlasts that (slurmctld purges at most once a minute).
SLURM_NODE=mesh01
require_slurm() {
  local program
  for program in munged slurmctld slurmd srun sbatch sinfo; do
    command -v "$program" > /dev/null || { echo "SKIP: $program missing (Debian packages slurm-wlm, munge)"; exit 77; }
  done
}

# slurm_write_conf DIR STATE CONTROLLER NODE...: slurm.conf, topology.conf (every node
# under one leaf) and cgroup.conf in DIR, the logs there too; each NODE is
# NAME:HOST:ADDRESS:CPUS. STATE is a folder of the same path on every node (spool, pid
# files, munge's socket); slurmctld runs here, reached at CONTROLLER; its ports and
# slurmd's are the next two of the case's. Sets MUNGE_ARGS, munged's options on any node.
slurm_write_conf() {
  local dir=$1 state=$2 controller=$3 ctld_port node name host address cpus names=()
  shift 3
  next_port
  ctld_port=$PORT
  next_port
  {
    cat << CONF
ClusterName=rdmakit
SlurmctldHost=$(hostname)($controller)
SlurmctldPort=$ctld_port
SlurmdPort=$PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge.socket
StateSaveLocation=$state/state
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=pmix
TopologyPlugin=topology/tree
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MailProg=/bin/true
MinJobAge=4
CONF
    for node in "$@"; do
      IFS=: read -r name host address cpus <<< "$node"
      echo "NodeName=$name NodeHostname=$host NodeAddr=$address CPUs=$cpus State=UNKNOWN"
      names+=("$name")
    done
    (IFS=, && echo "PartitionName=mesh Nodes=${names[*]} Default=YES MaxTime=INFINITE State=UP")
  } > "$dir/slurm.conf" || fail "cannot write $dir/slurm.conf"
  (IFS=, && echo "SwitchName=leaf1 Nodes=${names[*]}") > "$dir/topology.conf"
  printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=%s\n' "$state/cgroup" > "$dir/cgroup.conf"
  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none || fail "cannot write a munge key"
  chmod 400 "$dir/munge.key"
  MUNGE_ARGS=(--foreground --force --key-file="$dir/munge.key" --socket="$state/munge.socket"
    --pid-file="$state/munged.pid" --seed-file="$state/munged.seed")
  export SLURM_CONF=$dir/slurm.conf
}

# slurm_wait_idle SECONDS: until every node is idle. Bounded by the clock, not by a count
# of polls as poll_until is: each sinfo takes 0.5-3 s of the TCG guest's CPU.
slurm_wait_idle() {
  local end=$((EPOCHSECONDS + $1))
  until [[ $(timeout 10 sinfo -h -N -o %t 2> /dev/null | sort -u) == idle ]]; do
    ((EPOCHSECONDS < end)) || fail "Slurm's nodes not idle within $1 s: $(timeout 10 sinfo -N -l 2>&1)"
    tick 0.5
  done
}

# slurm_start DIR STATE [NODE...]: the configuration in DIR (slurm_write_conf), STATE made
# here, and munged, slurmctld and slurmd started here, slurmd as the first NODE (by
# default the only one, mesh01 on 127.0.0.1).
slurm_start() {
  local dir=$1 state=$2 cpus address
  shift 2
  cpus=$(nproc)
  ((cpus >= 4)) || cpus=4
  (($# > 0)) || set -- "$SLURM_NODE:$(hostname):127.0.0.1:$cpus"
  mkdir -p "$dir" "$state"/{state,spool,cgroup} || fail "cannot make $state"
  chmod 755 "$state"
  IFS=: read -r _ _ address _ <<< "$1"
  slurm_write_conf "$dir" "$state" "$address" "$@"
  start munged munged "${MUNGE_ARGS[@]}" --log-file="$dir/munged.log"
  poll_until 20 "munged did not open its socket within 20 s" test -S "$state/munge.socket"
  start slurmctld slurmctld -D -f "$SLURM_CONF"
  start slurmd slurmd -D -f "$SLURM_CONF" -N "${1%%:*}"
}

# The job script we ship (doc/slurm/rdma_mesh.sbatch) under sbatch --wait on the guest's one
# node: its srun starts four ranks, a full mesh, every rank's host the node name Slurm gave
# it, and --topology the topology.conf beside slurm.conf.
# ctest: integration alone
case_mesh_slurm() {
  require_device
  require_mpirun
  require_slurm
  slurm_start "$T" "$T/slurm"
  slurm_wait_idle 60
  note "slurmctld and slurmd up: $(sinfo -h -N -o '%N %t %c CPUs')"
  # The job script as an operator submits it; sbatch's options override its #SBATCH lines
  # (one node here, four ranks on it), its report lands under the submit directory. The
  # script starts the ranks with srun --mpi=pmix; OMPI_MCA_btl: TCP between the ranks, as
  # under mpirun (MESH_MPIRUN). A direct srun -n 4 runs in pair_mesh_slurm, across guests.
  mesh_ports 4
  local job
  run sbatch 300 env -C "$T" OMPI_MCA_btl=self,tcp RDMA_MESH="$OURS_RDMA_MESH" \
    sbatch --wait --parsable -N 1 -n 4 --ntasks-per-node=4 "$HARNESS_ROOT/doc/slurm/rdma_mesh.sbatch" \
    -p "$PORT" -s 4096 -n 100 --warmup 10 --timeout 10 "${NO_OUTLIERS[@]}"
  expect_rc 0 "sbatch --wait doc/slurm/rdma_mesh.sbatch"
  job=$(< "$T/sbatch.out")
  [[ $job =~ ^[0-9]+$ ]] || fail "sbatch --parsable printed '$job', not a job id"
  [[ -s $T/rdma_mesh-$job/mesh.json ]] || fail "no report in rdma_mesh-$job/mesh.json"
  cp "$T/rdma_mesh-$job/mesh.json" "$T/job.json"
  expect_full_mesh job.json 4 '["bw"]'
  expect_jq "all(.nodes[]; .host == \"$SLURM_NODE\")" job.json
  # Under Slurm, --topology defaults to the topology.conf beside its slurm.conf.
  expect_jq '.topology == (env.SLURM_CONF | sub("slurm.conf$"; "topology.conf")) and (.warnings // [] | length) == 0' job.json
  expect_schema rdma_mesh job.json
  cp "$T/rdma_mesh-$job.out" "$T/job.text"
  expect_grep "rdma_mesh: exit 0, JSON report in $T/rdma_mesh-$job/mesh.json" job.text
  note "sbatch: job $job, $(jq -c '{hosts: [.nodes[].host], bw: .summary.bw | {min, median, max}}' "$T/job.json"), ${ELAPSED_MS} ms"
}

# slurm_peer_stop STATE: slurmd and munged on the peer ended (slurm_start's there).
slurm_peer_stop() {
  remote_stop slurmd_a
  # shellcheck disable=SC2016  # expanded on the peer
  remote_run munged_a_stop 10 bash -c 'kill "$(< "$1")"' stop "$1/munged.pid"
}

# Two guests (scripts/rxe-vm.sh --pair), a Slurm node each over the management wire:
# slurmctld and slurmd (nodeb) here, munged and slurmd (nodea) on the peer, the
# configuration and munge key in the folder both guests share. srun starts two ranks on
# each node, every rank on the wire's device: the report names each by its node.
# ctest: pair
case_pair_mesh_slurm() {
  require_peer
  require_mpirun
  require_slurm
  local dir=$RXEVM_RPC/slurm-$$ state=/run/rdmakit-slurm-$$ wire=${WIRE_ADDR%.*}.0/24
  restore "rm -rf '$dir'"
  slurm_start "$dir" "$state" "nodeb:$(hostname):$MGMT_ADDR:2" "nodea:rxevm-a:$PEER_MGMT_ADDR:2"
  # shellcheck disable=SC2016  # expanded on the peer
  remote_start slurmd_a bash -c 'conf=$1 state=$2; shift 2; mkdir -p "$state"/{state,spool,cgroup} || exit 1
    munged "$@" & for _ in {1..100}; do [[ -S $state/munge.socket ]] && break; sleep 0.1; done
    exec slurmd -D -f "$conf" -N nodea' \
    slurmd_a "$SLURM_CONF" "$state" "${MUNGE_ARGS[@]}" --log-file="$dir/munged-a.log"
  restore "slurm_peer_stop '$state'"
  slurm_wait_idle 90
  mesh_ports 4
  run mesh 300 env OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include="$wire" OMPI_MCA_oob_tcp_if_include="$wire" \
    srun -N 2 -n 4 --ntasks-per-node=2 --mpi=pmix "$OURS_RDMA_MESH" -d "$WIRE_DEV" -p "$PORT" -s 4096 -n 50 \
    --warmup 5 --timeout 10 "${NO_OUTLIERS[@]}" --json
  [[ $RC -eq 0 ]] || cp "$dir"/*.log "$T/"
  expect_rc 0 "srun -N 2 -n 4 --mpi=pmix rdma_mesh across two guests"
  expect_full_mesh mesh.out 4 '["bw"]'
  expect_jq '[.nodes[] | [.host, .address, .device]] == [["nodea", env.PEER_ADDR, env.WIRE_DEV],
    ["nodea", env.PEER_ADDR, env.WIRE_DEV], ["nodeb", env.WIRE_ADDR, env.WIRE_DEV],
    ["nodeb", env.WIRE_ADDR, env.WIRE_DEV]]' mesh.out
  expect_schema rdma_mesh mesh.out
  note "srun on nodea and nodeb: $(jq -c '.summary.bw | {min, median, max}' "$T/mesh.out") MiB/s, ${ELAPSED_MS} ms"
}
