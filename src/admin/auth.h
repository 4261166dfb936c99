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
