#!/usr/bin/env bash
# bench-plot.sh OUT.(svg|png) SWEEP.json [SWEEP.json ...]: plots send_bw --json reports
# against message size (log2 x axis). Bandwidth reports (rows with bw_average_mib_per_s):
# average MiB/s, and Mpps on the right axis. Latency reports (rows with t_median_us): median
# and p99 in µs on a log axis. One line per file, named by its basename and operation; given
# both kinds, the bandwidth panel sits above the latency panel. OUT's extension picks the
# gnuplot terminal (svg or pngcairo). Latency rows with a histogram (send_bw --histogram)
# add a panel of their histograms, the share of each row's samples by latency.
#   build/bin/send_bw 10.0.0.2 -a --json > build/sweep.json
#   build/bin/send_bw 10.0.0.2 -a --lat --json > build/sweep-lat.json
#   scripts/bench-plot.sh build/sweep.svg build/sweep.json build/sweep-lat.json
# bench-plot.sh OUT.(svg|png) MESH.json: one rdma_mesh --json report as a heatmap per test
# in it (bw, lat, cm), one above the other: rows the source rank, columns the destination,
# the colour each direction's final figure (yellow the median, red at the outlier limit or
# beyond: low bandwidth, long times), an X where it failed, a black box round an outlier;
# the diagonal and directions not measured stay blank. Up to 16 ranks the cells show the
# figures too. Either form of the report: the pairs, or the matrices ("form": "matrix", as
# --analyse and runs above 128 ranks write it). Above 128 ranks a cell a direction cannot be
# read, so the heatmap shows blocks, the mean of each block's figures, an X where any of its
# directions failed and a box where any was an outlier: 64 blocks a side of neighbouring
# ranks, or with --topology FILE (Slurm's topology.conf or "host switch" lines) one block per
# leaf switch, each rank's host from the report's nodes (ranks on hosts the file does not
# name share one block at the end).
#   mpirun -np 5 build/bin/rdma_mesh --test bw,lat --json-file build/mesh.json
#   scripts/bench-plot.sh build/mesh.png build/mesh.json
#   scripts/bench-plot.sh --topology /etc/slurm/topology.conf build/mesh.png build/mesh-1024.json
# Exits 2 on bad usage or an input that is not a send_bw report with rows or an rdma_mesh
# report with pairs (also for several rdma_mesh reports, or one mixed with send_bw
# reports), 77 when gnuplot (Debian package gnuplot-nox) or jq is missing.
set -euo pipefail
usage="usage: $0 OUT.(svg|png) SWEEP.json [SWEEP.json ...] | [--topology FILE] OUT.(svg|png) MESH.json"
fail() { echo "bench-plot: $*" >&2; exit 2; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { echo "$usage"; exit 0; }
topology=""
if [[ ${1:-} == --topology ]]; then
  [[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }
  topology=$2
  shift 2
  [[ -f $topology && -r $topology ]] || fail "--topology $topology: no such readable file"
fi
[[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }
out=$1
shift
case $out in
  *.svg) terminal=svg ;;
  *.png) terminal=pngcairo ;;
  *) fail "$out: the output must end in .svg or .png" ;;
esac
[[ -d $(dirname "$out") ]] || fail "$out: no such directory $(dirname "$out")"
command -v gnuplot > /dev/null || { echo "bench-plot: gnuplot missing (Debian package gnuplot-nox)" >&2; exit 77; }
command -v jq > /dev/null || { echo "bench-plot: jq missing (Debian package jq)" >&2; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# quote TEXT: TEXT as a gnuplot single-quoted string (no escapes there but '' for ').
quote() { printf "'%s'" "${1//\'/\'\'}"; }
# preamble WIDTH HEIGHT: gnuplot's terminal ($terminal, WIDTH x HEIGHT pixels) and output ($out).
preamble() {
  echo "set encoding utf8"
  if [[ $terminal == svg ]]; then
    echo "set terminal svg size $1,$2 font 'sans,13' noenhanced background '#ffffff'"
  else
    echo "set terminal pngcairo size $1,$2 font 'sans,11' noenhanced background '#ffffff'"
  fi
  echo "set output $(quote "$out")"
}

# The kind of one report: bw, lat, or why it is neither.
# shellcheck disable=SC2016  # jq's variables, not the shell's
kind_of='if length != 1 then "is not one JSON document" else .[0] |
  if type == "object" and .tool == "rdma_mesh" and .form == "matrix" then .ranks as $n |
    if (.ranks | type) != "number" or .ranks < 2 then "has no ranks count of 2 or more"
    elif (.matrices | type) != "object" or (.matrices | length) == 0 then "has no matrices"
    elif all(.matrices[]; (.final | type) == "array" and (.final | length) == $n
        and all(.final[]; type == "array" and length == $n))
      then "mesh" else "has matrices that are not ranks x ranks" end
  elif type == "object" and .tool == "rdma_mesh" then .ranks as $n |
    if (.pairs | type) != "array" or (.pairs | length) == 0 then "has no pairs"
    elif (.ranks | type) != "number" or .ranks < 2 then "has no ranks count of 2 or more"
    elif all(.pairs[]; type == "object" and (.source | type) == "number" and (.destination | type) == "number"
        and .source >= 0 and .source < $n and .destination >= 0 and .destination < $n
        and (.test | type) == "string" and ((.final_figure | type) == "number" or .final_figure == null))
      then "mesh" else "has pairs without a source, destination, test and final_figure" end
  elif type != "object" or .tool != "send_bw" then "is neither a send_bw nor an rdma_mesh JSON report"
  elif (.rows | type) != "array" or (.rows | length) == 0 then "has no rows"
  elif all(.rows[]; type == "object" and has("bw_average_mib_per_s")) then "bw"
  elif all(.rows[]; type == "object" and has("t_median_us")) then "lat"
  else "has rows with neither bw_average_mib_per_s nor t_median_us" end end'
# Rows as "bytes y1 y2" lines; a missing number becomes NaN (gnuplot skips the point).
rows_of() {
  jq -r --arg a "$1" --arg b "$2" '.rows[] | select((.bytes | type) == "number" and .bytes > 0)
    | [.bytes, (.[$a] // "NaN"), (.[$b] // "NaN")] | map(tostring) | join(" ")' "$3" | sort -g -k1,1
}

# An rdma_mesh test's cells, one line a direction: source, destination, final figure (NaN
# when failed), failed (1/0), outlier (1/0), failed again (the X; a block's column 4 and 6
# differ, below).
# shellcheck disable=SC2016  # jq's variables, not the shell's
mesh_cells='.pairs[] | select(.test == $test) | (if .final_figure == null then 1 else 0 end) as $failed
  | [.source, .destination, (.final_figure // "NaN"), $failed, (if .outlier == true then 1 else 0 end), $failed]
  | map(tostring) | join(" ")'
# The matrix form as tab-separated lines for matrix_cells: "F SOURCE DESTINATION" a failure,
# "O SOURCE DESTINATION" an outlier, then "R FIGURE..." each row of final figures in order
# (empty for null). jq's @tsv keeps this to seconds on a 1024x1024 matrix; awk takes it apart.
# shellcheck disable=SC2016  # jq's variables, not the shell's
matrix_lines='((.matrices[$test].failures // [])[] | "F\t\(.source)\t\(.destination)"),
  ((.summary[$test].outliers // [])[] | "O\t\(.source)\t\(.destination)"),
  (.matrices[$test].final[] | "R\t" + @tsv)'
# Those lines as cells (as mesh_cells writes them): the directions with a figure and the failed
# ones; a null that is not a failure (the diagonal, not measured) stays blank.
# shellcheck disable=SC2016  # awk's fields, not the shell's
matrix_cells='
  BEGIN { FS = "\t"; row = 0 }
  $1 == "F" { failed[$2 " " $3] = 1; next }
  $1 == "O" { outlier[$2 " " $3] = 1; next }
  $1 == "R" {
    for (i = 2; i <= NF; i++) {
      key = row " " (i - 2)
      if ((key in failed) || $i != "") {
        f = (key in failed) ? 1 : 0
        print row, i - 2, ($i == "" ? "NaN" : $i), f, ((key in outlier) ? 1 : 0), f
      }
    }
    row++
  }'
# The panel's title: the test and the median; the colour-box label: what the figure is, its unit.
# shellcheck disable=SC2016  # jq's variables, not the shell's
mesh_title='(.summary[$test] // {}) as $s
  | ([(.pairs // [])[] | select(.test == $test) | .unit][0] // .matrices[$test].unit // $s.unit // "") as $u
  | "rdma_mesh \($test): "
    + (if ($s.median | type) == "number"
       then "median \($s.median | if . >= 100 then . * 10 | round / 10 else . * 1000 | round / 1000 end) \($u)"
       else "nothing measured" end)
    + " (\(.ranks) ranks\($blocks); X: failed, box: outlier)"
    + "\t\($s.figure // "final figure") (\($u))"'
# The colour range: the median in the middle, the outlier limit (--threshold or
# --lat-threshold times the median) at the red end, so that a spread of a few percent does
# not look like a fault; widened to take in every figure shown ($lo..$hi, null when none).
# shellcheck disable=SC2016  # jq's variables, not the shell's
mesh_colours='(.summary[$test] // {}) as $s
  | if $lo == null then "set cbrange [0:1]"
    elif ($s.median | type) != "number" or ($s.threshold | type) != "number" then "set autoscale cb"
    elif $test == "bw" then
      "set cbrange [\([$lo, $s.median * $s.threshold] | min):\([$hi, $s.median * (2 - $s.threshold)] | max)]"
    else "set cbrange [\([$lo, ([0, $s.median * (2 - $s.threshold)] | max)] | min):\([$hi, $s.median * $s.threshold] | max)]"
    end'
# The ranks' hosts as "RANK HOST" lines.
# shellcheck disable=SC2016  # jq's variables, not the shell's
mesh_hosts='(.nodes // [])[] | select((.rank | type) == "number" and (.host | type) == "string") | "\(.rank) \(.host)"'
# A topology file as "HOST LEAF" lines: Slurm's topology.conf (SwitchName=... Nodes=HOSTLIST;
# '#' comments, a trailing '\' continues the line, keys in any case) when a line sets
# SwitchName=, else "host switch" lines. rdma_mesh --topology checks the file strictly; this
# only needs each host's leaf.
# shellcheck disable=SC2016  # awk's fields, not the shell's
topology_hosts='
  # expand(LIST): the hosts of a Slurm hostlist, appended to out[] (node[01-03,7]: padding kept;
  # several brackets multiply out).
  function expand(list,   depth, i, c, start) {
    depth = 0; start = 1
    for (i = 1; i <= length(list) + 1; i++) {
      c = substr(list, i, 1)
      if (c == "[") depth++
      else if (c == "]") depth--
      else if ((c == "," && depth == 0) || i > length(list)) {
        if (i > start) expand_item(substr(list, start, i - start))
        start = i + 1
      }
    }
  }
  function expand_item(item,   left, right, head, tail, ranges, n, parts, k, bounds, lo, hi, width, v) {
    left = index(item, "[")
    if (left == 0) { out[++count] = item; return }
    right = index(item, "]")
    head = substr(item, 1, left - 1); tail = substr(item, right + 1)
    ranges = substr(item, left + 1, right - left - 1)
    n = split(ranges, parts, ",")
    for (k = 1; k <= n; k++) {
      if (split(parts[k], bounds, "-") == 1) bounds[2] = bounds[1]
      lo = bounds[1] + 0; hi = bounds[2] + 0; width = length(bounds[1])
      for (v = lo; v <= hi; v++) expand_item(head sprintf("%0" width "d", v) tail)
    }
  }
  {
    sub(/#.*/, ""); sub(/[ \t\r]+$/, "")
    if (sub(/\\$/, "")) { pending = pending $0; next }
    line = pending $0; pending = ""
    if (line !~ /[^ \t]/) next
    lines[++nlines] = line
    if (tolower(line) ~ /(^|[ \t])switchname=/) slurm = 1
  }
  END {
    for (l = 1; l <= nlines; l++) {
      nw = split(lines[l], words, /[ \t]+/)
      if (!slurm) { if (nw >= 2) print words[1], words[2]; continue }
      name = ""; nodes = ""
      for (w = 1; w <= nw; w++) {
        eq = index(words[w], "=")
        key = tolower(substr(words[w], 1, eq - 1))
        if (key == "switchname") name = substr(words[w], eq + 1)
        if (key == "nodes") nodes = substr(words[w], eq + 1)
      }
      if (name == "" || nodes == "") continue
      count = 0; delete out
      expand(nodes)
      for (h = 1; h <= count; h++) print out[h], name
    }
  }'
# Each rank's block as "RANK BLOCK" lines, then "L BLOCK LABEL" a block's label. Without a
# topology: 64 blocks of neighbouring ranks, labelled by their first rank. With one: a block
# per leaf switch in the order of their lowest rank, and one last block of the ranks on hosts
# the topology does not name.
# shellcheck disable=SC2016  # awk's fields, not the shell's
mesh_blocks='
  BEGIN { n = 0; missing = 0; unplaced_count = 0 }
  FILENAME == ARGV[1] { leaf[$1] = $2; next }
  { host[$1] = $2 }
  END {
    if (ARGV[1] == "/dev/null") {
      blocks = ranks < 64 ? ranks : 64
      for (r = 0; r < ranks; r++) {
        b = int(r * blocks / ranks); print r, b
        if (!(b in first)) { first[b] = r; print "L", b, r }
      }
      exit
    }
    for (r = 0; r < ranks; r++) {
      name = ((r in host) && (host[r] in leaf)) ? leaf[host[r]] : ""
      if (name == "") { if ((r in host) && !(host[r] in warned)) { warned[host[r]] = 1; missing++ }; unplaced[r] = 1; unplaced_count++; continue }
      if (!(name in block)) { block[name] = n; label[n] = name; n++ }
      print r, block[name]
    }
    if (missing > 0) printf "bench-plot: %d host(s) of the report not in the topology: in the last block\n", missing > "/dev/stderr"
    if (unplaced_count > 0) { for (r in unplaced) print r, n; label[n] = "(none)"; n++ }
    for (b = 0; b < n; b++) print "L", b, label[b]
  }'
# The cells (mesh_cells lines) summed up by block: mean figure (NaN when none), all failed
# (grey), any outlier (box), any failed (X).
# shellcheck disable=SC2016  # awk's fields, not the shell's
block_cells='
  FILENAME == ARGV[1] { if ($1 != "L") block[$1] = $2; next }
  {
    key = block[$1] " " block[$2]; cells[key] = 1
    if ($4 == 1) failed[key] = 1; else { sum[key] += $3; count[key]++ }
    if ($5 == 1) outlier[key] = 1
  }
  END {
    for (key in cells) {
      mean = (key in count) ? sum[key] / count[key] : "NaN"
      print key, mean, ((key in count) ? 0 : 1), ((key in outlier) ? 1 : 0), ((key in failed) ? 1 : 0)
    }
  }'
# plot_mesh MESH.json: its heatmaps, a gnuplot script on stdout (the cells' data in $work).
plot_mesh() {
  local file=$1 meta=$work/meta.json ranks tests test dat title cbox cells panel=0 labels font form side blocks="" lo hi
  # The report without its matrices' figures, for the small questions: each jq over a
  # 1024-rank matrix form would parse it again.
  jq 'if .form == "matrix" then del(.matrices[].first, .matrices[].final) else . end' "$file" > "$meta"
  ranks=$(jq -r '.ranks' "$meta")
  form=$(jq -r '.form // "pairs"' "$meta")
  # The report's tests in its order, those with figures alone.
  mapfile -t tests < <(jq -r '. as $r | ([(.pairs // [])[].test] + (.matrices // {} | keys)) as $have
    | (.tests // []) + ($have | unique)
    | reduce .[] as $t ([]; if any(.[]; . == $t) then . else . + [$t] end)
    | map(select(. as $t | any($have[]; . == $t))) | .[]' "$meta")
  side=$ranks
  if [[ $ranks -gt 128 ]]; then
    jq -r "$mesh_hosts" "$meta" > "$work/hosts"
    if [[ -n $topology ]]; then
      awk "$topology_hosts" "$topology" > "$work/leaves"
      awk -v ranks="$ranks" "$mesh_blocks" "$work/leaves" "$work/hosts" > "$work/blocks"
    else
      awk -v ranks="$ranks" "$mesh_blocks" /dev/null "$work/hosts" > "$work/blocks"
    fi
    side=$(grep -c '^L ' "$work/blocks")
    if [[ -n $topology ]]; then blocks=", $side leaf switches: mean of each block"; else blocks=", $side blocks: mean of each"; fi
  fi
  # Figures in the cells while they are big enough to read.
  labels=$((side == ranks && ranks <= 16))
  font=$((ranks <= 8 ? 11 : 8))
  preamble 900 $((700 * ${#tests[@]}))
  [[ ${#tests[@]} -gt 1 ]] && echo "set multiplot layout ${#tests[@]},1"
  echo "set size ratio -1"
  echo "set xrange [-0.5:$side - 0.5]"
  echo "set yrange [$side - 0.5:-0.5]"
  if [[ $side != "$ranks" ]]; then
    # Tics name the blocks: every leaf switch, or the first rank of every eighth block.
    local tics
    if [[ -n $topology ]]; then
      tics=$(awk '$1 == "L" { printf "%s\"%s\" %d", (n++ ? ", " : ""), $3, $2 }' "$work/blocks")
      echo "set xtics ($tics) out nomirror rotate by 90 right font 'sans,7'; set ytics ($tics) out nomirror font 'sans,7'"
      echo "set xlabel 'destination leaf switch'"
      echo "set ylabel 'source leaf switch'"
    else
      tics=$(awk '$1 == "L" && $2 % 8 == 0 { printf "%s\"%s\" %d", (n++ ? ", " : ""), $3, $2 }' "$work/blocks")
      echo "set xtics ($tics) out nomirror; set ytics ($tics) out nomirror"
      echo "set xlabel 'destination rank (blocks from the rank shown)'"
      echo "set ylabel 'source rank'"
    fi
  else
    echo "set xlabel 'destination rank'"
    echo "set ylabel 'source rank'"
    if [[ $ranks -le 32 ]]; then echo "set xtics 1 out nomirror; set ytics 1 out nomirror"; fi
  fi
  echo "unset key"
  echo "set style fill solid 1.0 noborder"
  echo "set cbtics out"
  for test in "${tests[@]}"; do
    panel=$((panel + 1))
    dat=$work/mesh-$panel.dat
    if [[ $form == matrix ]]; then
      jq -r --arg test "$test" "$matrix_lines" "$file" | awk "$matrix_cells" > "$dat"
    else
      jq -r --arg test "$test" "$mesh_cells" "$file" > "$dat"
    fi
    if [[ $side != "$ranks" ]]; then
      awk "$block_cells" "$work/blocks" "$dat" > "$dat.blocks"
      dat=$dat.blocks
    fi
    read -r lo hi < <(awk '$3 != "NaN" { v = $3 + 0; if (n++ == 0 || v < lo) lo = v; if (n == 1 || v > hi) hi = v }
      END { if (n) print lo, hi; else print "null", "null" }' "$dat")
    IFS=$'\t' read -r title cbox < <(jq -r --arg test "$test" --arg blocks "$blocks" "$mesh_title" "$meta")
    echo "set title $(quote "$title")"
    echo "set cblabel $(quote "$cbox")"
    # Red is the bad end: low bandwidth, long times.
    if [[ $test == bw ]]; then
      echo "set palette defined (0 '#d73027', 0.5 '#fee08b', 1 '#1a9850')"
    else
      echo "set palette defined (0 '#1a9850', 0.5 '#fee08b', 1 '#d73027')"
    fi
    jq -r --arg test "$test" --argjson lo "$lo" --argjson hi "$hi" "$mesh_colours" "$meta"
    cells="$(quote "$dat") using 2:1:(0.5):(0.5):(\$4 == 1 ? NaN : \$3) with boxxyerror fillcolor palette"
    cells+=", $(quote "$dat") using 2:(\$4 == 1 ? \$1 : NaN):(0.5):(0.5) with boxxyerror fillcolor rgb '#e0e0e0'"
    cells+=", $(quote "$dat") using 2:1:(\$6 == 1 ? 'X' : '') with labels font 'sans,$((font + 4))' textcolor rgb '#b00000'"
    cells+=", $(quote "$dat") using 2:(\$5 == 1 ? \$1 : NaN):(0.44):(0.44) with boxxyerror fillstyle empty border linewidth 3 linecolor rgb '#000000'"
    if [[ $labels == 1 ]]; then
      cells+=", $(quote "$dat") using 2:1:(\$4 == 1 ? '' : sprintf('%.3g', \$3)) with labels font 'sans,$font'"
    fi
    echo "plot $cells"
  done
  [[ ${#tests[@]} -gt 1 ]] && echo "unset multiplot"
  echo "set output"
}

kinds=()
for file in "$@"; do
  [[ -f $file && -r $file ]] || fail "$file: no such readable file"
  kind=$(jq -rs "$kind_of" "$file" 2> /dev/null) || fail "$file: is not JSON"
  case $kind in
    bw | lat | mesh) kinds+=("$kind") ;;
    *) fail "$file: $kind" ;;
  esac
done
if [[ " ${kinds[*]} " == *" mesh "* ]]; then
  [[ $# -eq 1 ]] || fail "an rdma_mesh report is plotted alone: give one, without send_bw reports"
elif [[ -n $topology ]]; then
  fail "--topology is for an rdma_mesh report, not send_bw reports"
fi
if [[ " ${kinds[*]} " == *" mesh "* ]]; then
  plot_mesh "$1" > "$work/plot.gp"
  gnuplot "$work/plot.gp" || { echo "bench-plot: gnuplot failed to write $out" >&2; exit 1; }
  echo "bench-plot: $out"
  exit 0
fi

bw_plots=() lat_plots=() hist_plots=()
n=0
for file in "$@"; do
  kind=${kinds[n]}
  n=$((n + 1))
  dat=$work/$n.dat
  case $kind in
    bw) rows_of bw_average_mib_per_s message_rate_mpps "$file" > "$dat" ;;
    lat) rows_of t_median_us t_p99_us "$file" > "$dat" ;;
  esac
  [[ -s $dat ]] || fail "$file: has no rows with a positive bytes"
  op=$(jq -r '.test.operation // .arguments.operation // "?"' "$file")
  name="$(basename "$file") ($op)"
  style="linespoints linecolor $n pointtype 7 pointsize 0.6"
  style2="linespoints linecolor $n dashtype 2 pointtype 6 pointsize 0.6"
  if [[ $kind == bw ]]; then
    bw_plots+=("$(quote "$dat") using 1:2 axes x1y1 with $style title $(quote "$name MiB/s")"
      "$(quote "$dat") using 1:3 axes x1y2 with $style2 title $(quote "$name Mpps")")
  else
    lat_plots+=("$(quote "$dat") using 1:2 with $style title $(quote "$name median")"
      "$(quote "$dat") using 1:3 with $style2 title $(quote "$name p99")")
    # send_bw --histogram: each row's buckets, a box from low to high as high as the share of
    # the row's samples in it.
    # A file, not a process substitution: a minimal system (the test guest) has no /dev/fd.
    jq -r '.rows | to_entries[] | select((.value.histogram | type) == "array" and (.value.histogram | length) > 0)
      | "\(.key)\t\(.value.bytes)"' "$file" > "$work/$n.rows"
    while IFS=$'\t' read -r row bytes; do
      hist=$work/$n-$row.hist
      jq -r --argjson row "$row" '.rows[$row] | (.histogram | map(.count) | add) as $total
        | .histogram[] | [.low_us, .high_us, .count / $total] | map(tostring) | join(" ")' "$file" > "$hist"
      hist_plots+=("$(quote "$hist") using ((\$1 + \$2) / 2):3:(\$2 - \$1) with boxes fillstyle empty linecolor $((n + row)) title $(quote "$name $bytes B")")
    done < "$work/$n.rows"
  fi
done

# join ITEM...: the items separated by ", \\\n  " (one gnuplot plot command).
join() {
  local IFS=$'\n'
  printf '%s\n' "$*" | sed '$!s/$/, \\/; 2,$s/^/  /'
}

# x axis: powers of two from below the smallest size to above the largest, at most 12 labels
# (counted down from the top one), the other powers as minor ticks; 4K = 4096 and so on.
xaxis=$(cat "$work"/*.dat | awk '
  $1 > 0 { if (min == "" || $1 < min) min = $1; if ($1 > max) max = $1 }
  function label(v) {
    if (v >= 2^30) return (v / 2^30) "G"
    if (v >= 2^20) return (v / 2^20) "M"
    if (v >= 2^10) return (v / 2^10) "K"
    return v
  }
  END {
    lo = 0; while (2^(lo + 1) <= min) lo++
    hi = lo; while (2^hi < max) hi++
    if (hi == lo) { if (lo > 0) lo--; hi++ }
    step = int((hi - lo) / 12) + 1
    printf "set xrange [%.6g:%.6g]\nset xtics (", 2^lo / 2^0.25, 2^hi * 2^0.25
    for (e = lo; e <= hi; e++) {
      if ((hi - e) % step == 0) printf "%s\"%s\" %.0f", (e > lo ? ", " : ""), label(2^e), 2^e
      else printf "%s\"\" %.0f 1", (e > lo ? ", " : ""), 2^e
    }
    print ")"
  }')

panels=$(( (${#bw_plots[@]} > 0) + (${#lat_plots[@]} > 0) + (${#hist_plots[@]} > 0) ))
height=$((panels == 1 ? 600 : 550 * panels))
{
  preamble 1000 "$height"
  echo "set logscale x 2"
  echo "$xaxis"
  echo "set xlabel 'message size (bytes)'"
  echo "set grid xtics ytics linecolor rgb '#d8d8d8'"
  echo "set key outside below center horizontal maxrows 4"
  [[ $panels -gt 1 ]] && echo "set multiplot layout $panels,1"
  if [[ ${#bw_plots[@]} -gt 0 ]]; then
    echo "set title 'send_bw bandwidth (solid: average MiB/s, left; dashed: message rate Mpps, right)'"
    echo "set ylabel 'average bandwidth (MiB/s)'"
    echo "set y2label 'message rate (Mpps)'"
    echo "set yrange [0:*]"
    echo "set y2range [0:*]"
    echo "set ytics nomirror"
    echo "set y2tics"
    echo "plot $(join "${bw_plots[@]}")"
  fi
  if [[ ${#lat_plots[@]} -gt 0 ]]; then
    echo "unset y2label; unset y2tics; set ytics mirror; set autoscale y"
    echo "set title 'send_bw latency (solid: median, dashed: p99)'"
    echo "set ylabel 'latency (µs)'"
    echo "set logscale y 10"
    echo "set format y '%g'"
    echo "plot $(join "${lat_plots[@]}")"
  fi
  if [[ ${#hist_plots[@]} -gt 0 ]]; then
    echo "unset y2label; unset y2tics; set ytics mirror"
    echo "set title 'send_bw latency histogram (--histogram): the share of the samples of each size'"
    echo "set xlabel 'latency (µs)'; set autoscale x; set xtics auto; set logscale x 10; set format x '%g'"
    echo "set ylabel 'share of samples'; unset logscale y; set yrange [0:*]"
    echo "plot $(join "${hist_plots[@]}")"
  fi
  [[ $panels -gt 1 ]] && echo "unset multiplot"
  echo "set output"
} > "$work/plot.gp"
gnuplot "$work/plot.gp" || { echo "bench-plot: gnuplot failed to write $out" >&2; exit 1; }
echo "bench-plot: $out"
