/*
 * The schema: every configuration key with its type, range, default and documentation. This
 * table is the single source; the loader walks YAML against it and docs/configuration.md is
 * generated from it. Keys of one section stay contiguous (the docs example nests them).
 */
#include <stddef.h>
#include <unistd.h>

#include "base/err.h"
#include "conf/impl.h"

#define MAX_LISTEN 16  /* listener.dns addresses: a few interfaces x two families */
#define MAX_ZONES 256  /* forward zones: a household has a handful; each is a linear check */
#define MAX_CIDRS 1024 /* access list entries: checked linearly per query */

#define F(field) offsetof(struct nx_conf, field)
#define STR_(x) #x
#define STR(x) STR_(x)

static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};

const struct nx_conf_key nx_conf_keys[] = {
	{
		.path = "listener.dns",
		.type = &nx_conf_t_addr_list,
		.off = F(listen_dns),
		.off_n = F(n_listen_dns),
		.min = 1,
		.max = MAX_LISTEN,
		.default_port = 53,
		.def = "[\"0.0.0.0:53\", \"[::]:53\"]",
		.doc = "Addresses the DNS server listens on, UDP and TCP, as `addr:port` "
		       "(IPv6 as `[addr]:port`; the port defaults to 53 when omitted). "
		       "`0.0.0.0` and `[::]` mean every interface of that family. Each worker "
		       "opens its own UDP socket per address (SO_REUSEPORT).",
	},
	{
		.path = "listener.workers",
		.type = &nx_conf_t_uint,
		.off = F(workers),
		.min = 0,
		.max = 64,
		.def = "0",
		.doc = "Worker threads, each with its own event loop and sockets. `0` means one "
		       "per online CPU core, capped at " STR(NX_CONF_MAX_WORKERS) " (more buys "
		       "nothing on a small machine). The thread count is fixed at start; changing "
		       "it needs a restart.",
	},
	{
		.path = "listener.dns_max_connections",
		.type = &nx_conf_t_uint,
		.off = F(dns_max_connections),
		.min = 1,
		.max = 65535,
		.def = "16",
		.doc = "Open TCP client connections allowed per listener address. A connection "
		       "beyond the cap is refused and counted "
		       "(`nxdns_dropped_total{reason=\"connection_cap\"}`).",
	},
	{
		.path = "listener.tcp_idle_timeout_ms",
		.type = &nx_conf_t_uint,
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
		.path = "upstream.servers",
		.type = &nx_conf_t_addr_list,
		.off = F(upstreams),
		.off_n = F(n_upstreams),
		.min = 1,
		.max = NX_CONF_MAX_UPSTREAMS,
		.default_port = 53,
		.def = "[\"9.9.9.9:53\", \"1.1.1.1:53\"]",
		.doc = "Upstream resolvers queries are forwarded to, as `addr:port` (IPv6 as "
		       "`[addr]:port`; the port defaults to 53). IP addresses only: nxdns does not "
		       "resolve a name to find its own resolver.",
	},
	{
		.path = "upstream.race",
		.type = &nx_conf_t_uint,
		.off = F(race),
		.min = 1,
		.max = NX_CONF_MAX_UPSTREAMS,
		.def = "2",
		.doc = "How many upstream servers one query may be sent to: the first server "
		       "at once, the next after `stagger_ms` without an answer, and so on; the "
		       "first valid answer wins. A value above the number of servers means all of "
		       "them.",
	},
	{
		.path = "upstream.timeout_ms",
		.type = &nx_conf_t_uint,
		.off = F(timeout_ms),
		.min = 50,
		.max = 60000,
		.def = "2000",
		.doc = "One deadline, in milliseconds, for the whole forwarding operation of a "
		       "query (every server raced, every retry, TCP fallback included). When it "
		       "expires the client gets SERVFAIL.",
	},
	{
		.path = "upstream.stagger_ms",
		.type = &nx_conf_t_uint,
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
		       "the most specific zone wins. Each server is `addr:port` with the port "
		       "defaulting to 53.",
	},
	{
		.path = "query_budget.permits",
		.type = &nx_conf_t_uint,
		.off = F(permits),
		.min = 1,
		.max = 65535,
		.def = "32",
		.doc = "Upstream forwarding operations allowed in flight at once for the whole "
		       "process. A query that finds no permit free is dropped and counted "
		       "(`reason=\"dropped_no_permit\"`); cached, blocked and local answers need "
		       "no permit.",
	},
	{
		.path = "query_budget.coalesce_max_waiters",
		.type = &nx_conf_t_uint,
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
		.path = "admin.enabled",
		.type = &nx_conf_t_bool,
		.off = F(admin_enabled),
		.def = "true",
		.doc = "Serve the admin HTTP API, web UI and `/metrics` on `admin.listen`.",
	},
	{
		.path = "admin.listen",
		.type = &nx_conf_t_addr,
		.off = F(admin_listen),
		.default_port = -1,
		.def = "\"127.0.0.1:8080\"",
		.doc = "Address of the admin HTTP server, `addr:port` with the port required "
		       "(IPv6 as `[addr]:port`). "
		       "Loopback by default: expose it to the network only on purpose.",
	},
	{
		.path = "state_dir",
		.type = &nx_conf_t_string,
		.off = F(state_dir),
		.def = "/var/lib/nxdns",
		.doc = "Directory for the data nxdns produces: downloaded and compiled "
		       "blocklists, the blocklist snapshot and the query-log database. A relative "
		       "path is relative to the working directory at start.",
	},
	{
		.path = "log.level",
		.type = &nx_conf_t_enum,
		.off = F(log_level),
		.choices = log_levels,
		.def = "info",
		.doc = "Least severe message written to the log (stderr): `error`, `warn`, "
		       "`info` or `debug`.",
	},
};

const size_t nx_conf_n_keys = NX_ARRAY_LEN(nx_conf_keys);

int nx_conf_schema_finish(struct nx_conf_ld *ld)
{
	struct nx_conf *c = ld->c;
	if (c->workers == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		c->workers = n < 1 ? 1 : (unsigned)NX_MIN(n, (long)NX_CONF_MAX_WORKERS);
	}
	return 0;
}
