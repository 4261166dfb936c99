/*
 * RFC 8484 (DNS over HTTPS) request handling: the URL path, the query string, base64url and
 * the POST body checks that turn one HTTP request into a DNS query or an HTTP status; and the
 * response freshness lifetime (cache-control: max-age). Transport-free: net/h2.c feeds it
 * what HTTP/2 gave it.
 *
 * Threading: pure functions over caller memory, any thread. Allocation: none. Ownership: every
 * pointer is borrowed for the duration of the call; nothing is kept.
 *
 * Decisions (documented here because a client sees them):
 *  - only GET and POST are served (RFC 8484 4.1); HEAD and every other method get 405 with
 *    `allow: GET, POST`: a HEAD answer would carry no DNS data, so resolving for it is waste;
 *  - the path is `/dns-query`, `/dns-query/` (same: no client id) or `/dns-query/<client-id>`,
 *    then an optional `?query`; anything else is 404. A client id is 1..NX_DOH_CLIENT_ID_MAX
 *    bytes of [A-Za-z0-9-], lower-cased on the way out (AdGuard Home's ClientID rule: letters,
 *    digits, hyphens, at most 64, compared without case); no percent-escapes in the path;
 *  - GET: exactly one `dns` parameter among any others (`&`-separated; names and values are
 *    percent-decoded); its value is unpadded base64url (RFC 4648 5) of the DNS message: padding,
 *    characters outside the alphabet, an impossible length (4n+1) or non-zero unused trailing
 *    bits (a non-canonical spelling) are 400; a message that does not fit `cap` is 414;
 *  - POST: content-type `application/dns-message` (case-insensitive, parameters allowed) else
 *    415; a body over min(cap, NX_DOH_MSG_MAX) is 413; the query string is ignored;
 *  - a message shorter than a DNS header is 400. Nothing else about the DNS bytes is checked
 *    here: the query pipeline parses them and answers FORMERR like every transport.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define NX_DOH_MSG_MAX 65535	/* RFC 8484 6: a DNS message is at most 65535 bytes */
#define NX_DOH_CLIENT_ID_MAX 64 /* AdGuard Home's ClientID length limit */

/* One HTTP request as the HTTP layer saw it. Strings are not NUL-terminated. */
struct nx_doh_req {
	const char *method;	  /* borrowed: the :method value, case-sensitive (RFC 9110 9.1) */
	size_t method_len;	  /* bytes in method */
	const char *path;	  /* borrowed: the :path value (origin-form: path + ?query) */
	size_t path_len;	  /* bytes in path */
	const char *content_type; /* borrowed: content-type header value, NULL when absent */
	size_t content_type_len;  /* bytes in content_type (0 when absent) */
	const uint8_t *body;	  /* borrowed: the request body (POST), NULL when none */
	size_t body_len;	  /* bytes in body */
};

/*
 * Decode unpadded base64url `in[0..len)` into `out`. Returns 0 with *out_len set,
 * NX_EMALFORMED (padding, a character outside [A-Za-z0-9-_], length 4n+1, non-zero unused
 * trailing bits) or NX_ETRUNC (the result does not fit cap; nothing past cap is written).
 */
int nx_doh_b64url_decode(const char *in, size_t len, uint8_t *out, size_t cap, size_t *out_len);

/*
 * Split a :path into its client id (lower-cased, NUL-terminated, "" when none) and the query
 * string after '?' (*query = NULL, *query_len = 0 when there is none). Returns 0 or
 * NX_ENOTFOUND (not a DoH path: the HTTP answer is 404).
 */
int nx_doh_path_parse(const char *path, size_t len, char client_id[NX_DOH_CLIENT_ID_MAX + 1],
		      const char **query, size_t *query_len);

/*
 * Find the one `dns` parameter of a query string and decode it (percent-decoding, then
 * base64url) into `out`. Returns 0 with *out_len set, NX_ENOTFOUND (no dns parameter),
 * NX_EMALFORMED (duplicate, empty or badly encoded value) or NX_ETRUNC (does not fit cap).
 */
int nx_doh_query_dns(const char *query, size_t len, uint8_t *out, size_t cap, size_t *out_len);

/*
 * One request -> an HTTP status. 200: `msg[0..*msg_len)` holds the DNS query and client_id
 * the path's client id ("" when none). Otherwise 400, 404, 405, 413, 414 or 415 (see the
 * decisions above) and *msg_len is 0. `msg` may be in->body itself (the POST copy is a
 * memmove). client_id is always NUL-terminated.
 */
int nx_doh_request(const struct nx_doh_req *in, uint8_t *msg, size_t cap, size_t *msg_len,
		   char client_id[NX_DOH_CLIENT_ID_MAX + 1]);

/*
 * Freshness lifetime of a DNS response for `cache-control: max-age` (RFC 8484 5.1): the
 * smallest TTL in the answer section; with an empty answer section, min(TTL, MINIMUM) of the
 * first SOA in the authority section (RFC 2308 5); 0 when neither exists or the message cannot
 * be walked. TTLs with the top bit set count as 0 (RFC 2181 8).
 */
uint32_t nx_doh_min_ttl(const uint8_t *msg, size_t len);
