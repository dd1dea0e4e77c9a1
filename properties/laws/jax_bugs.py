"""Bugs in JAX 0.10.2 the laws found, each with its minimal program.

A :class:`JaxBug` is declared on the laws that can draw it (``Law.jax_bugs`` in
``properties/laws/__init__.py``); ``suites/test_negative.py`` runs every declared
bug's ``reproduce`` as a strict xfail, so a JAX release that fixes one makes that
test fail and the bug's filter (or the strategy's detour) can go.  ``reproduce``
compares JAX's result with an independent reference and raises when they differ.

``handled`` says how the laws live with the bug: ``"filtered"`` -- the law discards
exactly the affected cases on JAX and on backends built on it (:func:`built_on_jax`;
the predicates are in ``named.KNOWN_JAX_BUGS``,
keyed by the bug's description); ``"recognised"`` -- a crash whose message holds the
bug's ``error`` text discards the case there, in every law (``Law.__call__``; a crash
inside XLA cannot be told from its program more precisely than by its message);
``"avoided"`` -- the strategies never draw the failing form, or the law skips that one
check on JAX.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


#: a backend module that sets this attribute to "jax" says it is built on JAX
BUILT_ON = "__built_on__"


def built_on_jax(backend):
    """Whether JAX's known bugs are the backend's too, so the filters of ``"filtered"``
    bugs apply: the backend is JAX, a wrapper of its module (properties/broken.py), or a
    module declaring ``__built_on__ = "jax"``.  A wrapper that declares nothing still has
    a failure JAX shares reported as inherited: the runner replays failing cases on the
    reference and JAX filters them there."""
    import jax
    module = backend.module
    return module is jax or getattr(module, BUILT_ON, None) == "jax"


@dataclass(frozen=True)
class JaxBug:
    description: str
    reproduce: Callable[[], None]   # raises (AssertionError or JAX's own error) while the bug lives
    handled: str                    # "filtered", "recognised" or "avoided"
    error: str = ""                 # "recognised": text of the crash's message that marks it

    def __post_init__(self):
        if self.handled not in ("filtered", "recognised", "avoided"):
            raise ValueError("JaxBug.handled is 'filtered', 'recognised' or 'avoided', "
                             f"got {self.handled!r}")
        if (self.handled == "recognised") != bool(self.error):
            raise ValueError("JaxBug.error is given exactly for a 'recognised' bug")

    def recognises(self, exc):
        """Whether ``exc`` is this bug's crash."""
        return self.handled == "recognised" and self.error in str(exc)


def _all_to_all_of_unbatched():
    import jax
    import numpy as np
    from jax import lax
    f = jax.vmap(lambda v: lax.all_to_all(v, "i", 0, 0, tiled=False), in_axes=None, axis_size=2,
                 axis_name="i")
    got = np.asarray(f(np.array([0.5, 1.5])))
    # member r receives element r of every member: [[0.5, 0.5], [1.5, 1.5]]
    np.testing.assert_array_equal(got, np.array([[0.5, 0.5], [1.5, 1.5]]))


def _all_to_all_transpose_per_member():
    import jax
    import numpy as np
    from jax import lax

    def member_vjp(v, c):  # each member's own vjp: all_to_all's transpose rule runs
        return jax.vjp(lambda v: lax.all_to_all(v, "i", 1, 0, tiled=False), v)[1](c)[0]
    x = np.arange(12.0).reshape(2, 3, 2)   # 2 members, each (3, 2): split axis 1, size 2
    c = np.arange(12.0).reshape(2, 2, 3)   # each member's output is (2, 3)
    got = np.asarray(jax.vmap(member_vjp, axis_name="i")(x, c))  # JAX: ValueError on the cotangent type
    # the transpose of "member r receives slice r of every member" sends slice s of the
    # cotangent back to member s: x-shaped, got[r, :, s] = c[s, r, :]
    np.testing.assert_array_equal(got, np.einsum("srk->rks", c))


def _psum_scatter_inside_inner_axis():
    import jax
    import numpy as np
    from jax import lax
    # members (i, j) of 2 x 1; member (i, j) holds x[i, :, j] (the inner vmap reads axis 1)
    x = np.arange(4.0).reshape(2, 2, 1)
    scatter = jax.vmap(lambda v: lax.psum_scatter(v, "i", tiled=False), in_axes=1, axis_name="j")
    got = jax.vmap(scatter, axis_name="i")(x)  # JAX: IndexError
    # member i receives element i of the sum over the members: x.sum(0)[i, j]
    np.testing.assert_array_equal(np.asarray(got), x.sum(0))


def _clamp_scalar_bound_jvp():
    import jax
    import numpy as np
    from jax import lax
    # lo = 0.5 (tangent 1) clamps x[0]; x[1] is inside (tangent 1); hi = 2 (constant) clamps x[2]
    _, t = jax.jvp(lambda lo, x: lax.clamp(lo, x, 2.0), (0.5, np.array([0.0, 1.0, 3.0])),
                   (1.0, np.ones(3)))   # JAX: TypeError (select cases must have the same shapes)
    np.testing.assert_array_equal(np.asarray(t), [1.0, 1.0, 0.0])


def _dynamic_update_slice_of_own_slice():
    import jax
    import numpy as np
    from jax import lax
    x = np.array([0.0, 1.0, 2.0], np.float32)
    got = jax.jit(lambda x: lax.dynamic_update_slice(x, x[:2], (1,))[None])(x)   # XLA CPU: [[0, 0, 0]]
    # x[1:3] = (old) x[0:2]: [0, 0, 1], which JAX gives eagerly and without the [None]
    np.testing.assert_array_equal(np.asarray(got), [[0.0, 0.0, 1.0]])


def _clz_of_negative_constant():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    got = int(jax.jit(lambda: lax.clz(jnp.int32(-2)))())   # XLA folds the constant: -32
    # NumPy: -2 as int32 has its sign bit set, so it has no leading zeros (the same
    # clz of an argument, not a constant, gives 0 in JAX too)
    bits = np.binary_repr(np.int32(-2), width=32)
    assert got == len(bits) - len(bits.lstrip("0")), got


def _fft_layout_after_scatter_and_linalg():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    def f(x):   # x of shape (2, 1, 1): two 1x1 matrices L, solving L y = 1
        m = jnp.fft.fft(x, axis=0).real.at[jnp.array([0])].set(0.25) + 2.0
        return lax.linalg.triangular_solve(m, jnp.ones((2, 1, 1)), left_side=True, lower=True).sum()
    got = jax.jit(jax.grad(f))(np.zeros((2, 1, 1), np.float32))  # XLA CPU: RET_CHECK in fft_thunk
    # f = 1/2.25 + 1/(x0 - x1 + 2) (the fft's second row is x0 - x1): at 0 the gradient is
    # (-1/4, 1/4), which JAX's eager grad gives
    np.testing.assert_allclose(np.ravel(got), [-0.25, 0.25], rtol=1e-6)


def _reduce_jvp_with_a_zero_tangent():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    def f(x):   # the complex product of (1 + x/8) + i c over x's two elements, c constant
        re, im = 1.0 + 0.125 * x, jnp.asarray([0.5, 1.0], jnp.float32)
        r = lax.reduce((re, im), (jnp.float32(1), jnp.float32(0)),
                       lambda p, q: (p[0] * q[0] - p[1] * q[1], p[0] * q[1] + p[1] * q[0]), (0,))
        return r[0] + 0.5 * r[1]
    x = np.array([0.5, 1.0], np.float32)
    _, t = jax.jvp(f, (x,), (np.ones(2, np.float32),))   # JAX: TypeError (reshape of a Zero)
    # by hand: re = (17/16, 9/8); d re_i = 1/8; d Re = (9/8 + 17/16) / 8 = 35/128,
    # d Im = (1 + 1/2) / 8 = 3/16, so the tangent is 35/128 + 3/32 = 47/128
    np.testing.assert_allclose(float(t), 47 / 128, rtol=1e-6)


def _dynamic_update_slice_weak_under_vmap():
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f(x):   # a weakly typed operand, a strongly typed update
        x = jnp.asarray(x)
        return lax.dynamic_update_slice(x, jnp.asarray(0.25, x.dtype), ())
    with jax.enable_x64(True):
        eager, batched = f(0.5), jax.vmap(f)(jnp.broadcast_to(0.5, (1,)))
        # eagerly and under jit the result is strongly typed, as the update makes it
        assert not jax.typeof(eager).weak_type and not jax.typeof(jax.jit(f)(0.5)).weak_type
        assert jax.typeof(batched).weak_type == jax.typeof(eager).weak_type, jax.typeof(batched)


def _shard_map_all_to_all_transpose():
    import subprocess
    import sys
    source = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, numpy as np
from jax import lax
from jax.sharding import AxisType, PartitionSpec as P
mesh = jax.make_mesh((2,), ("y",), axis_types=(AxisType.Auto,))
f = jax.shard_map(lambda v: lax.all_to_all(v, "y", 1, 0, tiled=False), mesh=mesh,
                  in_specs=P("y"), out_specs=P("y"))
x = np.arange(8.0).reshape(4, 2)
y = f(x)
ct = jax.vjp(f, x)[1](np.ones_like(y))[0]   # JAX: ValueError, cotangent [2,1,2] for [1,2,2]
np.testing.assert_array_equal(np.asarray(ct), np.ones((4, 2)))
"""
    run = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                         timeout=300)
    if run.returncode:
        raise ValueError(run.stderr.strip().splitlines()[-1])


def _at_update_of_resharded_replicated_value():
    import subprocess
    import sys
    source = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, numpy as np
from jax.sharding import AxisType, PartitionSpec as P
mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
x = np.arange(8.0, dtype=np.float32)
with jax.set_mesh(mesh):
    f = jax.jit(lambda a: jax.sharding.reshard(a, P("x")).at[0].set(-1.0, out_sharding=P()))
    got = f(jax.device_put(x, P()))   # JAX: [-1, 1, 2, 3, 0, 5, 6, 7]
np.testing.assert_array_equal(np.asarray(got), [-1.0, 1, 2, 3, 4, 5, 6, 7])
"""
    run = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                         timeout=300)
    if run.returncode:
        raise ValueError(run.stderr.strip().splitlines()[-1])


def _checkpoint_saveable_policy_complex():
    import jax
    from jax import lax
    # f(x) = real((x + ix)(x + 2ix)) = -x^2: f'(0.5) = -1 (by hand, independent of JAX)
    f = jax.checkpoint(lambda x: lax.real(lax.complex(x, x) * lax.complex(x, 2.0 * x)),
                       policy=jax.checkpoint_policies.everything_saveable)
    got = jax.grad(f)(0.5)   # JAX: TypeError (reduce_precision does not accept dtype complex64)
    assert abs(float(got) + 1.0) < 1e-6, got


def _jacrev_allow_int_of_bool():
    import jax
    import numpy as np
    # jacrev's docstring: the derivative in an integer input has the trivial dtype float0
    # (as grad's: jax.grad(f, argnums=1, allow_int=True)(1.0, True) is float0 of shape ())
    jac = jax.jacrev(lambda x, c: x * c, argnums=1, allow_int=True)(1.0, np.bool_(True))  # TypeError
    assert np.asarray(jac).dtype == jax.dtypes.float0 and np.shape(jac) == (), jac



def _one_device_mesh(axis_type):
    import jax
    from jax.sharding import AxisType
    return jax.make_mesh((1,), ("x",), axis_types=(getattr(AxisType, axis_type),))


def _pbroadcast_on_cpu():
    import jax
    import numpy as np
    from jax import lax
    from jax.sharding import PartitionSpec as P
    f = jax.shard_map(lambda v: lax.pbroadcast(v, "x", source=0), mesh=_one_device_mesh("Auto"),
                      in_specs=P("x"), out_specs=P("x"))
    x = np.array([0.5, 1.5])
    # JAX: NotImplementedError, no MLIR translation rule for pbroadcast on cpu
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(x)), x)   # one device: its own value


def _eager_unreduced_psum():
    import jax
    import numpy as np
    from jax import lax
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = _one_device_mesh("Explicit")
    f = jax.shard_map(lambda v: lax.psum(lax.pcast(v, "x", to="unreduced"), "x"), mesh=mesh,
                      in_specs=P("x"), out_specs=P())
    x = jax.sharding.reshard(np.array([0.5, 1.5]), NamedSharding(mesh, P("x")))
    # JAX: AssertionError (expected last op to be sdy.sharding_constraint); under jit it works
    np.testing.assert_array_equal(np.asarray(f(x)), [0.5, 1.5])   # the sum over one device

ALL_TO_ALL_OF_UNBATCHED = JaxBug(
    "all_to_all of a value unbatched over its axis returns a wrong shape under vmap",
    _all_to_all_of_unbatched, "filtered")
ALL_TO_ALL_TRANSPOSE_IN_VMAP = JaxBug(
    "the transpose of an untiled all_to_all whose split and concat axes differ has the wrong "
    "shape inside vmap", _all_to_all_transpose_per_member, "filtered")
PSUM_SCATTER_INSIDE_INNER_AXIS = JaxBug(
    "an untiled psum_scatter over an outer vmap axis fails when an inner vmap batches its "
    "operand along a nonzero axis (all_gather's transpose too)", _psum_scatter_inside_inner_axis,
    "filtered")
#: every named-axis law draws the programs these three need
NAMED_AXIS_BUGS = (ALL_TO_ALL_OF_UNBATCHED, ALL_TO_ALL_TRANSPOSE_IN_VMAP,
                   PSUM_SCATTER_INSIDE_INNER_AXIS)

DYNAMIC_UPDATE_SLICE_OF_OWN_SLICE = JaxBug(
    "jit of a dynamic_update_slice whose update is a slice of its own operand, then reshaped, gives "
    "a wrong value on CPU (strategies.ops.DynamicUpdateSlice draws updates independent of the operand)",
    _dynamic_update_slice_of_own_slice, "avoided")
DYNAMIC_UPDATE_SLICE_WEAK_UNDER_VMAP = JaxBug(
    "vmap of lax.dynamic_update_slice of a weakly typed operand by a strongly typed update "
    "gives a weakly typed result, where eager evaluation and jit give a strong one "
    "(result_types_agree_across_transformations compares only shape and dtype under vmap "
    "on JAX for such programs)", _dynamic_update_slice_weak_under_vmap, "avoided")
FFT_LAYOUT_AFTER_SCATTER_AND_LINALG = JaxBug(
    "jit of grad of an fft along the leading axis of an array whose other axes have size 1, "
    "scattered into and then given to a linalg routine (cholesky, qr, inv, triangular_solve, "
    "eigh), fails in XLA:CPU's fft (RET_CHECK on the operand's layout)",
    _fft_layout_after_scatter_and_linalg, "recognised",
    error="fft_thunk.cc:168) LayoutUtil::IsMonotonicWithDim0Major")
REDUCE_JVP_WITH_A_ZERO_TANGENT = JaxBug(
    "jvp of lax.reduce of several operands, one of them with a symbolic-zero tangent (a "
    "constant, or computed by piecewise-constant ops), raises TypeError: its jvp rule "
    "reshapes the Zero", _reduce_jvp_with_a_zero_tangent, "recognised",
    error="Error interpreting argument to reshape as a JAX value. The problematic value is "
          "of type <class 'jax._src.ad_util.Zero'>")
#: the bugs every law recognises by their crash's message
RECOGNISED = (FFT_LAYOUT_AFTER_SCATTER_AND_LINALG, REDUCE_JVP_WITH_A_ZERO_TANGENT)
CLZ_OF_NEGATIVE_CONSTANT = JaxBug(
    "jit of lax.clz of a negative int8/int16/int32 constant gives bits - 64 instead of 0 (XLA's "
    "constant folding; strategies.ops draws clz of the integer's bits as uint32)",
    _clz_of_negative_constant, "avoided")
CLAMP_SCALAR_BOUND_JVP = JaxBug(
    "jvp of lax.clamp with a traced scalar bound and an array operand raises TypeError "
    "(strategies.ops.Clamp draws traced bounds of the operand's shape only)", _clamp_scalar_bound_jvp,
    "avoided")
SHARD_MAP_ALL_TO_ALL_TRANSPOSE = JaxBug(
    "vjp of shard_map through an untiled all_to_all whose split and concat axes differ raises "
    "ValueError (shard_map_matches_reference skips its vjp check on JAX for such bodies)",
    _shard_map_all_to_all_transpose, "avoided")
PBROADCAST_ON_CPU = JaxBug(
    "pbroadcast has no lowering on CPU (NotImplementedError: JAX lowers it on GPU only; "
    "one_device_shard_map_matches_reference discards the bodies with one on JAX)",
    _pbroadcast_on_cpu, "avoided")
EAGER_UNREDUCED_PSUM = JaxBug(
    "shard_map of a value unreduced over a manual axis fails eagerly (AssertionError in its "
    "lowering; under jit it works: one_device_shard_map_matches_reference evaluates under jit)",
    _eager_unreduced_psum, "avoided")
AT_UPDATE_OF_RESHARDED_VALUE = JaxBug(
    "jit of an .at[] update given out_sharding= of a replicated value resharded inside the "
    "program writes the operand's first element into the first element of the other blocks "
    "(explicit_sharding_matches_jax discards such at[] updates on JAX)",
    _at_update_of_resharded_replicated_value, "avoided")
CHECKPOINT_SAVEABLE_POLICY_COMPLEX = JaxBug(
    "grad of checkpoint with policy everything_saveable or save_anything_except_these_names "
    "raises TypeError on a complex intermediate value (strategies.stacks draws those policies "
    "only over real values)", _checkpoint_saveable_policy_complex, "avoided")
JACREV_ALLOW_INT_OF_BOOL = JaxBug(
    "jacrev(allow_int=True) in a bool argument raises TypeError (strategies.stacks draws "
    "jacrev's allow_int over integer arguments only)", _jacrev_allow_int_of_bool, "avoided")
