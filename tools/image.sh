#!/bin/sh
# make image / make image-test: smg-steer's OCI image without a registry.
#
#   tools/image.sh build   a Debian 12 root (mmdebstrap, minbase, no docs) with the
#                          runtime libraries, plus build/smg-steerd and build/smg-steerctl,
#                          committed by buildah as localhost/smg-steer:VERSION and
#                          written to build/image/smg-steer-VERSION.oci.tar
#   tools/image.sh test    runs that image with podman: --version, --check-config of the
#                          shipped configurations, what the manifests' other containers run
#   tools/image.sh dockerfile
#                          builds the Dockerfile with buildah (the mmdebstrap root stands in
#                          for debian:bookworm-slim, which needs a registry), then tests it
#
# The same image as the Dockerfile, for a machine that reaches Debian's packages but no
# container registry. The image storage is private to build/image (vfs driver), so
# nothing is added to the host's own podman or buildah storage. Not part of `make test`:
# building downloads a Debian root.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
O=${O:-build}
case $O in /*) ;; *) O=$top/$O ;; esac
version=$(sed -n 's/^#define STEER_VERSION "\(.*\)"$/\1/p' "$top/user/common/common.h")
name=${IMAGE:-localhost/smg-steer:$version}
work=$O/image
archive=$work/smg-steer-$version.oci.tar
store="--root $work/storage --runroot $work/run --storage-driver vfs"

# Runtime libraries of the two binaries (the rest comes as their dependencies);
# mount is for the DaemonSet's bpffs init container.
runtime="libbpf1 libelf1 zlib1g libgrpc29 libprotobuf-c1 libyaml-0-2 libmicrohttpd12 libjson-c5
libcurl4 libc-ares2 libseccomp2 libcap2 libssl3 mount"

say() { echo "image: $*"; }
die() {
	echo "image: $*" >&2
	exit 1
}

need() {
	command -v "$1" >/dev/null 2>&1 ||
		die "$1 is not installed (Debian package $2; tools/deps.sh image installs it)"
}

# buildah and podman need namespaces and a writable storage; inside some
# containers they have neither. Say so instead of failing obscurely.
can_run() {
	tool=$1
	# shellcheck disable=SC2086
	if ! out=$("$tool" $store info 2>&1); then
		echo "image: $tool cannot run here:" >&2
		echo "$out" | tail -5 | sed 's/^/image:   /' >&2
		exit 1
	fi
}

rootfs() {
	tar=$work/rootfs.tar
	stamp=$work/rootfs.packages
	want=$(echo "$runtime" | tr -s ' \n' '\n' | sort | tr '\n' ' ')
	if [ -s "$tar" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
		say "reusing the Debian 12 root $tar (rm it to download again)"
		return
	fi
	say "building a Debian 12 root with mmdebstrap (downloads about 40 MB)"
	# minbase without documentation, man pages and locales: what debian:bookworm-slim is.
	# shellcheck disable=SC2086
	mmdebstrap --quiet --variant=minbase --aptopt='APT::Install-Recommends "false"' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--include="$(echo $runtime | tr ' ' ',')" \
		--customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
		bookworm "$tar.tmp" || die "mmdebstrap failed (is Debian's mirror reachable?)"
	mv "$tar.tmp" "$tar"
	echo "$want" >"$stamp"
}

build() {
	need mmdebstrap mmdebstrap
	need buildah buildah
	for b in smg-steerd smg-steerctl; do
		[ -x "$O/$b" ] || die "$O/$b is missing: run make first"
	done
	mkdir -p "$work"
	can_run buildah
	rootfs
	# shellcheck disable=SC2086
	ctr=$(buildah $store from --quiet scratch)
	# shellcheck disable=SC2086
	trap 'buildah $store rm "$ctr" >/dev/null 2>&1 || true' EXIT
	# shellcheck disable=SC2086
	{
		buildah $store add --quiet "$ctr" "$work/rootfs.tar" /
		buildah $store copy --quiet --chmod 0755 "$ctr" "$O/smg-steerd" "$O/smg-steerctl" /usr/local/sbin/
		buildah $store copy --quiet --chmod 0644 "$ctr" "$top/docs/deploy/steer.yaml" \
			/etc/smg-steer/steer.yaml.example
		# Same settings as the Dockerfile. Non-root by default: --version,
		# --check-config and the cleanup's idle container need nothing more;
		# smg-steerd and smg-steerctl uninstall run as root with the
		# capabilities the manifests add (docs/deployment.md, "Capabilities instead of privileged").
		buildah $store config --user 65534:65534 \
			--entrypoint '["/usr/local/sbin/smg-steerd"]' \
			--cmd '["--config", "/etc/smg-steer/steer.yaml"]' \
			--label org.opencontainers.image.title=smg-steer \
			--label org.opencontainers.image.version="$version" \
			--label org.opencontainers.image.description="smg-steer: load-aware connection steering; run as root with CAP_BPF CAP_PERFMON CAP_NET_ADMIN CAP_SYS_ADMIN" \
			"$ctr"
		buildah $store commit --quiet --rm "$ctr" "$name" >/dev/null
	}
	trap - EXIT
	rm -f "$archive"
	# shellcheck disable=SC2086
	buildah $store push --quiet "$name" "oci-archive:$archive:$name" ||
		die "cannot write $archive"
	say "built $name ($(du -h "$archive" | cut -f1) in $archive)"
	say "load it elsewhere: podman load -i $archive (or skopeo copy oci-archive:... docker://REGISTRY/...)"
}

n=0
failed=0
check() {
	desc=$1
	shift
	n=$((n + 1))
	if out=$("$@" 2>&1); then
		echo "ok $n - $desc"
		echo "$out" | head -4 | sed 's/^/#   /'
	else
		failed=$((failed + 1))
		echo "not ok $n - $desc"
		echo "$out" | tail -8 | sed 's/^/#   /'
	fi
}

# podman run with the private storage and no network. runc, not crun: crun refuses
# hosts with hybrid cgroups (v1 controllers next to a unified hierarchy). Low
# rlimits: podman's defaults (a million files) need CAP_SYS_RESOURCE, which a build
# container may lack, and lowering a limit never does.
prun() {
	# shellcheck disable=SC2086
	podman $store --runtime=runc --cgroup-manager=cgroupfs --events-backend=file run --rm \
		--network=none --ulimit=nofile=1024:1024 --ulimit=nproc=1024:1024 "$@"
}

expect() {
	want=$1
	shift
	out=$("$@" 2>&1) || {
		echo "$out"
		return 1
	}
	echo "$out"
	echo "$out" | grep -q -- "$want" || {
		echo "(expected: $want)"
		return 1
	}
}

exit_code() {
	want=$1
	shift
	rc=0
	"$@" || rc=$?
	echo "exit $rc"
	[ "$rc" = "$want" ]
}

# The DaemonSet's smg-steerd args and its ConfigMap's steer.yaml, with NODE_IP set.
manifest_config() {
	/usr/bin/python3 - "$top/docs/deploy" "$work/test" <<'EOF'
import os, sys, yaml
deploy, out = sys.argv[1], sys.argv[2]
docs = [d for f in ("smg-steer-daemonset.yaml", "smg-steer-configmap.yaml")
        for d in yaml.safe_load_all(open(os.path.join(deploy, f))) if d]
ds = [d for d in docs if d["kind"] == "DaemonSet"][0]
c = ds["spec"]["template"]["spec"]["containers"][0]
cm = [d for d in docs if d["kind"] == "ConfigMap"][0]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "steer.yaml"), "w") as f:
    f.write(cm["data"]["steer.yaml"])
print("\n".join(a.replace("$(NODE_IP)", "192.0.2.10") for a in c["args"]))
EOF
}

test_image() {
	need podman podman
	need runc runc
	can_run podman
	# shellcheck disable=SC2086
	podman $store image exists "$name" || die "no image $name: run make image first"
	args=$(manifest_config) || die "cannot read the manifests"
	if ! out=$(prun --entrypoint /bin/true "$name" 2>&1); then
		echo "image: podman cannot run a container here:" >&2
		echo "$out" | tail -5 | sed 's/^/image:   /' >&2
		exit 1
	fi
	cfg=$top/docs/deploy/steer.yaml
	check "smg-steerd --version" expect "smg-steerd $version" prun "$name" --version
	check "smg-steerd --check-config on docs/deploy/steer.yaml" \
		expect "configuration ok" prun -v "$cfg:/etc/smg-steer/steer.yaml:ro" "$name" \
		--config /etc/smg-steer/steer.yaml --check-config
	# The host's cgroup2 root where the DaemonSet mounts it (--cgroup is checked).
	cg=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
	# shellcheck disable=SC2086
	check "the DaemonSet's args with its ConfigMap: --check-config" \
		expect "configuration ok" prun -v "$work/test:/etc/smg-steer:ro" \
		-v "$cg:/host/sys/fs/cgroup:ro" "$name" $args --check-config
	check "smg-steerd --check-config refuses a service without backends (exit 2)" \
		exit_code 2 prun "$name" --vip 198.51.100.10:30000 --check-config
	check "smg-steerctl --help lists uninstall (the cleanup DaemonSet)" \
		expect "uninstall" prun --entrypoint /usr/local/sbin/smg-steerctl "$name" --help
	check "runs as a non-root user unless the manifest says root" \
		expect "^65534$" prun --entrypoint /usr/bin/id "$name" -u
	check "the bpffs init container's tools: stat -f, mount; the cleanup's sleep" \
		prun --entrypoint /bin/sh "$name" -c \
		'stat -f -c %T / && command -v mount && command -v sleep'
	# As the cleanup DaemonSet runs it: root, only BPF and SYS_ADMIN, the host's bpffs.
	pin=/sys/fs/bpf/smg-steer-image-test-$$
	mkdir -p "$pin" && bpftool map create "$pin/steer_image_test" type array key 4 value 4 \
		entries 1 name steer_image_test
	check "smg-steerctl uninstall as the cleanup DaemonSet runs it removes a pin directory" \
		expect "uninstalled: 0 link(s) detached, 1 pin(s)" prun --user 0 --cap-drop=all \
		--cap-add=BPF,SYS_ADMIN -v /sys/fs/bpf:/sys/fs/bpf \
		--entrypoint /usr/local/sbin/smg-steerctl "$name" --pin-path="$pin" uninstall
	[ -e "$pin" ] && rm -rf "$pin"
	if [ "$failed" = 0 ]; then
		echo "image-test: all $n checks of $name passed"
	else
		echo "image-test: $failed of $n checks of $name FAILED"
		exit 1
	fi
}

# The Dockerfile, built by buildah without a registry: the Debian root made above is
# tagged as the base image it names, and its build stage installs from Debian's mirror.
dockerfile() {
	need buildah buildah
	need mmdebstrap mmdebstrap
	mkdir -p "$work"
	can_run buildah
	rootfs
	base=docker.io/library/debian:bookworm-slim
	# shellcheck disable=SC2086
	ctr=$(buildah $store from --quiet scratch)
	# shellcheck disable=SC2086
	{
		buildah $store add --quiet "$ctr" "$work/rootfs.tar" /
		buildah $store commit --quiet --rm "$ctr" "$base" >/dev/null
		say "building the Dockerfile (log: $work/dockerfile.log)"
		buildah $store bud --isolation=chroot --pull-never --layers=false \
			-t "$name-dockerfile" -f "$top/Dockerfile" "$top" >"$work/dockerfile.log" 2>&1 ||
			{ tail -20 "$work/dockerfile.log" >&2 && false; }
		buildah $store rmi "$base" >/dev/null
	} || die "buildah could not build the Dockerfile"
	say "built $name-dockerfile from the Dockerfile"
	name=$name-dockerfile
	test_image
}

case ${1:-} in
build) build ;;
test) test_image ;;
dockerfile) dockerfile ;;
*)
	echo "usage: $0 build|test|dockerfile" >&2
	exit 2
	;;
esac
