"""The GPT-2 decoder in Keras (tf_keras), the twin of
:mod:`archbench.workloads.training.pytorch.gpt`: the same
:class:`~archbench.workloads.training.models.GPTShape`, the same parameters in the same
order (given PyTorch's weights it gives PyTorch's logits, tested), the output projection
tied to the token embedding, GPT-2's tanh GELU and PyTorch's layer-norm epsilon (1e-5).
Keras has no fused attention kernel: the causal attention is the plain formulation (XLA
fuses it when the graph is compiled).
"""

from __future__ import annotations

from functools import lru_cache

from archbench.workloads.training.models import GPT
from archbench.workloads.training.tensorflow.models import keras, transformer_layers

EPSILON = 1e-5  # torch.nn.LayerNorm's


@lru_cache(maxsize=None)
def _layers():
    """The layers Keras lacks beside the ViT's attention (its ``causal`` form, from one fused
    q/k/v projection): learned positions, and the output projection through the token
    embedding's matrix."""
    import tensorflow as tf
    k = keras()

    class Positions(k.layers.Layer):
        """Adds the learned embedding of each position (at most ``context``)."""

        def __init__(self, context: int, **kwargs):
            super().__init__(**kwargs)
            self.context = context

        def build(self, shape):
            self.embeddings = self.add_weight(name="embeddings", shape=(self.context, shape[-1]),
                                              initializer=k.initializers.RandomNormal(stddev=0.02))

        def call(self, x):
            return x + tf.cast(self.embeddings[:tf.shape(x)[1]], x.dtype)

        def get_config(self):
            return {**super().get_config(), "context": self.context}

    class TiedOutput(k.layers.Layer):
        """Logits through the token embedding's matrix (no weights of its own, no bias)."""

        def __init__(self, embedding, **kwargs):
            super().__init__(**kwargs)
            self.embedding = embedding

        def call(self, x):
            return tf.matmul(x, tf.cast(self.embedding.embeddings, x.dtype), transpose_b=True)

    return Positions, TiedOutput


def build(name: str):
    """The Keras GPT model ``name`` of :data:`GPT`: token ids (batch, T) to logits
    (batch, T, vocabulary), random weights (GPT-2's normal 0.02, residual projections
    scaled by 1 / sqrt(2 L))."""
    if name not in GPT:
        raise ValueError(f"unknown GPT model '{name}' (known: {', '.join(GPT)})")
    shape = GPT[name]
    k = keras()
    L = k.layers
    Positions, TiedOutput = _layers()
    _, SelfAttention = transformer_layers()

    def dense(units: int, std: float = 0.02, **options):
        return L.Dense(units, kernel_initializer=k.initializers.RandomNormal(stddev=std), **options)
    residual = 0.02 / (2 * shape.layers) ** 0.5
    ids = L.Input(shape=(None,), dtype="int32")
    embedding = L.Embedding(shape.vocabulary, shape.width, name="tokens",
                            embeddings_initializer=k.initializers.RandomNormal(stddev=0.02))
    x = Positions(shape.context, name="positions")(embedding(ids))
    for i in range(shape.layers):
        y = L.LayerNormalization(epsilon=EPSILON, name=f"block{i}_norm1")(x)
        y = SelfAttention(shape.heads, causal=True, name=f"block{i}_attention")(
            dense(3 * shape.width, name=f"block{i}_qkv")(y))
        x = L.Add()([x, dense(shape.width, residual, name=f"block{i}_proj")(y)])
        y = L.LayerNormalization(epsilon=EPSILON, name=f"block{i}_norm2")(x)
        y = dense(4 * shape.width, name=f"block{i}_fc1")(y)
        y = L.Activation(lambda v: k.activations.gelu(v, approximate=True), name=f"block{i}_gelu")(y)
        x = L.Add()([x, dense(shape.width, residual, name=f"block{i}_fc2")(y)])
    x = L.LayerNormalization(epsilon=EPSILON, name="norm")(x)
    return k.Model(ids, TiedOutput(embedding, name="output")(x), name=name)


def language_model_loss(targets, logits):
    """Mean next-token cross-entropy (Keras's argument order: targets first)."""
    import tensorflow as tf
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=targets, logits=tf.cast(logits, tf.float32)))
