# Container images: one per image variant used by a system with a container runtime.
# Built on a node of the system (its partition), so the image matches its architecture.


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
        slurm_partition=lambda w: image_systems()[w.image].get("partition", ""),
    shell:
        "({params.command} && sha256sum {output.image} | cut -d' ' -f1 > {output.digest}) > {log} 2>&1"
