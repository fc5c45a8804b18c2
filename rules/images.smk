# Container images: one per image variant used by a system with a container runtime.
# Built on a node of the system (its partition), so the image matches its architecture.
from archbench.containers import build_command, shell_join


def image_systems():
    """image variant -> the first system that runs it inside a container."""
    images = {}
    for name, system in SYSTEMS.items():
        if system["container_runtime"] != "none" and system.get("image"):
            images.setdefault(system["image"], system)
    return images


def get_image_for_measurement(wildcards):
    """The image a measurement runs in ([] for runtime none)."""
    system = SYSTEMS[get_measurement(wildcards)["system"]]
    if system["container_runtime"] == "none":
        return []
    return f"results/images/{system['image']}.sif"


def get_build_command(wildcards, output):
    system = image_systems()[wildcards.image]
    return shell_join(build_command(system["container_runtime"],
                                    f"containers/{wildcards.image}.def", output.image))


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
