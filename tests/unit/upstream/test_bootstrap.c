/*
 * nx_up_bootstrap_resolve against an in-process fake DNS server on 127.0.0.1 (its own thread:
 * the resolver blocks). Covers A, AAAA after NODATA, CNAME chains, TCP after truncation, a
 * wrong-id reply ignored, NXDOMAIN, SERVFAIL and silent servers, the default bootstrap list,
 * a host asked once, and the deadline.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../conf/helpers.h"
#include "base/clock.h"
#include "base/rand.h"
#include "base/stats.h"
#include "dns/msg.h"
#include "upstream/bootstrap.h"

enum mode {
	M_ANSWER,	  /* answer from the zone below */
	M_SILENT,	  /* record, never answer */
	M_TC,		  /* UDP: empty reply with TC; TCP: the answer */
	M_WRONG_ID_FIRST, /* a reply with another id, then the right one */
	M_SERVFAIL,
};

struct fakedns {
	int udp, tcp, stop[2];
	uint16_t port;
	pthread_t th;
	enum mode mode;
	atomic_int udp_queries, tcp_queries, a_queries, aaaa_queries;
};

/* The fake's zone: dns.example A, v6only.example AAAA, alias.example -> dns.example. */
static int answer(struct fakedns *f, const uint8_t *q, size_t qlen, uint8_t *out, size_t cap,
		  bool tcp)
{
	struct nx_dns_msg m;
	if (nx_dns_msg_parse(q, qlen, &m) || !m.has_question) {
		return -1;
	}
	atomic_fetch_add(m.q.qtype == NX_DNS_T_A ? &f->a_queries : &f->aaaa_queries, 1);
	struct nx_dns_reply_ctx ctx = {.id = m.id, .qflags = m.flags, .q = &m.q, .max_size = cap};
	if (f->mode == M_SERVFAIL) {
		return nx_dns_build_error(out, cap, &ctx, NX_DNS_SERVFAIL, -1, NULL);
	}
	if (f->mode == M_TC && !tcp) {
		int n = nx_dns_build_error(out, cap, &ctx, NX_DNS_NOERROR, -1, NULL);
		out[2] |= NX_DNS_F_TC >> 8;
		return n;
	}
	static const uint8_t v4[4] = {192, 0, 2, 10};
	static const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x10};
	static const uint8_t target[] = "\3dns\7example";
	char name[NX_DNS_TEXT_MAX];
	nx_dns_name_to_text(m.q.name, m.q.name_len, name, sizeof(name));
	for (char *p = name; *p; p++) {
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
	}
	struct nx_dns_rr_spec rr[2];
	size_t n = 0;
	int rcode = NX_DNS_NOERROR;
	bool a = m.q.qtype == NX_DNS_T_A, aaaa = m.q.qtype == NX_DNS_T_AAAA;
	if (!strcmp(name, "dns.example")) {
		if (a) {
			rr[n++] = (struct nx_dns_rr_spec){
			    .type = NX_DNS_T_A, .ttl = 60, .rdata = v4, .rdlen = 4};
		}
	} else if (!strcmp(name, "v6only.example")) {
		if (aaaa) {
			rr[n++] = (struct nx_dns_rr_spec){
			    .type = NX_DNS_T_AAAA, .ttl = 60, .rdata = v6, .rdlen = 16};
		}
	} else if (!strcmp(name, "alias.example")) {
		rr[n++] = (struct nx_dns_rr_spec){
		    .type = NX_DNS_T_CNAME, .ttl = 60, .rdata = target, .rdlen = sizeof(target)};
		if (a) {
			rr[n++] = (struct nx_dns_rr_spec){.owner = target,
							  .owner_len = sizeof(target),
							  .type = NX_DNS_T_A,
							  .ttl = 60,
							  .rdata = v4,
							  .rdlen = 4};
		}
	} else {
		rcode = NX_DNS_NXDOMAIN;
	}
	return nx_dns_build_answer(out, cap, &ctx, rcode, false, rr, n, NULL, 0, -1, NULL);
}

static void serve_tcp(struct fakedns *f)
{
	int c = accept(f->tcp, NULL, NULL);
	if (c < 0) {
		return;
	}
	atomic_fetch_add(&f->tcp_queries, 1);
	uint8_t len[2], q[512], out[1024];
	if (recv(c, len, 2, MSG_WAITALL) == 2) {
		size_t ql = (size_t)len[0] << 8 | len[1];
		if (ql <= sizeof(q) && recv(c, q, ql, MSG_WAITALL) == (ssize_t)ql) {
			int n = answer(f, q, ql, out + 2, sizeof(out) - 2, true);
			if (n > 0) {
				out[0] = (uint8_t)(n >> 8);
				out[1] = (uint8_t)n;
				send(c, out, (size_t)n + 2, MSG_NOSIGNAL);
			}
		}
	}
	close(c);
}

static void *run(void *arg)
{
	struct fakedns *f = arg;
	for (;;) {
		struct pollfd p[3] = {{.fd = f->udp, .events = POLLIN},
				      {.fd = f->tcp, .events = POLLIN},
				      {.fd = f->stop[0], .events = POLLIN}};
		if (poll(p, 3, 5000) <= 0 || p[2].revents) {
			return NULL; /* stopped, or idle long enough that the test is gone */
		}
		if (p[1].revents) {
			serve_tcp(f);
		}
		if (!p[0].revents) {
			continue;
		}
		uint8_t q[512], out[1024];
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t k = recvfrom(f->udp, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
		if (k <= 0) {
			continue;
		}
		atomic_fetch_add(&f->udp_queries, 1);
		if (f->mode == M_SILENT) {
			continue;
		}
		int n = answer(f, q, (size_t)k, out, sizeof(out), false);
		if (n <= 0) {
			continue;
		}
		if (f->mode == M_WRONG_ID_FIRST) {
			out[1] ^= 0x5a;
			sendto(f->udp, out, (size_t)n, 0, (struct sockaddr *)&from, fl);
			out[1] ^= 0x5a;
		}
		sendto(f->udp, out, (size_t)n, 0, (struct sockaddr *)&from, fl);
	}
}

static void fake_start(struct fakedns *f, enum mode mode)
{
	memset(f, 0, sizeof(*f));
	f->mode = mode;
	/* A port free for both UDP and TCP: the kernel's free UDP port may be taken for TCP by
	 * something else on a shared machine, so try again until both bind. */
	struct sockaddr_in sin;
	int bound = -1;
	for (int tries = 0; tries < 100 && bound != 0; tries++) {
		if (tries > 0) {
			close(f->udp);
			close(f->tcp);
		}
		sin = (struct sockaddr_in){.sin_family = AF_INET,
					   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		f->udp = socket(AF_INET, SOCK_DGRAM, 0);
		assert_true(f->udp >= 0);
		assert_int_equal(bind(f->udp, (struct sockaddr *)&sin, sizeof(sin)), 0);
		socklen_t sl = sizeof(sin);
		assert_int_equal(getsockname(f->udp, (struct sockaddr *)&sin, &sl), 0);
		f->port = ntohs(sin.sin_port);
		f->tcp = socket(AF_INET, SOCK_STREAM, 0);
		int one = 1;
		setsockopt(f->tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		bound = bind(f->tcp, (struct sockaddr *)&sin, sizeof(sin));
	}
	assert_int_equal(bound, 0);
	assert_int_equal(listen(f->tcp, 4), 0);
	assert_int_equal(pipe(f->stop), 0);
	assert_int_equal(pthread_create(&f->th, NULL, run, f), 0);
}

static void fake_stop(struct fakedns *f)
{
	assert_int_equal(write(f->stop[1], "x", 1), 1);
	pthread_join(f->th, NULL);
	close(f->udp);
	close(f->tcp);
	close(f->stop[0]);
	close(f->stop[1]);
}

/* Load `fmt` with the fake ports substituted (printf-style) and resolve; returns the rc. */
static int load_resolve(struct nx_conf **c, unsigned timeout_ms, char *err, size_t errlen,
			const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int load_resolve(struct nx_conf **c, unsigned timeout_ms, char *err, size_t errlen,
			const char *fmt, ...)
{
	char y[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(y, sizeof(y), fmt, ap);
	va_end(ap);
	*c = load_ok(y);
	err[0] = '\0';
	return nx_up_bootstrap_resolve(*c, timeout_ms, err, errlen);
}

static void addr_is(const struct nx_conf_upstream *u, const char *text)
{
	assert_true(u->resolved);
	assert_string_equal(u->addr.text, text);
}

static void resolves_a_once_for_every_use(void **state)
{
	(void)state;
	struct fakedns f;
	fake_start(&f, M_ANSWER);
	struct nx_conf *c;
	char err[NX_CONF_ERR_MAX];
	int rc = load_resolve(&c, 2000, err, sizeof(err),
			      "upstream:\n  bootstrap: [\"127.0.0.1:%u\"]\n"
			      "  servers: [\"tls://dns.example\", \"https://DNS.example:8443/q\"]\n"
			      "  forward_zones:\n    lan: [\"tls://dns.example#ns.lan\"]\n",
			      f.port);
	assert_int_equal(rc, 0);
	addr_is(&c->upstreams[0], "192.0.2.10:853");
	addr_is(&c->upstreams[1], "192.0.2.10:8443");
	addr_is(&c->zones[0].servers[0], "192.0.2.10:853");
	assert_int_equal(((struct sockaddr_in *)(void *)&c->upstreams[1].addr.ss)->sin_port,
			 htons(8443));
	assert_int_equal(atomic_load(&f.a_queries), 1); /* one host, asked once */
	assert_int_equal(atomic_load(&f.aaaa_queries), 0);
	/* a second call finds nothing left to do */
	assert_int_equal(nx_up_bootstrap_resolve(c, 2000, err, sizeof(err)), 0);
	assert_int_equal(atomic_load(&f.udp_queries), 1);
	nx_conf_free(c);
	fake_stop(&f);
}

static void aaaa_after_nodata_and_cname(void **state)
{
	(void)state;
	struct fakedns f;
	fake_start(&f, M_ANSWER);
	struct nx_conf *c;
	char err[NX_CONF_ERR_MAX];
	int rc = load_resolve(&c, 2000, err, sizeof(err),
			      "upstream:\n  bootstrap: [\"127.0.0.1:%u\"]\n"
			      "  servers: [\"tls://v6only.example\", \"tls://alias.example\"]\n",
			      f.port);
	assert_int_equal(rc, 0);
	addr_is(&c->upstreams[0], "[2001:db8::10]:853");
	assert_int_equal(c->upstreams[0].addr.ss.ss_family, AF_INET6);
	addr_is(&c->upstreams[1], "192.0.2.10:853");
	assert_int_equal(atomic_load(&f.aaaa_queries), 1);
	nx_conf_free(c);
	fake_stop(&f);
}

static void truncated_goes_to_tcp(void **state)
{
	(void)state;
	struct fakedns f;
	fake_start(&f, M_TC);
	struct nx_conf *c;
	char err[NX_CONF_ERR_MAX];
	int rc = load_resolve(&c, 2000, err, sizeof(err),
			      "upstream:\n  bootstrap: [\"127.0.0.1:%u\"]\n"
			      "  servers: [\"tls://dns.example\"]\n",
			      f.port);
	assert_int_equal(rc, 0);
	addr_is(&c->upstreams[0], "192.0.2.10:853");
	assert_int_equal(atomic_load(&f.udp_queries), 1);
	assert_int_equal(atomic_load(&f.tcp_queries), 1);
	nx_conf_free(c);
	fake_stop(&f);
}

static void wrong_id_is_ignored(void **state)
{
	(void)state;
	struct fakedns f;
	fake_start(&f, M_WRONG_ID_FIRST);
	uint64_t before = nx_stat_read(NX_STAT_UP_WRONG_ID);
	struct nx_conf *c;
	char err[NX_CONF_ERR_MAX];
	int rc = load_resolve(&c, 2000, err, sizeof(err),
			      "upstream:\n  bootstrap: [\"127.0.0.1:%u\"]\n"
			      "  servers: [\"tls://dns.example\"]\n",
			      f.port);
	assert_int_equal(rc, 0);
	addr_is(&c->upstreams[0], "192.0.2.10:853");
	assert_int_equal(nx_stat_read(NX_STAT_UP_WRONG_ID), before + 1);
	nx_conf_free(c);
	fake_stop(&f);
}

static void nxdomain_names_the_host(void **state)
{
	(void)state;
	struct fakedns f;
	fake_start(&f, M_ANSWER);
	struct nx_conf *c;
	char err[NX_CONF_ERR_MAX], want[NX_CONF_ERR_MAX];
	int rc =
	    load_resolve(&c, 2000, err, sizeof(err),
			 "upstream:\n  bootstrap: [\"127.0.0.1:%u\"]\n"
			 "  servers: [\"tls://dns.example\",\n    \"https://nope.example/q\"]\n",
			 f.port);
	assert_int_equal(rc, NX_ECONFIG);
	snprintf(want, sizeof(want),
		 "t.yaml:4:5: upstream host 'nope.example' cannot be resolved through "
		 "upstream.bootstrap (NXDOMAIN from 127.0.0.1:%u)",
		 f.port);
	assert_string_equal(err, want);
	assert_int_equal(atomic_load(&f.aaaa_queries), 0); /* NXDOMAIN: no point asking AAAA */
	addr_is(&c->upstreams[0], "192.0.2.10:853");	   /* resolved before the failure */
	assert_false(c->upstreams[1].resolved);
	nx_conf_free(c);
	fake_stop(&f);
}

static void failing_servers_move_on(void **state)
{
	(void)state;
	struct fakedns bad, silent, good;
	fake_start(&bad, M_SERVFAIL);
	fake_start(&silent, M_SILENT);
	fake_start(&good, M_ANSWER);
	struct nx_conf *c;
	char err[NX_CONF_ERR_MAX];
	/* default bootstrap: the plain servers of upstream.servers, in order */
	uint64_t t0 = nx_now_mono_ms();
	int rc = load_resolve(&c, 1500, err, sizeof(err),
			      "upstream:\n  servers: [\"127.0.0.1:%u\", \"127.0.0.1:%u\", "
			      "\"127.0.0.1:%u\", \"tls://dns.example\"]\n",
			      bad.port, silent.port, good.port);
	assert_int_equal(rc, 0);
	addr_is(&c->upstreams[3], "192.0.2.10:853");
	assert_int_equal(atomic_load(&bad.udp_queries), 1);
	assert_true(atomic_load(&silent.udp_queries) >= 1);
	assert_int_equal(atomic_load(&good.udp_queries), 1);
	/* the silent server had its share of the deadline, not all of it */
	assert_true(nx_now_mono_ms() - t0 < 1500);
	nx_conf_free(c);
	fake_stop(&bad);
	fake_stop(&silent);
	fake_stop(&good);
}

static void silence_ends_at_the_deadline(void **state)
{
	(void)state;
	struct fakedns f;
	fake_start(&f, M_SILENT);
	struct nx_conf *c;
	char err[NX_CONF_ERR_MAX], want[NX_CONF_ERR_MAX];
	uint64_t t0 = nx_now_mono_ms();
	int rc = load_resolve(&c, 900, err, sizeof(err),
			      "upstream:\n  bootstrap: [\"127.0.0.1:%u\"]\n"
			      "  servers: [\"tls://dns.example\"]\n",
			      f.port);
	uint64_t took = nx_now_mono_ms() - t0;
	assert_int_equal(rc, NX_ECONFIG);
	snprintf(want, sizeof(want),
		 "t.yaml:3:13: upstream host 'dns.example' cannot be resolved through "
		 "upstream.bootstrap (no answer within the bootstrap deadline)");
	assert_string_equal(err, want);
	assert_true(took >= 890 && took < 1400);
	/* re-sent within the turn: a lost datagram does not cost the whole deadline */
	assert_true(atomic_load(&f.udp_queries) >= 2);
	nx_conf_free(c);
	fake_stop(&f);
}

static void nothing_to_resolve_is_network_free(void **state)
{
	(void)state;
	struct fakedns f;
	fake_start(&f, M_ANSWER);
	struct nx_conf *c;
	char err[NX_CONF_ERR_MAX];
	int rc = load_resolve(&c, 2000, err, sizeof(err),
			      "upstream:\n  bootstrap: [\"127.0.0.1:%u\"]\n"
			      "  servers: [\"9.9.9.9\", \"tls://1.1.1.1\", "
			      "{url: \"tls://dns.example\", address: 192.0.2.99}]\n",
			      f.port);
	assert_int_equal(rc, 0);
	addr_is(&c->upstreams[2], "192.0.2.99:853");
	assert_int_equal(atomic_load(&f.udp_queries), 0);
	nx_conf_free(c);
	fake_stop(&f);
}

int main(void)
{
	assert_int_equal(nx_rand_init(), 0);
	const struct CMUnitTest tests[] = {
	    T(resolves_a_once_for_every_use), T(aaaa_after_nodata_and_cname),
	    T(truncated_goes_to_tcp),	      T(wrong_id_is_ignored),
	    T(nxdomain_names_the_host),	      T(failing_servers_move_on),
	    T(silence_ends_at_the_deadline),  T(nothing_to_resolve_is_network_free),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
