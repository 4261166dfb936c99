/*
 * libcurl, loaded only while a download runs.
 *
 * nxdns does not link libcurl: libcurl-gnutls pulls in libssh2, OpenSSL's libcrypto, libldap,
 * librtmp, Kerberos and more (~3 MiB resident in every process), and only a URL download
 * (list refresh, `nxdns update`, a replica's pull, `nxdns memory --admin`) needs it. The first
 * nx_curl_acquire() dlopen()s NX_CURL_SONAME, resolves the functions below with dlsym and runs
 * curl_global_init; the last nx_curl_release() runs curl_global_cleanup and dlclose()s it
 * again, unless a transfer may have left libcurl code running (see nx_curl_taint), in which
 * case the library stays loaded for the life of the process. libssh2 (a dependency) is
 * initialised without its crypto first, so OpenSSL is never initialised; libcrypto itself is
 * linked -z nodelete and stays mapped once loaded. <curl/curl.h> is used for types
 * and constants only (build time: libcurl4-gnutls-dev; run time: libcurl3-gnutls).
 *
 * Threading: every entry point is thread-safe (one mutex). The table returned by
 * nx_curl_acquire() stays valid until the caller's matching nx_curl_release(). Loading happens
 * while other threads run: libcurl's global init is thread-safe since 7.84 when
 * curl_version_info() reports CURL_VERSION_THREADSAFE (Debian 12's 7.88 does); without it the
 * load logs a warning and still proceeds, serialised by our mutex.
 *
 * Memory: nothing on the ledger (the library's pages are file-backed code; its heap is
 * libcurl's own, as before).
 */
#pragma once

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

/* The library nxdns loads (Debian's libcurl3-gnutls: GnuTLS, like the rest of nxdns). */
#define NX_CURL_SONAME "libcurl-gnutls.so.4"

/* The libcurl functions nxdns calls; valid while a reference is held. */
struct nx_curl {
	CURLcode (*global_init)(long flags);
	void (*global_cleanup)(void);
	curl_version_info_data *(*version_info)(CURLversion age);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
	CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
	CURLcode (*easy_perform)(CURL *h);
	void (*easy_cleanup)(CURL *h);
	const char *(*easy_strerror)(CURLcode rc);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_setopt)(CURLM *m, CURLMoption opt, ...);
	CURLMcode (*multi_cleanup)(CURLM *m);
	CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_socket_action)(CURLM *m, curl_socket_t s, int ev, int *running);
	CURLMsg *(*multi_info_read)(CURLM *m, int *left);
	CURLMcode (*multi_assign)(CURLM *m, curl_socket_t s, void *p);
};

/*
 * Take a reference, loading the library on the first one. Returns the table, or NULL with a
 * one-line reason in err (the soname, dlerror's text or the missing symbol, and the package
 * that provides it); the reason is also logged once per failed load. A failed load is tried
 * again by the next call.
 */
const struct nx_curl *nx_curl_acquire(char *err, size_t errlen);

/* Drop a reference taken by nx_curl_acquire(). The last one unloads the library unless it is
 * tainted or pinned. Every easy and multi handle must be cleaned up before. */
void nx_curl_release(void);

/* Keep the library loaded for the life of the process from now on (a transfer was abandoned
 * while libcurl's threaded resolver may still run in a detached thread, which executes
 * libcurl's code once getaddrinfo returns). Called by fetch.c. */
void nx_curl_taint(void);

/* Load (if needed) and keep the library for the life of the process: tools that download many
 * times (`nxdns update`). 0, or -ELIBACC with the reason in err. */
int nx_curl_pin(char *err, size_t errlen);

/* True while the library is mapped (tests, `nxdns memory`). */
bool nx_curl_loaded(void);

/* How many times the library was loaded and unloaded in this process (tests). */
unsigned nx_curl_loads(void);
unsigned nx_curl_unloads(void);

/* Tests only: the soname dlopen()ed by the next load (NULL: NX_CURL_SONAME). Borrowed. */
void nx_curl_set_soname(const char *soname);
