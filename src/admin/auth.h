/*
 * Admin password handling shared by `nxdns passwd` and the first-run setup route.
 *
 * The password is stored in the config as an Argon2id string from libsodium's
 * crypto_pwhash_str() with 5 passes over 7 MiB (NX_ADMIN_PWHASH_OPS/_MEM): one of OWASP's
 * equivalent argon2id minimums (m=7 MiB, t=5, p=1), picked because the box's memory design
 * allows a transient peak of 8 MiB above steady (issue 16) and libsodium's INTERACTIVE limits
 * (64 MiB) took VmHWM past 100 MiB at every login. The passes buy back the hardness the
 * memory gives up, at a similar few hundred milliseconds on a Pi. Verification runs on the
 * control thread (DNS workers are other threads and keep answering); the parameters travel in
 * the string, so a hash made with other limits still verifies, and a login that verifies one
 * rewrites it with these (nx_admin_password_needs_rehash).
 *
 * Threading: any thread; nothing shared. The functions call sodium_init() themselves.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NX_ADMIN_PASSWORD_MIN 8	   /* bytes: shorter ones are refused */
#define NX_ADMIN_PASSWORD_MAX 1024 /* bytes: a passphrase, not a file */
#define NX_ADMIN_PWHASH_MAX 128	   /* crypto_pwhash_STRBYTES: the hash string and its NUL */
#define NX_ADMIN_PWHASH_OPS 5	   /* argon2id passes (OWASP: t=5 with m=7 MiB) */
#define NX_ADMIN_PWHASH_MEM (7u * 1024 * 1024) /* bytes: fits the 8 MiB transient budget */

/* 0 when `pw` (len bytes) is acceptable, else NX_EMALFORMED with *why (a static string). */
int nx_admin_password_check(const char *pw, size_t len, const char **why);

/* True when `hash` (a valid argon2 string) was made with limits other than ours. */
bool nx_admin_password_needs_rehash(const char *hash);

/*
 * Hash a password (argon2id, NX_ADMIN_PWHASH_OPS/_MEM) into out (NUL-terminated). 0, NX_EMALFORMED
 * (refused by nx_admin_password_check) or -ENOMEM (libsodium could not get its memory).
 */
int nx_admin_password_hash(const char *pw, size_t len, char out[NX_ADMIN_PWHASH_MAX]);

/*
 * Hash `pw` and write it as admin.password_hash into the config file `config_path` through
 * nx_conf_rewrite (validated, .bak kept, atomic). 0, or an error with the reason in err:
 * NX_EMALFORMED (password refused), NX_ECONFIG (the file does not load with it), -errno.
 */
int nx_admin_password_set(const char *config_path, const char *pw, size_t len, char *err,
			  size_t errlen);

/*
 * The optional second factor: TOTP (RFC 6238) over HOTP (RFC 4226) with HMAC-SHA-1, 30-second
 * steps from the Unix epoch, 6 digits: what every authenticator app defaults to (and what
 * Pi-hole v6 offers). A code is accepted for the step before, the current one and the one
 * after (clocks drift, typing takes time), and each step once: a code seen on the wire cannot
 * be replayed, not even within its window. The secret lives in admin.totp_secret (base32).
 */
#define NX_ADMIN_TOTP_KEY_BYTES 20 /* secrets we generate: 160 bits, RFC 4226's recommendation */
#define NX_ADMIN_TOTP_KEY_MAX 64   /* bytes of a secret read from the config (the SHA-1 block) */
#define NX_ADMIN_TOTP_STEP_S 30	   /* seconds per step (RFC 6238's default X) */
#define NX_ADMIN_TOTP_DIGITS 6
#define NX_ADMIN_TOTP_SKEW 1	  /* steps accepted either side of the current one */
#define NX_ADMIN_TOTP_B32_MAX 104 /* base32 characters of NX_ADMIN_TOTP_KEY_MAX bytes, + NUL */

/* HOTP value of `counter` under `key`, truncated to `digits` (6..8) decimal digits. */
uint32_t nx_admin_hotp(const uint8_t *key, size_t len, uint64_t counter, unsigned digits);

/*
 * Check a presented code (exactly NX_ADMIN_TOTP_DIGITS ASCII digits) at Unix time `unix_s`.
 * *last_step is one past the newest step a code was accepted for (0: none yet). 0: accepted,
 * *last_step moved past the step it matched. NX_EMALFORMED: not a code. NX_ENOTFOUND: no
 * step within the skew matches. -EALREADY: it matches a step before *last_step (a replay, or
 * an older code after a newer one was used). Constant-time in the code's value.
 */
int nx_admin_totp_check(const uint8_t *key, size_t len, const char *code, uint64_t unix_s,
			uint64_t *last_step);

/* RFC 4648 base32 without padding; out gets the NUL. Encode returns the length written
 * (0 when cap is too small); decode 0 or NX_EMALFORMED (a character outside A-Z2-7, or more
 * than cap bytes). */
size_t nx_admin_base32_encode(const uint8_t *in, size_t n, char *out, size_t cap);
int nx_admin_base32_decode(const char *in, uint8_t *out, size_t cap, size_t *n);
