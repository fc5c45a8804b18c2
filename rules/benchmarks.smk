# One job per measurement: the supervisor runs the benchmark and always leaves a record.
# No conda:/container: directive: each measurement runs inside its system's image through
# the supervisor (archbench.run), with srun/mpirun outside it (see scripts/lint_workflow.sh).


# Not when regenerating (`paper`): the records on disk are then plain inputs, never rerun.
if not REGENERATE_ONLY:

    rule run_measurement:
        input:
            # image, best (the listing of sweep records a `best` run chooses from), data, and
            # anchor (repetition 0's record, whose nodes a same_nodes repetition runs on)
            unpack(get_measurement_inputs),
        output:
            record=RECORD_PATTERN,
        log:
            supervisor="logs/run_measurement/{system}/{experiment}/{config_id}/rep{rep}.log",
            worker="logs/run_measurement/{system}/{experiment}/{config_id}/rep{rep}.worker.log",
        params:
            # the digest of what the supervisor runs (its file in SPEC_DIR): a changed spec
            # reruns the job
            spec=get_spec,
        threads: get_threads
        # measurements_per_job > 1: up to that many measurements share one Slurm job, one at a time
        group: get_batch_group if BATCH_GROUPS else None
        # every key of archbench.plan.submission.job_resources (nodes, tasks, cpus_per_task, mem_mb,
        # runtime, partition, account, the system's placement keys constraint, qos and
        # slurm_extra; mpi="srun" for multi-rank jobs: the Slurm executor then runs the job's
        # command in the batch step, where the launcher's srun spans every node; GPU runs'
        # gres or gpu, gpu_model, tasks_per_gpu from archbench.plan.slurm_requests.gpu_resources)
        resources:
            **measurement_resources(),
        shell:
            f"python -m archbench.run --spec-file {SPEC_DIR}/{{params.spec}}.json --output {{output.record}}"
            " --log {log.worker} > {log.supervisor} 2>&1"


rule make_tfrecords:
    output:
        directory(GENERATED_TFRECORDS),
    log:
        "logs/make_tfrecords/tfrecords.log",
    params:
        images=256,
        image_size=64,
        shards=4,
    shell:
        "python -m archbench.data make-tfrecords --out {output} --images {params.images}"
        " --image-size {params.image_size} --shards {params.shards} > {log} 2>&1"


# The layout a `best` experiment runs, chosen from its sweep's records once per system and
# experiment: its measurements depend on this file, not each on every sweep record, and
# the supervisor reads the layout from it (it runs no analysis itself).
rule choose_best_layouts:
    localrule: True
    input:
        records=get_sweep_records,
    output:
        layouts="results/best/{system}/{experiment}.json",
    log:
        "logs/choose_best_layouts/{system}/{experiment}.log",
    params:
        statistic=config.get("statistic", "mean"),
    run:
        rule_bodies.choose_best_layouts(CAMPAIGN_DAG, input, output, params=params, log=log)


# A tuner's round (experiment type tune): tell the study the previous round's records,
# ask it for this round's trials, and write what each of the round's measurements runs.
# Not when regenerating: asking changes the study.
if not REGENERATE_ONLY:

    rule tune_round:
        localrule: True
        input:
            unpack(get_tune_round_inputs),
        output:
            trials="results/tune/{system}/{experiment}/{study}/round{round}.json",
        log:
            "logs/tune_round/{system}/{experiment}/{study}/round{round}.log",
        run:
            rule_bodies.tune_round(CAMPAIGN_DAG, input, output, log=log)

    # After a study's last round: its top-rung trials complete in the study, and what it
    # found (best trial, point, img/s; trials per state) is written beside the rounds.
    rule tune_best:
        localrule: True
        input:
            unpack(get_tune_best_inputs),
        output:
            best="results/tune/{system}/{experiment}/{study}/best.json",
        log:
            "logs/tune_best/{system}/{experiment}/{study}.log",
        run:
            rule_bodies.tune_best(CAMPAIGN_DAG, input, output, log=log)
