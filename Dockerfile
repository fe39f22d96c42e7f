# smg-steer's container image: smg-steerd and smg-steerctl on Debian 12 slim.
#
#   docker build -t registry.example.com/smg-steer:0.1.0 .
#
# Without a registry, `make image` builds the same image with buildah from a Debian 12
# root (mmdebstrap) and `make image-test` runs it with podman (docs/deployment.md).
#
# The build stage needs the build host's BTF (/sys/kernel/btf/vmlinux, readable in
# `docker build` on any kernel with CONFIG_DEBUG_INFO_BTF=y): the BPF programs are
# compiled against it (CO-RE, so the image runs on other kernels too).
#
# Capabilities. The image runs as nobody (65534) by default, which is enough for
# --version, --check-config and the cleanup DaemonSet's idle container. smg-steerd and
# `smg-steerctl uninstall` must run as root (the manifests set runAsUser: 0) with:
#   smg-steerd     BPF, PERFMON, NET_ADMIN, SYS_ADMIN (all four; docs/deployment.md, "Capabilities instead of privileged")
#   uninstall      BPF, SYS_ADMIN
#   mount-bpf-fs   privileged (its Bidirectional mount needs it; one shell line)
# and the host's /sys/fs/bpf and /sys/fs/cgroup mounted as in the DaemonSet.

FROM debian:bookworm-slim AS build
WORKDIR /src
COPY tools/deps.sh tools/deps.sh
RUN tools/deps.sh build && rm -rf /var/lib/apt/lists/*
COPY . .
RUN make clean && make -j"$(nproc)" O=build build/smg-steerd build/smg-steerctl

FROM debian:bookworm-slim
# The binaries' runtime libraries (the rest come as dependencies); mount for the
# DaemonSet's bpffs init container. The same list as tools/image.sh.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libbpf1 libelf1 zlib1g libgrpc29 libprotobuf-c1 libyaml-0-2 libmicrohttpd12 \
        libjson-c5 libcurl4 libc-ares2 libseccomp2 libcap2 libssl3 mount \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build --chmod=0755 /src/build/smg-steerd /src/build/smg-steerctl /usr/local/sbin/
COPY --chmod=0644 docs/deploy/steer.yaml /etc/smg-steer/steer.yaml.example
LABEL org.opencontainers.image.title="smg-steer" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.description="smg-steer: load-aware connection steering; run as root with CAP_BPF CAP_PERFMON CAP_NET_ADMIN CAP_SYS_ADMIN"
USER 65534:65534
ENTRYPOINT ["/usr/local/sbin/smg-steerd"]
CMD ["--config", "/etc/smg-steer/steer.yaml"]
