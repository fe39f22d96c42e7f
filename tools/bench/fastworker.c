// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * fastworker.c - a fake SGLang worker fast enough to poll at scale: gRPC core
 * (C) and protobuf-c serving GetLoads on N consecutive IPv4 addresses from one
 * thread, for the control-plane benchmark.
 *
 *   fastworker --many 5000 --base 127.1.0.1 --port 30000 [--engine sglang|vllm|tokenspeed]
 *
 * tests/lib/fake_worker.py --many does the same in Python and is the reference
 * (an implementation independent of smg-steer's C code); one Python process
 * answers a few thousand calls per second at most, so at 1,000 backends and
 * more it, not smg-steerd, sets the length of a poll cycle. This one answers
 * every GetLoadsRequest that parses with one idle rank (the Python worker's
 * default state), a request that does not parse with INVALID_ARGUMENT, and any
 * other method with UNIMPLEMENTED. "READY" goes to stdout once every address
 * is bound; SIGTERM and SIGINT stop it.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sglang_scheduler.pb-c.h"
#include "tokenspeed_scheduler.pb-c.h"
#include "vllm_engine.pb-c.h"

/* The engine whose GetLoads this worker serves (--engine). */
static const char *method = "/sglang.grpc.scheduler.SglangScheduler/GetLoads";
#define SLOTS 256 /* calls accepted at once */

enum phase {
	PHASE_NEW,
	PHASE_READ,
	PHASE_DONE
};

struct slot {
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array request_md;
	grpc_byte_buffer *request, *response;
	int cancelled;
	enum phase phase;
};

static volatile sig_atomic_t stopping;
static grpc_server *server;
static grpc_completion_queue *cq;
static struct slot slots[SLOTS];
static uint8_t response_bytes[256];
static size_t response_len;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* vLLM's and TokenSpeed's answers: one idle rank in their own messages. */
static int build_vllm_response(void)
{
	Vllm__Grpc__Engine__GetLoadsResponse resp = VLLM__GRPC__ENGINE__GET_LOADS_RESPONSE__INIT;
	Vllm__Grpc__Engine__SchedulerLoad rank = VLLM__GRPC__ENGINE__SCHEDULER_LOAD__INIT;
	Vllm__Grpc__Engine__SchedulerLoad *ranks[1] = { &rank };

	resp.timestamp = "1970-01-01T00:00:00+00:00";
	resp.version = "fastworker";
	resp.dp_rank_count = 1;
	resp.n_loads = 1;
	resp.loads = ranks;
	response_len = vllm__grpc__engine__get_loads_response__get_packed_size(&resp);
	if (response_len > sizeof(response_bytes))
		return -1;
	vllm__grpc__engine__get_loads_response__pack(&resp, response_bytes);
	return 0;
}

static int build_tokenspeed_response(void)
{
	Tokenspeed__Grpc__Scheduler__GetLoadsResponse resp =
		TOKENSPEED__GRPC__SCHEDULER__GET_LOADS_RESPONSE__INIT;
	Tokenspeed__Grpc__Scheduler__SchedulerLoad rank =
		TOKENSPEED__GRPC__SCHEDULER__SCHEDULER_LOAD__INIT;
	Tokenspeed__Grpc__Scheduler__SchedulerLoad *ranks[1] = { &rank };

	resp.timestamp = "1970-01-01T00:00:00+00:00";
	resp.version = "fastworker";
	resp.dp_rank_count = 1;
	resp.n_loads = 1;
	resp.loads = ranks;
	response_len = tokenspeed__grpc__scheduler__get_loads_response__get_packed_size(&resp);
	if (response_len > sizeof(response_bytes))
		return -1;
	tokenspeed__grpc__scheduler__get_loads_response__pack(&resp, response_bytes);
	return 0;
}

static int build_sglang_response(void)
{
	Sglang__Grpc__Scheduler__GetLoadsResponse resp =
		SGLANG__GRPC__SCHEDULER__GET_LOADS_RESPONSE__INIT;
	Sglang__Grpc__Scheduler__SchedulerLoad rank = SGLANG__GRPC__SCHEDULER__SCHEDULER_LOAD__INIT;
	Sglang__Grpc__Scheduler__AggregateMetrics agg =
		SGLANG__GRPC__SCHEDULER__AGGREGATE_METRICS__INIT;
	Sglang__Grpc__Scheduler__SchedulerLoad *ranks[1] = { &rank };

	resp.timestamp = "1970-01-01T00:00:00+00:00";
	resp.version = "fastworker";
	resp.dp_rank_count = 1;
	resp.n_loads = 1;
	resp.loads = ranks;
	resp.aggregate = &agg;
	response_len = sglang__grpc__scheduler__get_loads_response__get_packed_size(&resp);
	if (response_len > sizeof(response_bytes))
		return -1;
	sglang__grpc__scheduler__get_loads_response__pack(&resp, response_bytes);
	return 0;
}

/* The answer to every well-formed request: one idle DP rank. */
static int build_response(const char *engine)
{
	if (!strcmp(engine, "vllm")) {
		method = "/vllm.grpc.engine.VllmEngine/GetLoads";
		return build_vllm_response();
	}
	if (!strcmp(engine, "tokenspeed")) {
		method = "/tokenspeed.grpc.scheduler.TokenSpeedScheduler/GetLoads";
		return build_tokenspeed_response();
	}
	return strcmp(engine, "sglang") ? -1 : build_sglang_response();
}

static void request_next(struct slot *s)
{
	memset(s, 0, sizeof(*s));
	grpc_call_details_init(&s->details);
	grpc_metadata_array_init(&s->request_md);
	s->phase = PHASE_NEW;
	if (grpc_server_request_call(server, &s->call, &s->details, &s->request_md, cq, cq, s) !=
	    GRPC_CALL_OK)
		fprintf(stderr, "fastworker: cannot request a call\n");
}

static void release(struct slot *s)
{
	grpc_call_details_destroy(&s->details);
	grpc_metadata_array_destroy(&s->request_md);
	if (s->request)
		grpc_byte_buffer_destroy(s->request);
	if (s->response)
		grpc_byte_buffer_destroy(s->response);
	if (s->call)
		grpc_call_unref(s->call);
}

static bool is_get_loads(const grpc_call_details *d)
{
	size_t len = GRPC_SLICE_LENGTH(d->method);

	return len == strlen(method) && memcmp(GRPC_SLICE_START_PTR(d->method), method, len) == 0;
}

/* Parse the request with protobuf-c; a request that does not parse is refused. */
static bool request_parses(grpc_byte_buffer *bb)
{
	Sglang__Grpc__Scheduler__GetLoadsRequest *req;
	grpc_byte_buffer_reader reader;
	grpc_slice all;

	if (!bb || !grpc_byte_buffer_reader_init(&reader, bb))
		return false;
	all = grpc_byte_buffer_reader_readall(&reader);
	grpc_byte_buffer_reader_destroy(&reader);
	req = sglang__grpc__scheduler__get_loads_request__unpack(NULL, GRPC_SLICE_LENGTH(all),
								 GRPC_SLICE_START_PTR(all));
	grpc_slice_unref(all);
	if (!req)
		return false;
	sglang__grpc__scheduler__get_loads_request__free_unpacked(req, NULL);
	return true;
}

/* The call arrived: read its one request message. */
static void on_new(struct slot *s)
{
	grpc_op op = { .op = GRPC_OP_RECV_MESSAGE };

	op.data.recv_message.recv_message = &s->request;
	s->phase = PHASE_READ;
	if (grpc_call_start_batch(s->call, &op, 1, s, NULL) != GRPC_CALL_OK) {
		release(s);
		request_next(s);
	}
}

/* The request is in: answer it and wait for the client's close. */
static void on_read(struct slot *s)
{
	grpc_status_code status = GRPC_STATUS_OK;
	grpc_slice payload = grpc_slice_from_static_buffer(response_bytes, response_len);
	grpc_op ops[4];
	size_t n = 0;

	if (!is_get_loads(&s->details))
		status = GRPC_STATUS_UNIMPLEMENTED;
	else if (!request_parses(s->request))
		status = GRPC_STATUS_INVALID_ARGUMENT;
	memset(ops, 0, sizeof(ops));
	ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (status == GRPC_STATUS_OK) {
		s->response = grpc_raw_byte_buffer_create(&payload, 1);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = s->response;
	}
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n++].data.send_status_from_server.status = status;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n++].data.recv_close_on_server.cancelled = &s->cancelled;
	s->phase = PHASE_DONE;
	if (grpc_call_start_batch(s->call, ops, n, s, NULL) != GRPC_CALL_OK) {
		release(s);
		request_next(s);
	}
}

static void on_event(grpc_event ev)
{
	struct slot *s = ev.tag;

	if (ev.type != GRPC_OP_COMPLETE || !s)
		return;
	if (!ev.success || s->phase == PHASE_DONE) {
		release(s);
		if (!stopping)
			request_next(s);
		else
			memset(s, 0, sizeof(*s));
		return;
	}
	if (s->phase == PHASE_NEW)
		on_new(s);
	else
		on_read(s);
}

static int bind_all(int many, struct in_addr base, int port)
{
	grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
	int i, rc = 0;

	for (i = 0; i < many && rc == 0; i++) {
		struct in_addr a = { .s_addr = htonl(ntohl(base.s_addr) + (uint32_t)i) };
		char addr[64];

		snprintf(addr, sizeof(addr), "%s:%d", inet_ntoa(a), port);
		if (grpc_server_add_http2_port(server, addr, creds) == 0) {
			fprintf(stderr, "fastworker: cannot bind %s\n", addr);
			rc = -1;
		}
	}
	grpc_server_credentials_release(creds);
	return rc;
}

static void shut_down(void)
{
	int shutdown_tag;
	grpc_event ev;

	grpc_server_shutdown_and_notify(server, cq, &shutdown_tag);
	grpc_server_cancel_all_calls(server);
	do {
		ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		if (ev.tag != &shutdown_tag)
			on_event(ev);
	} while (ev.tag != &shutdown_tag);
	grpc_server_destroy(server);
	grpc_completion_queue_shutdown(cq);
	do
		ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	while (ev.type != GRPC_QUEUE_SHUTDOWN);
	grpc_completion_queue_destroy(cq);
}

static void usage(void)
{
	fprintf(stderr, "usage: fastworker --many N --base IPV4 --port PORT "
			"[--engine sglang|vllm|tokenspeed]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "many", required_argument, 0, 'n' },
		{ "base", required_argument, 0, 'b' },
		{ "port", required_argument, 0, 'p' },
		{ "engine", required_argument, 0, 'e' },
		{ 0, 0, 0, 0 },
	};
	const char *engine = "sglang";
	struct in_addr base = { 0 };
	int many = 0, port = 0, c, i, rc = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'n')
			many = atoi(optarg);
		else if (c == 'b' && inet_pton(AF_INET, optarg, &base) == 1)
			continue;
		else if (c == 'p')
			port = atoi(optarg);
		else if (c == 'e')
			engine = optarg;
		else
			usage();
	}
	if (many <= 0 || !base.s_addr || port <= 0 || port > 65535 || build_response(engine) != 0)
		usage();
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	grpc_init();
	cq = grpc_completion_queue_create_for_next(NULL);
	server = grpc_server_create(NULL, NULL);
	grpc_server_register_completion_queue(server, cq, NULL);
	if (bind_all(many, base, port) != 0) {
		rc = 1;
		stopping = 1;
	}
	grpc_server_start(server);
	for (i = 0; i < SLOTS && !stopping; i++)
		request_next(&slots[i]);
	if (!stopping) {
		printf("READY\n");
		fflush(stdout);
	}
	while (!stopping) {
		gpr_timespec until = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
						  gpr_time_from_millis(200, GPR_TIMESPAN));

		on_event(grpc_completion_queue_next(cq, until, NULL));
	}
	shut_down();
	grpc_shutdown();
	return rc;
}
