"""FileMap: a column-wise checkpoint base plus replayed changes behaves exactly like a dict of adds."""

from __future__ import annotations

import random

from txlake.delta.actions import Add
from txlake.delta.filemap import ColumnarAdds, FileMap


def _add(path: str, size: int = 1) -> Add:
    return Add(path, {"p": "x"}, size, 7, True, '{"numRecords":1}', None)


def _base(paths: list[str]) -> ColumnarAdds:
    n = len(paths)
    return ColumnarAdds(
        path=paths,
        partition_values=[[("p", "x")]] * n,
        size=[1] * n,
        modification_time=[7] * n,
        data_change=[None] * n,
        stats=['{"numRecords":1}'] * n,
        tags=[None] * n,
    )


def test_base_entries_equal_eager_adds() -> None:
    fm = FileMap(_base(["a", "b"]))
    assert dict(fm) == {"a": _add("a"), "b": _add("b")}
    assert fm["a"] is fm["a"]  # memoized
    assert "c" not in fm and 3 not in fm


def test_random_mutations_match_a_dict() -> None:
    rng = random.Random(3)
    paths = [f"f{i}" for i in range(30)]
    fm = FileMap(_base(paths[:20]))
    model = {p: _add(p) for p in paths[:20]}
    for step in range(400):
        p = rng.choice(paths)
        if rng.random() < 0.5:
            fm[p] = model[p] = _add(p, size=step)
        else:
            assert (fm.pop(p, None) is None) == (model.pop(p, None) is None)
        if step % 50 == 0:
            copy = fm.copy()
            assert dict(copy) == model
    assert dict(fm) == model
    assert len(fm) == len(model)
    assert sorted(fm) == sorted(model)
