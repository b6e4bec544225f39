# steady_queue developer commands. `make test` and `make demo` work on a fresh clone.
PYTHON ?= python3.12
VENVS := .venv
PIP_FLAGS := --quiet --disable-pip-version-check

# The Django versions the suite runs against; 5.2 uses the django-tasks backport,
# and croniter 6 where the others install 7: a schedule means the same on both
# (tests/recurring/test_schedule.py).
DJANGO_dj61 := Django==6.1.*
DJANGO_dj60 := Django==6.0.*
DJANGO_dj52 := Django==5.2.* django-tasks==0.12.* croniter==6.*
# The clients lane (tests_clients/): a Wagtail 8 site with django-tasks-monitor, on
# the newest Django Wagtail 8 lists; pinned, so their next releases do not move it.
DJANGO_wagtail := Django==6.1.* wagtail==8.0.* django-tasks-monitor==0.1.0
# What a venv installs beside its Django: our package with the suite's extras, and
# the docs and lint tools; the clients lane only what its site and pytest need.
WITH := -e ".[postgres,pymysql,test]" sphinx ruff import-linter
WITH_wagtail := -e ".[postgres]" "psycopg[binary]==3.3.*" "pytest==9.*" \
	"pytest-timeout==2.4.*"

.PHONY: test test-fast demo messages bench bench-limits bench-fairness bench-scheduling bench-workflows bench-scale bench-ten-million docs lint lint-imports clean env chromium \
	system-packages topology-tools
.PRECIOUS: $(VENVS)/%/.installed

$(VENVS)/%/.installed: pyproject.toml
	@echo "==> creating $(VENVS)/$* ($(DJANGO_$*))"
	@rm -rf $(VENVS)/$*
	@$(PYTHON) -m venv $(VENVS)/$*
	@$(VENVS)/$*/bin/pip install $(PIP_FLAGS) $(or $(WITH_$*),$(WITH)) $(DJANGO_$*)
	@touch $@

env: $(VENVS)/dj61/.installed

# The whole suite: Django 6.1 on all three databases, 5.2 (backport) on SQLite and
# PostgreSQL, 6.0 on SQLite, the Wagtail site of tests_clients/ on PostgreSQL and
# SQLite, then the docs (warnings are errors), the import layers (lint-imports),
# then the packaging checks (build, twine check, metadata, the sdist's own
# tests): scripts/test-suite runs each step even when one failed, and ends
# with every step's verdict.
# The four virtualenvs and the Debian packages are installed side by side.
test:
	@$(MAKE) --no-print-directory -j5 $(VENVS)/dj61/.installed \
		$(VENVS)/dj60/.installed $(VENVS)/dj52/.installed \
		$(VENVS)/wagtail/.installed system-packages
	@bash scripts/test-suite

# One apt at a time: two installs side by side would fight over apt's lock.
system-packages:
	@bash scripts/install-chromium
	@bash scripts/install-topology-tools

chromium:
	@bash scripts/install-chromium

# PgBouncer, Prometheus and libfaketime for the tests that start them.
topology-tools:
	@bash scripts/install-topology-tools

# One database, one Django: make test-fast DB=postgres
DB ?= sqlite
test-fast: $(VENVS)/dj61/.installed
	SQ_TEST_DB=$(DB) $(VENVS)/dj61/bin/pytest $(ARGS)

demo: $(VENVS)/dj61/.installed
	@bash scripts/demo

bench: $(VENVS)/dj61/.installed
	@$(PYTHON) bench/run.py $(ARGS)
	@$(PYTHON) bench/held_xmin.py --databases postgresql mariadb
	@$(VENVS)/dj61/bin/python bench/limits.py
	@$(VENVS)/dj61/bin/python bench/fairness.py
	@$(VENVS)/dj61/bin/python bench/scheduling.py
	@$(VENVS)/dj61/bin/python bench/workflows.py

# How soon a second tenant runs behind a burst with @fair, what turns cost the
# burst's drain, and how evenly 1,000 tenants take turns, on each database
# (100,000 jobs a case, about 5 minutes a database; --jobs N in ARGS).
bench-fairness: $(VENVS)/dj61/.installed
	@$(VENVS)/dj61/bin/python bench/fairness.py $(ARGS)

# Priority aging under a flood, @unique(until="finished") under 1,000 racing
# enqueues and a kill -9, @debounce under 1,000 enqueues: forked supervisors
# on each database (about a minute a database; --jobs N in ARGS).
bench-scheduling: $(VENVS)/dj61/.installed
	@$(VENVS)/dj61/bin/python bench/scheduling.py $(ARGS)

# What rate and concurrency limits cost per job, on each database (~2 minutes).
bench-limits: $(VENVS)/dj61/.installed
	@$(VENVS)/dj61/bin/python bench/limits.py $(ARGS)

# What dependencies, durable steps, waits and sleeps cost per job, on each
# database (100 jobs a case, under 2 minutes; --jobs N in ARGS).
bench-workflows: $(VENVS)/dj61/.installed
	@$(VENVS)/dj61/bin/python bench/workflows.py $(ARGS)

# Enqueue, pickup and drain on empty tables, then beside 1,000,000 finished
# and 100,000 waiting jobs (docs/performance.rst, "Cost as work grows").
# The admin's translation catalogs (docs/operations.rst): every language's
# brought up to date with the code and compiled; LOCALE=xx starts a new one.
messages: $(VENVS)/dj61/.installed
	@cd steady_queue && ../$(VENVS)/dj61/bin/django-admin makemessages \
		$(if $(LOCALE),--locale $(LOCALE),--all) --no-obsolete \
		--ignore=management --ignore=commands --ignore=migrations
	@cd steady_queue && ../$(VENVS)/dj61/bin/django-admin compilemessages

bench-scale: $(VENVS)/dj61/.installed
	@$(PYTHON) bench/scale.py $(ARGS)

# The admin, status, metrics and clear-finished beside 10,000,000 finished
# jobs on PostgreSQL and MariaDB (issue #52); not part of `make bench`.
bench-ten-million: $(VENVS)/dj61/.installed
	@$(VENVS)/dj61/bin/python bench/ten_million.py $(ARGS)

docs: $(VENVS)/dj61/.installed
	@$(VENVS)/dj61/bin/sphinx-build -W --keep-going -q -b html docs build/docs
	@echo "==> docs built in build/docs (no warnings)"

lint: $(VENVS)/dj61/.installed lint-imports
	@$(VENVS)/dj61/bin/ruff check steady_queue tests tests_clients bench example_project

# The layers of [tool.importlinter] in pyproject.toml: parts import downwards.
lint-imports: $(VENVS)/dj61/.installed
	@$(VENVS)/dj61/bin/lint-imports --no-cache

clean:
	rm -rf $(VENVS) build docs/_build

# The soak (issue #13): JOBS jobs, good and poisoned, through a real supervisor
# while workers and connections are killed and PostgreSQL restarts once; prints
# what became of every job, per database. Not part of `make test`: it restarts
# the PostgreSQL server. make soak DB=postgres JOBS=2000 (default: all three).
.PHONY: soak
JOBS ?= 20000
comma := ,
SOAK_DBS = $(if $(filter file,$(origin DB)),sqlite$(comma)postgres$(comma)mysql,$(DB))
soak: $(VENVS)/dj61/.installed
	@$(VENVS)/dj61/bin/python bench/soak/run.py --db $(SOAK_DBS) --jobs $(JOBS) --restart-postgres $(ARGS)
