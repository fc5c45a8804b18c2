# Container images: one per image a system runs. Built from containers/<image>.def, or
# pulled once from a system's image_uri (a prebuilt image given by path needs no rule).
# Built or pulled on a node of the system (its partition), so the image matches its
# architecture. Each image's sha256 is written beside it and carried into every record.


wildcard_constraints:
    image=r"(?!pulled-)[A-Za-z0-9_.-]+",
    name=r"[A-Za-z0-9_.-]+",


rule build_image:
    input:
        definition="containers/{image}.def",
    output:
        image="results/images/{image}.sif",
        digest="results/images/{image}.sha256",
    log:
        "logs/build_image/{image}.log",
    params:
        command=get_build_command,
    resources:
        runtime=120,
        slurm_partition=lambda w: get_image_partition(f"results/images/{w.image}.sif"),
    shell:
        "({params.command} && sha256sum {output.image} | cut -d' ' -f1 > {output.digest}) > {log} 2>&1"


# charliecloud: archbench.execute.imagebuild runs the definition's steps (as root) into a SquashFS
# image that ch-run runs; it writes the digest file itself.
rule build_image_squashfs:
    input:
        definition="containers/{image}.def",
    output:
        image="results/images/{image}.sqfs",
        digest="results/images/{image}.sha256",
    log:
        "logs/build_image/{image}.log",
    params:
        command=get_build_command,
    resources:
        runtime=120,
        slurm_partition=lambda w: get_image_partition(f"results/images/{w.image}.sqfs"),
    shell:
        "{params.command} > {log} 2>&1"


rule pull_image:
    output:
        image="results/images/pulled-{name}.sif",
        digest="results/images/pulled-{name}.sha256",
    log:
        "logs/pull_image/{name}.log",
    params:
        command=get_pull_command,
    resources:
        runtime=60,
        slurm_partition=lambda w: get_image_partition(f"results/images/pulled-{w.name}.sif"),
    shell:
        "({params.command} && sha256sum {output.image} | cut -d' ' -f1 > {output.digest}) > {log} 2>&1"


use rule pull_image as pull_image_squashfs with:
    output:
        image="results/images/pulled-{name}.sqfs",
        digest="results/images/pulled-{name}.sha256",
    resources:
        runtime=60,
        slurm_partition=lambda w: get_image_partition(f"results/images/pulled-{w.name}.sqfs"),
