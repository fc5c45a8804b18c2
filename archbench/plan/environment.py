"""Which environment variables a system's or an experiment's ``env`` may give a job.

A campaign's ``env`` reaches every worker, its launcher and the shell around it. Most of
what sites set there are the math libraries' knobs (``KMP_*``, ``OMP_*``, ``MKL_*``),
which the record keeps. Some variables instead load code from outside the checkout
(``LD_PRELOAD``, ``PYTHONPATH``, ``BASH_ENV``, ...), or steer archbench, its launchers
or its container runtime (``ARCHBENCH_*``, ``SLURM_*``, ``TF_CONFIG``, ...): a system file
from another site could then run anything in each worker, or rewrite what the record
says about itself. Those are refused (docs/reliability.md argues the list) unless the
run's own command line allows them by name: ``--config allow_env=NAME,NAME`` (``archbench
run --allow-env NAME``), never a campaign or system file.
"""

from __future__ import annotations

from typing import Any, Mapping

# Exact names, with what each does.
REFUSED = {
    "BASH_ENV": "a file every non-interactive bash runs first",
    "ENV": "a file every sh runs first",
    "SHELLOPTS": "the options of every bash started",
    "BASHOPTS": "the options of every bash started",
    "PS4": "a prompt bash expands, command substitutions included",
    "PROMPT_COMMAND": "a command bash runs",
    "IFS": "how every shell splits words",
    "PATH": "which programs (python, srun, mpirun) run",
    "HOME": "the user's site-packages and shell start-up files",
    "PERL5LIB": "Perl's module search path", "PERL5OPT": "Perl's options (-M loads a module)",
    "PERLLIB": "Perl's module search path",
    "RUBYLIB": "Ruby's library path", "RUBYOPT": "Ruby's options",
    "NODE_OPTIONS": "Node's options (--require loads code)", "NODE_PATH": "Node's module path",
    "CLASSPATH": "Java's class path", "JAVA_TOOL_OPTIONS": "options of every JVM (agents)",
    "_JAVA_OPTIONS": "options of every JVM (agents)",
    "GCONV_PATH": "glibc's character-set modules, loaded as shared libraries",
    "OPENSSL_CONF": "OpenSSL's configuration (it loads engines)",
    "OPENSSL_ENGINES": "where OpenSSL loads engines from",
    "TF_CONFIG": "TensorFlow's cluster, which archbench's launcher builds",
    "CUDA_VISIBLE_DEVICES": "the GPUs a run sees, which archbench binds",
    "MASTER_ADDR": "PyTorch's rendezvous, which archbench's launcher sets",
    "MASTER_PORT": "PyTorch's rendezvous, which archbench's launcher sets",
    "RANK": "a process's rank, which archbench's launcher sets",
    "LOCAL_RANK": "a process's rank, which archbench's launcher sets",
    "WORLD_SIZE": "the number of processes, which archbench's launcher sets",
}
# Families, by prefix, with what their members do.
REFUSED_PREFIXES = {
    "LD_": "the dynamic loader (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT load shared libraries)",
    "DYLD_": "the dynamic loader",
    "PYTHON": "the Python interpreter (PYTHONPATH, PYTHONSTARTUP, PYTHONHOME, PYTHONUSERBASE "
              "load code; PYTHONINSPECT waits for input)",
    "ARCHBENCH_": "archbench itself (e.g. ARCHBENCH_GIT_COMMIT is the record's git_commit)",
    "SLURM_": "what srun starts and where", "SRUN_": "what srun starts and where",
    "SBATCH_": "what sbatch submits", "SALLOC_": "what salloc allocates",
    "OMPI_": "Open MPI's mpirun (e.g. the agent it starts ranks with)",
    "PMIX_": "the MPI process manager",
    "APPTAINER": "the container runtime (binds, the image's environment)",
    "SINGULARITY": "the container runtime (binds, the image's environment)",
}


def refused_because(name: str) -> str | None:
    """What an environment variable named ``name`` steers when a campaign's ``env`` may
    not set it, else None."""
    if name in REFUSED:
        return REFUSED[name]
    return next((what for prefix, what in REFUSED_PREFIXES.items() if name.startswith(prefix)), None)


def allowed_names(config: Mapping[str, Any]) -> frozenset[str]:
    """The names this run allows (``allow_env``: "A,B" as ``--config`` gives it, or a list)."""
    given = config.get("allow_env") or ()
    names = given.split(",") if isinstance(given, str) else given
    return frozenset(str(n).strip() for n in names if str(n).strip())


def refusal(env: Mapping[str, Any], allowed: frozenset[str]) -> tuple[str, str] | None:
    """(name, reason) of the first variable of ``env`` refused, unless ``allowed``; None
    when every one may be given."""
    for name in env:
        what = refused_because(name)
        if what is not None and name not in allowed:
            return name, (f"sets {what}; refused unless this run allows it (archbench run "
                          f"--allow-env {name}, or --config allow_env={name})")
    return None
