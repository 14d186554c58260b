#!/usr/bin/env bash
# bench-compare.sh [BIN_DIR [OUT_JSON]]: send_bw against perftest's ib_send_bw and
# ib_send_lat on one RDMA device in loopback (run it inside scripts/rxe-vm.sh, or on a host
# with RXE_ADDR set). Bandwidth: for 64 B, 4 KiB and 64 KiB, and 64 KiB on 4 queue pairs
# (-q 4, the row 65536x4), it alternates ours and ib_send_bw RUNS times each (default 5;
# each pair starts with the other tool in turn), ITERS messages a run (default 5000; per
# queue pair); the row atomic: send_bw --op atomic (fetch-and-add) against ib_atomic_bw; the
# row ud64: 64-byte datagrams, send_bw -c UD against ib_send_bw -c UD. Latency: at 2 B it
# alternates send_bw --lat and ib_send_lat RUNS times each, LAT_ITERS round trips a run
# (default 5000), and the row atomic: send_bw --lat --op atomic against ib_atomic_lat.
# perftest runs in its default out-of-band mode (its rdma_cm mode, -R, crashed or hung on
# rxe), on the GID of RXE_ADDR (-x), so that both tools send the same headers: perftest's
# default GID 0 is the IPv6 link-local one, and rxe's IPv4 path costs more per packet (the
# IP header's checksum and id); PERF_GID=N picks another index, PERF_GID=default none.
# Completion events: send_bw -e against send_bw busy polling at 4 KiB and 64 KiB, bandwidth
# and both sides' CPU per message (--cpu-util). Prints the medians and the ratios, and
# writes to OUT_JSON {"address": RXE_ADDR, "perftest_gid_index": N or "default",
# "bandwidth": [run...], "latency": [run...], "events": [run...], "oob": [run...], "medians":
# {"bandwidth": [...], "latency": [...], "events": [...], "oob": [...]}}.
#   scripts/rxe-vm.sh . scripts/bench-compare.sh build/bin build/bench.json
# Not a timed test: numbers depend on the machine; nothing here passes or fails on them.
# --oob (not with BASE_BIN): send_bw --oob at either end of perftest's WRITE, READ and SEND
# programs at 64 KiB, against perftest at both ends (OOB_ITERS messages a run, default 1000).
# SECTIONS="bandwidth latency events oob" (the default): the parts to run; BW_SPECS and
# LAT_SPECS: the rows of the first two (default "64 4096 65536 65536x4 atomic ud64" and "2 atomic
# ud2"; udSIZE: -c UD).
# BASE_BIN=DIR: before and after instead of ours and perftest: the second column is send_bw
# from DIR (another build, e.g. of the commit before a change), run the same way, interleaved;
# the JSON's perftest_* and "perftest" fields then hold the base build's figures.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$root/build/bin}" && pwd)
out=${2:-$root/build/bench-compare.json}
addr=${RXE_ADDR:?set RXE_ADDR (scripts/rxe-vm.sh does) to an address on the RDMA device}
devices=(/sys/class/infiniband/*)
dev=${RXE_DEV:-$(basename "${devices[0]}")}
runs=${RUNS:-5}
iters=${ITERS:-5000}
lat_iters=${LAT_ITERS:-5000}
sections=${SECTIONS:-bandwidth latency events oob}
base_bin=${BASE_BIN:+$(cd "$BASE_BIN" && pwd)}

# gid_index_of ADDR: the index of IPv4 address ADDR's RoCE v2 GID on $dev's port 1.
gid_index_of() {
  local octets gid entry
  IFS=. read -ra octets <<< "$1"
  ((${#octets[@]} == 4)) || return 1
  gid=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "${octets[@]}")
  for entry in "/sys/class/infiniband/$dev/ports/1/gids/"*; do
    [[ $(cat "$entry" 2> /dev/null) == "$gid" ]] || continue
    [[ $(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/${entry##*/}" 2> /dev/null) == "RoCE v2" ]] || continue
    echo "${entry##*/}"
    return 0
  done
  return 1
}
perf_gid=${PERF_GID:-$(gid_index_of "$addr" || echo default)}
perf_gid_flags=()
[[ $perf_gid != default ]] && perf_gid_flags=(-x "$perf_gid")
other=${base_bin:+base}
other=${other:-perf}
if [[ -z $base_bin ]]; then
  command -v ib_send_bw > /dev/null || { echo "ib_send_bw missing (Debian package perftest)"; exit 77; }
  for tool in ib_send_lat ib_atomic_bw ib_atomic_lat; do
    command -v "$tool" > /dev/null || { echo "$tool missing (Debian package perftest)"; exit 77; }
  done
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=18600

# wait_port PORT: until something listens on PORT (rdma_cm id or TCP socket), 10 s at most.
wait_port() {
  local _
  for _ in $(seq 100); do
    if rdma res show cm_id 2> /dev/null | grep -q "state LISTEN .*:$1 " ||
      grep -q ":$(printf '%04X' "$1") 00000000:0000 0A" /proc/net/tcp 2> /dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "nothing listens on $1" >&2
  return 1
}

# Each run takes the next port; the callers advance it ($(...) runs these in a subshell).
# ours_run ARGS...: our server, then our client with ARGS; its JSON in $work/client.json.
# The send_bw of $run_bin (default $bin).
ours_run() {
  local tool=${run_bin:-$bin}/send_bw
  "$tool" --bind "$addr" -p "$port" --accept-timeout 30 -c "${conn:-RC}" > "$work/server.json" 2>&1 &
  local server=$!
  wait_port "$port"
  "$tool" "$addr" -p "$port" "$@" --json > "$work/client.json"
  wait "$server"
}

# perftest_run TOOL ARGS...: TOOL's server, then its client with ARGS; the client's table in
# $work/pt_client.txt.
perftest_run() {
  local tool=$1
  shift
  "$tool" -d "$dev" -p "$port" "${perf_gid_flags[@]}" "$@" -F > "$work/pt_server.txt" 2>&1 &
  local server=$!
  wait_port "$port"
  "$tool" -d "$dev" -p "$port" "${perf_gid_flags[@]}" "$@" -F "$addr" > "$work/pt_client.txt" 2>&1
  wait "$server" || true
}

# ours SIZE QPS [OP]: MiB/s average and Mpps of one send_bw run on QPS queue pairs (OP:
# send, or atomic for 8-byte fetch-and-add), over $conn (RC or UD; default RC).
ours() {
  ours_run -s "$1" -q "$2" -n "$iters" --op "${3:-send}" -c "${conn:-RC}"
  jq -r '.rows[0] | "\(.bw_average_mib_per_s) \(.message_rate_mpps)"' "$work/client.json"
}

# perftest SIZE QPS [OP]: the same two numbers from ib_send_bw's table (MB/sec there is 2^20
# bytes/s), or ib_atomic_bw's (fetch-and-add, its default) for OP atomic, or from BASE_BIN's
# send_bw.
perftest() {
  if [[ -n $base_bin ]]; then
    run_bin=$base_bin ours "$@"
    return
  fi
  if [[ ${3:-send} == atomic ]]; then
    perftest_run ib_atomic_bw -q "$2" -n "$iters"
  else
    perftest_run ib_send_bw -s "$1" -q "$2" -n "$iters" -c "${conn:-RC}"
  fi
  awk -v size="$1" '$1 == size && NF >= 5 { print $4, $5; found = 1 } END { exit !found }' "$work/pt_client.txt"
}

# ours_lat SIZE [OP]: median, average and p99 latency (us) of one send_bw --lat run; the
# client tells the server it is a latency test.
ours_lat() {
  ours_run --lat -s "$1" -n "$lat_iters" --op "${2:-send}" -c "${conn:-RC}"
  # Slurped: a client that printed nothing fails here too.
  jq -ers '.[0].rows[0] | [.t_median_us, .t_avg_us, .t_p99_us] | select(all(type == "number")) | map(tostring)
    | join(" ")' "$work/client.json" ||
    { echo "send_bw --lat -s $1: no rows[0].t_median_us, t_avg_us and t_p99_us in its JSON" >&2; return 1; }
}

# perftest_lat SIZE [OP]: t_typical, t_avg and the 99% percentile (usec) from ib_send_lat's
# table, or ib_atomic_lat's for OP atomic (the line after the t_typical header: #bytes
# #iterations t_min t_max t_typical t_avg t_stdev p99 p99.9).
perftest_lat() {
  if [[ -n $base_bin ]]; then
    run_bin=$base_bin ours_lat "$@"
    return
  fi
  if [[ ${2:-send} == atomic ]]; then
    perftest_run ib_atomic_lat -n "$lat_iters"
  else
    perftest_run ib_send_lat -s "$1" -n "$lat_iters" -c "${conn:-RC}"
  fi
  awk -v size="$1" '/t_typical/ { header = 1; next }
    header && $1 == size && NF >= 9 { print $5, $6, $8; found = 1; exit }
    END { exit !found }' "$work/pt_client.txt" ||
    {
      echo "ib_send_lat -s $1: no result line after the t_typical header" >&2
      cat "$work/pt_client.txt" >&2
      return 1
    }
}

# pair_order RUN: which of the pair runs first: ours on odd runs, the other on even ones, so
# that what a run leaves behind (rxe's deferred teardown, the caches it warmed) falls on
# both alike rather than always on the second.
pair_order() { if (($1 % 2)); then echo ours other; else echo other ours; fi; }

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

[[ -z $base_bin ]] && echo "perftest on GID index $perf_gid of $dev (send_bw on $addr)"

# Runs and medians go to JSON lines here, into OUT_JSON at the end.
: > "$work/bw_runs.jsonl"
: > "$work/bw_medians.jsonl"
: > "$work/lat_runs.jsonl"
: > "$work/lat_medians.jsonl"
if [[ " $sections " == *" bandwidth "* ]]; then
  printf '%-8s %14s %14s %8s %12s %12s %8s\n' size "ours MiB/s" "$other MiB/s" ratio "ours Mpps" "$other Mpps" ratio
  # SIZE, or SIZExQPS for several queue pairs streamed together (-q), or atomic (8-byte
  # fetch-and-add against ib_atomic_bw), or udSIZE (datagrams, -c UD).
  for spec in ${BW_SPECS:-64 4096 65536 65536x4 atomic ud64}; do
    size=${spec%x*}
    qps=1 op=send conn=RC
    [[ $spec == *x* ]] && qps=${spec#*x}
    [[ $spec == atomic ]] && size=8 op=atomic
    [[ $spec == ud* ]] && size=${spec#ud} conn=UD
    : > "$work/ours.txt"
    : > "$work/perf.txt"
    for run in $(seq "$runs"); do
      for side in $(pair_order "$run"); do
        # No process substitution: the VM guest has no /dev/fd.
        port=$((port + 1))
        if [[ $side == ours ]]; then
          result=$(ours "$size" "$qps" "$op")
          bw=${result% *} rate=${result#* }
          echo "$bw $rate" >> "$work/ours.txt"
        else
          result=$(perftest "$size" "$qps" "$op")
          pbw=${result% *} prate=${result#* }
          echo "$pbw $prate" >> "$work/perf.txt"
        fi
      done
      printf '{"size":%s,"queue_pairs":%s,"operation":"%s","connection":"%s","run":%s,"ours_mib_per_s":%s,"ours_mpps":%s,"perftest_mib_per_s":%s,"perftest_mpps":%s}\n' \
        "$size" "$qps" "$op" "$conn" "$run" "$bw" "$rate" "$pbw" "$prate" >> "$work/bw_runs.jsonl"
    done
    ob=$(cut -d' ' -f1 "$work/ours.txt" | median)
    orate=$(cut -d' ' -f2 "$work/ours.txt" | median)
    pb=$(cut -d' ' -f1 "$work/perf.txt" | median)
    prate=$(cut -d' ' -f2 "$work/perf.txt" | median)
    printf '%-8s %14.2f %14.2f %8.3f %12.4f %12.4f %8.3f\n' "$spec" "$ob" "$pb" "$(jq -n "$ob / $pb")" \
      "$orate" "$prate" "$(jq -n "$orate / $prate")"
    printf '{"size":%s,"queue_pairs":%s,"operation":"%s","connection":"%s","ours_mib_per_s":%s,"ours_mpps":%s,"perftest_mib_per_s":%s,"perftest_mpps":%s}\n' \
      "$size" "$qps" "$op" "$conn" "$ob" "$orate" "$pb" "$prate" >> "$work/bw_medians.jsonl"
  done
fi
if [[ " $sections " == *" latency "* ]]; then
  echo
  printf '%-8s %16s %16s %8s %11s\n' size "ours median us" "$other typical us" ratio "ours lower"
  # 2-byte SEND against ib_send_lat, and an 8-byte fetch-and-add against ib_atomic_lat.
  for spec in ${LAT_SPECS:-2 atomic ud2}; do
    size=$spec op=send conn=RC
    [[ $spec == atomic ]] && size=8 op=atomic
    [[ $spec == ud* ]] && size=${spec#ud} conn=UD
    : > "$work/ours_lat.txt"
    : > "$work/perf_lat.txt"
    for run in $(seq "$runs"); do
      for side in $(pair_order "$run"); do
        port=$((port + 1))
        if [[ $side == ours ]]; then
          result=$(ours_lat "$size" "$op")
          echo "$result" >> "$work/ours_lat.txt"
          read -r omed oavg op99 <<< "$result"
        else
          result=$(perftest_lat "$size" "$op")
          echo "$result" >> "$work/perf_lat.txt"
          read -r ptyp pavg pp99 <<< "$result"
        fi
      done
      {
        printf '{"run":%s,"size":%s,"operation":"%s","connection":"%s","ours":{"median_us":%s,"avg_us":%s,"p99_us":%s},' \
          "$run" "$size" "$op" "$conn" "$omed" "$oavg" "$op99"
        printf '"perftest":{"typical_us":%s,"avg_us":%s,"p99_us":%s}}\n' "$ptyp" "$pavg" "$pp99"
      } >> "$work/lat_runs.jsonl"
    done
    omed=$(cut -d' ' -f1 "$work/ours_lat.txt" | median)
    oavg=$(cut -d' ' -f2 "$work/ours_lat.txt" | median)
    op99=$(cut -d' ' -f3 "$work/ours_lat.txt" | median)
    ptyp=$(cut -d' ' -f1 "$work/perf_lat.txt" | median)
    pavg=$(cut -d' ' -f2 "$work/perf_lat.txt" | median)
    pp99=$(cut -d' ' -f3 "$work/perf_lat.txt" | median)
    # A ratio near 1 is read with the pairs: in how many of them ours came out lower.
    lower=$(paste -d' ' "$work/ours_lat.txt" "$work/perf_lat.txt" | awk '$1 < $4 { n++ } END { print n + 0 }')
    printf '%-8s %16.2f %16.2f %8.3f %11s\n' "$spec" "$omed" "$ptyp" "$(jq -n "$omed / $ptyp")" "$lower/$runs"
    {
      printf '{"size":%s,"operation":"%s","connection":"%s","pairs":%s,"ours_lower_in":%s,' "$size" "$op" "$conn" "$runs" "$lower"
      printf '"ours":{"median_us":%s,"avg_us":%s,"p99_us":%s},' "$omed" "$oavg" "$op99"
      printf '"perftest":{"typical_us":%s,"avg_us":%s,"p99_us":%s}}\n' "$ptyp" "$pavg" "$pp99"
    } >> "$work/lat_medians.jsonl"
  done
  echo "latency ratio: ours / $other, lower is better (below 1: ours is faster); ours lower: in how many interleaved pairs"
fi

# Completion events (-e) against busy polling, ours on both sides, --cpu-util on both:
# bandwidth, and the CPU time of both sides together per message (the server's over its
# whole test, warm-up included, so per message of the test).
# events_run MODE SIZE: "MiB/s client_us_per_message server_us_per_message".
events_run() {
  local mode=$1 size=$2 flags=()
  [[ $mode == events ]] && flags=(-e)
  "$bin/send_bw" --bind "$addr" -p "$port" --accept-timeout 30 --json --cpu-util "${flags[@]}" > "$work/server.json" &
  local server=$!
  wait_port "$port"
  "$bin/send_bw" "$addr" -p "$port" -s "$size" -n "$iters" --cpu-util "${flags[@]}" --json > "$work/client.json"
  wait "$server"
  jq -r '.rows[0] | "\(.bw_average_mib_per_s) \(.cpu.us_per_message)"' "$work/client.json" | tr '\n' ' '
  jq -r '.test.cpu.us_per_message' "$work/server.json"
}
# perftest_events_run MODE SIZE: ib_send_bw's MiB/s, busy polling (perf_poll) or with -e
# (perf_events) on both sides.
perftest_events_run() {
  local flags=()
  [[ $1 == perf_events ]] && flags=(-e)
  perftest_run ib_send_bw -s "$2" -n "$iters" "${flags[@]}"
  awk -v size="$2" '$1 == size && NF >= 5 { print $4; found = 1 } END { exit !found }' "$work/pt_client.txt"
}
: > "$work/events_runs.jsonl"
: > "$work/events_medians.jsonl"
if [[ " $sections " == *" events "* ]]; then
  modes=(poll events)
  # Beside ours, perftest's own -e against its busy polling (not with BASE_BIN).
  [[ -z $base_bin ]] && modes+=(perf_poll perf_events)
  echo
  printf '%-8s %12s %12s %8s %16s %16s %8s %10s\n' "-e size" "poll MiB/s" "events MiB/s" ratio "poll cpu us/msg" \
    "events cpu us/msg" ratio "perftest"
  for size in 4096 65536; do
    for mode in "${modes[@]}"; do : > "$work/$mode.txt"; done
    : > "$work/perf_poll.txt"
    : > "$work/perf_events.txt"
    for run in $(seq "$runs"); do
      for mode in "${modes[@]}"; do
        port=$((port + 1))
        if [[ $mode == perf_* ]]; then
          bw=$(perftest_events_run "$mode" "$size")
          echo "$bw" >> "$work/$mode.txt"
          printf '{"size":%s,"run":%s,"completion":"%s","mib_per_s":%s}\n' "$size" "$run" "$mode" "$bw" \
            >> "$work/events_runs.jsonl"
          continue
        fi
        result=$(events_run "$mode" "$size")
        read -r bw client_cpu server_cpu <<< "$result"
        echo "$bw $(jq -n "$client_cpu + $server_cpu")" >> "$work/$mode.txt"
        printf '{"size":%s,"run":%s,"completion":"%s","mib_per_s":%s,"client_cpu_us_per_message":%s,"server_cpu_us_per_message":%s}\n' \
          "$size" "$run" "$mode" "$bw" "$client_cpu" "$server_cpu" >> "$work/events_runs.jsonl"
      done
    done
    pbw=$(cut -d' ' -f1 "$work/poll.txt" | median)
    pcpu=$(cut -d' ' -f2 "$work/poll.txt" | median)
    ebw=$(cut -d' ' -f1 "$work/events.txt" | median)
    ecpu=$(cut -d' ' -f2 "$work/events.txt" | median)
    perf_ratio=null
    if [[ -s $work/perf_poll.txt ]]; then
      perf_ratio=$(jq -n "$(median < "$work/perf_events.txt") / $(median < "$work/perf_poll.txt")")
    fi
    printf '%-8s %12.2f %12.2f %8.3f %16.1f %16.1f %8.3f %10s\n' "$size" "$pbw" "$ebw" "$(jq -n "$ebw / $pbw")" "$pcpu" \
      "$ecpu" "$(jq -n "$ecpu / $pcpu")" "$(jq -n "$perf_ratio | if . == null then \"-\" else . * 1000 | round / 1000 end" -r)"
    printf '{"size":%s,"poll_mib_per_s":%s,"events_mib_per_s":%s,"poll_cpu_us_per_message":%s,"events_cpu_us_per_message":%s,"perftest_events_ratio":%s}\n' \
      "$size" "$pbw" "$ebw" "$pcpu" "$ecpu" "$perf_ratio" >> "$work/events_medians.jsonl"
  done
  echo "-e ratios: events / poll; cpu: both sides' CPU microseconds per message; perftest: ib_send_bw -e / ib_send_bw"
fi

# --oob against perftest's own pairs: for each of WRITE, READ and SEND at 64 KiB, interleaved,
# ib_<op>_bw on both ends (stock), send_bw --oob as the client of ib_<op>_bw's server
# (client), and ib_<op>_bw's client against send_bw --oob's server (server). Each run gives
# the client's average and the server's printed (or reported) one, MiB/s.
# oob_average FILE SIZE: the average column of perftest's row for SIZE in FILE.
oob_average() { awk -v size="$2" '$1 == size && NF >= 5 { print $4; found = 1; exit } END { exit !found }' "$1"; }
# oob_run MODE OP SIZE: "client_MiB/s server_MiB/s".
oob_run() {
  local mode=$1 op=$2 size=$3 client server
  local tool=ib_${op}_bw
  local stock=(-d "$dev" -p "$port" "${perf_gid_flags[@]}" -s "$size" -n "$oob_iters" -F)
  local ours=("$bin/send_bw" -p "$port" --oob --op "$op" -s "$size" "${perf_gid_flags[@]}" --json)
  case $mode in
    stock | client)
      "$tool" "${stock[@]}" > "$work/oob_server.txt" 2>&1 &
      local pid=$!
      wait_port "$port"
      if [[ $mode == stock ]]; then
        "$tool" "${stock[@]}" "$addr" > "$work/oob_client.txt" 2>&1
        client=$(oob_average "$work/oob_client.txt" "$size")
      else
        "${ours[@]}" "$addr" -n "$oob_iters" > "$work/oob_client.json"
        client=$(jq '.rows[0].bw_average_mib_per_s' "$work/oob_client.json")
      fi
      wait "$pid" || true
      server=$(oob_average "$work/oob_server.txt" "$size")
      ;;
    server)
      "${ours[@]}" --accept-timeout 30 > "$work/oob_server.json" &
      local pid=$!
      wait_port "$port"
      "$tool" "${stock[@]}" "$addr" > "$work/oob_client.txt" 2>&1
      wait "$pid"
      client=$(oob_average "$work/oob_client.txt" "$size")
      server=$(jq '.rows[0].bw_average_mib_per_s' "$work/oob_server.json")
      ;;
  esac
  echo "$client $server"
}
oob_iters=${OOB_ITERS:-1000}
: > "$work/oob_runs.jsonl"
: > "$work/oob_medians.jsonl"
if [[ " $sections " == *" oob "* && -z $base_bin ]]; then
  echo
  printf '%-6s %12s %14s %8s %14s %8s %16s
' "--oob" "stock MiB/s" "our client" ratio "vs our server" ratio "server row/ours"
  for op in write read send; do
    for mode in stock client server; do : > "$work/oob_figures_$mode.txt"; done
    for run in $(seq "$runs"); do
      # Each run starts with another of the three, so that none always follows the same one.
      modes=(stock client server)
      modes=("${modes[@]:$((run % 3))}" "${modes[@]:0:$((run % 3))}")
      for mode in "${modes[@]}"; do
        port=$((port + 1))
        read -r client server <<< "$(oob_run "$mode" "$op" 65536)"
        echo "$client $server" >> "$work/oob_figures_$mode.txt"
        printf '{"operation":"%s","run":%s,"mode":"%s","client_mib_per_s":%s,"server_mib_per_s":%s}\n' \
          "$op" "$run" "$mode" "$client" "$server" >> "$work/oob_runs.jsonl"
      done
    done
    stock_bw=$(cut -d' ' -f1 "$work/oob_figures_stock.txt" | median)
    client_bw=$(cut -d' ' -f1 "$work/oob_figures_client.txt" | median)
    served_bw=$(cut -d' ' -f1 "$work/oob_figures_server.txt" | median)
    # How the other end's figure compares with the measuring end's, our runs together.
    agreement=$(cat "$work/oob_figures_client.txt" "$work/oob_figures_server.txt" | awk '{ print $2 / $1 }' | median)
    printf '%-6s %12.2f %14.2f %8.3f %14.2f %8.3f %16.4f\n' "$op" "$stock_bw" "$client_bw" \
      "$(jq -n "$client_bw / $stock_bw")" "$served_bw" "$(jq -n "$served_bw / $stock_bw")" "$agreement"
    printf '{"operation":"%s","stock_mib_per_s":%s,"our_client_mib_per_s":%s,"stock_client_of_our_server_mib_per_s":%s,"server_over_client":%s}\n' \
      "$op" "$stock_bw" "$client_bw" "$served_bw" "$agreement" >> "$work/oob_medians.jsonl"
  done
  echo "--oob: the client's average MiB/s (medians of $runs runs, -n $oob_iters, 64 KiB): ib_<op>_bw on both ends;"
  echo "send_bw --oob against ib_<op>_bw's server; ib_<op>_bw's client against send_bw --oob's server."
  echo "server row/ours: the server's figure over the client's, our runs (1: the same figure)"
fi

jq -n --arg addr "$addr" --arg gid "$perf_gid" --slurpfile bw "$work/bw_runs.jsonl" --slurpfile lat "$work/lat_runs.jsonl" \
  --slurpfile bwm "$work/bw_medians.jsonl" --slurpfile latm "$work/lat_medians.jsonl" \
  --slurpfile ev "$work/events_runs.jsonl" --slurpfile evm "$work/events_medians.jsonl" \
  --slurpfile oob "$work/oob_runs.jsonl" --slurpfile oobm "$work/oob_medians.jsonl" \
  '{address: $addr, perftest_gid_index: ($gid | tonumber? // $gid), bandwidth: $bw, latency: $lat, events: $ev,
    oob: $oob, medians: {bandwidth: $bwm, latency: $latm, events: $evm, oob: $oobm}}' > "$out"
echo "all runs: $out"
