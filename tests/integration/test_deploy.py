#!/usr/bin/python3
"""Deployment files and operator documentation (docs/deploy/, docs/*.md, the man page).

No cluster is used: the Kubernetes manifests are checked structurally, and
every smg-steerd configuration they carry (the ConfigMap, docs/deploy/steer.yaml,
the systemd unit's command line, render-backends.py's output) is fed to the
real smg-steerd from $STEER_BUILD.

How the real parser is used: `smg-steerd --check-config` parses and validates
every flag and the whole --config file (services included), prints a summary
and exits 0, or exits 2 with the reason; nothing is loaded, attached or bound.
"""
import configparser
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import yaml

from taplib import Tap

TOP = os.environ.get("STEER_TOP") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("STEER_BUILD") or os.path.join(TOP, "build", "san")
DOCS = os.path.join(TOP, "docs")
DEPLOY = os.path.join(DOCS, "deploy")
STEERD = os.path.join(BUILD, "smg-steerd")
CTL = os.path.join(BUILD, "smg-steerctl")
MAN = os.path.join(DOCS, "man", "smg-steerd.8")
# Long options of other tools that the docs show: kubectl (--dry-run, --from-file,
# --from-literal for the --peer-key Secret),
# setpriv (--bounding-set, --inh-caps), systemctl (--now).
# tools/sim/run.sh takes --quick; wrk --latency.
# kubectl delete --cascade, kubectl logs --prefix.
FOREIGN_FLAGS = {"--dry-run", "--from-file", "--from-literal", "--bounding-set", "--inh-caps", "--now", "--quick",
                 "--latency", "--cascade", "--prefix",
                 "--cpu", "--cpu-load", "--runtime"}  # stress-ng's and podman's, in benchmarks/deployment


def source_flags():
    """Long options the benchmark tools and the fake worker define in their
    sources (getopt_long tables, argparse): they are not built by make test."""
    flags = set()
    for path in glob.glob(os.path.join(TOP, "tools", "bench", "*.c")):
        flags |= {"--" + m for m in re.findall(r'\{\s*"([a-z][a-z0-9-]*)"\s*,', read(path))}
    for path in glob.glob(os.path.join(TOP, "tools", "bench", "*.py")) + \
            [os.path.join(TOP, "tests", "lib", "fake_worker.py")]:
        flags |= set(re.findall(r'add_argument\(\s*"(--[a-z][a-z0-9-]*)"', read(path)))
    return flags

t = Tap()


def read(path):
    with open(path) as f:
        return f.read()


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, **kw)


def daemon_verdict(args):
    """('accepted' | 'rejected' | 'unexpected', output) of smg-steerd args."""
    p = run([STEERD] + list(args) + ["--check-config"])
    out = p.stdout + p.stderr
    if p.returncode == 2:
        return "rejected", out
    if p.returncode == 0 and out.startswith("configuration ok"):
        return "accepted", out
    return "unexpected", f"exit {p.returncode}: {out}"


def local_cgroup2_root():
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup2":
                return fields[1]
    return "/sys/fs/cgroup"


def config_verdict(text, args=()):
    with tempfile.TemporaryDirectory(prefix="smg-steer-deploy-") as d:
        path = os.path.join(d, "steer.yaml")
        with open(path, "w") as f:
            f.write(text)
        return daemon_verdict(["--config", path] + list(args))


# ---- the manifests --------------------------------------------------------------------

def load_deploy_documents():
    """{file: [documents]} of every YAML file under docs/deploy."""
    out = {}
    for path in sorted(glob.glob(os.path.join(DEPLOY, "*.yaml"))):
        with open(path) as f:
            out[os.path.basename(path)] = [d for d in yaml.safe_load_all(f) if d is not None]
    return out


def objects(docs, kind):
    return [d for ds in docs.values() for d in ds if isinstance(d, dict) and d.get("kind") == kind]


def named_daemonset(docs, name):
    ds = [d for d in objects(docs, "DaemonSet") if d["metadata"]["name"] == name]
    t.check(len(ds) == 1, f"expected one DaemonSet {name} under docs/deploy, found {len(ds)}")
    return ds[0]


def the_daemonset(docs):
    return named_daemonset(docs, "smg-steer")


def the_cleanup(docs):
    return named_daemonset(docs, "smg-steer-cleanup")


def all_containers(ds):
    pod = ds["spec"]["template"]["spec"]
    return pod.get("initContainers", []) + pod["containers"]


def the_container(ds):
    cs = ds["spec"]["template"]["spec"]["containers"]
    found = [c for c in cs if "smg-steerd" in " ".join(c.get("command", []) + c.get("args", []))]
    t.check(len(found) == 1, "no container runs smg-steerd")
    return found[0]


def flag_value(args, name):
    """The value of --name=V or --name V in an argument list, or None."""
    for i, a in enumerate(args):
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
        if a == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
    return None


def metrics_port(container):
    port = container["ports"][0]
    t.check(port.get("name") == "metrics", f"first port should be named metrics: {port}")
    return port["containerPort"]


def probe_port(container, probe):
    port = container[probe]["httpGet"]["port"]
    if isinstance(port, str):
        named = [p["containerPort"] for p in container["ports"] if p.get("name") == port]
        t.check(named, f"{probe} uses port name {port!r} that the container does not declare")
        return named[0]
    return port


def mounts_by_volume(container):
    return {m["name"]: m for m in container.get("volumeMounts", [])}


def host_volumes(ds):
    return {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}


def substitute_env(args, env):
    """Kubernetes expands $(VAR) in args from the container's env."""
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in args]


DOCS_ENV = {"NODE_IP": "192.0.2.10"}


def configmap_config(docs, ds, container):
    """(config text, the args with --config pointing at the copy's name) of the
    ConfigMap the DaemonSet mounts."""
    vols = host_volumes(ds)
    cfg_path = flag_value(container["args"], "config")
    t.check(cfg_path, "the DaemonSet passes no --config")
    mount = [m for m in container["volumeMounts"]
             if cfg_path.startswith(m["mountPath"].rstrip("/") + "/")]
    t.check(len(mount) == 1, f"--config {cfg_path} is on no volume mount")
    vol = vols[mount[0]["name"]]
    t.check("configMap" in vol, f"--config {cfg_path} is not on a ConfigMap volume")
    name = vol["configMap"]["name"]
    ns = ds["metadata"].get("namespace")
    cms = [c for c in objects(docs, "ConfigMap")
           if c["metadata"]["name"] == name and c["metadata"].get("namespace") == ns]
    t.check(len(cms) == 1, f"ConfigMap {ns}/{name} is not under docs/deploy")
    key = os.path.relpath(cfg_path, mount[0]["mountPath"])
    t.check(key in cms[0]["data"], f"ConfigMap {name} has no key {key!r}")
    return cms[0]["data"][key], cfg_path


with t.case("every YAML document under docs/deploy parses; the expected objects exist"):
    DOCS_YAML = load_deploy_documents()
    for f in ("smg-steer-daemonset.yaml", "smg-steer-configmap.yaml",
              "smg-steer-workers-service.yaml", "steer.yaml"):
        t.check(f in DOCS_YAML and DOCS_YAML[f], f"docs/deploy/{f} is missing or empty")
    for f, ds in DOCS_YAML.items():
        for d in ds:
            t.check(isinstance(d, dict), f"{f}: a document is not a mapping")
            if f != "steer.yaml":
                t.check("apiVersion" in d and "kind" in d and "name" in d.get("metadata", {}),
                        f"{f}: an object without apiVersion, kind or metadata.name")

with t.case("DaemonSet: apps/v1, selector matches the template, image, smg-steerd, rolling update"):
    ds = the_daemonset(DOCS_YAML)
    t.check(ds["apiVersion"] == "apps/v1", f"apiVersion {ds['apiVersion']}")
    sel = ds["spec"]["selector"]["matchLabels"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    t.check(sel and all(labels.get(k) == v for k, v in sel.items()),
            f"selector {sel} does not match template labels {labels}")
    c = the_container(ds)
    t.check(c.get("image"), "container without an image")
    us = ds["spec"]["updateStrategy"]
    t.check(us["type"] == "RollingUpdate" and us["rollingUpdate"]["maxUnavailable"] == 1,
            f"updateStrategy {us}")
    t.check("--keep-pinned" in c["args"], "rolling updates need --keep-pinned")
    grace = ds["spec"]["template"]["spec"].get("terminationGracePeriodSeconds")
    t.check(isinstance(grace, int) and grace >= 5, f"terminationGracePeriodSeconds {grace}")
    ns = [n["metadata"]["name"] for n in objects(DOCS_YAML, "Namespace")]
    t.check(ds["metadata"]["namespace"] in ns, "the DaemonSet's namespace is not defined")

with t.case("DaemonSet: capabilities instead of privileged, and what the API server demands"):
    ds = the_daemonset(DOCS_YAML)
    c = the_container(ds)
    sc = c["securityContext"]
    added = set(sc["capabilities"]["add"])
    t.check({"BPF", "NET_ADMIN", "SYS_ADMIN"} <= added, f"capabilities.add {sorted(added)}")
    t.check("ALL" in sc["capabilities"].get("drop", []), "drop ALL first")
    t.check(sc.get("privileged") is not True, "privileged: capabilities should do")
    # API validation: Bidirectional propagation only for privileged containers,
    # and allowPrivilegeEscalation: false is refused with SYS_ADMIN.
    for ds_ in (ds, the_cleanup(DOCS_YAML)):
        for cc in all_containers(ds_):
            priv = cc.get("securityContext", {}).get("privileged") is True
            for m in cc.get("volumeMounts", []):
                t.check(m.get("mountPropagation") != "Bidirectional" or priv,
                        f"{cc['name']}: {m['name']}: Bidirectional needs privileged: true")
    t.check(sc.get("allowPrivilegeEscalation") is not False,
            "allowPrivilegeEscalation: false cannot be combined with SYS_ADMIN")
    pod = ds["spec"]["template"]["spec"]
    t.check(pod.get("hostNetwork") is True, "hostNetwork should be true")
    t.check(pod.get("hostPID", False) is False, "hostPID should be false")

with t.case("DaemonSet: hostPath /sys/fs/bpf and the cgroup root are mounted and used"):
    ds = the_daemonset(DOCS_YAML)
    c = the_container(ds)
    vols = host_volumes(ds)
    mounts = mounts_by_volume(c)
    by_host = {v["hostPath"]["path"]: n for n, v in vols.items() if "hostPath" in v}
    t.check("/sys/fs/bpf" in by_host and "/sys/fs/cgroup" in by_host,
            f"hostPath volumes {sorted(by_host)}")
    bpf_mount = mounts[by_host["/sys/fs/bpf"]]["mountPath"]
    cg_mount = mounts[by_host["/sys/fs/cgroup"]]["mountPath"]
    pin = flag_value(c["args"], "pin-path") or "/sys/fs/bpf/smg-steer"
    t.check(pin.startswith(bpf_mount.rstrip("/") + "/"),
            f"--pin-path {pin} is not inside the bpffs mount {bpf_mount}")
    cg = flag_value(c["args"], "cgroup")
    t.check(cg and (cg == cg_mount or cg.startswith(cg_mount.rstrip("/") + "/")),
            f"--cgroup {cg} is not the mounted host cgroup root {cg_mount}: without it the "
            "daemon would attach to the container's own cgroup namespace")
    t.check(mounts[by_host["/sys/fs/bpf"]].get("mountPropagation") in
            ("HostToContainer", "Bidirectional"), "bpffs must see the host's mounts")

with t.case("DaemonSet: probes on /healthz and Prometheus annotations on the metrics port"):
    ds = the_daemonset(DOCS_YAML)
    c = the_container(ds)
    port = metrics_port(c)
    for probe in ("livenessProbe", "readinessProbe"):
        t.check(c[probe]["httpGet"]["path"] == "/healthz", f"{probe} path")
        t.check(probe_port(c, probe) == port, f"{probe} is not on the metrics port {port}")
    listen = substitute_env([flag_value(c["args"], "metrics-listen")], DOCS_ENV)[0]
    t.check(listen.rsplit(":", 1)[1] == str(port),
            f"--metrics-listen {listen} does not match the metrics port {port}")
    t.check(not listen.startswith("127."), "kubelet probes the node address, not loopback")
    ann = ds["spec"]["template"]["metadata"]["annotations"]
    t.check(ann.get("prometheus.io/scrape") == "true", "prometheus.io/scrape")
    # Pod discovery scrapes the declared port; an annotation would be one more copy.
    t.check(ann.get("prometheus.io/port", str(port)) == str(port), "prometheus.io/port")
    res = c["resources"]
    t.check({"cpu", "memory"} <= set(res["requests"]) and {"memory"} <= set(res["limits"]),
            f"resources {res}")

with t.case("DaemonSets tolerate every taint: GPU and tainted nodes get steering too"):
    for ds in (the_daemonset(DOCS_YAML), the_cleanup(DOCS_YAML)):
        tol = ds["spec"]["template"]["spec"].get("tolerations", [])
        # Only {operator: Exists} without key or effect matches every taint.
        t.check({"operator": "Exists"} in tol, f"{ds['metadata']['name']}: tolerations {tol}")

with t.case("the priority class works in the DaemonSet's namespace"):
    ds = the_daemonset(DOCS_YAML)
    ns = ds["metadata"]["namespace"]
    for d in (ds, the_cleanup(DOCS_YAML)):
        name = d["spec"]["template"]["spec"].get("priorityClassName")
        t.check(name, f"{d['metadata']['name']}: no priorityClassName")
        if name.startswith("system-"):
            # GKE admits system-* classes only in kube-system (cilium/cilium#13852).
            t.check(ns == "kube-system", f"{name} outside kube-system (namespace {ns})")
            continue
        pcs = [p for p in objects(DOCS_YAML, "PriorityClass") if p["metadata"]["name"] == name]
        t.check(len(pcs) == 1, f"PriorityClass {name} is not shipped under docs/deploy")
        pc = pcs[0]
        t.check(pc["apiVersion"] == "scheduling.k8s.io/v1", pc["apiVersion"])
        # The API server refuses a user-defined class above one billion.
        t.check(isinstance(pc["value"], int) and 0 < pc["value"] <= 1000000000,
                f"value {pc['value']}")
        t.check(pc.get("globalDefault") is not True, "globalDefault would apply to every pod")
        t.check("namespace" not in pc["metadata"], "PriorityClass is cluster-scoped")


def bpffs_init_container(ds):
    pod = ds["spec"]["template"]["spec"]
    vol = {v["name"]: v for v in pod["volumes"]}
    found = [c for c in pod.get("initContainers", []) for m in c.get("volumeMounts", [])
             if vol[m["name"]].get("hostPath", {}).get("path") == "/sys/fs/bpf"]
    t.check(len(found) == 1, "no init container mounts the host's /sys/fs/bpf")
    return found[0]


with t.case("an init container mounts bpffs when missing, with Bidirectional propagation"):
    ds = the_daemonset(DOCS_YAML)
    ic = bpffs_init_container(ds)
    c = the_container(ds)
    vols = host_volumes(ds)
    bpf_vol = [n for n, v in vols.items() if v.get("hostPath", {}).get("path") == "/sys/fs/bpf"][0]
    im = mounts_by_volume(ic)[bpf_vol]
    t.check(im.get("mountPropagation") == "Bidirectional",
            f"init container's bpffs mount: {im}: its mount must reach the host")
    t.check(ic["securityContext"].get("privileged") is True, "Bidirectional needs privileged")
    cm = mounts_by_volume(c)[bpf_vol]
    t.check(cm["mountPath"] == im["mountPath"] and cm.get("mountPropagation") == "HostToContainer",
            f"daemon's bpffs mount {cm}: HostToContainer at the init container's path")
    t.check(vols[bpf_vol]["hostPath"].get("type") in ("DirectoryOrCreate", "Directory"),
            vols[bpf_vol]["hostPath"])
    cmd = ic.get("command", []) + ic.get("args", [])
    t.check(cmd[:2] == ["/bin/sh", "-c"] and len(cmd) == 3, f"init command {cmd}")

# The init container's shell line, run for real in a private mount namespace
# (never the host's): over a tmpfs it mounts a bpffs, and again it does nothing.
INIT_CHECK = r"""
set -eu
top() { awk '$5 == "/sys/fs/bpf" { t = $9 } END { print t }' /proc/self/mountinfo; }
count() { awk '$5 == "/sys/fs/bpf"' /proc/self/mountinfo | wc -l; }
mount -t tmpfs none /sys/fs/bpf
before=$(count)
sh -c "$1"
echo "first: top=$(top) added=$(($(count) - before))"
sh -c "$1"
echo "again: top=$(top) added=$(($(count) - before))"
"""

with t.case("the init container's command mounts bpffs over a node without one, once"):
    ic = bpffs_init_container(the_daemonset(DOCS_YAML))
    line = (ic.get("command", []) + ic.get("args", []))[2]
    p = run(["unshare", "-m", "--propagation", "private", "--", "sh", "-c", INIT_CHECK, "sh",
             line])
    t.check(p.returncode == 0, f"exit {p.returncode}: {p.stdout}{p.stderr}")
    t.check("first: top=bpf added=1" in p.stdout and "again: top=bpf added=1" in p.stdout,
            p.stdout + p.stderr)

with t.case("AppArmor unconfined and SELinux type spc_t, as Cilium's agent"):
    for ds in (the_daemonset(DOCS_YAML), the_cleanup(DOCS_YAML)):
        pod = ds["spec"]["template"]["spec"]
        psc = pod.get("securityContext", {})
        for cc in all_containers(ds):
            sc = cc.get("securityContext", {})
            aa = sc.get("appArmorProfile", psc.get("appArmorProfile", {}))
            t.check(aa.get("type") == "Unconfined" or sc.get("privileged") is True,
                    f"{cc['name']}: AppArmor {aa}")
            se = sc.get("seLinuxOptions", psc.get("seLinuxOptions", {}))
            t.check(se.get("type") == "spc_t" or sc.get("privileged") is True,
                    f"{cc['name']}: SELinux {se}")

with t.case("the metrics port is written once in args and once as the named port"):
    ds = the_daemonset(DOCS_YAML)
    c = the_container(ds)
    port = metrics_port(c)
    listen = flag_value(c["args"], "metrics-listen")
    t.check(listen.endswith(f"]:{port}"), f"--metrics-listen {listen} vs containerPort {port}")
    text = read(os.path.join(DEPLOY, "smg-steer-daemonset.yaml"))
    uses = [ln.strip() for ln in text.splitlines()
            if re.search(rf"\b{port}\b", ln) and not ln.strip().startswith("#")]
    t.check(len(uses) == 2, f"port {port} appears in {len(uses)} places: {uses}")

with t.case("--metrics-listen takes the node's status.hostIP, IPv4 or IPv6"):
    c = the_container(the_daemonset(DOCS_YAML))
    listen = flag_value(c["args"], "metrics-listen")
    for ip in ("192.0.2.10", "2001:db8::10", "fd00::1"):
        arg = substitute_env([listen], {"NODE_IP": ip})[0]
        verdict, out = daemon_verdict(["--vip", "198.51.100.10:30000", "--backend",
                                       "192.0.2.11:30000", "--metrics-listen", arg])
        t.check(verdict == "accepted", f"NODE_IP={ip}: --metrics-listen {arg}: {out}")
    verdict, out = daemon_verdict(["--vip", "198.51.100.10:30000", "--backend",
                                   "192.0.2.11:30000", "--metrics-listen", "fd00::1:9464"])
    t.check(verdict == "rejected" and "[IPV6]:PORT" in out,
            f"an ambiguous bare IPv6 with a port: {verdict}: {out}")

with t.case("cleanup DaemonSet: uninstall on the daemon's pin path, same host mount and image"):
    ds = the_daemonset(DOCS_YAML)
    cl = the_cleanup(DOCS_YAML)
    c = the_container(ds)
    t.check(cl["metadata"]["namespace"] == ds["metadata"]["namespace"], "namespace")
    pod = cl["spec"]["template"]["spec"]
    runs = [x for x in pod.get("initContainers", [])
            if "uninstall" in x.get("command", []) + x.get("args", [])]
    t.check(len(runs) == 1, "no init container runs smg-steerctl uninstall")
    u = runs[0]
    argv = u.get("command", []) + u.get("args", [])
    t.check(os.path.basename(argv[0]) == "smg-steerctl", f"{argv}")
    pin = flag_value(c["args"], "pin-path")
    t.check(flag_value(argv, "pin-path") == pin, f"{argv} does not clean {pin}")
    vol = {v["name"]: v for v in pod["volumes"]}
    mounts = [m for m in u["volumeMounts"]
              if vol[m["name"]].get("hostPath", {}).get("path") == "/sys/fs/bpf"]
    t.check(mounts and pin.startswith(mounts[0]["mountPath"].rstrip("/") + "/"),
            "uninstall does not see the host's /sys/fs/bpf at the pin path")
    t.check(u["image"] == c["image"], f"image {u['image']} vs {c['image']}")
    t.check(u["securityContext"].get("privileged") is not True, "uninstall needs no privileged")
    p = run([CTL, "--help"])
    t.check(re.search(r"^\s+uninstall\s", p.stdout, re.M), "smg-steerctl --help: no uninstall")

with t.case("the ConfigMap's config, with the DaemonSet's args, is accepted by smg-steerd"):
    ds = the_daemonset(DOCS_YAML)
    c = the_container(ds)
    text, cfg_path = configmap_config(DOCS_YAML, ds, c)
    t.check("services" in yaml.safe_load(text), "the ConfigMap's config has no services")
    with tempfile.TemporaryDirectory(prefix="smg-steer-deploy-") as d:
        path = os.path.join(d, "steer.yaml")
        with open(path, "w") as f:
            f.write(text)
        args = [path if a == cfg_path else a.replace(cfg_path, path)
                for a in substitute_env(c["args"], DOCS_ENV)]
        # --cgroup must be a cgroup2 directory: the pod's mount of the host's
        # cgroup root is this machine's cgroup2 root.
        cg = flag_value(args, "cgroup")
        args = ["--cgroup=" + local_cgroup2_root() if cg and a == "--cgroup=" + cg else a
                for a in args]
        verdict, out = daemon_verdict(args)
        t.check(verdict == "accepted", f"smg-steerd {' '.join(args)}:\n{out}")
        # The check can fail: one misspelt key is refused, naming its line.
        with open(path, "w") as f:
            f.write(text.replace("peer-routers:", "peer-router:"))
        verdict, out = daemon_verdict(args)
        t.check(verdict == "rejected" and "unknown key 'peer-router'" in out,
                f"a misspelt key was not rejected: {verdict}: {out}")

with t.case("docs/deploy/steer.yaml is accepted; a broken copy is rejected"):
    text = read(os.path.join(DEPLOY, "steer.yaml"))
    verdict, out = config_verdict(text)
    t.check(verdict == "accepted", out)
    verdict, out = config_verdict(text.replace("load-timeout: 500ms", "load-timeout: 5s"))
    t.check(verdict == "rejected" and "load-timeout" in out, f"{verdict}: {out}")

with t.case("headless Service for the workers: clusterIP None, selector, named port"):
    svcs = objects(DOCS_YAML, "Service")
    t.check(len(svcs) == 1, f"expected one Service, found {len(svcs)}")
    s = svcs[0]
    t.check(s["apiVersion"] == "v1", s["apiVersion"])
    t.check(s["spec"].get("clusterIP") == "None", "clusterIP must be None (headless)")
    t.check(s["spec"].get("selector"), "no selector: no EndpointSlices")
    t.check(all(p.get("name") for p in s["spec"]["ports"]), "ports need names")

with t.case("systemd unit: ExecStart runs smg-steerd, ExecReload sends HUP, restarts on failure"):
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read(os.path.join(DEPLOY, "smg-steerd.service"))
    svc = unit["Service"]
    argv = shlex.split(svc["ExecStart"])
    t.check(os.path.basename(argv[0]) == "smg-steerd", f"ExecStart {svc['ExecStart']}")
    t.check("--keep-pinned" in argv, "restarts without a gap need --keep-pinned")
    t.check(re.search(r"kill -HUP \$MAINPID", svc["ExecReload"]), svc["ExecReload"])
    t.check(svc["KillSignal"] == "SIGTERM", svc["KillSignal"])
    t.check(svc["Restart"] == "on-failure", svc["Restart"])
    caps = set(svc["CapabilityBoundingSet"].split())
    t.check({"CAP_BPF", "CAP_NET_ADMIN", "CAP_SYS_ADMIN"} <= caps, f"bounding set {caps}")
    t.check(unit["Install"]["WantedBy"], "no [Install] WantedBy")

with t.case("systemd unit: its command line, on docs/deploy/steer.yaml, is accepted"):
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read(os.path.join(DEPLOY, "smg-steerd.service"))
    argv = shlex.split(unit["Service"]["ExecStart"])
    cfg = flag_value(argv, "config")
    args = [os.path.join(DEPLOY, "steer.yaml") if a == cfg else a for a in argv[1:]]
    verdict, out = daemon_verdict(args)
    t.check(verdict == "accepted", f"{args}: {out}")
    if shutil.which("systemd-analyze"):
        # Unit syntax: systemd's own parser, with our binary in place of the installed one.
        with tempfile.TemporaryDirectory(prefix="smg-steer-unit-") as d:
            text = read(os.path.join(DEPLOY, "smg-steerd.service")).replace(argv[0], STEERD)
            path = os.path.join(d, "smg-steerd.service")
            with open(path, "w") as f:
                f.write(text)
            p = run(["systemd-analyze", "verify", "--man=no", path])
            t.check(p.returncode == 0 and not (p.stdout + p.stderr).strip(),
                    f"systemd-analyze verify: {p.stdout}{p.stderr}")

RENDER = os.path.join(DEPLOY, "render-backends.py")


def endpoint_slice(name, family, port_names, endpoints):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name,
                         "labels": {"kubernetes.io/service-name": "sglang-workers"}},
            "addressType": family,
            "ports": [{"name": n, "port": p, "protocol": "TCP"} for n, p in port_names],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}}
                          for ip, ready in endpoints]}


with t.case("render-backends.py: ready endpoints only, sorted, and the result is accepted"):
    with tempfile.TemporaryDirectory(prefix="smg-steer-render-") as d:
        v4 = {"apiVersion": "v1", "kind": "List", "items": [
            endpoint_slice("w-a", "IPv4", [("grpc", 30000), ("loads", 30001)],
                           [("192.0.2.12", True), ("192.0.2.11", True), ("192.0.2.13", False)]),
            endpoint_slice("w-b", "IPv4", [("grpc", 30000), ("loads", 30001)],
                           [("192.0.2.2", True)])]}
        v6 = endpoint_slice("w6", "IPv6", [("grpc", 30000)], [("2001:db8::21", True)])
        for name, doc in (("v4.json", v4), ("v6.json", v6)):
            with open(os.path.join(d, name), "w") as f:
                json.dump(doc, f)
        header = os.path.join(d, "knobs.yaml")
        with open(header, "w") as f:
            f.write("load-check-interval: 1s\npeer-routers: 3\n")
        p = run([sys.executable, RENDER, "--header", header, "--port-name", "grpc",
                 "--loads-port-name", "loads", f"198.51.100.10:30000={d}/v4.json"])
        t.check(p.returncode == 0, p.stderr)
        svc = yaml.safe_load(p.stdout)["services"][0]
        t.check(svc["backends"] == ["192.0.2.2:30000,loads=192.0.2.2:30001",
                                    "192.0.2.11:30000,loads=192.0.2.11:30001",
                                    "192.0.2.12:30000,loads=192.0.2.12:30001"],
                f"backends {svc['backends']}")
        verdict, out = config_verdict(p.stdout)
        t.check(verdict == "accepted", out)
        p = run([sys.executable, RENDER, "[2001:db8::10]:30000=" + os.path.join(d, "v6.json")])
        t.check(p.returncode == 0, p.stderr)
        t.check('"[2001:db8::21]:30000"' in p.stdout, p.stdout)
        verdict, out = config_verdict(p.stdout)
        t.check(verdict == "accepted", out)
        # No ready endpoint: refused rather than writing a config the daemon rejects.
        v4["items"] = [endpoint_slice("w-c", "IPv4", [("grpc", 30000)], [("192.0.2.5", False)])]
        with open(os.path.join(d, "v4.json"), "w") as f:
            json.dump(v4, f)
        p = run([sys.executable, RENDER, f"198.51.100.10:30000={d}/v4.json"])
        t.check(p.returncode != 0 and "no ready endpoint" in p.stderr, p.stdout + p.stderr)

# ---- the documentation -------------------------------------------------------------------


def help_flags(*argv):
    """The long options a --help text lists: those that start an option line
    (after an optional short form), so that prose like "--option=value" is not one."""
    p = run(list(argv) + ["--help"])
    t.check(p.returncode == 0, f"{' '.join(argv)} --help: exit {p.returncode}")
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", p.stdout, re.M))


def doc_flags(text):
    """Long options mentioned in a text; roff writes '-' as '\\-'."""
    text = text.replace("\\-", "-")
    return set(re.findall(r"(?<![\w/.=-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*", text))


def doc_files():
    files = [os.path.join(TOP, "README.md")] + sorted(glob.glob(os.path.join(DOCS, "*.md")))
    files += sorted(p for p in glob.glob(os.path.join(DEPLOY, "*")) if os.path.isfile(p))
    return files


with t.case("every flag the docs mention exists (smg-steerd/smg-steerctl --help, or a named tool)"):
    known = help_flags(STEERD) | help_flags(CTL) | help_flags(sys.executable, RENDER) | \
        help_flags(os.path.join(BUILD, "steer-sim")) | source_flags() | FOREIGN_FLAGS
    t.check({"--keep-pinned", "--pin-path", "--output"} <= known, "help texts look wrong")
    stale = {}
    files = doc_files()
    t.check(any(f.endswith("operations.md") for f in files), "docs/operations.md is missing")
    for path in files:
        unknown = sorted(doc_flags(read(path)) - known)
        if unknown:
            stale[os.path.relpath(path, TOP)] = unknown
    t.check(not stale, f"flags that no --help knows: {stale}")

# That smg-steerd(8) has an entry for every option and names no unknown flag,
# and that docs/operations.md's option reference is the options table, are
# checked by tests/unit/test_options.c, which needs no binary.

with t.case("the man page renders: groff -ww -z is silent and man -l shows it"):
    t.check(shutil.which("groff"), "groff is missing (Debian package groff-base)")
    p = run(["groff", "-ww", "-z", "-man", MAN])
    t.check(p.returncode == 0 and not (p.stdout + p.stderr).strip(), f"groff: {p.stderr}")
    if shutil.which("man"):
        p = run(["man", "-l", MAN], env=dict(os.environ, MANWIDTH="80", MANPAGER="cat",
                                              PAGER="cat"))
        t.check(p.returncode == 0 and "SYNOPSIS" in p.stdout and "smg-steerd" in p.stdout,
                f"man -l: exit {p.returncode}: {p.stderr}")
        t.check(not p.stderr.strip(), f"man -l warns: {p.stderr}")


def source_names(path, pattern):
    return set(re.findall(pattern, read(os.path.join(TOP, path))))


with t.case("docs/operations.md explains every metric and every pinned object"):
    ops = read(os.path.join(DOCS, "operations.md"))
    metrics = source_names("user/metrics/metrics.c", r'"(smg_steer_[a-z_]+)"')
    t.check(len(metrics) >= 10, f"found only {sorted(metrics)} in user/metrics/metrics.c")
    missing = sorted(m for m in metrics if m not in ops)
    t.check(not missing, f"metrics not in docs/operations.md: {missing}")
    pins = source_names("bpf/steer_common.h", r'#define STEER_(?:MAP|LINK)_\w+\s+"(steer_\w+)"')
    t.check(len(pins) >= 9, f"found only {sorted(pins)} in bpf/steer_common.h")
    missing = sorted(p for p in pins if p not in ops)
    t.check(not missing, f"pinned objects not in docs/operations.md: {missing}")

with t.case("docs/operations.md: the id in steer_gen's dump is steer_tables' id in the listing"):
    ops = read(os.path.join(DOCS, "operations.md"))
    listed = re.search(r"^(\d+): hash\s+name steer_tables\b", ops, re.M)
    dump = re.search(r"map dump pinned \S*/steer_gen\n.*?value: ((?:[0-9a-f]{2} ){3}[0-9a-f]{2})",
                     ops, re.S)
    prose = re.search(r"`0x([0-9a-f]+)` = (\d+), the `steer_tables` map above", ops)
    t.check(listed and dump and prose, "the listing, the dump or the sentence is missing")
    ids = {int(listed.group(1)), int.from_bytes(bytes.fromhex(dump.group(1)), "little"),
           int(prose.group(1), 16), int(prose.group(2))}
    t.check(len(ids) == 1, f"steer_tables id: listing {listed.group(1)}, dump "
            f"{dump.group(1)}, prose 0x{prose.group(1)} = {prose.group(2)}")

t.done()
