// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_config_peer.c - the options of several routers sharing their work:
 * --peer ADDR:PORT (repeatable, or a comma-separated list), --peer-listen,
 * --peer-interval, --peer-timeout, as flags and as the file's keys. Refused
 * with one line naming the option (and the file's line): a malformed or
 * unusable address, a peer given twice, this router's own listen address,
 * --peer without --peer-listen, the listen/interval/timeout options without
 * --peer, a timeout under 3 intervals, durations out of range, peer-routers
 * above 1 (flag or service), --wire-estimator off. Accepted: the defaults
 * (1 ms, 1 s), both forms of the list, the file, the flag winning, IPv6;
 * every service then scores with peers_report on. The real smg-steerd
 * --check-config exits 2 or 0; its summary names the peers.
 * --peer-dns NAME:PORT (the same forms): a name checked as --backend-dns's,
 * refused with a literal address, without a port, twice, or beyond 8 names;
 * it turns sharing on by itself (peer-listen needed, peers_report on) and
 * the summary names it.
 * --peer-key FILE (the file's peer-key): refused with a relative path, a
 * file that cannot be read or is not a regular file, a key under 16 or over
 * 256 bytes (either line), an empty first line, a third line, a file over
 * 1 KB, a control byte in a key, and without --peer; the errors name
 * --peer-key or FILE:LINE: peer-key and never quote a key. Accepted: the key (blanks and a CR
 * trimmed), a previous key on line 2, the file's key and the flag winning;
 * the summary says "peer key: FILE" and --check-config prints no key.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config_testlib.h"

#define PEERS "--peer", "127.0.0.2:9470", "--peer-listen", "127.0.0.1:9470"

static void test_flags_refused(void)
{
	CHECK(refused(ARGS(BASE, "--peer", "127.0.0.2", "--peer-listen", "127.0.0.1:9470"), NULL,
		      "--peer: ", NULL),
	      "a peer without a port");
	CHECK(refused(ARGS(BASE, "--peer", "host.example:9470", "--peer-listen", "127.0.0.1:9470"),
		      NULL, "--peer: ", NULL),
	      "a name, not an address");
	CHECK(refused(ARGS(BASE, "--peer", "0.0.0.0:9470", "--peer-listen", "127.0.0.1:9470"), NULL,
		      "--peer: ", NULL),
	      "the unspecified address as a peer");
	CHECK(refused(ARGS(BASE, "--peer", "127.0.0.2:9470,127.0.0.2:9470", "--peer-listen",
			   "127.0.0.1:9470"),
		      NULL, "--peer: peer 127.0.0.2:9470 given twice", NULL),
	      "a peer twice in the list");
	CHECK(refused(ARGS(BASE, "--peer", "127.0.0.2:9470", "--peer", "127.0.0.2:9470",
			   "--peer-listen", "127.0.0.1:9470"),
		      NULL, "--peer: peer 127.0.0.2:9470 given twice", NULL),
	      "a peer twice as flags");
	CHECK(refused(ARGS(BASE, "--peer", "127.0.0.2:9470,", "--peer-listen", "127.0.0.1:9470"),
		      NULL, "--peer: '' is not ADDR:PORT", NULL),
	      "an empty list entry");
	CHECK(refused(ARGS(BASE, "--peer", "127.0.0.2:9470"), NULL,
		      "--peer: needs --peer-listen ADDR:PORT", NULL),
	      "--peer without --peer-listen");
	CHECK(refused(ARGS(BASE, "--peer-listen", "127.0.0.1:9470"), NULL,
		      "--peer-listen, --peer-interval, --peer-timeout, --peer-push and "
		      "--peer-phase need --peer",
		      NULL),
	      "--peer-listen without --peer");
	CHECK(refused(ARGS(BASE, "--peer-timeout", "2s"), NULL,
		      "--peer-listen, --peer-interval, --peer-timeout, --peer-push and "
		      "--peer-phase need --peer",
		      NULL),
	      "--peer-timeout without --peer");
	CHECK(refused(ARGS(BASE, "--peer", "127.0.0.1:9470", "--peer-listen", "127.0.0.1:9470"),
		      NULL, "--peer: 127.0.0.1:9470 is this router's own --peer-listen", NULL),
	      "its own listen address");
	CHECK(refused(ARGS(BASE, PEERS, "--peer-listen", "127.0.0.1:0"), NULL,
		      "--peer-listen: '127.0.0.1:0': port must be 1..65535", NULL),
	      "listen port 0");
	CHECK(refused(ARGS(BASE, PEERS, "--peer-listen", "224.0.0.1:9470"), NULL,
		      "--peer-listen: ", NULL),
	      "a multicast listen address");
	CHECK(refused(ARGS(BASE, PEERS, "--peer-interval", "50us"), NULL,
		      "--peer-interval: must be between 100us and 10s, got '50us'", NULL),
	      "an interval too short");
	CHECK(refused(ARGS(BASE, PEERS, "--peer-interval", "11s", "--peer-timeout", "60s"), NULL,
		      "--peer-interval: must be between 100us and 10s", NULL),
	      "an interval too long");
	CHECK(refused(ARGS(BASE, PEERS, "--peer-timeout", "2ms"), NULL,
		      "--peer-timeout: must be at least 3 x the peer-interval (1ms), got 2ms",
		      NULL),
	      "a timeout under 3 intervals");
	/* The interval given alone is the one to change: the message names it,
	 * with its value, against the default timeout. */
	CHECK(refused(ARGS(BASE, PEERS, "--peer-interval", "500ms"), NULL,
		      "--peer-interval: must be at most a third of the peer-timeout (1s), got "
		      "500ms",
		      NULL),
	      "an interval that leaves the default timeout under 3 intervals: '%s'", err);
	CHECK(refused(ARGS(BASE, PEERS, "--peer-interval", "1s"), NULL,
		      "--peer-interval: must be at most a third of the peer-timeout (1s), got 1s",
		      NULL),
	      "an interval equal to the default timeout: '%s'", err);
	CHECK(refused(ARGS(BASE, PEERS, "--peer-interval", "1s", "--peer-timeout", "2s"), NULL,
		      "--peer-timeout: must be at least 3 x the peer-interval (1s), got 2s", NULL),
	      "both given: the timeout is named: '%s'", err);
	CHECK(refused(ARGS(BASE, "--peer-push", "on"), NULL,
		      "--peer-push and --peer-phase need --peer", NULL),
	      "--peer-push without --peer");
	CHECK(refused(ARGS(BASE, "--peer-phase", "off"), NULL,
		      "--peer-push and --peer-phase need --peer", NULL),
	      "--peer-phase without --peer");
	CHECK(refused(ARGS(BASE, PEERS, "--peer-push", "sometimes"), NULL,
		      "--peer-push: must be on or off, got 'sometimes'", NULL),
	      "--peer-push not a boolean");
	CHECK(refused(ARGS(BASE, PEERS, "--peer-phase", ""), NULL,
		      "--peer-phase: must be on or off, got ''", NULL),
	      "--peer-phase empty");
	CHECK(refused(ARGS(BASE, PEERS, "--peer-timeout", "soon"), NULL,
		      "--peer-timeout: 'soon' is not a duration", NULL),
	      "a timeout that is not a duration");
	CHECK(refused(ARGS(BASE, PEERS, "--peer-routers", "16"), NULL,
		      "peer-routers is 16 with --peer", "must be 1"),
	      "peer-routers above 1");
	CHECK(refused(ARGS(BASE, PEERS, "--wire-estimator", "off"), NULL,
		      "--peer: the routers share the request accounting, which --wire-estimator "
		      "off turns off",
		      NULL),
	      "with the accounting off");
}

static void test_peer_dns(void)
{
	struct steer_config c;
	int rc;

	CHECK(refused(ARGS(BASE, "--peer-dns", "routers.test:9470"), NULL,
		      "--peer-dns: needs --peer-listen ADDR:PORT", NULL),
	      "--peer-dns without --peer-listen: '%s'", err);
	CHECK(refused(ARGS(BASE, "--peer-dns", "127.0.0.2:9470", "--peer-listen", "127.0.0.1:9470"),
		      NULL, "--peer-dns: '127.0.0.2' is an IP address, not a name", NULL),
	      "an address: '%s'", err);
	CHECK(refused(ARGS(BASE, "--peer-dns", "routers.test", "--peer-listen", "127.0.0.1:9470"),
		      NULL, "--peer-dns: 'routers.test': the port is missing (NAME:PORT)", NULL),
	      "no port: '%s'", err);
	CHECK(refused(ARGS(BASE, "--peer-dns", "bad_name.test:9470", "--peer-listen",
			   "127.0.0.1:9470"),
		      NULL, "--peer-dns: 'bad_name.test' is not a DNS name", NULL),
	      "a bad name: '%s'", err);
	CHECK(refused(ARGS(BASE, "--peer-dns", "r.test:9470,r.test:9470", "--peer-listen",
			   "127.0.0.1:9470"),
		      NULL, "--peer-dns: peer-dns r.test:9470 given twice", NULL),
	      "twice: '%s'", err);
	CHECK(refused(ARGS(BASE, "--peer-dns",
			   "a.t:1,b.t:1,c.t:1,d.t:1,e.t:1,f.t:1,g.t:1,h.t:1,i.t:1", "--peer-listen",
			   "127.0.0.1:9470"),
		      NULL, "--peer-dns: at most 8 peer-dns names", NULL),
	      "nine names: '%s'", err);
	CHECK(refused(ARGS(BASE, "--peer-dns", "r.test:9470", "--peer-listen", "127.0.0.1:9470",
			   "--wire-estimator", "off"),
		      NULL, "--peer-dns: the routers share the request accounting", NULL),
	      "with the accounting off: '%s'", err);
	CHECK(refused(ARGS(BASE), "peer-dns: r.test:9470\n", ":1: peer-dns: needs --peer-listen",
		      NULL),
	      "the file's peer-dns without peer-listen: '%s'", err);

	rc = LOAD(&c, BASE, "--peer-dns", "routers.test.:9470,other.test:9471", "--peer-listen",
		  "0.0.0.0:9470");
	CHECK(rc == STEER_CONFIG_OK && c.n_peers == 0 && c.n_peer_dns == 2 &&
		      !strcmp(c.peer_dns[0].name, "routers.test.") && c.peer_dns[0].port == 9470 &&
		      !strcmp(c.peer_dns[1].spec, "other.test:9471") && steer_config_peers_on(&c) &&
		      c.services[0].policy.peers_report,
	      "names alone turn sharing on: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = load_yaml("peer-dns: routers.test:9470\npeer: 127.0.0.2:9470\n"
		       "peer-listen: 127.0.0.1:9470\n",
		       ARGS(BASE, "--peer-dns", "flag.test:9470"), &c);
	CHECK(rc == STEER_CONFIG_OK && c.n_peers == 1 && c.n_peer_dns == 1 &&
		      !strcmp(c.peer_dns[0].name, "flag.test"),
	      "file, with --peer; the flag's list wins: rc=%d '%s'", rc, err);
	steer_config_free(&c);
}

static void test_file_refused(void)
{
	CHECK(refused(ARGS(BASE), "log-level: info\npeer: 127.0.0.2:9470\n",
		      ":2: peer: needs --peer-listen", NULL),
	      "the file's peer without peer-listen: '%s'", err);
	CHECK(refused(ARGS(BASE),
		      "peer: 127.0.0.2:9470\npeer-listen: 127.0.0.1:9470\npeer-timeout: 1ms\n",
		      ":3: peer-timeout: must be at least 3 x the peer-interval", NULL),
	      "the file's timeout under 3 intervals: '%s'", err);
	CHECK(refused(ARGS(BASE),
		      "peer: 127.0.0.2:9470\npeer-listen: 127.0.0.1:9470\npeer-interval: 400ms\n",
		      ":3: peer-interval: must be at most a third of the peer-timeout (1s), got "
		      "400ms",
		      NULL),
	      "the file's interval over a third of the default timeout: '%s'", err);
	CHECK(refused(ARGS(BASE), "peer: 127.0.0.2:9470\npeer-listen: nowhere\n",
		      ":2: peer-listen: ", NULL),
	      "the file's bad listen address: '%s'", err);
	CHECK(refused(ARGS(BASE),
		      "peer: 127.0.0.2:9470\npeer-listen: 127.0.0.1:9470\nservices:\n"
		      "  - vip: 127.0.0.101:8000\n    peer-routers: 4\n    backends:\n"
		      "      - 127.0.0.12:8000\n",
		      "service 127.0.0.101:8000: peer-routers is 4 with --peer", NULL),
	      "a service's peer-routers above 1: '%s'", err);
}

static void test_accepted(void)
{
	struct steer_config c;
	char buf[STEER_ADDR_STRLEN];
	int rc;

	rc = LOAD(&c, BASE);
	CHECK(rc == STEER_CONFIG_OK && c.n_peers == 0 && !c.peer_listen_set &&
		      !c.services[0].policy.peers_report,
	      "none: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, PEERS);
	CHECK(rc == STEER_CONFIG_OK && c.n_peers == 1 && c.peer_listen_set &&
		      c.peer_interval_ns == 1000000 && c.peer_timeout_ns == 1000000000 &&
		      !strcmp(c.peer_strs[0], "127.0.0.2:9470") &&
		      !strcmp(c.peer_listen_str, "127.0.0.1:9470") &&
		      c.services[0].policy.peers_report && c.services[0].policy.peer_routers == 1 &&
		      !c.peer_push && !c.peer_no_phase,
	      "defaults: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, "--peer", "127.0.0.2:9470,127.0.0.3:9470", "--peer",
		  "[2001:db8::7]:9470", "--peer-listen", "0.0.0.0:9470", "--peer-interval", "250us",
		  "--peer-timeout", "100ms");
	CHECK(rc == STEER_CONFIG_OK && c.n_peers == 3 && c.peer_interval_ns == 250000 &&
		      c.peer_timeout_ns == 100000000 &&
		      !strcmp(steer_addr_format(&c.peers[2], buf, sizeof(buf)),
			      "[2001:db8::7]:9470"),
	      "a list, repeated, IPv6: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = load_yaml("peer: 127.0.0.2:9470,127.0.0.3:9470\npeer-listen: 127.0.0.1:9470\n"
		       "peer-interval: 2ms\n",
		       ARGS(BASE), &c);
	CHECK(rc == STEER_CONFIG_OK && c.n_peers == 2 && c.peer_interval_ns == 2000000,
	      "file: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, PEERS, "--peer-push", "on", "--peer-phase", "OFF", "--peer-interval",
		  "10s", "--peer-timeout", "30s");
	CHECK(rc == STEER_CONFIG_OK && c.peer_push && c.peer_no_phase &&
		      c.peer_interval_ns == 10000000000ULL,
	      "push on, phase off, a 10 s interval: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = load_yaml("peer: 127.0.0.2:9470\npeer-listen: 127.0.0.1:9470\npeer-push: yes\n"
		       "peer-phase: false\n",
		       ARGS(BASE, "--peer-push", "off"), &c);
	CHECK(rc == STEER_CONFIG_OK && !c.peer_push && c.peer_no_phase,
	      "file: push (the flag wins) and phase: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	/* The flag's list replaces the file's. */
	rc = load_yaml("peer: 127.0.0.2:9470,127.0.0.3:9470\npeer-listen: 127.0.0.1:9470\n",
		       ARGS(BASE, "--peer", "127.0.0.4:9470"), &c);
	CHECK(rc == STEER_CONFIG_OK && c.n_peers == 1 && !strcmp(c.peer_strs[0], "127.0.0.4:9470"),
	      "flag wins: rc=%d '%s'", rc, err);
	steer_config_free(&c);
}

static void test_check_config(void)
{
	char out[2048];
	int rc;

	rc = run_check_config(ARGS(BASE, "--peer", "127.0.0.2:9470"), out, sizeof(out));
	CHECK(rc == 2 && strstr(out, "--peer: needs --peer-listen"), "exit %d, '%s'", rc, out);
	rc = run_check_config(ARGS(BASE, PEERS, "--peer", "127.0.0.3:9470"), out, sizeof(out));
	CHECK(rc == 0, "valid: exit %d, '%s'", rc, out);
}

/* --check-config's summary (steer_config_summary, what it prints to stdout). */
static void test_summary(void)
{
	struct steer_config c;
	int rc = LOAD(&c, BASE, PEERS, "--peer", "127.0.0.3:9470");
	char *text = summary_of(&c);

	CHECK(text && rc == STEER_CONFIG_OK, "rc=%d '%s'", rc, err);
	CHECK(text && strstr(text, "  peers: listen 127.0.0.1:9470, report every 1ms, forget after "
				   "1s, phase on: "
				   "127.0.0.2:9470 127.0.0.3:9470\n"),
	      "summary: '%s'", text);
	free(text);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, PEERS, "--peer-push", "on", "--peer-phase", "off");
	text = summary_of(&c);
	CHECK(text && rc == STEER_CONFIG_OK, "rc=%d '%s'", rc, err);
	CHECK(text && strstr(text, "  peers: listen 127.0.0.1:9470, report every 1ms and at each "
				   "request, "
				   "forget after 1s, phase off: 127.0.0.2:9470\n"),
	      "summary with push: '%s'", text);
	free(text);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, "--peer-dns", "routers.test.:9470", "--peer-listen", "0.0.0.0:9470");
	text = summary_of(&c);
	CHECK(text && rc == STEER_CONFIG_OK, "rc=%d '%s'", rc, err);
	CHECK(text && strstr(text, "  peers: listen 0.0.0.0:9470, report every 1ms, forget after "
				   "1s, phase on: dns routers.test.:9470\n"),
	      "summary with peer-dns: '%s'", text);
	free(text);
	steer_config_free(&c);
}

/* ---- --peer-key ---------------------------------------------------------------- */

#define KEY1 "k1-0123456789abcdef"	     /* 19 bytes */
#define KEY2 "old-key-0123456789abcdefghijk" /* 29 bytes */

static char key_path[PATH_MAX];

static void key_cleanup(void)
{
	unlink(key_path);
}

/* key_path holding text; its path. */
static const char *key_file(const char *text)
{
	if (write_file(key_path, text))
		printf("# cannot write %s\n", key_path);
	return key_path;
}

static int key_is(const struct steer_config *c, int i, const char *text)
{
	return c->peer_keys && c->peer_keys->len[i] == strlen(text) &&
	       !memcmp(c->peer_keys->key[i], text, strlen(text));
}

/* A 300-byte key, a third line, a control byte, more than 1 KB. */
static void test_peer_key_refused_sizes(void)
{
	char big[1200], long_key[302];

	memset(long_key, 'k', 300);
	strcpy(long_key + 300, "\n");
	CHECK(refused(ARGS(BASE, PEERS, "--peer-key", key_file(long_key)), NULL, "--peer-key: ",
		      "the first key (line 1) has 300 bytes; a key has 16 to 256") &&
		      !strstr(err, "kkkk"),
	      "a 300-byte key: '%s'", err);
	CHECK(refused(ARGS(BASE, PEERS, "--peer-key", key_file(KEY1 "\n" KEY2 "\n" KEY2 "\n")),
		      NULL, "--peer-key: ", ": line 3 is not blank") &&
		      !strstr(err, KEY2),
	      "a third key: '%s'", err);
	CHECK(refused(ARGS(BASE, PEERS, "--peer-key",
			   key_file("0123456789\x01"
				    "abcdefghij\n")),
		      NULL, "--peer-key: ",
		      "the first key (line 1) has a control byte at column 11: a key is one "
		      "line of text") &&
		      !strstr(err, "0123456789"),
	      "a control byte in the key: '%s'", err);
	CHECK(refused(ARGS(BASE, PEERS, "--peer-key", key_file(KEY1 "\n\x1b" KEY2 "\n")), NULL,
		      "--peer-key: ", "the previous key (line 2) has a control byte at column 1"),
	      "a control byte in the previous key: '%s'", err);
	memset(big, ' ', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	memcpy(big, KEY1 "\n", strlen(KEY1) + 1);
	CHECK(refused(ARGS(BASE, PEERS, "--peer-key", key_file(big)), NULL,
		      "--peer-key: ", "is larger than 1024 bytes"),
	      "a 1.2 KB file: '%s'", err);
}

static void test_peer_key_refused(void)
{
	char where[PATH_MAX + 64];

	CHECK(refused(ARGS(BASE, PEERS, "--peer-key", "peer.key"), NULL,
		      "--peer-key: FILE must be an absolute path, got 'peer.key'", NULL),
	      "a relative path: '%s'", err);
	CHECK(refused(ARGS(BASE, PEERS, "--peer-key", "/nonexistent/peer.key"), NULL,
		      "--peer-key: cannot read /nonexistent/peer.key: No such file or directory",
		      NULL),
	      "a missing file: '%s'", err);
	CHECK(refused(ARGS(BASE, PEERS, "--peer-key", tmpdir), NULL,
		      "--peer-key: ", "is not a regular file"),
	      "a directory: '%s'", err);
	CHECK(refused(ARGS(BASE, PEERS, "--peer-key", key_file("short-key\n")), NULL,
		      "--peer-key: ", "the first key (line 1) has 9 bytes; a key has 16 to 256") &&
		      !strstr(err, "short-key"),
	      "a 9-byte key: '%s'", err);
	CHECK(refused(ARGS(BASE, PEERS, "--peer-key", key_file(KEY1 "\nold-short\n")), NULL,
		      "--peer-key: ", "the previous key (line 2) has 9 bytes") &&
		      !strstr(err, KEY1) && !strstr(err, "old-short"),
	      "a 9-byte previous key: '%s'", err);
	CHECK(refused(ARGS(BASE, PEERS, "--peer-key", key_file(" \t\r\n" KEY1 "\n")), NULL,
		      "--peer-key: ", "the first line is empty (expected the key)"),
	      "an empty first line: '%s'", err);
	CHECK(refused(ARGS(BASE, PEERS, "--peer-key", key_file("")), NULL,
		      "--peer-key: ", "the first line is empty"),
	      "an empty file: '%s'", err);
	test_peer_key_refused_sizes();
	CHECK(refused(ARGS(BASE, "--peer-key", key_file(KEY1 "\n")), NULL,
		      "--peer-key: needs --peer ADDR:PORT or --peer-dns NAME:PORT", NULL),
	      "--peer-key without --peer: '%s'", err);
	snprintf(where, sizeof(where), "peer-key: %s\n", key_file(KEY1 "\n"));
	CHECK(refused(ARGS(BASE), where, ":1: peer-key: needs --peer ADDR:PORT", NULL),
	      "the file's peer-key without peer: '%s'", err);
	snprintf(where, sizeof(where),
		 "peer: 127.0.0.2:9470\npeer-listen: 127.0.0.1:9470\n"
		 "peer-key: %s\n",
		 key_file("0123456789\n"));
	CHECK(refused(ARGS(BASE), where, ":3: peer-key: ", "has 10 bytes"),
	      "the file's key too short, named by its line: '%s'", err);
}

static void test_peer_key_accepted(void)
{
	char text[PATH_MAX + 128], out[2048];
	struct steer_config c;
	int rc;

	rc = LOAD(&c, BASE, PEERS, "--peer-key", key_file("  " KEY1 " \r\n"));
	CHECK(rc == STEER_CONFIG_OK && key_is(&c, 0, KEY1) && c.peer_keys->len[1] == 0 &&
		      !strcmp(c.peer_key_file, key_path),
	      "one key, blanks and CR trimmed: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	CHECK(c.peer_keys == NULL, "steer_config_free left the keys");
	rc = LOAD(&c, BASE, PEERS, "--peer-key", key_file(KEY1 "\n" KEY2 "\n\n \n"));
	CHECK(rc == STEER_CONFIG_OK && key_is(&c, 0, KEY1) && key_is(&c, 1, KEY2),
	      "a previous key on line 2, blank lines after: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, PEERS, "--peer-key", key_file(KEY1));
	CHECK(rc == STEER_CONFIG_OK && key_is(&c, 0, KEY1), "no newline: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, PEERS);
	CHECK(rc == STEER_CONFIG_OK && !c.peer_keys && !c.peer_key_file[0], "none: rc=%d", rc);
	steer_config_free(&c);
	snprintf(text, sizeof(text),
		 "peer: 127.0.0.2:9470\npeer-listen: 127.0.0.1:9470\npeer-key: %s\n",
		 key_file(KEY2 "\n"));
	rc = load_yaml(text, ARGS(BASE), &c);
	CHECK(rc == STEER_CONFIG_OK && key_is(&c, 0, KEY2), "the file's key: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	/* The flag's file replaces the file's, which is not read at all. */
	snprintf(text, sizeof(text),
		 "peer: 127.0.0.2:9470\npeer-listen: 127.0.0.1:9470\n"
		 "peer-key: /nonexistent/peer.key\n");
	rc = load_yaml(text, ARGS(BASE, "--peer-key", key_file(KEY1 "\n")), &c);
	CHECK(rc == STEER_CONFIG_OK && key_is(&c, 0, KEY1), "the flag wins: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = run_check_config(ARGS(BASE, PEERS, "--peer-key", key_file(KEY1 "\n" KEY2 "\n")), out,
			      sizeof(out));
	CHECK(rc == 0 && !strstr(out, KEY1) && !strstr(out, KEY2),
	      "--check-config: exit %d, no key on stderr: '%s'", rc, out);
}

static void test_peer_key_summary(void)
{
	struct steer_config c;
	char expect[PATH_MAX + 64], *text;
	int rc = LOAD(&c, BASE, PEERS, "--peer-key", key_file(KEY1 "\n"));

	text = summary_of(&c);
	snprintf(expect, sizeof(expect), "\n  peer key: %s\n", key_path);
	CHECK(text && rc == STEER_CONFIG_OK && strstr(text, expect) && !strstr(text, KEY1),
	      "summary: '%s'", text);
	free(text);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, PEERS, "--peer-key", key_file(KEY1 "\n" KEY2 "\n"));
	text = summary_of(&c);
	snprintf(expect, sizeof(expect),
		 "\n  peer key: %s (and a previous key on line 2, verifying only)\n", key_path);
	CHECK(text && rc == STEER_CONFIG_OK && strstr(text, expect) && !strstr(text, KEY1) &&
		      !strstr(text, KEY2),
	      "summary with a previous key: '%s'", text);
	free(text);
	steer_config_free(&c);
}

/* A key file group or others can read is used, with a warning naming it. */
static void test_peer_key_mode_warning(void)
{
	char want[PATH_MAX + 160], *text;
	struct steer_config c;
	int rc;

	key_file(KEY1 "\n");
	CHECK(!chmod(key_path, 0644), "chmod");
	rc = LOAD(&c, BASE, PEERS, "--peer-key", key_path);
	snprintf(want, sizeof(want),
		 "the --peer-key file %s can be read by group or others (mode 0644): chmod 0400 "
		 "it, or set defaultMode: 0400 on its Secret volume\n",
		 key_path);
	CHECK(rc == STEER_CONFIG_OK && !strcmp(c.warnings, want), "rc=%d warnings '%s'", rc,
	      c.warnings);
	text = summary_of(&c);
	CHECK(text && strstr(text, "  warning: the --peer-key file ") && !strstr(text, KEY1),
	      "summary: '%s'", text ? text : "");
	free(text);
	steer_config_free(&c);
	CHECK(!chmod(key_path, 0600), "chmod");
	rc = LOAD(&c, BASE, PEERS, "--peer-key", key_path);
	CHECK(rc == STEER_CONFIG_OK && !c.warnings[0], "0600 warned: '%s'", c.warnings);
	steer_config_free(&c);
}

int main(void)
{
	if (config_test_setup())
		return tap_setup_failed();
	snprintf(key_path, sizeof(key_path), "%s/peer.key", tmpdir);
	atexit(key_cleanup); /* before config_test_cleanup's rmdir */
	TAP_RUN(test_flags_refused);
	TAP_RUN(test_peer_dns);
	TAP_RUN(test_file_refused);
	TAP_RUN(test_accepted);
	TAP_RUN(test_check_config);
	TAP_RUN(test_summary);
	TAP_RUN(test_peer_key_refused);
	TAP_RUN(test_peer_key_accepted);
	TAP_RUN(test_peer_key_summary);
	TAP_RUN(test_peer_key_mode_warning);
	return tap_done();
}
