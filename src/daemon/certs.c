/*
 * The server certificate of the DoT and DoH listeners, held by each config generation.
 *
 * tls.cert/tls.key when set; otherwise a self-signed certificate nxdns makes once in
 * state_dir/tls/ (so Android's automatic Private DNS, which does not check certificates, works
 * on a fresh box) and whose SPKI pin it logs for clients that pin. Read on every load, so a
 * changed certificate is picked up by SIGHUP; the listeners stay bound and take it for the
 * connections they accept from then on. A certificate that cannot be loaded on a reload keeps
 * the running one (and says why); at start it is an error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/log.h"
#include "daemon/impl.h"
#include "net/tls.h"

static bool needs_certificate(const struct nx_conf *c)
{
	return c->n_listen_dot > 0 || c->n_listen_doh > 0;
}

int nx_daemon_load_creds(const struct nx_conf *c, struct nx_tls_creds *prev,
			 struct nx_tls_creds **out)
{
	*out = NULL;
	if (!needs_certificate(c)) {
		return 0;
	}
	char err[512] = "";
	char *cert = c->tls_cert, *key = c->tls_key, *gcert = NULL, *gkey = NULL;
	bool created = false;
	int rc = 0;
	if (!cert && mkdir(c->state_dir, 0750) < 0 && errno != EEXIST) {
		snprintf(err, sizeof(err), "cannot create state_dir %s: %s", c->state_dir,
			 strerror(errno));
		rc = -errno;
	} else if (!cert) {
		rc = nx_tls_selfsigned_ensure(c->state_dir, c->tls_server_name, &gcert, &gkey,
					      &created, err, sizeof(err));
		cert = gcert;
		key = gkey;
	}
	struct nx_tls_creds *cr = NULL;
	if (rc == 0) {
		rc = nx_tls_creds_server_load(cert, key, &cr, err, sizeof(err));
	}
	if (rc < 0) {
		if (prev) {
			nx_log(NX_LOG_ERR, "tls", "%s; keeping the certificate in use", err);
			nx_tls_creds_ref(prev);
			*out = prev;
			rc = 0;
		} else {
			nx_log(NX_LOG_ERR, "tls", "%s", err);
		}
	} else {
		char pin[45] = "";
		nx_tls_creds_pin(cr, pin);
		nx_log(NX_LOG_INFO, "tls", "%s certificate %s%s, pin-sha256: %s",
		       gcert ? "self-signed" : "configured", cert,
		       created ? " (generated now)" : "", pin);
		*out = cr;
	}
	free(gcert);
	free(gkey);
	return rc;
}
