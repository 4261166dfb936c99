/*
 * libpq, loaded at run time: a box that never configures the sink maps none of libpq's
 * libraries (libpq pulls in OpenSSL, Kerberos and LDAP), and the package only suggests libpq5.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

#include "pgsink/impl.h"

int nx_pq_load(struct nx_pq *pq, const char *soname, char *why, size_t cap)
{
	/* RTLD_LOCAL: libpq's symbols stay out of the global namespace; NODELETE: it is never
	 * unloaded (its OpenSSL registers exit handlers) */
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		snprintf(why, cap, "cannot load %s (install libpq5): %s", soname, dlerror());
		return -ENOENT;
	}
#define NX_PQ_LOAD(name, ret, args)                                                                \
	*(void **)&pq->name = dlsym(h, #name);                                                     \
	if (!pq->name) {                                                                           \
		snprintf(why, cap, "%s has no %s", soname, #name);                                 \
		return -ENOENT;                                                                    \
	}
	NX_PQ_FUNCS(NX_PQ_LOAD)
#undef NX_PQ_LOAD
	return 0;
}
