# Plots of a steer-sim results.csv (tools/sim/run.sh calls this).
# Usage: gnuplot -e "csv='build/sim/results.csv'; outdir='build/sim'" tools/sim/plot.gp
# Columns: 1 scenario, 2 policy, 3 variant, 6 routers, 7 load, 8 poll_s, 16 p99_s,
# 26 estimator (smg-steer's: fluid as it is, flat for the flat credit alone; "-" for others).

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
	set terminal pngcairo size 960,640 font "sans,11"
} else {
	set terminal png size 960,640
}

# "x p99" pairs of one series, sorted by x.
seriese(scen, pol, var, est, xcol) = sprintf("< awk -F, '$1==\"%s\" && $2==\"%s\" && $3==\"%s\" && $26==\"%s\" {print %s, $16}' '%s' | sort -g", scen, pol, var, est, xcol, csv)
est_of(p) = (p eq "steer" || p eq "steer-peers") ? "fluid" : "-"
series(scen, pol, var, xcol) = seriese(scen, pol, var, est_of(pol), xcol)

# Round robin and random are left out: blind to the workers' speeds, they
# overload the slow half of the fleet and their p99 (thousands of seconds,
# growing with the run) would flatten every other line. They are in the CSV.
policies = "jsq p2c reqcount steer oracle"
title_of(p) = (p eq "reqcount") ? "reqcount (smg before #1647)" : \
	(p eq "steer") ? "smg-steer" : (p eq "oracle") ? "oracle (true state)" : \
	(p eq "jsq") ? "JSQ (own connections)" : (p eq "p2c") ? "power of two" : \
	(p eq "rr") ? "round robin" : p
color_of(p) = (p eq "rr") ? "#999999" : (p eq "random") ? "#bbbbbb" : (p eq "jsq") ? "#1f77b4" : \
	(p eq "p2c") ? "#17becf" : (p eq "reqcount") ? "#ff7f0e" : (p eq "steer") ? "#d62728" : \
	(p eq "steer-peers") ? "#9467bd" : "#2ca02c"
width_of(p) = (p eq "steer" || p eq "steer-peers") ? 3 : 1.5

set grid
set logscale y
set ylabel "p99 queueing wait (s), log scale"
set key below maxrows 3 width -2 font ",10"
set label 1 "round robin, random: unstable (p99 > 1000 s), not drawn" at graph 0.01, graph 0.97 left font ",9"

set output outdir . "/p99_vs_load.png"
set title "p99 wait vs offered load (bimodal, 16 workers, 1 s poll, 1 router)"
set xlabel "offered load (% of fleet prefill capacity); the oracle p99 at 50 % is 0"
plot for [p in policies] series("load", p, "base", "$7*100") with linespoints \
	lw width_of(p) lc rgb color_of(p) pt 7 ps 0.8 title title_of(p), \
	seriese("load", "steer", "base", "flat", "$7*100") with linespoints dt 2 lw 2 \
	lc rgb "#d62728" pt 6 title "smg-steer, flat credit alone"

set output outdir . "/p99_vs_poll.png"
set title "p99 wait vs poll interval (bimodal, 80 % load, 16 workers, 1 router)"
set xlabel "poll interval (s), log scale"
set logscale x
set xrange [0.08:12]
plot for [p in policies] series("poll", p, "base", "$8") with linespoints \
	lw width_of(p) lc rgb color_of(p) pt 7 ps 0.8 title title_of(p), \
	seriese("poll", "steer", "base", "flat", "$8") with linespoints dt 2 lw 2 lc rgb "#d62728" pt 6 \
	title "smg-steer, flat credit alone", \
	seriese("poll", "steer", "running", "flat", "$8") with linespoints dt 3 lw 2 lc rgb "#e377c2" pt 6 \
	title "flat credit, running prefill reported", \
	seriese("poll", "steer", "running", "credit", "$8") with linespoints dt 4 lw 2 lc rgb "#8c564b" pt 4 \
	title "real prompt credited (wire-credit), running prefill reported"
unset logscale x
set autoscale x

set output outdir . "/p99_vs_routers.png"
set title "p99 wait vs independent routers (bimodal, 80 % load, 16 workers, 1 s poll)"
set xlabel "routers (arrivals split at random), log scale"
set logscale x 2
set xrange [0.8:20]
set xtics (1, 2, 4, 8, 16)
plot for [p in "jsq p2c reqcount steer steer-peers oracle"] series("routers", p, "base", "$6") \
	with linespoints lw width_of(p) lc rgb color_of(p) pt 7 ps 0.8 \
	title (p eq "steer-peers" ? "smg-steer, --peer-routers = routers" : title_of(p)), \
	series("routers", "steer", "jitter", "$6") with linespoints dt 2 lw 2 lc rgb "#d62728" pt 6 \
	title "smg-steer, --peer-routers 1, phase forced (ablation)", \
	seriese("routers", "steer-peers", "base", "flat", "$6") with linespoints dt 3 lw 2 \
	lc rgb "#9467bd" pt 6 title "smg-steer, flat credit alone, --peer-routers = routers"
unset logscale x
set autoscale x
set xtics autofreq

set output outdir . "/p99_vs_workers.png"
set title "p99 wait vs fleet size (bimodal, 80 % load, 1 s poll, 1 router)"
set xlabel "workers, log scale"
set logscale x 2
set xrange [3.2:40]
set xtics (4, 8, 16, 32)
plot for [p in policies] series("workers", p, "base", "$5") with linespoints \
	lw width_of(p) lc rgb color_of(p) pt 7 ps 0.8 title title_of(p), \
	seriese("workers", "steer", "base", "flat", "$5") with linespoints dt 2 lw 2 \
	lc rgb "#d62728" pt 6 title "smg-steer, flat credit alone"
