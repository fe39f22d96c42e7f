#!/usr/bin/env python3
"""Render smg-steerd's `services:` from Kubernetes EndpointSlices.

smg-steerd takes static backend addresses. This script turns the ready
endpoints of the workers' headless Service into a config file, so that the
ConfigMap can be regenerated whenever the workers change (see
docs/deployment.md, "Where the backend list comes from"):

    kubectl -n sglang get endpointslices \\
        -l kubernetes.io/service-name=sglang-workers -o json > workers.json
    render-backends.py --header knobs.yaml 198.51.100.10:30000=workers.json > steer.yaml

Each VIP=FILE argument is one service: FILE is `kubectl get endpointslices
-o json` output (a List) or a single EndpointSlice. The traffic port is the
slice port named by --port-name (default: the slice's first port); with
--loads-port-name, GetLoads is polled on that port instead. Endpoints whose
`conditions.ready` is false are left out; addresses are sorted, so the same
endpoints always give the same file. Standard library only.
"""
import argparse
import ipaddress
import json
import sys


def fail(msg):
    sys.exit(f"render-backends: {msg}")


def slices_of(doc):
    if doc.get("kind") == "EndpointSlice":
        return [doc]
    if isinstance(doc.get("items"), list):
        return doc["items"]
    fail("expected an EndpointSlice or a List of them")


def port_of(slice_, name, what):
    ports = slice_.get("ports") or []
    if not ports:
        fail(f"EndpointSlice {slice_.get('metadata', {}).get('name')} has no ports")
    if name is None:
        return ports[0]["port"]
    for p in ports:
        if p.get("name") == name:
            return p["port"]
    fail(f"no port named {name!r} ({what}) in EndpointSlice "
         f"{slice_.get('metadata', {}).get('name')}")


def host_port(ip, port):
    addr = ipaddress.ip_address(ip)
    return f"[{addr}]:{port}" if addr.version == 6 else f"{addr}:{port}"


def backends_of(doc, port_name, loads_port_name):
    """[(address, loads or None)] of the ready endpoints, sorted."""
    out = set()
    for s in slices_of(doc):
        if s.get("addressType") not in ("IPv4", "IPv6"):
            fail(f"addressType {s.get('addressType')!r} is not supported (IPv4 or IPv6)")
        port = port_of(s, port_name, "--port-name")
        loads = port_of(s, loads_port_name, "--loads-port-name") if loads_port_name else None
        for ep in s.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready") is False:
                continue
            for ip in ep.get("addresses") or []:
                a = ipaddress.ip_address(ip)
                out.add(((a.version, int(a), port), host_port(ip, port),
                         host_port(ip, loads) if loads else None))
    return [(addr, loads) for _, addr, loads in sorted(out)]


def render(services):
    lines = ["services:"]
    for vip, backends in services:
        lines.append(f'  - vip: "{vip}"')
        lines.append("    backends:")
        for addr, loads in backends:
            lines.append(f'      - "{addr},loads={loads}"' if loads else f'      - "{addr}"')
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--header", help="file copied verbatim before `services:` (the knobs)")
    ap.add_argument("--port-name", help="traffic port name (default: the first port)")
    ap.add_argument("--loads-port-name", help="port that serves GetLoads, if not the traffic one")
    ap.add_argument("service", nargs="+", metavar="VIP=FILE", help="a service and its slices")
    a = ap.parse_args()
    services = []
    for arg in a.service:
        vip, sep, path = arg.partition("=")
        if not sep or not path:
            fail(f"expected VIP=FILE, got {arg!r}")
        with open(path) as f:
            backends = backends_of(json.load(f), a.port_name, a.loads_port_name)
        if not backends:
            fail(f"{path}: no ready endpoint for {vip}; smg-steerd needs at least one backend")
        services.append((vip, backends))
    header = ""
    if a.header:
        with open(a.header) as f:
            header = f.read()
        if header and not header.endswith("\n"):
            header += "\n"
    sys.stdout.write(header + render(services))


if __name__ == "__main__":
    main()
