# jax_train.py: a small JAX training job for the real-GPU measurements (tools/gpu_checks_jax.sh).
#
#   python3 jax_train.py BATCH OUT
#
# Trains a 6-layer MLP (width 4096, GELU) for 5 jitted steps of Adam at batch BATCH, each step's
# input put on the device from the host, and writes OUT.json: JAX's own numbers for its device
# allocator (memory_stats(): bytes in use and reserved, their peaks, the pool, allocations) and
# the allocator settings of the environment (XLA_PYTHON_CLIENT_PREALLOCATE, _ALLOCATOR,
# _MEM_FRACTION).
import json
import os
import sys

import jax
import jax.numpy as jnp

WIDTH, LAYERS = 4096, 6


def init(key):
    params = []
    for k in jax.random.split(key, LAYERS):
        w = jax.random.normal(k, (WIDTH, WIDTH), jnp.float32) / WIDTH ** 0.5
        params.append((w, jnp.zeros((WIDTH,), jnp.float32)))
    return params


def loss_fn(params, x):
    for w, b in params:
        x = jax.nn.gelu(x @ w + b)
    return jnp.mean(x * x)


@jax.jit
def train_step(params, m, v, t, x):
    loss, grads = jax.value_and_grad(loss_fn)(params, x)
    m = jax.tree_util.tree_map(lambda a, g: 0.9 * a + 0.1 * g, m, grads)
    v = jax.tree_util.tree_map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grads)
    params = jax.tree_util.tree_map(lambda p, a, b: p - 1e-4 * (a / (1 - 0.9 ** t)) /
                                    (jnp.sqrt(b / (1 - 0.999 ** t)) + 1e-8), params, m, v)
    return params, m, v, loss


def main():
    batch, out = int(sys.argv[1]), sys.argv[2]
    dev = jax.devices()[0]
    if dev.platform != "gpu":
        sys.exit("jax_train.py: JAX sees no GPU (its first device is %s)" % dev)
    key = jax.random.PRNGKey(0)
    params = init(key)
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    host = jax.random.normal(jax.random.PRNGKey(1), (batch, WIDTH), jnp.float32)
    host = jax.device_get(host)
    for t in range(1, 6):
        x = jax.device_put(host, dev)
        params, m, v, loss = train_step(params, m, v, float(t), x)
        loss.block_until_ready()
    stats = dev.memory_stats() or {}
    result = {"batch": batch, "jax": jax.__version__, "device": dev.device_kind, "loss": float(loss),
              "env": {k: os.environ.get(k) for k in ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_ALLOCATOR",
                                                     "XLA_PYTHON_CLIENT_MEM_FRACTION")},
              "memory_stats": stats}
    with open(out + ".json", "w") as f:
        json.dump(result, f, indent=1)


main()
