# Thin wrapper over scripts/ and meson. `make run` and `make test` are the two README commands.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
CONFIG     ?= etc/nxdns-dev.yaml
# `make fuzz`: every target (scripts/fuzz all) for this long each; the full run is 600 s per
# target (40 minutes for the four); `make fuzz FUZZ_SECONDS=60` for a quick one.
FUZZ_SECONDS ?= 600

.PHONY: all build run test test-unit test-integration bootstrap bench bench-memory fuzz clean format

all: build

bootstrap:
	@scripts/bootstrap

$(BUILD)/build.ninja:
	meson setup $(BUILD) -Dwerror=true

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

run: bootstrap build
	mkdir -p var
	[ -f var/tls/cert.pem ] || ./$(BUILD)/nxdns cert --self-signed var/tls
	@echo "nxdns web admin: http://$$(awk '/^admin:/ {a = 1; next} /^[^ #]/ {a = 0} \
		a && $$1 == "listen:" {gsub(/"/, "", $$2); print $$2; exit}' $(CONFIG))/"
	./$(BUILD)/nxdns serve --config $(CONFIG)

test: bootstrap
	scripts/test-all

bench: bootstrap build
	scripts/bench

bench-memory: bootstrap build
	scripts/bench --memory-only

fuzz: bootstrap
	scripts/fuzz $(FUZZ_SECONDS) all

format:
	clang-format -i $$(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'tests/*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) build-tsan
