/*
 * The schema: every configuration key with its type, range, default and documentation. This
 * table is the single source; the loader walks YAML against it and docs/configuration.md is
 * generated from it. Keys of one section stay contiguous (the docs example nests them).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "conf/impl.h"

#define MAX_LISTEN 16  /* listener.dns addresses: a few interfaces x two families */
#define MAX_ZONES 256  /* forward zones: a household has a handful; each is a linear check */
#define MAX_CIDRS 1024 /* access list entries: checked linearly per query */
#define MAX_RULES 10000 /* filter.allow / deny entries: regexes among them run per query */
#define MAX_CLIENTS 256 /* clients: every id is checked linearly per query */
#define MAX_LOCALS 4096 /* local records: a LAN's hosts; checked O(n^2) for conflicts at load */
#define DAY 86400
#define STR_(x) #x
#define STR(x) STR_(x)
#define UP_MAX_ATTEMPTS_TEXT STR(NX_CONF_RACE_CONCURRENT_MAX)

/* Value types of the admin.* keys (admin.c). Declared here until conf/impl.h lists them. */
extern const struct nx_conf_type nx_conf_t_pwhash;   /* "" or an argon2 string */
extern const struct nx_conf_type nx_conf_t_totp;     /* "", "off" or a base32 secret */
extern const struct nx_conf_type nx_conf_t_opt_path; /* "" or a path, made absolute */
extern const struct nx_conf_type nx_conf_t_tokens;   /* admin.tokens */
/* Value types of the sync.* keys (sync.c). */
extern const struct nx_conf_type nx_conf_t_sync_primary; /* "" or an https:// URL */
extern const struct nx_conf_type nx_conf_t_sync_token;   /* "" or an API token */
extern const struct nx_conf_type nx_conf_t_sync_pin;     /* "" or a base64 SHA-256 pin */
/* Value types of the logging.postgresql.* keys (pgsink.c). */
extern const struct nx_conf_type nx_conf_t_pg_dsn; /* "" or a libpq connection string / URI */

#define F(field) offsetof(struct nx_conf, field)
#define STR_(x) #x
#define STR(x) STR_(x)

static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
/* Index = enum nx_conf_block_mode. */
static const char *const block_modes[] = {"null", "nxdomain", "refused", "custom", NULL};

const struct nx_conf_key nx_conf_keys[] = {
	{
		.path = "listener.dns",
		.type = &nx_conf_t_addr_list,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(listen_dns),
		.off_n = F(n_listen_dns),
		.min = 1,
		.max = MAX_LISTEN,
		.default_port = 53,
		.def = "[\"0.0.0.0:53\", \"[::]:53\"]",
		.doc = "Addresses the DNS server listens on, UDP and TCP, as `addr:port` "
		       "(IPv6 as `[addr]:port`; the port defaults to 53 when omitted). "
		       "`0.0.0.0` and `[::]` mean every interface of that family. Each worker "
		       "opens its own UDP socket per address (SO_REUSEPORT). A change needs a "
		       "restart: a reload keeps the open sockets and logs a warning.",
	},
	{
		.path = "listener.workers",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(workers),
		.min = 0,
		.max = 64,
		.def = "0",
		.doc = "Worker threads, each with its own event loop and sockets. `0` means one "
		       "per online CPU core, capped at " STR(NX_CONF_MAX_WORKERS) " (more buys "
		       "nothing on a small machine). The thread count is fixed at start: a change "
		       "needs a restart (a reload keeps the running count).",
	},
	{
		.path = "listener.dns_max_connections",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(dns_max_connections),
		.min = 1,
		.max = 65535,
		.def = "16",
		.doc = "Open client connections allowed per listener address, for TCP, DNS over "
		       "TLS and DNS over HTTPS alike (each address of `dns`, `dot` and `doh` has "
		       "its own count). A connection beyond the cap is refused and counted "
		       "(`nxdns_dropped_total{reason=\"connection_cap\"}`).",
	},
	{
		.path = "listener.tcp_idle_timeout_ms",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(tcp_idle_timeout_ms),
		.min = 100,
		.max = 3600000,
		.def = "10000",
		.doc = "Milliseconds a TCP client connection may stay open with no query in "
		       "progress before it is closed.",
	},
	{
		.path = "listener.tcp_read_timeout_ms",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(tcp_read_timeout_ms),
		.min = 100,
		.max = 60000,
		.def = "3000",
		.doc = "Milliseconds allowed from the first byte of a TCP message to its last. A "
		       "message that arrives slower is dropped with its connection and counted "
		       "(`reason=\"tcp_read_timeout\"`), so slow senders (slowloris) cannot hold "
		       "connections open.",
	},
	{
		.path = "listener.dot",
		.type = &nx_conf_t_addr_list,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(listen_dot),
		.off_n = F(n_listen_dot),
		.min = 0,
		.max = MAX_LISTEN,
		.default_port = 853,
		.def = "[]",
		.example = "[\"0.0.0.0:853\", \"[::]:853\"]",
		.doc = "Addresses the DNS-over-TLS server (RFC 7858) listens on, as `addr:port` "
		       "(the port defaults to 853). Empty: no DoT listener. It serves the "
		       "certificate of `tls.cert`, or without one a self-signed certificate "
		       "generated in `state_dir`. An address may appear in only one of `dns`, "
		       "`dot` and `doh` (all of them are TCP). A change needs a restart.",
	},
	{
		.path = "listener.doh",
		.type = &nx_conf_t_addr_list,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(listen_doh),
		.off_n = F(n_listen_doh),
		.min = 0,
		.max = MAX_LISTEN,
		.default_port = 443,
		.def = "[]",
		.example = "[\"0.0.0.0:443\"]",
		.doc = "Addresses the DNS-over-HTTPS server (RFC 8484, HTTP/2, path "
		       "`/dns-query`) listens on, as `addr:port` (the port defaults to 443). Empty: "
		       "no DoH listener. Same certificate as `dot`; a change needs a restart.",
	},
	{
		.path = "listener.tls_handshake_timeout_ms",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(tls_handshake_timeout_ms),
		.min = 100,
		.max = 60000,
		.def = "5000",
		.doc = "Milliseconds a DoT or DoH client has from its connection to the end of the "
		       "TLS handshake; a slower one is closed, so half-open handshakes cannot hold "
		       "the connection slots.",
	},
	{
		.path = "listener.doh_max_streams",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(doh_max_streams),
		.min = 1,
		.max = 1000,
		.def = "100",
		.doc = "Concurrent HTTP/2 streams (queries in progress) one DoH connection may "
		       "have, announced as SETTINGS_MAX_CONCURRENT_STREAMS; a stream beyond it is "
		       "refused by HTTP/2 (RST_STREAM REFUSED_STREAM).",
	},
	{
		.path = "listener.permit_wait_ms",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(permit_wait_ms),
		.min = 0,
		.max = 60000,
		.def = "2000",
		.doc = "Milliseconds a query on a stream connection (TCP, DoT, DoH) that finds no "
		       "free query permit (`query_budget.permits`) may pause reading from its "
		       "connection while it waits for one; when none frees in time the "
		       "connection is closed (`reason=\"dropped_no_permit\"`). `0` closes it at "
		       "once.",
	},
	{
		.path = "tls.cert",
		.type = &nx_conf_t_opt_path,
		.apply = NX_CONF_APPLY_RELOAD,
		.off = F(tls_cert),
		.def = "\"\"",
		.example = "/etc/nxdns/cert.pem",
		.doc = "PEM certificate (chain) served by the DoT and DoH listeners and, with "
		       "`admin.tls: true`, by the admin's HTTPS. Give `key` with it, or neither: "
		       "without them a self-signed certificate generated in `state_dir` is used. A "
		       "relative path is relative to the configuration file's directory. The "
		       "listeners read it at start and on every reload (SIGHUP): a changed "
		       "certificate is served to the connections accepted from then on, without "
		       "dropping the listeners, and one that cannot be loaded keeps the running one "
		       "(the log says why); the admin's HTTPS (`admin.tls`) likewise. The log names the "
		       "certificate in use and its SPKI pin (`pin-sha256: ...`, as `kdig +tls-pin` "
		       "takes it).",
	},
	{
		.path = "tls.key",
		.type = &nx_conf_t_opt_path,
		.apply = NX_CONF_APPLY_RELOAD,
		.off = F(tls_key),
		.def = "\"\"",
		.example = "/etc/nxdns/key.pem",
		.doc = "PEM private key of `cert` (unencrypted; keep the file readable by the "
		       "nxdns user only).",
	},
	{
		.path = "tls.server_name",
		.type = &nx_conf_t_opt_host,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(tls_server_name),
		.def = "\"\"",
		.example = "dns.home.example",
		.doc = "The host name clients use for DoT and DoH (case-insensitive; kept in lower "
		       "case). With it, a DoT client that sends the SNI `<id>.<server_name>` is "
		       "identified by the client id `<id>` (see `clients`); DoH clients name their "
		       "id in the path, `/dns-query/<id>`. Empty: only the path identifies.",
	},
	{
		.path = "upstream.servers",
		.type = &nx_conf_t_upstreams,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(upstreams),
		.off_n = F(n_upstreams),
		.min = 1,
		.max = NX_CONF_MAX_UPSTREAMS,
		.def = "[\"9.9.9.9:53\", \"1.1.1.1:53\"]",
		.example = "[\"9.9.9.9:53\", \"tls://dns.quad9.net\", "
			   "{url: \"https://1.1.1.1/dns-query\", name: cloudflare-dns.com}]",
		.doc = "Upstream resolvers queries are forwarded to. Each is one of: `addr:port` "
		       "(plain DNS: UDP, then TCP when the answer is truncated; IPv6 as "
		       "`[addr]:port`; the port defaults to 53); `tcp://addr[:port]` (TCP only, "
		       "port 53); `tls://host[:port][#name]` (DNS over TLS, port 853); "
		       "`https://host[:port]/path[#name]` (DNS over HTTPS, port 443, the path is "
		       "required: `/dns-query` for most servers). `host` is an IP address (IPv6 in "
		       "brackets) or a host name, resolved at start through `bootstrap`; `#name` is "
		       "the name the server's certificate must carry and the SNI sent (default: "
		       "the host when it is a name; for an address without a name the certificate "
		       "must carry the address). Or a mapping: `url` (one of the above), `name` (as "
		       "`#name`), `pin_sha256` (a list of base64 SHA-256 pins of the server's public "
		       "key, RFC 7469, as `kdig +tls-pin` takes them: 44 characters each; with pins "
		       "the key must match one) and `address` (an IP address to connect to instead "
		       "of resolving the host; the url's port applies). Until the forwarder speaks "
		       "TCP-only, TLS and HTTPS, such servers are listed at start with a warning and "
		       "not used.",
	},
	{
		.path = "upstream.race",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(race),
		.min = 1,
		.max = NX_CONF_MAX_UPSTREAMS,
		.def = "2",
		.doc = "How many upstream servers one query may be sent to: the first server "
		       "at once, the next after `stagger_ms` without an answer, and so on; the "
		       "first valid answer wins. A value above the number of servers means all of "
		       "them. At most " UP_MAX_ATTEMPTS_TEXT " attempts run concurrently for one "
		       "query (the forwarder's limit): a larger value is clamped to "
		       UP_MAX_ATTEMPTS_TEXT ".",
	},
	{
		.path = "upstream.timeout_ms",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(timeout_ms),
		.min = 50,
		.max = 60000,
		.def = "2000",
		.doc = "One deadline, in milliseconds, for the whole forwarding operation of a "
		       "query (every server raced, every retry, TCP fallback included). When it "
		       "expires the client gets SERVFAIL. Within it, a UDP query that a server "
		       "leaves unanswered for that server's retransmission timeout (its measured "
		       "round trips, at least 0.2 s; 0.4 s before its first answer) is sent to it "
		       "again, at most twice, the timeout doubling each time; a server that has "
		       "answered nothing since gets one re-send per its timeout, however many "
		       "queries wait (`nxdns_upstream_resends_total`, "
		       "`nxdns_upstream_rto_seconds`).",
	},
	{
		.path = "upstream.stagger_ms",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(stagger_ms),
		.min = 0,
		.max = 60000,
		.def = "100",
		.doc = "Milliseconds to wait for an answer before racing the next server (see "
		       "`race`). `0` sends to `race` servers at once.",
	},
	{
		.path = "upstream.forward_zones",
		.type = &nx_conf_t_zone_map,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(zones),
		.off_n = F(n_zones),
		.min = 0,
		.max = MAX_ZONES,
		.default_port = 53,
		.def = "{}",
		.example = "{lan: [\"192.168.1.1\"], 168.192.in-addr.arpa: [\"192.168.1.1:53\"]}",
		.doc = "Conditional forwarding: queries for a zone and every name below it go to "
		       "that zone's servers instead of `servers` (for example local host names "
		       "and reverse lookups to the home router). Zone names are case-insensitive; "
		       "the most specific zone wins; a Unicode name is used in its Punycode form "
		       "(IDNA 2008, as queries carry it). Each server has a form of `servers` "
		       "(`addr:port`, a URL or a mapping).",
	},
	{
		.path = "upstream.bootstrap",
		.type = &nx_conf_t_addr_list,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(bootstrap),
		.off_n = F(n_bootstrap),
		.min = 0,
		.max = NX_CONF_MAX_UPSTREAMS,
		.default_port = 53,
		.def = "[]",
		.example = "[\"9.9.9.9:53\"]",
		.doc = "Plain DNS servers (`addr:port`, port 53 by default) that resolve the host "
		       "names of `servers` and `forward_zones` at start (A, then AAAA; UDP, TCP "
		       "when truncated). Empty: the plain servers of `servers`. A host that "
		       "cannot be resolved stops the start with its position in the file. Loading "
		       "and `check-config` never resolve: they only check that every host name has "
		       "a way to be resolved.",
	},
	{
		.path = "query_budget.permits",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(permits),
		.min = 1,
		.max = 65535,
		.def = "32",
		.doc = "Upstream forwarding operations allowed in flight at once for the whole "
		       "process. A UDP query that finds no permit free is dropped and counted "
		       "(`nxdns_dropped_total{reason=\"dropped_no_slot\"}`); a TCP query closes its "
		       "connection (`reason=\"dropped_no_permit\"`). Identical queries in flight "
		       "share one permit; cached, blocked and local answers need none, and a "
		       "keep-alive connection holds none between queries.",
	},
	{
		.path = "query_budget.coalesce_max_waiters",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(coalesce_max_waiters),
		.min = 1,
		.max = 65535,
		.def = "32",
		.doc = "Clients that may wait on one identical in-flight upstream query (same "
		       "name, type and class) instead of starting their own. Beyond this a query "
		       "is dropped and counted (`reason=\"coalesce_waiters_full\"`).",
	},
	{
		.path = "access.allow",
		.type = &nx_conf_t_cidr_list,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(allow),
		.off_n = F(n_allow),
		.min = 0,
		.max = MAX_CIDRS,
		.def = "[]",
		.example = "[\"192.168.1.0/24\", \"fd00::/8\", \"127.0.0.1\"]",
		.doc = "Client addresses allowed to query, as `addr/prefix` or a single address. "
		       "Empty means loopback and private ranges: 127.0.0.0/8, ::1/128, 10.0.0.0/8, "
		       "172.16.0.0/12, 192.168.0.0/16, 169.254.0.0/16, fc00::/7, fe80::/10. "
		       "IPv4 clients arriving on IPv6 sockets (`::ffff:a.b.c.d`) are checked as "
		       "IPv4. Refused queries are answered REFUSED and counted.",
	},
	{
		.path = "access.deny",
		.type = &nx_conf_t_cidr_list,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(deny),
		.off_n = F(n_deny),
		.min = 0,
		.max = MAX_CIDRS,
		.def = "[]",
		.example = "[\"192.168.1.66\"]",
		.doc = "Client addresses refused even when `allow` (or the built-in private "
		       "ranges) would admit them: `deny` is checked first.",
	},
	{
		.path = "access.admit_client_ids",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(admit_client_ids),
		.def = "false",
		.doc = "`true` admits a DoT or DoH query whose client id (see `clients`) names a "
		       "configured client even when its address is outside `allow` (so a phone "
		       "can use nxdns from outside the home network); `deny` still refuses it. "
		       "`false`: a client id only picks the client's policy and never widens "
		       "access.",
	},
	{
		.path = "access.rate_limit.qps",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(rl_qps),
		.min = 0,
		.max = 1000000,
		.def = "20",
		.doc = "Queries per second one client (an address prefix, see `ipv4_prefix` and "
		       "`ipv6_prefix`) may send on average; `0` turns rate limiting off. A query "
		       "over the limit is dropped over UDP and answered REFUSED over TCP, DoT and "
		       "DoH, and counted in `nxdns_rate_limited_total{proto}`; a client over its "
		       "limit is logged at most once a minute per prefix, as `warn guard: rate "
		       "limit: client <address> (prefix <prefix>) over <qps> queries/s (burst <burst>), "
		       "dropping or refusing its queries` (fail2ban: `failregex = guard: rate "
		       "limit: client <HOST> \\(prefix`); for all clients together at most 60 "
		       "such lines at once and then one a second, so a flood from many prefixes "
		       "cannot flood the log (`nxdns_rate_limit_log_suppressed_total`). The "
		       "default follows the sustained rates peers ship: AdGuard Home 20 per "
		       "second (per /24), Pi-hole 1000 per minute (about 17 per second) per "
		       "client; Blocky ships it off. A household device averages well under one "
		       "query a second, so 20 only stops a device stuck in a loop. When nxdns's "
		       "clients reach it through another forwarder (a router relaying its own "
		       "clients), that forwarder is one client: put it in `rate_limit_exempt`. "
		       "Clients are tracked in a fixed table of " STR(NX_CONF_RATE_LIMIT_SLOTS) " "
		       "entries (96 KiB, ledger owner `rate_limit`, allocated the first time the "
		       "limit is on): a flood from many (spoofed) sources recycles entries "
		       "(`nxdns_rate_limit_evictions_total`) and never grows memory.",
	},
	{
		.path = "access.rate_limit.burst",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(rl_burst),
		.min = 1,
		.max = 1000000,
		.def = "1000",
		.doc = "Queries one client may send at once after being idle, before `qps` "
		       "applies (a token bucket: it refills at `qps` per second up to `burst`). "
		       "1000 is Pi-hole's per-minute allowance: a device that wakes up, or a page "
		       "that loads a hundred third-party names, is never slowed.",
	},
	{
		.path = "access.rate_limit.ipv4_prefix",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(rl_ipv4_prefix),
		.min = 8,
		.max = 32,
		.def = "32",
		.doc = "IPv4 clients share one limit per prefix of this length. `32`: every "
		       "address is its own client, which is what a LAN is (AdGuard Home's /24 "
		       "suits a public resolver, where it would lump a whole household "
		       "together).",
	},
	{
		.path = "access.rate_limit.ipv6_prefix",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(rl_ipv6_prefix),
		.min = 16,
		.max = 128,
		.def = "56",
		.doc = "IPv6 clients share one limit per prefix of this length. `56`, as AdGuard "
		       "Home: a device picks new temporary addresses (RFC 8981) within its /64 "
		       "at will, so per-address limits would not hold; a /56 is what an ISP "
		       "delegates to one home.",
	},
	{
		.path = "access.rate_limit_exempt",
		.type = &nx_conf_t_cidr_list,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(rl_exempt),
		.off_n = F(n_rl_exempt),
		.min = 0,
		.max = MAX_CIDRS,
		.def = "[]",
		.example = "[\"192.168.1.1\"]",
		.doc = "Client addresses never rate limited, as `addr/prefix` or a single address "
		       "(IPv4-mapped IPv6 clients are matched as IPv4): another forwarder that "
		       "relays many clients, a monitoring probe.",
	},
	{
		.path = "filter.enabled",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(filter_enabled),
		.def = "true",
		.doc = "The master switch of filtering. `false` blocks nothing for any client "
		       "(the blocklists are still kept up to date, so turning it back on is "
		       "immediate).",
	},
	{
		.path = "filter.sources",
		.type = &nx_conf_t_sources,
		.apply = NX_CONF_APPLY_RELOAD,
		.off = F(sources),
		.off_n = F(n_sources),
		.min = 0,
		.max = NX_CONF_MAX_SOURCES,
		.def = "[]",
		.example = "[{name: ads, url: \"https://example.com/hosts.txt\"}, "
			   "{name: mine, path: blocklist.txt, format: domains, "
			   "groups: [default, kids]}]",
		.doc = "Blocklists, each a mapping: `name` (required; 1..64 of `a-z`, `0-9`, `_`, "
		       "`-`, starting with a letter or digit; unique), exactly one of `url` "
		       "(`http://` or `https://`, downloaded) and `path` (a local file; a relative "
		       "path is relative to the directory of the configuration file), `format` "
		       "(`auto` (default: detected per line), `hosts`, `domains`, `adblock`, "
		       "`wildcard`), `groups` (the groups that use it, default `[default]`; see "
		       "`groups`) and `enabled` (default `true`; a disabled source is neither "
		       "fetched nor used). At most " STR(NX_CONF_MAX_SOURCES) " sources. "
		       "`hosts_answers`: `listed` (a hosts line whose address is not a null "
		       "address — `0.0.0.0`, `127.0.0.1`, `::`, `::1` — answers with that address, "
		       "as AdGuard Home does) or `null` (every hosts line blocks); default `listed` "
		       "for a `path` source and `null` for a `url` source, so a downloaded list "
		       "cannot send a name to an address of its choosing unless you opt in. "
		       "`subdomains` (default `false`): `true` makes each plain entry (a bare name "
		       "or a hosts line) mean the name and every name under it, as Blocky reads "
		       "lists; `false` means the name only (Pi-hole, AdGuard Home).",
	},
	{
		.path = "filter.refresh_interval",
		.type = &nx_conf_t_duration,
		.apply = NX_CONF_APPLY_RELOAD,
		.editable = true,
		.off = F(refresh_interval_s),
		.min = 60,
		.max = 30 * DAY,
		.def = "24h",
		.doc = "How often each `url` source is downloaded again (conditional GET: an "
		       "unchanged list costs one request). Seconds, or a number with a unit: "
		       "`s`, `m`, `h` or `d` (`90m`, `24h`).",
	},
	{
		.path = "filter.first_boot_timeout",
		.type = &nx_conf_t_duration,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(first_boot_timeout_s),
		.min = 0,
		.max = 600,
		.def = "60s",
		.doc = "How long a start waits for the `url` sources that have no list on disk yet "
		       "(a first boot, a source added while the daemon was stopped) before DNS "
		       "answers. nxdns never answers unfiltered: the DNS listeners start only "
		       "after these downloads and the list load, while the web admin already "
		       "answers (`/healthz` says `loading`). The downloads run in parallel; a "
		       "source that fails or is still downloading when this time is up is logged, "
		       "counted (`nxdns_lists_first_boot_unloaded_total`) and left out until a "
		       "later refresh brings it, and DNS starts with the others: a box that never "
		       "answers because a list server is down is worse than one that filters less "
		       "for a while. Sources with a list on disk never wait on the network. "
		       "`0`: no wait (DNS answers at once, unfiltered by those sources until their "
		       "first download). The default leaves a slow line a minute, well inside the "
		       "service's start timeout.",
	},
	{
		.path = "filter.allow",
		.type = &nx_conf_t_rules,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(allow_rules),
		.off_n = F(n_allow_rules),
		.min = 0,
		.max = MAX_RULES,
		.def = "[]",
		.example = "[\"good.example\", \"*.cdn.example\"]",
		.doc = "Names always resolved, whatever the blocklists say (checked before "
		       "`deny` and the blocklists). Each rule is a name (`x.example`: that name "
		       "only), `*.x.example` (every name below x.example, not x.example itself) or "
		       "`/regex/` (PCRE2, case-insensitive, matched against the name in lower case "
		       "without the trailing dot; an invalid one is an error), or any rule of the "
		       "AdGuard DNS rule language the blocklists use (`||x.example^$client=10.0.0.5`, "
		       "`$ctag`, `$dnstype`, `$dnsrewrite`, `$important`, ...; in `allow` a rule "
		       "without `@@` is an exception; see src/filter/README.md). Names are "
		       "case-insensitive and written in ASCII (punycode for international names). A "
		       "name or `*.x` rule written `{rule: x.example, groups: [kids]}` applies only "
		       "to the clients of those groups (Pi-hole's per-group domain lists); a plain "
		       "rule applies to every client. AdGuard-language rules may be limited to "
		       "groups the same way (and to clients with `$client` / `$ctag`). A rule "
		       "`||x^$badfilter` (or `|x^`, `@@||x^`, `@@|x^` with `$badfilter`) in either "
		       "user list switches that same rule off in every list, as AdGuard Home does.",
	},
	{
		.path = "filter.deny",
		.type = &nx_conf_t_rules,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(deny_rules),
		.off_n = F(n_deny_rules),
		.min = 0,
		.max = MAX_RULES,
		.def = "[]",
		.example = "[\"ads.example\", \"*.tracker.example\", '/^ad[0-9]+[.]/']",
		.doc = "Names always blocked unless `allow` matches them; the same forms as "
		       "`allow`, and the same `{rule, groups}` form to limit a rule "
		       "to some groups' clients.",
	},
	{
		.path = "filter.block_mode",
		.type = &nx_conf_t_enum,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(block_mode),
		.choices = block_modes,
		.def = "null",
		.doc = "The answer to a blocked query: `null` (`0.0.0.0` for A, `::` for AAAA, "
		       "an empty answer for other types), `nxdomain` (the name does not exist), "
		       "`refused`, or `custom` (the addresses in `block_addresses`; an empty "
		       "answer for a type with no address given). Every blocked answer carries "
		       "Extended DNS Error 15 (Blocked).",
	},
	{
		.path = "filter.block_addresses",
		.type = &nx_conf_t_block_addrs,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.min = 0,
		.max = 2,
		.def = "[]",
		.example = "[\"0.0.0.0\", \"::\"]",
		.doc = "Addresses answered for blocked names when `block_mode` is `custom`: at "
		       "most one IPv4 and one IPv6 address, without port. `custom` needs at least "
		       "one; other modes ignore them.",
	},
	{
		.path = "filter.block_ttl",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(block_ttl),
		.min = 0,
		.max = DAY,
		.def = "10",
		.doc = "TTL, in seconds, of blocked answers: short, so unblocking takes effect "
		       "quickly on clients.",
	},
	{
		.path = "filter.rebinding_protection",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(rebinding_protection),
		.def = "true",
		.doc = "DNS rebinding protection: addresses a LAN device can have are removed from "
		       "answers that came from `upstream.servers`, so a web page cannot make a "
		       "public name point into the home network: RFC 1918 (10/8, 172.16/12, "
		       "192.168/16), loopback (127/8, `::1`), 0.0.0.0/8 and `::`, link-local "
		       "(169.254/16, fe80::/10), CGNAT 100.64.0.0/10, ULA fc00::/7, and the "
		       "IPv4-mapped IPv6 form of each IPv4 range; in A and AAAA records of every "
		       "section and in the `ipv4hint`/`ipv6hint` of HTTPS and SVCB records. The "
		       "documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, "
		       "2001:db8::/32) are kept: no LAN device lives there. Only the private "
		       "records go from a mixed answer; an answer left without data is NOERROR "
		       "with no records of the asked type and Extended DNS Error 15 (Blocked) "
		       "saying why. The answer is stripped before it is cached, so a cache hit is "
		       "stripped too. Exempt: forward zones (`upstream.forward_zones` are where "
		       "LAN names live), `local_records`, block answers, and `rebinding_allow`. "
		       "Counted in `nxdns_rebinding_total{result}` (`stripped`, `emptied`, "
		       "`allowed`) and `nxdns_rebinding_addresses_stripped_total`. As Unbound's "
		       "`private-address` and Blocky's `rebindingProtection` (which ships off); "
		       "on by default here because nothing on a home network needs a public name "
		       "to resolve to a LAN address except the few in `rebinding_allow`.",
	},
	{
		.path = "filter.rebinding_allow",
		.type = &nx_conf_t_domains,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(rebinding_allow),
		.off_n = F(n_rebinding_allow),
		.min = 0,
		.max = MAX_ZONES,
		.def = "[\"plex.direct\", \"fritz.box\"]",
		.doc = "Names whose upstream answers may hold private addresses, each with every "
		       "name below it (as dnsmasq's `rebind-domain-ok`). Only names no web page "
		       "can make resolve to an address of its choosing are safe here: the "
		       "default keeps Plex's `*.plex.direct` (an address-encoding name Plex "
		       "serves so its apps get TLS to a LAN server; OpenWrt and pfSense users "
		       "add it to their rebind exceptions for that reason) and `fritz.box` "
		       "(the name an AVM router answers for itself when it is the upstream; not "
		       "a public domain, so nobody else can publish it). dnsmasq and Unbound "
		       "ship no exceptions, Blocky none. An empty list allows none.",
	},
	{
		.path = "groups",
		.type = &nx_conf_t_groups,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(groups),
		.off_n = F(n_groups),
		.min = 1,
		.max = NX_CONF_MAX_GROUPS,
		.def = "{}",
		.example = "{kids: {sources: [ads]}, guests: {filtering: false}}",
		.doc = "Groups of clients that share a set of blocklists: group name (the same "
		       "rules as source names) → `sources` (source names, default none) and "
		       "`filtering` (default "
		       "`true`; `false` resolves everything for the group's clients). A source "
		       "belongs to a group when the group lists it or the source lists the group. "
		       "The group `default` always exists (filtering, with the sources that name "
		       "it) and holds every client not listed in `clients`; it may be written to "
		       "change it. Unknown source names are errors.",
	},
	{
		.path = "clients",
		.type = &nx_conf_t_clients,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(clients),
		.off_n = F(n_clients),
		.min = 0,
		.max = MAX_CLIENTS,
		.def = "[]",
		.example = "[{name: tablet, ids: [\"192.168.1.50\", \"fd00::50\"], "
			   "groups: [kids]}, "
			   "{name: guest wifi, ids: [\"192.168.2.0/24\"], groups: [guests]}, "
			   "{name: phone, ids: [\"id:phone-anna\"], groups: [kids]}]",
		.doc = "Clients by address or client id: `name` (1..64 bytes, unique), `ids` "
		       "(addresses or `addr/prefix` ranges, IPv4 clients on IPv6 sockets matched "
		       "as IPv4; or `id:<client-id>`, 1..64 of `a-z`, `0-9`, `-`, the id a DoH "
		       "client puts in its path, `/dns-query/<client-id>`, or a DoT client in its "
		       "SNI, `<client-id>.<tls.server_name>`), `groups` (default `[default]`) and "
		       "`tags` (up to 16 of `a-z`, `0-9`, `_`, 1..32 bytes, e.g. AdGuard Home's "
		       "`device_phone`, `os_ios`, `user_child`: what `$ctag` list rules match). A "
		       "query that carries a client id listed here belongs to that client; else "
		       "its client is the one whose ids match its address with the longest prefix "
		       "(ids are unique, so there is one). It uses every source of all its groups "
		       "and is filtered when any of its groups filters. A query no client matches "
		       "is in `default`. A client id never widens access (see "
		       "`access.admit_client_ids`).",
	},
	{
		.path = "local_records",
		.type = &nx_conf_t_locals,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(locals),
		.off_n = F(n_locals),
		.min = 0,
		.max = MAX_LOCALS,
		.def = "[]",
		.example = "[{name: nas.lan, type: A, value: 192.168.1.10}, "
			   "{name: nas.lan, type: AAAA, value: \"fd00::10\", ttl: 60}, "
			   "{name: files.lan, type: CNAME, value: nas.lan}]",
		.doc = "Records answered authoritatively for hosts on the network, before any "
		       "filtering: `name`, `type` (`A`, `AAAA`, `CNAME`, `TXT`, `PTR`, `MX`, `SRV` "
		       "or `CAA`), `value` (an address; a host name; text, split into several "
		       "strings past 255 bytes; `PREFERENCE HOST` for MX; `PRIORITY WEIGHT PORT "
		       "HOST` for SRV; `FLAGS TAG VALUE` for CAA, e.g. `0 issue \"letsencrypt.org\"`) "
		       "and `ttl` (seconds, default 300). A name with records of other types "
		       "answers those types with an empty answer (NODATA), never forwarded. A "
		       "CNAME name has no other records; it answers with the CNAME and the "
		       "target's records: the local ones when the target is local, else the "
		       "target resolved upstream. The reverse name of a local A or AAAA record "
		       "answers PTR with that record's name unless a PTR is given for it. Local "
		       "names never shadow a forward zone's other names. Duplicate records are "
		       "errors.",
	},
	{
		.path = "cache.size",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_RESTART,
		.editable = true,
		.off = F(cache_size),
		.min = 0,
		.max = 16777216,
		.def = "10000",
		.doc = "Answers kept in the DNS cache (entries). `0` disables the cache. The "
		       "cache's byte budget follows it: 256 bytes of stored answers per entry, "
		       "never below one 65535-byte message. When it is full, a new answer waits on "
		       "probation (about a tenth of the entries): it stays only if it is asked for "
		       "again while there, or if it left probation lately and comes back. So a burst "
		       "of names asked for once (a scan, random subdomains) cannot push out the "
		       "answers your network uses all the time (S3-FIFO; "
		       "`nxdns_cache_promoted_total`, `nxdns_cache_readmitted_total`). Each entry "
		       "costs about 60 bytes of slots and index up front (`nxdns_cache_slot_bytes`) "
		       "besides its stored answer.",
	},
	{
		.path = "cache.min_ttl",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_RESTART,
		.editable = true,
		.off = F(cache_min_ttl),
		.min = 0,
		.max = DAY,
		.def = "0",
		.doc = "Seconds: cached answers are kept at least this long even when their TTL "
		       "is shorter, and answered with at least this TTL. Must not exceed "
		       "`max_ttl`.",
	},
	{
		.path = "cache.max_ttl",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_RESTART,
		.editable = true,
		.off = F(cache_max_ttl),
		.min = 1,
		.max = 7 * DAY,
		.def = "86400",
		.doc = "Seconds: cached answers are kept at most this long, whatever their TTL.",
	},
	{
		.path = "cache.negative_max_ttl",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_RESTART,
		.editable = true,
		.off = F(cache_neg_max_ttl),
		.min = 0,
		.max = DAY,
		.def = "3600",
		.doc = "Seconds: the most a negative answer (NXDOMAIN, empty answer) is cached, "
		       "whatever its SOA says (RFC 2308). `0` does not cache negative answers.",
	},
	{
		.path = "cache.serve_stale",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_RESTART,
		.editable = true,
		.off = F(cache_serve_stale),
		.def = "false",
		.doc = "Answer from an expired cache entry when the upstream servers fail "
		       "(RFC 8767), marked with Extended DNS Error 3 (Stale Answer).",
	},
	{
		.path = "cache.prefetch",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_RESTART,
		.editable = true,
		.off = F(cache_prefetch),
		.def = "false",
		.doc = "Refresh popular cache entries from upstream shortly before they expire, "
		       "so their clients do not wait for the refresh.",
	},
	{
		.path = "admin.enabled",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(admin_enabled),
		.def = "true",
		.doc = "Serve the admin HTTP API, web UI and `/metrics` on `admin.listen`.",
	},
	{
		.path = "admin.listen",
		.type = &nx_conf_t_addr,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(admin_listen),
		.default_port = -1,
		.def = "\"127.0.0.1:8080\"",
		.doc = "Address of the admin HTTP server, `addr:port` with the port required "
		       "(IPv6 as `[addr]:port`). "
		       "Loopback by default: expose it to the network only on purpose.",
	},
	{
		.path = "admin.password_hash",
		.type = &nx_conf_t_pwhash,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(admin_password_hash),
		.def = "\"\"",
		.doc = "The admin password, hashed with Argon2id (libsodium's `crypto_pwhash_str`). "
		       "Never write a password here: set it with `nxdns passwd --config FILE` "
		       "(which reads it from standard input when that is not a terminal) or "
		       "through the one-time setup. Empty means no password yet: the server then "
		       "logs a one-time setup token at start (`admin setup token: ...`) that is "
		       "accepted only by `POST /api/auth/setup` to choose the password; every "
		       "other API route stays closed until then.",
	},
	{
		.path = "admin.session_ttl",
		.type = &nx_conf_t_duration,
		.apply = NX_CONF_APPLY_RELOAD,
		.off = F(admin_session_ttl_s),
		.min = 60,
		.max = 30 * DAY,
		.def = "12h",
		.doc = "How long a login session lasts, counted from the login (seconds, or a "
		       "number with `s`, `m`, `h` or `d`). Sessions are kept in memory: a restart "
		       "or a password change ends them all.",
	},
	{
		.path = "admin.metrics_auth",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(admin_metrics_auth),
		.def = "false",
		.doc = "`true` makes `/metrics` and `/healthz` require an API token "
		       "(`Authorization: Bearer ...`) or a login session; `false` leaves them open "
		       "to anyone who can reach `admin.listen`.",
	},
	{
		.path = "admin.tls",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(admin_tls),
		.def = "false",
		.editable = true,
		.doc = "`true`: the admin listener speaks only HTTPS (GnuTLS), with the "
		       "certificate of `tls.cert` and `tls.key`, or without them the self-signed "
		       "certificate generated in `state_dir`; the session cookie is then marked "
		       "`Secure`. Read at start: a change needs a restart.",
	},
	{
		.path = "admin.tokens",
		.type = &nx_conf_t_tokens,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(admin_tokens),
		.off_n = F(n_admin_tokens),
		.min = 0,
		.max = NX_CONF_MAX_TOKENS,
		.def = "[]",
		.doc = "API tokens for scripts (`Authorization: Bearer <token>`, no CSRF token "
		       "needed), managed with `GET/POST/DELETE /api/auth/tokens`: each is `name` "
		       "(the rules of source names; unique), `hash` (the SHA-256 of the token, 64 "
		       "lower-case hex digits) and `created` (Unix seconds). The token itself is "
		       "shown once, when it is created, and never stored. A token is 256 random "
		       "bits, so a fast hash is enough to make a leaked file useless; a slow "
		       "password hash (Argon2) would only make every API call cost ~20 ms and "
		       "7 MiB. At most " STR(NX_CONF_MAX_TOKENS) " tokens. An optional `scope`: "
		       "`admin` (the default: every route) or `read` (GET routes only: any "
		       "other method, and `GET /api/backup` with the admin's credentials in it, "
		       "answers 403 `read_only_token`), for a replica's `sync.token`.",
	},	{
		.path = "admin.totp_secret",
		.type = &nx_conf_t_totp,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(admin_totp_secret),
		.def = "\"\"",
		.doc = "The secret of the optional second login factor (TOTP, RFC 6238: "
		       "SHA-1, 30-second steps, 6 digits, the step before and after accepted, "
		       "each code once), base32. Written by the API: `POST /api/auth/totp` "
		       "shows a new secret once, `POST /api/auth/totp/confirm` with a code from "
		       "the authenticator stores it here, `DELETE /api/auth/totp` with a code "
		       "writes `off`. Empty: no second factor. A reload never drops a secret "
		       "the running server has unless the file says `off`, so a config rewrite "
		       "or an old copy cannot remove the second factor.",
	},

	{
		.path = "state_dir",
		.type = &nx_conf_t_string,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(state_dir),
		.def = "/var/lib/nxdns",
		.doc = "Directory for the data nxdns produces: downloaded and compiled "
		       "blocklists, the blocklist snapshot and the query-log database. A relative "
		       "path is relative to the working directory at start.",
	},
	{
		.path = "log.level",
		.type = &nx_conf_t_enum,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(log_level),
		.choices = log_levels,
		.def = "info",
		.doc = "Least severe message written to the log (stderr): `error`, `warn`, "
		       "`info` or `debug`.",
	},
	{
		.path = "logging.query_log",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_RESTART,
		.editable = true,
		.off = F(logging_query_log),
		.def = "true",
		.doc = "Record every answered query in the query log (`querylog.db` in "
		       "`state_dir`) for the API's query list and statistics. `false` keeps no "
		       "query log at all.",
	},
	{
		.path = "logging.query_log_buffer_max",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_RESTART,
		.editable = true,
		.off = F(logging_query_log_buffer_max),
		.min = 64,
		.max = 1048576,
		.def = "2048",
		.doc = "Query records waiting between the DNS workers and the query-log writer "
		       "thread. When the queue is full the oldest record is dropped and counted; "
		       "DNS answers never wait for the disk. The queue holds records packed to the "
		       "bytes they use and is sized at 128 bytes a record (the default takes "
		       "256 KiB): typical queries (90-110 bytes) fill the record count, very long "
		       "names fill the bytes first, so fewer of those are kept "
		       "(`nxdns_querylog_queue_bytes_peak` against "
		       "`nxdns_querylog_queue_bytes_capacity` in /metrics shows which).",
	},
	{
		.path = "logging.retention_days",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(logging_retention_days),
		.min = 0,
		.max = 3650,
		.def = "7",
		.doc = "Days of query records kept; older ones are deleted in small batches by a "
		       "scheduled job. `0` never deletes.",
	},
	{
		.path = "logging.commit_interval",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_RESTART,
		.editable = true,
		.off = F(logging_commit_interval),
		.min = 0,
		.max = 3600,
		.def = "60",
		.doc = "Seconds the query-log writer holds records in memory before it commits them "
		       "to `querylog.db` in one transaction (sooner when 4096 are held, at the end of a clock minute that "
		       "falls in the interval's last minute so that a commit holds one minute, and whenever "
		       "the API reads the log, so the web admin still shows the newest queries). "
		       "Each commit rewrites a dozen database pages, so committing once a minute "
		       "instead of four times a second cuts the writes per logged query from "
		       "kilobytes to a few hundred bytes, which is what wears out an SD card. The "
		       "price: a crash or power loss loses at most this many seconds of records "
		       "(the database stays intact). The live stream is not delayed. `0` commits "
		       "within a quarter of a second.",
	},
	{
		.path = "logging.privacy",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(logging_privacy),
		.min = 0,
		.max = 3,
		.def = "0",
		.doc = "What the query log keeps: `0` everything, `1` hides query names, `2` "
		       "hides names and client addresses, `3` keeps no per-query records "
		       "(per-minute aggregates only).",
	},
	{
		.path = "logging.live_max_subscribers",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(logging_live_max_subscribers),
		.min = 0,
		.max = 256,
		.def = "8",
		.doc = "Clients that may follow the live query stream "
		       "(`GET /api/queries/live`) at once. A cap, not a reservation: a "
		       "subscriber's buffer is allocated when it connects. `0` turns the live "
		       "stream off.",
	},
	{
		.path = "logging.postgresql.dsn",
		.type = &nx_conf_t_pg_dsn,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(logging_pg_dsn),
		.def = "\"\"",
		.example = "host=db.lan dbname=nxdns user=nxdns password=secret",
		.doc = "Also write every answered query to PostgreSQL (11 or later, for day "
		       "partitions with a DEFAULT one; 15 is tested), as rows of `log_entries` "
		       "with the columns and values of Blocky's "
		       "query log (`request_ts`, `client_ip`, `client_name`, `duration_ms`, "
		       "`reason`, `response_type`, `question_type`, `question_name`, "
		       "`effective_tldp`, `answer`, `response_code`, `hostname`) plus "
		       "`matched_rule`, `source_list`, `protocol`, `upstream` and "
		       "`nxdns_reason`; several instances may share a database. A libpq "
		       "connection string (`host=... dbname=... user=...`) or URI "
		       "(`postgresql://user@host/db`). nxdns creates and migrates the schema "
		       "(table `nxdns_schema_version`) and keeps one partition per UTC day. "
		       "libpq (Debian `libpq5`) is loaded only when this is set; without it the "
		       "sink logs why and DNS serves. One more thread. The database may be away: "
		       "nxdns reconnects with backoff (250 ms to 10 s) and DNS never waits for it. "
		       "`logging.privacy` applies to these rows as to the query log (3: none). "
		       "Empty: no PostgreSQL sink. The local query log (`logging.query_log`) "
		       "works beside it or can be turned off.",
	},
	{
		.path = "logging.postgresql.hostname",
		.type = &nx_conf_t_opt_host,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(logging_pg_hostname),
		.def = "\"\"",
		.example = "resolver-1",
		.doc = "The `hostname` column of this instance's rows, which tells instances "
		       "apart in one database (the dashboard's instance filter). Empty: the "
		       "host name.",
	},
	{
		.path = "logging.postgresql.batch_size",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(logging_pg_batch_size),
		.min = 1,
		.max = 10000,
		.def = "1000",
		.doc = "Records per `COPY` (one statement, one transaction). The writer's COPY "
		       "buffer is 256 bytes per record of this (256 KiB at the default).",
	},
	{
		.path = "logging.postgresql.flush_interval_ms",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(logging_pg_flush_ms),
		.min = 10,
		.max = 60000,
		.def = "1000",
		.doc = "Longest a record waits before it is sent, in milliseconds; a worker's "
		       "queue half full sends at once.",
	},
	{
		.path = "logging.postgresql.queue_size",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(logging_pg_queue_size),
		.min = 64,
		.max = 1048576,
		.def = "4096",
		.doc = "Records waiting between the DNS workers and the PostgreSQL writer (744 "
		       "bytes each: 2.9 MiB at the default, allocated only when the sink is on). "
		       "While the database is away the newest are kept; when full the oldest are "
		       "dropped and counted (`nxdns_pgsink_dropped_total{reason=\"queue_full\"}`).",
	},
	{
		.path = "logging.postgresql.retention_days",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(logging_pg_retention_days),
		.min = 0,
		.max = 3650,
		.def = "7",
		.doc = "Days of rows kept in PostgreSQL: older day partitions are dropped whole "
		       "(hourly and at each new UTC day). `0` keeps everything.",
	},
	{
		.path = "run_as.user",
		.type = &nx_conf_t_opt_account,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(run_as_user),
		.def = "\"\"",
		.doc = "User that `nxdns serve` switches to when started as root, once its "
		       "sockets are bound (no capability is kept: listener changes need a "
		       "restart anyway). Empty means `nxdns` when that user exists; without it "
		       "the daemon keeps running as root with a warning (a development machine). "
		       "Before switching it gives the user `state_dir` and, when the config file "
		       "lives in a directory named `nxdns`, that directory and the file, so the "
		       "admin API can save edits. A named user that does not exist is an error. "
		       "Under systemd the unit's `User=` decides and this key is not needed.",
	},
	{
		.path = "run_as.group",
		.type = &nx_conf_t_opt_account,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(run_as_group),
		.def = "\"\"",
		.doc = "Group to switch to with `run_as.user`; empty means the user's primary "
		       "group. Supplementary groups are dropped.",
	},
	{
		.path = "sync.primary",
		.type = &nx_conf_t_sync_primary,
		.apply = NX_CONF_APPLY_RELOAD,
		.off = F(sync_primary),
		.def = "\"\"",
		.example = "https://nxdns-1.lan:8080",
		.doc = "Make this instance a replica of another nxdns (the primary): its admin "
		       "listener's `https://host:port` (HTTPS only: `admin.tls: true` there). Every "
		       "`sync.interval`, and on `POST /api/sync/now`, the replica asks the "
		       "primary's `GET /api/sync/export` (conditional: unchanged costs a 304) and "
		       "takes over its `filter.*` keys (sources, rules, block settings), `groups`, "
		       "`clients` and `local_records`; the content of `path` sources comes along "
		       "and is written under `state_dir/sync/`. Everything else (listeners, "
		       "upstreams, access, cache, logging, admin, tls, state_dir, sync) stays this "
		       "host's. A change is checked as a reload checks it before it is written; "
		       "a refused one keeps the last good configuration (`GET /api/sync/status` "
		       "says why). On a replica the API refuses edits of the synced keys (409 "
		       "`synced_from_primary`). Empty: not a replica.",
	},
	{
		.path = "sync.token",
		.type = &nx_conf_t_sync_token,
		.apply = NX_CONF_APPLY_RELOAD,
		.off = F(sync_token),
		.def = "\"\"",
		.example = "nxdns_...",
		.doc = "The API token the replica presents to the primary (`Authorization: "
		       "Bearer`). Create it on the primary with `POST /api/auth/tokens {name, "
		       "scope: \"read\"}`: a read-only token can export but not change anything. "
		       "The primary lists who synced, by token name and address, in `GET "
		       "/api/sync/replicas`. Required with `sync.primary`.",
	},
	{
		.path = "sync.interval",
		.type = &nx_conf_t_duration,
		.apply = NX_CONF_APPLY_RELOAD,
		.off = F(sync_interval_s),
		.min = 1,
		.max = DAY,
		.def = "1m",
		.doc = "How often the replica asks the primary for changes. Seconds, or a number "
		       "with a unit (`30s`, `5m`). An unchanged primary answers 304 without a "
		       "body.",
	},
	{
		.path = "sync.pin",
		.type = &nx_conf_t_sync_pin,
		.apply = NX_CONF_APPLY_RELOAD,
		.off = F(sync_pin),
		.def = "\"\"",
		.doc = "The base64 SHA-256 of the primary's public key (SubjectPublicKeyInfo, as "
		       "the upstream `pin_sha256` and `nxdns cert` show it). With a pin the "
		       "primary's key must match it and the certificate's issuer is not checked "
		       "(the primary's generated self-signed certificate works); without one the "
		       "certificate must verify against the system's CA bundle and name the "
		       "URL's host.",
	},
	{
		.path = "special.localhost",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(special_localhost),
		.def = "true",
		.doc = "`localhost` and every name below it (`*.localhost`) are answered by nxdns itself "
		       "with 127.0.0.1 (A) and ::1 (AAAA), NODATA for other types, and never sent "
		       "upstream (RFC 6761 6.3: these names are the host's own loopback, whatever a "
		       "public server says). Local records for such a name win. Reason "
		       "`special_localhost`, counted in `nxdns_special_names_total{reason}`. As "
		       "Unbound's and Knot Resolver's built-in `localhost` zone; `false` forwards them "
		       "like any name.",
	},
	{
		.path = "special.domain_needed",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(special_domain_needed),
		.def = "true",
		.doc = "`local` (mDNS, RFC 6762), `invalid` (RFC 6761), `home.arpa` (RFC 8375) and every "
		       "name below them, and single-label names asked for A, AAAA or HTTPS (`nas`, "
		       "`printer`), are never sent to `upstream.servers`: a forward zone "
		       "(`upstream.forward_zones`) that covers the name gets it, else nxdns answers "
		       "NXDOMAIN. Other types of a single-label name (`com DS`, `org DNSKEY`, which "
		       "validating stubs ask) still go upstream. Reasons `special_use_name` and "
		       "`single_label`. As Pi-hole's and dnsmasq's `domain-needed`; these names leak the "
		       "LAN's device names to the public resolver and never resolve there.",
	},
	{
		.path = "special.bogus_priv",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(special_bogus_priv),
		.def = "true",
		.doc = "Reverse lookups (PTR and any other type) in the private ranges, RFC 1918 "
		       "(`10.in-addr.arpa`, `16.172.in-addr.arpa` .. `31.172.in-addr.arpa`, "
		       "`168.192.in-addr.arpa`), IPv4 link-local (`254.169.in-addr.arpa`), ULA fc00::/7 "
		       "(`c.f.ip6.arpa`, `d.f.ip6.arpa`) and IPv6 link-local fe80::/10 (`8.e.f.ip6.arpa` "
		       ".. `b.e.f.ip6.arpa`), are never sent to `upstream.servers`: a covering forward "
		       "zone gets them (the router's own names), else NXDOMAIN. PTRs generated from "
		       "`local_records` win. Reason `private_reverse`. As Pi-hole's and dnsmasq's "
		       "`bogus-priv`.",
	},
	{
		.path = "special.firefox_canary",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(special_firefox_canary),
		.def = "true",
		.doc = "`use-application-dns.net` answers NXDOMAIN: Firefox then keeps its queries on "
		       "the network's resolver instead of turning on its own DNS-over-HTTPS, which would "
		       "bypass the filter (Mozilla's documented canary domain). Reason `firefox_canary`. "
		       "Pi-hole and AdGuard Home do the same by default.",
	},
	{
		.path = "special.android_probes",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(special_android_probes),
		.def = "true",
		.doc = "Android's Private DNS probe names (`<anything>-dnsotls-ds.metric.gstatic.com`) "
		       "are never blocked, whatever the lists or user rules say: the phone sends them to "
		       "check its DNS path, and a blocked probe makes it report \"no internet\" or "
		       "abandon Private DNS. They resolve upstream as an allowed name (reason "
		       "`android_probe`; counted each time the exemption applies, `/api/lookup` "
		       "included).",
	},
	{
		.path = "special.block_private_relay",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(special_block_private_relay),
		.def = "false",
		.doc = "Answer NXDOMAIN for Apple's iCloud Private Relay names `mask.icloud.com` and "
		       "`mask-h2.icloud.com`: Apple documents this answer as the way a network tells its "
		       "devices that Private Relay is not available here, so their traffic (and DNS) "
		       "stays on the network's filter. Off by default: it turns a paid privacy feature "
		       "off for the whole network, the operator's choice. Reason `private_relay`.",
	},
	{
		.path = "special.ddr",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_LIVE,
		.editable = true,
		.off = F(special_ddr),
		.def = "true",
		.doc = "Discovery of Designated Resolvers (RFC 9462): `_dns.resolver.arpa` SVCB is "
		       "answered with this server's own encrypted endpoints, one record per "
		       "`listener.dot` address (`alpn=dot`, its port) and per `listener.doh` address "
		       "(`alpn=h2`, its port, `dohpath=/dns-query{?dns}`), with `ipv4hint`/`ipv6hint` of "
		       "the listener's address when it is a specific one (not 0.0.0.0 / ::); DoT "
		       "first, SvcPriority 1, 2, ... in listener order, at most 16 records. The "
		       "TargetName is `tls.server_name` when set, else `.` (clients then use "
		       "opportunistic discovery against the address they asked). No DoT or DoH listener: "
		       "NODATA, so clients stay on plain DNS. Other types of the name are NODATA, other "
		       "names under `resolver.arpa` NXDOMAIN; never forwarded. Reason `ddr`. `false` "
		       "answers NODATA for it (and still never forwards it).",
	},
	{
		.path = "dnstap.socket",
		.type = &nx_conf_t_opt_path,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(dnstap_socket),
		.def = "\"\"",
		.example = "/run/dnstap.sock",
		.doc = "Export every answered query over dnstap (Frame Streams, content type "
		       "`protobuf:dnstap.Dnstap`) to a collector listening on this Unix socket: a "
		       "CLIENT_QUERY and a CLIENT_RESPONSE frame per answer, with the client's "
		       "address and port and ours (the address the client asked, also on a "
		       "wildcard listener), the protocol (UDP, TCP, DOT, DOH), the times, the "
		       "answer's wire bytes, and the filter's decision in the `extra` field "
		       "(`nxdns action=block reason=blocklist rule=NAME source=LIST`). Empty: no "
		       "dnstap. Give `socket` or `address`, not both. The collector may be down: "
		       "nxdns reconnects with backoff (100 ms to 5 s) and DNS never waits for it. "
		       "Everything is exported: `logging.privacy` applies to the query log only. "
		       "A reload moves the export to a new destination (the old stream is "
		       "ended, queued answers go to the new one), turns it on or off (off stops "
		       "the writer thread; its queue memory is kept until a restart).",
	},
	{
		.path = "dnstap.address",
		.type = &nx_conf_t_opt_addr,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(dnstap_tcp),
		.default_port = -1,
		.def = "\"\"",
		.doc = "Or a TCP collector, as `ip:port` with the port required, e.g. "
		       "`127.0.0.1:6000` (IPv6 as `[ip]:port`; a numeric address: nxdns resolves "
		       "no name for its own export). Empty: no TCP collector.",
	},
	{
		.path = "dnstap.queue_bytes",
		.type = &nx_conf_t_uint,
		.apply = NX_CONF_APPLY_RESTART,
		.off = F(dnstap_queue_bytes),
		.min = 1048576,
		.max = 268435456,
		.def = "4194304",
		.doc = "Bytes of answers waiting between the DNS workers and the dnstap writer "
		       "(split between the workers; each gets at least 258 KiB, four of the "
		       "largest answers). An answer takes about 100 bytes plus its size, so the "
		       "default holds some 15,000 typical answers, a few seconds of a busy "
		       "network with the collector away. When full the oldest are dropped and "
		       "counted (`nxdns_dnstap_dropped_total{reason=\"queue_full\"}`). Allocated "
		       "only when dnstap is on.",
	},
	{
		.path = "dnstap.identity",
		.type = &nx_conf_t_opt_host,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(dnstap_identity),
		.def = "\"\"",
		.example = "resolver-1",
		.doc = "The `identity` of every dnstap message, so a collector fed by several "
		       "instances can tell them apart. Empty: the host name.",
	},
	{
		.path = "dnstap.forwarder",
		.type = &nx_conf_t_bool,
		.apply = NX_CONF_APPLY_LIVE,
		.off = F(dnstap_forwarder),
		.def = "false",
		.doc = "`true` also exports the exchanges with upstream servers: a "
		       "FORWARDER_QUERY frame for each query sent to one (every send: a "
		       "retransmission, a retry without EDNS or over TCP is a frame of its own) and "
		       "a FORWARDER_RESPONSE for each answer taken from one (its transaction id "
		       "matched; spoofing guesses are not exported), with the server's address "
		       "and port (`response_address`), the protocol (UDP, TCP, DOT, DOH), the wire "
		       "message and the times (the response's `query_time` is when its query was "
		       "first sent). nxdns's own address and port of the exchange are not "
		       "exported. Cache hits, blocked and local answers make no upstream exchange. "
		       "Counted in `nxdns_dnstap_forwarder_sent_total`; they share the queue (and "
		       "its drops) with the client frames.",
	},
};

const size_t nx_conf_n_keys = NX_ARRAY_LEN(nx_conf_keys);

const struct nx_conf_moved nx_conf_moved_keys[] = {
	{"admin.tls_cert", "the certificate moved to tls.cert (shared with DoT and DoH): write "
			   "tls.cert and set admin.tls: true"},
	{"admin.tls_key", "the key moved to tls.key (shared with DoT and DoH): write tls.key and "
			  "set admin.tls: true"},
};

const size_t nx_conf_n_moved_keys = NX_ARRAY_LEN(nx_conf_moved_keys);

/* Position of a key's value when the file set it; none (a default) otherwise. */
static struct nx_conf_pos key_pos(struct nx_conf_ld *ld, const char *path);

/* dns, dot and doh all listen on TCP: one address:port can serve only one of them. */
static int listeners_distinct(struct nx_conf_ld *ld)
{
	static const char *const keys[] = {"listener.dns", "listener.dot", "listener.doh"};
	const struct nx_conf *c = ld->c;
	const struct nx_addr *lists[] = {c->listen_dns, c->listen_dot, c->listen_doh};
	const size_t counts[] = {c->n_listen_dns, c->n_listen_dot, c->n_listen_doh};
	for (size_t a = 0; a < NX_ARRAY_LEN(keys); a++) {
		for (size_t b = a + 1; b < NX_ARRAY_LEN(keys); b++) {
			for (size_t i = 0; i < counts[a]; i++) {
				for (size_t j = 0; j < counts[b]; j++) {
					const struct nx_addr *x = &lists[a][i], *y = &lists[b][j];
					if (x->len != y->len || memcmp(&x->ss, &y->ss, x->len)) {
						continue;
					}
					struct nx_conf_pos at = key_pos(ld, keys[b]);
					if (!at.line) {
						at = key_pos(ld, keys[a]);
					}
					return nx_conf_fail_pos(ld, at,
								"%s[%zu]: '%s' is also %s[%zu] "
								"(one TCP port serves one protocol)",
								keys[b], j, y->text, keys[a], i);
				}
			}
		}
	}
	return 0;
}

static struct nx_conf_pos key_pos(struct nx_conf_ld *ld, const char *path)
{
	size_t idx;
	nx_conf_key_by_path(path, &idx);
	struct nx_conf_pos none = {0, 0};
	return ld->seen[idx] ? ld->pos[idx] : none;
}

/* dnstap: one destination. */
static int dnstap_finish(struct nx_conf_ld *ld)
{
	const struct nx_conf *c = ld->c;
	if (c->dnstap_tcp.len > 0 && c->dnstap_socket) {
		return nx_conf_fail_pos(ld, key_pos(ld, "dnstap.address"),
					"dnstap.address: give dnstap.socket or dnstap.address, "
					"not both");
	}
	return 0;
}

int nx_conf_schema_finish(struct nx_conf_ld *ld)
{
	struct nx_conf *c = ld->c;
	if (c->workers == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		c->workers = n < 1 ? 1 : (unsigned)NX_MIN(n, (long)NX_CONF_MAX_WORKERS);
	}
	c->block_mode_id = -1;
	for (int i = 0; block_modes[i]; i++) {
		if (!strcmp(c->block_mode, block_modes[i])) {
			c->block_mode_id = i;
		}
	}
	nx_require(c->block_mode_id >= 0);
	if (c->block_mode_id == NX_CONF_BLOCK_CUSTOM && !c->has_block_v4 && !c->has_block_v6) {
		struct nx_conf_pos at = key_pos(ld, "filter.block_mode");
		return nx_conf_fail_pos(ld, at,
					"filter.block_mode: custom needs filter.block_addresses "
					"(one IPv4 and/or one IPv6 address)");
	}
	if (!c->tls_cert != !c->tls_key) {
		const char *set = c->tls_cert ? "tls.cert" : "tls.key";
		return nx_conf_fail_pos(ld, key_pos(ld, set),
					"%s: tls.cert and tls.key go together (give both, or "
					"neither for a generated self-signed certificate)", set);
	}
	if (c->sync_primary && !c->sync_token) {
		return nx_conf_fail_pos(ld, key_pos(ld, "sync.primary"),
					"sync.primary: a replica needs sync.token (an API token of "
					"the primary, scope read)");
	}
	int rc = dnstap_finish(ld);
	if (rc) {
		return rc;
	}
	rc = listeners_distinct(ld);
	if (!rc) {
		rc = nx_conf_upstream_finish(ld);
	}
	if (rc) {
		return rc;
	}
	if (c->cache_min_ttl > c->cache_max_ttl) {
		struct nx_conf_pos at = key_pos(ld, "cache.min_ttl");
		if (!at.line) {
			at = key_pos(ld, "cache.max_ttl");
		}
		return nx_conf_fail_pos(ld, at, "cache.min_ttl (%u) must not exceed cache.max_ttl "
					"(%u)", c->cache_min_ttl, c->cache_max_ttl);
	}
	return nx_conf_groups_finish(ld);
}

/* ---- the table as code outside conf/ reads it (conf.h) ----------------------------------- */

/* The generic view of a value type; types not listed have structures of their own. */
static enum nx_conf_kind kind_of(const struct nx_conf_type *t)
{
	static const struct {
		const struct nx_conf_type *type;
		enum nx_conf_kind kind;
	} kinds[] = {
		{&nx_conf_t_bool, NX_CONF_KIND_BOOL},
		{&nx_conf_t_uint, NX_CONF_KIND_UINT},
		{&nx_conf_t_duration, NX_CONF_KIND_UINT},
		{&nx_conf_t_string, NX_CONF_KIND_STRING},
		{&nx_conf_t_enum, NX_CONF_KIND_STRING},
		{&nx_conf_t_opt_host, NX_CONF_KIND_STRING},
		{&nx_conf_t_opt_path, NX_CONF_KIND_STRING},
		{&nx_conf_t_pwhash, NX_CONF_KIND_STRING},
		{&nx_conf_t_addr, NX_CONF_KIND_ADDR},
		{&nx_conf_t_opt_addr, NX_CONF_KIND_ADDR},
		{&nx_conf_t_addr_list, NX_CONF_KIND_ADDR_LIST},
		{&nx_conf_t_cidr_list, NX_CONF_KIND_CIDR_LIST},
		{&nx_conf_t_upstreams, NX_CONF_KIND_UPSTREAMS},
		{&nx_conf_t_rules, NX_CONF_KIND_STRINGS},
		{&nx_conf_t_block_addrs, NX_CONF_KIND_BLOCK_ADDRS},
		{&nx_conf_t_domains, NX_CONF_KIND_STRINGS},
		{&nx_conf_t_opt_account, NX_CONF_KIND_STRING},
		{&nx_conf_t_sync_primary, NX_CONF_KIND_STRING},
		{&nx_conf_t_sync_token, NX_CONF_KIND_STRING},
		{&nx_conf_t_sync_pin, NX_CONF_KIND_STRING},
		{&nx_conf_t_pg_dsn, NX_CONF_KIND_STRING},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(kinds); i++) {
		if (kinds[i].type == t) {
			return kinds[i].kind;
		}
	}
	return NX_CONF_KIND_OTHER;
}

size_t nx_conf_key_count(void)
{
	return nx_conf_n_keys;
}

void nx_conf_key_info(size_t idx, struct nx_conf_key_info *out)
{
	nx_require(idx < nx_conf_n_keys);
	const struct nx_conf_key *k = &nx_conf_keys[idx];
	memset(out, 0, sizeof(*out));
	out->path = k->path;
	out->type = k->type->name;
	out->kind = kind_of(k->type);
	out->apply = (enum nx_conf_apply)k->apply;
	out->editable = k->editable;
	out->min = k->min;
	out->max = k->max;
	out->choices = k->choices;
	out->def = k->def;
	out->doc = k->doc;
	if (k->type->range) {
		k->type->range(k, out->range, sizeof(out->range));
	}
}

int nx_conf_key_index(const char *path, size_t *idx)
{
	for (size_t i = 0; i < nx_conf_n_keys; i++) {
		if (!strcmp(nx_conf_keys[i].path, path)) {
			*idx = i;
			return 0;
		}
	}
	return NX_ENOTFOUND;
}

const char *nx_conf_apply_name(enum nx_conf_apply a)
{
	switch (a) {
	case NX_CONF_APPLY_LIVE:
		return "live";
	case NX_CONF_APPLY_RELOAD:
		return "reload";
	case NX_CONF_APPLY_RESTART:
		return "restart";
	}
	return "";
}

int nx_conf_key_value(const struct nx_conf *c, size_t idx, struct nx_conf_value *v)
{
	nx_require(idx < nx_conf_n_keys);
	const struct nx_conf_key *k = &nx_conf_keys[idx];
	memset(v, 0, sizeof(*v));
	v->kind = kind_of(k->type);
	switch (v->kind) {
	case NX_CONF_KIND_OTHER:
		return -ENOTSUP;
	case NX_CONF_KIND_BOOL:
		v->b = *NX_CONF_FIELD(c, k, const bool);
		break;
	case NX_CONF_KIND_UINT:
		v->u = *NX_CONF_FIELD(c, k, const unsigned);
		break;
	case NX_CONF_KIND_STRING:
		v->s = *NX_CONF_FIELD(c, k, char *const);
		break;
	case NX_CONF_KIND_ADDR:
		v->items = NX_CONF_FIELD(c, k, const struct nx_addr);
		v->n = 1;
		break;
	case NX_CONF_KIND_ADDR_LIST:
	case NX_CONF_KIND_CIDR_LIST:
	case NX_CONF_KIND_UPSTREAMS:
	case NX_CONF_KIND_STRINGS:
		v->items = *NX_CONF_FIELD(c, k, const void *const);
		v->n = *NX_CONF_COUNT(c, k);
		break;
	case NX_CONF_KIND_BLOCK_ADDRS:
		/* the one key whose type writes fields of its own rather than k->off */
		v->v4 = c->has_block_v4 ? c->block_v4 : NULL;
		v->v6 = c->has_block_v6 ? c->block_v6 : NULL;
		break;
	}
	return 0;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool addr_eq(const struct nx_addr *a, const struct nx_addr *b)
{
	return !strcmp(a->text, b->text);
}

static bool upstream_eq(const struct nx_conf_upstream *a, const struct nx_conf_upstream *b)
{
	return !strcmp(a->text, b->text) && str_eq(a->auth_name, b->auth_name) &&
	       a->n_pins == b->n_pins &&
	       (a->n_pins == 0 || !memcmp(a->pins, b->pins, a->n_pins * sizeof(*a->pins))) &&
	       a->resolved == b->resolved &&
	       (!a->resolved || (a->addr.len == b->addr.len &&
				 !memcmp(&a->addr.ss, &b->addr.ss, a->addr.len)));
}

static bool bytes_eq(const uint8_t *a, const uint8_t *b, size_t n)
{
	return a == b || (a && b && !memcmp(a, b, n));
}

bool nx_conf_key_equal(const struct nx_conf *a, const struct nx_conf *b, size_t idx)
{
	struct nx_conf_value x, y;
	if (nx_conf_key_value(a, idx, &x) < 0 || nx_conf_key_value(b, idx, &y) < 0 ||
	    x.n != y.n) {
		return false;
	}
	switch (x.kind) {
	case NX_CONF_KIND_OTHER:
		return false;
	case NX_CONF_KIND_BOOL:
		return x.b == y.b;
	case NX_CONF_KIND_UINT:
		return x.u == y.u;
	case NX_CONF_KIND_STRING:
		return str_eq(x.s, y.s);
	case NX_CONF_KIND_BLOCK_ADDRS:
		return bytes_eq(x.v4, y.v4, 4) && bytes_eq(x.v6, y.v6, 16);
	case NX_CONF_KIND_ADDR:
	case NX_CONF_KIND_ADDR_LIST:
	case NX_CONF_KIND_CIDR_LIST:
	case NX_CONF_KIND_UPSTREAMS:
	case NX_CONF_KIND_STRINGS:
		break;
	}
	for (size_t i = 0; i < x.n; i++) {
		bool eq = true;
		switch (x.kind) {
		case NX_CONF_KIND_ADDR:
		case NX_CONF_KIND_ADDR_LIST:
			eq = addr_eq((const struct nx_addr *)x.items + i,
				     (const struct nx_addr *)y.items + i);
			break;
		case NX_CONF_KIND_CIDR_LIST: {
			const struct nx_cidr *p = (const struct nx_cidr *)x.items + i;
			const struct nx_cidr *q = (const struct nx_cidr *)y.items + i;
			eq = p->family == q->family && p->prefix == q->prefix &&
			     !memcmp(p->addr, q->addr, sizeof(p->addr));
			break;
		}
		case NX_CONF_KIND_UPSTREAMS:
			eq = upstream_eq((const struct nx_conf_upstream *)x.items + i,
					 (const struct nx_conf_upstream *)y.items + i);
			break;
		case NX_CONF_KIND_STRINGS:
			eq = str_eq(((char *const *)x.items)[i], ((char *const *)y.items)[i]);
			break;
		default:
			break;
		}
		if (!eq) {
			return false;
		}
	}
	return true;
}
