#!/bin/bash
# tools/bench/run.sh - the smg-steer benchmark suite (make bench).
#
#   STEER_BUILD=$PWD/build tools/bench/run.sh
#
# As root, in a private network namespace it creates (unshare -n, lo up,
# 127.0.0.0/8 only; the ingress part adds namespaces of its own on a bridge),
# with throwaway cgroups and pin directories. Every figure is measured next
# to an anchor in the same run, the two interleaved round by round. The parts,
# in the order they run (BENCH_PARTS names them):
#
#   conn     short connections (connect, read one byte, close), connbench:
#            direct to one backend; direct64, the client itself round-robining
#            over the 64 backends (the fan-out without steering); vip, the
#            virtual address steered by the real BPF programs over the same 64;
#            HAProxy leastconn (mode tcp) and nginx stream least_conn over them.
#            Rounds interleave the paths, at 1 and 4 concurrent clients. Then
#            connbench --pair: steered and direct side by side in one thread,
#            blocks of connections alternating, placed by the scheduler, on one
#            CPU and across two, with request accounting on (the default) and
#            off (vipnw: --wire-estimator off).
#   wrk      HTTP requests over short connections (wrk, Connection: close)
#            through the same paths to 64 nginx HTTP backends.
#   dec      BPF time per connection, every program a connection meets summed
#            (deccost: connect4, getpeername4, sock_release and request
#            accounting's per packet), at 8, 64 and 256 backends: unsteered,
#            spread, equal, bound (overload protection), affinity (a client
#            that stays; affinity-key: the same by the socket's key),
#            affinity-new (a new client at each connect), spread-key (their
#            anchor: affinity off, the same setsockopt) and rebuild; next
#            to an empty program of each hook type (the floor of dispatch
#            and statistics).
#   ctl      the control plane (ctlplane.py): the real smg-steerd at 100,
#            1,000 and 5,000 backends against one fake worker process,
#            bench/fastworker (C), then the Python reference
#            tests/lib/fake_worker.py --many at 100 and 1,000: cycle and publish
#            time, RSS and CPU per cycle; bare gRPC channels (bench/grpcmem) as
#            the memory anchor.
#   src      the load sources (sources.py): smg-steerd's CPU per poll at 256
#            backends of each source it reads (gRPC SGLang, vLLM, TokenSpeed
#            against bench/fastworker; HTTP /v1/loads and /metrics against
#            nginx; TCP liveness), interleaved; the anchor is gRPC SGLang.
#   wire     request accounting on steered sockets (wirecost over one
#            backend): BPF ns per message and per packet next to an empty
#            program's floor, keep-alive request/response latency and upload
#            throughput, steered and unsteered. Variants interleaved: off (no
#            accounting program), skb (the shipped cgroup_skb pair), step (the
#            same with --wire-estimator fluid-step), push (the same with
#            --peer-push's kick on every request), find and lock (the shipped
#            egress program cut short after the record's lookup and after the
#            service's lock: where a request's BPF time goes; from
#            tools/bench/bpf/wire_cost.bpf.c). Then off, skb, find and min (the
#            least an exact per-socket count writes: a bound, not a design)
#            with the client and the server placed on one CPU, on two, and on
#            two with the received packets handed to the client's CPU by RPS.
#   ingress  clients off the node (ingress.py): network namespaces on a
#            bridge, through smg-steer's XDP path (native and generic mode),
#            nftables DNAT (kube-proxy's numgen layout), HAProxy leastconn,
#            kernel ECMP forwarding and direct to one backend, interleaved;
#            connections per second, and the XDP program's and the decap's ns
#            per packet (bpf_stats).
#   off      what the programs cost an unsteered connection in wall time with
#            the statistics off (offcost): the shipped data plane, the same
#            with request accounting off, empty programs of the shipped hook
#            types and no program, in four sibling cgroups, interleaved; every
#            operation timed by itself (UDP connect + close, a whole unsteered
#            TCP connection, a UDP packet each way, a steered connection),
#            per-round medians paired; then the same rounds with bpf_stats on.
#   peer     routers sharing their request accounting (--peer, peerbench).
#            The kernel half: steer_peer_apply with batches of 1 and 32
#            deltas over a service of 64 backends, and steer_probe_apply
#            (--step-probe) with 1 and 32 packets, in BPF ns per run (bpf_stats)
#            and wall time per BPF_PROG_TEST_RUN (what the daemon's thread pays
#            per batch), next to an empty syscall program, interleaved. Then
#            two real smg-steerd, R1 and R2, --peer each other on 127.0.0.1
#            every BENCH_PEER_INTERVAL over 2 backends (loads from
#            bench/fastworker, polled once): a request sent through R1 on a
#            keep-alive connection, the time until R2's pinned steer_wire shows
#            it (send -> seen) and, once answered, until it is gone there
#            (answer -> seen); and the CPU time of both daemons and of their
#            peer threads idle, during the samples and with steady traffic
#            through both. Once per mode of BENCH_PEER_MODES: tick (reports
#            every interval), push (--peer-push on --peer-phase off: each
#            request reported as it is sent), push-key (push, every report
#            signed and checked with --peer-key).
#   probe    the step probe, live (probecpu.py): smg-steerd --wire-estimator
#            fluid-step --step-probe over BENCH_PROBE_BACKENDS backends that
#            stream a completion event every BENCH_PROBE_STEP s
#            (tests/lib/probe_worker.py; loads from bench/fastworker, so that
#            every backend is healthy): packets and applies per second,
#            steer_probe_apply's BPF ns per run and per packet, and the CPU of
#            the probe thread.
#
# Raw results go to $STEER_BUILD/bench/results/*.csv, the summary (the
# targets' table first, then one section per part: medians over rounds,
# ratios to their anchors) to summary.md there, printed at the end; they
# replace the previous results only when the run completes. Every process,
# pin, cgroup and temp file is removed at exit, also on failure or Ctrl-C.
#
# Knobs (environment, default in parentheses):
#   BENCH_PARTS          the parts to run ("conn wrk dec ctl src wire ingress off
#                        peer probe")
#   BENCH_ROUNDS         rounds of conn, dec and wire (8)
#   BENCH_CONN_SECONDS   each connbench run (1.5)
#   BENCH_PAIR_SECONDS   each connbench --pair run (20); BENCH_PAIR_BLOCK
#                        connections per block (200)
#   BENCH_WRK_ROUNDS     (3); BENCH_WRK_SECONDS each wrk run (5)
#   BENCH_DEC_CONNECTS   connects per deccost measurement (5000)
#   BENCH_DEC_SHAPES     deccost's shapes (all of them; spread is the anchor of
#                        bound and of the affinity shapes)
#   BENCH_CTL_SCALES     backends (100,1000,5000); BENCH_CTL_ROUNDS (2);
#                        BENCH_CTL_PY_SCALES, against the Python worker, one
#                        round (100,1000)
#   BENCH_SRC_ROUNDS     (3); BENCH_SRC_BACKENDS (256)
#   BENCH_WIRE_MESSAGES  round trips per phase (5000); BENCH_WIRE_BULK_MB (32)
#   BENCH_INGRESS_ROUNDS (6); BENCH_INGRESS_SECONDS (1); BENCH_INGRESS_CONC
#                        (1,4); BENCH_INGRESS_ARMS (xdp,xdpg,nft,haproxy,ecmp,direct)
#   BENCH_OFF_ROUNDS     rounds with the statistics off (1500);
#                        BENCH_OFF_ROUNDS_ON with them on (300); BENCH_OFF_CPU
#                        the CPU offcost is pinned to (the last one; "" for none)
#   BENCH_PEER_ROUNDS    steer_peer_apply rounds (BENCH_ROUNDS); BENCH_PEER_RUNS
#                        runs per variant and round (20000)
#   BENCH_PEER_SAMPLES   propagation samples, after 20 not counted (1000)
#   BENCH_PEER_REQUEST   bytes a request (4000; --bytes-per-token 4: 1,000 tokens)
#   BENCH_PEER_INTERVAL  both routers' --peer-interval (1ms)
#   BENCH_PEER_IDLE_SECONDS, BENCH_PEER_BUSY_SECONDS  (10, 10)
#   BENCH_PEER_BUSY_RATE requests/s through each router when busy (2000)
#   BENCH_PEER_READER_GAPS  the samples take turns between a tight reader of
#                        R2's value and one that reads every N us (0,20)
#   BENCH_PEER_MODES     ("tick push push-key")
#   BENCH_PROBE_BACKENDS (16); BENCH_PROBE_STEP s (0.02); BENCH_PROBE_SECONDS (20)
# The machine is shared and noisy: many short interleaved rounds and their
# medians beat a few long ones.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BUILD=${STEER_BUILD:-$top/build}
BIN=$BUILD/bench
RESULTS=$BIN/results # replaced only when a run completes
PY=/usr/bin/python3

ROUNDS=${BENCH_ROUNDS:-8}
CONN_SECONDS=${BENCH_CONN_SECONDS:-1.5}
PAIR_SECONDS=${BENCH_PAIR_SECONDS:-20}
PAIR_BLOCK=${BENCH_PAIR_BLOCK:-200}
WRK_ROUNDS=${BENCH_WRK_ROUNDS:-3}
WRK_SECONDS=${BENCH_WRK_SECONDS:-5}
DEC_CONNECTS=${BENCH_DEC_CONNECTS:-5000}
DEC_SHAPES=${BENCH_DEC_SHAPES:-passthrough,spread,equal,bound,affinity,affinity-key,affinity-new,spread-key,rebuild}
CTL_SCALES=${BENCH_CTL_SCALES:-100,1000,5000}
CTL_ROUNDS=${BENCH_CTL_ROUNDS:-2}
CTL_PY_SCALES=${BENCH_CTL_PY_SCALES:-100,1000}
SRC_ROUNDS=${BENCH_SRC_ROUNDS:-3}
SRC_BACKENDS=${BENCH_SRC_BACKENDS:-256}
WIRE_MESSAGES=${BENCH_WIRE_MESSAGES:-5000}
WIRE_BULK_MB=${BENCH_WIRE_BULK_MB:-32}
ING_ROUNDS=${BENCH_INGRESS_ROUNDS:-6}
ING_SECONDS=${BENCH_INGRESS_SECONDS:-1}
ING_CONC=${BENCH_INGRESS_CONC:-1,4}
ING_ARMS=${BENCH_INGRESS_ARMS:-xdp,xdpg,nft,haproxy,ecmp,direct}
OFF_ROUNDS=${BENCH_OFF_ROUNDS:-1500}
OFF_ROUNDS_ON=${BENCH_OFF_ROUNDS_ON:-300}
OFF_CPU=${BENCH_OFF_CPU-$(($(nproc) - 1))}
PEER_ROUNDS=${BENCH_PEER_ROUNDS:-$ROUNDS}
PEER_RUNS=${BENCH_PEER_RUNS:-20000}
PEER_SAMPLES=${BENCH_PEER_SAMPLES:-1000}
PEER_REQUEST=${BENCH_PEER_REQUEST:-4000}
PEER_INTERVAL=${BENCH_PEER_INTERVAL:-1ms}
PEER_IDLE=${BENCH_PEER_IDLE_SECONDS:-10}
PEER_BUSY=${BENCH_PEER_BUSY_SECONDS:-10}
PEER_BUSY_RATE=${BENCH_PEER_BUSY_RATE:-2000}
PEER_READER_GAPS=${BENCH_PEER_READER_GAPS:-0,20}
PEER_MODES=${BENCH_PEER_MODES:-tick push push-key}
PROBE_N=${BENCH_PROBE_BACKENDS:-16}
PROBE_STEP=${BENCH_PROBE_STEP:-0.02}
PROBE_SECONDS=${BENCH_PROBE_SECONDS:-20}
PARTS=${BENCH_PARTS:-conn wrk dec ctl src wire ingress off peer probe}

if [ "$(id -u)" != 0 ]; then
	echo "bench: must run as root (it loads BPF programs and creates a network namespace)" >&2
	exit 1
fi
for b in onebyte connbench vipctl deccost grpcmem fastworker wirecost xdppass offcost peerbench; do
	[ -x "$BIN/$b" ] || { echo "bench: $BIN/$b missing; run 'make bench'" >&2; exit 1; }
done
COST_OBJ=$BIN/wire_cost.bpf.o # tools/bench/bpf/wire_cost.bpf.c
[ -r "$COST_OBJ" ] || { echo "bench: $COST_OBJ missing; run 'make bench'" >&2; exit 1; }
for b in smg-steerd smg-steerctl; do
	[ -x "$BUILD/$b" ] || { echo "bench: $BUILD/$b missing; run 'make bench'" >&2; exit 1; }
done

# A private network namespace: nothing here can reach beyond this machine's
# loopback, and everything bound here disappears with it.
if [ "${STEER_BENCH_NETNS:-}" != 1 ]; then
	export STEER_BENCH_NETNS=1
	exec unshare -n -- bash "$0" "$@"
fi
ip link set lo up
# Short connections at full speed: a wide ephemeral range (this namespace only).
sysctl -qw net.ipv4.ip_local_port_range="10240 65535"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

cgroot=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$cgroot" ] || { echo "bench: no cgroup2 mount" >&2; exit 1; }
tag="smg-steer-bench-$$"
CG_DP="$cgroot/$tag-dp"   # the VIP path's client
CG_DPNW="$cgroot/$tag-dpnw" # the same without request accounting (--wire-estimator off)
CG_DEC="$cgroot/$tag-dec" # deccost
CG_CTL="$cgroot/$tag-ctl" # the control-plane daemons (nobody connects from it)
CG_CLI="$cgroot/$tag-cli" # the client on the unsteered paths (no programs)
CG_SRV="$cgroot/$tag-srv" # backends and proxies: their CPU time is read from cpu.stat
CG_WIRE="$cgroot/$tag-wire" # wirecost's client (its server stays outside)
CG_OS="$cgroot/$tag-os"   # offcost: the data plane as shipped
CG_OE="$cgroot/$tag-oe"   # offcost: empty programs of the same hook types
CG_ON="$cgroot/$tag-on"   # offcost: no program (its listener and sink live here)
CG_OW="$cgroot/$tag-ow"   # offcost: the data plane with request accounting off
CG_PB="$cgroot/$tag-pb"   # peerbench: the data plane steer_peer_apply is measured on
CG_PR="$cgroot/$tag-pr"   # the step probe's daemon (nobody connects from it)
CG_P1="$cgroot/$tag-p1"   # peerbench: router R1's clients
CG_P2="$cgroot/$tag-p2"   # peerbench: router R2's clients
PIN="/sys/fs/bpf/$tag"    # prefix: $PIN-dp, $PIN-dec, $PIN-ctl-*, $PIN-peer*
NETNS="smgb$$"            # ingress: named network namespaces $NETNS-*
TMP=$(mktemp -d "/tmp/$tag.XXXXXX")
RES=$TMP/results # this run's results, moved to $RESULTS at the end
PIDS=()

cleanup() {
	local p i
	trap - EXIT INT TERM
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		for i in $(seq 50); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	# wire_rps's sysfs, if it was interrupted.
	[ -n "${WIRE_SYSFS:-}" ] && umount "$WIRE_SYSFS" 2>/dev/null || true
	# Pinned links keep programs attached: removing the pins releases them.
	rm -rf "$PIN"-* 2>/dev/null || true
	# ingress.py removes its namespaces itself; these are what a killed one left.
	for ns in $(ip netns list 2>/dev/null | awk -v p="$NETNS-" 'index($1, p) == 1 { print $1 }'); do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
		ip netns del "$ns" 2>/dev/null || true
	done
	# ...and the XDP arms' pins and cgroups (ingress_xdp.py), if a killed daemon left them.
	rm -rf /sys/fs/bpf/"$NETNS"-* 2>/dev/null || true
	for cg in "$cgroot/$NETNS"-*; do
		[ -d "$cg" ] && rmdir "$cg" 2>/dev/null || true
	done
	for cg in "$CG_DP" "$CG_DPNW" "$CG_DEC" "$CG_CTL" "$CG_CLI" "$CG_SRV" "$CG_WIRE" "$CG_OS" "$CG_OE" "$CG_ON" "$CG_OW" "$CG_PB" "$CG_P1" "$CG_P2" "$CG_PR"; do
		[ -d "$cg" ] && rmdir "$cg" 2>/dev/null || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo "bench: interrupted" >&2; exit 130' INT
trap 'exit 143' TERM

mkdir -p "$RES" "$CG_DP" "$CG_DPNW" "$CG_DEC" "$CG_CTL" "$CG_CLI" "$CG_SRV" "$CG_WIRE" "$CG_OS" "$CG_OE" "$CG_ON" "$CG_OW" "$CG_PB" "$CG_P1" "$CG_P2" "$CG_PR"

log() { printf '[%s] %s\n' "$(date +%T)" "$*"; }

# Start a background process, remember it for cleanup.
bg() {
	"$@" &
	PIDS+=("$!")
}

# The same, in a cgroup (the shell execs the command: the PID stays).
bg_in() { # cgroup command...
	bg sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$@"
}

# CPU time used by everything in a cgroup so far, microseconds (cgroup2 cpu.stat).
cg_usec() {
	awk '$1 == "usage_usec" { print $2 }' "$1/cpu.stat"
}

# Run a command in the background and wait for it, so that a signal reaches
# the trap at once rather than after the command.
fg_wait() {
	"$@" &
	local p=$!
	PIDS+=("$p")
	wait "$p"
}

stop_pid() {
	kill -TERM "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

wait_ready() { # file, what
	local i
	for i in $(seq 100); do
		grep -q READY "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "bench: $2 did not start:" >&2
	cat "$1" >&2
	exit 1
}

wait_port() { # host port what
	local i
	for i in $(seq 100); do
		(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "bench: $3 does not listen on $1:$2" >&2
	exit 1
}

# ---- the machine ------------------------------------------------------------------------

machine() {
	local - ver
	set +o pipefail # wrk -v exits 1
	echo "# Machine"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "- cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores," \
		"hypervisor: $(lscpu | sed -n 's/^Hypervisor vendor: *//p' | head -1)"
	echo "- memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "- kernel: $(uname -r)"
	echo "- haproxy: $(haproxy -v 2>&1 | head -1 | awk '{ print $3 }')"
	echo "- nginx: $(nginx -v 2>&1 | sed 's/.*nginx\///')"
	ver=$(wrk -v 2>&1 | head -1 | awk '{ print $2 }')
	echo "- wrk: $ver"
	echo "- clang: $(clang --version | head -1 | sed 's/.*version //')"
	echo "- gcc: $(gcc -dumpfullversion)"
	echo "- libbpf: $(dpkg-query -W -f='${Version}' libbpf1 2>/dev/null || echo '?')," \
		"grpc: $(dpkg-query -W -f='${Version}' libgrpc29 2>/dev/null || echo '?')"
	echo "- smg-steer: $(git -C "$top" describe --always --dirty 2>/dev/null || echo '?')"
	echo "- knobs: rounds $ROUNDS, connbench $CONN_SECONDS s, wrk $WRK_ROUNDS x $WRK_SECONDS s," \
		"decision connects $DEC_CONNECTS, control-plane scales $CTL_SCALES x $CTL_ROUNDS rounds" \
		"(Python worker: $CTL_PY_SCALES x 1), ingress $ING_ROUNDS x $ING_SECONDS s at concurrency $ING_CONC"
}

# ---- backends, anchors and the VIP --------------------------------------------------------

NB=64
VIP=127.0.0.100    # steered by the BPF programs
HAP=127.0.0.101    # HAProxy
NGS=127.0.0.102    # nginx stream
ONE=127.0.1.1      # onebyte backends 127.0.1.1-64:9000
HTTP=127.0.2.1     # nginx HTTP backends 127.0.2.1-64:8080

nth_ip() { # base n -> base + n (last octet, n < 255)
	echo "${1%.*}.$((${1##*.} + $2))"
}

servers() { # base port prefix: one line per backend, "prefix IP:PORT" ($prefix may be empty)
	local i
	for i in $(seq 0 $((NB - 1))); do
		echo "$3 $(nth_ip "$1" "$i"):$2"
	done
}

haproxy_conf() {
	cat <<EOF
global
	maxconn 8000
defaults
	mode tcp
	timeout connect 5s
	timeout client 30s
	timeout server 30s
frontend onebyte
	bind $HAP:8000
	default_backend onebyte
frontend http
	bind $HAP:8080
	default_backend http
backend onebyte
	balance leastconn
$(servers $ONE 9000 "" | awk '{ printf "\tserver s%d %s\n", NR, $1 }')
backend http
	balance leastconn
$(servers $HTTP 8080 "" | awk '{ printf "\tserver s%d %s\n", NR, $1 }')
EOF
}

nginx_stream_conf() {
	cat <<EOF
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes auto;
pid $TMP/nginx-stream/nginx.pid;
error_log $TMP/nginx-stream/error.log warn;
events { worker_connections 8192; }
stream {
	upstream onebyte {
		least_conn;
$(servers $ONE 9000 "" | awk '{ printf "\t\tserver %s;\n", $1 }')
	}
	upstream http {
		least_conn;
$(servers $HTTP 8080 "" | awk '{ printf "\t\tserver %s;\n", $1 }')
	}
	server { listen $NGS:8000; proxy_pass onebyte; }
	server { listen $NGS:8080; proxy_pass http; }
}
EOF
}

nginx_http_conf() {
	local d=$TMP/nginx-http
	cat <<EOF
worker_processes auto;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 8192; }
http {
	access_log off;
	client_body_temp_path $d/body;
	proxy_temp_path $d/proxy;
	fastcgi_temp_path $d/fastcgi;
	uwsgi_temp_path $d/uwsgi;
	scgi_temp_path $d/scgi;
	server {
$(servers $HTTP 8080 "" | awk '{ printf "\t\tlisten %s;\n", $1 }')
		location / { return 200 "ok"; }
	}
}
EOF
}

start_dataplane_paths() {
	log "starting 64 onebyte backends, 64 nginx HTTP backends, the VIP, HAProxy, nginx stream"
	bg_in "$CG_SRV" "$BIN/onebyte" --base $ONE --port 9000 --count $NB >"$TMP/onebyte.out" 2>&1
	wait_ready "$TMP/onebyte.out" onebyte
	mkdir -p "$TMP/nginx-http" "$TMP/nginx-stream"
	nginx_http_conf >"$TMP/nginx-http/nginx.conf"
	bg_in "$CG_SRV" nginx -p "$TMP/nginx-http" -e "$TMP/nginx-http/error.log" \
		-c "$TMP/nginx-http/nginx.conf" -g 'daemon off;'
	nginx_stream_conf >"$TMP/nginx-stream/nginx.conf"
	bg_in "$CG_SRV" nginx -p "$TMP/nginx-stream" -e "$TMP/nginx-stream/error.log" \
		-c "$TMP/nginx-stream/nginx.conf" -g 'daemon off;'
	haproxy_conf >"$TMP/haproxy.cfg"
	bg_in "$CG_SRV" haproxy -f "$TMP/haproxy.cfg" -db >"$TMP/haproxy.log" 2>&1
	bg "$BIN/vipctl" --pin "$PIN-dp" --cgroup "$CG_DP" \
		--service "$VIP:8000=$ONE:9000*$NB" --service "$VIP:8080=$HTTP:8080*$NB" \
		>"$TMP/vipctl.out" 2>&1
	wait_ready "$TMP/vipctl.out" vipctl
	bg "$BIN/vipctl" --pin "$PIN-dpnw" --cgroup "$CG_DPNW" --wire-off \
		--service "$VIP:8000=$ONE:9000*$NB" >"$TMP/vipctl-nw.out" 2>&1
	wait_ready "$TMP/vipctl-nw.out" "vipctl --wire-off"
	wait_port "$(nth_ip $HTTP $((NB - 1)))" 8080 "nginx (HTTP backends)"
	wait_port $NGS 8080 "nginx (stream)"
	wait_port $HAP 8080 haproxy
}

# path name -> address
path_addr() {
	case $1 in
	direct | direct64) echo "$ONE" ;;
	vip | vipnw) echo "$VIP" ;;
	haproxy) echo "$HAP" ;;
	nginx) echo "$NGS" ;;
	esac
}
# direct64 is an extra anchor: the client itself round-robins over the same 64
# backends, no BPF; it separates the cost of the fan-out from that of steering.
CONN_PATHS="direct direct64 vip haproxy nginx"
WRK_PATHS="direct vip haproxy nginx"

# The client's cgroup on a path: the steered ones for vip and vipnw (the same
# data plane without request accounting).
client_cg() {
	case $1 in
	vip) echo "$CG_DP" ;;
	vipnw) echo "$CG_DPNW" ;;
	*) echo "$CG_CLI" ;;
	esac
}

# connbench on one path: path concurrency seconds [extra args]
connbench_path() {
	local p=$1 conc=$2 secs=$3 port=8000 extra=(--cgroup "$(client_cg "$1")")
	shift 3
	case $p in
	direct) port=9000 ;;
	direct64) port=9000 extra+=(--addr-count "$NB") ;;
	esac
	fg_wait "$BIN/connbench" --addr "$(path_addr "$p"):$port" --seconds "$secs" \
		--concurrency "$conc" --label "$p" "${extra[@]}" "$@"
}

loadavg() { # what
	echo "$1: load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RES/load.txt"
}

# ---- conn: short connections, connbench ----------------------------------------------------

conn_part() {
	local out=$RES/conn.csv conc r p c0 s0
	echo "round,path,concurrency,seconds,connections,errors,conns_per_s,p50_us,p99_us,mean_us,per_conn_us,backends_seen,attempts,client_cpu_us,server_cpu_us" >"$out"
	for conc in 1 4; do
		log "connbench: concurrency $conc, warm-up (not counted)"
		for p in $CONN_PATHS; do
			connbench_path "$p" "$conc" 0.5 --warmup-ms 0 >/dev/null
		done
		loadavg "connbench concurrency $conc start"
		for r in $(seq "$ROUNDS"); do
			log "connbench: concurrency $conc, round $r of $ROUNDS"
			for p in $CONN_PATHS; do
				c0=$(cg_usec "$(client_cg $p)") s0=$(cg_usec "$CG_SRV")
				# Not in $(...): a subshell would hide the client from cleanup.
				connbench_path "$p" "$conc" "$CONN_SECONDS" >"$TMP/row"
				echo "$r,$(cat "$TMP/row"),$(($(cg_usec "$(client_cg $p)") - c0)),$(($(cg_usec "$CG_SRV") - s0))" >>"$out"
			done
		done
	done
	loadavg "connbench end"
	conn_pairs
}

# Sequential, steered against unsteered in one thread: blocks of $PAIR_BLOCK
# connections alternate (ABBA), the client moving between the two cgroups; the
# ratio of block medians resolves what per-round means cannot on a shared
# machine (the target: steered / direct <= 1.02). Three placements: free (as
# the scheduler places things: a sequential connection often waits for a vCPU
# to wake from idle, and the client and the backends move between CPUs, which
# makes block times bimodal), onecpu (the client and the backends pinned to
# one CPU: every connection runs the same code path, nothing waits for a
# wake-up) and twocpu (the client on CPU 0, the backends on CPU 1: every
# connection crosses CPUs the same way).
conn_pairs() {
	local out=$RES/conn_pairs.csv cond pair hdr=--header pin=() ob
	ob=$(pgrep -f "^$BIN/onebyte --base $ONE " | head -1)
	for cond in free onecpu twocpu; do
		case $cond in
		onecpu) taskset -a -p -c 0 "$ob" >/dev/null && pin=(taskset -c 0) ;;
		twocpu) taskset -a -p -c 1 "$ob" >/dev/null && pin=(taskset -c 0) ;;
		esac
		loadavg "connbench pairs ($cond) start"
		for pair in vip:direct vip:direct64 vipnw:direct; do
			log "connbench --pair ${pair/:/ against } ($cond), $PAIR_SECONDS s"
			conn_pair_run "${pair%%:*}" "${pair##*:}" "$cond" "${pin[@]}" -- $hdr >>"$out"
			hdr=
		done
	done
	taskset -a -p -c "0-$(($(nproc) - 1))" "$ob" >/dev/null
	loadavg "connbench pairs end"
}

# One connbench --pair run: path-a path-b condition [launcher...] -- [--header]
conn_pair_run() {
	local a=$1 b=$2 cond=$3 launch=() extra=()
	shift 3
	while [ "$1" != -- ]; do launch+=("$1"); shift; done
	shift
	if [ "$b" = direct64 ]; then extra+=(--pair-addr-count "$NB"); fi
	fg_wait "${launch[@]}" "$BIN/connbench" --addr "$(path_addr "$a"):8000" \
		--cgroup "$(client_cg "$a")" --label "$a/$cond" --pair-addr "$(path_addr "$b"):9000" \
		--pair-cgroup "$(client_cg "$b")" --pair-label "$b" --block "$PAIR_BLOCK" \
		--seconds "$PAIR_SECONDS" "${extra[@]}" "$@"
}

# ---- wrk: HTTP over short connections ------------------------------------------------------

# wrk's text output -> "rps,p50_ms,p99_ms,requests,errors"
wrk_parse() {
	awk '
	function ms(v) {
		if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0;
		if (v ~ /s$/) return v * 1000; return v
	}
	/Requests\/sec:/ { rps = $2 }
	$1 == "50%" { p50 = ms($2) }
	$1 == "99%" { p99 = ms($2) }
	/requests in/ { req = $1 }
	/Socket errors:/ { gsub(/,/, ""); err += $4 + $6 + $8 + $10 }
	/Non-2xx/ { err += $NF }
	END { printf "%s,%.3f,%.3f,%s,%d\n", rps, p50, p99, req, err }'
}

wrk_part() {
	local out=$RES/wrk.csv r p addr url c0 s0
	echo "round,path,threads,connections,seconds,requests_per_s,p50_ms,p99_ms,requests,errors,client_cpu_us,server_cpu_us" >"$out"
	loadavg "wrk start"
	for r in $(seq "$WRK_ROUNDS"); do
		log "wrk: round $r of $WRK_ROUNDS"
		for p in $WRK_PATHS; do
			addr=$(path_addr $p)
			[ $p = direct ] && addr=$HTTP
			url="http://$addr:8080/"
			c0=$(cg_usec "$(client_cg $p)") s0=$(cg_usec "$CG_SRV")
			fg_wait sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh \
				"$(client_cg $p)" wrk -t2 -c16 -d"${WRK_SECONDS}s" --latency \
				-H "Connection: close" "$url" >"$TMP/wrk.txt" 2>&1
			echo "$r,$p,2,16,$WRK_SECONDS,$(wrk_parse <"$TMP/wrk.txt"),$(($(cg_usec "$(client_cg $p)") - c0)),$(($(cg_usec "$CG_SRV") - s0))" >>"$out"
		done
	done
	loadavg "wrk end"
}

stop_dataplane_paths() {
	local p
	# vipctl detaches and unpins on SIGTERM; the proxies just stop.
	for p in "${PIDS[@]}"; do
		stop_pid "$p"
	done
	PIDS=()
}

# ---- dec: BPF time per connection ----------------------------------------------------------

dec_part() {
	log "BPF time per connection: 8, 64, 256 backends x $DEC_SHAPES, $ROUNDS rounds"
	loadavg "decision cost start"
	bg "$BIN/onebyte" --base 127.0.3.1 --port 9000 --count 256 >"$TMP/onebyte256.out" 2>&1
	local ob=${PIDS[-1]}
	wait_ready "$TMP/onebyte256.out" "onebyte (256)"
	fg_wait "$BIN/deccost" --pin "$PIN-dec" --cgroup "$CG_DEC" --first 127.0.3.1:9000 \
		--sizes 8,64,256 --shapes "$DEC_SHAPES" \
		--connects "$DEC_CONNECTS" --rounds "$ROUNDS" --header \
		>"$RES/decision.csv"
	stop_pid "$ob"
	loadavg "decision cost end"
}

# ---- ctl: the control plane ----------------------------------------------------------------

ctl_part() {
	log "control plane: smg-steerd at $CTL_SCALES backends, $CTL_ROUNDS rounds, C fake worker"
	loadavg "control plane start"
	fg_wait "$PY" "$here/ctlplane.py" --build "$BUILD" --tmp "$TMP" --cgroup "$CG_CTL" \
		--pin-prefix "$PIN" --scales "$CTL_SCALES" --rounds "$CTL_ROUNDS" --worker fast \
		--samples-csv "$RES/ctl_cycles.csv" --runs-csv "$RES/ctl_runs.csv" \
		--grpcmem-csv "$RES/ctl_grpc.csv"
	log "control plane: smg-steerd at $CTL_PY_SCALES backends, 1 round, Python fake worker"
	fg_wait "$PY" "$here/ctlplane.py" --build "$BUILD" --tmp "$TMP" --cgroup "$CG_CTL" \
		--pin-prefix "$PIN" --scales "$CTL_PY_SCALES" --rounds 1 --worker python \
		--samples-csv "$RES/ctl_py_cycles.csv" --runs-csv "$RES/ctl_py_runs.csv"
	loadavg "control plane end"
}

# ---- src: the load sources -----------------------------------------------------------------

src_part() {
	log "load sources: smg-steerd CPU per poll, $SRC_BACKENDS backends, $SRC_ROUNDS rounds"
	loadavg "load sources start"
	fg_wait "$PY" "$here/sources.py" --build "$BUILD" --tmp "$TMP" --cgroup "$CG_CTL" \
		--pin-prefix "$PIN" --backends "$SRC_BACKENDS" --rounds "$SRC_ROUNDS" \
		--csv "$RES/sources.csv"
	loadavg "load sources end"
}

# ---- wire: request accounting on steered sockets -------------------------------------------

# The split placement again, with this namespace's loopback handing every
# received packet to CPU 0, where the client runs (RPS on lo's rx-0): what
# receive flow steering or IRQ affinity gives a real host. A sysfs mounted
# from this namespace shows its own devices only; it is checked to hold
# nothing but lo before anything is written, and unmounted after.
wire_rps() {
	local sys="$TMP/sys" q
	mkdir -p "$sys"
	mount -t sysfs sysfs "$sys" || return 0
	WIRE_SYSFS=$sys
	q="$sys/class/net/lo/queues/rx-0/rps_cpus"
	if [ "$(ls "$sys/class/net")" = lo ] && [ -w "$q" ] && echo 1 >"$q"; then
		log "request accounting, client on CPU 0, server on CPU 1, received packets on CPU 0 (RPS): off / skb / min / find, $ROUNDS rounds"
		fg_wait "$BIN/wirecost" --pin "$PIN-wire" --cgroup "$CG_WIRE" --cost-obj "$COST_OBJ" \
			--variants off,skb,min,find --cpus split --rounds "$ROUNDS" \
			--messages "$WIRE_MESSAGES" --bulk-mb "$WIRE_BULK_MB" --header >"$RES/wire_rps.csv"
		echo 0 >"$q"
	else
		log "request accounting with RPS: skipped (this namespace's sysfs does not show lo alone)"
	fi
	umount "$sys"
	WIRE_SYSFS=
}

wire_part() {
	log "request accounting: off / skb / find / lock / step / push, $ROUNDS rounds"
	loadavg "wire start"
	fg_wait "$BIN/wirecost" --pin "$PIN-wire" --cgroup "$CG_WIRE" --cost-obj "$COST_OBJ" \
		--variants off,skb,find,lock,step,push --rounds "$ROUNDS" \
		--messages "$WIRE_MESSAGES" --bulk-mb "$WIRE_BULK_MB" --header >"$RES/wire.csv"
	# The same accounting with the client and the server placed: one CPU
	# (a socket's sends and received packets on one CPU, as a NIC's receive
	# flow steering gives) and two (every message's lines move between CPUs).
	for cpus in same split; do
		log "request accounting, client and server on CPUs '$cpus': off / skb / min / find, $ROUNDS rounds"
		fg_wait "$BIN/wirecost" --pin "$PIN-wire" --cgroup "$CG_WIRE" --cost-obj "$COST_OBJ" \
			--variants off,skb,min,find --cpus "$cpus" --rounds "$ROUNDS" \
			--messages "$WIRE_MESSAGES" --bulk-mb "$WIRE_BULK_MB" --header >"$RES/wire_$cpus.csv"
	done
	wire_rps
	loadavg "wire end"
}

# ---- ingress: clients off the node ---------------------------------------------------------

ingress_part() {
	log "ingress: $ING_ARMS through namespaces $NETNS-*, $ING_ROUNDS rounds x $ING_SECONDS s, concurrency $ING_CONC"
	loadavg "ingress start"
	fg_wait "$PY" "$here/ingress.py" run --build "$BUILD" --tmp "$TMP" --prefix "$NETNS" \
		--rounds "$ING_ROUNDS" --seconds "$ING_SECONDS" --concurrency "$ING_CONC" \
		--arms "$ING_ARMS" --csv "$RES/ingress.csv" --bpf-csv "$RES/ingress_bpf.csv"
	loadavg "ingress end"
}

# ---- off: the programs' cost with the statistics off ---------------------------------------

off_part() {
	local cpu=()
	[ -n "$OFF_CPU" ] && cpu=(--cpu "$OFF_CPU")
	log "statistics off: ship / nowire / empty / none, $OFF_ROUNDS rounds off, $OFF_ROUNDS_ON on"
	loadavg "offcost start"
	fg_wait "$BIN/offcost" --pin "$PIN-off" --cgroup-ship "$CG_OS" --cgroup-empty "$CG_OE" \
		--cgroup-none "$CG_ON" --cgroup-nowire "$CG_OW" \
		--rounds "$OFF_ROUNDS" --rounds-on "$OFF_ROUNDS_ON" --hooks "$RES/offcost_hooks.csv" "${cpu[@]}" --header >"$RES/offcost.csv"
	loadavg "offcost end"
}

# ---- peer: routers sharing their request accounting ----------------------------------------

PEER_VIP=127.0.0.110:8000 # steered by R1 and R2
PEER_BE=127.0.5.1         # backends 127.0.5.1-2: traffic on :8000 (peerbench), loads on :30000

# Wait until a log file says something: file pattern what
wait_log() {
	local i
	for i in $(seq 200); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "bench: $3 did not start:" >&2
	tail -20 "$1" >&2
	exit 1
}

# One mode of the propagation samples: two daemons that --peer each other,
# peerbench --part prop between them. tick: reports every interval; push:
# also at each request (--peer-push on), with no random phase.
peer_prop_mode() {
	local mode=$1 i o fw r=() cg=("$CG_P1" "$CG_P2") extra=() sfx=""
	case "$mode" in
	push)
		extra=(--peer-push on --peer-phase off)
		sfx=_push
		;;
	push-key) # the same, every report signed and checked (--peer-key)
		head -c 32 /dev/urandom | base64 >"$TMP/peer.key"
		extra=(--peer-push on --peer-phase off --peer-key "$TMP/peer.key")
		sfx=_pushkey
		;;
	esac
	log "routers sharing request accounting ($mode): R1 -> R2 every $PEER_INTERVAL, $PEER_SAMPLES samples; CPU idle $PEER_IDLE s, busy $PEER_BUSY s"
	bg "$BIN/fastworker" --many 2 --base "$PEER_BE" --port 30000 >"$TMP/peer-fw.out" 2>&1
	fw=${PIDS[-1]}
	wait_ready "$TMP/peer-fw.out" "fastworker (peer)"
	for i in 1 2; do
		o=$((3 - i))
		# Outside both cgroups: only the bench's clients are steered.
		bg "$BUILD/smg-steerd" --pin-path "$PIN-peer$i" --cgroup "${cg[i - 1]}" \
			--metrics-listen "127.0.0.1:948$i" --vip "$PEER_VIP" \
			--backend "$PEER_BE:8000,loads=grpc://$PEER_BE:30000" \
			--backend "$(nth_ip $PEER_BE 1):8000,loads=grpc://$(nth_ip $PEER_BE 1):30000" \
			--load-check-interval 10m --bytes-per-token 4 \
			--peer "127.0.0.1:949$o" --peer-listen "127.0.0.1:949$i" \
			--peer-interval "$PEER_INTERVAL" --peer-timeout 1s "${extra[@]}" >"$TMP/peer-r$i$sfx.log" 2>&1
		r+=("${PIDS[-1]}")
	done
	for i in 1 2; do
		wait_log "$TMP/peer-r$i$sfx.log" "sharing request accounting" "smg-steerd R$i"
	done
	fg_wait "$BIN/peerbench" --part prop --r1-pin "$PIN-peer1" --r2-pin "$PIN-peer2" \
		--r1-cgroup "$CG_P1" --r2-cgroup "$CG_P2" --r1-pid "${r[0]}" --r2-pid "${r[1]}" \
		--r1-metrics 127.0.0.1:9481 --r2-metrics 127.0.0.1:9482 --vip "$PEER_VIP" \
		--first "$PEER_BE:8000" --backends 2 --request-bytes "$PEER_REQUEST" \
		--bytes-per-token 4 --samples "$PEER_SAMPLES" --warmup 20 \
		--idle-seconds "$PEER_IDLE" --busy-seconds "$PEER_BUSY" --busy-rate "$PEER_BUSY_RATE" \
		--cpu-csv "$RES/peer_cpu$sfx.csv" --reader-gap-us "$PEER_READER_GAPS" \
		--header >"$RES/peer_prop$sfx.csv"
	# The routers' own measure of the exchange: R2's round trips to R1.
	"$PY" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
		http://127.0.0.1:9482/metrics | grep '^smg_steer_peer_rtt_seconds' >"$RES/peer_rtt$sfx.txt" || true
	# Each daemon detaches and unpins on SIGTERM; cleanup removes what a killed one left.
	for i in "${r[@]}" "$fw"; do
		stop_pid "$i"
	done
	cp "$TMP/peer-r1$sfx.log" "$RES/peer_r1$sfx.log"
	cp "$TMP/peer-r2$sfx.log" "$RES/peer_r2$sfx.log"
}

peer_part() {
	local mode
	log "routers sharing request accounting: steer_peer_apply (1, 32 deltas), steer_probe_apply (1, 32 packets) and the floor, $PEER_ROUNDS rounds x $PEER_RUNS runs"
	loadavg "peer start"
	fg_wait "$BIN/peerbench" --part bpf --pin "$PIN-peerbpf" --cgroup "$CG_PB" \
		--cost-obj "$COST_OBJ" --first 127.0.4.1:9000 --backends 64 \
		--rounds "$PEER_ROUNDS" --runs "$PEER_RUNS" --header >"$RES/peer_bpf.csv"
	for mode in $PEER_MODES; do
		peer_prop_mode "$mode"
	done
	loadavg "peer end"
}

# ---- probe: the step probe, live -----------------------------------------------------------

PROBE_BE=127.0.8.1 # backends 127.0.8.1-N: tests/lib/probe_worker.py on :8000, loads on :30000

probe_part() {
	local i d fw ip args=()
	log "step probe: smg-steerd --step-probe over $PROBE_N backends, a step every $PROBE_STEP s, $PROBE_SECONDS s"
	loadavg "probe start"
	mkdir -p "$TMP/probe-ctl"
	# Their loads from bench/fastworker: healthy backends, as in production
	# (the probe workers answer any GET with text, which is no load source).
	bg "$BIN/fastworker" --many "$PROBE_N" --base "$PROBE_BE" --port 30000 >"$TMP/probe-fw.out" 2>&1
	fw=${PIDS[-1]}
	wait_ready "$TMP/probe-fw.out" "fastworker (probe)"
	for i in $(seq 0 $((PROBE_N - 1))); do
		ip=$(nth_ip $PROBE_BE "$i")
		bg "$PY" "$top/tests/lib/probe_worker.py" --name "w$i" --traffic "$ip:8000" \
			--control "$TMP/probe-ctl" --step "$PROBE_STEP" --tokens 100000000 >"$TMP/probe-w$i.out" 2>&1
		args+=(--backend "$ip:8000,loads=grpc://$ip:30000")
	done
	for i in $(seq 0 $((PROBE_N - 1))); do
		wait_ready "$TMP/probe-w$i.out" "probe worker $i"
	done
	bg "$BUILD/smg-steerd" --pin-path "$PIN-probe" --cgroup "$CG_PR" --metrics-listen 127.0.0.1:9483 \
		--vip 127.0.0.101:8000 "${args[@]}" --wire-estimator fluid-step \
		--step-probe /v1/completions >"$TMP/probe-d.log" 2>&1
	d=${PIDS[-1]}
	wait_log "$TMP/probe-d.log" "step probe: a streaming POST" "smg-steerd (probe)"
	fg_wait "$PY" "$here/probecpu.py" --pid "$d" --pin "$PIN-probe" --metrics 127.0.0.1:9483 \
		--backends "$PROBE_N" --step "$PROBE_STEP" --warmup 3 --seconds "$PROBE_SECONDS" \
		>"$RES/probe_cpu.md"
	stop_pid "$d"
	stop_pid "$fw"
	cp "$TMP/probe-d.log" "$RES/probe_daemon.log"
	loadavg "probe end"
}

# ---- main -------------------------------------------------------------------------------------

t_start=$(date +%s)
machine >"$RES/machine.md"
{
	echo
	echo "# Commands"
	echo
	echo '```'
	echo "STEER_BUILD=$BUILD $0   # inside: unshare -n, ip link set lo up"
	echo "haproxy -f haproxy.cfg -db          # mode tcp, balance leastconn, 64 servers"
	echo "nginx -c stream.conf -g 'daemon off;'   # stream, least_conn, 64 servers"
	echo "nginx -c http.conf -g 'daemon off;'     # 64 listen lines, return 200 \"ok\""
	echo "onebyte --base $ONE --port 9000 --count $NB"
	echo "vipctl --pin PIN --cgroup CG --service $VIP:8000=$ONE:9000*$NB --service $VIP:8080=$HTTP:8080*$NB"
	echo "connbench --addr ADDR:PORT --seconds $CONN_SECONDS --concurrency {1,4} [--cgroup CG] [--addr-count 64]"
	echo "connbench --addr VIP:8000 --cgroup CG_DP --label vip --pair-addr ONE:9000 --pair-cgroup CG_CLI --pair-label direct [--pair-addr-count 64] --block $PAIR_BLOCK --seconds $PAIR_SECONDS"
	echo "wrk -t2 -c16 -d${WRK_SECONDS}s --latency -H 'Connection: close' http://ADDR:8080/"
	echo "deccost --pin PIN --cgroup CG --first 127.0.3.1:9000 --sizes 8,64,256 --shapes $DEC_SHAPES --connects $DEC_CONNECTS --rounds $ROUNDS"
	echo "ctlplane.py --scales $CTL_SCALES --rounds $CTL_ROUNDS --worker fast   # smg-steerd --config ... vs fastworker --many"
	echo "ctlplane.py --scales $CTL_PY_SCALES --rounds 1 --worker python     # vs tests/lib/fake_worker.py --many"
	echo "sources.py --backends $SRC_BACKENDS --rounds $SRC_ROUNDS   # CPU per poll by load source (fastworker --engine, nginx)"
	echo "wirecost --pin PIN --cgroup CG --cost-obj wire_cost.bpf.o --variants off,skb,find,lock,step,push --rounds $ROUNDS --messages $WIRE_MESSAGES --bulk-mb $WIRE_BULK_MB   # 512 B requests, 256 B responses (stream: in 8 pieces)"
	echo "wirecost ... --variants off,skb,min,find --cpus same|split   # placed; then split again with lo's rx-0 rps_cpus = 1 (received packets on CPU 0, a sysfs mounted in the namespace)"
	echo "ingress.py run --rounds $ING_ROUNDS --seconds $ING_SECONDS --concurrency $ING_CONC --arms $ING_ARMS   # namespaces on a bridge"
	echo "offcost --pin PIN --cgroup-ship CG --cgroup-empty CG --cgroup-none CG --cgroup-nowire CG --rounds $OFF_ROUNDS --rounds-on $OFF_ROUNDS_ON ${OFF_CPU:+--cpu $OFF_CPU}   # statistics off, then on"
	echo "peerbench --part bpf --pin PIN --cgroup CG --cost-obj wire_cost.bpf.o --first 127.0.4.1:9000 --backends 64 --rounds $PEER_ROUNDS --runs $PEER_RUNS   # steer_peer_apply: 1 and 32 deltas; steer_probe_apply: 1 and 32 packets; the empty syscall program"
	echo "smg-steerd --pin-path PIN{1,2} --cgroup CG{1,2} --vip $PEER_VIP --backend $PEER_BE:8000,loads=grpc://$PEER_BE:30000 --backend ... --load-check-interval 10m --bytes-per-token 4 --peer 127.0.0.1:949{2,1} --peer-listen 127.0.0.1:949{1,2} --peer-interval $PEER_INTERVAL --peer-timeout 1s [--peer-push on --peer-phase off [--peer-key FILE]]   # R1, R2 (modes: $PEER_MODES); fastworker --many 2 --base $PEER_BE --port 30000"
	echo "peerbench --part prop --r1-pin PIN1 --r2-pin PIN2 --r1-cgroup CG1 --r2-cgroup CG2 --r1-pid PID1 --r2-pid PID2 --vip $PEER_VIP --first $PEER_BE:8000 --backends 2 --request-bytes $PEER_REQUEST --bytes-per-token 4 --samples $PEER_SAMPLES --warmup 20 --idle-seconds $PEER_IDLE --busy-seconds $PEER_BUSY --busy-rate $PEER_BUSY_RATE --reader-gap-us $PEER_READER_GAPS"
	echo "smg-steerd --vip 127.0.0.101:8000 --backend ADDR:8000,loads=grpc://ADDR:30000 (x$PROBE_N) --wire-estimator fluid-step --step-probe /v1/completions   # probe_worker.py --step $PROBE_STEP on each ADDR:8000; fastworker --many $PROBE_N --base $PROBE_BE --port 30000"
	echo "probecpu.py --backends $PROBE_N --step $PROBE_STEP --warmup 3 --seconds $PROBE_SECONDS"
	echo '```'
} >>"$RES/machine.md"
cat "$RES/machine.md"
echo

case " $PARTS " in *" conn "* | *" wrk "*)
	start_dataplane_paths
	case " $PARTS " in *" conn "*) conn_part ;; esac
	case " $PARTS " in *" wrk "*) wrk_part ;; esac
	stop_dataplane_paths
	;;
esac
case " $PARTS " in *" dec "*) dec_part ;; esac
case " $PARTS " in *" ctl "*) ctl_part ;; esac
case " $PARTS " in *" src "*) src_part ;; esac
case " $PARTS " in *" wire "*) wire_part ;; esac
case " $PARTS " in *" ingress "*) ingress_part ;; esac
case " $PARTS " in *" off "*) off_part ;; esac
case " $PARTS " in *" peer "*) peer_part ;; esac
case " $PARTS " in *" probe "*) probe_part ;; esac

log "done in $(($(date +%s) - t_start)) s; writing $RESULTS/summary.md"
"$PY" "$here/summarize.py" "$RES" >"$RES/summary.md"
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
cp "$RES"/* "$RESULTS"/
echo
cat "$RESULTS/summary.md"
