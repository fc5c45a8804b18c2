"""The GPT-2 decoder (archbench.workloads.training.pytorch.gpt): GPT-2's parameter counts,
PaLM's FLOPs per token against PyTorch's FLOP counter, causality, the fused attention
against the plain formulation, and that it learns."""

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from archbench.core import metrics  # noqa: E402
from archbench.workloads.training.models import GPT  # noqa: E402
from archbench.workloads.training.pytorch import gpt  # noqa: E402


@pytest.mark.parametrize(("name", "parameters"), [
    ("gpt2_124m", 124_475_904),  # GPT-2 small at the padded vocabulary, tied embeddings
    ("gpt2_350m", 354_871_296),  # GPT-2 medium (354,823,168 at 50,257) + 47 x 1024 rows
    ("gpt_tiny", 16_102_912),
])
def test_parameters_are_gpt2s_and_the_shapes_count(name, parameters):
    with torch.device("meta"):
        model = gpt.build(name)
    assert sum(p.numel() for p in model.parameters()) == parameters
    assert GPT[name].parameters() == parameters
    assert GPT[name].parameters(position=False) == parameters - GPT[name].context * GPT[name].width
    assert model.output.weight is model.tokens.weight


def test_palm_flops_per_token_match_the_counted_training_step():
    """6 N + 12 L H Q T against FlopCounterMode over one forward and backward pass of
    gpt_tiny at its context, attention as plain matrix products (the math kernel): the
    formula leaves out only the biases' and norms' element-wise work."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    shape, t = GPT["gpt_tiny"], GPT["gpt_tiny"].context
    torch.manual_seed(0)
    model = gpt.build("gpt_tiny")
    ids = torch.randint(0, 256, (1, t))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        gpt.language_model_loss(model(ids), ids).backward()
    counted = counter.get_total_flops() / t
    formula = shape.training_flops_per_token(t)
    assert formula == metrics.model_flops_per_token(16_037_376, layers=4, heads=4, head_width=64,
                                                   sequence_length=256)
    assert counted == pytest.approx(formula, rel=2e-3)
    assert formula - 6 * shape.parameters(position=False) == 12 * 4 * 256 * 256


def test_attention_is_causal_and_the_fused_kernel_is_the_plain_formulation(monkeypatch):
    torch.manual_seed(1)
    model = gpt.build("gpt_tiny").eval()
    ids = torch.randint(0, 256, (2, 32))
    changed = ids.clone()
    changed[:, 20:] = (changed[:, 20:] + 7) % 256
    with torch.no_grad():
        fused, later = model(ids), model(changed)
        monkeypatch.setattr(gpt, "FUSED_ATTENTION", False)
        plain = model(ids)
    assert torch.allclose(fused[:, :20], later[:, :20], atol=1e-5)
    assert not torch.allclose(fused[:, 20:], later[:, 20:], atol=1e-3)
    assert torch.allclose(fused, plain, atol=1e-4)


def test_a_sequence_longer_than_the_context_is_refused():
    model = gpt.build("gpt_tiny")
    with pytest.raises(ValueError, match="longer than the model's context of 256"):
        model(torch.zeros((1, 257), dtype=torch.long))
    with pytest.raises(ValueError, match="unknown GPT model 'gpt_huge'"):
        gpt.build("gpt_huge")


def test_it_learns_a_repeated_sequence():
    """A few AdamW steps on one batch lower its next-token loss well below the start."""
    torch.manual_seed(2)
    model = gpt.build("gpt_tiny")
    ids = torch.randint(0, 256, (4, 65))
    inputs, targets = ids[:, :-1], ids[:, 1:]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    losses = []
    for _ in range(8):
        optimizer.zero_grad()
        loss = gpt.language_model_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[0] > 9.0
    assert losses[-1] < 0.7 * losses[0]


@pytest.mark.parametrize("name", ["gpt_tiny", "gpt2_124m"])
def test_the_keras_twin_has_the_same_parameters(name):
    from archbench.workloads.training.tensorflow import gpt as keras_gpt
    model = keras_gpt.build(name)
    assert sum(v.shape.num_elements() for v in model.trainable_variables) == GPT[name].parameters()


def test_keras_and_pytorch_compute_the_same_function_on_the_same_weights():
    """PyTorch's parameters copied into the Keras twin in order (Linear: transposed) give
    PyTorch's logits, the causal mask included."""
    import numpy as np

    from archbench.workloads.training.tensorflow import gpt as keras_gpt
    torch.manual_seed(0)
    torch_model = gpt.build("gpt_tiny").eval()
    keras_model = keras_gpt.build("gpt_tiny")
    named = list(torch_model.named_parameters())
    assert len(named) == len(keras_model.trainable_variables)
    for variable, (name, value) in zip(keras_model.trainable_variables, named):
        assert name.split(".")[-1] in ("weight", "bias") and variable.shape.num_elements() == value.numel()
        value = value.detach().numpy()
        variable.assign(value.T if value.ndim == 2 and "embedding" not in variable.name else value)
    ids = np.random.default_rng(0).integers(0, 256, (2, 40)).astype(np.int32)
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(ids).long()).numpy()
    got = keras_model(ids, training=False).numpy()
    assert np.abs(expected).max() > 0.1
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    targets = np.roll(ids, -1, axis=1)
    torch_loss = gpt.language_model_loss(torch.from_numpy(expected), torch.from_numpy(targets).long())
    assert float(keras_gpt.language_model_loss(targets, got)) == pytest.approx(float(torch_loss), rel=1e-5)
