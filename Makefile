# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-requirements

.PHONY: demo test serve prod-serve lint bench install verifier clean

$(STAMP): requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

install: $(STAMP)

# Sets up the embedded SQLite database and runs real chat turns end to end.
demo: $(STAMP)
	DEBUG=$${DEBUG:-1} $(PY) manage.py migrate --no-input
	DEBUG=$${DEBUG:-1} LOG_LEVEL=$${LOG_LEVEL:-WARNING} $(PY) manage.py demo

# The gates: format, lint, types, migrations, then pytest on SQLite and, when
# DATABASE_URL points at PostgreSQL, on PostgreSQL too.
test: $(STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy .
	DJANGO_SETTINGS_MODULE=lqai.settings_test $(PY) manage.py makemigrations --check --dry-run
	@echo "== pytest on SQLite =="
	env -u DATABASE_URL $(VENV)/bin/pytest --cov --cov-report=term
	@if [ -n "$${DATABASE_URL:-}" ]; then \
		echo "== pytest on $${DATABASE_URL%%:*} =="; \
		$(VENV)/bin/pytest --cov --cov-report=term; \
	fi

# The development server on 127.0.0.1:$(PORT) (`make serve PORT=8001` for another port).
PORT ?= 8000
serve: $(STAMP)
	@case "$(PORT)" in ''|*[!0-9]*) echo "PORT=$(PORT) is not a port number: use e.g. make serve PORT=8001" >&2; exit 2;; esac
	DEBUG=$${DEBUG:-1} $(PY) manage.py migrate --no-input
	DEBUG=$${DEBUG:-1} $(PY) manage.py serve_info --base-url http://127.0.0.1:$(PORT)
	DEBUG=$${DEBUG:-1} $(PY) manage.py runserver 127.0.0.1:$(PORT)

# The production server (gunicorn.conf.py): DEBUG stays off, so SECRET_KEY and ALLOWED_HOSTS must be set
# (and DATABASE_URL for PostgreSQL); it migrates and collects the static files first.
prod-serve: $(STAMP)
	$(PY) manage.py migrate --no-input
	$(PY) manage.py collectstatic --no-input --verbosity 0
	$(VENV)/bin/gunicorn --config gunicorn.conf.py

lint: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/mypy .

bench: $(STAMP)
	$(PY) -m benchmarks.run $(BENCH_ARGS)

# The recipient's offline verifier as a wheel, dist/lqai_verify-<version>-py3-none-any.whl: it installs into any
# Python 3.11+ venv with `pip install`, needing only cryptography (docs/export.md, "Verifying an export").
verifier: $(STAMP)
	$(PY) -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir dist ./lqai_verify
	rm -rf lqai_verify/build lqai_verify/*.egg-info
	@ls dist/lqai_verify-*.whl

clean:
	rm -rf $(VENV) var artifacts dist lqai_verify/build .pytest_cache .mypy_cache .ruff_cache .coverage
