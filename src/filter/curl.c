/* libcurl loaded with dlopen while a download runs, unloaded after the last one (curl.h). */
#include "filter/curl.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *lib;	   /* dlopen handle, NULL when not loaded */
static struct nx_curl api; /* valid while lib != NULL */
static unsigned refs;	   /* references taken by nx_curl_acquire */
static bool keep;	   /* tainted or pinned: never unloaded again */
static unsigned loads, unloads;
static const char *soname_override; /* tests */
/* libssh2_exit of the libssh2 libcurl brings, when we initialised it ourselves (see load) */
static void (*ssh2_exit)(void);

/* libssh2_init's flag that skips its crypto backend's global init (libssh2.h) */
#define SSH2_INIT_NO_CRYPTO 0x0001

/* name in the library -> offset of its field in struct nx_curl */
static const struct {
	const char *sym;
	size_t off;
} syms[] = {
#define SYM(field)                                                                                 \
	{                                                                                          \
		"curl_" #field, offsetof(struct nx_curl, field)                                    \
	}
    SYM(global_init),	      SYM(global_cleanup),  SYM(version_info),	   SYM(easy_init),
    SYM(easy_setopt),	      SYM(easy_getinfo),    SYM(easy_perform),	   SYM(easy_cleanup),
    SYM(easy_strerror),	      SYM(slist_append),    SYM(slist_free_all),   SYM(multi_init),
    SYM(multi_setopt),	      SYM(multi_cleanup),   SYM(multi_add_handle), SYM(multi_remove_handle),
    SYM(multi_socket_action), SYM(multi_info_read), SYM(multi_assign),
#undef SYM
};

static int load(char *err, size_t errlen)
{
	const char *name = soname_override ? soname_override : NX_CURL_SONAME;
	/* RTLD_LOCAL: its symbols serve only this table; RTLD_NOW: a broken install fails here */
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();
		snprintf(err, errlen,
			 "URL downloads need %s (Debian package libcurl3-gnutls), which cannot be "
			 "loaded: %s",
			 name, why ? why : "unknown error");
		return -ELIBACC;
	}
	struct nx_curl t;
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *fn = dlsym(h, syms[i].sym);
		if (!fn) {
			snprintf(err, errlen, "%s has no %s (libcurl too old or not libcurl)", name,
				 syms[i].sym);
			dlclose(h);
			return -ELIBACC;
		}
		/* POSIX guarantees a function's address round-trips through void * (dlsym) */
		memcpy((char *)&t + syms[i].off, &fn, sizeof(fn));
	}
	/*
	 * curl_global_init calls libssh2_init(0), which initialises OpenSSL's libcrypto (Debian's
	 * libssh2 uses it): 1.5 MiB of pages touched, and libcrypto is linked -z nodelete, so they
	 * would stay resident after the unload. nxdns allows only http and https, so libssh2 is
	 * never used: initialise it first without its crypto, and libcurl's call only counts.
	 */
	int (*ssh2_init)(int) = NULL;
	void *sym = dlsym(h, "libssh2_init");
	memcpy(&ssh2_init, &sym, sizeof(sym));
	sym = dlsym(h, "libssh2_exit");
	memcpy(&ssh2_exit, &sym, sizeof(sym));
	if (!ssh2_init || !ssh2_exit || ssh2_init(SSH2_INIT_NO_CRYPTO) != 0) {
		ssh2_exit = NULL; /* no libssh2 here (or it refused): nothing of ours to undo */
	}
	if (t.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(err, errlen, "%s: curl_global_init failed", name);
		if (ssh2_exit) {
			ssh2_exit();
			ssh2_exit = NULL;
		}
		dlclose(h);
		return -ELIBACC;
	}
	const curl_version_info_data *vi = t.version_info(CURLVERSION_NOW);
	if (vi && !(vi->features & CURL_VERSION_THREADSAFE)) {
		nx_log(NX_LOG_WARN, "filter",
		       "%s %s: curl_global_init is not thread-safe in this build; loaded anyway",
		       name, vi->version);
	}
	api = t;
	lib = h;
	loads++;
	nx_log(NX_LOG_DEBUG, "filter", "loaded %s %s", name, vi ? vi->version : "?");
	return 0;
}

static void unload(void)
{
	api.global_cleanup();
	if (ssh2_exit) {
		ssh2_exit(); /* our libssh2_init's reference */
		ssh2_exit = NULL;
	}
	dlclose(lib);
	lib = NULL;
	memset(&api, 0, sizeof(api));
	unloads++;
	nx_log(NX_LOG_DEBUG, "filter", "unloaded libcurl");
}

const struct nx_curl *nx_curl_acquire(char *err, size_t errlen)
{
	char why[512];
	pthread_mutex_lock(&lock);
	int rc = lib ? 0 : load(why, sizeof(why));
	if (rc == 0) {
		refs++;
	}
	pthread_mutex_unlock(&lock);
	if (rc != 0) {
		nx_log(NX_LOG_WARN, "filter", "%s", why);
		if (err && errlen) {
			snprintf(err, errlen, "%s", why);
		}
		return NULL;
	}
	return &api;
}

void nx_curl_release(void)
{
	pthread_mutex_lock(&lock);
	if (refs > 0 && --refs == 0 && lib && !keep) {
		unload();
	}
	pthread_mutex_unlock(&lock);
}

void nx_curl_taint(void)
{
	pthread_mutex_lock(&lock);
	if (!keep) {
		nx_log(NX_LOG_DEBUG, "filter",
		       "libcurl stays loaded: a transfer ended while its resolver may still run");
	}
	keep = true;
	pthread_mutex_unlock(&lock);
}

int nx_curl_pin(char *err, size_t errlen)
{
	if (!nx_curl_acquire(err, errlen)) {
		return -ELIBACC;
	}
	pthread_mutex_lock(&lock);
	keep = true;
	pthread_mutex_unlock(&lock);
	nx_curl_release();
	return 0;
}

bool nx_curl_loaded(void)
{
	pthread_mutex_lock(&lock);
	bool on = lib != NULL;
	pthread_mutex_unlock(&lock);
	return on;
}

unsigned nx_curl_loads(void)
{
	pthread_mutex_lock(&lock);
	unsigned n = loads;
	pthread_mutex_unlock(&lock);
	return n;
}

unsigned nx_curl_unloads(void)
{
	pthread_mutex_lock(&lock);
	unsigned n = unloads;
	pthread_mutex_unlock(&lock);
	return n;
}

void nx_curl_set_soname(const char *soname)
{
	pthread_mutex_lock(&lock);
	soname_override = soname;
	pthread_mutex_unlock(&lock);
}
