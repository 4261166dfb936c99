# Thin wrapper over scripts/ and meson. `make run` and `make test` are the two README commands.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
# `make run` serves var/nxdns.yaml, a copy of the tracked template made when absent: the web
# admin and the API rewrite the file they serve, and that must not be a tracked one.
DEV_CONFIG ?= etc/nxdns-dev.yaml
CONFIG     ?= var/nxdns.yaml
# `make fuzz`: every target (scripts/fuzz all) for this long each; the full run is 600 s per
# target (60 minutes for the six); `make fuzz FUZZ_SECONDS=60` for a quick one.
FUZZ_SECONDS ?= 600

.PHONY: all build run test test-unit test-integration bootstrap bench bench-memory fuzz clean format deb install

all: build

bootstrap:
	@scripts/bootstrap

$(BUILD)/build.ninja:
	meson setup $(BUILD) -Dwerror=true

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

run: bootstrap build
	mkdir -p var
	[ -f $(CONFIG) ] || cp $(DEV_CONFIG) $(CONFIG)
	[ -f var/tls/cert.pem ] || ./$(BUILD)/nxdns cert --self-signed var/tls
	@echo "nxdns web admin: http://$$(awk '/^admin:/ {a = 1; next} /^[^ #]/ {a = 0} \
		a && $$1 == "listen:" {gsub(/"/, "", $$2); print $$2; exit}' $(CONFIG))/"
	@echo "config: $(CONFIG) (what the web admin edits; delete it to start again from $(DEV_CONFIG))"
	./$(BUILD)/nxdns serve --config $(CONFIG)

test: bootstrap
	scripts/test-all

bench: bootstrap build
	scripts/bench

bench-memory: bootstrap build
	scripts/bench --memory-only

fuzz: bootstrap
	scripts/fuzz $(FUZZ_SECONDS) all

# The Debian package, built with debhelper in a copy under $(BUILD): $(BUILD)/nxdns_VERSION_ARCH.deb
deb: bootstrap
	scripts/make-deb $(BUILD)

# Other distributions: binary, nxdns(8), the systemd unit (paths of PREFIX) and the seed config
# into DESTDIR; the config is copied to SYSCONFDIR/nxdns/nxdns.yaml only when none is there.
# The service user is the system's business: `useradd --system --user-group nxdns`, then give
# it SYSCONFDIR/nxdns and /var/lib/nxdns (or let `nxdns serve` do it when started as root).
PREFIX     ?= /usr/local
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
install: build
	meson configure $(BUILD) -Dprefix=$(PREFIX) -Dsysconfdir=$(SYSCONFDIR)
	ninja -C $(BUILD)
	meson install -C $(BUILD) --no-rebuild $(if $(DESTDIR),--destdir $(DESTDIR))
	install -d -m 0750 $(DESTDIR)$(SYSCONFDIR)/nxdns
	[ -e $(DESTDIR)$(SYSCONFDIR)/nxdns/nxdns.yaml ] || install -m 0640 dist/nxdns.yaml \
		$(DESTDIR)$(SYSCONFDIR)/nxdns/nxdns.yaml

format:
	clang-format -i $$(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'tests/*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) build-tsan
