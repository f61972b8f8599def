"""Oracle cases for shape and data-movement ops.

The attr "transpose0" = [a, b] makes both sides transpose input 0 before
the op, so the op sees a non-contiguous (permuted) input.
"""
import torch
import torch.nn.functional as F

from oracle_lib import case, randn, randint

END = None  # slice end left out: the C++ side passes kSliceEnd


def _name(dt):
    return str(dt).split(".")[1]


def _sample(shape, dt):
    """Distinct values of any dtype (bools are a random mask)."""
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


def _reshape_family():
    out = []
    for dt in [torch.float32, torch.bfloat16, torch.int64, torch.bool]:
        n = _name(dt)
        out.append(case(f"reshape_infer_{n}", "reshape", [_sample((2, 3, 4), dt)],
                        lambda x: x.reshape(4, -1), attrs={"shape": [4, -1]}))
        out.append(case(f"permute_{n}", "permute", [_sample((2, 3, 4), dt)],
                        lambda x: x.permute(2, 0, 1), attrs={"perm": [2, 0, 1]}))
        out.append(case(f"expand_{n}", "expand", [_sample((3, 1), dt)],
                        lambda x: x.expand(2, 3, 4), attrs={"shape": [2, 3, 4]}))
        out.append(case(f"transpose_{n}", "transpose", [_sample((2, 3, 4), dt)],
                        lambda x: x.transpose(0, 2), attrs={"dim0": 0, "dim1": 2}))
    out.append(case("reshape_transposed", "reshape", [randint(0, 9, 3, 4)],
                    _t(lambda x: x.reshape(-1), (0, 1)),
                    attrs={"shape": [-1], "transpose0": [0, 1]}))
    out.append(case("reshape_size0", "reshape", [randn(0, 3)],
                    lambda x: x.reshape(3, 0, 2), attrs={"shape": [3, 0, 2]}))
    out.append(case("reshape_to_scalar", "reshape", [randn(1, 1)],
                    lambda x: x.reshape(()), attrs={"shape": []}))
    out.append(case("view_f16", "view", [randn(4, 3, dtype=torch.float16)],
                    lambda x: x.view(2, 6), attrs={"shape": [2, 6]}))
    out.append(case("view_i32", "view", [randint(0, 9, 6, dtype=torch.int32)],
                    lambda x: x.view(-1, 2), attrs={"shape": [-1, 2]}))
    out.append(case("flatten_middle", "flatten", [randn(2, 3, 4, 5)],
                    lambda x: x.flatten(1, -2), attrs={"start_dim": 1, "end_dim": -2}))
    out.append(case("permute_negative", "permute", [randn(2, 3, 4, dtype=torch.float64)],
                    lambda x: x.permute(-1, 0, -2), attrs={"perm": [-1, 0, -2]}))
    out.append(case("permute_transposed_4d", "permute", [randn(2, 3, 4, 5)],
                    _t(lambda x: x.permute(3, 1, 0, 2), (1, 2)),
                    attrs={"perm": [3, 1, 0, 2], "transpose0": [1, 2]}))
    out.append(case("transpose_negative_f16", "transpose", [randn(3, 5, dtype=torch.float16)],
                    lambda x: x.transpose(-1, -2), attrs={"dim0": -1, "dim1": -2}))
    out.append(case("expand_keep_dim", "expand", [randn(1, 4)],
                    lambda x: x.expand(3, -1), attrs={"shape": [3, -1]}))
    out.append(case("expand_scalar_i32", "expand", [torch.tensor(7, dtype=torch.int32)],
                    lambda x: x.expand(2, 2), attrs={"shape": [2, 2]}))
    out.append(case("expand_transposed", "expand", [randn(3, 1)],
                    _t(lambda x: x.expand(2, 1, 3), (0, 1)),
                    attrs={"shape": [2, 1, 3], "transpose0": [0, 1]}))
    out.append(case("squeeze_all", "squeeze", [randn(1, 3, 1, 2)], torch.squeeze))
    out.append(case("squeeze_dim_bf16", "squeeze", [randn(1, 3, 1, 2, dtype=torch.bfloat16)],
                    lambda x: x.squeeze(-2), attrs={"dim": -2}))
    out.append(case("squeeze_noop_i64", "squeeze", [randint(0, 9, 2, 3)],
                    lambda x: x.squeeze(1), attrs={"dim": 1}))
    out.append(case("squeeze_bool", "squeeze", [_sample((1, 4), torch.bool)],
                    lambda x: x.squeeze(0), attrs={"dim": 0}))
    out.append(case("unsqueeze_front", "unsqueeze", [randn(2, 3)],
                    lambda x: x.unsqueeze(0), attrs={"dim": 0}))
    out.append(case("unsqueeze_back_i64", "unsqueeze", [randint(0, 9, 2, 3)],
                    lambda x: x.unsqueeze(-1), attrs={"dim": -1}))
    out.append(case("unsqueeze_middle_bool", "unsqueeze", [_sample((2, 3), torch.bool)],
                    lambda x: x.unsqueeze(1), attrs={"dim": 1}))
    return out


def _slicing():
    out = []
    slices = [  # name, shape, dim, start, end, step
        ("basic", (10,), 0, 2, 8, 3), ("tail", (10,), 0, -3, END, 1),
        ("clamped", (10,), 0, -100, 100, 4), ("empty", (10,), 0, 7, 3, 1),
        ("past_end", (6,), 0, 9, END, 1), ("inner_neg_dim", (2, 5, 4), -1, 1, 3, 1),
        ("middle_step", (3, 7, 2), 1, 1, END, 2), ("negative_end", (4, 6), 1, 0, -2, 1),
    ]
    for name, shape, dim, start, end, step in slices:
        attrs = {"dim": dim, "start": start, "step": step}
        if end is not None:
            attrs["end"] = end
        out.append(case(f"slice_{name}", "slice", [randn(*shape)],
                        _slice(dim, start, end, step), attrs=attrs))
    for dt in [torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool]:
        out.append(case(f"slice_{_name(dt)}", "slice", [_sample((4, 6), dt)],
                        _slice(1, 1, 5, 2), attrs={"dim": 1, "start": 1, "end": 5, "step": 2}))
    out.append(case("slice_transposed", "slice", [randn(3, 5)],
                    _t(_slice(0, 1, 4, 2), (0, 1)),
                    attrs={"dim": 0, "start": 1, "end": 4, "step": 2, "transpose0": [0, 1]}))

    out.append(case("cat_dim0", "cat", [randn(2, 3), randn(4, 3)],
                    lambda a, b: torch.cat([a, b], 0), attrs={"dim": 0}))
    out.append(case("cat_three_dim1", "cat", [randn(2, 1, 2), randn(2, 3, 2), randn(2, 2, 2)],
                    lambda *t: torch.cat(t, 1), attrs={"dim": 1}))
    out.append(case("cat_negative_dim_bf16", "cat",
                    [randn(3, 2, dtype=torch.bfloat16), randn(3, 4, dtype=torch.bfloat16)],
                    lambda a, b: torch.cat([a, b], -1), attrs={"dim": -1}))
    out.append(case("cat_promote_i32_f32", "cat", [randint(0, 9, 2, dtype=torch.int32), randn(3)],
                    lambda a, b: torch.cat([a, b]), attrs={"dim": 0}))
    out.append(case("cat_promote_bool_i64", "cat", [_sample((2, 2), torch.bool), randint(0, 9, 1, 2)],
                    lambda a, b: torch.cat([a, b]), attrs={"dim": 0}))
    out.append(case("cat_bool", "cat", [_sample((2, 3), torch.bool), _sample((2, 1), torch.bool)],
                    lambda a, b: torch.cat([a, b], 1), attrs={"dim": 1}))
    out.append(case("cat_size0_piece_i64", "cat", [randint(0, 9, 2, 0), randint(0, 9, 2, 3)],
                    lambda a, b: torch.cat([a, b], 1), attrs={"dim": 1}))
    out.append(case("cat_transposed", "cat", [randn(3, 2), randn(2, 4)],
                    _t(lambda a, b: torch.cat([a, b], 1), (0, 1)),
                    attrs={"dim": 1, "transpose0": [0, 1]}))

    out.append(case("stack_dim0", "stack", [randn(2, 3), randn(2, 3)],
                    lambda a, b: torch.stack([a, b]), attrs={"dim": 0}))
    out.append(case("stack_last_i64", "stack", [randint(0, 9, 2, 2) for _ in range(3)],
                    lambda *t: torch.stack(t, -1), attrs={"dim": -1}))
    out.append(case("stack_promote_bf16_f32", "stack", [randn(3, dtype=torch.bfloat16), randn(3)],
                    lambda a, b: torch.stack([a, b], 1), attrs={"dim": 1}))
    out.append(case("stack_bool", "stack", [_sample((2,), torch.bool), _sample((2,), torch.bool)],
                    lambda a, b: torch.stack([a, b]), attrs={"dim": 0}))

    chunks = [("5_by_4", (5,), 4, 0), ("6_by_4", (6,), 4, 0), ("dim1", (3, 7), 3, 1),
              ("neg_dim", (2, 4, 3), 2, -2), ("more_than_size", (3,), 5, 0)]
    for name, shape, n, dim in chunks:
        out.append(case(f"chunk_{name}", "chunk", [randn(*shape)],
                        lambda x, n=n, dim=dim: list(torch.chunk(x, n, dim)),
                        attrs={"chunks": n, "dim": dim}))
    for dt in [torch.bfloat16, torch.int64, torch.bool]:
        out.append(case(f"chunk_{_name(dt)}", "chunk", [_sample((4, 5), dt)],
                        lambda x: list(torch.chunk(x, 2, 1)), attrs={"chunks": 2, "dim": 1}))
    return out


def _indexing():
    out = []
    gathers = [  # name, input shape, dim, index shape
        ("dim0", (3, 4), 0, (5, 2)), ("dim1_neg", (3, 4), -1, (2, 6)),
        ("3d_middle", (2, 3, 4), 1, (2, 5, 3)), ("same_shape", (4, 3), 0, (4, 3)),
    ]
    for name, shape, dim, ishape in gathers:
        size = shape[dim]
        out.append(case(f"gather_{name}", "gather", [randn(*shape), randint(0, size, *ishape)],
                        lambda x, i, dim=dim: torch.gather(x, dim, i), attrs={"dim": dim}))
    for dt in [torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.bool]:
        out.append(case(f"gather_{_name(dt)}", "gather", [_sample((3, 4), dt), randint(0, 4, 3, 4)],
                        lambda x, i: torch.gather(x, 1, i), attrs={"dim": 1}))
    out.append(case("gather_transposed", "gather", [randn(4, 3), randint(0, 4, 2, 4)],
                    _t(lambda x, i: torch.gather(x, 1, i), (0, 1)),
                    attrs={"dim": 1, "transpose0": [0, 1]}))

    out.append(case("index_select_dim0", "index_select", [randn(5, 3), randint(0, 5, 7)],
                    lambda x, i: torch.index_select(x, 0, i), attrs={"dim": 0}))
    out.append(case("index_select_dim_neg_bf16", "index_select",
                    [randn(2, 3, 4, dtype=torch.bfloat16), randint(0, 4, 6)],
                    lambda x, i: torch.index_select(x, -1, i), attrs={"dim": -1}))
    out.append(case("index_select_i32_index", "index_select",
                    [randn(4, 5), randint(0, 5, 3, dtype=torch.int32)],
                    lambda x, i: torch.index_select(x, 1, i), attrs={"dim": 1}))
    out.append(case("index_select_i64", "index_select", [randint(0, 99, 3, 4, 2), randint(0, 4, 5)],
                    lambda x, i: torch.index_select(x, 1, i), attrs={"dim": 1}))
    out.append(case("index_select_bool", "index_select", [_sample((6, 2), torch.bool), randint(0, 6, 4)],
                    lambda x, i: torch.index_select(x, 0, i), attrs={"dim": 0}))
    out.append(case("index_select_empty", "index_select", [randn(3, 2), randint(0, 3, 0)],
                    lambda x, i: torch.index_select(x, 0, i), attrs={"dim": 0}))
    out.append(case("index_select_transposed", "index_select", [randn(3, 5), randint(0, 3, 4)],
                    _t(lambda x, i: torch.index_select(x, 1, i), (0, 1)),
                    attrs={"dim": 1, "transpose0": [0, 1]}))

    out.append(case("embedding_2d_indices", "embedding", [randint(0, 10, 3, 4), randn(10, 5)],
                    F.embedding))
    out.append(case("embedding_bf16", "embedding", [randint(0, 6, 7), randn(6, 4, dtype=torch.bfloat16)],
                    F.embedding))
    out.append(case("embedding_i32_f64", "embedding",
                    [randint(0, 8, 2, 3, dtype=torch.int32), randn(8, 3, dtype=torch.float64)],
                    F.embedding))
    out.append(case("embedding_scalar_index", "embedding", [torch.tensor(2), randn(4, 3)],
                    F.embedding))
    return out


def _padding_and_triangles():
    out = []
    pads = [  # name, shape, pads, value
        ("1d", (5,), [1, 2], 0.0), ("2d_value", (3, 4), [1, 0, 2, 1], 1.5),
        ("crop", (4, 5), [-1, 2, 1, -1], -2.0), ("3d_last_only", (2, 3, 4), [0, 3], 0.0),
        ("crop_to_empty", (2, 3), [-2, -1], 0.0), ("all_dims", (2, 2, 2), [1, 1, 1, 0, 0, 1], 4.0),
    ]
    for name, shape, p, value in pads:
        out.append(case(f"pad_{name}", "pad", [randn(*shape)],
                        lambda x, p=p, value=value: F.pad(x, p, value=value),
                        attrs={"pads": p, "value": value}))
    for dt, value in [(torch.bfloat16, 0.5), (torch.float16, -1.0), (torch.int64, 3.0),
                      (torch.int32, -7.0), (torch.bool, 1.0)]:
        out.append(case(f"pad_{_name(dt)}", "pad", [_sample((2, 3), dt)],
                        lambda x, value=value: F.pad(x, [2, 1, 0, 1], value=value),
                        attrs={"pads": [2, 1, 0, 1], "value": value}))
    out.append(case("pad_transposed", "pad", [randn(2, 3)],
                    _t(lambda x: F.pad(x, [1, 1], value=9.0), (0, 1)),
                    attrs={"pads": [1, 1], "value": 9.0, "transpose0": [0, 1]}))

    for op, fn in [("triu", torch.triu), ("tril", torch.tril)]:
        for diag in [0, 1, -2]:
            name = f"{op}_diag{diag}".replace("-", "m")
            out.append(case(name, op, [randn(4, 5)], lambda x, fn=fn, d=diag: fn(x, d),
                            attrs={"diagonal": diag}))
        out.append(case(f"{op}_batched_bf16", op, [randn(2, 3, 3, dtype=torch.bfloat16)], fn,
                        attrs={"diagonal": 0}))
        out.append(case(f"{op}_tall_i64", op, [randint(-9, 9, 5, 2)], lambda x, fn=fn: fn(x, -1),
                        attrs={"diagonal": -1}))
        out.append(case(f"{op}_bool", op, [_sample((3, 3), torch.bool)], fn, attrs={"diagonal": 0}))
        out.append(case(f"{op}_transposed", op, [randn(3, 4)], _t(lambda x, fn=fn: fn(x, 1), (0, 1)),
                        attrs={"diagonal": 1, "transpose0": [0, 1]}))
    return out


def cases():
    return _reshape_family() + _slicing() + _indexing() + _padding_and_triangles()
