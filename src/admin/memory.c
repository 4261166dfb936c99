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
	/*
	 * What RSS holds, by who explains it: the ledger's heap owners (everything but the
	 * snapshot mapping, which the ledger charges at its full size) plus the snapshot's resident
	 * pages plus code (the executable and libraries, file-backed, owned by no allocation).
	 * The rest is unexplained: allocator overhead and retained free heap, libraries' own
	 * allocations, thread stacks. Printed, not hidden.
	 */
	int64_t snap_charge = rows[NX_OWNER_snapshot_map].bytes;
	int64_t snap_res = pf.snapshot_resident_bytes >= 0 ? pf.snapshot_resident_bytes : snap_charge;
	int64_t code = pf.code_bytes >= 0 ? pf.code_bytes : 0;
	int64_t explained = (total - snap_charge) + snap_res + code;
	int64_t unexplained = pf.vmrss_bytes >= 0 ? pf.vmrss_bytes - explained : -1;
	json_t *doc = json_pack("{s:o, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I}, s:I, s:f}",
			 "owners", owners, "ledger_bytes", (json_int_t)total, "process", "vmrss",
			 (json_int_t)pf.vmrss_bytes, "rssanon", (json_int_t)pf.rssanon_bytes,
			 "rssfile", (json_int_t)pf.rssfile_bytes, "vmhwm",
			 (json_int_t)pf.vmhwm_bytes, "threads", (json_int_t)pf.threads, "code",
			 (json_int_t)pf.code_bytes, "snapshot_resident",
			 (json_int_t)pf.snapshot_resident_bytes, "heap", "in_use",
			 (json_int_t)pf.heap_in_use_bytes, "free_retained",
			 (json_int_t)pf.heap_free_bytes, "unexplained_bytes",
			 (json_int_t)unexplained, "unexplained_share",
			 pf.vmrss_bytes > 0 ? (double)unexplained / (double)pf.vmrss_bytes : 0.0);
	return doc;
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
