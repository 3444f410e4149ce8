#!/usr/bin/env python3
"""A small JAX program of the kinds users run, as a subject for the analysis tools.

jit-compiled matmuls and a lax.scan, with XLA's default device-memory preallocation (75% of the
GPU's memory taken at start). It prints rounded figures that depend on every step and exits 0;
without jax or a GPU it says why and exits 77.
Usage: jax_program.py [--steps N]
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50, help="scan steps (default 50)")
    args = ap.parse_args()
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        print(f"jax_program: skipped: jax is not importable ({e})")
        return 77
    if not any(d.platform == "gpu" for d in jax.devices()):
        print("jax_program: skipped: no GPU device for jax")
        return 77

    @jax.jit
    def chain(a, b):
        for _ in range(4):
            a = jnp.tanh(a @ b)
        return a

    @jax.jit
    def scan(x, w):
        def step(carry, _):
            carry = jnp.tanh(carry @ w) + 0.5 * carry
            return carry, carry.mean()
        return jax.lax.scan(step, x, None, length=args.steps)

    key = jax.random.PRNGKey(0)
    ka, kb, kx, kw = jax.random.split(key, 4)
    a = jax.random.normal(ka, (2048, 2048), jnp.float32) / 45
    b = jax.random.normal(kb, (2048, 2048), jnp.float32) / 45
    out = None
    for _ in range(20):
        out = chain(a, b)
    x = jax.random.normal(kx, (256, 1024), jnp.float32)
    w = jax.random.normal(kw, (1024, 1024), jnp.float32) / 32
    final, means = scan(x, w)
    print(f"chain mean {float(jnp.abs(out).mean()):.3f}")
    print(f"scan steps {means.shape[0]} final mean {float(jnp.abs(final).mean()):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
