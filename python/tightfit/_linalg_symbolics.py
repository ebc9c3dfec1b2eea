"""Symbolics for PyTorch's linear algebra on small matrices, which its exporter writes as ONNX's Det at most
(tightfit's importer has none) or refuses: the factorisations unrolled into the ONNX operators of their
textbook algorithms over the last two axes, a size n known when exporting (at most _MOST_ROWS), any
batch before them. Autodiff differentiates the unrolled steps, which is PyTorch's gradient of the same
function (a pivot choice is piecewise constant: no gradient, as in PyTorch's).

- LU with partial pivoting (the largest |entry| of each column from the diagonal down, the first of ties,
  as LAPACK's getrf), each row swap an outer-product update (O(n^2) a step): torch.det and linalg.det
  (the sign of the swaps times the pivots' product), slogdet and linalg.slogdet, logdet (NaN below 0, as
  PyTorch's), linalg.solve (the right side eliminated beside, then back substitution; a vector or a
  matrix, left=True), inverse and linalg.inv (solve against the identity);
- Cholesky-Banachiewicz, one column a step: linalg.cholesky and cholesky (upper too);
- triangular solves by substitution: linalg.solve_triangular (upper or lower, left=True, unit diagonal or
  not) and cholesky_solve.

Singular or indefinite input gives inf or NaN where PyTorch's raises or gives them.
"""
from . import _symbolic_registry
from ._lib import TightfitError

_MOST_ROWS = 64  # n steps of [n, n] updates each; the graph grows with n


def register(torch, opset, helper, registered, symbolic_of):
    """Registers the symbolics above at every opset from 9 to `opset`, in place of torch's Det; returns the
    function that removes them."""

    w = _symbolic_registry.Writer(torch, helper)
    float_type, const, ints, absent, reduced = w.float_type, w.const, w.ints, w.absent, w.reduced

    def flag(v, default):
        return default if absent(v) else bool(helper._get_const(v, "b", "flag"))

    def square(a, what):
        """The size n of a's last two (equal, known) axes."""
        rank = helper._get_tensor_rank(a)
        sizes = helper._get_tensor_sizes(a)
        if rank is None or rank < 2 or sizes is None or sizes[-1] is None or sizes[-2] is None:
            raise TightfitError(f"from_torch: {what} of a matrix whose size is not known when exporting (give "
                                f"dynamic_batch=False, or fixed sizes)")
        n = int(sizes[-1])
        if int(sizes[-2]) != n:
            raise TightfitError(f"from_torch: {what} of a {sizes[-2]} x {n} matrix (square only)")
        if n > _MOST_ROWS:
            raise TightfitError(f"from_torch: {what} of a {n} x {n} matrix: tightfit unrolls the factorisation "
                                f"into n steps, up to {_MOST_ROWS}")
        return n

    def rows(g, x, start, end):
        return g.op("Slice", x, ints(g, [start]), ints(g, [end]), ints(g, [-2]))

    def columns(g, x, start, end):
        return g.op("Slice", x, ints(g, [start]), ints(g, [end]), ints(g, [-1]))

    def column_const(g, like, n, pick):
        """A constant [n, 1] of like's float type: 1 where pick(row)."""
        return g.op("Constant", value_t=torch.tensor([[1.0 if pick(i) else 0.0] for i in range(n)],
                                                     dtype=float_type(like)))

    def transposed(g, x, rank):
        return g.op("Transpose", x, perm_i=list(range(rank - 2)) + [rank - 1, rank - 2])

    def eliminated(g, a, b, n):
        """a [..., n, n] to upper triangular U by row swaps and eliminations, the same applied to b [..., n, m]
        (None: none); returns (U, b, the sign of the row permutation [...], None where n is 1)."""
        sign, rank = None, helper._get_tensor_rank(a)
        for k in range(n - 1):
            column = columns(g, a, k, k + 1)  # [..., n, 1]
            below = g.op("Constant", value_t=torch.tensor([[i >= k] for i in range(n)]))
            candidates = g.op("Where", below, g.op("Abs", column), const(g, a, -1.0))
            pivot_row = g.op("ArgMax", candidates, axis_i=-2, keepdims_i=0)  # [..., 1]
            chosen = g.op("OneHot", pivot_row, ints(g, [n]), g.op("Constant", value_t=torch.tensor(
                [0.0, 1.0], dtype=float_type(a))), axis_i=-2)  # [..., n, 1]
            move = g.op("Sub", column_const(g, a, n, lambda i: i == k), chosen)  # e_k - e_p

            def swapped(x):  # rows k and p exchanged: x + (e_k - e_p) (x[p] - x[k])
                picked = g.op("MatMul", transposed(g, chosen, rank), x)  # x[p]
                return g.op("Add", x, g.op("Mul", move, g.op("Sub", picked, rows(g, x, k, k + 1))))
            a = swapped(a)
            b = swapped(b) if b is not None else None
            # the sign flips where p != k: 2 [p == k] - 1
            stays = reduced(g, "ReduceSum", rows(g, chosen, k, k + 1), [-2, -1], False)  # [...]
            flip = g.op("Sub", g.op("Mul", stays, const(g, a, 2.0)), const(g, a, 1.0))
            sign = flip if sign is None else g.op("Mul", sign, flip)
            factors = g.op("Mul", g.op("Div", columns(g, a, k, k + 1), columns(g, rows(g, a, k, k + 1), k, k + 1)),
                           column_const(g, a, n, lambda i: i > k))  # [..., n, 1], 0 from row k up
            a = g.op("Sub", a, g.op("Mul", factors, rows(g, a, k, k + 1)))
            if b is not None:
                b = g.op("Sub", b, g.op("Mul", factors, rows(g, b, k, k + 1)))
        return a, b, sign

    def diagonal_of(g, u, n):
        """u's diagonal [..., n]."""
        eye = g.op("Constant", value_t=torch.eye(n, dtype=float_type(u)))
        return reduced(g, "ReduceSum", g.op("Mul", u, eye), [-1], False)

    def substituted(g, u, b, n, upper, unit):
        """x with u x = b, u triangular ([..., n, n]; upper or lower, 1 on the diagonal where `unit`), b
        [..., n, m]: row by row from the last (upper) or the first (lower)."""
        order = range(n - 1, -1, -1) if upper else range(n)
        solved = {}
        for k in order:
            rest = b_row = rows(g, b, k, k + 1)  # [..., 1, m]
            done = sorted(solved)
            if done:
                known = g.op("Concat", *[solved[j] for j in done], axis_i=-2)  # [..., len, m]
                coefficients = g.op("Concat", *[columns(g, rows(g, u, k, k + 1), j, j + 1) for j in done],
                                    axis_i=-1)  # [..., 1, len]
                rest = g.op("Sub", b_row, g.op("MatMul", coefficients, known))
            solved[k] = rest if unit else g.op("Div", rest, columns(g, rows(g, u, k, k + 1), k, k + 1))
        return g.op("Concat", *[solved[k] for k in range(n)], axis_i=-2)

    def as_matrix(g, b, a_rank, what):
        """b as [..., n, m]: a vector right side (rank one below A's) gets a last axis of 1."""
        rank = helper._get_tensor_rank(b)
        if rank is None:
            raise TightfitError(f"from_torch: {what} with a right side of unknown rank")
        return (helper._unsqueeze_helper(g, b, [rank]), True) if rank == a_rank - 1 else (b, False)

    def signed(g, x, sign):
        return x if sign is None else g.op("Mul", x, sign)

    def det(g, a):
        n = square(a, "torch.det")
        u, _, sign = eliminated(g, a, None, n)
        return signed(g, reduced(g, "ReduceProd", diagonal_of(g, u, n), [-1], False), sign)

    def sign_and_log(g, a, what):
        """(the determinant's sign, log |determinant|), [...] each."""
        n = square(a, what)
        u, _, sign = eliminated(g, a, None, n)
        pivots = diagonal_of(g, u, n)  # [..., n]
        signs = signed(g, reduced(g, "ReduceProd", g.op("Sign", pivots), [-1], False), sign)
        return signs, reduced(g, "ReduceSum", g.op("Log", g.op("Abs", pivots)), [-1], False)

    def slogdet(g, a):
        return sign_and_log(g, a, "torch.slogdet")

    def logdet(g, a):
        signs, logs = sign_and_log(g, a, "torch.logdet")
        return g.op("Add", logs, g.op("Log", signs))  # log(-1): NaN; a zero pivot: -inf

    def solve(g, a, b, left=None):
        if not flag(left, True):
            raise TightfitError("from_torch: torch.linalg.solve with left=False is not supported")
        n = square(a, "torch.linalg.solve")
        rank = helper._get_tensor_rank(a)
        rhs, vector = as_matrix(g, b, rank, "torch.linalg.solve")
        u, rhs, _ = eliminated(g, a, rhs, n)
        x = substituted(g, u, rhs, n, True, False)
        return helper._squeeze_helper(g, x, [rank - 1]) if vector else x

    def inverse(g, a):
        n = square(a, "torch.inverse")
        eye = g.op("Expand", g.op("Constant", value_t=torch.eye(n, dtype=float_type(a))), g.op("Shape", a))
        u, rhs, _ = eliminated(g, a, eye, n)
        return substituted(g, u, rhs, n, True, False)

    def cholesky(g, a, upper=None):
        n = square(a, "torch.linalg.cholesky")
        rank = helper._get_tensor_rank(a)
        found = []  # the columns of L, [..., n, 1] each
        for j in range(n):
            v = columns(g, a, j, j + 1)
            if found:
                left = g.op("Concat", *found, axis_i=-1)  # L[:, :j]
                v = g.op("Sub", v, g.op("MatMul", left, transposed(g, rows(g, left, j, j + 1), rank)))
            root = g.op("Sqrt", rows(g, v, j, j + 1))
            found.append(g.op("Mul", g.op("Div", v, root), column_const(g, a, n, lambda i: i >= j)))
        lower = g.op("Concat", *found, axis_i=-1)
        return transposed(g, lower, rank) if flag(upper, False) else lower

    def solve_triangular(g, a, b, upper, left=None, unitriangular=None):
        if not flag(left, True):
            raise TightfitError("from_torch: torch.linalg.solve_triangular with left=False is not supported")
        n = square(a, "torch.linalg.solve_triangular")
        return substituted(g, a, b, n, flag(upper, False), flag(unitriangular, False))

    def cholesky_solve(g, b, factor, upper=None):
        n = square(factor, "torch.cholesky_solve")
        rank = helper._get_tensor_rank(factor)
        lower = transposed(g, factor, rank) if flag(upper, False) else factor
        middle = substituted(g, lower, b, n, False, False)  # L y = b
        return substituted(g, transposed(g, lower, rank), middle, n, True, False)  # L^T x = y

    symbolics = {"det": det, "linalg_det": det, "slogdet": slogdet, "linalg_slogdet": slogdet, "logdet": logdet,
                 "linalg_solve": solve, "inverse": inverse, "linalg_inv": inverse, "cholesky": cholesky,
                 "linalg_cholesky": cholesky, "linalg_solve_triangular": solve_triangular,
                 "cholesky_solve": cholesky_solve}
    every = range(9, max(opset, 17) + 1)
    return _symbolic_registry.register(torch, {name: (symbolic, every) for name, symbolic in symbolics.items()})
