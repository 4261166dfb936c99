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
	X(R_BADVERS, "nxdns_answers_total", "result=\"badvers\"", "")                          \
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
	X(D_BAD_FRAME, "nxdns_dropped_total", "reason=\"bad_frame\"", "")                     \
	X(D_TLS_HANDSHAKE, "nxdns_dropped_total", "reason=\"tls_handshake_timeout\"", "")     \
	X(STREAM_EVICTED, "nxdns_stream_evicted_total", "",                                       \
	  "Idle stream connections closed to make room at a listener's connection cap")          \
	X(STREAM_PAUSED, "nxdns_stream_permit_waits_total", "",                                   \
	  "Stream queries that found no query permit and paused their connection's reading")     \
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
	X(UP_STREAM_CONNECT_FAILED, "nxdns_upstream_stream_failures_total", "reason=\"connect\"", \
	  "Upstream TCP/DoT/DoH connections that failed, by reason")                           \
	X(UP_STREAM_TIMEOUT, "nxdns_upstream_stream_failures_total", "reason=\"timeout\"", "") \
	X(UP_STREAM_BACKOFF, "nxdns_upstream_stream_failures_total", "reason=\"backoff\"", "") \
	X(UP_STREAM_FULL, "nxdns_upstream_stream_failures_total", "reason=\"connections_full\"", \
	  "")                                                                                    \
	X(F_OK, "nxdns_filter_downloads_total", "result=\"ok\"",                                \
	  "Blocklist downloads, by result (errors keep the last good list)")                     \
	X(F_NOT_MODIFIED, "nxdns_filter_downloads_total", "result=\"not_modified\"", "")        \
	X(F_ERROR, "nxdns_filter_downloads_total", "result=\"error\"", "")                      \
	X(BOOT_UNLOADED_FAILED, "nxdns_lists_first_boot_unloaded_total",                          \
	  "reason=\"download_failed\"",                                                          \
	  "URL sources a start went on without (no list on disk, its download failed or "          \
	  "outlasted filter.first_boot_timeout): DNS answered without them until a refresh")     \
	X(BOOT_UNLOADED_TIMEOUT, "nxdns_lists_first_boot_unloaded_total", "reason=\"timeout\"",  \
	  "")                                                                                    \
	X(RELOADS_OK, "nxdns_config_reloads_total", "result=\"ok\"", "Configuration reloads")   \
	X(RELOADS_FAILED, "nxdns_config_reloads_total", "result=\"failed\"", "")               \
	X(ASSERT_FAILURES, "nxdns_assert_failures_total", "",                                   \
	  "Cannot-happen checks that failed on the request path (work dropped)")                 \
	X(TLS_SRV_READY, "nxdns_tls_handshakes_total", "side=\"server\"",                       \
	  "TLS handshakes completed, by side")                                                   \
	X(TLS_CLI_READY, "nxdns_tls_handshakes_total", "side=\"client\"", "")                  \
	X(TLS_SRV_RESUMED, "nxdns_tls_resumed_total", "side=\"server\"",                        \
	  "TLS handshakes that resumed an earlier session, by side")                             \
	X(TLS_CLI_RESUMED, "nxdns_tls_resumed_total", "side=\"client\"", "")                   \
	X(TLS_SRV_E_HANDSHAKE, "nxdns_tls_errors_total", "side=\"server\",reason=\"handshake\"", \
	  "TLS sessions ended by an error, by side and reason")                                  \
	X(TLS_SRV_E_VERIFY, "nxdns_tls_errors_total", "side=\"server\",reason=\"verify\"", "")   \
	X(TLS_SRV_E_RECORD, "nxdns_tls_errors_total", "side=\"server\",reason=\"bad_record\"", "") \
	X(TLS_SRV_E_ALERT, "nxdns_tls_errors_total", "side=\"server\",reason=\"alert\"", "")     \
	X(TLS_SRV_E_TRANSPORT, "nxdns_tls_errors_total", "side=\"server\",reason=\"transport\"", "") \
	X(TLS_SRV_E_NOMEM, "nxdns_tls_errors_total", "side=\"server\",reason=\"no_memory\"", "") \
	X(TLS_CLI_E_HANDSHAKE, "nxdns_tls_errors_total", "side=\"client\",reason=\"handshake\"", "") \
	X(TLS_CLI_E_VERIFY, "nxdns_tls_errors_total", "side=\"client\",reason=\"verify\"", "")   \
	X(TLS_CLI_E_RECORD, "nxdns_tls_errors_total", "side=\"client\",reason=\"bad_record\"", "") \
	X(TLS_CLI_E_ALERT, "nxdns_tls_errors_total", "side=\"client\",reason=\"alert\"", "")     \
	X(TLS_CLI_E_TRANSPORT, "nxdns_tls_errors_total", "side=\"client\",reason=\"transport\"", "") \
	X(TLS_CLI_E_NOMEM, "nxdns_tls_errors_total", "side=\"client\",reason=\"no_memory\"", "") \
	X(DOH_E400, "nxdns_doh_http_errors_total", "status=\"400\"",                              \
	  "DoH requests answered with an HTTP error status, by status")                         \
	X(DOH_E404, "nxdns_doh_http_errors_total", "status=\"404\"", "")                          \
	X(DOH_E405, "nxdns_doh_http_errors_total", "status=\"405\"", "")                          \
	X(DOH_E413, "nxdns_doh_http_errors_total", "status=\"413\"", "")                          \
	X(DOH_E414, "nxdns_doh_http_errors_total", "status=\"414\"", "")                          \
	X(DOH_E415, "nxdns_doh_http_errors_total", "status=\"415\"", "")                          \
	X(DOH_E500, "nxdns_doh_http_errors_total", "status=\"500\"", "")                          \
	X(DOH_E503, "nxdns_doh_http_errors_total", "status=\"503\"", "")                          \
	X(DOH_EOTHER, "nxdns_doh_http_errors_total", "status=\"other\"", "")                      \
	X(DOH_STREAM_CAP, "nxdns_doh_dropped_total", "reason=\"stream_cap\"",                     \
	  "DoH streams refused or reset and connections ended by the HTTP/2 layer, by reason")  \
	X(DOH_BODY_BUDGET, "nxdns_doh_dropped_total", "reason=\"body_budget\"", "")              \
	X(DOH_OUT_FULL, "nxdns_doh_dropped_total", "reason=\"response_queue_full\"", "")         \
	X(DOH_STREAM_GONE, "nxdns_doh_dropped_total", "reason=\"stream_gone\"", "")              \
	X(DOH_HTTP1, "nxdns_doh_dropped_total", "reason=\"http1\"", "")                          \
	X(DOH_BAD_PREFACE, "nxdns_doh_dropped_total", "reason=\"bad_preface\"", "")              \
	X(DOH_PROTOCOL, "nxdns_doh_dropped_total", "reason=\"protocol_error\"", "")             \
	X(DOHC_HTTP_STATUS, "nxdns_doh_upstream_errors_total", "reason=\"http_status\"",         \
	  "DoH upstream requests failed and connections ended by the HTTP/2 client, by reason") \
	X(DOHC_CONTENT_TYPE, "nxdns_doh_upstream_errors_total", "reason=\"content_type\"", "")   \
	X(DOHC_TOO_LARGE, "nxdns_doh_upstream_errors_total", "reason=\"body_too_large\"", "")    \
	X(DOHC_BODY_BUDGET, "nxdns_doh_upstream_errors_total", "reason=\"body_budget\"", "")     \
	X(DOHC_SHORT_BODY, "nxdns_doh_upstream_errors_total", "reason=\"short_body\"", "")       \
	X(DOHC_REFUSED, "nxdns_doh_upstream_errors_total", "reason=\"refused\"", "")             \
	X(DOHC_RESET, "nxdns_doh_upstream_errors_total", "reason=\"stream_reset\"", "")          \
	X(DOHC_CONN_LOST, "nxdns_doh_upstream_errors_total", "reason=\"connection_lost\"", "")   \
	X(DOHC_STREAM_LIMIT, "nxdns_doh_upstream_errors_total", "reason=\"stream_limit\"", "")   \
	X(DOHC_PROTOCOL, "nxdns_doh_upstream_errors_total", "reason=\"protocol_error\"", "") \
	X(UP_EDNS_FALLBACK, "nxdns_upstream_edns_fallback_total", "",                           \
	  "Upstream queries asked again without EDNS after FORMERR/NOTIMP/BADVERS to EDNS")    \
	X(UP_CAPS_FALLBACK, "nxdns_upstream_caps_fallback_total", "",                           \
	  "Upstream servers whose 0x20 case randomisation was paused after case mismatches")    \
	X(UP_SOCK_LIMIT, "nxdns_upstream_socket_limit_total", "",                               \
	  "Upstream UDP queries refused because the server's socket bound was reached")         \
	X(RL_UDP, "nxdns_rate_limited_total", "proto=\"udp\"",                                  \
	  "Queries over their client's access.rate_limit, by protocol (UDP dropped, others REFUSED)") \
	X(RL_TCP, "nxdns_rate_limited_total", "proto=\"tcp\"", "")                             \
	X(RL_DOT, "nxdns_rate_limited_total", "proto=\"dot\"", "")                             \
	X(RL_DOH, "nxdns_rate_limited_total", "proto=\"doh\"", "")                             \
	X(RL_EVICTED, "nxdns_rate_limit_evictions_total", "",                                   \
	  "Rate-limit entries recycled for another client while still holding state (table full)") \
	X(REBIND_STRIPPED, "nxdns_rebinding_total", "result=\"stripped\"",                      \
	  "Upstream answers with private addresses (filter.rebinding_protection), by result")  \
	X(REBIND_EMPTIED, "nxdns_rebinding_total", "result=\"emptied\"", "")                   \
	X(REBIND_ALLOWED, "nxdns_rebinding_total", "result=\"allowed\"", "")                   \
	X(REBIND_RECORDS, "nxdns_rebinding_addresses_stripped_total", "",                       \
	  "Private addresses removed from upstream answers (A/AAAA records, HTTPS/SVCB hints)") \
	X(RL_LOG_SUPPRESSED, "nxdns_rate_limit_log_suppressed_total", "",                      \
	  "Over-the-limit log lines held back by the log budget (60 at once, then one a second)") \
	X(NOTIFY_FAILED, "nxdns_service_notify_failures_total", "",                             \
	  "Service manager notifications (sd_notify datagrams) that could not be sent")          \
	X(JOURNAL_FAILED, "nxdns_journal_send_failures_total", "",                              \
	  "Log lines the journal socket refused (written to stderr instead)") \
	X(NAMES_FOUND, "nxdns_client_names_lookups_total", "result=\"name\"",                    \
	  "Client-name PTR lookups through the forward zones, by result")                     \
	X(NAMES_NONE, "nxdns_client_names_lookups_total", "result=\"none\"", "")                 \
	X(NAMES_TIMEOUT, "nxdns_client_names_lookups_total", "result=\"timeout\"", "")           \
	X(NAMES_REJECTED, "nxdns_client_names_rejected_total", "",                              \
	  "Replies to client-name lookups ignored: wrong id, question or not a reply")          \
	X(NAMES_EVICTED, "nxdns_client_names_evicted_total", "",                                \
	  "Cached client names evicted (the least recently read) to make room")               \
	X(NAMES_DROPPED, "nxdns_client_names_dropped_total", "",                                \
	  "Client-name lookups not queued: the queue or the table was full") \
	X(FILTER_REGEX_LIMIT, "nxdns_filter_regex_limit_total", "",                             \
	  "List regex matches stopped by a PCRE2 match, depth or memory limit (no match)")      \
	X(FILTER_SIDE_REFUSED, "nxdns_filter_side_refused_total", "",                           \
	  "Side-structure rules refused at load (bad rule, or a rule / regex cap reached)") \
	X(SYNC_APPLIED, "nxdns_sync_pulls_total", "result=\"applied\"",                          \
	  "A replica's pulls from sync.primary, by result (failed ones keep the last good config)") \
	X(SYNC_NOT_MODIFIED, "nxdns_sync_pulls_total", "result=\"not_modified\"", "")            \
	X(SYNC_FETCH_FAILED, "nxdns_sync_pulls_total", "result=\"fetch_failed\"", "")            \
	X(SYNC_INVALID, "nxdns_sync_pulls_total", "result=\"invalid\"", "")                      \
	X(SYNC_RELOAD_FAILED, "nxdns_sync_pulls_total", "result=\"reload_failed\"", "") \
	X(SP_LOCALHOST, "nxdns_special_names_total", "reason=\"special_localhost\"",             \
	  "Special-use names answered by nxdns or exempted (special.*), by reason")             \
	X(SP_USE_NAME, "nxdns_special_names_total", "reason=\"special_use_name\"", "")          \
	X(SP_SINGLE_LABEL, "nxdns_special_names_total", "reason=\"single_label\"", "")          \
	X(SP_PRIVATE_REVERSE, "nxdns_special_names_total", "reason=\"private_reverse\"", "")    \
	X(SP_FIREFOX_CANARY, "nxdns_special_names_total", "reason=\"firefox_canary\"", "")      \
	X(SP_ANDROID_PROBE, "nxdns_special_names_total", "reason=\"android_probe\"", "")        \
	X(SP_PRIVATE_RELAY, "nxdns_special_names_total", "reason=\"private_relay\"", "")        \
	X(SP_DDR, "nxdns_special_names_total", "reason=\"ddr\"", "") \
	X(DNSTAP_SENT, "nxdns_dnstap_sent_total", "",                                           \
	  "dnstap frames written to the collector (a query and a response per answer, and the "  \
	  "forwarder frames)")                                                                   \
	X(DNSTAP_SENT_FWD, "nxdns_dnstap_forwarder_sent_total", "",                             \
	  "FORWARDER_QUERY and FORWARDER_RESPONSE frames among them (dnstap.forwarder)")         \
	X(DNSTAP_DROP_FULL, "nxdns_dnstap_dropped_total", "reason=\"queue_full\"",               \
	  "dnstap events (answers, forwarder messages) not exported, by reason (the DNS answer "  \
	  "was still sent)")         \
	X(DNSTAP_DROP_LARGE, "nxdns_dnstap_dropped_total", "reason=\"too_large\"", "")           \
	X(DNSTAP_DROP_WRITE, "nxdns_dnstap_dropped_total", "reason=\"write_error\"", "")         \
	X(DNSTAP_RECONNECTS, "nxdns_dnstap_reconnects_total", "",                               \
	  "dnstap connections lost or refused, each followed by a retry after a backoff") \
	X(R_REWRITTEN, "nxdns_filter_rewrite_answers_total", "",                                \
	  "Answers written by a list's $dnsrewrite or hosts-line rule instead of resolving") \
	X(PGSINK_SENT, "nxdns_pgsink_sent_total", "",                                           \
	  "Query records committed to PostgreSQL (logging.postgresql)")                          \
	X(PGSINK_DROP_FULL, "nxdns_pgsink_dropped_total", "reason=\"queue_full\"",               \
	  "Query records not written to PostgreSQL, by reason (the DNS answer was still sent)")  \
	X(PGSINK_DROP_REJECTED, "nxdns_pgsink_dropped_total", "reason=\"rejected\"", "")         \
	X(PGSINK_DROP_WRITE, "nxdns_pgsink_dropped_total", "reason=\"write_error\"", "")         \
	X(PGSINK_DROP_SHUTDOWN, "nxdns_pgsink_dropped_total", "reason=\"shutdown\"", "")         \
	X(PGSINK_ERRORS, "nxdns_pgsink_errors_total", "",                                       \
	  "PostgreSQL connects and statements that failed (the sink retries)")                  \
	X(PGSINK_RECONNECTS, "nxdns_pgsink_reconnects_total", "",                               \
	  "PostgreSQL connections lost or refused, each followed by a retry after a backoff")

/* X(id, family, help) */
#define NX_GAUGES(X)                                                                            \
	X(IN_FLIGHT, "nxdns_dns_in_flight", "DNS queries being handled (all listeners)")        \
	X(TCP_CONNS, "nxdns_tcp_server_connections", "Open TCP client connections")            \
	X(DOT_CONNS, "nxdns_dot_server_connections", "Open DNS-over-TLS client connections")   \
	X(DOH_CONNS, "nxdns_doh_server_connections", "Open DNS-over-HTTPS client connections") \
	X(PERMITS_USED, "nxdns_query_permits_in_use", "Query permits held by upstream work") \
	X(LISTS_LOADING, "nxdns_lists_first_load", "1 while the first list load runs (DNS "     \
	  "answers only after it), else 0")                                                      \
	X(LISTS_LOAD_STEP, "nxdns_lists_first_load_step", "Where the first list load is: "      \
	  "source N of nxdns_lists_first_load_steps, the last step being the snapshot build")  \
	X(LISTS_LOAD_STEPS, "nxdns_lists_first_load_steps", "Steps of the first list load: "    \
	  "one per enabled source and the snapshot build")                                     \
	X(LISTS_LOAD_DOWNLOADS, "nxdns_lists_first_load_downloads", "Downloads the start still "  \
	  "waits for (url sources with no list on disk; DNS answers after them)")

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
