/*
 * Replays files through LLVMFuzzerTestOneInput without libFuzzer, so fuzz corpora run in the
 * normal test suite (built with the normal compiler). Arguments are files or directories
 * (not recursive); an argument "shared:REL" is REL under $NX_SHARED_DIR and is skipped when
 * that is unset or missing. Exit 0 when every input ran, 77 (meson: skipped) when no input
 * was found, 1 on an unreadable file; a failed property aborts inside the target.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX (1u << 20) /* bytes read per input file; fuzz inputs are small */

static uint8_t buf[REPLAY_MAX];

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	/* a copy of exactly n bytes, so ASan sees reads past the input */
	uint8_t *copy = malloc(n ? n : 1);
	if (!copy) {
		return -1;
	}
	memcpy(copy, buf, n);
	LLVMFuzzerTestOneInput(copy, n);
	free(copy);
	return 0;
}

static int run_path(const char *path, unsigned *count)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		fprintf(stderr, "replay: %s: missing, skipped\n", path);
		return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return run_file(path);
	}
	DIR *d = opendir(path);
	if (!d) {
		perror(path);
		return -1;
	}
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.') {
			continue;
		}
		char p[8192];
		if ((size_t)snprintf(p, sizeof(p), "%s/%s", path, e->d_name) >= sizeof(p)) {
			continue;
		}
		if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
			continue;
		}
		(*count)++;
		if (run_file(p) < 0) {
			rc = -1;
		}
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;
	const char *shared = getenv("NX_SHARED_DIR");
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		char p[4096];
		if (strncmp(arg, "shared:", 7) == 0) {
			if (!shared || !*shared) {
				fprintf(stderr, "replay: NX_SHARED_DIR unset, %s skipped\n", arg);
				continue;
			}
			snprintf(p, sizeof(p), "%s/%s", shared, arg + 7);
			arg = p;
		}
		if (run_path(arg, &count) < 0) {
			rc = 1;
		}
	}
	printf("replay: %u inputs\n", count);
	if (count == 0) {
		return 77;
	}
	return rc;
}
