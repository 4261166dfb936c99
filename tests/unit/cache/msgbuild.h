/*
 * Hand-built DNS messages for the cache tests: writes the bytes and fills struct nx_dns_msg
 * the way nx_dns_msg_parse() describes it, so the cache tests do not depend on the codec.
 * Sections must be added in order (answer, authority, additional). Owners of added RRs are a
 * compression pointer to the question name.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "dns/msg.h"

enum tsec { T_AN = 0, T_NS = 1, T_AR = 2 };

struct tmsg {
	uint8_t buf[NX_DNS_MSG_MAX];
	struct nx_dns_msg m;
	size_t pos;
	int sec;
};

/* Start a response: id 0x1234, QR|RD|RA + `flags` (rcode in the low bits), one question. */
void tmsg_start(struct tmsg *t, const char *qname, uint16_t qtype, uint16_t qclass, uint16_t flags);
/* Add an RR to section `sec` (>= the last one used). */
void tmsg_rr(struct tmsg *t, int sec, uint16_t type, uint32_t ttl, const uint8_t *rdata,
	     uint16_t rdlen);
/* Authority SOA with compressed mname/rname (pointers to the qname), given TTL and MINIMUM. */
void tmsg_soa(struct tmsg *t, uint32_t ttl, uint32_t minimum);
/* OPT RR in the additional section (udp 1232), DO bit, optional EDE. */
void tmsg_opt(struct tmsg *t, bool do_bit, int ede_code, const char *ede_text);
/* Write the counts and the final offsets. */
void tmsg_finish(struct tmsg *t);

/* Wire name from "a.b.c" into out; returns the length. */
uint8_t tname(const char *text, uint8_t out[NX_DNS_NAME_MAX]);

/* A key with its own name storage. */
struct tkey {
	uint8_t wire[NX_DNS_NAME_MAX];
	struct nx_cache_key k;
};
void tkey_init(struct tkey *t, const char *name, uint16_t qtype, bool do_bit, bool cd);

/* Read the 32-bit TTL of the i-th recorded RR of a message described by m. */
uint32_t tmsg_ttl_at(const uint8_t *buf, const struct nx_dns_msg *m, unsigned i);
