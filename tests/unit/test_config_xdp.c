// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_config_xdp.c - the XDP ingress options: --xdp-dev (repeatable, comma
 * lists, the file's key, flags replacing the file's list), --xdp-mode,
 * --xdp-encap-src (the prefixes and host masks the kernel reads), and the
 * errors, each naming its field.
 */
#include <arpa/inet.h>

#include "config_testlib.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static uint32_t ip4(const char *s)
{
	struct in_addr a;

	inet_pton(AF_INET, s, &a);
	return a.s_addr;
}

static void test_defaults(void)
{
	struct steer_config c;
	int rc = LOAD(&c, BASE);

	CHECK(rc == STEER_CONFIG_OK && c.n_xdp_devs == 0 && c.xdp_mode == STEER_XDP_NATIVE,
	      "rc=%d devs %zu mode %d", rc, c.n_xdp_devs, c.xdp_mode);
	/* 172.16.0.0/16: 16 host bits; 100::/64: the interface identifier. */
	CHECK(c.xdp_encap.src4 == ip4("172.16.0.0") && c.xdp_encap.src4_host == htonl(0xffff),
	      "src4 %08x host %08x", c.xdp_encap.src4, c.xdp_encap.src4_host);
	CHECK(c.xdp_encap.src6[0] == htonl(0x01000000) && c.xdp_encap.src6_host[0] == 0 &&
		      c.xdp_encap.src6_host[1] == 0 && c.xdp_encap.src6_host[2] == 0xffffffffu &&
		      c.xdp_encap.src6_host[3] == 0xffffffffu,
	      "src6 %08x host %08x %08x", c.xdp_encap.src6[0], c.xdp_encap.src6_host[1],
	      c.xdp_encap.src6_host[2]);
	steer_config_free(&c);
}

static void test_devices(void)
{
	struct steer_config c;
	int rc;

	rc = LOAD(&c, BASE, "--xdp-dev", "eth0", "--xdp-dev", "eth1,bond0", "--xdp-mode",
		  "generic");
	CHECK(rc == STEER_CONFIG_OK && c.n_xdp_devs == 3 && !strcmp(c.xdp_devs[0], "eth0") &&
		      !strcmp(c.xdp_devs[2], "bond0") && c.xdp_mode == STEER_XDP_GENERIC,
	      "rc=%d %s devs %zu", rc, err, c.n_xdp_devs);
	steer_config_free(&c);
	/* The file's list, replaced as a whole by the flags'. */
	rc = load_yaml("xdp-dev: eth0,eth1\nxdp-mode: generic\n", ARGS(BASE), &c);
	CHECK(rc == STEER_CONFIG_OK && c.n_xdp_devs == 2 && !strcmp(c.xdp_devs[1], "eth1") &&
		      c.xdp_mode == STEER_XDP_GENERIC,
	      "file: rc=%d %s devs %zu", rc, err, c.n_xdp_devs);
	steer_config_free(&c);
	rc = load_yaml("xdp-dev: eth0,eth1\n", ARGS(BASE, "--xdp-dev", "eth9"), &c);
	CHECK(rc == STEER_CONFIG_OK && c.n_xdp_devs == 1 && !strcmp(c.xdp_devs[0], "eth9"),
	      "flags over file: rc=%d devs %zu", rc, c.n_xdp_devs);
	steer_config_free(&c);
}

static void test_refused(void)
{
	static const struct {
		const char *flag, *v, *why;
	} bad[] = {
		{ "--xdp-dev", "averyveryverylongname", "--xdp-dev: an interface name has 1..15" },
		{ "--xdp-dev", "eth0,,eth1", "--xdp-dev: an interface name has 1..15" },
		{ "--xdp-dev", "eth0,eth0", "--xdp-dev: interface 'eth0' given twice" },
		{ "--xdp-dev", "a/b", "--xdp-dev: 'a/b' is not an interface name" },
		{ "--xdp-dev", "a,b,c,d,e,f,g,h,i", "--xdp-dev: at most 8 interfaces" },
		{ "--xdp-mode", "fast", "--xdp-mode: must be native or generic, got 'fast'" },
		{ "--xdp-encap-src", "198.51.100.0/30", "--xdp-encap-src: '198.51.100.0/30'" },
		{ "--xdp-encap-src", "2001:db8::/48", "--xdp-encap-src: '2001:db8::/48'" },
		{ "--xdp-encap-src", "10.0.0.0/8,10.1.0.0/16", "a second IPv4 prefix" },
		{ "--xdp-encap-src", "10.0.0.0", "is not a prefix ADDR/LEN" },
		{ "--xdp-encap-src", "10.0.0.x/8", "is not an IPv4 address" },
	};
	struct steer_config c;
	size_t i;

	for (i = 0; i < N(bad); i++) {
		int rc = LOAD(&c, BASE, bad[i].flag, bad[i].v);

		CHECK(rc == STEER_CONFIG_USAGE && strstr(err, bad[i].why), "%s %s: rc=%d err=%s",
		      bad[i].flag, bad[i].v, rc, err);
	}
	{
		int rc = load_yaml("xdp-mode: turbo\n", ARGS(BASE), &c);

		CHECK(rc == STEER_CONFIG_USAGE &&
			      strstr(err, ":1: xdp-mode: must be native") != NULL,
		      "file: rc=%d err=%s", rc, err);
		if (rc == STEER_CONFIG_OK)
			steer_config_free(&c);
	}
}

static void test_encap_src(void)
{
	struct steer_config c;
	int rc = LOAD(&c, BASE, "--xdp-encap-src", "2001:db8:5::/64,198.51.100.0/24");

	CHECK(rc == STEER_CONFIG_OK && c.xdp_encap.src4 == ip4("198.51.100.0") &&
		      c.xdp_encap.src4_host == htonl(0xff) &&
		      c.xdp_encap.src6[0] == htonl(0x20010db8) &&
		      c.xdp_encap.src6[1] == htonl(0x00050000) &&
		      c.xdp_encap.src6_host[2] == 0xffffffffu,
	      "rc=%d %s src4 %08x/%08x", rc, err, c.xdp_encap.src4, c.xdp_encap.src4_host);
	steer_config_free(&c);
	/* Only one family given: the other keeps the default. */
	rc = LOAD(&c, BASE, "--xdp-encap-src", "192.0.2.0/24");
	CHECK(rc == STEER_CONFIG_OK && c.xdp_encap.src4 == ip4("192.0.2.0") &&
		      c.xdp_encap.src4_host == htonl(0xff) &&
		      c.xdp_encap.src6[0] == htonl(0x01000000),
	      "rc=%d %s", rc, err);
	steer_config_free(&c);
	/* Host bits given in the prefix are ignored: the hash fills them. */
	rc = LOAD(&c, BASE, "--xdp-encap-src", "198.51.100.77/24");
	CHECK(rc == STEER_CONFIG_OK && c.xdp_encap.src4 == ip4("198.51.100.0"), "rc=%d %s", rc,
	      err);
	steer_config_free(&c);
}

int main(void)
{
	if (config_test_setup())
		return tap_setup_failed();
	TAP_RUN(test_defaults);
	TAP_RUN(test_devices);
	TAP_RUN(test_refused);
	TAP_RUN(test_encap_src);
	return tap_done();
}
