/*
 * Counters and gauges: one X-macro table is the single source of names, labels and help.
 *
 * Counters are per-thread blocks (a registered thread increments its own cache lines with plain
 * relaxed stores; unregistered threads share one block through atomic adds) and are summed when
 * read. Gauges are process-wide atomics with a high-water mark ("_peak" series).
 * Rows of one metric family are consecutive in the table so exposition prints TYPE/HELP once.
 */
#pragma once

#include <stdint.h>

/* X(id, family, labels, help) — labels is the Prometheus label string without braces. */
#define NX_COUNTERS(X)                                                                          \
	X(Q_UDP, "nxdns_queries_total", "proto=\"udp\"", "DNS queries received, by protocol")   \
	X(Q_TCP, "nxdns_queries_total", "proto=\"tcp\"", "")                                   \
	X(Q_DOT, "nxdns_queries_total", "proto=\"dot\"", "")                                   \
	X(Q_DOH, "nxdns_queries_total", "proto=\"doh\"", "")                                   \
	X(R_FORWARDED, "nxdns_answers_total", "result=\"forwarded\"",                           \
	  "DNS answers sent, by how they were produced")                                         \
	X(R_CACHED, "nxdns_answers_total", "result=\"cached\"", "")                            \
	X(R_BLOCKED, "nxdns_answers_total", "result=\"blocked\"", "")                          \
	X(R_LOCAL, "nxdns_answers_total", "result=\"local\"", "")                              \
	X(R_SERVFAIL, "nxdns_answers_total", "result=\"servfail\"", "")                        \
	X(R_REFUSED, "nxdns_answers_total", "result=\"refused\"", "")                          \
	X(R_FORMERR, "nxdns_answers_total", "result=\"formerr\"", "")                          \
	X(R_NOTIMP, "nxdns_answers_total", "result=\"notimp\"", "")                            \
	X(R_ANY, "nxdns_answers_total", "result=\"rfc8482\"", "")                              \
	X(R_TRUNCATED, "nxdns_truncated_total", "", "UDP answers truncated to the client's size")\
	X(B_USER_DENY, "nxdns_blocked_total", "reason=\"user_deny\"",                           \
	  "Queries blocked, by reason")                                                          \
	X(B_DOMAIN, "nxdns_blocked_total", "reason=\"blocklist_domain\"", "")                   \
	X(B_WILDCARD, "nxdns_blocked_total", "reason=\"blocklist_wildcard\"", "")               \
	X(B_CNAME, "nxdns_blocked_total", "reason=\"cname\"", "")                               \
	X(D_SHORT, "nxdns_dropped_total", "reason=\"short_header\"",                            \
	  "Queries dropped without an answer, by reason")                                        \
	X(D_RESPONSE, "nxdns_dropped_total", "reason=\"response_qr\"", "")                     \
	X(D_NO_SLOT, "nxdns_dropped_total", "reason=\"dropped_no_slot\"", "")                  \
	X(D_NO_PERMIT, "nxdns_dropped_total", "reason=\"dropped_no_permit\"", "")              \
	X(D_CONN_CAP, "nxdns_dropped_total", "reason=\"connection_cap\"", "")                  \
	X(D_WAITERS, "nxdns_dropped_total", "reason=\"coalesce_waiters_full\"", "")            \
	X(D_SEND, "nxdns_dropped_total", "reason=\"send_failed\"", "")                         \
	X(D_TCP_TOO_BIG, "nxdns_dropped_total", "reason=\"tcp_write_queue_full\"", "")         \
	X(D_TCP_READ_TIMEOUT, "nxdns_dropped_total", "reason=\"tcp_read_timeout\"", "")        \
	X(D_TCP_PIPELINE, "nxdns_dropped_total", "reason=\"tcp_pipeline_full\"", "")           \
	X(ACL_REFUSED, "nxdns_acl_refused_total", "", "Queries refused by access control")      \
	X(TCP_ACCEPTED, "nxdns_tcp_accepted_total", "", "TCP connections accepted")             \
	X(TCP_IDLE_CLOSED, "nxdns_tcp_idle_closed_total", "", "TCP connections closed idle")   \
	X(COALESCED, "nxdns_coalesced_total", "",                                               \
	  "Queries answered by joining an identical in-flight upstream exchange")               \
	X(UP_BAD_REPLY, "nxdns_upstream_rejected_total", "reason=\"bad_reply\"",                \
	  "Upstream datagrams ignored, by reason")                                               \
	X(UP_WRONG_ID, "nxdns_upstream_rejected_total", "reason=\"wrong_id\"", "")             \
	X(UP_WRONG_QUESTION, "nxdns_upstream_rejected_total", "reason=\"wrong_question\"", "") \
	X(UP_WRONG_SOURCE, "nxdns_upstream_rejected_total", "reason=\"wrong_source\"", "")     \
	X(UP_LATE, "nxdns_upstream_rejected_total", "reason=\"late\"", "")                     \
	X(UP_WRONG_CASE, "nxdns_upstream_rejected_total", "reason=\"wrong_case\"", "")         \
	X(UP_MALFORMED, "nxdns_upstream_rejected_total", "reason=\"malformed\"", "")           \
	X(UP_MALFORMED_QUESTION, "nxdns_upstream_rejected_total",                              \
	  "reason=\"malformed_question\"", "")                                                  \
	X(F_OK, "nxdns_filter_downloads_total", "result=\"ok\"",                                \
	  "Blocklist downloads, by result (errors keep the last good list)")                     \
	X(F_NOT_MODIFIED, "nxdns_filter_downloads_total", "result=\"not_modified\"", "")        \
	X(F_ERROR, "nxdns_filter_downloads_total", "result=\"error\"", "")                      \
	X(RELOADS_OK, "nxdns_config_reloads_total", "result=\"ok\"", "Configuration reloads")   \
	X(RELOADS_FAILED, "nxdns_config_reloads_total", "result=\"failed\"", "")               \
	X(ASSERT_FAILURES, "nxdns_assert_failures_total", "",                                   \
	  "Cannot-happen checks that failed on the request path (work dropped)")               \
	X(UP_EDNS_FALLBACK, "nxdns_upstream_edns_fallback_total", "",                           \
	  "Upstream queries asked again without EDNS after FORMERR/NOTIMP/BADVERS to EDNS")    \
	X(UP_CAPS_FALLBACK, "nxdns_upstream_caps_fallback_total", "",                           \
	  "Upstream servers whose 0x20 case randomisation was paused after case mismatches")    \
	X(UP_SOCK_LIMIT, "nxdns_upstream_socket_limit_total", "",                               \
	  "Upstream UDP queries refused because the server's socket bound was reached")

/* X(id, family, help) */
#define NX_GAUGES(X)                                                                            \
	X(IN_FLIGHT, "nxdns_dns_in_flight", "DNS queries being handled (all listeners)")        \
	X(TCP_CONNS, "nxdns_tcp_server_connections", "Open TCP client connections")            \
	X(PERMITS_USED, "nxdns_query_permits_in_use", "Query permits held by upstream work")

enum nx_stat {
#define NX_STAT_ENUM(id, fam, labels, help) NX_STAT_##id,
	NX_COUNTERS(NX_STAT_ENUM)
#undef NX_STAT_ENUM
	NX_STAT__COUNT
};

enum nx_gauge {
#define NX_GAUGE_ENUM(id, fam, help) NX_GAUGE_##id,
	NX_GAUGES(NX_GAUGE_ENUM)
#undef NX_GAUGE_ENUM
	NX_GAUGE__COUNT
};

struct nx_stat_desc {
	const char *family; /* static */
	const char *labels; /* static, may be "" */
	const char *help;   /* static, "" for rows after the first of a family */
};

/* Give the calling thread its own counter block (workers). Returns 0 or NX_ELIMIT. */
int nx_stats_thread_register(void);

void nx_stat_add(enum nx_stat s, uint64_t n);
static inline void nx_stat_inc(enum nx_stat s)
{
	nx_stat_add(s, 1);
}
uint64_t nx_stat_read(enum nx_stat s);
const struct nx_stat_desc *nx_stat_desc(enum nx_stat s);

void nx_gauge_add(enum nx_gauge g, int64_t delta);
int64_t nx_gauge_read(enum nx_gauge g);
int64_t nx_gauge_peak(enum nx_gauge g);
const char *nx_gauge_family(enum nx_gauge g);
const char *nx_gauge_help(enum nx_gauge g);
