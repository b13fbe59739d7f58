"""What a traced program sees, against what eager code sees. Not a measurement: a printout.

jax.jit runs the Python function once with tracers (abstract values: shape and dtype, no data)
and records the operations; eager PyTorch runs the same Python on real numbers, every call.
Runs on a CPU in a few seconds: python _tracing_demo.py
"""

# --8<-- [start:setup]
import jax
import jax.numpy as jnp
import torch

jax.config.update("jax_platforms", "cpu")  # a printout: the CPU is enough
# --8<-- [end:setup]


# --8<-- [start:print]
def scale(x):
    print("  inside scale, x is:", x)
    return x * 2


print("jax.jit(scale), called twice:")
jitted = jax.jit(scale)
jitted(jnp.arange(3.0))
jitted(jnp.arange(3.0) + 1)  # same shape and dtype: no trace, no print

print("eager PyTorch, called twice:")
scale(torch.arange(3.0))
scale(torch.arange(3.0) + 1)
# --8<-- [end:print]


# --8<-- [start:branch]
def relu_of_sum(x):
    s = x.sum()
    if s > 0:  # Python control flow on a value that, under jit, is not known yet
        return s
    return 0 * s


print("jax.jit(relu_of_sum):")
try:
    jax.jit(relu_of_sum)(jnp.arange(3.0))
except jax.errors.ConcretizationTypeError as exc:
    print(f"  {type(exc).__name__}: {str(exc).splitlines()[0]}")

print("jax.jit of the traceable form, jnp.where:")
print("  result:", jax.jit(lambda x: jnp.where(x.sum() > 0, x.sum(), 0.0))(jnp.arange(3.0)))

print("eager PyTorch, the same Python:")
print("  result:", relu_of_sum(torch.arange(3.0)))
# --8<-- [end:branch]
