#!/bin/sh
# Install the Debian packages smg-steer needs, only those missing.
# Usage: tools/deps.sh [build|test|bench]   (each set includes the previous)
#        tools/deps.sh image                  (make image: build set + image tools)
# Idempotent: when everything is present it prints nothing and changes nothing.
set -eu

set_build="make gcc clang llvm pkg-config libbpf-dev bpftool libelf-dev zlib1g-dev linux-libc-dev
protobuf-c-compiler libprotobuf-c-dev libgrpc-dev libyaml-dev libmicrohttpd-dev libcmocka-dev libjson-c-dev
protobuf-compiler libcurl4-openssl-dev libc-ares-dev libseccomp-dev libcap-dev libssl-dev"
set_test="python3-grpcio python3-protobuf python3-yaml python3-prometheus-client
iproute2 util-linux procps libclang-rt-14-dev curl stress-ng dnsmasq-base"
set_bench="haproxy nginx libnginx-mod-stream wrk gnuplot-nox nftables"
set_image="mmdebstrap buildah podman runc uidmap"

want="$set_build"
case "${1:-build}" in
build) ;;
test) want="$want $set_test" ;;
bench | all) want="$want $set_test $set_bench" ;;
image) want="$want $set_image python3-yaml" ;;
*) echo "usage: $0 [build|test|bench|image]" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
	st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	case "$st" in
	ii*) ;;
	*) missing="$missing $p" ;;
	esac
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "smg-steer: missing Debian packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "smg-steer: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
# haproxy and nginx are only benchmark anchors: do not start them as services.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >&2
