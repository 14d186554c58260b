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
# figures too.
#   mpirun -np 5 build/bin/rdma_mesh --test bw,lat --json-file build/mesh.json
#   scripts/bench-plot.sh build/mesh.png build/mesh.json
# Exits 2 on bad usage or an input that is not a send_bw report with rows or an rdma_mesh
# report with pairs (also for several rdma_mesh reports, or one mixed with send_bw
# reports), 77 when gnuplot (Debian package gnuplot-nox) or jq is missing.
set -euo pipefail
usage="usage: $0 OUT.(svg|png) SWEEP.json [SWEEP.json ...] | MESH.json"
fail() { echo "bench-plot: $*" >&2; exit 2; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { echo "$usage"; exit 0; }
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
  if type == "object" and .tool == "rdma_mesh" then .ranks as $n |
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
# when failed), failed (1/0), outlier (1/0).
# shellcheck disable=SC2016  # jq's variables, not the shell's
mesh_cells='.pairs[] | select(.test == $test)
  | [.source, .destination, (.final_figure // "NaN"), (if .final_figure == null then 1 else 0 end),
     (if .outlier == true then 1 else 0 end)] | map(tostring) | join(" ")'
# The panel's title: the test and the median; the colour-box label: what the figure is, its unit.
# shellcheck disable=SC2016  # jq's variables, not the shell's
mesh_title='(.summary[$test] // {}) as $s | ([.pairs[] | select(.test == $test) | .unit][0] // $s.unit // "") as $u
  | "rdma_mesh \($test): "
    + (if ($s.median | type) == "number"
       then "median \($s.median | if . >= 100 then . * 10 | round / 10 else . * 1000 | round / 1000 end) \($u)"
       else "nothing measured" end)
    + " (\(.ranks) ranks; X: failed, box: outlier)"
    + "\t\($s.figure // "final figure") (\($u))"'
# The colour range: the median in the middle, the outlier limit (--threshold or
# --lat-threshold times the median) at the red end, so that a spread of a few percent does
# not look like a fault; widened to take in every figure.
# shellcheck disable=SC2016  # jq's variables, not the shell's
mesh_colours='(.summary[$test] // {}) as $s | [.pairs[] | select(.test == $test) | .final_figure | numbers] as $f
  | if ($f | length) == 0 then "set cbrange [0:1]"
    elif ($s.median | type) != "number" or ($s.threshold | type) != "number" then "set autoscale cb"
    elif $test == "bw" then
      "set cbrange [\([$f | min, $s.median * $s.threshold] | min):\([$f | max, $s.median * (2 - $s.threshold)] | max)]"
    else "set cbrange [\([$f | min, ([0, $s.median * (2 - $s.threshold)] | max)] | min):\([$f | max, $s.median * $s.threshold] | max)]"
    end'
# plot_mesh MESH.json: its heatmaps, a gnuplot script on stdout (the cells' data in $work).
plot_mesh() {
  local file=$1 ranks tests test dat title cbox cells panel=0 labels font
  ranks=$(jq -r '.ranks' "$file")
  # The report's tests in its order, those with pairs alone.
  mapfile -t tests < <(jq -r '. as $r | (.tests // []) + ([.pairs[].test] | unique)
    | reduce .[] as $t ([]; if any(.[]; . == $t) then . else . + [$t] end)
    | map(select(. as $t | any($r.pairs[]; .test == $t))) | .[]' "$file")
  # Figures in the cells while they are big enough to read.
  labels=$((ranks <= 16))
  font=$((ranks <= 8 ? 11 : 8))
  preamble 900 $((700 * ${#tests[@]}))
  [[ ${#tests[@]} -gt 1 ]] && echo "set multiplot layout ${#tests[@]},1"
  echo "set size ratio -1"
  echo "set xrange [-0.5:$ranks - 0.5]"
  echo "set yrange [$ranks - 0.5:-0.5]"
  echo "set xlabel 'destination rank'"
  echo "set ylabel 'source rank'"
  if [[ $ranks -le 32 ]]; then echo "set xtics 1 out nomirror; set ytics 1 out nomirror"; fi
  echo "unset key"
  echo "set style fill solid 1.0 noborder"
  echo "set cbtics out"
  for test in "${tests[@]}"; do
    panel=$((panel + 1))
    dat=$work/mesh-$panel.dat
    jq -r --arg test "$test" "$mesh_cells" "$file" > "$dat"
    IFS=$'\t' read -r title cbox < <(jq -r --arg test "$test" "$mesh_title" "$file")
    echo "set title $(quote "$title")"
    echo "set cblabel $(quote "$cbox")"
    # Red is the bad end: low bandwidth, long times.
    if [[ $test == bw ]]; then
      echo "set palette defined (0 '#d73027', 0.5 '#fee08b', 1 '#1a9850')"
    else
      echo "set palette defined (0 '#1a9850', 0.5 '#fee08b', 1 '#d73027')"
    fi
    jq -r --arg test "$test" "$mesh_colours" "$file"
    cells="$(quote "$dat") using 2:1:(0.5):(0.5):(\$4 == 1 ? NaN : \$3) with boxxyerror fillcolor palette"
    cells+=", $(quote "$dat") using 2:(\$4 == 1 ? \$1 : NaN):(0.5):(0.5) with boxxyerror fillcolor rgb '#e0e0e0'"
    cells+=", $(quote "$dat") using 2:1:(\$4 == 1 ? 'X' : '') with labels font 'sans,$((font + 4))' textcolor rgb '#b00000'"
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
