# softrnic front door.  See README.md.
#   make            build the module and the provider (sets up what is missing)
#   make run        the main job: boot the VM, create devices, show them working
#   make check      every test (host cargo tests + guest suite); ends "N passed, N failed, N skipped"
#   make check-slow the slow scenarios (the full fault matrix, rxe:rxe beside, goodput)
#   make check-debug every guest suite on the debug kernel (KASAN, KFENCE, lockdep,
#                   kmemleak ...; builds that kernel once, about 45 min)
#   make bench      rxe, siw, softrnic_roce and softrnic_iwarp side by side in one VM:
#                   Documentation/benchmarks.{md,csv,svg} (slow; BENCH_ROUNDS=1 BENCH_QUICK=quick to try it)
#   make profile    where the CPU goes in one scenario, per implementation (perf and the
#                   C shims' times; PROFILE="send_lat sr siw", default "write_bw sr rxe")
#   make install    install the module (/lib/modules/RELEASE/updates, depmod) and the
#                   provider (libibverbs directory, /etc/libibverbs.d) on this host;
#                   make install-dkms: the module through DKMS instead; make uninstall
#   make KDIR=/path/to/kernel/build   build the module against your own kernel, on this host
SHELL := /bin/bash
REPO := $(CURDIR)
export SOFTRNIC_CACHE ?= /var/tmp/softrnic
BENCH_ROUNDS ?= 3
# Progress lines count the time from the start of this make command.
ifndef SOFTRNIC_T0
export SOFTRNIC_T0 := $(shell date +%s)
endif

.PHONY: all setup module provider run check check-host check-slow check-debug bench profile clean modules-direct provider-direct install install-dkms uninstall

ifeq ($(KDIR)$(filter 0,$(shell id -u)),)
# Not root: the build root, its chroot and QEMU's exports need root, so ask
# sudo for it (as root, nothing changes).
all setup module provider run check check-host check-slow check-debug bench profile clean install install-dkms uninstall:
	@command -v sudo >/dev/null || { echo "softrnic: 'make $@' needs root (debootstrap, chroot, QEMU): run it as root"; exit 1; }
	sudo -E $(MAKE) $@

else
ifneq ($(KDIR),)
# A user-supplied Rust-enabled kernel build tree: build the module right here.
all: modules-direct
module: modules-direct
else
all: module provider
module: setup
	@bash scripts/build module
endif

setup:
	@bash scripts/setup

provider: setup
	@bash scripts/build provider

run: all
	@bash qemu/main-job

check: all
	@bash scripts/check

check-host:
	@bash scripts/check --host-only

check-slow: all
	@bash scripts/check --slow

check-debug: all
	@bash scripts/check --debug

bench: all
	@bash scripts/bench $(BENCH_ROUNDS) $(BENCH_QUICK)

profile: all
	@bash scripts/profile $(PROFILE)

install: all
	@bash scripts/install

install-dkms: all
	@bash scripts/install --dkms

uninstall:
	@bash scripts/install --uninstall

# Inside the build root (scripts/build) or against a user's KDIR.
modules-direct:
	$(MAKE) -C $(KDIR) M=$(REPO) modules

provider-direct:
	cd userspace && cargo build --release --offline -p softrnic-provider

clean:
	[ -z "$(KDIR)" ] || $(MAKE) -C $(KDIR) M=$(REPO) clean
	bash scripts/build clean
endif
