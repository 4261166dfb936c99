/*
 * libarchive, loaded only while an archive is open.
 *
 * Only `nxdns import pihole` (a Teleporter zip), `nxdns backup`/`restore` and the admin's
 * /api/backup and /api/restore read or write archives, but libarchive brings libxml2, ICU and
 * libstdc++ with it (~2 MiB resident in every process that links it). nxdns does not link it:
 * this file defines the libarchive functions import/ calls, with the prototypes of
 * <archive.h>, each forwarding to the library's own, which the first archive_read_new /
 * archive_write_new / archive_entry_new dlopen()s. Every object those return holds a reference;
 * the last archive_*_free dlclose()s the library again (libarchive runs no threads and keeps no
 * state outside its objects). libstdc++ stays mapped once loaded (its unique symbols make it
 * RTLD_NODELETE).
 *
 * The wrappers are not exported (nxdns is not linked with -rdynamic), so libarchive's calls to
 * its own functions never reach them. A missing library: the constructor returns NULL, as on
 * out-of-memory, and the reason (the soname and the package) is logged.
 *
 * Threading: the reference count and the table are behind one mutex; the objects themselves
 * are used by one thread each, as libarchive requires.
 */
#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "base/log.h"
#include "import/backup.h"

#include <stdio.h>

/* Debian's libarchive13 */
#define ARCHIVE_SONAME "libarchive.so.13"
#ifdef NX_TEST_ARCHIVE_SONAME
#undef ARCHIVE_SONAME
#define ARCHIVE_SONAME NX_TEST_ARCHIVE_SONAME
#endif

/* X(return type, name, (parameters), (arguments)) for every libarchive function we call */
#define ARCHIVE_FUNCS(X)                                                                           \
	X(struct archive *, archive_read_new, (void), ())                                          \
	X(int, archive_read_support_format_zip, (struct archive * a), (a))                         \
	X(int, archive_read_support_format_tar, (struct archive * a), (a))                         \
	X(int, archive_read_support_filter_gzip, (struct archive * a), (a))                        \
	X(int, archive_read_open_filename, (struct archive * a, const char *f, size_t b),          \
	  (a, f, b))                                                                               \
	X(int, archive_read_next_header, (struct archive * a, struct archive_entry * *e), (a, e))  \
	X(la_ssize_t, archive_read_data, (struct archive * a, void *p, size_t n), (a, p, n))       \
	X(int, archive_read_free, (struct archive * a), (a))                                       \
	X(const char *, archive_error_string, (struct archive * a), (a))                           \
	X(struct archive *, archive_write_new, (void), ())                                         \
	X(int, archive_write_add_filter_gzip, (struct archive * a), (a))                           \
	X(int, archive_write_set_format_pax_restricted, (struct archive * a), (a))                 \
	X(int, archive_write_open_fd, (struct archive * a, int fd), (a, fd))                       \
	X(int, archive_write_header, (struct archive * a, struct archive_entry * e), (a, e))       \
	X(la_ssize_t, archive_write_data, (struct archive * a, const void *p, size_t n),           \
	  (a, p, n))                                                                               \
	X(int, archive_write_close, (struct archive * a), (a))                                     \
	X(int, archive_write_free, (struct archive * a), (a))                                      \
	X(struct archive_entry *, archive_entry_new, (void), ())                                   \
	X(void, archive_entry_free, (struct archive_entry * e), (e))                               \
	X(const char *, archive_entry_pathname, (struct archive_entry * e), (e))                   \
	X(__LA_MODE_T, archive_entry_filetype, (struct archive_entry * e), (e))                    \
	X(void, archive_entry_set_filetype, (struct archive_entry * e, unsigned int t), (e, t))    \
	X(void, archive_entry_set_mtime, (struct archive_entry * e, time_t t, long ns),            \
	  (e, t, ns))                                                                              \
	X(void, archive_entry_set_pathname, (struct archive_entry * e, const char *p), (e, p))     \
	X(void, archive_entry_set_perm, (struct archive_entry * e, __LA_MODE_T m), (e, m))         \
	X(void, archive_entry_set_size, (struct archive_entry * e, la_int64_t n), (e, n))

static struct {
#define FIELD(ret, name, params, args) ret(*name) params;
	ARCHIVE_FUNCS(FIELD)
#undef FIELD
} fn;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *lib;	     /* dlopen handle while objects exist */
static unsigned refs;	     /* live archive and entry objects made through us */
static char load_error[256]; /* why the last load failed, "" after one that worked */

static const struct {
	const char *sym;
	size_t off;
} syms[] = {
#define SYM(ret, name, params, args) {#name, offsetof(__typeof__(fn), name)},
    ARCHIVE_FUNCS(SYM)
#undef SYM
};

/* Take a reference, loading the library on the first. false (logged) when it cannot load. */
static bool acquire(void)
{
	pthread_mutex_lock(&lock);
	if (!lib) {
		void *h = dlopen(ARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
		const char *missing = NULL;
		for (size_t i = 0; h && i < sizeof(syms) / sizeof(syms[0]); i++) {
			void *p = dlsym(h, syms[i].sym);
			if (!p) {
				missing = syms[i].sym;
				dlclose(h);
				h = NULL;
				break;
			}
			memcpy((char *)&fn + syms[i].off, &p, sizeof(p));
		}
		if (!h) {
			const char *why = missing ? missing : dlerror();
			snprintf(load_error, sizeof(load_error),
				 "archives need %s (Debian package libarchive13), which cannot be "
				 "loaded: %s%s",
				 ARCHIVE_SONAME, missing ? "no symbol " : "", why ? why : "?");
			pthread_mutex_unlock(&lock);
			nx_log(NX_LOG_WARN, "import", "%s", load_error);
			return false;
		}
		load_error[0] = '\0';
		lib = h;
	}
	refs++;
	pthread_mutex_unlock(&lock);
	return true;
}

static void release(void)
{
	pthread_mutex_lock(&lock);
	if (refs > 0 && --refs == 0 && lib) {
		dlclose(lib);
		lib = NULL;
		memset(&fn, 0, sizeof(fn));
	}
	pthread_mutex_unlock(&lock);
}

const char *nx_import_archive_error(void)
{
	pthread_mutex_lock(&lock);
	const char *e = load_error[0] ? load_error : "out of memory";
	pthread_mutex_unlock(&lock);
	return e;
}

bool nx_import_archive_loaded(void)
{
	pthread_mutex_lock(&lock);
	bool on = lib != NULL;
	pthread_mutex_unlock(&lock);
	return on;
}

/* The constructors take a reference for their object; the destructors drop it. */
#define CTOR(type, name)                                                                           \
	type *name(void)                                                                           \
	{                                                                                          \
		if (!acquire()) {                                                                  \
			return NULL;                                                               \
		}                                                                                  \
		type *o = fn.name();                                                               \
		if (!o) {                                                                          \
			release();                                                                 \
		}                                                                                  \
		return o;                                                                          \
	}
CTOR(struct archive, archive_read_new)
CTOR(struct archive, archive_write_new)
CTOR(struct archive_entry, archive_entry_new)
#undef CTOR

int archive_read_free(struct archive *a)
{
	if (!a) {
		return ARCHIVE_OK;
	}
	int rc = fn.archive_read_free(a);
	release();
	return rc;
}

int archive_write_free(struct archive *a)
{
	if (!a) {
		return ARCHIVE_OK;
	}
	int rc = fn.archive_write_free(a);
	release();
	return rc;
}

void archive_entry_free(struct archive_entry *e)
{
	if (!e) {
		return;
	}
	fn.archive_entry_free(e);
	release();
}

/* The rest forward as they are: only reachable with an object, so the library is loaded. */
#define FWD(ret, name, params, args)                                                               \
	ret name params                                                                            \
	{                                                                                          \
		return fn.name args;                                                               \
	}
FWD(int, archive_read_support_format_zip, (struct archive * a), (a))
FWD(int, archive_read_support_format_tar, (struct archive * a), (a))
FWD(int, archive_read_support_filter_gzip, (struct archive * a), (a))
FWD(int, archive_read_open_filename, (struct archive * a, const char *f, size_t b), (a, f, b))
FWD(int, archive_read_next_header, (struct archive * a, struct archive_entry **e), (a, e))
FWD(la_ssize_t, archive_read_data, (struct archive * a, void *p, size_t n), (a, p, n))
FWD(const char *, archive_error_string, (struct archive * a), (a))
FWD(int, archive_write_add_filter_gzip, (struct archive * a), (a))
FWD(int, archive_write_set_format_pax_restricted, (struct archive * a), (a))
FWD(int, archive_write_open_fd, (struct archive * a, int fd), (a, fd))
FWD(int, archive_write_header, (struct archive * a, struct archive_entry *e), (a, e))
FWD(la_ssize_t, archive_write_data, (struct archive * a, const void *p, size_t n), (a, p, n))
FWD(int, archive_write_close, (struct archive * a), (a))
FWD(const char *, archive_entry_pathname, (struct archive_entry * e), (e))
FWD(__LA_MODE_T, archive_entry_filetype, (struct archive_entry * e), (e))
#undef FWD

/* void ones */
void archive_entry_set_filetype(struct archive_entry *e, unsigned int t)
{
	fn.archive_entry_set_filetype(e, t);
}

void archive_entry_set_mtime(struct archive_entry *e, time_t t, long ns)
{
	fn.archive_entry_set_mtime(e, t, ns);
}

void archive_entry_set_pathname(struct archive_entry *e, const char *p)
{
	fn.archive_entry_set_pathname(e, p);
}

void archive_entry_set_perm(struct archive_entry *e, __LA_MODE_T m)
{
	fn.archive_entry_set_perm(e, m);
}

void archive_entry_set_size(struct archive_entry *e, la_int64_t n)
{
	fn.archive_entry_set_size(e, n);
}
