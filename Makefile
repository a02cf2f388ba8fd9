# The two commands every newcomer needs: `make run` and `make test`.
# Each target creates .venv with the machine's python3 and installs requirements.txt
# when the venv is missing or older than requirements.txt; nothing is installed by hand.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements.stamp

# Tests use real PostgreSQL and Redis; these defaults match the services on a dev machine.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/haptic
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0

.PHONY: run test lint format bench soak venv clean browser kube fidelity

venv: $(STAMP)

$(STAMP): requirements.txt
	@test -x $(PY) || { echo ">> creating $(VENV) with $$($(PYTHON) --version)"; $(PYTHON) -m venv $(VENV); }
	@echo ">> installing requirements.txt into $(VENV) (first time takes a minute)"
	@$(PY) -m pip install --disable-pip-version-check -q --upgrade pip
	@$(PY) -m pip install --disable-pip-version-check --progress-bar on -r requirements.txt
	@touch $(STAMP)

# The browser test uses Debian's chromium; installed here when missing and we are root.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo ">> installing Debian's chromium for the browser test"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else echo "!! the browser test needs chromium (apt-get install chromium)"; fi; }

# The real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) at
# the releases kube/go.mod pins, built into kube/bin/ (ignored). Needs Go; rebuilt only when
# kube/go.mod, kube/go.sum or kube/build.sh change (Go's build cache keeps a rebuild short).
KUBE_BUILT := kube/bin/.built

kube: $(KUBE_BUILT)

$(KUBE_BUILT): kube/go.mod kube/go.sum kube/build.sh kube/tools.go
	@bash kube/build.sh
	@touch $@

# HAPTIC_CLUSTER=real runs the system on the real control plane (built first); the default
# is the embedded local cluster, which needs no Go.
run: $(STAMP) $(if $(filter real,$(HAPTIC_CLUSTER)),$(KUBE_BUILT))
	@$(PY) -m devstack.run

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Most end-to-end tests wait on real processes rather than compute, so four workers share
# the two cores well (README, "Test times": the local tier took 6:19 on three, 5:29 on four,
# the same day); --dist loadfile keeps each module (and its shared stack) on one worker, but
# spreads the tests of SPREAD_ACROSS_WORKERS (tests/conftest.py).
PYTEST_WORKERS ?= 4
# The real tier: run again, with HAPTIC_TEST_CLUSTER=real, on the real control plane (make
# kube): every end-to-end and hub test and every test the seeds name (tests/test_real_tier.py
# checks), with tests/real and tests/fidelity. Run in collection order (pytest-django puts
# the transactional tests, tests/real/test_manifests.py the longest, first), not xdist's
# "modules with the most tests first" (--no-loadscope-reorder), which would leave the long
# single tests to the end.
REAL_TIER ?= tests/real/test_manifests.py tests/e2e tests/hub tests/retained/test_drain.py \
	tests/retained/test_renewal.py tests/retained/test_seed_cases.py \
	tests/retained/test_term_holes.py tests/real tests/fidelity
TEST_ENV = DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)}
# The local tier's API servers record the distinct shapes of the requests they answer
# (HAPTIC_REQUEST_SHAPES); each one the code sent must be replayed by the fidelity corpus
# (tests/fidelity/README.md, "Recorded requests"; the table is written next to them).
REQUEST_SHAPES := var/request-shapes

# Both tiers run, each printing its own summary; either failing (exit 5, nothing collected,
# included) fails the target. Without Go the real control plane cannot be built: the real
# tier is then not run, and the target says so (`make run` and the local tier need no Go).
test: lint browser $(if $(shell command -v go 2>/dev/null),$(KUBE_BUILT))
	@status=0; \
	echo ">> local tier: the whole suite on the local cluster"; \
	rm -rf $(REQUEST_SHAPES); \
	$(TEST_ENV) HAPTIC_REQUEST_SHAPES=$(CURDIR)/$(REQUEST_SHAPES) $(VENV)/bin/pytest \
		-n $(PYTEST_WORKERS) --dist loadfile --ignore=tests/real --ignore=tests/fidelity \
		$(PYTEST_ARGS) || status=1; \
	$(PY) -m tests.fidelity.coverage $(REQUEST_SHAPES) --out $(REQUEST_SHAPES)/coverage.md \
		|| status=1; \
	if [ -f $(KUBE_BUILT) ]; then \
		echo ">> real tier: $(REAL_TIER) on the real control plane"; \
		$(TEST_ENV) HAPTIC_TEST_CLUSTER=real $(VENV)/bin/pytest -n $(PYTEST_WORKERS) \
			--dist loadfile --no-loadscope-reorder $(REAL_TIER) $(PYTEST_ARGS) || status=1; \
	else \
		echo "!! real tier NOT run: the real control plane is not built (needs Go; make kube)"; \
	fi; \
	exit $$status

bench: $(STAMP)
	$(TEST_ENV) $(PY) -m bench $(BENCH_ARGS)

# Random faults under load with invariant checks (not part of `make test`): first the term
# model test with many more examples (random, shrunk), then 3 minutes per seed for
# SOAK_SEEDS; SOAK_ARGS='--minutes 10' for the long run. Report: bench/results/soak.md.
# Both always run; the exit status is non-zero when either fails.
SOAK_SEEDS ?= 1,2,3
MODEL_EXAMPLES ?= 2000
soak: $(STAMP)
	@status=0; \
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} \
		HAPTIC_MODEL_EXAMPLES=$(MODEL_EXAMPLES) HAPTIC_MODEL_RANDOM=1 HAPTIC_MODEL_SHRINK=1 \
		$(VENV)/bin/pytest -p no:randomly -n 0 --runxfail tests/term/test_model.py || status=1; \
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} \
		$(PY) -m soak --seeds $(SOAK_SEEDS) $(SOAK_ARGS) || status=$$?; \
	exit $$status

# Replay tests/fidelity/corpus/ against the local and the real API server and write every
# difference (fixed or explained) to bench/results/fidelity.md.
fidelity: $(STAMP) $(KUBE_BUILT)
	$(PY) -m tests.fidelity --out bench/results/fidelity.md

clean:
	rm -rf $(VENV) var .pytest_cache
