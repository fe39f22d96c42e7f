"""What the fake engines (tests/lib/fake_engines.py) send: the bytes of every load
source smg reads, built from upstream's wire formats with independent
libraries (protobuf's generated classes, json, prometheus_client), never
from smg-steer's C code.

A rank is a dict with the proto's field names (missing ones default):

    {"dp_rank": 0, "num_waiting_uncached_tokens": 4000, "num_waiting_reqs": 3,
     "num_running_reqs": 8, "token_usage": 0.42, "gen_throughput": 1800.0,
     "cache_hit_rate": 0.1, "max_total_num_tokens": 500000}

Upstream references (lightseekorg/smg): crates/grpc_client/proto/*.proto for
gRPC, crates/protocols/src/worker.rs (WorkerLoadResponse) and
crates/mock_worker/src/http.rs for /v1/loads, model_gateway/src/worker/
monitor.rs for the /metrics names.
"""
import datetime
import json
import math

from prometheus_client.core import (CollectorRegistry, CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
from prometheus_client.exposition import generate_latest

# gRPC engines: kind -> (pb2 module name, full method path).
GRPC_ENGINES = {
    "sglang": ("sglang_scheduler_pb2", "/sglang.grpc.scheduler.SglangScheduler/GetLoads"),
    "vllm": ("vllm_engine_pb2", "/vllm.grpc.engine.VllmEngine/GetLoads"),
    "tokenspeed": ("tokenspeed_scheduler_pb2",
                   "/tokenspeed.grpc.scheduler.TokenSpeedScheduler/GetLoads"),
}

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
VERSION = {"sglang": "0.5.6", "vllm": "0.11.0", "tokenspeed": "0.3.1"}
INT_FIELDS = ("dp_rank", "num_waiting_uncached_tokens", "num_waiting_reqs", "num_running_reqs",
              "max_total_num_tokens")
FLOAT_FIELDS = ("token_usage", "gen_throughput", "cache_hit_rate")
DEFAULTS = {"dp_rank": 0, "num_waiting_uncached_tokens": 0, "num_waiting_reqs": 0,
            "num_running_reqs": 0, "max_total_num_tokens": 500000, "token_usage": 0.0,
            "gen_throughput": 0.0, "cache_hit_rate": 0.0}
MAX_RUNNING = 256


def normalize_rank(entry, index=0):
    """A state file's rank with every field present (dp_rank defaults to its index)."""
    r = dict(DEFAULTS, dp_rank=index)
    for f in INT_FIELDS:
        if f in entry:
            r[f] = int(entry[f])
    for f in FLOAT_FIELDS:
        if f in entry:
            r[f] = float(entry[f])
    return r


def nan_kv(ranks):
    """The ranks with rank 0's KV usage NaN."""
    return [dict(r, token_usage=float("nan")) if i == 0 else r for i, r in enumerate(ranks)]


def used_tokens(r):
    u = r["token_usage"]
    return int(u * r["max_total_num_tokens"]) if math.isfinite(u) and u > 0 else 0


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


# ---- gRPC GetLoadsResponse --------------------------------------------------------

def _core(r):
    """The fields every engine's SchedulerLoad has (names are the protos')."""
    return dict(dp_rank=r["dp_rank"], num_running_reqs=r["num_running_reqs"],
                num_waiting_reqs=r["num_waiting_reqs"],
                num_total_reqs=r["num_running_reqs"] + r["num_waiting_reqs"],
                num_used_tokens=used_tokens(r), max_total_num_tokens=r["max_total_num_tokens"],
                token_usage=r["token_usage"], gen_throughput=r["gen_throughput"],
                cache_hit_rate=r["cache_hit_rate"], utilization=_finite(r["token_usage"]),
                max_running_requests=MAX_RUNNING)


def _finite(x):
    return x if math.isfinite(x) else 0.0


def grpc_response(engine, pb2, ranks):
    """A serialized GetLoadsResponse of engine 'sglang', 'vllm' or 'tokenspeed'.

    vLLM's SchedulerLoad has fields 1-11 only: no queued-token field at all
    (and no AggregateMetrics). TokenSpeed numbers token_usage 8,
    gen_throughput 9 and the queued uncached tokens 14; SGLang 7, 8 and 17.
    The generated classes carry those numbers."""
    resp = pb2.GetLoadsResponse(timestamp=now_iso(), version=VERSION[engine],
                                dp_rank_count=len(ranks))
    for r in ranks:
        fields = _core(r)
        if engine != "vllm":
            fields["num_waiting_uncached_tokens"] = r["num_waiting_uncached_tokens"]
        resp.loads.append(pb2.SchedulerLoad(**fields))
    if engine != "vllm" and ranks:
        agg = resp.aggregate
        agg.total_running_reqs = sum(r["num_running_reqs"] for r in ranks)
        agg.total_waiting_reqs = sum(r["num_waiting_reqs"] for r in ranks)
        agg.total_reqs = agg.total_running_reqs + agg.total_waiting_reqs
        agg.avg_token_usage = sum(r["token_usage"] for r in ranks) / len(ranks)
        agg.avg_throughput = sum(r["gen_throughput"] for r in ranks) / len(ranks)
        agg.avg_utilization = sum(_finite(r["token_usage"]) for r in ranks) / len(ranks)
    return resp.SerializeToString()


# ---- HTTP /v1/loads ------------------------------------------------------------

def loads_json(ranks, version=VERSION["sglang"]):
    """GET /v1/loads?include=core: SGLang's GetLoadsResponse as JSON, with the
    proto's field names (what smg deserializes into WorkerLoadResponse).
    Non-finite numbers come out as the bare tokens NaN/Infinity, which is
    what Python's and many engines' JSON encoders write (and no valid JSON)."""
    loads = []
    for r in ranks:
        d = _core(r)
        d["num_waiting_uncached_tokens"] = r["num_waiting_uncached_tokens"]
        loads.append(d)
    body = {"timestamp": now_iso(), "version": version, "dp_rank_count": len(ranks),
            "loads": loads}
    if ranks:
        body["aggregate"] = {
            "total_running_reqs": sum(r["num_running_reqs"] for r in ranks),
            "total_waiting_reqs": sum(r["num_waiting_reqs"] for r in ranks),
            "total_reqs": sum(r["num_running_reqs"] + r["num_waiting_reqs"] for r in ranks),
            "avg_token_usage": sum(r["token_usage"] for r in ranks) / len(ranks),
            "avg_throughput": sum(r["gen_throughput"] for r in ranks) / len(ranks),
            "avg_utilization": sum(_finite(r["token_usage"]) for r in ranks) / len(ranks),
        }
    return json.dumps(body, indent=2) + "\n"


# ---- Prometheus /metrics ----------------------------------------------------------

_CREATED = 1747305600.123  # a counter's _created timestamp: an exponent in the text
_LATENCY_BUCKETS = ("0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25",
                    "0.5", "0.75", "1.0", "2.5", "5.0", "7.5", "10.0", "+Inf")


class _Families:
    """Collects metric families and renders them with prometheus_client, the
    library vLLM and SGLang themselves export with."""

    def __init__(self):
        self.families = []

    def collect(self):
        return iter(self.families)

    def gauge(self, name, doc, labels, samples):
        g = GaugeMetricFamily(name, doc, labels=labels)
        for values, v in samples:
            g.add_metric(values, v)
        self.families.append(g)

    def counter(self, name, doc, labels, samples):
        c = CounterMetricFamily(name, doc, labels=labels)
        for values, v in samples:
            c.add_metric(values, v, created=_CREATED)
        self.families.append(c)

    def histogram(self, name, doc, labels, label_sets, count):
        h = HistogramMetricFamily(name, doc, labels=labels)
        for values in label_sets:
            cum, buckets = 0, []
            for i, le in enumerate(_LATENCY_BUCKETS):
                cum = count if le == "+Inf" else min(count, cum + (i % 3))
                buckets.append((le, float(cum)))
            h.add_metric(values, buckets, sum_value=count * 0.137)
        self.families.append(h)

    def render(self):
        reg = CollectorRegistry(auto_describe=False)
        reg.register(self)
        return generate_latest(reg).decode()


def _process_metrics(f):
    """What every Python server's default registry exports: unrelated names,
    exponents, a label value with braces and a histogram without labels."""
    f.counter("python_gc_objects_collected", "Objects collected during gc", ["generation"],
              [(["0"], 12794.0), (["1"], 2417.0), (["2"], 145.0)])
    f.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", [],
            [([], 2.147483648e9)])
    f.gauge("process_start_time_seconds", "Start time of the process since unix epoch.", [],
            [([], 1.74730560012e9)])
    f.counter("http_requests", "Total number of requests by method, status and handler.",
              ["handler", "method", "status"],
              [(["/v1/completions", "POST", "2xx"], 1234.0),
               (["/v1/files/{file_id}", "GET", "4xx"], 3.0)])
    f.histogram("http_request_duration_highr_seconds",
                "Latency with many buckets but no API specific labels.", [], [[]], 1237)


def _rank_label_sets(ranks, engine_label):
    return [[str(r["dp_rank"]) if engine_label else "0", MODEL] for r in ranks]


def vllm_metrics(ranks, variant="v1", kv_override=None, with_kv=True):
    """vLLM's /metrics: one label set per engine (DP rank), labels engine and
    model_name. v1 names KV usage vllm:kv_cache_usage_perc, v0
    vllm:gpu_cache_usage_perc. kv_override replaces rank 0's KV value (NaN);
    with_kv=False leaves the KV gauge out (vLLM's names, but no KV usage)."""
    f = _Families()
    _process_metrics(f)
    labels = ["engine", "model_name"]
    sets = _rank_label_sets(ranks, True)
    kv = [r["token_usage"] for r in ranks]
    if kv_override is not None and kv:
        kv[0] = kv_override
    f.gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
            labels, [(s, float(r["num_running_reqs"])) for s, r in zip(sets, ranks)])
    f.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
            labels, [(s, float(r["num_waiting_reqs"])) for s, r in zip(sets, ranks)])
    if with_kv:
        name = "vllm:kv_cache_usage_perc" if variant == "v1" else "vllm:gpu_cache_usage_perc"
        f.gauge(name, "KV-cache usage. 1 means 100 percent usage.", labels,
                [(s, k) for s, k in zip(sets, kv)])
    if variant == "v0":
        f.gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.",
                labels, [(s, 0.0) for s in sets])
        f.gauge("vllm:gpu_prefix_cache_hit_rate", "GPU prefix cache block hit rate.", labels,
                [(s, r["cache_hit_rate"]) for s, r in zip(sets, ranks)])
        f.gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", labels,
                [(s, 0.0) for s in sets])
    f.counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of tokens.", labels,
              [(s, 81920.0) for s in sets])
    f.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of tokens.", labels,
              [(s, 8192.0) for s in sets])
    f.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
              labels, [(s, 0.0) for s in sets])
    f.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels,
              [(s, 5.1234e6) for s in sets])
    f.counter("vllm:generation_tokens", "Number of generation tokens processed.", labels,
              [(s, 1.23456e5) for s in sets])
    f.histogram("vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.", labels, sets, 417)
    f.histogram("vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.", labels, sets, 417)
    f.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
            ["block_size", "cache_dtype", "enable_prefix_caching", "gpu_memory_utilization",
             "num_gpu_blocks", "engine"],
            [(["16", "auto", "True", "0.9", "31445", s[0]], 1.0) for s in sets])
    return f.render()


def sglang_metrics(ranks, prefix="sglang:", kv_override=None, with_kv=True):
    """SGLang's /metrics: prefix 'sglang:' up to 0.5.3, 'sglang_' from 0.5.4;
    one label set per DP rank (labels model_name, engine_type, tp_rank,
    pp_rank, dp_rank). The queue length is num_queue_reqs; SGLang exports no
    queued-token gauge."""
    f = _Families()
    _process_metrics(f)
    labels = ["dp_rank", "engine_type", "model_name", "pp_rank", "tp_rank"]
    sets = [[str(r["dp_rank"]), "unified", MODEL, "0", "0"] for r in ranks]
    kv = [r["token_usage"] for r in ranks]
    if kv_override is not None and kv:
        kv[0] = kv_override

    def g(name, doc, values):
        f.gauge(prefix + name, doc, labels, list(zip(sets, values)))

    g("num_running_reqs", "The number of running requests.",
      [float(r["num_running_reqs"]) for r in ranks])
    g("num_used_tokens", "The number of used tokens.", [float(used_tokens(r)) for r in ranks])
    if with_kv:
        g("token_usage", "The token usage.", kv)
    g("gen_throughput", "The generation throughput (token/s).",
      [r["gen_throughput"] for r in ranks])
    g("num_queue_reqs", "The number of requests in the waiting queue.",
      [float(r["num_waiting_reqs"]) for r in ranks])
    g("num_grammar_queue_reqs", "The number of requests in the grammar waiting queue.",
      [0.0 for _ in ranks])
    g("cache_hit_rate", "The prefix cache hit rate.", [r["cache_hit_rate"] for r in ranks])
    g("spec_accept_length", "The average acceptance length of speculative decoding.",
      [0.0 for _ in ranks])
    g("utilization", "The utilization.", [_finite(x) for x in kv])
    f.counter(prefix + "prompt_tokens", "Number of prefill tokens processed.", labels,
              [(s, 4.2e6) for s in sets])
    f.counter(prefix + "generation_tokens", "Number of generation tokens processed.", labels,
              [(s, 9.9e4) for s in sets])
    f.histogram(prefix + "time_to_first_token_seconds",
                "Histogram of time to first token in seconds.", labels, sets, 211)
    f.histogram(prefix + "e2e_request_latency_seconds",
                "Histogram of End-to-end request latency in seconds", labels, sets, 211)
    return f.render()
