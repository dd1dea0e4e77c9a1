"""jax.nn.dot_product_attention, its 'xla' implementation: softmax(q k^T * scale + bias,
masked) v per head, with grouped key/value heads (GQA/MQA), written with impl.numpy."""
from __future__ import annotations

import numpy as np

from impl import lax
from impl import numpy as inp
from impl.core import get_aval
from impl.scipy.special import _softmax, logsumexp


def _to_4d(x):
    x = inp.asarray(x)
    missing = 4 - get_aval(x).ndim
    return inp.expand_dims(x, tuple(range(missing))) if missing > 0 else x


def _check(name, x, shape, dtype):
    """x has len(shape) axes, the sizes in shape that are not -1 and (if given) dtype."""
    if x is None:
        return
    aval = get_aval(x)
    if aval.ndim != len(shape):
        raise ValueError(f"{name} ndim should be {len(shape)}, but got {aval.ndim}")
    if dtype is not None and aval.dtype != dtype:
        raise ValueError(f"{name} dtype should be {dtype}, but got {aval.dtype}")
    if any(want not in (-1, got) for want, got in zip(shape, aval.shape)):
        raise ValueError(f"{name} shape should be {list(shape)}: but got {aval.shape}")


def _grouped(t, kv_heads, groups):
    """A (B, N, T, S) bias or mask as (B, K, G, T, S): head n = k * G + g."""
    if t is None:
        return None
    b, n, tq, s = get_aval(t).shape
    if n == 1:
        return inp.expand_dims(t, 2)
    return inp.reshape(t, (b, kv_heads, groups, tq, s))


def _allowed(t_len, s_len, is_causal, local_window_size, q_seqlen, kv_seqlen):
    """The (B or 1, 1, 1, T, S) mask of the query/key pairs that may attend, or None."""
    allowed = None

    def both(mask):
        return mask if allowed is None else inp.logical_and(allowed, mask)
    q_pos = np.arange(t_len)[:, None]
    k_pos = np.arange(s_len)[None, :]
    if is_causal:
        allowed = both(inp.asarray(q_pos >= k_pos))
    if local_window_size is not None:
        left, right = local_window_size
        allowed = both(inp.asarray((q_pos <= k_pos + left) & (q_pos >= k_pos - right)))
    if allowed is not None:
        allowed = allowed[None]
    if q_seqlen is not None:
        allowed = both(inp.less(q_pos[None], q_seqlen[:, None, None]))
    if kv_seqlen is not None:
        allowed = both(inp.less(k_pos[None], kv_seqlen[:, None, None]))
    return None if allowed is None else allowed[:, None, None]


def _attention_xla(query, key, value, bias, mask, *, is_causal, scale, q_seqlen, kv_seqlen,
                   local_window_size, return_residual):
    batch, t_len, heads, head_dim = get_aval(query).shape
    _, s_len, kv_heads, _ = get_aval(key).shape
    groups = heads // kv_heads
    q = inp.reshape(query, (batch, t_len, kv_heads, groups, head_dim))
    logits_dtype = inp.promote_types(get_aval(query).dtype, np.float32)
    logits = inp.einsum("BTKGH,BSKH->BKGTS", q, key, preferred_element_type=logits_dtype)
    logits = inp.multiply(logits, inp.array(scale, dtype=logits_dtype))
    if bias is not None:
        logits = inp.astype(inp.add(logits, _grouped(bias, kv_heads, groups)), logits_dtype)
    allowed = _allowed(t_len, s_len, is_causal, local_window_size, q_seqlen, kv_seqlen)
    if mask is not None:
        mask = _grouped(mask, kv_heads, groups)
        allowed = mask if allowed is None else inp.logical_and(mask, allowed)
    if allowed is not None:
        # a large finite negative (not -inf: rows with no allowed key stay finite), in
        # float32's range since the softmax runs in float32
        limit = min(float(inp.finfo(logits_dtype).max), float(np.finfo(np.float32).max))
        logits = inp.where(allowed, logits, inp.array(-0.7 * limit, logits_dtype))
    logits = inp.astype(logits, np.float32)
    probs = inp.astype(_softmax(logits, -1, None), get_aval(key).dtype)
    encoded = inp.einsum("BKGTS,BSKH->BTKGH", probs, value)
    if q_seqlen is not None:
        valid = inp.less(np.arange(t_len)[None], q_seqlen[:, None])
        encoded = inp.multiply(encoded, inp.astype(valid, get_aval(encoded).dtype)[
            :, :, None, None, None])
    encoded = inp.reshape(encoded, (batch, t_len, heads, head_dim))
    if not return_residual:
        return encoded
    lse = inp.astype(logsumexp(logits, axis=-1), get_aval(key).dtype)   # (B, K, G, T)
    lse = inp.reshape(inp.transpose(lse, (0, 3, 1, 2)), (batch, t_len, heads))
    return encoded, lax.stop_gradient(lse)


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual=False):
    """softmax(q k^T * scale + bias) v per head, rows of shape (B, T, N, H) or (T, N, H);
    keys and values have K heads, N a multiple of K. `mask` (True: attend),
    `is_causal`, `local_window_size` and the sequence lengths exclude pairs."""
    output_shape = get_aval(inp.asarray(query)).shape
    query, key, value = _to_4d(query), _to_4d(key), _to_4d(value)
    bias = None if bias is None else _to_4d(bias)
    mask = None if mask is None else _to_4d(mask)
    q_seqlen = None if query_seq_lengths is None else inp.asarray(query_seq_lengths)
    kv_seqlen = (None if key_value_seq_lengths is None
                 else inp.asarray(key_value_seq_lengths))
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)
    batch, s_len, kv_heads, head_dim = get_aval(key).shape
    key_dtype = get_aval(key).dtype
    _check("value", value, (batch, s_len, kv_heads, head_dim), key_dtype)
    _check("query", query, (batch, -1, -1, head_dim), key_dtype)
    _check("mask", mask, (-1,) * 4, np.dtype(bool))
    _check("bias", bias, (-1,) * 4, None)
    _check("query_seq_lengths", q_seqlen, (batch,), np.dtype(np.int32))
    _check("key_value_seq_lengths", kv_seqlen, (batch,), np.dtype(np.int32))
    if get_aval(query).shape[-2] % kv_heads:
        raise ValueError("The number of query heads must be a multiple of key/value heads, "
                         f"but got {get_aval(query).shape[-2]} vs {kv_heads}")
    if implementation == "cudnn":
        raise NotImplementedError("dot_product_attention: implementation='cudnn' (cuDNN "
                                  "flash attention, GPU only) is not supported by impl; use "
                                  "implementation='xla' or None")
    if implementation not in (None, "xla"):
        raise ValueError(f"Unsupported implementation option: {implementation}")
    scale = 1.0 / np.sqrt(head_dim) if scale is None else scale
    out = _attention_xla(query, key, value, bias, mask, is_causal=is_causal, scale=scale,
                         q_seqlen=q_seqlen, kv_seqlen=kv_seqlen,
                         local_window_size=local_window_size,
                         return_residual=return_residual)
    if return_residual:
        encoded, residual = out
        return inp.reshape(encoded, output_shape), inp.reshape(residual, output_shape[:-1])
    return inp.reshape(out, output_shape)
