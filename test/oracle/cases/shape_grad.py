"""Oracle cases for shape-op gradients (PyTorch autograd), in f32 and f64,
and forward cases for the scatter ops (scatter_add, index_add,
slice_scatter).

The attr "transpose0" = [a, b] makes both sides transpose input 0 before
the op, so the op sees a non-contiguous (permuted) input; its gradient
still lands on the untransposed leaf.
"""
import torch
import torch.nn.functional as F

from oracle_lib import case, randn, randint

F32, F64 = torch.float32, torch.float64


def _name(dt):
    return str(dt).split(".")[1]


def _sample(shape, dt):
    """Values of any dtype (bools are a random mask)."""
    if dt == torch.bool:
        return randint(0, 2, *shape, dtype=torch.bool)
    if dt.is_floating_point:
        return randn(*shape, dtype=dt)
    return randint(-50, 50, *shape, dtype=dt)


def _t(fn, dims):
    """fn applied to input 0 transposed by `dims`."""
    return lambda x, *rest: fn(x.transpose(*dims), *rest)


def _slice(dim, start, end, step):
    def fn(x):
        d = dim % x.dim()
        return x[(slice(None),) * d + (slice(start, end, step),)]
    return fn


def _slice_scatter(dim, start, end, step):
    # torch 1.13's Python binding mishandles a defaulted step (it slices
    # one element), so step is always passed.
    return lambda x, s: torch.slice_scatter(x, s, dim=dim, start=start, end=end, step=step)


def _grad_cases(dt):
    """One grad=True case per shape formula (and the composites), in `dt`."""
    n = _name(dt)
    g = []

    def add(name, op, inputs, fn, attrs=None):
        g.append(case(f"grad_{name}_{n}", op, inputs, fn, attrs=attrs, grad=True))

    add("reshape", "reshape", [randn(2, 3, 4, dtype=dt)], lambda x: x.reshape(4, -1),
        {"shape": [4, -1]})
    add("view_transposed", "view", [randn(3, 4, dtype=dt)], _t(lambda x: x.reshape(-1), (0, 1)),
        {"shape": [-1], "transpose0": [0, 1]})
    add("flatten", "flatten", [randn(2, 3, 4, 5, dtype=dt)], lambda x: x.flatten(1, -2),
        {"start_dim": 1, "end_dim": -2})
    add("squeeze", "squeeze", [randn(1, 3, 1, 2, dtype=dt)], lambda x: x.squeeze(-2), {"dim": -2})
    add("unsqueeze", "unsqueeze", [randn(2, 3, dtype=dt)], lambda x: x.unsqueeze(-1), {"dim": -1})
    add("permute", "permute", [randn(2, 3, 4, dtype=dt)], lambda x: x.permute(-1, 0, -2),
        {"perm": [-1, 0, -2]})
    add("permute_transposed", "permute", [randn(2, 3, 4, 5, dtype=dt)],
        _t(lambda x: x.permute(3, 1, 0, 2), (1, 2)), {"perm": [3, 1, 0, 2], "transpose0": [1, 2]})
    add("transpose", "transpose", [randn(3, 5, dtype=dt)], lambda x: x.transpose(-1, -2),
        {"dim0": -1, "dim1": -2})
    add("expand", "expand", [randn(3, 1, dtype=dt)], lambda x: x.expand(2, 3, 4),
        {"shape": [2, 3, 4]})
    add("expand_keep", "expand", [randn(1, 4, dtype=dt)], lambda x: x.expand(3, -1),
        {"shape": [3, -1]})
    add("expand_scalar", "expand", [randn(1, dtype=dt).reshape(())], lambda x: x.expand(2, 2), {"shape": [2, 2]})

    add("slice_step", "slice", [randn(3, 7, 2, dtype=dt)], _slice(1, 1, None, 2),
        {"dim": 1, "start": 1, "step": 2})
    add("slice_neg", "slice", [randn(4, 6, dtype=dt)], _slice(-1, -4, -1, 1),
        {"dim": -1, "start": -4, "end": -1, "step": 1})
    add("slice_empty", "slice", [randn(4, 6, dtype=dt)], _slice(1, 5, 2, 1),
        {"dim": 1, "start": 5, "end": 2, "step": 1})
    add("slice_transposed", "slice", [randn(3, 5, dtype=dt)], _t(_slice(0, 1, 4, 2), (0, 1)),
        {"dim": 0, "start": 1, "end": 4, "step": 2, "transpose0": [0, 1]})
    add("cat", "cat", [randn(2, 1, 2, dtype=dt), randn(2, 3, 2, dtype=dt), randn(2, 2, 2, dtype=dt)],
        lambda *t: torch.cat(t, 1), {"dim": 1})
    add("cat_neg_size0", "cat", [randn(3, 2, dtype=dt), randn(3, 0, dtype=dt), randn(3, 4, dtype=dt)],
        lambda *t: torch.cat(t, -1), {"dim": -1})
    add("cat_transposed", "cat", [randn(3, 2, dtype=dt), randn(2, 4, dtype=dt)],
        _t(lambda a, b: torch.cat([a, b], 1), (0, 1)), {"dim": 1, "transpose0": [0, 1]})
    add("stack", "stack", [randn(2, 3, dtype=dt), randn(2, 3, dtype=dt)],
        lambda a, b: torch.stack([a, b], -1), {"dim": -1})
    # Only chunk 0 enters the loss: the rest of the input gets zeros.
    add("chunk", "chunk", [randn(3, 7, dtype=dt)], lambda x: list(torch.chunk(x, 3, 1)),
        {"chunks": 3, "dim": 1})

    add("gather_dups", "gather", [randn(3, 4, dtype=dt), randint(0, 3, 5, 4)],
        lambda x, i: torch.gather(x, 0, i), {"dim": 0})
    add("gather_neg", "gather", [randn(3, 4, dtype=dt), randint(0, 4, 2, 6)],
        lambda x, i: torch.gather(x, -1, i), {"dim": -1})
    add("gather_transposed", "gather", [randn(4, 3, dtype=dt), randint(0, 4, 2, 4)],
        _t(lambda x, i: torch.gather(x, 1, i), (0, 1)), {"dim": 1, "transpose0": [0, 1]})
    add("index_select_dups", "index_select", [randn(5, 3, dtype=dt), randint(0, 5, 9)],
        lambda x, i: torch.index_select(x, 0, i), {"dim": 0})
    add("index_select_neg_i32", "index_select",
        [randn(2, 3, 4, dtype=dt), randint(0, 4, 6, dtype=torch.int32)],
        lambda x, i: torch.index_select(x, -1, i), {"dim": -1})
    add("index_select_empty", "index_select", [randn(3, 2, dtype=dt), randint(0, 3, 0)],
        lambda x, i: torch.index_select(x, 0, i), {"dim": 0})
    add("embedding_dups", "embedding", [randint(0, 4, 3, 5), randn(4, 3, dtype=dt)], F.embedding)

    add("pad", "pad", [randn(3, 4, dtype=dt)], lambda x: F.pad(x, [1, 0, 2, 1], value=1.5),
        {"pads": [1, 0, 2, 1], "value": 1.5})
    add("pad_crop", "pad", [randn(4, 5, dtype=dt)], lambda x: F.pad(x, [-1, 2, 1, -1], value=-2.0),
        {"pads": [-1, 2, 1, -1], "value": -2.0})
    add("pad_crop_to_empty", "pad", [randn(2, 3, dtype=dt)], lambda x: F.pad(x, [-2, -1]),
        {"pads": [-2, -1], "value": 0.0})
    add("pad_transposed", "pad", [randn(2, 3, dtype=dt)], _t(lambda x: F.pad(x, [1, 1]), (0, 1)),
        {"pads": [1, 1], "value": 0.0, "transpose0": [0, 1]})
    add("triu", "triu", [randn(2, 4, 5, dtype=dt)], lambda x: torch.triu(x, 1), {"diagonal": 1})
    add("tril", "tril", [randn(4, 5, dtype=dt)], lambda x: torch.tril(x, -2), {"diagonal": -2})
    add("triu_transposed", "triu", [randn(3, 4, dtype=dt)], _t(torch.triu, (0, 1)),
        {"diagonal": 0, "transpose0": [0, 1]})

    # The scatter ops: gradients for both the input and the added values.
    # (PyTorch 1.13's scatter_add backward rejects an index smaller than
    # src, so these use equal shapes; the unit tests gradcheck that case.)
    add("scatter_add", "scatter_add",
        [randn(3, 4, dtype=dt), randint(0, 3, 5, 3), randn(5, 3, dtype=dt)],
        lambda x, i, s: torch.scatter_add(x, 0, i, s), {"dim": 0})
    add("scatter_add_neg", "scatter_add",
        [randn(2, 3, dtype=dt), randint(0, 3, 2, 4), randn(2, 4, dtype=dt)],
        lambda x, i, s: torch.scatter_add(x, -1, i, s), {"dim": -1})
    add("scatter_add_transposed", "scatter_add",
        [randn(4, 2, dtype=dt), randint(0, 4, 2, 2), randn(2, 2, dtype=dt)],
        _t(lambda x, i, s: torch.scatter_add(x, 1, i, s), (0, 1)), {"dim": 1, "transpose0": [0, 1]})
    add("index_add", "index_add",
        [randn(4, 3, dtype=dt), randint(0, 4, 6), randn(6, 3, dtype=dt)],
        lambda x, i, s: torch.index_add(x, 0, i, s), {"dim": 0})
    add("index_add_neg", "index_add",
        [randn(2, 3, 4, dtype=dt), randint(0, 4, 2), randn(2, 3, 2, dtype=dt)],
        lambda x, i, s: torch.index_add(x, -1, i, s), {"dim": -1})
    add("slice_scatter", "slice_scatter", [randn(3, 7, dtype=dt), randn(3, 3, dtype=dt)],
        _slice_scatter(1, 1, None, 2), {"dim": 1, "start": 1, "step": 2})
    add("slice_scatter_neg", "slice_scatter", [randn(4, 5, dtype=dt), randn(2, 5, dtype=dt)],
        _slice_scatter(-2, -3, -1, 1), {"dim": -2, "start": -3, "end": -1, "step": 1})
    add("slice_scatter_transposed", "slice_scatter", [randn(3, 4, dtype=dt), randn(2, 3, dtype=dt)],
        _t(_slice_scatter(0, 0, 4, 2), (0, 1)),
        {"dim": 0, "start": 0, "end": 4, "step": 2, "transpose0": [0, 1]})
    return g


def _scatter_forward():
    out = []
    for dt in [F32, F64, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool]:
        n = _name(dt)
        out.append(case(f"scatter_add_{n}", "scatter_add",
                        [_sample((3, 4), dt), randint(0, 3, 5, 4), _sample((5, 4), dt)],
                        lambda x, i, s: torch.scatter_add(x, 0, i, s), attrs={"dim": 0}))
        out.append(case(f"index_add_{n}", "index_add",
                        [_sample((4, 3), dt), randint(0, 3, 5), _sample((4, 5), dt)],
                        lambda x, i, s: torch.index_add(x, 1, i, s), attrs={"dim": 1}))
        out.append(case(f"slice_scatter_{n}", "slice_scatter",
                        [_sample((4, 6), dt), _sample((4, 2), dt)],
                        _slice_scatter(1, 1, 5, 2), attrs={"dim": 1, "start": 1, "end": 5, "step": 2}))
    out.append(case("scatter_add_index_smaller", "scatter_add",
                    [randn(3, 5), randint(0, 5, 2, 3), randn(3, 4)],
                    lambda x, i, s: torch.scatter_add(x, -1, i, s), attrs={"dim": -1}))
    out.append(case("scatter_add_3d_middle", "scatter_add",
                    [randn(2, 3, 4), randint(0, 3, 2, 6, 4), randn(2, 6, 4)],
                    lambda x, i, s: torch.scatter_add(x, 1, i, s), attrs={"dim": 1}))
    out.append(case("scatter_add_empty_index", "scatter_add",
                    [randn(3, 2), randint(0, 3, 0, 2), randn(1, 2)],
                    lambda x, i, s: torch.scatter_add(x, 0, i, s), attrs={"dim": 0}))
    out.append(case("scatter_add_transposed", "scatter_add",
                    [randn(4, 3), randint(0, 4, 3, 2), randn(3, 2)],
                    _t(lambda x, i, s: torch.scatter_add(x, 1, i, s), (0, 1)),
                    attrs={"dim": 1, "transpose0": [0, 1]}))
    out.append(case("index_add_i32_index", "index_add",
                    [randn(5, 2), randint(0, 5, 7, dtype=torch.int32), randn(7, 2)],
                    lambda x, i, s: torch.index_add(x, 0, i, s), attrs={"dim": 0}))
    out.append(case("index_add_scalar_index", "index_add",
                    [randn(3, 2), torch.tensor(1), randn(1, 2)],
                    lambda x, i, s: torch.index_add(x, 0, i, s), attrs={"dim": 0}))
    out.append(case("index_add_empty", "index_add", [randn(3, 2), randint(0, 3, 0), randn(0, 2)],
                    lambda x, i, s: torch.index_add(x, 0, i, s), attrs={"dim": 0}))
    out.append(case("index_add_transposed", "index_add",
                    [randn(3, 4), randint(0, 4, 3), randn(3, 3)],
                    _t(lambda x, i, s: torch.index_add(x, 0, i, s), (0, 1)),
                    attrs={"dim": 0, "transpose0": [0, 1]}))
    out.append(case("slice_scatter_clamped", "slice_scatter", [randn(10), randn(3)],
                    _slice_scatter(0, -100, 100, 4), attrs={"dim": 0, "start": -100, "end": 100,
                                                             "step": 4}))
    out.append(case("slice_scatter_tail", "slice_scatter", [randn(2, 5), randn(2, 2)],
                    _slice_scatter(-1, -2, None, 1), attrs={"dim": -1, "start": -2, "step": 1}))
    out.append(case("slice_scatter_empty", "slice_scatter", [randn(6), randn(0)],
                    _slice_scatter(0, 4, 2, 1), attrs={"dim": 0, "start": 4, "end": 2, "step": 1}))
    out.append(case("slice_scatter_cast_src", "slice_scatter", [randn(4), randint(-9, 9, 2)],
                    _slice_scatter(0, 1, 3, 1), attrs={"dim": 0, "start": 1, "end": 3, "step": 1}))
    out.append(case("slice_scatter_transposed", "slice_scatter", [randn(3, 4), randn(2, 3)],
                    _t(_slice_scatter(0, 1, 4, 2), (0, 1)),
                    attrs={"dim": 0, "start": 1, "end": 4, "step": 2, "transpose0": [0, 1]}))
    return out


def cases():
    return _grad_cases(F32) + _grad_cases(F64) + _scatter_forward()
