/*
 * Admin authentication: the password (argon2id, set by `nxdns passwd` or the one-time setup
 * token), login sessions with CSRF tokens, API tokens, the per-address login limit, and the
 * check every route passes before its handler (nx_admin_authorize).
 *
 * Secrets: session ids, CSRF tokens and the setup token are 256 random bits from libsodium,
 * sent as base64url; API tokens are "nxdns_" + the same, stored as SHA-256 in admin.tokens.
 * Every comparison of a secret is constant-time (sodium_memcmp) over fixed-size decoded bytes,
 * and a lookup compares against every entry without stopping at a match.
 *
 * Sessions live in memory only (a fixed table, the oldest evicted when full and counted); each
 * ends at login + admin.session_ttl, at logout, at restart, or when the configured password
 * hash changes (checked on every request, so `nxdns passwd` + reload logs everybody out).
 *
 * Threading: control thread only (see admin.h). Memory: all in struct nx_admin.
 */
#include "admin/auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <gnutls/crypto.h>
#include <sodium.h>

#include "admin/impl.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"

#define TOKEN_PREFIX "nxdns_" /* lets secret scanners recognise a leaked token */

/* The whole auth state lives in struct nx_admin: ~16 KiB, charged with it to admin_http. */
_Static_assert(sizeof(struct nx_admin_auth_state) <= 20 * 1024, "admin auth state budget");
#define TOKEN_TEXT_MAX 128    /* bytes of a presented bearer token; ours are 49 */

/* ---- passwords ---------------------------------------------------------------------------- */

int nx_admin_password_check(const char *pw, size_t len, const char **why)
{
	if (len < NX_ADMIN_PASSWORD_MIN) {
		*why = "the password must have at least 8 bytes";
		return NX_EMALFORMED;
	}
	if (len > NX_ADMIN_PASSWORD_MAX) {
		*why = "the password must have at most 1024 bytes";
		return NX_EMALFORMED;
	}
	if (memchr(pw, '\0', len)) {
		*why = "the password must not contain a NUL byte";
		return NX_EMALFORMED;
	}
	return 0;
}

int nx_admin_password_hash(const char *pw, size_t len, char out[NX_ADMIN_PWHASH_MAX])
{
	const char *why;
	int rc = nx_admin_password_check(pw, len, &why);
	if (rc) {
		return rc;
	}
	if (sodium_init() < 0) {
		return -ENOMEM;
	}
	_Static_assert(NX_ADMIN_PWHASH_MAX == crypto_pwhash_STRBYTES, "hash string size");
	_Static_assert(NX_ADMIN_PWHASH_MEM >= crypto_pwhash_MEMLIMIT_MIN &&
			   NX_ADMIN_PWHASH_OPS >= crypto_pwhash_OPSLIMIT_MIN,
		       "argon2 limits within libsodium's range");
	if (crypto_pwhash_str_alg(out, pw, len, NX_ADMIN_PWHASH_OPS, NX_ADMIN_PWHASH_MEM,
				  crypto_pwhash_ALG_ARGON2ID13) != 0) {
		return -ENOMEM; /* the only documented failure: no memory for the 7 MiB */
	}
	return 0;
}

bool nx_admin_password_needs_rehash(const char *hash)
{
	/* needs_rehash compares the limits within the hash's own algorithm: an argon2i string
	 * with our limits would pass, so the algorithm is checked first. -1 (a string libsodium
	 * cannot read) cannot reach here after a verify that succeeded. */
	if (strncmp(hash, "$argon2id$", 10)) {
		return true;
	}
	return crypto_pwhash_str_needs_rehash(hash, NX_ADMIN_PWHASH_OPS, NX_ADMIN_PWHASH_MEM) == 1;
}

int nx_admin_password_set(const char *config_path, const char *pw, size_t len, char *err,
			  size_t errlen)
{
	char hash[NX_ADMIN_PWHASH_MAX];
	const char *why = "";
	int rc = nx_admin_password_check(pw, len, &why);
	if (!rc) {
		rc = nx_admin_password_hash(pw, len, hash);
		why = "cannot hash the password: out of memory";
	}
	if (rc) {
		snprintf(err, errlen, "%s", why);
		return rc;
	}
	/* A double-quoted YAML scalar: the hash is [A-Za-z0-9$=,+/-], nothing to escape. */
	char yaml[NX_ADMIN_PWHASH_MAX + 2];
	snprintf(yaml, sizeof(yaml), "\"%s\"", hash);
	rc = nx_conf_rewrite(config_path, "admin.password_hash", yaml, err, errlen);
	sodium_memzero(hash, sizeof(hash));
	return rc;
}

/* ---- TOTP (RFC 6238) --------------------------------------------------------------------- */

_Static_assert(sizeof(((struct nx_admin_auth_state *)0)->totp_pending) == NX_ADMIN_TOTP_KEY_BYTES,
	       "pending TOTP secret size");

uint32_t nx_admin_hotp(const uint8_t *key, size_t len, uint64_t counter, unsigned digits)
{
	uint8_t msg[8], mac[20];
	for (int i = 7; i >= 0; i--) {
		msg[i] = (uint8_t)counter;
		counter >>= 8;
	}
	/* libsodium has no HMAC-SHA-1; GnuTLS (linked for TLS) does */
	if (gnutls_hmac_fast(GNUTLS_MAC_SHA1, key, len, msg, sizeof(msg), mac) < 0) {
		return UINT32_MAX; /* never a valid code: it has more than 8 digits */
	}
	/* RFC 4226 5.3: dynamic truncation */
	unsigned off = mac[19] & 0x0f;
	uint32_t bin = ((uint32_t)(mac[off] & 0x7f) << 24) | ((uint32_t)mac[off + 1] << 16) |
		       ((uint32_t)mac[off + 2] << 8) | mac[off + 3];
	uint32_t mod = 1;
	for (unsigned i = 0; i < digits; i++) {
		mod *= 10;
	}
	sodium_memzero(mac, sizeof(mac));
	return bin % mod;
}

int nx_admin_totp_check(const uint8_t *key, size_t len, const char *code, uint64_t unix_s,
			uint64_t *last_step)
{
	if (!code || strlen(code) != NX_ADMIN_TOTP_DIGITS ||
	    strspn(code, "0123456789") != NX_ADMIN_TOTP_DIGITS) {
		return NX_EMALFORMED;
	}
	uint64_t now = unix_s / NX_ADMIN_TOTP_STEP_S;
	uint64_t matched = 0;
	bool found = false;
	/* every candidate is computed and compared, whatever matches first */
	for (int d = -NX_ADMIN_TOTP_SKEW; d <= NX_ADMIN_TOTP_SKEW; d++) {
		if (d < 0 && now < (uint64_t)-d) {
			continue;
		}
		uint64_t step = now + (uint64_t)(int64_t)d;
		char want[NX_ADMIN_TOTP_DIGITS + 1];
		snprintf(want, sizeof(want), "%0*u", NX_ADMIN_TOTP_DIGITS,
			 (unsigned)nx_admin_hotp(key, len, step, NX_ADMIN_TOTP_DIGITS));
		if (sodium_memcmp(want, code, NX_ADMIN_TOTP_DIGITS) == 0) {
			matched = step;
			found = true;
		}
		sodium_memzero(want, sizeof(want));
	}
	if (!found) {
		return NX_ENOTFOUND;
	}
	if (matched < *last_step) {
		return -EALREADY;
	}
	*last_step = matched + 1;
	return 0;
}

static const char b32_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

size_t nx_admin_base32_encode(const uint8_t *in, size_t n, char *out, size_t cap)
{
	size_t need = (n * 8 + 4) / 5;
	if (cap < need + 1) {
		return 0;
	}
	size_t o = 0;
	uint32_t buf = 0;
	int bits = 0;
	for (size_t i = 0; i < n; i++) {
		buf = (buf << 8) | in[i];
		bits += 8;
		while (bits >= 5) {
			out[o++] = b32_alphabet[(buf >> (bits - 5)) & 31];
			bits -= 5;
		}
	}
	if (bits > 0) {
		out[o++] = b32_alphabet[(buf << (5 - bits)) & 31];
	}
	out[o] = '\0';
	return o;
}

int nx_admin_base32_decode(const char *in, uint8_t *out, size_t cap, size_t *n)
{
	uint32_t buf = 0;
	int bits = 0;
	size_t o = 0;
	for (const char *p = in; *p; p++) {
		const char *c = strchr(b32_alphabet, *p);
		if (!c || !*p) {
			return NX_EMALFORMED;
		}
		buf = (buf << 5) | (uint32_t)(c - b32_alphabet);
		bits += 5;
		if (bits >= 8) {
			if (o == cap) {
				return NX_EMALFORMED;
			}
			out[o++] = (uint8_t)(buf >> (bits - 8));
			bits -= 8;
		}
	}
	*n = o;
	return 0;
}

/* ---- helpers ------------------------------------------------------------------------------ */

const struct nx_conf *nx_admin_conf(const struct nx_admin *a)
{
	return a->hooks.conf ? a->hooks.conf(a->hooks.ud) : NULL;
}

uint64_t nx_admin_now_ms(const struct nx_admin *a)
{
	return a->hooks.now_ms ? a->hooks.now_ms(a->hooks.ud) : nx_now_mono_ms();
}

static void secret_text(const uint8_t bin[NX_ADMIN_SECRET_BYTES], char out[NX_ADMIN_SECRET_TEXT])
{
	_Static_assert(NX_ADMIN_SECRET_TEXT ==
			   sodium_base64_ENCODED_LEN(NX_ADMIN_SECRET_BYTES,
						     sodium_base64_VARIANT_URLSAFE_NO_PADDING),
		       "secret text size");
	sodium_bin2base64(out, NX_ADMIN_SECRET_TEXT, bin, NX_ADMIN_SECRET_BYTES,
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

/* Decode a presented secret; false unless it is exactly one of ours in form. */
static bool secret_parse(const char *text, uint8_t out[NX_ADMIN_SECRET_BYTES])
{
	size_t n = text ? strlen(text) : 0, bin_len = 0;
	if (n != NX_ADMIN_SECRET_TEXT - 1) {
		return false;
	}
	return sodium_base642bin(out, NX_ADMIN_SECRET_BYTES, text, n, NULL, &bin_len, NULL,
				 sodium_base64_VARIANT_URLSAFE_NO_PADDING) == 0 &&
	       bin_len == NX_ADMIN_SECRET_BYTES;
}

/* The limiter's key: an IPv4 address, or the /64 of an IPv6 one (a host owns its /64). */
static bool client_key(const struct nx_admin_req *req, uint8_t key[16], uint8_t *family)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	memset(key, 0, 16);
	if (!sa) {
		return false;
	}
	if (sa->sa_family == AF_INET) {
		memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		*family = AF_INET;
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (!memcmp(b, mapped, 12)) {
			memcpy(key, b + 12, 4);
			*family = AF_INET;
		} else {
			memcpy(key, b, 8);
			*family = AF_INET6;
		}
		return true;
	}
	return false;
}

/* ---- the login limiter -------------------------------------------------------------------- */

static struct nx_admin_login_track *track_find(struct nx_admin_auth_state *au,
					       const uint8_t key[16], uint8_t family)
{
	for (size_t i = 0; i < NX_ADMIN_LOGIN_TRACK; i++) {
		struct nx_admin_login_track *t = &au->track[i];
		if (t->used && t->family == family && !memcmp(t->addr, key, 16)) {
			return t;
		}
	}
	return NULL;
}

/* Seconds until the client may try again, 0 when it may now. */
static unsigned limited_for(struct nx_admin *a, const struct nx_admin_req *req, uint64_t now)
{
	uint8_t key[16], family = 0;
	if (!client_key(req, key, &family)) {
		return 0;
	}
	struct nx_admin_login_track *t = track_find(&a->auth, key, family);
	if (!t || t->failures < NX_ADMIN_LOGIN_FAILS ||
	    now - t->window_ms >= NX_ADMIN_LOGIN_WINDOW_MS) {
		return 0;
	}
	uint64_t left = t->window_ms + NX_ADMIN_LOGIN_WINDOW_MS - now;
	return (unsigned)((left + 999) / 1000);
}

static void track_failure(struct nx_admin *a, const struct nx_admin_req *req, uint64_t now)
{
	uint8_t key[16], family = 0;
	a->ctr[NX_ADMIN_CTR_LOGIN_FAILED]++;
	if (!client_key(req, key, &family)) {
		return;
	}
	struct nx_admin_auth_state *au = &a->auth;
	struct nx_admin_login_track *t = track_find(au, key, family);
	if (!t) {
		/* a free slot, else the least recently failing address */
		for (size_t i = 0; i < NX_ADMIN_LOGIN_TRACK; i++) {
			struct nx_admin_login_track *c = &au->track[i];
			if (!c->used) {
				t = c;
				break;
			}
			if (!t || c->last_ms < t->last_ms) {
				t = c;
			}
		}
		if (t->used) {
			a->ctr[NX_ADMIN_CTR_LOGIN_TRACK_EVICTED]++;
		}
		memset(t, 0, sizeof(*t));
		t->used = true;
		t->family = family;
		memcpy(t->addr, key, 16);
		t->window_ms = now;
	}
	if (now - t->window_ms >= NX_ADMIN_LOGIN_WINDOW_MS) {
		t->window_ms = now;
		t->failures = 0;
	}
	if (t->failures < UINT8_MAX) {
		t->failures++;
	}
	t->last_ms = now;
	if (t->failures == NX_ADMIN_LOGIN_FAILS) {
		/* once per address and window: what a log scraper (fail2ban) acts on */
		char addr[INET6_ADDRSTRLEN] = "";
		const union MHD_ConnectionInfo *ci =
		    MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		const struct sockaddr *sa = ci ? ci->client_addr : NULL;
		if (sa && sa->sa_family == AF_INET) {
			inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, addr,
				  sizeof(addr));
		} else if (sa && sa->sa_family == AF_INET6) {
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, addr,
				  sizeof(addr));
		}
		nx_log_client(NX_LOG_WARN, "admin", addr[0] ? addr : NULL,
			      "login: client %s refused after %d wrong passwords, for up to %d s",
			      addr[0] ? addr : "?", NX_ADMIN_LOGIN_FAILS,
			      NX_ADMIN_LOGIN_WINDOW_MS / 1000);
	}
}

static void track_success(struct nx_admin *a, const struct nx_admin_req *req)
{
	uint8_t key[16], family = 0;
	if (client_key(req, key, &family)) {
		struct nx_admin_login_track *t = track_find(&a->auth, key, family);
		if (t) {
			memset(t, 0, sizeof(*t));
		}
	}
}

/* 429 with Retry-After when the client is over its limit; true when answered. */
static bool refuse_limited(struct nx_admin *a, struct nx_admin_req *req, uint64_t now)
{
	unsigned wait = limited_for(a, req, now);
	if (!wait) {
		return false;
	}
	a->ctr[NX_ADMIN_CTR_LOGIN_LIMITED]++;
	req->retry_after_s = wait;
	nx_admin_reply_error(req, 429, "rate_limited", NULL,
			     "too many failed logins from this address: try again in %u s", wait);
	return true;
}

/* ---- sessions ----------------------------------------------------------------------------- */

static void session_end(struct nx_admin_session *s)
{
	sodium_memzero(s, sizeof(*s));
}

static void sessions_end_all(struct nx_admin_auth_state *au)
{
	for (size_t i = 0; i < NX_ADMIN_MAX_SESSIONS; i++) {
		session_end(&au->sessions[i]);
	}
}

static int session_new(struct nx_admin *a, uint64_t now, unsigned ttl_s)
{
	struct nx_admin_auth_state *au = &a->auth;
	int slot = -1;
	for (int i = 0; i < NX_ADMIN_MAX_SESSIONS; i++) {
		struct nx_admin_session *s = &au->sessions[i];
		if (!s->used || now >= s->expires_ms) {
			slot = i;
			break;
		}
		if (slot < 0 || s->created_ms < au->sessions[slot].created_ms) {
			slot = i;
		}
	}
	struct nx_admin_session *s = &au->sessions[slot];
	if (s->used && now < s->expires_ms) {
		a->ctr[NX_ADMIN_CTR_SESSIONS_EVICTED]++;
	}
	session_end(s);
	randombytes_buf(s->id, sizeof(s->id));
	randombytes_buf(s->csrf, sizeof(s->csrf));
	s->created_ms = now;
	s->expires_ms = now + (uint64_t)ttl_s * 1000;
	s->used = true;
	return slot;
}

/* The live session a cookie names: its index, or -1 (*expired when it named an expired one). */
static int session_find(struct nx_admin *a, const char *cookie, uint64_t now, bool *expired)
{
	uint8_t id[NX_ADMIN_SECRET_BYTES];
	*expired = false;
	if (!secret_parse(cookie, id)) {
		return -1;
	}
	int found = -1;
	for (int i = 0; i < NX_ADMIN_MAX_SESSIONS; i++) {
		const struct nx_admin_session *s = &a->auth.sessions[i];
		if (sodium_memcmp(s->id, id, sizeof(id)) == 0 && s->used) {
			found = i;
		}
	}
	if (found >= 0 && now >= a->auth.sessions[found].expires_ms) {
		session_end(&a->auth.sessions[found]);
		*expired = true;
		found = -1;
	}
	return found;
}

static void session_cookie(struct nx_admin *a, struct nx_admin_req *req, int idx, unsigned ttl_s)
{
	char id[NX_ADMIN_SECRET_TEXT] = "";
	if (idx >= 0) {
		secret_text(a->auth.sessions[idx].id, id);
	}
	/* SameSite=Strict: never sent on a cross-site request, so no CSRF through the browser;
	 * the X-CSRF-Token check covers the rest. HttpOnly: page scripts cannot read it. */
	snprintf(req->set_cookie, sizeof(req->set_cookie),
		 NX_ADMIN_SESSION_COOKIE "=%s; Path=/; Max-Age=%u; HttpOnly; SameSite=Strict%s", id,
		 idx >= 0 ? ttl_s : 0, a->tls ? "; Secure" : "");
	sodium_memzero(id, sizeof(id));
}

/* ---- following the config ----------------------------------------------------------------- */

/*
 * Compare the configured password hash with the one the sessions were opened under: a change
 * ends them all. Without a hash, keep a setup token (generated and logged once); with one,
 * forget it.
 */
static void auth_sync(struct nx_admin *a)
{
	struct nx_admin_auth_state *au = &a->auth;
	const struct nx_conf *c = nx_admin_conf(a);
	const char *h = c ? c->admin_password_hash : NULL;
	uint8_t fp[sizeof(au->pw_fp)] = {0};
	if (h) {
		crypto_generichash(fp, sizeof(fp), (const unsigned char *)h, strlen(h), NULL, 0);
	}
	bool changed =
	    (h != NULL) != au->have_pw || (h && sodium_memcmp(fp, au->pw_fp, sizeof(fp)));
	if (changed) {
		if (au->synced) {
			nx_log(NX_LOG_INFO, "admin",
			       "the admin password changed: every session is ended");
		}
		sessions_end_all(au);
		au->have_pw = h != NULL;
		memcpy(au->pw_fp, fp, sizeof(fp));
	}
	au->synced = true;
	if (h && au->setup_token[0]) {
		sodium_memzero(au->setup_token, sizeof(au->setup_token));
	} else if (!h && c && !au->setup_token[0]) {
		uint8_t bin[NX_ADMIN_SECRET_BYTES];
		randombytes_buf(bin, sizeof(bin));
		secret_text(bin, au->setup_token);
		sodium_memzero(bin, sizeof(bin));
		/* WARN so that it shows at every log level but error: it is the way in. */
		nx_log(NX_LOG_WARN, "admin",
		       "admin setup token: %s (no admin password yet: POST it with a new password "
		       "to /api/auth/setup, or run `nxdns passwd --config %s`)",
		       au->setup_token, c->path);
	}
}

int nx_admin_auth_init(struct nx_admin *a)
{
	if (sodium_init() < 0) {
		nx_log(NX_LOG_ERR, "admin", "libsodium failed to initialise");
		return -ENOMEM;
	}
	auth_sync(a);
	return 0;
}

void nx_admin_auth_deinit(struct nx_admin *a)
{
	sodium_memzero(&a->auth, sizeof(a->auth));
}

/* ---- the check before every handler ------------------------------------------------------- */

static bool is_safe_method(const char *m)
{
	return !strcmp(m, "GET") || !strcmp(m, "HEAD");
}

/* Index of the API token presented as "Bearer <token>", -1 when none matches. */
static int bearer_token(const struct nx_conf *c, const char *value)
{
	if (strncasecmp(value, "Bearer ", 7)) {
		return -1;
	}
	const char *tok = value + 7;
	while (*tok == ' ') {
		tok++;
	}
	size_t n = strlen(tok);
	if (!c || n == 0 || n > TOKEN_TEXT_MAX) {
		return -1;
	}
	uint8_t h[NX_CONF_TOKEN_HASH_BYTES];
	crypto_hash_sha256(h, (const unsigned char *)tok, n);
	int found = -1;
	for (size_t i = 0; i < c->n_admin_tokens; i++) {
		if (sodium_memcmp(c->admin_tokens[i].hash, h, sizeof(h)) == 0) {
			found = (int)i;
		}
	}
	return found;
}

static bool refuse(struct nx_admin_req *req, enum nx_admin_counter ctr, unsigned status,
		   const char *error, const char *msg)
{
	req->admin->ctr[ctr]++;
	nx_admin_reply_error(req, status, error, NULL, "%s", msg);
	return false;
}

bool nx_admin_authorize(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	req->via = NX_ADMIN_VIA_NONE;
	req->session = -1;
	req->token = -1;
	auth_sync(a);
	const struct nx_conf *c = nx_admin_conf(a);
	enum nx_admin_auth need = req->route->auth;
	if (need == NX_ADMIN_AUTH_NONE ||
	    (need == NX_ADMIN_AUTH_METRICS && (!c || !c->admin_metrics_auth))) {
		return true;
	}
	const char *authz = nx_admin_req_header(req, MHD_HTTP_HEADER_AUTHORIZATION);
	if (authz) {
		int t = bearer_token(c, authz);
		if (t < 0) {
			return refuse(req, NX_ADMIN_CTR_AUTH_BAD_TOKEN, 401, "unauthorized",
				      "the API token is not valid (Authorization: Bearer <token>)");
		}
		/* A read token (a replica's sync.token) changes nothing: every route that is not
		 * GET/HEAD is a change, so the method alone decides, with no per-route list to
		 * forget a new write route in. */
		if (c->admin_tokens[t].read_only && !is_safe_method(req->method)) {
			return refuse(req, NX_ADMIN_CTR_AUTH_READ_ONLY, 403, "read_only_token",
				      "this API token has scope read: it may only GET");
		}
		/* A backup holds the admin's credentials (password hash, TOTP secret): a token
		 * kept on a replica must not be a way to them. */
		if (c->admin_tokens[t].read_only && !strcmp(req->route->path, "/api/backup")) {
			return refuse(req, NX_ADMIN_CTR_AUTH_READ_ONLY, 403, "read_only_token",
				      "this API token has scope read: backups hold the admin's "
				      "credentials and need an admin token or a session");
		}
		req->via = NX_ADMIN_VIA_TOKEN;
		req->token = t;
		return true;
	}
	const char *cookie =
	    MHD_lookup_connection_value(req->conn, MHD_COOKIE_KIND, NX_ADMIN_SESSION_COOKIE);
	if (!cookie) {
		if (c && !c->admin_password_hash) {
			return refuse(req, NX_ADMIN_CTR_AUTH_NONE, 401, "setup_required",
				      "no admin password is set: use the setup token from the log "
				      "with POST /api/auth/setup, or `nxdns passwd`");
		}
		return refuse(req, NX_ADMIN_CTR_AUTH_NONE, 401, "unauthorized",
			      "log in (POST /api/auth/login) or send an API token");
	}
	bool expired;
	int idx = session_find(a, cookie, nx_admin_now_ms(a), &expired);
	if (idx < 0) {
		return refuse(req,
			      expired ? NX_ADMIN_CTR_AUTH_EXPIRED : NX_ADMIN_CTR_AUTH_BAD_SESSION,
			      401, expired ? "session_expired" : "unauthorized",
			      expired ? "the session has expired: log in again"
				      : "unknown session: log in again");
	}
	if (!is_safe_method(req->method) || need == NX_ADMIN_AUTH_CSRF) {
		const char *sent = nx_admin_req_header(req, "X-CSRF-Token");
		uint8_t csrf[NX_ADMIN_SECRET_BYTES];
		if (!sent) {
			return refuse(req, NX_ADMIN_CTR_AUTH_CSRF, 403, "csrf_required",
				      "state-changing requests need the X-CSRF-Token header "
				      "(from the login answer)");
		}
		if (!secret_parse(sent, csrf) ||
		    sodium_memcmp(csrf, a->auth.sessions[idx].csrf, sizeof(csrf)) != 0) {
			return refuse(req, NX_ADMIN_CTR_AUTH_CSRF, 403, "csrf_invalid",
				      "the X-CSRF-Token header does not match this session");
		}
	}
	req->via = NX_ADMIN_VIA_SESSION;
	req->session = idx;
	return true;
}

/* ---- /api/auth routes --------------------------------------------------------------------- */

/* 200 {"csrf", "expires_in"} with a new session's cookie. */
static int reply_new_session(struct nx_admin_req *req, const struct nx_conf *c)
{
	struct nx_admin *a = req->admin;
	int idx = session_new(a, nx_admin_now_ms(a), c->admin_session_ttl_s);
	char csrf[NX_ADMIN_SECRET_TEXT];
	secret_text(a->auth.sessions[idx].csrf, csrf);
	session_cookie(a, req, idx, c->admin_session_ttl_s);
	a->ctr[NX_ADMIN_CTR_LOGIN_OK]++;
	json_t *o =
	    json_pack("{s:s, s:I}", "csrf", csrf, "expires_in", (json_int_t)c->admin_session_ttl_s);
	sodium_memzero(csrf, sizeof(csrf));
	return nx_admin_reply_json(req, 200, o);
}

int nx_admin_handle_auth_status(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	auth_sync(a);
	const struct nx_conf *c = nx_admin_conf(a);
	const char *cookie =
	    MHD_lookup_connection_value(req->conn, MHD_COOKIE_KIND, NX_ADMIN_SESSION_COOKIE);
	bool expired;
	int idx = cookie ? session_find(a, cookie, nx_admin_now_ms(a), &expired) : -1;
	json_t *o =
	    json_pack("{s:b, s:b, s:b, s:b}", "setup_required", c && !c->admin_password_hash,
		      "authenticated", idx >= 0, "tls", a->tls, "totp", c && c->admin_totp_secret);
	if (o && idx >= 0) {
		/* A reloaded page gets its CSRF token back: the cookie is SameSite=Strict and
		 * this answer is not readable cross-origin, so only our own pages see it. */
		char csrf[NX_ADMIN_SECRET_TEXT];
		secret_text(a->auth.sessions[idx].csrf, csrf);
		json_object_set_new(o, "csrf", json_string(csrf));
		sodium_memzero(csrf, sizeof(csrf));
	}
	return nx_admin_reply_json(req, 200, o);
}

/*
 * Check a TOTP code against a base32 secret; on refusal answer (401 for a login, 400 for the
 * enrolment routes' `code`), count it, and return true. A refused login code counts as a
 * failed login for the limiter: a right password with a wrong code is still a guess.
 */
static bool refuse_totp(struct nx_admin *a, struct nx_admin_req *req, const char *secret_b32,
			const char *code, const char *field, uint64_t now_ms)
{
	uint8_t key[NX_ADMIN_TOTP_KEY_MAX];
	size_t n = 0;
	bool login = !strcmp(field, "totp");
	int st = login ? 401 : 400;
	int rc = nx_admin_base32_decode(secret_b32, key, sizeof(key), &n);
	if (rc) {
		nx_admin_reply_error(req, 500, "totp_secret_invalid", NULL,
				     "admin.totp_secret does not decode as base32");
		return true;
	}
	if (!code || !*code) {
		rc = NX_EMALFORMED;
		a->ctr[NX_ADMIN_CTR_TOTP_MISSING]++;
		nx_admin_reply_error(req, st, "totp_required", field,
				     "a second factor is enrolled: send the %d-digit code from the "
				     "authenticator as `%s`",
				     NX_ADMIN_TOTP_DIGITS, field);
	} else {
		rc = nx_admin_totp_check(key, n, code, (uint64_t)time(NULL),
					 &a->auth.totp_last_step);
		if (rc == -EALREADY) {
			a->ctr[NX_ADMIN_CTR_TOTP_REPLAYED]++;
			nx_admin_reply_error(req, st, "totp_replayed", field,
					     "this code was used already: wait for the next one");
		} else if (rc) {
			a->ctr[NX_ADMIN_CTR_TOTP_INVALID]++;
			nx_admin_reply_error(req, st, "invalid_totp", field,
					     "wrong code (is the clock of this server or of the "
					     "authenticator off?)");
		}
	}
	sodium_memzero(key, sizeof(key));
	if (rc && login) {
		track_failure(a, req, now_ms);
	}
	return rc != 0;
}

/*
 * After a successful login with a hash made under other limits (the 64 MiB ones before
 * issue 16), store the password again under ours, so the next login's peak is 7 MiB. Sessions
 * stay: the password did not change, so the fingerprint they follow moves to the new hash
 * without ending them. A failure is logged and the login goes on with the old hash. Returns
 * the config in effect afterwards (NULL only if it disappeared).
 */
static const struct nx_conf *rehash(struct nx_admin *a, const struct nx_conf *c, const char *pw,
				    size_t len)
{
	if (!nx_admin_password_needs_rehash(c->admin_password_hash) || !a->hooks.reload ||
	    c->path[0] == '<') {
		return c;
	}
	char path[4096], err[NX_CONF_ERR_MAX];
	snprintf(path, sizeof(path), "%s", c->path);
	int rc = nx_admin_password_set(path, pw, len, err, sizeof(err));
	if (!rc) {
		rc = a->hooks.reload(a->hooks.ud, err, sizeof(err));
	}
	if (rc) {
		a->ctr[NX_ADMIN_CTR_REHASH_FAILED]++;
		nx_log(NX_LOG_WARN, "admin",
		       "login: cannot store the password under the new argon2 limits: %s", err);
		auth_sync(a); /* a stored hash whose reload failed still moves the sessions */
		return nx_admin_conf(a);
	}
	c = nx_admin_conf(a);
	const char *h = c ? c->admin_password_hash : NULL;
	if (h) {
		crypto_generichash(a->auth.pw_fp, sizeof(a->auth.pw_fp), (const unsigned char *)h,
				   strlen(h), NULL, 0);
		a->auth.have_pw = true;
	}
	a->ctr[NX_ADMIN_CTR_REHASHED]++;
	nx_log(NX_LOG_INFO, "admin", "admin password rehashed with argon2id m=%u KiB t=%u",
	       NX_ADMIN_PWHASH_MEM / 1024, NX_ADMIN_PWHASH_OPS);
	return c;
}

int nx_admin_handle_login(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	uint64_t now = nx_admin_now_ms(a);
	if (refuse_limited(a, req, now)) {
		return 0;
	}
	static const struct nx_admin_field fields[] = {
	    {"password", JSON_STRING, true}, {"totp", JSON_STRING, false}, {NULL}};
	json_t *vals[2];
	json_t *body = nx_admin_req_json(req, fields, vals);
	if (!body) {
		return 0;
	}
	const struct nx_conf *c = nx_admin_conf(a);
	int rc;
	if (!c) {
		rc = nx_admin_reply_error(req, 503, "not_configured", NULL,
					  "the server has no configuration to log in against");
	} else if (!c->admin_password_hash) {
		rc = nx_admin_reply_error(req, 409, "setup_required", NULL,
					  "no admin password is set: use POST /api/auth/setup with "
					  "the setup token from the log, or `nxdns passwd`");
	} else if (crypto_pwhash_str_verify(c->admin_password_hash, json_string_value(vals[0]),
					    json_string_length(vals[0])) != 0) {
		/* ~100-300 ms of argon2 on this thread; the limiter bounds how often */
		track_failure(a, req, now);
		rc = nx_admin_reply_error(req, 401, "invalid_password", "password",
					  "wrong password");
	} else if (c->admin_totp_secret &&
		   refuse_totp(a, req, c->admin_totp_secret,
			       vals[1] ? json_string_value(vals[1]) : NULL, "totp", now)) {
		rc = 0; /* answered */
	} else {
		track_success(a, req);
		c = rehash(a, c, json_string_value(vals[0]), json_string_length(vals[0]));
		rc = c ? reply_new_session(req, c)
		       : nx_admin_reply_error(req, 503, "not_configured", NULL,
					      "the configuration went away during the login");
	}
	json_decref(body);
	return rc;
}

int nx_admin_handle_logout(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	if (req->via == NX_ADMIN_VIA_SESSION && req->session >= 0) {
		session_end(&a->auth.sessions[req->session]);
		session_cookie(a, req, -1, 0); /* the browser drops it */
	}
	return nx_admin_reply_json(
	    req, 200, json_pack("{s:b}", "logged_out", req->via == NX_ADMIN_VIA_SESSION));
}

int nx_admin_handle_setup(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	uint64_t now = nx_admin_now_ms(a);
	if (refuse_limited(a, req, now)) {
		return 0;
	}
	static const struct nx_admin_field fields[] = {
	    {"token", JSON_STRING, true}, {"password", JSON_STRING, true}, {NULL}};
	json_t *vals[2];
	json_t *body = nx_admin_req_json(req, fields, vals);
	if (!body) {
		return 0;
	}
	auth_sync(a);
	const struct nx_conf *c = nx_admin_conf(a);
	uint8_t want[NX_ADMIN_SECRET_BYTES], got[NX_ADMIN_SECRET_BYTES];
	const char *pw = json_string_value(vals[1]);
	size_t pw_len = json_string_length(vals[1]);
	const char *why = "";
	char path[4096];
	char err[NX_CONF_ERR_MAX];
	int rc = 0;
	if (!c) {
		rc = nx_admin_reply_error(req, 503, "not_configured", NULL,
					  "the server has no configuration file to set up");
		goto out;
	}
	if (c->admin_password_hash) {
		rc = nx_admin_reply_error(req, 409, "already_set", NULL,
					  "the admin password is already set: log in instead");
		goto out;
	}
	if (!secret_parse(a->auth.setup_token, want) ||
	    !secret_parse(json_string_value(vals[0]), got) ||
	    sodium_memcmp(want, got, sizeof(want)) != 0) {
		track_failure(a, req, now);
		rc = nx_admin_reply_error(req, 401, "invalid_token", "token",
					  "wrong setup token (it is in the server's log)");
		goto out;
	}
	if (nx_admin_password_check(pw, pw_len, &why)) {
		rc = nx_admin_reply_error(req, 400, "bad_request", "password", "%s", why);
		goto out;
	}
	if (!a->hooks.reload || c->path[0] == '<') {
		rc = nx_admin_reply_error(req, 503, "not_configured", NULL,
					  "the server cannot rewrite its configuration file");
		goto out;
	}
	snprintf(path, sizeof(path), "%s", c->path);
	rc = nx_admin_password_set(path, pw, pw_len, err, sizeof(err));
	if (rc) {
		nx_log(NX_LOG_WARN, "admin", "setup: cannot store the password: %s", err);
		rc = nx_admin_reply_error(req, 500, "write_failed", NULL, "%s", err);
		goto out;
	}
	rc = a->hooks.reload(a->hooks.ud, err, sizeof(err));
	if (rc) {
		nx_log(NX_LOG_WARN, "admin", "setup: reload failed: %s", err);
		rc = nx_admin_reply_error(req, 500, "reload_failed", NULL,
					  "the password is stored but the reload failed: %s", err);
		goto out;
	}
	auth_sync(a); /* the new hash: the token is gone, sessions start from here */
	c = nx_admin_conf(a);
	if (!c || !c->admin_password_hash) {
		rc = nx_admin_reply_error(req, 500, "reload_failed", NULL,
					  "the reloaded configuration has no password");
		goto out;
	}
	nx_log(NX_LOG_INFO, "admin", "admin password set through the setup token");
	track_success(a, req);
	rc = reply_new_session(req, c);
out:
	sodium_memzero(want, sizeof(want));
	sodium_memzero(got, sizeof(got));
	json_decref(body);
	return rc;
}

/* ---- API tokens --------------------------------------------------------------------------- */

int nx_admin_handle_tokens_list(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_conf(req->admin);
	json_t *list = json_array();
	for (size_t i = 0; c && list && i < c->n_admin_tokens; i++) {
		json_array_append_new(list,
				      json_pack("{s:s, s:I, s:s}", "name", c->admin_tokens[i].name,
						"created", (json_int_t)c->admin_tokens[i].created,
						"scope", c->admin_tokens[i].read_only ? "read"
										      : "admin"));
	}
	return nx_admin_reply_json(req, 200, json_pack("{s:o}", "tokens", list));
}

/*
 * admin.tokens as YAML flow text: the current tokens except `skip` (NULL: none), plus `add`
 * (NULL: none). Names are double-quoted: "null" or "true" are valid names, not YAML values.
 */
static char *tokens_yaml(const struct nx_conf *c, const char *skip, const char *add_name,
			 const uint8_t *add_hash, unsigned add_created, bool add_read_only,
			 size_t *cap)
{
	*cap = (c->n_admin_tokens + 1) * (NX_CONF_NAME_MAX + 2 * NX_CONF_TOKEN_HASH_BYTES + 80) + 4;
	char *y = nx_mem_alloc(NX_OWNER_admin_http, *cap);
	if (!y) {
		return NULL;
	}
	size_t n = 0;
	y[n++] = '[';
	for (size_t i = 0; i <= c->n_admin_tokens; i++) {
		const char *name;
		const uint8_t *hash;
		unsigned created;
		bool read_only;
		if (i < c->n_admin_tokens) {
			name = c->admin_tokens[i].name;
			hash = c->admin_tokens[i].hash;
			created = c->admin_tokens[i].created;
			read_only = c->admin_tokens[i].read_only;
			if (skip && !strcmp(name, skip)) {
				continue;
			}
		} else if (add_name) {
			name = add_name;
			hash = add_hash;
			created = add_created;
			read_only = add_read_only;
		} else {
			break;
		}
		char hex[2 * NX_CONF_TOKEN_HASH_BYTES + 1];
		sodium_bin2hex(hex, sizeof(hex), hash, NX_CONF_TOKEN_HASH_BYTES);
		n +=
		    (size_t)snprintf(y + n, *cap - n,
				     "%s{name: \"%s\", hash: \"%s\", created: %u%s}",
				     n > 1 ? ", " : "", name, hex, created,
				     read_only ? ", scope: read" : "");
	}
	snprintf(y + n, *cap - n, "]");
	return y;
}

static bool token_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > NX_CONF_NAME_MAX || s[0] == '_' || s[0] == '-') {
		return false;
	}
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

int nx_admin_handle_tokens_create(struct nx_admin_req *req)
{
	static const struct nx_admin_field fields[] = {
	    {"name", JSON_STRING, true}, {"scope", JSON_STRING, false}, {NULL}};
	json_t *vals[2];
	json_t *body = nx_admin_req_json(req, fields, vals);
	if (!body) {
		return 0;
	}
	const struct nx_conf *c = nx_admin_conf(req->admin);
	char name[NX_CONF_NAME_MAX + 1];
	snprintf(name, sizeof(name), "%s", json_string_value(vals[0]));
	bool name_ok = token_name_ok(json_string_value(vals[0]));
	const char *scope = vals[1] ? json_string_value(vals[1]) : "admin";
	bool scope_ok = !strcmp(scope, "admin") || !strcmp(scope, "read");
	bool read_only = !strcmp(scope, "read");
	json_decref(body);
	if (!name_ok) {
		return nx_admin_reply_error(req, 400, "bad_request", "name",
					    "a token name is 1..64 of a-z, 0-9, '_', '-', starting "
					    "with a letter or digit");
	}
	if (!scope_ok) {
		return nx_admin_reply_error(req, 400, "bad_request", "scope",
					    "scope is admin (every route) or read (GET routes "
					    "only)");
	}
	if (!c) {
		return nx_admin_reply_error(req, 503, "not_configured", NULL, "no configuration");
	}
	for (size_t i = 0; i < c->n_admin_tokens; i++) {
		if (!strcmp(c->admin_tokens[i].name, name)) {
			return nx_admin_reply_error(req, 409, "exists", "name",
						    "a token named '%s' exists", name);
		}
	}
	if (c->n_admin_tokens >= NX_CONF_MAX_TOKENS) {
		return nx_admin_reply_error(req, 409, "too_many_tokens", NULL,
					    "at most %d tokens: delete one first",
					    NX_CONF_MAX_TOKENS);
	}
	uint8_t bin[NX_ADMIN_SECRET_BYTES], hash[NX_CONF_TOKEN_HASH_BYTES];
	char token[sizeof(TOKEN_PREFIX) + NX_ADMIN_SECRET_TEXT];
	randombytes_buf(bin, sizeof(bin));
	memcpy(token, TOKEN_PREFIX, sizeof(TOKEN_PREFIX) - 1);
	secret_text(bin, token + sizeof(TOKEN_PREFIX) - 1);
	crypto_hash_sha256(hash, (const unsigned char *)token, strlen(token));
	sodium_memzero(bin, sizeof(bin));
	unsigned created = (unsigned)time(NULL);
	size_t cap;
	char *yaml = tokens_yaml(c, NULL, name, hash, created, read_only, &cap);
	int rc;
	if (!yaml) {
		rc = -ENOMEM;
		goto out;
	}
	struct nx_conf_change ch = {"admin.tokens", yaml};
	rc = nx_admin_config_apply(req, &ch, 1);
	nx_mem_free(NX_OWNER_admin_http, yaml, cap);
	if (rc == 0) {
		nx_log(NX_LOG_INFO, "admin", "API token '%s' created", name);
		rc = nx_admin_reply_json(req, 201,
					 json_pack("{s:s, s:s, s:I, s:s}", "name", name, "token", token,
						   "created", (json_int_t)created, "scope",
						   read_only ? "read" : "admin"));
	} else if (rc > 0) {
		rc = 0; /* answered */
	}
out:
	sodium_memzero(token, sizeof(token));
	return rc;
}

int nx_admin_handle_tokens_delete(struct nx_admin_req *req)
{
	const char *name = req->path + strlen("/api/auth/tokens/");
	const struct nx_conf *c = nx_admin_conf(req->admin);
	bool found = false;
	for (size_t i = 0; c && i < c->n_admin_tokens; i++) {
		found |= !strcmp(c->admin_tokens[i].name, name);
	}
	if (!found) {
		return nx_admin_reply_error(req, 404, "not_found", NULL, "no token named '%s'",
					    name);
	}
	char keep[NX_CONF_NAME_MAX + 1];
	snprintf(keep, sizeof(keep), "%s", name); /* req->path outlives; the config may not */
	size_t cap;
	char *yaml = tokens_yaml(c, keep, NULL, NULL, 0, false, &cap);
	if (!yaml) {
		return -ENOMEM;
	}
	struct nx_conf_change ch = {"admin.tokens", yaml};
	int rc = nx_admin_config_apply(req, &ch, 1);
	nx_mem_free(NX_OWNER_admin_http, yaml, cap);
	if (rc) {
		return rc > 0 ? 0 : rc; /* > 0: answered */
	}
	nx_log(NX_LOG_INFO, "admin", "API token '%s' revoked", keep);
	return nx_admin_reply_json(req, 200, json_pack("{s:s}", "deleted", keep));
}

/* ---- the TOTP second factor: enrol, confirm, remove --------------------------------------- */

#define TOTP_ENROL_MS (10 * 60 * 1000) /* an enrolment not confirmed within this is forgotten */

int nx_admin_handle_totp_enrol(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	const struct nx_conf *c = nx_admin_conf(a);
	if (!c) {
		return nx_admin_reply_error(req, 503, "not_configured", NULL, "no configuration");
	}
	if (c->admin_totp_secret) {
		return nx_admin_reply_error(req, 409, "totp_enrolled", NULL,
					    "a second factor is enrolled: remove it first "
					    "(DELETE /api/auth/totp with a code)");
	}
	struct nx_admin_auth_state *au = &a->auth;
	randombytes_buf(au->totp_pending, sizeof(au->totp_pending));
	au->totp_pending_until_ms = nx_admin_now_ms(a) + TOTP_ENROL_MS;
	char b32[NX_ADMIN_TOTP_B32_MAX + 1], uri[256];
	nx_admin_base32_encode(au->totp_pending, sizeof(au->totp_pending), b32, sizeof(b32));
	/* Key URI Format (github.com/google/google-authenticator/wiki/Key-Uri-Format): what
	 * authenticator apps read from a QR code */
	snprintf(uri, sizeof(uri),
		 "otpauth://totp/nxdns:admin?secret=%s&issuer=nxdns&algorithm=SHA1&digits=%d"
		 "&period=%d",
		 b32, NX_ADMIN_TOTP_DIGITS, NX_ADMIN_TOTP_STEP_S);
	json_t *o = json_pack("{s:s, s:s, s:i}", "secret", b32, "uri", uri, "expires_in",
			      TOTP_ENROL_MS / 1000);
	sodium_memzero(b32, sizeof(b32));
	sodium_memzero(uri, sizeof(uri));
	nx_log(NX_LOG_INFO, "admin", "TOTP enrolment started (waiting for a confirming code)");
	return nx_admin_reply_json(req, 201, o);
}

/* The body's {code}; NULL when answered (400). */
static json_t *code_body(struct nx_admin_req *req, const char **code)
{
	static const struct nx_admin_field fields[] = {{"code", JSON_STRING, true}, {NULL}};
	json_t *vals[1];
	json_t *body = nx_admin_req_json(req, fields, vals);
	*code = body ? json_string_value(vals[0]) : NULL;
	return body;
}

int nx_admin_handle_totp_confirm(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	struct nx_admin_auth_state *au = &a->auth;
	const char *code;
	json_t *body = code_body(req, &code);
	if (!body) {
		return 0;
	}
	int rc = 0;
	char b32[NX_ADMIN_TOTP_B32_MAX + 1], yaml[NX_ADMIN_TOTP_B32_MAX + 4];
	uint64_t now = nx_admin_now_ms(a);
	const struct nx_conf *c = nx_admin_conf(a);
	if (c && c->admin_totp_secret) {
		rc = nx_admin_reply_error(req, 409, "totp_enrolled", NULL,
					  "a second factor is enrolled already");
		goto out;
	}
	if (!au->totp_pending_until_ms || now >= au->totp_pending_until_ms) {
		rc = nx_admin_reply_error(req, 409, "no_enrolment", NULL,
					  "no enrolment is waiting: POST /api/auth/totp first (an "
					  "enrolment lasts %d minutes)",
					  TOTP_ENROL_MS / 60000);
		goto out;
	}
	nx_admin_base32_encode(au->totp_pending, sizeof(au->totp_pending), b32, sizeof(b32));
	if (refuse_totp(a, req, b32, code, "code", now)) {
		goto out;
	}
	snprintf(yaml, sizeof(yaml), "\"%s\"", b32);
	struct nx_conf_change ch = {"admin.totp_secret", yaml};
	rc = nx_admin_config_apply(req, &ch, 1);
	if (rc) {
		rc = rc > 0 ? 0 : rc;
		goto out;
	}
	sodium_memzero(au->totp_pending, sizeof(au->totp_pending));
	au->totp_pending_until_ms = 0;
	nx_log(NX_LOG_INFO, "admin", "TOTP second factor enrolled: logins need a code now");
	rc = nx_admin_reply_json(req, 200, json_pack("{s:b}", "totp", true));
out:
	sodium_memzero(b32, sizeof(b32));
	sodium_memzero(yaml, sizeof(yaml));
	json_decref(body);
	return rc;
}

int nx_admin_handle_totp_remove(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	const char *code;
	json_t *body = code_body(req, &code);
	if (!body) {
		return 0;
	}
	int rc = 0;
	const struct nx_conf *c = nx_admin_conf(a);
	if (!c || !c->admin_totp_secret) {
		rc = nx_admin_reply_error(req, 404, "not_enrolled", NULL,
					  "no second factor is enrolled");
		goto out;
	}
	/* a code, not only the session: a stolen session alone cannot drop the second factor */
	if (refuse_totp(a, req, c->admin_totp_secret, code, "code", nx_admin_now_ms(a))) {
		goto out;
	}
	struct nx_conf_change ch = {"admin.totp_secret", "\"off\""};
	rc = nx_admin_config_apply(req, &ch, 1);
	if (rc) {
		rc = rc > 0 ? 0 : rc;
		goto out;
	}
	nx_log(NX_LOG_INFO, "admin", "TOTP second factor removed");
	rc = nx_admin_reply_json(req, 200, json_pack("{s:b}", "totp", false));
out:
	json_decref(body);
	return rc;
}
