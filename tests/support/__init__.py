"""What the tests build on and nothing else imports: a throw-away local SLURM cluster
(:mod:`tests.support.slurm_cluster`), result trees made from the paper's numbers
(:mod:`tests.support.paper_results`) and per-sample logs in the sweep's format
(:mod:`tests.support.sample_logs`). Not installed with vcast (``pyproject.toml`` ships ``vcast*`` and
``baselines*`` only); the tiny random-weight checkpoints the tests load are user-facing and live in
:mod:`vcast.tiny_checkpoints`."""
