// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * grpcmem.c - the memory anchor of the control-plane benchmark: what N gRPC
 * channels cost by themselves, with nothing of smg-steerd around them.
 *
 *   grpcmem --base 127.1.0.1 --port 30000 --count 1000
 *
 * Opens one insecure channel per address (base, base+1, ... on one port), as
 * smg-steerd does per backend, makes one GetLoads call on each (an empty
 * GetLoadsRequest, against the fake workers), waits for every call to end,
 * and prints one CSV row:
 *   channels,ok_calls,rss_before_kib,rss_after_kib,kib_per_channel
 * RSS is VmRSS from /proc/self/status, after grpc_init and after the calls.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define METHOD "/sglang.grpc.scheduler.SglangScheduler/GetLoads"
#define DEADLINE_MS 5000

struct call {
	grpc_call *call;
	grpc_metadata_array initial, trailing;
	grpc_byte_buffer *request, *response;
	grpc_status_code status;
	grpc_slice details;
};

static long vm_rss_kib(void)
{
	char line[256];
	long kib = 0;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			kib = atol(line + 6);
	fclose(f);
	return kib;
}

static int start_call(grpc_channel *ch, grpc_completion_queue *cq, struct call *c)
{
	grpc_slice method = grpc_slice_from_static_string(METHOD);
	gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
					     gpr_time_from_millis(DEADLINE_MS, GPR_TIMESPAN));
	grpc_slice empty = grpc_empty_slice();
	grpc_op ops[6];

	c->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL,
					   deadline, NULL);
	if (!c->call)
		return -1;
	grpc_metadata_array_init(&c->initial);
	grpc_metadata_array_init(&c->trailing);
	c->request = grpc_raw_byte_buffer_create(&empty, 1); /* GetLoadsRequest{} is 0 bytes */
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = c->request;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &c->initial;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &c->response;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &c->trailing;
	ops[5].data.recv_status_on_client.status = &c->status;
	ops[5].data.recv_status_on_client.status_details = &c->details;
	return grpc_call_start_batch(c->call, ops, 6, c, NULL) == GRPC_CALL_OK ? 0 : -1;
}

static void free_call(struct call *c)
{
	grpc_metadata_array_destroy(&c->initial);
	grpc_metadata_array_destroy(&c->trailing);
	grpc_byte_buffer_destroy(c->request);
	if (c->response)
		grpc_byte_buffer_destroy(c->response);
	grpc_slice_unref(c->details);
	grpc_call_unref(c->call);
}

static void usage(void)
{
	fprintf(stderr, "usage: grpcmem --base IPV4 --port PORT --count N\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "base", required_argument, 0, 'b' },
		{ "port", required_argument, 0, 'p' },
		{ "count", required_argument, 0, 'n' },
		{ 0, 0, 0, 0 },
	};
	grpc_channel_credentials *creds;
	grpc_completion_queue *cq;
	grpc_channel **ch;
	struct call *calls;
	struct in_addr base = { 0 };
	int port = 0, n = 0, started = 0, ok = 0, c, i;
	long before, after;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'b' && inet_pton(AF_INET, optarg, &base) == 1)
			continue;
		if (c == 'p')
			port = atoi(optarg);
		else if (c == 'n')
			n = atoi(optarg);
		else
			usage();
	}
	if (!base.s_addr || port <= 0 || port > 65535 || n <= 0)
		usage();
	grpc_init();
	usleep(200000); /* let gRPC's own threads settle before the baseline */
	before = vm_rss_kib();
	ch = calloc((size_t)n, sizeof(*ch));
	calls = calloc((size_t)n, sizeof(*calls));
	creds = grpc_insecure_credentials_create();
	cq = grpc_completion_queue_create_for_next(NULL);
	if (!ch || !calls || !creds || !cq) {
		fprintf(stderr, "grpcmem: out of memory\n");
		return 1;
	}
	for (i = 0; i < n; i++) {
		struct in_addr a = { .s_addr = htonl(ntohl(base.s_addr) + (uint32_t)i) };
		char target[64];

		snprintf(target, sizeof(target), "ipv4:%s:%d", inet_ntoa(a), port);
		ch[i] = grpc_channel_create(target, creds, NULL);
		if (ch[i] && start_call(ch[i], cq, &calls[i]) == 0)
			started++;
	}
	for (i = 0; i < started; i++) {
		grpc_event ev =
			grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		struct call *done = ev.tag;

		if (ev.type == GRPC_OP_COMPLETE && ev.success && done->status == GRPC_STATUS_OK)
			ok++;
	}
	usleep(200000);
	after = vm_rss_kib();
	printf("%d,%d,%ld,%ld,%.1f\n", n, ok, before, after, (double)(after - before) / n);
	for (i = 0; i < n; i++) {
		if (calls[i].call)
			free_call(&calls[i]);
		if (ch[i])
			grpc_channel_destroy(ch[i]);
	}
	grpc_channel_credentials_release(creds);
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	free(calls);
	free(ch);
	grpc_shutdown();
	return 0;
}
