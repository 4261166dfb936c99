/*
 * Per-producer byte rings of variable-size events, drop-oldest. A byte ring rather than fixed
 * slots: replies are mostly under 200 bytes but may be 64 KiB over TCP, and slots big enough
 * for the largest would hold 300 times fewer events in the same memory.
 */
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "dnstap/impl.h"

#define ALIGN8(n) (((n) + 7) & ~(size_t)7)

static_assert(sizeof(struct nx_dnstap_rec) == 80,
	      "an event costs 80 bytes + its texts and message");

static size_t text_len(const char *s, size_t max)
{
	return s ? strnlen(s, max) : 0;
}

size_t nx_dnstap_rec_size(const struct nx_dnstap_event *ev)
{
	return ALIGN8(sizeof(struct nx_dnstap_rec) + text_len(ev->rule, NX_DNSTAP_RULE_MAX) +
		      text_len(ev->source, NX_DNSTAP_SOURCE_MAX) + ev->msg_len);
}

int nx_dnstap_ring_init(struct nx_dnstap_ring *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	cap = ALIGN8(cap);
	r->buf = nx_mem_alloc(NX_OWNER_dnstap_queue, cap);
	if (!r->buf) {
		return -ENOMEM;
	}
	r->cap = cap;
	int rc = pthread_mutex_init(&r->lock, NULL);
	if (rc) {
		nx_mem_free(NX_OWNER_dnstap_queue, r->buf, cap);
		r->buf = NULL;
		return -rc;
	}
	return 0;
}

void nx_dnstap_ring_deinit(struct nx_dnstap_ring *r)
{
	if (r->buf) {
		nx_mem_free(NX_OWNER_dnstap_queue, r->buf, r->cap);
		pthread_mutex_destroy(&r->lock);
		r->buf = NULL;
	}
}

/* At head: a record, or padding to the end of the buffer (returns its length either way;
 * *is_pad says which). */
static size_t head_len(const struct nx_dnstap_ring *r, bool *is_pad)
{
	size_t left = r->cap - r->head;
	const struct nx_dnstap_rec *h = (const struct nx_dnstap_rec *)(r->buf + r->head);
	*is_pad = left < sizeof(*h) || h->len == 0;
	return *is_pad ? left : h->len;
}

/* Remove what is at head; true when it was a record (not padding). */
static bool pop(struct nx_dnstap_ring *r)
{
	bool pad;
	size_t n = head_len(r, &pad);
	r->used -= n;
	r->head = (r->head + n) % r->cap;
	if (r->used == 0) {
		r->head = r->tail = 0;
	}
	return !pad;
}

/* Offset where `need` contiguous bytes fit now, or SIZE_MAX. Wrapping pads the end. */
static size_t room(struct nx_dnstap_ring *r, size_t need)
{
	if (r->used == 0) {
		r->head = r->tail = 0;
		return need <= r->cap ? 0 : SIZE_MAX;
	}
	if (r->tail > r->head) {
		if (r->cap - r->tail >= need) {
			return r->tail;
		}
		if (r->head >= need) {
			size_t pad = r->cap - r->tail;
			if (pad >= sizeof(uint32_t)) {
				uint32_t zero = 0;
				memcpy(r->buf + r->tail, &zero, sizeof(zero));
			}
			r->used += pad;
			r->tail = 0;
			return 0;
		}
		return SIZE_MAX;
	}
	/* tail < head, or tail == head with the ring full */
	return r->head - r->tail >= need && r->used < r->cap ? r->tail : SIZE_MAX;
}

/* An address into the record's compact form (family 0 when none or not IP). */
static void addr_put(const struct sockaddr *sa, uint8_t *family, uint16_t *port, uint8_t *addr)
{
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
		*family = AF_INET;
		*port = ntohs(a->sin_port);
		memcpy(addr, &a->sin_addr, 4);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
		*family = AF_INET6;
		*port = ntohs(a->sin6_port);
		memcpy(addr, &a->sin6_addr, 16);
	}
}

/* And back: NULL when the record has none. */
static const struct sockaddr *addr_get(uint8_t family, uint16_t port, const uint8_t *addr,
				       struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		memcpy(&a->sin_addr, addr, 4);
	} else if (family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		memcpy(&a->sin6_addr, addr, 16);
	} else {
		return NULL;
	}
	return (const struct sockaddr *)ss;
}

int nx_dnstap_ring_put(struct nx_dnstap_ring *r, const struct nx_dnstap_event *ev)
{
	size_t need = nx_dnstap_rec_size(ev);
	/* Half the ring: then dropping everything before it always makes room, pad included. */
	if (ev->msg_len > NX_DNSTAP_MSG_MAX || need > r->cap / 2) {
		return NX_ETRUNC;
	}
	int dropped = 0;
	size_t at;
	while ((at = room(r, need)) == SIZE_MAX) {
		dropped += pop(r);
	}
	struct nx_dnstap_rec h = {
	    .len = (uint32_t)need,
	    .msg_len = (uint16_t)ev->msg_len,
	    .rule_len = (uint8_t)text_len(ev->rule, NX_DNSTAP_RULE_MAX),
	    .source_len = (uint8_t)text_len(ev->source, NX_DNSTAP_SOURCE_MAX),
	    .proto = (uint8_t)ev->proto,
	    .kind = (uint8_t)(ev->kind | (ev->cached ? NX_DNSTAP_REC_CACHED : 0)),
	    .query_us = ev->query_us,
	    .response_us = ev->response_us,
	    .action = ev->action,
	    .reason = ev->reason,
	};
	addr_put(ev->client, &h.family, &h.port, h.addr);
	addr_put(ev->server, &h.sfamily, &h.sport, h.saddr);
	uint8_t *p = r->buf + at;
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	/* memcpy from NULL is undefined even for 0 bytes: texts may be NULL */
	if (h.rule_len) {
		memcpy(p, ev->rule, h.rule_len);
	}
	p += h.rule_len;
	if (h.source_len) {
		memcpy(p, ev->source, h.source_len);
	}
	p += h.source_len;
	if (ev->msg_len) {
		memcpy(p, ev->msg, ev->msg_len);
	}
	r->tail = (at + need) % r->cap;
	r->used += need;
	return dropped;
}

size_t nx_dnstap_ring_take(struct nx_dnstap_ring *r, uint8_t *out, size_t cap,
			   struct nx_dnstap_event *ev, struct sockaddr_storage addrs[2])
{
	while (r->used > 0) {
		bool pad;
		size_t n = head_len(r, &pad);
		if (pad) {
			pop(r);
			continue;
		}
		if (nx_fails_assert(n + NX_DNSTAP_RULE_MAX + NX_DNSTAP_SOURCE_MAX + 2 <= cap &&
				    cap >= NX_DNSTAP_SCRATCH)) {
			pop(r); /* the writer's scratch is sized for the largest record */
			continue;
		}
		memcpy(out, r->buf + r->head, n);
		pop(r);
		struct nx_dnstap_rec h;
		memcpy(&h, out, sizeof(h));
		/* Texts are stored without their NUL: they are given one in place of the padding
		 * the copy keeps after them, moved to the end of the copy. */
		char *rule = (char *)out + n;
		memcpy(rule, out + sizeof(h), h.rule_len);
		rule[h.rule_len] = 0;
		char *source = rule + h.rule_len + 1;
		memcpy(source, out + sizeof(h) + h.rule_len, h.source_len);
		source[h.source_len] = 0;
		*ev = (struct nx_dnstap_event){
		    .kind = (enum nx_dnstap_kind)(h.kind & ~NX_DNSTAP_REC_CACHED),
		    .proto = (enum nx_dnstap_proto)h.proto,
		    .client = addr_get(h.family, h.port, h.addr, &addrs[0]),
		    .server = addr_get(h.sfamily, h.sport, h.saddr, &addrs[1]),
		    .query_us = h.query_us,
		    .response_us = h.response_us,
		    .action = h.action,
		    .reason = h.reason,
		    .rule = rule,
		    .source = source,
		    .cached = (h.kind & NX_DNSTAP_REC_CACHED) != 0,
		    .msg = out + sizeof(h) + h.rule_len + h.source_len,
		    .msg_len = h.msg_len,
		};
		return n;
	}
	return 0;
}
