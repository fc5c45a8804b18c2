"""The budgeted tuner (experiment type ``tune``): Optuna's TPE sampler proposes layouts,
synchronous successive halving measures them in rounds at growing measured steps
(:mod:`archbench.tune.engine`); the workflow runs each round's trials as measurements
(:mod:`archbench.tune.rounds`)."""
