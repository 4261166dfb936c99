/*
 * Admin password handling shared by `nxdns passwd` and the first-run setup route.
 *
 * The password is stored in the config as an Argon2id string from libsodium's
 * crypto_pwhash_str() with the INTERACTIVE limits (2 passes over 64 MiB). Chosen for a
 * Raspberry Pi: MODERATE (256 MiB, 3 passes) takes seconds there and a quarter of a small
 * board's RAM per login, while INTERACTIVE costs a few hundred milliseconds and 64 MiB for a
 * moment, which a per-address login limit keeps rare. Verification runs on the control thread
 * (DNS workers are other threads and keep answering); the parameters travel in the string, so
 * a later change of these limits only affects new hashes.
 *
 * Threading: any thread; nothing shared. The functions call sodium_init() themselves.
 */
#pragma once

#include <stddef.h>

#define NX_ADMIN_PASSWORD_MIN 8	   /* bytes: shorter ones are refused */
#define NX_ADMIN_PASSWORD_MAX 1024 /* bytes: a passphrase, not a file */
#define NX_ADMIN_PWHASH_MAX 128	   /* crypto_pwhash_STRBYTES: the hash string and its NUL */

/* 0 when `pw` (len bytes) is acceptable, else NX_EMALFORMED with *why (a static string). */
int nx_admin_password_check(const char *pw, size_t len, const char **why);

/*
 * Hash a password (argon2id, INTERACTIVE limits) into out (NUL-terminated). 0, NX_EMALFORMED
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
