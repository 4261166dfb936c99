/*
 * DNS messages: parse a whole message into a view of offsets, and build the replies the server
 * synthesises or relays. No I/O, no allocation: callers pass the buffers.
 *
 * A `struct nx_dns_msg` is a plain value describing a message that lives elsewhere (borrowed
 * buffer); its offsets index that buffer. Parsing validates every section (names, counts, RR
 * lengths, OPT placement) so relays can rewrite TTLs and ids in place without re-checking.
 *
 * Threading: every function is pure over caller memory and may run on any thread at once.
 * Allocation: none; nx_dns_msg_parse uses 8 KiB of stack (a bitmap of fixed-field offsets).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dns/wire.h"

#define NX_DNS_HDR_LEN 12
#define NX_DNS_UDP_MIN 512        /* RFC 1035 4.2.1: limit without EDNS */
#define NX_DNS_EDNS_OUR_SIZE 1232 /* DNS flag day 2020: avoids fragmentation */
#define NX_DNS_MSG_MAX 65535      /* TCP length prefix bound */
#define NX_DNS_MAX_TTLS 128       /* TTL offsets remembered for relays/cache; more -> flagged */
#define NX_DNS_EDE_TEXT_MAX 128   /* bytes of EXTRA-TEXT we emit or keep */

/* Header flag bits (host order of the 16-bit flags word). */
#define NX_DNS_F_QR 0x8000
#define NX_DNS_F_AA 0x0400
#define NX_DNS_F_TC 0x0200
#define NX_DNS_F_RD 0x0100
#define NX_DNS_F_RA 0x0080
#define NX_DNS_F_AD 0x0020
#define NX_DNS_F_CD 0x0010
#define NX_DNS_OPCODE(flags) (((flags) >> 11) & 0xf)
#define NX_DNS_RCODE(flags) ((flags) & 0xf)

enum nx_dns_rcode {
	NX_DNS_NOERROR = 0,
	NX_DNS_FORMERR = 1,
	NX_DNS_SERVFAIL = 2,
	NX_DNS_NXDOMAIN = 3,
	NX_DNS_NOTIMP = 4,
	NX_DNS_REFUSED = 5,
	NX_DNS_BADVERS = 16, /* extended rcode (EDNS) */
};

enum nx_dns_type {
	NX_DNS_T_A = 1,
	NX_DNS_T_NS = 2,
	NX_DNS_T_CNAME = 5,
	NX_DNS_T_SOA = 6,
	NX_DNS_T_PTR = 12,
	NX_DNS_T_HINFO = 13,
	NX_DNS_T_MX = 15,
	NX_DNS_T_TXT = 16,
	NX_DNS_T_AAAA = 28,
	NX_DNS_T_OPT = 41,
	NX_DNS_T_HTTPS = 65,
	NX_DNS_T_AXFR = 252,
	NX_DNS_T_ANY = 255,
};

#define NX_DNS_C_IN 1

/* RFC 8914 Extended DNS Error info-codes we emit. */
enum nx_dns_ede {
	NX_DNS_EDE_NONE = -1,
	NX_DNS_EDE_OTHER = 0,
	NX_DNS_EDE_STALE = 3,
	NX_DNS_EDE_FORGED = 4,
	NX_DNS_EDE_BLOCKED = 15,
	NX_DNS_EDE_CENSORED = 16,
	NX_DNS_EDE_FILTERED = 17,
	NX_DNS_EDE_PROHIBITED = 18,
	NX_DNS_EDE_NOT_READY = 14,
	NX_DNS_EDE_NO_REACHABLE_AUTHORITY = 22,
	NX_DNS_EDE_NETWORK_ERROR = 23,
};

struct nx_dns_question {
	uint8_t name[NX_DNS_NAME_MAX]; /* uncompressed wire name, case as received */
	uint8_t name_len;              /* wire length, 1..255 (1 = root) */
	uint16_t qtype;
	uint16_t qclass;
};

struct nx_dns_edns {
	bool present;      /* an OPT RR was found in the additional section */
	uint16_t udp_size; /* advertised payload size as sent (callers clamp to >= 512) */
	uint8_t ext_rcode; /* upper 8 bits of the 12-bit rcode */
	uint8_t version;
	bool do_bit;
	int ede_code;                         /* first EDE option's info-code, or -1 */
	uint16_t ede_text_len;                /* bytes copied into ede_text */
	char ede_text[NX_DNS_EDE_TEXT_MAX];   /* first EDE's EXTRA-TEXT, truncated, not NUL-terminated */
	uint16_t unknown_options;             /* other options seen (not kept: we rebuild our OPT) */
};

struct nx_dns_msg {
	uint16_t id;
	uint16_t flags;
	uint16_t qdcount, ancount, nscount, arcount;
	bool has_question;          /* qdcount >= 1 and the first question parsed */
	struct nx_dns_question q;   /* first question */
	uint16_t question_off;      /* offset of the first question's name (12) */
	uint16_t question_end;      /* offset just past the question section */
	uint16_t answer_end;        /* offset past the answer section */
	uint16_t authority_end;     /* offset past the authority section */
	uint16_t opt_off;           /* offset of the OPT RR (its owner name), 0 if none */
	uint16_t opt_len;           /* total bytes of the OPT RR */
	uint16_t opt_index;         /* index of the OPT RR within the additional section */
	struct nx_dns_edns edns;
	uint16_t ttl_count;                 /* TTL fields recorded below (non-OPT RRs) */
	bool ttl_overflow;                  /* more RRs than NX_DNS_MAX_TTLS */
	uint16_t ttl_off[NX_DNS_MAX_TTLS];  /* offsets of 32-bit TTL fields, in message order */
	uint32_t min_ttl;                   /* smallest TTL over answer+authority (UINT32_MAX if none) */
	uint16_t len;                       /* message length parsed */
};

/*
 * Parse just the 12-byte header. Returns 0 or NX_EMALFORMED (shorter than 12).
 */
int nx_dns_hdr_parse(const uint8_t *buf, size_t len, struct nx_dns_msg *out);

/*
 * Parse and validate a whole message. Rules: every count is honoured exactly (a count that
 * overruns -> NX_EMALFORMED), trailing bytes after the last RR -> NX_EMALFORMED, at most one OPT
 * and only in the additional section with owner root, names per nx_dns_rd_name. Stricter than
 * nx_dns_rd_name: no pointer into the header, and no name may be decoded through the fixed
 * fields of a question or RR (type, class, TTL, rdlength): so the first question name is always
 * stored uncompressed at offset 12, and patching TTLs, the id or the question's letter case, or
 * cutting the message at the OPT, cannot change what any kept name decodes to. Names inside
 * NS/CNAME/SOA/PTR/MX/SRV/... RDATA are validated and must tile RDLENGTH exactly, A/AAAA (class
 * IN) must have their address size; other RDATA is opaque (pointers into it are allowed: BIND
 * compresses against names in LP, RRSIG, ...). OPT options must tile the OPT RDLENGTH; the
 * first EDE (length >= 2) is kept, every other option is counted in edns.unknown_options.
 * Messages > 65535 bytes are malformed.
 * On error `out` still has the header fields filled when len >= 12 (so a FORMERR can be built),
 * and has_question/q are valid if the first question parsed before the error.
 * Returns 0 or NX_EMALFORMED.
 */
int nx_dns_msg_parse(const uint8_t *buf, size_t len, struct nx_dns_msg *out);

/*
 * What a reply should look like for one client: its id, its question (case), its EDNS.
 */
struct nx_dns_reply_ctx {
	uint16_t id;                  /* client's transaction id */
	uint16_t qflags;              /* client's header flags (RD, CD, opcode are echoed) */
	const struct nx_dns_question *q; /* borrowed: client's question, or NULL (FORMERR w/o q) */
	bool edns;                    /* client sent OPT: reply carries our OPT */
	bool do_bit;                  /* echo DO in our OPT */
	size_t max_size;              /* bytes the reply may use (UDP: client size; TCP: 65535) */
};

/*
 * Build a header-only (+question, +OPT) reply with `rcode`; sets QR, RA, echoes RD/CD/opcode.
 * ede >= 0 adds an EDE option with `ede_text` (may be NULL; at most NX_DNS_EDE_TEXT_MAX bytes
 * used). rcode > 15 sets the OPT extended rcode (only when ctx->edns; without EDNS such an
 * rcode is not expressible and SERVFAIL is sent). No EDE without ctx->edns (it lives in OPT).
 * The question is ctx->q as given (the client's case). Returns the length written or NX_ETRUNC.
 */
int nx_dns_build_error(uint8_t *out, size_t cap, const struct nx_dns_reply_ctx *ctx, int rcode,
		       int ede, const char *ede_text);

/*
 * RFC 8482 minimal answer to qtype ANY: one HINFO "RFC8482" "" with ttl (owner compressed to the
 * question, class = qclass, NOERROR, OPT as in nx_dns_build_error). Returns length, NX_ETRUNC,
 * or NX_EMALFORMED when ctx->q is NULL.
 */
int nx_dns_build_any_hinfo(uint8_t *out, size_t cap, const struct nx_dns_reply_ctx *ctx,
			   uint32_t ttl);

/*
 * Build an upstream query: header (id, RD set, CD from `cd`), the question, an OPT with our
 * payload size and the DO bit when `do_bit`. Returns the length or NX_ETRUNC.
 */
int nx_dns_build_query(uint8_t *out, size_t cap, uint16_t id, const struct nx_dns_question *q,
		       bool do_bit, bool cd);

/*
 * Relay a parsed upstream reply `up` (buffer `ubuf`, parsed by nx_dns_msg_parse) to one client:
 *  - id := ctx->id, question name bytes := the client's (same name, client's case), RD := the
 *    client's RD; other flags and the rcode are the upstream's;
 *  - the upstream OPT is removed (with every additional RR after it, if it was not last) and,
 *    when ctx->edns, our own OPT appended (DO echoed, upstream extended rcode carried,
 *    upstream EDE kept when ede < 0 and the upstream sent one; else `ede`/`ede_text` added).
 *    An upstream extended rcode for a client without EDNS becomes SERVFAIL;
 *  - if the result exceeds min(ctx->max_size, cap): header + ctx->q (+OPT) with TC set.
 *    ctx->max_size 0 means 65535.
 * `ttl_sub` is subtracted from every TTL of a kept RR (floor 0; TTLs with the top bit set count
 * as 0, RFC 2181 8) — the cache passes the age. No allocation: one memcpy plus patches.
 * Returns the length written (<= ctx->max_size), NX_ETRUNC (even the TC form does not fit), or
 * NX_EMALFORMED (ctx->q is not the upstream's question name); *truncated (may be NULL) tells
 * whether TC was set by us.
 */
int nx_dns_relay(uint8_t *out, size_t cap, const uint8_t *ubuf, const struct nx_dns_msg *up,
		 const struct nx_dns_reply_ctx *ctx, uint32_t ttl_sub, int ede, const char *ede_text,
		 bool *truncated);

/*
 * Build an answer from scratch (local records, blocked answers): header with rcode and AA as
 * given, the question, `n_rrs` answer records then `n_auth` authority records (owner NULL = the
 * question name, written as a compression pointer to offset 12; else the given uncompressed
 * owner; class = qclass), OPT/EDE as in nx_dns_build_error. Each RR: type, ttl, rdata bytes.
 * If it exceeds min(ctx->max_size, cap) the reply becomes header + question (+OPT) with TC.
 * Returns the length, NX_ETRUNC, or NX_EMALFORMED (owner NULL but ctx->q NULL).
 */
struct nx_dns_rr_spec {
	const uint8_t *owner;     /* wire name or NULL for the question's name */
	size_t owner_len;
	uint16_t type;
	uint32_t ttl;
	const uint8_t *rdata;     /* borrowed */
	uint16_t rdlen;
};
int nx_dns_build_answer(uint8_t *out, size_t cap, const struct nx_dns_reply_ctx *ctx, int rcode,
			bool aa, const struct nx_dns_rr_spec *rrs, size_t n_rrs,
			const struct nx_dns_rr_spec *authority, size_t n_auth, int ede,
			const char *ede_text);

/* The max UDP reply size for a client: 512 without EDNS, else
 * clamp(udp_size, 512, NX_DNS_EDNS_OUR_SIZE) — we never send more than our own size over UDP. */
size_t nx_dns_udp_limit(const struct nx_dns_msg *q);

/* Names for logs/metrics: mnemonic (static) or "TYPE<n>" written into buf. */
const char *nx_dns_type_name(uint16_t type, char buf[16]);
/* Mnemonic for a 12-bit rcode (static), "UNKNOWN" for unassigned ones. */
const char *nx_dns_rcode_name(int rcode);

/*
 * Where the domain names sit in the RDATA of the types whose names may be compressed (RFC 1035,
 * RFC 3597 4) and a few common ones that carry names (SRV, RP, AFSDB, PX, KX): `pre` fixed
 * bytes, then `names` names, then `post` fixed bytes. The parser validates exactly these, and
 * a rewriter that moves records must decompress exactly these (other RDATA holds no pointers).
 * Returns false (names = 0) for every other type, A and AAAA included.
 */
struct nx_dns_rdata_layout {
	uint8_t pre;   /* fixed bytes before the first name */
	uint8_t names; /* consecutive names */
	uint8_t post;  /* fixed bytes after the last name */
};
bool nx_dns_rdata_names(uint16_t type, struct nx_dns_rdata_layout *out);
