/*
 * Bootstrap resolution of host-named upstreams: a small blocking stub resolver over the dns/
 * module's builder and parser. See bootstrap.h for the rules.
 */
#include "upstream/bootstrap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/rand.h"
#include "base/stats.h"
#include "dns/msg.h"

#define UDP_BUF 4096  /* we advertise 1232 bytes of EDNS payload; room for a larger lie */
#define QUERY_MAX 512 /* a question with a 255-byte name and our OPT fits */
#define CNAME_HOPS 8  /* chain length followed in one answer (Unbound follows 11) */
#define WHY_MAX 192   /* bytes of a failure reason */

enum outcome {
	OK,	  /* an address */
	NODATA,	  /* the name exists without this type: try the other type */
	NXDOMAIN, /* the name does not exist: no point asking the other type */
	FAILED,	  /* no usable answer from this server: try the next */
};

struct ask {
	const struct nx_addr *server; /* borrowed */
	struct nx_dns_question q;
	uint64_t until;		       /* this turn's deadline, monotonic ms */
	struct sockaddr_storage found; /* the address, port 0 */
	socklen_t found_len;
	char why[WHY_MAX]; /* when not OK */
};

static int wait_fd(int fd, short events, uint64_t until)
{
	for (;;) {
		uint64_t now = nx_now_mono_ms();
		if (now >= until) {
			return NX_ETIMEDOUT;
		}
		struct pollfd p = {.fd = fd, .events = events};
		int n = poll(&p, 1, (int)NX_MIN(until - now, (uint64_t)60000));
		if (n > 0) {
			return 0;
		}
		if (n < 0 && errno != EINTR) {
			return -errno;
		}
	}
}

static bool same_addr(const struct sockaddr_storage *a, socklen_t alen,
		      const struct sockaddr_storage *b, socklen_t blen)
{
	if (a->ss_family != b->ss_family) {
		return false;
	}
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return alen >= sizeof(*x) && blen >= sizeof(*y) && x->sin_port == y->sin_port &&
		       x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return alen >= sizeof(*x) && blen >= sizeof(*y) && x->sin6_port == y->sin6_port &&
	       !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
}

/* Is this reply to our query (id, QR, question)? Counted as the engine counts spoof signs. */
static bool ours(const struct nx_dns_msg *m, uint16_t id, const struct nx_dns_question *q)
{
	if (!(m->flags & NX_DNS_F_QR)) {
		nx_stat_inc(NX_STAT_UP_BAD_REPLY);
		return false;
	}
	if (m->id != id) {
		nx_stat_inc(NX_STAT_UP_WRONG_ID);
		return false;
	}
	if (!m->has_question || m->q.qtype != q->qtype || m->q.qclass != q->qclass ||
	    !nx_dns_name_eq(m->q.name, m->q.name_len, q->name, q->name_len)) {
		nx_stat_inc(NX_STAT_UP_WRONG_QUESTION);
		return false;
	}
	return true;
}

/* The address for a->q in a NOERROR answer, following CNAMEs from the question name. */
static enum outcome pick(struct ask *a, const uint8_t *buf, const struct nx_dns_msg *m)
{
	uint8_t target[NX_DNS_NAME_MAX];
	size_t tlen = a->q.name_len;
	memcpy(target, a->q.name, tlen);
	size_t want = a->q.qtype == NX_DNS_T_A ? 4 : 16;
	for (int hop = 0; hop <= CNAME_HOPS; hop++) {
		struct nx_dns_rd rd;
		nx_dns_rd_init(&rd, buf, m->len);
		nx_dns_rd_skip(&rd, m->question_end);
		bool moved = false;
		for (unsigned i = 0; i < m->ancount && !moved; i++) {
			uint8_t owner[NX_DNS_NAME_MAX];
			size_t olen = nx_dns_rd_name(&rd, owner);
			uint16_t type = nx_dns_rd_u16(&rd);
			uint16_t klass = nx_dns_rd_u16(&rd);
			nx_dns_rd_skip(&rd, 4); /* TTL: used once, not cached */
			uint16_t rdlen = nx_dns_rd_u16(&rd);
			size_t at = rd.pos;
			if (rd.err || nx_dns_rd_left(&rd) < rdlen) {
				snprintf(a->why, sizeof(a->why), "malformed answer from %s",
					 a->server->text);
				return FAILED;
			}
			bool mine =
			    klass == NX_DNS_C_IN && nx_dns_name_eq(owner, olen, target, tlen);
			if (mine && type == a->q.qtype && rdlen == want) {
				const uint8_t *ip = nx_dns_rd_bytes(&rd, rdlen);
				memset(&a->found, 0, sizeof(a->found));
				if (want == 4) {
					struct sockaddr_in *s = (void *)&a->found;
					s->sin_family = AF_INET;
					memcpy(&s->sin_addr, ip, 4);
					a->found_len = sizeof(*s);
				} else {
					struct sockaddr_in6 *s = (void *)&a->found;
					s->sin6_family = AF_INET6;
					memcpy(&s->sin6_addr, ip, 16);
					a->found_len = sizeof(*s);
				}
				return OK;
			}
			if (mine && type == NX_DNS_T_CNAME) {
				size_t nl = nx_dns_rd_name(&rd, target);
				if (rd.err || rd.pos != at + rdlen) {
					snprintf(a->why, sizeof(a->why), "malformed CNAME from %s",
						 a->server->text);
					return FAILED;
				}
				tlen = nl;
				moved = true;
				continue;
			}
			nx_dns_rd_skip(&rd, rdlen);
		}
		if (!moved) {
			return NODATA;
		}
	}
	snprintf(a->why, sizeof(a->why), "CNAME chain longer than %d from %s", CNAME_HOPS,
		 a->server->text);
	return FAILED;
}

/* What a reply that is ours says. */
static enum outcome judge(struct ask *a, const uint8_t *buf, const struct nx_dns_msg *m)
{
	int rcode = NX_DNS_RCODE(m->flags);
	if (rcode == NX_DNS_NXDOMAIN) {
		snprintf(a->why, sizeof(a->why), "NXDOMAIN from %s", a->server->text);
		return NXDOMAIN;
	}
	if (rcode != NX_DNS_NOERROR) {
		snprintf(a->why, sizeof(a->why), "%s from %s", nx_dns_rcode_name(rcode),
			 a->server->text);
		return FAILED;
	}
	return pick(a, buf, m);
}

static int full_io(int fd, bool wr, uint8_t *p, size_t n, uint64_t until)
{
	size_t done = 0;
	while (done < n) {
		int rc = wait_fd(fd, wr ? POLLOUT : POLLIN, until);
		if (rc) {
			return rc;
		}
		ssize_t k = wr ? send(fd, p + done, n - done, MSG_NOSIGNAL)
			       : recv(fd, p + done, n - done, 0);
		if (k == 0 && !wr) {
			return -ECONNRESET;
		}
		if (k < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				continue;
			}
			return -errno;
		}
		done += (size_t)k;
	}
	return 0;
}

/* The same query over TCP (RFC 7766), after a truncated UDP reply. */
static enum outcome ask_tcp(struct ask *a, const uint8_t *query, size_t qlen, uint16_t id)
{
	const struct nx_addr *s = a->server;
	int fd = socket(s->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(a->why, sizeof(a->why), "no TCP socket: %s", strerror(errno));
		return FAILED;
	}
	enum outcome out = FAILED;
	uint8_t *buf = NULL;
	int rc = 0;
	if (connect(fd, (const struct sockaddr *)&s->ss, s->len) < 0 && errno != EINPROGRESS) {
		rc = -errno;
	}
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (!rc && !(rc = wait_fd(fd, POLLOUT, a->until)) &&
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr) {
		rc = -soerr;
	}
	uint8_t pre[2] = {(uint8_t)(qlen >> 8), (uint8_t)qlen};
	if (!rc) {
		rc = full_io(fd, true, pre, 2, a->until);
	}
	if (!rc) {
		rc = full_io(fd, true, (uint8_t *)(uintptr_t)query, qlen, a->until);
	}
	if (!rc) {
		rc = full_io(fd, false, pre, 2, a->until);
	}
	size_t len = (size_t)pre[0] << 8 | pre[1];
	if (!rc) {
		buf = nx_mem_alloc(NX_OWNER_upstream_tcp, NX_MAX(len, (size_t)1));
		rc = buf ? full_io(fd, false, buf, len, a->until) : -ENOMEM;
	}
	if (rc) {
		snprintf(a->why, sizeof(a->why), "%s over TCP from %s",
			 rc == NX_ETIMEDOUT ? "no answer in time" : nx_strerror(rc), s->text);
	} else {
		struct nx_dns_msg m;
		if (nx_dns_msg_parse(buf, len, &m)) {
			nx_stat_inc(NX_STAT_UP_BAD_REPLY);
			snprintf(a->why, sizeof(a->why), "malformed TCP answer from %s", s->text);
		} else if (!ours(&m, id, &a->q)) {
			snprintf(a->why, sizeof(a->why), "a TCP answer from %s that is not ours",
				 s->text);
		} else {
			out = judge(a, buf, &m);
		}
	}
	nx_mem_free(NX_OWNER_upstream_tcp, buf, NX_MAX(len, (size_t)1));
	close(fd);
	return out;
}

/* One server's turn: UDP (re-sent every NX_UP_BOOTSTRAP_RESEND_MS), TCP if truncated. */
static enum outcome ask_one(struct ask *a)
{
	const struct nx_addr *s = a->server;
	uint8_t query[QUERY_MAX];
	uint16_t id = (uint16_t)nx_rand_u32();
	int qlen = nx_dns_build_query(query, sizeof(query), id, &a->q, false, false);
	if (qlen < 0) {
		snprintf(a->why, sizeof(a->why), "cannot build the query");
		return FAILED;
	}
	int fd = socket(s->ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(a->why, sizeof(a->why), "no UDP socket: %s", strerror(errno));
		return FAILED;
	}
	/* connect(): the kernel drops other sources and reports ICMP unreachable to us. */
	if (connect(fd, (const struct sockaddr *)&s->ss, s->len) < 0) {
		snprintf(a->why, sizeof(a->why), "cannot reach %s: %s", s->text, strerror(errno));
		close(fd);
		return FAILED;
	}
	enum outcome out = FAILED;
	snprintf(a->why, sizeof(a->why), "no answer from %s in time", s->text);
	uint64_t next_send = 0;
	uint8_t buf[UDP_BUF];
	for (;;) {
		uint64_t now = nx_now_mono_ms();
		if (now >= a->until) {
			break;
		}
		if (now >= next_send) {
			if (send(fd, query, (size_t)qlen, 0) < 0 && errno != EAGAIN) {
				snprintf(a->why, sizeof(a->why), "cannot send to %s: %s", s->text,
					 strerror(errno));
				break;
			}
			next_send = now + NX_UP_BOOTSTRAP_RESEND_MS;
		}
		int rc = wait_fd(fd, POLLIN, NX_MIN(a->until, next_send));
		if (rc == NX_ETIMEDOUT) {
			continue;
		}
		struct sockaddr_storage from;
		socklen_t flen = sizeof(from);
		ssize_t n =
		    rc ? -1 : recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		if (n < 0) {
			if (!rc && (errno == EAGAIN || errno == EINTR)) {
				continue;
			}
			snprintf(a->why, sizeof(a->why), "%s: %s", s->text,
				 strerror(rc ? -rc : errno));
			break;
		}
		if (!same_addr(&from, flen, &s->ss, s->len)) {
			nx_stat_inc(NX_STAT_UP_WRONG_SOURCE);
			continue;
		}
		struct nx_dns_msg m;
		int prc = nx_dns_msg_parse(buf, (size_t)n, &m);
		/* a truncated reply may be cut anywhere: the header and question are enough */
		if (prc && !(n >= NX_DNS_HDR_LEN && (m.flags & NX_DNS_F_TC) && m.has_question)) {
			nx_stat_inc(NX_STAT_UP_BAD_REPLY);
			continue;
		}
		if (!ours(&m, id, &a->q)) {
			continue;
		}
		out =
		    m.flags & NX_DNS_F_TC ? ask_tcp(a, query, (size_t)qlen, id) : judge(a, buf, &m);
		break;
	}
	close(fd);
	return out;
}

/* Resolve one host: A through every server until one answers, then AAAA the same way. */
static int resolve(const struct nx_addr *const *servers, size_t n, const char *host,
		   uint64_t deadline, struct sockaddr_storage *ss, socklen_t *len, char *why,
		   size_t cap)
{
	struct ask a;
	memset(&a, 0, sizeof(a));
	int wl = nx_dns_name_from_text(host, a.q.name);
	if (wl <= 0) {
		snprintf(why, cap, "not a host name");
		return NX_ECONFIG;
	}
	a.q.name_len = (uint8_t)wl;
	a.q.qclass = NX_DNS_C_IN;
	static const uint16_t types[] = {NX_DNS_T_A, NX_DNS_T_AAAA};
	bool nodata = false;
	snprintf(why, cap, "no bootstrap server");
	for (size_t t = 0; t < NX_ARRAY_LEN(types); t++) {
		a.q.qtype = types[t];
		for (size_t i = 0; i < n; i++) {
			uint64_t now = nx_now_mono_ms();
			if (now >= deadline) {
				snprintf(why, cap, "no answer within the bootstrap deadline");
				return NX_ECONFIG;
			}
			/* Share what is left among the servers not yet asked for this type. */
			uint64_t turn = NX_MAX((deadline - now) / (n - i),
					       (uint64_t)NX_UP_BOOTSTRAP_TURN_MIN_MS);
			a.server = servers[i];
			a.until = NX_MIN(deadline, now + turn);
			enum outcome o = ask_one(&a);
			if (o == OK) {
				*ss = a.found;
				*len = a.found_len;
				return 0;
			}
			snprintf(why, cap, "%s", a.why);
			if (o == NXDOMAIN) {
				return NX_ECONFIG;
			}
			if (o == NODATA) {
				nodata = true;
				break; /* an answer: the other servers would say the same */
			}
		}
	}
	if (nodata) {
		snprintf(why, cap, "no A or AAAA records");
	}
	return NX_ECONFIG;
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET) {
		((struct sockaddr_in *)(void *)ss)->sin_port = htons(port);
	} else {
		((struct sockaddr_in6 *)(void *)ss)->sin6_port = htons(port);
	}
}

static void fill(struct nx_conf_upstream *u, const struct sockaddr_storage *ss, socklen_t len)
{
	memset(&u->addr, 0, sizeof(u->addr));
	memcpy(&u->addr.ss, ss, len);
	u->addr.len = len;
	set_port(&u->addr.ss, u->port);
	char ip[INET6_ADDRSTRLEN] = "?";
	const void *p =
	    ss->ss_family == AF_INET
		? (const void *)&((const struct sockaddr_in *)(const void *)ss)->sin_addr
		: (const void *)&((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr;
	inet_ntop(ss->ss_family, p, ip, sizeof(ip));
	snprintf(u->addr.text, sizeof(u->addr.text), ss->ss_family == AF_INET ? "%s:%u" : "[%s]:%u",
		 ip, u->port);
	u->resolved = true;
}

/* An upstream of `c` with the same host already resolved (this call or a mapping's address). */
static const struct nx_conf_upstream *resolved_twin(const struct nx_conf *c, const char *host)
{
	for (size_t z = 0; z <= c->n_zones; z++) {
		const struct nx_conf_upstream *l = z ? c->zones[z - 1].servers : c->upstreams;
		size_t n = z ? c->zones[z - 1].n_servers : c->n_upstreams;
		for (size_t i = 0; i < n; i++) {
			if (l[i].host && l[i].resolved && !strcmp(l[i].host, host)) {
				return &l[i];
			}
		}
	}
	return NULL;
}

int nx_up_bootstrap_resolve(struct nx_conf *c, unsigned timeout_ms, char *err, size_t errlen)
{
	const struct nx_addr *servers[NX_CONF_MAX_UPSTREAMS];
	size_t n = 0;
	for (size_t i = 0; i < c->n_bootstrap && n < NX_ARRAY_LEN(servers); i++) {
		servers[n++] = &c->bootstrap[i];
	}
	for (size_t i = 0; c->n_bootstrap == 0 && i < c->n_upstreams; i++) {
		if (c->upstreams[i].kind == NX_CONF_UP_PLAIN && n < NX_ARRAY_LEN(servers)) {
			servers[n++] = &c->upstreams[i].addr;
		}
	}
	uint64_t deadline = nx_now_mono_ms() + timeout_ms;
	for (size_t z = 0; z <= c->n_zones; z++) {
		struct nx_conf_upstream *l = z ? c->zones[z - 1].servers : c->upstreams;
		size_t cnt = z ? c->zones[z - 1].n_servers : c->n_upstreams;
		for (size_t i = 0; i < cnt; i++) {
			struct nx_conf_upstream *u = &l[i];
			if (u->resolved || !u->host) {
				continue;
			}
			const struct nx_conf_upstream *twin = resolved_twin(c, u->host);
			if (twin) {
				fill(u, &twin->addr.ss, twin->addr.len);
				continue;
			}
			struct sockaddr_storage ss;
			socklen_t len = 0;
			char why[WHY_MAX];
			int rc =
			    resolve(servers, n, u->host, deadline, &ss, &len, why, sizeof(why));
			if (rc) {
				char at[32] = "";
				if (u->line) {
					snprintf(at, sizeof(at), ":%u:%u", u->line, u->col);
				}
				if (err && errlen) {
					snprintf(err, errlen,
						 "%s%s: upstream host '%s' cannot be resolved "
						 "through upstream.bootstrap (%s)",
						 c->path, at, u->host, why);
				}
				return rc;
			}
			fill(u, &ss, len);
		}
	}
	return 0;
}
