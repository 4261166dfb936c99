/*
 * Client names from PTR lookups through the forward zones (names.h says what and why).
 */
#include "daemon/names.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/stats.h"
#include "dns/msg.h"
#include "dns/wire.h"

enum ent_state { ENT_FREE, ENT_QUEUED, ENT_DONE };

struct ent {
	uint8_t family; /* AF_INET / AF_INET6 */
	uint8_t state;	/* enum ent_state */
	uint8_t addr[16];
	uint64_t expires_ms; /* mono; ENT_DONE only */
	uint64_t used_ms;    /* mono: last read (eviction picks the oldest) */
	char name[NX_NAMES_TEXT_MAX]; /* "" = none */
};

struct nx_names {
	uv_loop_t *loop; /* borrowed: the control loop */
	const struct nx_conf *(*conf)(void *ud);
	void *ud;
	struct ent *ents; /* owned (client_names), NX_NAMES_SLOTS */
	uv_udp_t udp4, udp6;
	uv_timer_t timer;
	int open_handles; /* memory freed when the last handle closed */
	bool closing;
	int queue[NX_NAMES_QUEUE]; /* entry indexes, FIFO */
	unsigned q_head, q_n;
	int cur;		   /* entry being looked up, -1 none */
	uint16_t id;		   /* its query id */
	uint8_t qname[NX_DNS_NAME_MAX]; /* its reverse name (wire) */
	uint8_t qname_len;
	struct sockaddr_storage server; /* where it was sent */
	uint8_t rbuf[1232];		/* one reply (we ask for nothing bigger) */
};

static void on_closed(uv_handle_t *h)
{
	struct nx_names *n = h->data;
	if (--n->open_handles == 0) {
		nx_mem_free(NX_OWNER_client_names, n->ents, NX_NAMES_SLOTS * sizeof(*n->ents));
		nx_mem_free(NX_OWNER_client_names, n, sizeof(*n));
	}
}

void nx_names_close(struct nx_names *n)
{
	if (!n || n->closing) {
		return;
	}
	n->closing = true;
	uv_close((uv_handle_t *)&n->udp4, on_closed);
	uv_close((uv_handle_t *)&n->udp6, on_closed);
	uv_close((uv_handle_t *)&n->timer, on_closed);
}

/* The reverse name of an address: d.c.b.a.in-addr.arpa or the 32 nibbles of ip6.arpa. */
static int reverse_name(const struct ent *e, uint8_t out[NX_DNS_NAME_MAX])
{
	char text[80];
	size_t o = 0;
	if (e->family == AF_INET) {
		o = (size_t)snprintf(text, sizeof(text), "%u.%u.%u.%u.in-addr.arpa", e->addr[3],
				     e->addr[2], e->addr[1], e->addr[0]);
	} else {
		static const char hex[] = "0123456789abcdef";
		for (int i = 15; i >= 0; i--) {
			text[o++] = hex[e->addr[i] & 15];
			text[o++] = '.';
			text[o++] = hex[e->addr[i] >> 4];
			text[o++] = '.';
		}
		memcpy(text + o, "ip6.arpa", 9);
	}
	return nx_dns_name_from_text(text, out);
}

/* The first plain (UDP) server with an address of the longest zone holding name, or NULL. */
static const struct nx_conf_upstream *zone_server(const struct nx_conf *c, const uint8_t *name,
						  size_t len)
{
	/* c->zones is sorted by label count, longest first: the first that holds it is nearest */
	for (size_t i = 0; c && i < c->n_zones; i++) {
		const struct nx_fwd_zone *z = &c->zones[i];
		if (!nx_dns_name_in_zone(name, len, z->name, z->name_len)) {
			continue;
		}
		for (size_t j = 0; j < z->n_servers; j++) {
			if (z->servers[j].kind == NX_CONF_UP_PLAIN && z->servers[j].resolved) {
				return &z->servers[j];
			}
		}
		return NULL; /* the zone's servers are all encrypted: no lookup there */
	}
	return NULL;
}

static void finish(struct nx_names *n, const char *name, unsigned ttl_s);
static void on_timeout(uv_timer_t *t);

static void kick(struct nx_names *n)
{
	while (n->cur < 0 && n->q_n && !n->closing) {
		int idx = n->queue[n->q_head];
		n->q_head = (n->q_head + 1) % NX_NAMES_QUEUE;
		n->q_n--;
		struct ent *e = &n->ents[idx];
		int len = reverse_name(e, n->qname);
		const struct nx_conf_upstream *up =
		    len > 0 ? zone_server(n->conf(n->ud), n->qname, (size_t)len) : NULL;
		n->cur = idx;
		if (!up) {
			finish(n, NULL, NX_NAMES_FAIL_TTL_S); /* the zone went in a reload */
			continue;
		}
		n->qname_len = (uint8_t)len;
		n->id = (uint16_t)nx_rand_u32();
		struct nx_dns_question q = {.name_len = (uint8_t)len, .qtype = NX_DNS_T_PTR,
					    .qclass = NX_DNS_C_IN};
		memcpy(q.name, n->qname, (size_t)len);
		uint8_t buf[512];
		int qlen = nx_dns_build_query(buf, sizeof(buf), n->id, &q, false, false);
		memcpy(&n->server, &up->addr.ss, sizeof(n->server));
		uv_udp_t *u = up->addr.ss.ss_family == AF_INET6 ? &n->udp6 : &n->udp4;
		uv_buf_t b = uv_buf_init((char *)buf, qlen > 0 ? (unsigned)qlen : 0);
		if (qlen <= 0 || uv_udp_try_send(u, &b, 1, (const struct sockaddr *)&up->addr.ss) < 0) {
			finish(n, NULL, NX_NAMES_FAIL_TTL_S);
			continue;
		}
		uv_timer_start(&n->timer, on_timeout, NX_NAMES_TIMEOUT_MS, 0);
	}
}

/* The lookup in flight ends: name (NULL = none) kept for ttl_s. A failure (timeout, error)
 * keeps a name an earlier answer gave: the router being slow does not unname a device. */
static void finish(struct nx_names *n, const char *name, unsigned ttl_s)
{
	struct ent *e = &n->ents[n->cur];
	e->state = ENT_DONE;
	e->expires_ms = nx_now_mono_ms() + (uint64_t)ttl_s * 1000;
	if (name || ttl_s != NX_NAMES_FAIL_TTL_S) {
		snprintf(e->name, sizeof(e->name), "%s", name ? name : "");
	}
	n->cur = -1;
	uv_timer_stop(&n->timer);
	nx_stat_inc(name ? NX_STAT_NAMES_FOUND : NX_STAT_NAMES_NONE);
}

static void on_timeout(uv_timer_t *t)
{
	struct nx_names *n = t->data;
	if (n->cur >= 0) {
		nx_stat_inc(NX_STAT_NAMES_TIMEOUT);
		finish(n, NULL, NX_NAMES_FAIL_TTL_S);
	}
	kick(n);
}

static bool same_addr(const struct sockaddr *a, const struct sockaddr_storage *b)
{
	if (a->sa_family != b->ss_family) {
		return false;
	}
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
}

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
	(void)size;
	struct nx_names *n = h->data;
	*buf = uv_buf_init((char *)n->rbuf, sizeof(n->rbuf));
}

/* The first PTR of the answer section owned by the question's name, as text, or "" (none).
 * Returns the answer's TTL, or -1 when the reply cannot be read. */
static long first_ptr(const uint8_t *buf, size_t len, const struct nx_dns_msg *m, char *out,
		      size_t cap)
{
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, buf, m->answer_end);
	rd.pos = m->question_end;
	out[0] = '\0';
	for (unsigned i = 0; i < m->ancount; i++) {
		uint8_t owner[NX_DNS_NAME_MAX], target[NX_DNS_NAME_MAX];
		size_t olen = nx_dns_rd_name(&rd, owner);
		uint16_t type = nx_dns_rd_u16(&rd), klass = nx_dns_rd_u16(&rd);
		uint32_t ttl = nx_dns_rd_u32(&rd);
		uint16_t rdlen = nx_dns_rd_u16(&rd);
		if (rd.err || nx_dns_rd_left(&rd) < rdlen) {
			return -1;
		}
		size_t end = rd.pos + rdlen;
		if (type == NX_DNS_T_PTR && klass == NX_DNS_C_IN &&
		    nx_dns_name_eq(owner, olen, m->q.name, m->q.name_len)) {
			size_t tlen = nx_dns_rd_name(&rd, target);
			if (rd.err || rd.pos != end || nx_dns_name_to_text(target, tlen, out, cap) < 0) {
				out[0] = '\0';
				return -1;
			}
			return (long)ttl;
		}
		rd.pos = end;
	}
	(void)len;
	return 0;
}

static void on_recv(uv_udp_t *u, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *from,
		    unsigned flags)
{
	struct nx_names *n = u->data;
	(void)flags;
	if (nread <= 0 || !from || n->cur < 0 || !same_addr(from, &n->server)) {
		return; /* nothing, or not the server we asked: ignored */
	}
	struct nx_dns_msg m;
	const uint8_t *p = (const uint8_t *)buf->base;
	if (nx_dns_msg_parse(p, (size_t)nread, &m) || m.id != n->id || !(m.flags & 0x8000) ||
	    !m.has_question || m.q.qtype != NX_DNS_T_PTR ||
	    !nx_dns_name_eq(m.q.name, m.q.name_len, n->qname, n->qname_len)) {
		nx_stat_inc(NX_STAT_NAMES_REJECTED);
		return; /* not the answer to our question: keep waiting for it */
	}
	int rcode = m.flags & 0xf;
	char name[NX_NAMES_TEXT_MAX];
	long ttl = rcode == 0 ? first_ptr(p, (size_t)nread, &m, name, sizeof(name)) : 0;
	if (rcode == 0 && ttl >= 0 && name[0]) {
		finish(n, name,
		       (unsigned)NX_MIN(NX_MAX(ttl, NX_NAMES_TTL_MIN_S), NX_NAMES_TTL_MAX_S));
	} else if ((rcode == 0 && ttl >= 0) || rcode == 3) {
		finish(n, NULL, NX_NAMES_NEG_TTL_S); /* no PTR, NXDOMAIN */
	} else {
		finish(n, NULL, NX_NAMES_FAIL_TTL_S);
	}
	kick(n);
}

int nx_names_new(uv_loop_t *loop, const struct nx_conf *(*conf)(void *ud), void *ud,
		 struct nx_names **out)
{
	struct nx_names *n = nx_mem_calloc(NX_OWNER_client_names, 1, sizeof(*n));
	if (!n) {
		return -ENOMEM;
	}
	n->ents = nx_mem_calloc(NX_OWNER_client_names, NX_NAMES_SLOTS, sizeof(*n->ents));
	if (!n->ents) {
		nx_mem_free(NX_OWNER_client_names, n, sizeof(*n));
		return -ENOMEM;
	}
	n->loop = loop;
	n->conf = conf;
	n->ud = ud;
	n->cur = -1;
	uv_udp_init(loop, &n->udp4);
	uv_udp_init(loop, &n->udp6);
	uv_timer_init(loop, &n->timer);
	n->udp4.data = n->udp6.data = n->timer.data = n;
	n->open_handles = 3;
	/* ephemeral ports on the wildcard addresses; a family the host lacks just fails sends */
	struct sockaddr_in a4 = {.sin_family = AF_INET};
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
	if (uv_udp_bind(&n->udp4, (const struct sockaddr *)&a4, 0) == 0) {
		uv_udp_recv_start(&n->udp4, on_alloc, on_recv);
	}
	if (uv_udp_bind(&n->udp6, (const struct sockaddr *)&a6, UV_UDP_IPV6ONLY) == 0) {
		uv_udp_recv_start(&n->udp6, on_alloc, on_recv);
	}
	*out = n;
	return 0;
}

static bool text_addr(const char *text, uint8_t *family, uint8_t addr[16])
{
	memset(addr, 0, 16);
	if (text && inet_pton(AF_INET, text, addr) == 1) {
		*family = AF_INET;
		return true;
	}
	if (text && inet_pton(AF_INET6, text, addr) == 1) {
		*family = AF_INET6;
		return true;
	}
	return false;
}

/* A slot for a new address: a free one, else the least recently read finished one (evicted,
 * counted); -1 when every slot waits for its lookup. */
static int slot(struct nx_names *n)
{
	int best = -1;
	for (int i = 0; i < NX_NAMES_SLOTS; i++) {
		struct ent *e = &n->ents[i];
		if (e->state == ENT_FREE) {
			return i;
		}
		if (e->state == ENT_DONE && (best < 0 || e->used_ms < n->ents[best].used_ms)) {
			best = i;
		}
	}
	if (best >= 0) {
		nx_stat_inc(NX_STAT_NAMES_EVICTED);
	}
	return best;
}

const char *nx_names_get(struct nx_names *n, const char *addr)
{
	uint8_t family, a[16];
	if (!n || n->closing || !text_addr(addr, &family, a)) {
		return NULL;
	}
	uint64_t now = nx_now_mono_ms();
	int found = -1;
	for (int i = 0; i < NX_NAMES_SLOTS && found < 0; i++) {
		struct ent *e = &n->ents[i];
		if (e->state != ENT_FREE && e->family == family && !memcmp(e->addr, a, 16)) {
			found = i;
		}
	}
	if (found >= 0) {
		struct ent *e = &n->ents[found];
		e->used_ms = now;
		if (e->state == ENT_QUEUED || now < e->expires_ms) {
			return e->name[0] ? e->name : NULL;
		}
	}
	/* a miss (or an expired answer): only an address a forward zone answers for is asked */
	struct ent probe = {.family = family};
	memcpy(probe.addr, a, 16);
	uint8_t rname[NX_DNS_NAME_MAX];
	int rlen = reverse_name(&probe, rname);
	if (rlen <= 0 || !zone_server(n->conf(n->ud), rname, (size_t)rlen)) {
		return found >= 0 && n->ents[found].name[0] ? n->ents[found].name : NULL;
	}
	if (n->q_n == NX_NAMES_QUEUE) {
		nx_stat_inc(NX_STAT_NAMES_DROPPED);
		return NULL;
	}
	int idx = found >= 0 ? found : slot(n);
	if (idx < 0) {
		nx_stat_inc(NX_STAT_NAMES_DROPPED);
		return NULL;
	}
	struct ent *e = &n->ents[idx];
	if (found < 0) {
		*e = probe;
		e->used_ms = now;
	}
	e->state = ENT_QUEUED; /* an expired name stays shown until the answer replaces it */
	n->queue[(n->q_head + n->q_n++) % NX_NAMES_QUEUE] = idx;
	kick(n);
	return e->name[0] ? e->name : NULL;
}

bool nx_names_known(const struct nx_names *n, const char *name)
{
	for (int i = 0; n && name && name[0] && i < NX_NAMES_SLOTS; i++) {
		if (n->ents[i].name[0] && strcmp(n->ents[i].name, name) == 0) {
			return true;
		}
	}
	return false;
}
