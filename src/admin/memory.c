/*
 * The memory report: the ledger's owner table beside /proc's figures and glibc's heap, with the
 * unexplained remainder (RSS minus what the ledger names) printed rather than hidden.
 * Served as GET /api/memory; `nxdns memory` prints the same document as a table.
 */
#include <errno.h>
#include <jansson.h>

#include "admin/impl.h"
#include "base/ledger.h"

json_t *nx_admin_memory_json(void);

json_t *nx_admin_memory_json(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	json_t *owners = json_array();
	int64_t total = 0;
	for (int i = 0; i < NX_OWNER__COUNT; i++) {
		json_array_append_new(owners, json_pack("{s:s, s:I, s:I, s:s}", "owner", rows[i].name,
							"bytes", (json_int_t)rows[i].bytes, "count",
							(json_int_t)rows[i].count, "help",
							rows[i].help));
		total += rows[i].bytes;
	}
	struct nx_process_figures pf;
	nx_admin_read_process(&pf);
	/* The snapshot mapping is file-backed (RssFile); everything else the ledger names is heap
	 * (RssAnon). What RSS holds beyond the ledger: allocator overhead and retained free heap,
	 * libraries' own allocations, thread stacks, code. */
	int64_t unexplained = pf.vmrss_bytes >= 0 ? pf.vmrss_bytes - total : -1;
	return json_pack("{s:o, s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I}, s:I, s:f}",
			 "owners", owners, "ledger_bytes", (json_int_t)total, "process", "vmrss",
			 (json_int_t)pf.vmrss_bytes, "rssanon", (json_int_t)pf.rssanon_bytes,
			 "rssfile", (json_int_t)pf.rssfile_bytes, "vmhwm",
			 (json_int_t)pf.vmhwm_bytes, "threads", (json_int_t)pf.threads, "heap",
			 "in_use", (json_int_t)pf.heap_in_use_bytes, "free_retained",
			 (json_int_t)pf.heap_free_bytes, "unexplained_bytes",
			 (json_int_t)unexplained, "unexplained_share",
			 pf.vmrss_bytes > 0 ? (double)unexplained / (double)pf.vmrss_bytes : 0.0);
}

int nx_admin_handle_memory(struct nx_admin_req *req);

int nx_admin_handle_memory(struct nx_admin_req *req)
{
	json_t *j = nx_admin_memory_json();
	if (!j) {
		return -ENOMEM;
	}
	return nx_admin_reply_json(req, 200, j);
}
