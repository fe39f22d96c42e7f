/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * smg_steer_affinity.h - an application's side of smg-steer's cache
 * affinity by key (--affinity sockopt): give a socket the key of its
 * conversation before connect(), and the conversation's next connection
 * returns to the worker that holds its KV cache, while that worker's
 * expected wait stays within the service's slack of the least.
 *
 *     int fd = socket(AF_INET, SOCK_STREAM, 0);
 *     smg_steer_set_affinity_key(fd, conversation_id);  // ignore the result
 *     connect(fd, vip, vip_len);
 *
 * No privilege is needed. On a host without smg-steer, or outside the
 * cgroup it steers, the call fails with ENOPROTOOPT and changes nothing: an
 * application may ignore the result. Key 0 clears the socket's key; the key
 * is read at each connect() of the socket. Header only, no library.
 *
 * The numbers are part of smg-steer's contract (bpf/steer_common.h,
 * STEER_SOL_AFFINITY and STEER_SO_AFFINITY_KEY) and never change.
 */
#ifndef SMG_STEER_AFFINITY_H
#define SMG_STEER_AFFINITY_H

#include <stdint.h>
#include <sys/socket.h>

#define SMG_STEER_SOL_AFFINITY 0x534d47 /* the socket option level: "SMG" */
#define SMG_STEER_SO_AFFINITY_KEY 1	/* the option: an 8-byte key, host byte order */

/* 0, or -1 with errno: ENOPROTOOPT without smg-steer, EINVAL for a bad fd. */
static inline int smg_steer_set_affinity_key(int fd, uint64_t key)
{
	return setsockopt(fd, SMG_STEER_SOL_AFFINITY, SMG_STEER_SO_AFFINITY_KEY, &key, sizeof(key));
}

#endif /* SMG_STEER_AFFINITY_H */
