/*
 * One event -> one packed dnstap protobuf (a CLIENT_QUERY or a CLIENT_RESPONSE). Runs on the
 * writer thread; packs into the caller's buffer (protobuf-c allocates nothing for a pack).
 */
#include "dnstap/dnstap.h"

#include <netinet/in.h>
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "dns/wire.h"
#include "dnstap/dnstap.pb-c.h"

#define HDR_LEN 12
#define FLAGS_KEPT 0x7910 /* opcode (0x7800), RD (0x0100), CD (0x0010): what the client set */
#define EXTRA_MAX (5 + 5 * 8 + 32 + 32 + NX_DNSTAP_RULE_MAX + NX_DNSTAP_SOURCE_MAX + 4)
#define ID_MAX NX_DNSTAP_ID_MAX
static_assert(NX_DNSTAP_FRAME_MAX >=
		  NX_DNSTAP_MSG_MAX + HDR_LEN + NX_DNS_NAME_MAX + 4 + EXTRA_MAX + 2 * ID_MAX + 256,
	      "a packed Dnstap fits NX_DNSTAP_FRAME_MAX: the message, the rebuilt query (a client "
	      "answer) or nothing more (a forwarder message: one wire message), extra, the ids and "
	      "under 256 bytes of tags, lengths, addresses and scalar fields");
#define QUERY_MAX (HDR_LEN + NX_DNS_NAME_MAX + 4)

int nx_dnstap_query_from_reply(const uint8_t *reply, size_t len, uint8_t *out, size_t cap)
{
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, reply, len);
	uint16_t id = nx_dns_rd_u16(&rd);
	uint16_t flags = nx_dns_rd_u16(&rd);
	uint16_t qdcount = nx_dns_rd_u16(&rd);
	nx_dns_rd_skip(&rd, 6);
	uint8_t name[NX_DNS_NAME_MAX];
	size_t nlen = nx_dns_rd_name(&rd, name);
	const uint8_t *tc = nx_dns_rd_bytes(&rd, 4); /* qtype, qclass */
	if (rd.err || qdcount == 0 || nlen == 0) {
		return 0;
	}
	if (cap < HDR_LEN + nlen + 4) {
		return NX_ETRUNC;
	}
	flags &= FLAGS_KEPT;
	const uint8_t hdr[HDR_LEN] = {id >> 8, id & 0xff, flags >> 8, flags & 0xff, 0, 1};
	memcpy(out, hdr, HDR_LEN);
	memcpy(out + HDR_LEN, name, nlen);
	memcpy(out + HDR_LEN + nlen, tc, 4);
	return (int)(HDR_LEN + nlen + 4);
}

static size_t append(char *buf, size_t pos, size_t cap, const char *s, size_t max)
{
	size_t n = NX_MIN(strnlen(s, max), cap - pos);
	memcpy(buf + pos, s, n);
	return pos + n;
}

/* "nxdns action=A ..." without printf: it was the writer's largest cost after protobuf. */
static size_t policy_text(const struct nx_dnstap_event *ev, char *buf, size_t cap)
{
	struct {
		const char *key, *val;
		size_t max;
	} f[] = {{" action=", ev->action, 32},
		 {" reason=", ev->reason, 32},
		 {" rule=", ev->rule, NX_DNSTAP_RULE_MAX},
		 {" source=", ev->source, NX_DNSTAP_SOURCE_MAX},
		 {" cached=", ev->cached ? "true" : NULL, 4}};
	size_t pos = append(buf, 0, cap, "nxdns", 5);
	for (size_t i = 0; i < NX_ARRAY_LEN(f); i++) {
		if (f[i].val && f[i].val[0]) {
			pos = append(buf, pos, cap, f[i].key, 8);
			pos = append(buf, pos, cap, f[i].val, f[i].max);
		}
	}
	return pos;
}

/* An address into the message's query_ or response_ fields; the family it has, or 0. */
static int put_addr(const struct sockaddr *sa, ProtobufCBinaryData *addr, protobuf_c_boolean *has_a,
		    uint32_t *port, protobuf_c_boolean *has_p)
{
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
		addr->data = (uint8_t *)&a->sin_addr; /* protobuf-c reads it only */
		addr->len = 4;
		*port = ntohs(a->sin_port);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
		addr->data = (uint8_t *)&a->sin6_addr;
		addr->len = 16;
		*port = ntohs(a->sin6_port);
	} else {
		return 0;
	}
	*has_a = *has_p = true;
	return sa->sa_family;
}

static const Dnstap__Message__Type types[][2] = {
    [NX_DNSTAP_CLIENT] = {DNSTAP__MESSAGE__TYPE__CLIENT_QUERY,
			  DNSTAP__MESSAGE__TYPE__CLIENT_RESPONSE},
    [NX_DNSTAP_FWD_QUERY] = {DNSTAP__MESSAGE__TYPE__FORWARDER_QUERY,
			     DNSTAP__MESSAGE__TYPE__FORWARDER_QUERY},
    [NX_DNSTAP_FWD_RESPONSE] = {DNSTAP__MESSAGE__TYPE__FORWARDER_RESPONSE,
				DNSTAP__MESSAGE__TYPE__FORWARDER_RESPONSE},
};

int nx_dnstap_encode(const struct nx_dnstap_event *ev, const struct nx_dnstap_frame_ids *ids,
		     bool response, uint8_t *out, size_t cap)
{
	Dnstap__Dnstap d = DNSTAP__DNSTAP__INIT;
	Dnstap__Message m = DNSTAP__MESSAGE__INIT;
	d.type = DNSTAP__DNSTAP__TYPE__MESSAGE;
	d.message = &m;
	if (ids && ids->identity) {
		d.has_identity = true;
		d.identity.data = (uint8_t *)ids->identity; /* protobuf-c reads it only */
		d.identity.len = strnlen(ids->identity, ID_MAX);
	}
	if (ids && ids->version) {
		d.has_version = true;
		d.version.data = (uint8_t *)ids->version;
		d.version.len = strnlen(ids->version, ID_MAX);
	}
	if (nx_fails_assert((unsigned)ev->kind < NX_ARRAY_LEN(types))) {
		return -EINVAL;
	}
	bool client = ev->kind == NX_DNSTAP_CLIENT;
	if (!client) {
		response = ev->kind == NX_DNSTAP_FWD_RESPONSE;
	}
	m.type = types[ev->kind][response];
	m.has_socket_protocol = true;
	m.socket_protocol = (Dnstap__SocketProtocol)ev->proto;
	int fam = put_addr(ev->client, &m.query_address, &m.has_query_address, &m.query_port,
			   &m.has_query_port);
	int sfam = put_addr(ev->server, &m.response_address, &m.has_response_address,
			    &m.response_port, &m.has_response_port);
	if (fam && sfam && fam != sfam) {
		/* one socket family per message: the client's wins */
		m.has_response_address = m.has_response_port = false;
	}
	if (fam || sfam) {
		m.has_socket_family = true;
		m.socket_family = (fam ? fam : sfam) == AF_INET ? DNSTAP__SOCKET_FAMILY__INET
								: DNSTAP__SOCKET_FAMILY__INET6;
	}
	m.has_query_time_sec = m.has_query_time_nsec = true;
	m.query_time_sec = (uint64_t)(ev->query_us / 1000000);
	m.query_time_nsec = (uint32_t)(ev->query_us % 1000000) * 1000;
	uint8_t q[QUERY_MAX];
	char extra[EXTRA_MAX];
	if (response) {
		m.has_response_time_sec = m.has_response_time_nsec = true;
		m.response_time_sec = (uint64_t)(ev->response_us / 1000000);
		m.response_time_nsec = (uint32_t)(ev->response_us % 1000000) * 1000;
		m.has_response_message = true;
		m.response_message.data = (uint8_t *)ev->msg;
		m.response_message.len = ev->msg_len;
		if (client) {
			d.has_extra = true;
			d.extra.len = policy_text(ev, extra, sizeof(extra));
			d.extra.data = (uint8_t *)extra;
		}
	} else if (!client) {
		m.has_query_message = true; /* our query as sent */
		m.query_message.data = (uint8_t *)ev->msg;
		m.query_message.len = ev->msg_len;
	} else {
		int qlen = nx_dnstap_query_from_reply(ev->msg, ev->msg_len, q, sizeof(q));
		if (qlen > 0) {
			m.has_query_message = true;
			m.query_message.data = q;
			m.query_message.len = (size_t)qlen;
		}
	}
	/* Sizing walks the whole message again: only when the buffer may be too small. */
	if (cap < NX_DNSTAP_FRAME_MAX && protobuf_c_message_get_packed_size(&d.base) > cap) {
		return NX_ETRUNC;
	}
	return (int)protobuf_c_message_pack(&d.base, out);
}
