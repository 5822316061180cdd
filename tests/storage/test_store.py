"""The object-store layer on every backend: file://, memory:// and a real SeaweedFS S3 server."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

from tests.services import SeaweedFS, StoreLocation
from txlake.errors import (
    InjectedFaultError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidObjectPathError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    SimulatedCrash,
    StorageError,
    TransientStorageError,
)
from txlake.storage import FaultRule, ObjectMeta, ObjectStore, RequestCounts
from txlake.storage.store import UriParts, local_root, split_uri


@pytest.fixture
def store(any_store_uri: StoreLocation) -> ObjectStore:
    """A fresh, empty store on the backend under test, with fast retries."""
    options = dict(any_store_uri.storage_options, retry_base_delay="0.01")
    return ObjectStore.from_uri(any_store_uri.uri, options)


def _paths(metas: list[ObjectMeta]) -> list[str]:
    return [m.path for m in metas]


# -------------------------------------------------------------------------------------------- basic I/O


def test_put_then_get_returns_the_bytes(store: ObjectStore) -> None:
    store.put("a/b.bin", b"\x00hello\xff")
    assert store.get("a/b.bin") == b"\x00hello\xff"
    store.put("a/b.bin", b"replaced")
    assert store.get("a/b.bin") == b"replaced"


def test_get_range_returns_the_half_open_slice(store: ObjectStore) -> None:
    store.put("r", b"0123456789")
    assert store.get_range("r", 2, 5) == b"234"
    assert store.get_range("r", 0, 10) == b"0123456789"


def test_empty_object_round_trips(store: ObjectStore) -> None:
    store.put("empty", b"")
    assert store.get("empty") == b""
    assert store.head("empty").size == 0


def test_head_reports_path_size_and_modification_time(store: ObjectStore) -> None:
    store.put("dir/obj.json", b"12345")
    meta = store.head("dir/obj.json")
    assert isinstance(meta, ObjectMeta)
    assert meta.path == "dir/obj.json"
    assert meta.size == 5
    assert isinstance(meta.last_modified, datetime)
    assert meta.last_modified.tzinfo is not None
    assert store.exists("dir/obj.json")


@pytest.mark.parametrize("kind", ["GET", "HEAD"])
def test_missing_object_is_object_not_found(store: ObjectStore, kind: str) -> None:
    with pytest.raises(ObjectNotFoundError) as info:
        if kind == "GET":
            store.get("no/such/object")
        else:
            store.head("no/such/object")
    assert isinstance(info.value, FileNotFoundError)
    assert isinstance(info.value, StorageError)
    assert info.value.path == "no/such/object"
    assert info.value.kind == kind


def test_exists_is_false_for_a_missing_object(store: ObjectStore) -> None:
    assert not store.exists("nothing-here")


def test_list_is_recursive_and_sorted(store: ObjectStore) -> None:
    keys = ["b/2", "a/x/1", "a/1", "ab/1", "a/x/y/0", "c", "a/0"]
    for key in keys:
        store.put(key, key.encode())
    everything = store.list("")
    assert _paths(everything) == sorted(keys)
    assert all(isinstance(m, ObjectMeta) for m in everything)
    assert {m.path: m.size for m in everything} == {k: len(k) for k in keys}
    # A prefix is a directory: "a" does not match "ab/1".
    assert _paths(store.list("a")) == ["a/0", "a/1", "a/x/1", "a/x/y/0"]
    assert _paths(store.list("a/")) == ["a/0", "a/1", "a/x/1", "a/x/y/0"]
    assert _paths(store.list("a/x")) == ["a/x/1", "a/x/y/0"]


def test_list_of_a_missing_prefix_is_empty(store: ObjectStore) -> None:
    assert store.list("nothing/here") == []
    store.put("other/x", b"1")
    assert store.list("nothing") == []


def test_list_start_after_skips_up_to_and_including_the_marker(store: ObjectStore) -> None:
    names = [f"_delta_log/{v:020d}.json" for v in range(6)]
    for name in reversed(names):
        store.put(name, b"{}")
    store.put("_delta_log/_last_checkpoint", b"{}")
    store.put("data/part-0.parquet", b"x")
    after = store.list("_delta_log", start_after=names[2])
    assert _paths(after) == [*names[3:], "_delta_log/_last_checkpoint"]
    assert store.list("_delta_log", start_after="_delta_log/_last_checkpoint") == []
    # A marker that is not an object works too (it is a position, not a key).
    assert _paths(store.list("_delta_log", start_after=names[4] + "0")) == [
        names[5],
        "_delta_log/_last_checkpoint",
    ]


def test_list_dir_returns_one_level(store: ObjectStore) -> None:
    for key in ["t/_delta_log/0.json", "t/_delta_log/1.json", "t/part-1", "t/part-0", "t/x/y/z", "u/1"]:
        store.put(key, b"1")
    dirs, objects = store.list_dir("t")
    assert dirs == ["t/_delta_log", "t/x"]
    assert _paths(objects) == ["t/part-0", "t/part-1"]
    top_dirs, top_objects = store.list_dir("")
    assert top_dirs == ["t", "u"]
    assert top_objects == []
    assert store.list_dir("missing") == ([], [])


def test_delete_removes_and_missing_is_fine(store: ObjectStore) -> None:
    store.put("d/x", b"1")
    store.put("d/y", b"2")
    store.delete("d/x")
    assert not store.exists("d/x")
    assert _paths(store.list("d")) == ["d/y"]
    store.delete("d/x")
    store.delete("never/existed")


# ----------------------------------------------------------------------------------------- put_if_absent


def test_delete_many_deletes_every_key_though_one_is_missing(store: ObjectStore) -> None:
    """A missing key anywhere in the batch (the first here) deletes the rest all the same: on local disk the bulk
    delete stops at it, so the rest go one by one."""
    keys = [f"w/p={i}/f{i}.parquet" for i in range(40)]
    for key in keys:
        store.put(key, b"x")
    store.delete_many(["w/missing.parquet", *keys])
    assert store.list("w") == []


def test_a_fault_rule_on_any_key_of_a_bulk_delete_fires(store: ObjectStore) -> None:
    """A bulk delete is one request named after its first key; a rule naming a later key fires on it too (until
    2026-11-29 it never did, so no fault could be aimed at a bulk delete by anything but its first key)."""
    keys = [f"w/f{i}.parquet" for i in range(3)]
    for key in keys:
        store.put(key, b"x")
    store.faults.add(FaultRule("DELETE", 1, "fail", path_contains="f2.parquet"))
    with pytest.raises(InjectedFaultError) as info:
        store.delete_many(keys)
    assert info.value.path == keys[0]  # the request's name: its first key
    assert _paths(store.list("w")) == keys  # failed before reaching the store
    store.delete_many(keys)
    assert store.list("w") == []


def test_put_if_absent_creates_once_then_refuses(store: ObjectStore) -> None:
    store.put_if_absent("log/00000000000000000000.json", b"first")
    with pytest.raises(ObjectAlreadyExistsError) as info:
        store.put_if_absent("log/00000000000000000000.json", b"second")
    assert isinstance(info.value, FileExistsError)
    assert info.value.path == "log/00000000000000000000.json"
    assert info.value.kind == "PUT"
    assert store.get("log/00000000000000000000.json") == b"first"


def test_put_if_absent_refuses_identical_bytes_too(store: ObjectStore) -> None:
    store.put_if_absent("k", b"same")
    with pytest.raises(ObjectAlreadyExistsError):
        store.put_if_absent("k", b"same")


def test_put_if_absent_after_delete_succeeds(store: ObjectStore) -> None:
    store.put_if_absent("k", b"1")
    store.delete("k")
    store.put_if_absent("k", b"2")
    assert store.get("k") == b"2"


def test_put_if_absent_race_has_exactly_one_winner(store: ObjectStore) -> None:
    """16 threads put_if_absent the same key with distinct content: one wins, 15 lose, every round."""
    # SeaweedFS queues conditional writes on one key (about 5 s a round of 16): fewer rounds there
    writers, rounds = 16, 10 if store.uri.startswith("s3://") else 30
    barrier = threading.Barrier(writers, timeout=120)
    outcomes: list[list[tuple[int, str]]] = [[] for _ in range(rounds)]
    lock = threading.Lock()

    def writer(ident: int) -> None:
        for rnd in range(rounds):
            barrier.wait()
            key = f"_txlake/log/{rnd:020d}.json"
            try:
                store.put_if_absent(key, f"writer-{ident}-round-{rnd}".encode())
                outcome = "won"
            except ObjectAlreadyExistsError as exc:
                outcome = "lost" if exc.path == key else f"lost with path {exc.path!r}"
            except Exception as exc:
                outcome = f"error {type(exc).__name__}"
            with lock:
                outcomes[rnd].append((ident, outcome))

    with ThreadPoolExecutor(max_workers=writers) as pool:
        for future in [pool.submit(writer, i) for i in range(writers)]:
            future.result()

    for rnd, results in enumerate(outcomes):
        assert len(results) == writers
        winners = [ident for ident, outcome in results if outcome == "won"]
        others = sorted({outcome for _, outcome in results} - {"won"})
        assert len(winners) == 1, f"round {rnd}: winners {winners}"
        assert others == ["lost"], f"round {rnd}: {others}"
        stored = store.get(f"_txlake/log/{rnd:020d}.json")
        assert stored == f"writer-{winners[0]}-round-{rnd}".encode()


# ---------------------------------------------------------------------------------------------- counters


def test_counters_count_each_request_kind(store: ObjectStore) -> None:
    counters = store.counters
    assert counters.snapshot() == RequestCounts()
    store.put("a/1", b"1")
    store.put_if_absent("a/2", b"2")
    with pytest.raises(ObjectAlreadyExistsError):
        store.put_if_absent("a/2", b"again")
    store.get("a/1")
    store.get_range("a/1", 0, 1)
    with pytest.raises(ObjectNotFoundError):
        store.get("a/missing")
    store.head("a/1")
    assert not store.exists("a/missing")
    store.list("a")
    store.list_dir("")
    store.delete("a/1")
    store.delete("a/missing")
    assert counters.snapshot() == RequestCounts(get=3, head=2, list=2, put=3, delete=2)
    assert counters.snapshot().total == 12
    assert counters.snapshot().as_dict() == {"GET": 3, "HEAD": 2, "LIST": 2, "PUT": 3, "DELETE": 2}
    counters.reset()
    assert counters.snapshot() == RequestCounts()


def test_measure_counts_only_inside_the_block(store: ObjectStore) -> None:
    store.put("x", b"1")
    with store.counters.measure() as measured:
        store.get("x")
        store.head("x")
        assert measured.counts == RequestCounts(get=1, head=1)
    store.get("x")
    assert measured.counts == RequestCounts(get=1, head=1)
    assert store.counters.snapshot() == RequestCounts(get=2, head=1, put=1)


def test_list_counts_one_request_per_page_of_1000(store: ObjectStore) -> None:
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda i: store.put(f"many/{i:05d}", b""), range(1001)))
    with store.counters.measure() as measured:
        listed = store.list("many")
    assert len(listed) == 1001
    assert measured.counts == RequestCounts(list=2)
    with store.counters.measure() as measured:
        assert len(store.list("many", start_after="many/00001")) == 999
    assert measured.counts == RequestCounts(list=1)


def test_counters_are_shared_by_threads(store: ObjectStore) -> None:
    store.put("x", b"1")
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda _: store.get("x"), range(64)))
    assert store.counters.snapshot() == RequestCounts(get=64, put=1)


# ------------------------------------------------------------------------------------------------ faults


def test_fail_raises_injected_fault_and_is_not_retried(store: ObjectStore) -> None:
    store.faults.add(FaultRule("PUT", 1, "fail"))
    with pytest.raises(InjectedFaultError) as info:
        store.put("f/x", b"1")
    assert isinstance(info.value, StorageError)
    assert info.value.kind == "PUT"
    assert info.value.path == "f/x"
    assert store.counters.snapshot().put == 1
    assert not store.exists("f/x")
    store.put("f/x", b"1")  # the rule fired its one time
    assert store.get("f/x") == b"1"


def test_fail_on_put_if_absent_writes_nothing(store: ObjectStore) -> None:
    store.faults.add(FaultRule("PUT", 1, "fail"))
    with pytest.raises(InjectedFaultError):
        store.put_if_absent("f/y", b"1")
    assert store.counters.snapshot().put == 1
    assert not store.exists("f/y")


@pytest.mark.parametrize("method", ["put", "put_if_absent"])
def test_transient_put_is_absorbed_by_retry(store: ObjectStore, method: str) -> None:
    store.faults.add(FaultRule("PUT", 1, "transient"))
    getattr(store, method)("t/x", b"payload")
    assert store.get("t/x") == b"payload"
    assert store.counters.snapshot() == RequestCounts(put=2, get=1)


def test_transient_get_is_absorbed_by_retry(store: ObjectStore) -> None:
    store.put("t/g", b"1")
    store.faults.add(FaultRule("GET", 1, "transient"))
    assert store.get("t/g") == b"1"
    assert store.counters.snapshot() == RequestCounts(put=1, get=2)


def test_transient_beyond_max_retries_surfaces() -> None:
    store = ObjectStore.from_uri("memory://transient-exhausted", {"max_retries": "2", "retry_base_delay": "0"})
    store.faults.add(FaultRule("HEAD", 1, "transient", times=10))
    with pytest.raises(TransientStorageError) as info:
        store.head("x")
    assert info.value.kind == "HEAD"
    assert store.counters.snapshot() == RequestCounts(head=3)


@pytest.mark.parametrize("method", ["put", "put_if_absent"])
def test_crash_before_writes_nothing(store: ObjectStore, method: str) -> None:
    store.faults.add(FaultRule("PUT", 1, "crash_before"))
    with pytest.raises(SimulatedCrash) as info:
        getattr(store, method)("c/x", b"1")
    assert not isinstance(info.value, Exception)
    assert (info.value.kind, info.value.path, info.value.nth) == ("PUT", "c/x", 1)
    store.faults.clear()
    assert not store.exists("c/x")
    assert store.list("c") == []


@pytest.mark.parametrize("method", ["put", "put_if_absent"])
def test_crash_after_put_landed(store: ObjectStore, method: str) -> None:
    store.faults.add(FaultRule("PUT", 1, "crash_after"))
    with pytest.raises(SimulatedCrash) as info:
        getattr(store, method)("c/y", b"landed")
    assert (info.value.kind, info.value.path) == ("PUT", "c/y")
    assert store.get("c/y") == b"landed"
    if method == "put_if_absent":
        # The restarted client sees its own earlier write as a lost race; recovery must read the object.
        with pytest.raises(ObjectAlreadyExistsError):
            store.put_if_absent("c/y", b"landed")


def test_fault_rule_counts_only_matching_requests(store: ObjectStore) -> None:
    store.faults.add(FaultRule("PUT", 2, "fail", path_contains="_delta_log/"))
    store.put("t/_delta_log/0.json", b"0")  # 1st matching PUT
    store.put("t/part-0.parquet", b"data")  # does not match
    store.get("t/part-0.parquet")  # other kind
    with pytest.raises(InjectedFaultError) as info:
        store.put("t/_delta_log/1.json", b"1")  # 2nd matching PUT
    assert info.value.path == "t/_delta_log/1.json"
    store.put("t/_delta_log/1.json", b"1")
    assert _paths(store.list("t/_delta_log")) == ["t/_delta_log/0.json", "t/_delta_log/1.json"]


def test_fault_rule_times_fires_repeatedly(store: ObjectStore) -> None:
    store.faults.add(FaultRule("DELETE", 1, "fail", times=2))
    store.put("x", b"1")
    for _ in range(2):
        with pytest.raises(InjectedFaultError):
            store.delete("x")
    store.delete("x")
    assert not store.exists("x")


def test_fault_rule_nth_counts_from_one() -> None:
    store = ObjectStore.from_uri("memory://fault-nth-zero")
    with pytest.raises(ValueError):
        store.faults.add(FaultRule("PUT", 0))


# ------------------------------------------------------------------------------------------------- child


def test_child_sees_parent_objects_and_shares_counters_and_faults(store: ObjectStore) -> None:
    store.put("ns/t/_delta_log/0.json", b"0")
    child = store.child("ns/t")
    assert child.uri == store.url("ns/t")
    assert child.counters is store.counters
    assert child.faults is store.faults
    assert child.get("_delta_log/0.json") == b"0"
    child.put("part-0.parquet", b"data")
    assert store.get("ns/t/part-0.parquet") == b"data"
    assert _paths(child.list("")) == ["_delta_log/0.json", "part-0.parquet"]
    child_dirs, child_objects = child.list_dir("")
    assert (child_dirs, _paths(child_objects)) == (["_delta_log"], ["part-0.parquet"])
    assert _paths(child.list("", start_after="_delta_log/0.json")) == ["part-0.parquet"]
    assert child.head("part-0.parquet").path == "part-0.parquet"
    before = store.counters.snapshot()
    child.get("part-0.parquet")
    assert store.counters.snapshot() - before == RequestCounts(get=1)
    store.faults.add(FaultRule("DELETE", 1, "fail"))
    with pytest.raises(InjectedFaultError):
        child.delete("part-0.parquet")
    grandchild = child.child("_delta_log")
    assert _paths(grandchild.list("")) == ["0.json"]
    assert grandchild.counters is store.counters


def test_reopening_a_uri_sees_the_same_objects(any_store_uri: StoreLocation) -> None:
    first = ObjectStore.from_uri(any_store_uri.uri, any_store_uri.storage_options)
    first.put("sub/x", b"1")
    again = ObjectStore.from_uri(any_store_uri.uri, any_store_uri.storage_options)
    assert again.get("sub/x") == b"1"
    nested = ObjectStore.from_uri(first.url("sub"), first.storage_options)
    assert nested.get("x") == b"1"
    assert again.storage_options == dict(any_store_uri.storage_options)
    assert again.scheme == any_store_uri.uri.split("://", 1)[0]


# ---------------------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    ("uri", "options"),
    [
        pytest.param("gs://bucket/lake", {}, id="unsupported-scheme"),
        pytest.param("s3://ab/lake", {}, id="bucket-name-too-short"),
        pytest.param("s3:///lake", {}, id="no-bucket"),
        pytest.param("relative/dir", {}, id="relative-local-path"),
        pytest.param("memory://opts", {"no_such_option": "1"}, id="unknown-option"),
        pytest.param("s3://bucket/lake", {"AWS_BOGUS_KEY": "1"}, id="unknown-aws-option"),
    ],
)
def test_bad_arguments_raise_value_error(uri: str, options: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        ObjectStore.from_uri(uri, options)


@pytest.mark.s3
def test_s3_wrong_credentials_fail_fast_as_a_permanent_error(s3_uri: str, s3_options: dict[str, str]) -> None:
    ObjectStore.from_uri(s3_uri, s3_options).put("x", b"1")
    wrong = ObjectStore.from_uri(s3_uri, dict(s3_options, AWS_SECRET_ACCESS_KEY="not-the-secret"))
    with pytest.raises(StorageError) as info:
        wrong.get("x")
    assert not isinstance(info.value, (TransientStorageError, ObjectNotFoundError))
    assert info.value.kind == "GET"
    assert wrong.counters.snapshot() == RequestCounts(get=1)


def test_unreachable_s3_endpoint_is_transient_and_retried() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    options = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "key",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_REGION": "us-east-1",
        "max_retries": "2",
        "retry_base_delay": "0",
    }
    store = ObjectStore.from_uri("s3://nobody-home/lake", options)
    with pytest.raises(TransientStorageError) as info:
        store.get("x")
    assert info.value.kind == "GET"
    assert store.counters.snapshot() == RequestCounts(get=3)


@pytest.mark.s3
def test_s3_fixtures_give_a_fresh_bucket_per_test(s3_uri: str, s3_options: dict[str, str]) -> None:
    assert s3_uri.startswith("s3://") and s3_uri.endswith("/lake")
    assert set(s3_options) == {
        "AWS_ENDPOINT_URL",
        "AWS_ALLOW_HTTP",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_REGION",
    }
    bucket_root = ObjectStore.from_uri(s3_uri.rsplit("/", 1)[0], s3_options)
    assert bucket_root.list("") == []


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        pytest.param({"aws_endpoint_url": "localhost:8333"}, "aws_endpoint_url", id="endpoint-without-scheme"),
        pytest.param({"aws_endpoint_url": ""}, "aws_endpoint_url", id="endpoint-empty"),
        pytest.param({"AWS_ENDPOINT_URL": "http://"}, "AWS_ENDPOINT_URL", id="endpoint-without-host"),
        pytest.param({"endpoint": "ftp://host:21"}, "endpoint", id="endpoint-not-http"),
        pytest.param({"aws_endpoint_url": "http://a b:8333"}, "aws_endpoint_url", id="endpoint-with-space"),
        pytest.param({"aws_endpoint_url": "http://host:port"}, "aws_endpoint_url", id="endpoint-port-not-a-number"),
    ],
)
def test_an_endpoint_obstore_cannot_use_is_refused_before_it_panics(options: dict[str, str], argument: str) -> None:
    """obstore panics (a BaseException) on such endpoints at the first request: refuse them, naming the option."""
    options = {**options, "aws_access_key_id": "key", "aws_secret_access_key": "secret"}
    with pytest.raises(InvalidArgumentError) as info:
        ObjectStore.from_uri("s3://bucket/lake", options)
    assert info.value.argument == "storage_options"
    assert repr(argument) in str(info.value) and "http://" in str(info.value)


@pytest.mark.parametrize(
    ("uri", "options", "argument"),
    [
        pytest.param("s3://a b/lake", {}, "uri", id="bucket-with-space"),
        pytest.param("s3://ab#c/lake", {}, "uri", id="bucket-with-hash"),
        pytest.param("s3://bucket/lake", {"aws_region": "us east"}, "storage_options", id="region-with-space"),
    ],
)
def test_bucket_and_region_names_obstore_cannot_use_are_refused(
    uri: str, options: dict[str, str], argument: str
) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        ObjectStore.from_uri(uri, {**options, "aws_access_key_id": "key", "aws_secret_access_key": "secret"})
    assert info.value.argument == argument


@pytest.mark.parametrize(
    "endpoint", ["http://localhost:8333/bucket", "http://localhost:8333/a/b/", "http://localhost:8333/?x=1"]
)
def test_an_endpoint_names_only_the_server(endpoint: str) -> None:
    """A path in the endpoint is most often the bucket put in the wrong place: say where it goes."""
    with pytest.raises(InvalidArgumentError, match=r"s3://bucket/prefix") as info:
        ObjectStore.from_uri("s3://bucket/lake", {"aws_endpoint_url": endpoint, "aws_access_key_id": "k"})
    assert info.value.argument == "storage_options" and repr(endpoint) in str(info.value)
    ObjectStore.from_uri("s3://bucket/lake", {"aws_endpoint_url": "http://localhost:8333/", "aws_allow_http": "true"})


@pytest.mark.parametrize("key", ["aws_allow_http", "aws_skip_signature", "aws_virtual_hosted_style_request"])
@pytest.mark.parametrize("value", ["maybe", "", "tru", "2"])
def test_a_boolean_option_is_true_or_false_not_anything_else(key: str, value: str) -> None:
    """``aws_allow_http=maybe`` used to mean false without a word; now it is refused, naming the option."""
    with pytest.raises(InvalidArgumentError, match="must be true or false") as info:
        ObjectStore.from_uri("s3://bucket/lake", {key: value})
    assert repr(key) in str(info.value) and repr(value) in str(info.value)
    for word in ("TRUE", "false", "1", "0", "yes", "Off"):
        ObjectStore.from_uri("s3://bucket/lake", {key: word, "aws_endpoint_url": "http://localhost:1"})


def test_aws_allow_http_from_the_environment_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ALLOW_HTTP", "perhaps")
    with pytest.raises(InvalidArgumentError, match="AWS_ALLOW_HTTP environment variable must be true or false"):
        ObjectStore.from_uri("s3://bucket/lake", {"aws_endpoint_url": "http://localhost:1"})


def test_an_endpoint_from_the_environment_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "localhost:8333")
    with pytest.raises(InvalidArgumentError) as info:
        ObjectStore.from_uri("s3://bucket/lake", {"aws_access_key_id": "key", "aws_secret_access_key": "secret"})
    assert "AWS_ENDPOINT_URL environment variable" in str(info.value)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"aws_region": 5}, id="region-int"),
        pytest.param({"aws_access_key_id": None}, id="key-none"),
        pytest.param({"aws_allow_http": 1}, id="allow-http-int"),
        pytest.param({"max_retries": [3]}, id="retries-list"),
        pytest.param({5: "x"}, id="key-not-a-string"),
    ],
)
def test_an_option_of_the_wrong_type_is_a_type_error_naming_it(options: dict[object, object]) -> None:
    with pytest.raises(InvalidArgumentTypeError) as info:
        ObjectStore.from_uri("s3://bucket/lake", options)  # type: ignore[arg-type]
    assert info.value.argument == "storage_options"
    assert repr(next(iter(options))) in str(info.value)


def test_retry_options_take_numbers_or_number_strings() -> None:
    store = ObjectStore.from_uri("memory://retry-options", {"max_retries": 3, "retry_base_delay": "0.5"})
    assert (store.retry.max_retries, store.retry.base_delay) == (3, 0.5)
    with pytest.raises(InvalidArgumentError) as info:
        ObjectStore.from_uri("memory://retry-options", {"max_retries": "three"})
    assert "'max_retries'" in str(info.value)


# ------------------------------------------------------------------------------------------ local paths


@pytest.mark.parametrize("name", ["a#b", "a?b", "a%23b", "a b"])
def test_local_paths_are_taken_literally(tmp_path: Path, name: str) -> None:
    """``#`` and ``?`` in a local path are part of a directory name, not a URL fragment or query."""
    for uri in (str(tmp_path / name), f"file://{tmp_path / name}"):
        store = ObjectStore.from_uri(uri)
        assert store.uri == f"file://{tmp_path / name}" and store.local_path() == str(tmp_path / name)
        store.child("t").put("x", b"1")
        assert (tmp_path / name / "t" / "x").read_bytes() == b"1"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_split_uri_parses_no_query_or_fragment() -> None:
    assert split_uri("/data/a#b?c") == UriParts("file", "", "/data/a#b?c")
    assert split_uri("file:///data/a#b") == UriParts("file", "", "/data/a#b")
    assert split_uri("file:/data/x") == UriParts("file", "", "/data/x")
    assert split_uri("S3://bucket/pre#fix") == UriParts("s3", "bucket", "/pre#fix")
    assert local_root("file://localhost/data") == "/data"
    assert local_root("file://host/data") is None and local_root("s3://b/x") is None
    with pytest.raises(InvalidArgumentError):
        ObjectStore.from_uri("file://otherhost/data")


def test_a_local_directory_that_cannot_be_made_is_a_storage_error_naming_the_path(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    too_long = tmp_path / ("x" * 300)
    cases: list[tuple[Path, type[StorageError], str]] = [
        (a_file / "lake", InvalidObjectPathError, "is a file, not a directory"),  # ENOTDIR
        (a_file, InvalidObjectPathError, "is a file, not a directory"),
        (too_long, InvalidObjectPathError, "300 bytes long"),  # ENAMETOOLONG
        (too_long / "lake", InvalidObjectPathError, "300 bytes long"),
        (Path("/proc/txlake-nope"), StorageError, "virtual file system"),
    ]
    for path, cls, reason in cases:
        with pytest.raises(StorageError) as info:
            ObjectStore.from_uri(str(path))
        assert type(info.value) is cls, (path, info.value)
        assert not isinstance(info.value, OSError)
        message = str(info.value)
        assert "\n" not in message and str(path) in message and reason in message, message
        assert info.value.path == str(path)
    with pytest.raises(InvalidObjectPathError):  # only looking: a name too long cannot be looked up either
        ObjectStore.from_uri(str(too_long), must_exist=True)
    with pytest.raises(ObjectNotFoundError):
        ObjectStore.from_uri(str(a_file / "lake"), must_exist=True)
    assert a_file.read_text() == "not a directory"


def test_a_local_put_whose_directory_is_in_the_way_once_is_tried_again(tmp_path: Path) -> None:
    """A directory removed as a PUT creates it (another client's ``remove_empty_dir``) fails that attempt with
    EEXIST or ENOENT; the PUT tries again. Here a dangling symlink stands where the directory goes (EEXIST),
    and is gone before the second attempt."""
    store = ObjectStore.from_uri(tmp_path.as_uri())
    blocker = tmp_path / "txns"
    blocker.symlink_to(tmp_path / "nowhere")
    attempts: list[bool] = []

    def clear() -> None:
        attempts.append(blocker.is_symlink())
        blocker.unlink()

    store.faults.add(FaultRule("PUT", 2, "hook", path_contains="txns/", hook=clear))
    store.put_if_absent("txns/t/lease-000000.json", b"{}")
    assert attempts == [True] and store.get("txns/t/lease-000000.json") == b"{}"
    blocker = tmp_path / "other"
    blocker.symlink_to(tmp_path / "nowhere")
    with pytest.raises(StorageError, match="broken symbolic link"):  # in the way for good: still an error
        store.put("other/x.json", b"{}")


def test_remove_empty_dir_stays_inside_the_store(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    store = ObjectStore.from_uri(root.as_uri())
    outside = tmp_path / "sibling"
    outside.mkdir()
    (root / "a" / "b").mkdir(parents=True)
    store.put("full/x.json", b"{}")
    for path in ("", "/", ".", "..", "../sibling", "a/../..", "a/./b", "a\x00b", "full"):
        store.remove_empty_dir(path)  # never raises, never leaves the root, never removes a non-empty one
    assert outside.is_dir() and root.is_dir() and (root / "a" / "b").is_dir() and (root / "full").is_dir()
    store.remove_empty_dir("a/b/")
    store.remove_empty_dir("a/b")  # (gone already: nothing)
    assert not (root / "a" / "b").exists() and (root / "a").is_dir()
    memory = ObjectStore.from_uri("memory://remove-empty-dir")
    memory.remove_empty_dir("a")  # no directories: nothing


@pytest.mark.parametrize("uri", ["s3://user:PASSW0RDX@good-bucket/x", "file://user:PASSW0RDX@host/x"])
def test_credentials_in_a_uri_are_refused_without_showing_them(uri: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        ObjectStore.from_uri(uri)
    assert "PASSW0RDX" not in str(raised.value) and "****@" in str(raised.value)


def test_seaweedfs_is_ready_when_an_earlier_poll_created_the_probe_bucket(seaweedfs: SeaweedFS) -> None:
    """The readiness poll creates a bucket, then writes into it; a write refused while no volume is up yet
    left the bucket behind, and the next poll's create answers 409 BucketAlreadyOwnedByYou (was: not ready
    until the 60 s deadline)."""
    status, _ = seaweedfs._s3_request("PUT", "/txlake-probe")
    assert status == 200
    seaweedfs._wait_ready(time.monotonic() + 10)  # returns; it removed the probe bucket
    status, _ = seaweedfs._s3_request("PUT", "/txlake-probe")
    assert status == 200
    seaweedfs.delete_bucket("txlake-probe")


FORK_SCRIPT = """
import multiprocessing as mp, sys, txlake
from txlake.errors import StorageError

def child(uri, q):
    try:
        q.put(("version", txlake.connect(uri, create=False).version()))
    except StorageError as exc:
        q.put(("error", str(exc)))

if __name__ == "__main__":
    uri = sys.argv[1]
    txlake.connect(uri).create_table("a.t", "id long")  # the parent's requests start the object-store runtime
    ctx = mp.get_context(sys.argv[2])
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(uri, q))
    p.start()
    p.join(60)
    if p.is_alive():
        p.kill()
        print("hung")
    else:
        print(*q.get(timeout=5))
"""


@pytest.mark.parametrize(
    ("scheme", "method", "expected"),
    [
        ("file", "fork", "error HEAD"),
        ("file", "spawn", "version 1"),
        ("memory", "fork", "version 1"),  # (no I/O runtime: a forked child works on its copy)
    ],
)
def test_a_child_forked_after_the_parent_used_the_store_fails_at_once(
    tmp_path: Path, scheme: str, method: str, expected: str
) -> None:
    """obstore's I/O runtime does not survive ``fork``: a child forked after its parent made a request on local
    disk (or S3) used to wait forever on its first request. It now gets a :class:`StorageError` saying what to
    do; a spawned child, and a forked one on ``memory://``, work."""
    uri = f"file://{tmp_path}/lake" if scheme == "file" else f"memory://fork-{method}"
    script = tmp_path / "fork_child.py"
    script.write_text(FORK_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), uri, method], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(expected), done.stdout
    if method == "fork" and scheme == "file":
        assert "this process was forked" in done.stdout and "'spawn'" in done.stdout
