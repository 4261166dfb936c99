/*
 * One filtering decision, the same code path for the daemon's workers and `nxdns lookup`:
 *
 *   local records (2) -> paused or a client whose groups do not filter (1) -> user allow (3)
 *   -> user deny (4) -> list exceptions (7) -> list exact (8) -> list parents (9)
 *
 * Local records come before the pause on purpose: pausing filtering must not make the LAN's
 * own names disappear (they would otherwise go upstream, which does not know them).
 * Also the answers a decision produces (block answer per filter.block_mode with EDE 15,
 * local-record answer) and the CNAME-cloaking check of an upstream answer.
 * No allocation; safe on any thread with borrowed, immutable inputs.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "conf/conf.h"
#include "dns/msg.h"
#include "filter/rules.h"
#include "filter/snapshot.h"

struct nx_decide_ctx {
	const struct nx_conf *c;             /* borrowed */
	const struct nx_filter_rules *rules; /* borrowed, may be NULL */
	const struct nx_filter_snap *snap;   /* borrowed, may be NULL (empty) */
	bool paused;                         /* filtering paused (API) */
};

/* A client's filtering policy, computed once per query. */
struct nx_client_policy {
	uint64_t eligible; /* sources this client's groups may use */
	bool filtering;    /* false: never filtered (group off, filter.enabled off, paused) */
	int client;        /* index in clients, -1 = unknown (default group) */
};

void nx_decide_policy(const struct nx_decide_ctx *d, const struct sockaddr *client,
		      const char *client_id, struct nx_client_policy *p);

/* Compile filter.allow / filter.deny of c (validated by the loader). 0 or a negative code. */
int nx_decide_rules_build(const struct nx_conf *c, struct nx_filter_rules **out);

/* Decide for a wire name (any case). */
enum nx_filter_action nx_decide(const struct nx_decide_ctx *d, const struct nx_client_policy *p,
				const uint8_t *wire, size_t wlen, struct nx_filter_result *out);

/*
 * CNAME cloaking: walk the CNAME records of a validated answer `m` (bytes `buf`); when a target
 * is blocked for this client (user deny, list levels 8-9; an exception or user allow on the
 * target lets it through) fill `out` (matched name = that target, copied into matched_wire) and
 * return true.
 */
bool nx_decide_cname(const struct nx_decide_ctx *d, const struct nx_client_policy *p,
		     const uint8_t *buf, const struct nx_dns_msg *m, struct nx_filter_result *out,
		     uint8_t matched_wire[NX_DNS_NAME_MAX], size_t *matched_len);

/* The source or rule a result names, for EDE text, logs and `nxdns lookup`. */
const char *nx_decide_source_name(const struct nx_decide_ctx *d, const struct nx_filter_result *r);

/*
 * Build the block answer for the query described by ctx (filter.block_mode, filter.block_ttl),
 * with EDE 15 whose text names the source (or rule). Returns the length or a negative code.
 */
int nx_decide_block_answer(const struct nx_decide_ctx *d, uint8_t *out, size_t cap,
			   const struct nx_dns_reply_ctx *ctx, const struct nx_filter_result *r);

/* Answer from local_records (AA set): the records of the question's type, or a CNAME of the
 * name, or NODATA. Returns the length or a negative code. */
int nx_decide_local_answer(const struct nx_decide_ctx *d, uint8_t *out, size_t cap,
			   const struct nx_dns_reply_ctx *ctx);
