"""Stores on S3 and runs read from S3, against a real S3 endpoint on 127.0.0.1.

The endpoint is a `moto` server this module starts (and stops) itself; every bucket is made
fresh per test. What is checked, each against an independent computation from the source
files (`oracle`): the whole ingest → sql → runs → check → report → compact path with the store
on S3; incremental re-ingest (appended steps, a no-op); ingesting run trees that live on S3 with
the same ledger (only appended bytes read again); two ingests racing on one S3 store; a lease
left by a dead writer; and that no command prints the secret key.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

import oracle
import runstore
import storekit
from runstore import demo
from s3proxy import HeldRequests
from webhook import server  # noqa: F401 - a fixture: a webhook endpoint on 127.0.0.1

pytest.importorskip("moto", reason="the S3 tests need the test extra (moto[server])")
pytest.importorskip("s3fs", reason="the S3 tests need the s3 extra (s3fs)")

TABLES = ("runs", "config", "metrics_raw", "checkpoints", "trajectories", "rollout_steps",
          "conversations", "messages", "spans", "trace_slices")
SECRET = "runstore-test-secret-" + uuid.uuid4().hex  # must never appear in any output


@pytest.fixture(scope="module")
def endpoint() -> Iterator[dict[str, str]]:
    """A moto S3 server on 127.0.0.1 for this module, and the environment that points at it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = {"AWS_ACCESS_KEY_ID": "runstore-test", "AWS_SECRET_ACCESS_KEY": SECRET,
           "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    saved = {k: os.environ.get(k) for k in env}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the moto server did not start")
                time.sleep(0.1)
        os.environ.update(env)
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        proc.terminate()
        proc.wait(timeout=30)


def new_bucket(endpoint: dict[str, str]) -> str:
    """A fresh, empty bucket on the endpoint; its name."""
    import boto3

    name = f"runstore-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint["AWS_ENDPOINT_URL"], region_name="us-east-1",
                 aws_access_key_id="runstore-test",
                 aws_secret_access_key=SECRET).create_bucket(Bucket=name)
    return name


@pytest.fixture
def bucket(endpoint: dict[str, str]) -> str:
    return new_bucket(endpoint)


def s3fs_client() -> Any:
    import s3fs

    return s3fs.S3FileSystem(endpoint_url=os.environ["AWS_ENDPOINT_URL"], use_listings_cache=False,
                             skip_instance_cache=True)


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "runstore", *args], capture_output=True,
                          text=True, timeout=600, env=os.environ.copy())
    assert SECRET not in proc.stdout + proc.stderr
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def counts(store: runstore.Store) -> dict[str, int]:
    q = " union all ".join(f"select '{t}' as t, count(*) as n from {t}" for t in TABLES)
    return {r["t"]: r["n"] for r in store.arrow(q).to_pylist()}


def expected(root: Path) -> dict[str, int]:
    e = oracle.expected_counts(root)
    return {t: e.get(t, 0) for t in TABLES}


def manifests(uri: str) -> list[str]:
    fs = s3fs_client()
    return sorted(p.rsplit("/", 1)[-1] for p in fs.ls(uri[5:] + "/_runstore/manifests"))


# --------------------------------------------------------------------------- store on S3

@pytest.mark.slow
def test_store_on_s3_ingest_sql_check_report_compact(demo_tree: Path, bucket: str,
                                                      tmp_path: Path) -> None:
    uri = f"s3://{bucket}/team/store"
    cli("--store", uri, "ingest", "-q", str(demo_tree))
    store = runstore.open(uri)
    want_counts = expected(demo_tree)  # the tree does not change in this test
    assert counts(store) == want_counts

    # Every view answers on S3 as the oracle does from the files: KL health as one example.
    kl = store.sql("select run_name, steps_over, flagged from kl_health").rows()
    want = oracle.kl_health(demo_tree)
    assert {r[0]: (r[1], r[2]) for r in kl} == \
        {name: (row["steps_over"], row["flagged"]) for name, row in want.items()}
    flagged = sorted(n for n, row in want.items() if row["flagged"])
    assert flagged, "the demo tree has a run whose KL crosses 0.01"
    # A worker process (isolated=True, the web UI's user SQL) reads the same S3 snapshot.
    assert store.sql("select run_name, steps_over, flagged from kl_health order by 1",
                     isolated=True).rows() == sorted(kl)

    # The CLI through $RUNSTORE_STORE, as a user would set it once.
    os.environ["RUNSTORE_STORE"] = uri
    try:
        out = cli("sql", "select run_name from kl_health where flagged order by 1",
                  "--format", "json").stdout
        assert [r["run_name"] for r in json.loads(out)] == flagged
        runs = cli("runs", "--format", "json").stdout
        assert sorted(r["run_label"] for r in json.loads(runs)) == \
            sorted(oracle.run_name(demo_tree, r) for r in oracle.run_dirs(demo_tree))
        check = cli("check", "--format", "json", check=False)
        assert check.returncode == 1, check.stderr  # a rule fired
        assert sorted({r["run_name"] for r in json.loads(check.stdout)}) == flagged
        report = tmp_path / "report.html"
        cli("report", "-o", str(report))
        assert report.stat().st_size > 100_000
        assert flagged[0] in report.read_text()
        cli("compact")
    finally:
        del os.environ["RUNSTORE_STORE"]
    assert counts(runstore.open(uri)) == want_counts
    # The polars path reads the same files natively.
    assert runstore.open(uri).table("metrics_raw").select("key").collect().height == \
        want_counts["metrics_raw"]


@pytest.mark.slow
def test_vacuum_on_s3(small_tree: Path, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On S3 too, a vacuum runs after the compaction's snapshot is published and deletes only
    objects no manifest left on S3 lists; the store then answers with every row."""
    uri = f"s3://{bucket}/store"
    store = runstore.open(uri)
    monkeypatch.setenv("RUNSTORE_BATCH_ROWS", "300")  # a snapshot per run: several files
    store.ingest([small_tree])
    store.compact()  # the ingest's files are now listed only by the older manifests
    fs = s3fs_client()

    def data_objects() -> set[str]:
        return {p.split("/store/", 1)[1] for p in fs.find(f"{bucket}/store/tables")
                if p.endswith(".parquet") and "/_delta_log/" not in p}

    def listed() -> dict[str, set[str]]:
        out = {}
        for name in manifests(uri):
            m = json.loads(fs.cat_file(f"{bucket}/store/_runstore/manifests/{name}"))
            out[name] = {f for e in m["tables"].values() for f in e["files"]}
        return out

    newest = listed()[manifests(uri)[-1]]
    replaced = data_objects() - newest
    assert replaced
    env = {**os.environ, "RUNSTORE_READER_GRACE_SECONDS": "0"}  # no reader to wait for
    p = subprocess.run([sys.executable, "-m", "runstore", "--store", uri, "compact",
                        "--vacuum-hours", "0"], capture_output=True, text=True, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    assert f"vacuum: deleted {len(replaced)} data files" in p.stdout
    left = data_objects()
    assert not replaced & left
    for name, files in listed().items():
        assert files <= left, name
    assert counts(runstore.open(uri)) == expected(small_tree)


def test_one_process_queries_across_a_compaction_and_vacuum(
        small_tree: Path, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries remember what a data file is (its size, that it exists) once asked, since
    such a file never changes; in one process that keeps querying while a compaction and
    a vacuum replace and delete every file it has read, and an ingest adds rows, each query
    still answers with the rows of the latest snapshot. Only data files are remembered: not
    an object a query was allowed to read, which may change between two queries."""
    from runstore.storage.location.s3 import _QUERY_FILESYSTEMS

    uri = f"s3://{bucket}/store"
    store = runstore.open(uri)
    monkeypatch.setenv("RUNSTORE_BATCH_ROWS", "300")  # several files a table
    run = sorted(small_tree.rglob("config.json"))[0].parent  # one run, held back at first
    aside = small_tree.parent / "aside"
    shutil.move(str(run), aside)
    store.ingest([small_tree])
    held = counts(store)
    assert held == expected(small_tree)
    # What this process remembers, of every store on S3 its tests have queried so far: data
    # files only; and this store's files among them.
    remembered = {k for qfs in list(_QUERY_FILESYSTEMS.values()) for k in qfs.runstore_details}
    assert all(re.search(r"^[^/]+/(.+/)?tables/[^/]+/part-[^/]+\.parquet$", k)
               for k in remembered), sorted(remembered)
    read_before = {k for k in remembered if k.startswith(f"{bucket}/store/tables/")}
    assert read_before
    # An object a query is allowed to read may change: it is asked afresh each time.
    import boto3

    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    labels = f"s3://{bucket}/labels.csv"
    for body in (b"run_name,label\nx,a\n", b"run_name,label\nx,a\ny,longer label\n"):
        client.put_object(Bucket=bucket, Key="labels.csv", Body=body)
        got = store.sql(f"select * from read_csv('{labels}')", allow_read=[labels]).rows()
        assert got == [tuple(line.split(",")) for line in body.decode().splitlines()[1:]]

    monkeypatch.setenv("RUNSTORE_READER_GRACE_SECONDS", "0")
    report = store.compact(vacuum_hours=0)
    assert report.vacuum is not None and report.vacuum.files_deleted
    fs = s3fs_client()
    left = {p for p in fs.find(f"{bucket}/store/tables") if p.endswith(".parquet")}
    assert read_before - left  # files this process read are gone
    assert counts(store) == held
    shutil.move(str(aside), run)
    store.ingest([small_tree])
    assert counts(store) == expected(small_tree) != held
    assert counts(runstore.open(uri)) == expected(small_tree)


def test_s3_store_incremental(demo_tree: Path, bucket: str) -> None:
    uri = f"s3://{bucket}/store"
    store = runstore.open(uri)
    store.ingest([demo_tree])
    before = manifests(uri)

    again = store.ingest([demo_tree])
    assert (again.runs_new, again.runs_updated, again.bytes_read) == (0, 0, 0)
    assert manifests(uri) == before, "a no-op ingest publishes nothing"

    run = next(r for r in oracle.run_dirs(demo_tree) if (r / "metrics.jsonl").is_file()
               and oracle.run_kind(r) == "rl")
    size = (run / "metrics.jsonl").stat().st_size
    demo.append_steps(run, 10)
    appended = (run / "metrics.jsonl").stat().st_size - size
    rep = store.ingest([demo_tree])
    assert rep.runs_updated == 1
    assert rep.bytes_read >= appended
    assert counts(store) == expected(demo_tree)
    assert len(manifests(uri)) == len(before) + 1


def test_s3_store_lock_waits_and_times_out(demo_tree: Path, bucket: str) -> None:
    """A live lease (another writer) makes an ingest wait, then stop with the holder's PID."""
    uri = f"s3://{bucket}/store"
    runstore.open(uri).ingest([demo_tree])
    lease = {"pid": 4242, "host": "elsewhere", "token": "x", "expires": time.time() + 3600}
    s3fs_client().pipe_file(f"{bucket}/store/_runstore/lock", json.dumps(lease).encode())
    proc = cli("--store", uri, "ingest", "--lock-timeout", "1", str(demo_tree), check=False)
    assert proc.returncode == 4
    assert "store is locked by PID 4242 on elsewhere" in proc.stderr


def test_s3_store_takes_over_an_expired_lease(demo_tree: Path, bucket: str) -> None:
    """A writer that died leaves its lease; once expired the next ingest takes it over."""
    uri = f"s3://{bucket}/store"
    lease = {"pid": 4242, "host": "elsewhere", "token": "x", "expires": time.time() - 1}
    s3fs_client().pipe_file(f"{bucket}/store/_runstore/lock", json.dumps(lease).encode())
    store = runstore.open(uri)
    store.ingest([demo_tree], lock_timeout=5)
    assert counts(store) == expected(demo_tree)
    assert not s3fs_client().exists(f"{bucket}/store/_runstore/lock"), "released at the end"


@pytest.mark.slow
def test_two_concurrent_ingests_on_one_s3_store(demo_tree: Path, bucket: str,
                                                tmp_path: Path) -> None:
    """Two processes ingest different trees into one S3 store at once: the lease makes them
    take turns, and the store ends with every row of both, in contiguous snapshots."""
    uri = f"s3://{bucket}/store"
    runs = oracle.run_dirs(demo_tree)
    halves = [tmp_path / "a", tmp_path / "b"]
    for i, run in enumerate(runs):
        dst = halves[i % 2] / run.relative_to(demo_tree)
        shutil.copytree(run, dst)
    env = {**os.environ, "RUNSTORE_BATCH_ROWS": "5000"}  # several snapshots each
    procs = [subprocess.Popen([sys.executable, "-m", "runstore", "--store", uri, "ingest", "-q",
                               "--lock-timeout", "300", str(h)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for h in halves]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert SECRET not in out + err
    store = runstore.open(uri)
    a, b = expected(halves[0]), expected(halves[1])  # each half read once, not per table
    want = {t: a[t] + b[t] for t in TABLES}
    assert counts(store) == want
    seqs = [int(n[:-5]) for n in manifests(uri) if n.endswith(".json")]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "snapshots never collided"


def test_bad_bucket_is_a_clear_error(endpoint: dict[str, str]) -> None:
    proc = cli("--store", "s3://no-such-bucket-runstore/store", "ingest", "/nonexistent",
               check=False)
    assert proc.returncode == 2  # the source does not exist (checked before the store)
    proc = cli("--store", "s3://no-such-bucket-runstore/store", "sql", "select 1",
               check=False)
    assert proc.returncode == 3
    assert "runstore ingest" in proc.stderr  # no store there: says how to make one
    assert "Traceback" not in proc.stderr


NO_CREDENTIALS = {"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None,
                  "AWS_SESSION_TOKEN": None, "AWS_PROFILE": None,
                  "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
                  "AWS_CONFIG_FILE": "/nonexistent/config", "AWS_EC2_METADATA_DISABLED": "true"}


def cli_env(changes: dict[str, str | None], *args: str) -> subprocess.CompletedProcess[str]:
    """`runstore ARGS` in a process whose environment has `changes` (None: unset)."""
    env = {**os.environ, **{k: v for k, v in changes.items() if v is not None}}
    for k in [k for k, v in changes.items() if v is None]:
        env.pop(k, None)
    return subprocess.run([sys.executable, "-m", "runstore", *args], capture_output=True,
                          text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def small_store_on_s3(_small_template: Path, endpoint: dict[str, str],
                      tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(tree, store URI): a copy of the small tree and a store of it on S3 made by `runstore
    ingest`, for the tests whose commands fail before they change it (each checks it after)."""
    tree = tmp_path_factory.mktemp("s3_small") / "small"
    shutil.copytree(_small_template, tree, symlinks=True)
    uri = f"s3://{new_bucket(endpoint)}/store"
    assert cli("--store", uri, "ingest", "-q", str(tree)).returncode == 0
    return tree, uri


@pytest.mark.parametrize("args", [["sql", "select 1"], ["runs"], ["ingest", "RUNS"]])
def test_what_the_service_refuses_is_an_io_error_naming_it(
        small_store_on_s3: tuple[Path, str], args: list[str]) -> None:
    """No credentials, or an endpoint that does not answer: exit 6 (reading or writing failed
    on this machine), naming the location and what to check; these were exit 70, "unexpected
    NoCredentialsError ... a runstore bug"."""
    small_tree, uri = small_store_on_s3
    args = [str(small_tree) if a == "RUNS" else a for a in args]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # a port nothing listens on: connections are refused
    port = closed.getsockname()[1]
    closed.close()
    for changes, says in [(NO_CREDENTIALS, "Unable to locate credentials"),
                          ({"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
                            "AWS_MAX_ATTEMPTS": "1"}, "Could not connect to the endpoint")]:
        proc = cli_env(changes, "--store", uri, *args)
        assert proc.returncode == 6, proc.stderr
        assert SECRET not in proc.stdout + proc.stderr
        storekit.assert_clear_error(proc.stderr, f"cannot use {uri}/", says,
                                    "AWS credentials", "AWS_ENDPOINT_URL")
    # Nothing stored was lost: with the credentials again, the store answers as before.
    assert counts(runstore.open(uri)) == expected(small_tree)


def test_an_s3_uri_without_a_bucket_is_a_usage_error() -> None:
    for uri in ("s3://", "s3:///store", "s3:////"):
        proc = cli("--store", uri, "runs", check=False)
        assert proc.returncode == 2, (uri, proc.stderr)
        storekit.assert_clear_error(proc.stderr, "not an S3 URI", "s3://bucket/prefix")


# --------------------------------------------------------------------------- runs on S3

def upload(tree: Path, uri: str) -> None:
    s3fs_client().put(str(tree), uri[5:], recursive=True)


def test_ingest_runs_from_s3(demo_tree: Path, bucket: str, tmp_path: Path) -> None:
    """A run tree on S3 ingests to the same rows as the same tree on disk, and re-ingesting
    after steps were appended reads only the new bytes (size and ETag as the ledger's test)."""
    upload(demo_tree, f"s3://{bucket}/runs")
    store = runstore.open(tmp_path / "store")
    first = store.ingest([f"s3://{bucket}/runs"])
    assert first.runs_new == len(oracle.run_dirs(demo_tree))
    assert not first.warnings
    assert counts(store) == expected(demo_tree)
    names = store.sql("select run_name, kind, layout from runs order by 1").rows()
    assert names == sorted((oracle.run_name(demo_tree, r), oracle.run_kind(r), oracle.layout_of(r))
                           for r in oracle.run_dirs(demo_tree))

    noop = store.ingest([f"s3://{bucket}/runs"])
    assert (noop.runs_new, noop.runs_updated, noop.bytes_read) == (0, 0, 0)

    run = next(r for r in oracle.run_dirs(demo_tree) if oracle.run_kind(r) == "rl")
    rel = run.relative_to(demo_tree).as_posix()
    size = (run / "metrics.jsonl").stat().st_size
    fs = s3fs_client()
    before = {p[len(f"{bucket}/runs/{rel}/"):]: info["size"]
              for p, info in fs.find(f"{bucket}/runs/{rel}", detail=True).items()}
    demo.append_steps(run, 10)  # appends lines to the run's files
    now = {p.relative_to(run).as_posix(): p.stat().st_size for p in run.rglob("*") if p.is_file()}
    changed = {k: v for k, v in now.items() if before.get(k) != v}
    assert "metrics.jsonl" in changed
    for k in changed:  # objects cannot be appended to: the whole object is put again
        fs.put_file(str(run / k), f"{bucket}/runs/{rel}/{k}")
    rep = store.ingest([f"s3://{bucket}/runs"])
    assert rep.runs_updated == 1
    # Only what is new is read: the appended bytes of append-only files (FORMATS.md), a
    # changed write-once file (a rollout summary) whole.
    append_only = ("metrics.jsonl", "checkpoints.jsonl", "timing_spans.jsonl", "trace_events.jsonl")
    assert rep.bytes_read == sum(v - before.get(k, 0) if k in append_only else v
                                 for k, v in changed.items())
    assert (run / "metrics.jsonl").stat().st_size > size
    assert counts(store) == expected(demo_tree)

    # A run deleted from the bucket keeps its rows and is marked missing.
    fs.rm(f"{bucket}/runs/{rel}", recursive=True)
    gone = store.ingest([f"s3://{bucket}/runs"])
    assert gone.runs_missing == 1
    status = store.sql("select status from runs where run_name = $n", {"n": oracle.run_name(demo_tree, run)})
    assert status.rows() == [("missing",)]
    assert counts(store) == expected(demo_tree)


def test_same_size_rewrite_on_s3_is_reread(demo_tree: Path, bucket: str, tmp_path: Path) -> None:
    """An object put again with the same size and the same last 64 bytes (one value edited
    early on): its change token (last-modified and ETag) moved, so it is read again whole."""
    from filekit import edit_early, metric_rows_in_store, oracle_metric_rows

    upload(demo_tree, f"s3://{bucket}/runs")
    store = runstore.open(tmp_path / "store")
    store.ingest([f"s3://{bucket}/runs"])
    run = next(r for r in oracle.run_dirs(demo_tree) if oracle.run_kind(r) == "rl")
    rel = run.relative_to(demo_tree).as_posix()
    rid = store.sql("select run_id from runs where run_name = $n",
                    {"n": oracle.run_name(demo_tree, run)}).rows()[0][0]
    stale = metric_rows_in_store(store, rid)
    edit_early(run / "metrics.jsonl")
    s3fs_client().put_file(str(run / "metrics.jsonl"), f"{bucket}/runs/{rel}/metrics.jsonl")
    rep = store.ingest([f"s3://{bucket}/runs"])
    assert rep.bytes_read == (run / "metrics.jsonl").stat().st_size
    assert metric_rows_in_store(store, rid) == oracle_metric_rows(run / "metrics.jsonl") != stale
    assert counts(store) == expected(demo_tree)


def test_large_object_on_s3_checked_by_sampled_blocks(small_tree: Path, bucket: str,
                                                      tmp_path: Path) -> None:
    """Past 1 MiB on S3 (no inode; every put is a new object): an object put again with a line
    appended is read from the offset, after its sampled blocks are fetched by range; one put
    again with a same-length edit inside a sampled block, and a line appended, is read whole."""
    from runstore.ingest import changes
    from filekit import (RUN, big_metrics, changed_digit, loss_digit, metric_rows_in_store,
                         oracle_metric_rows)

    run = small_tree / RUN
    path = run / "metrics.jsonl"
    big_metrics(path)
    upload(small_tree, f"s3://{bucket}/runs")
    key = f"{bucket}/runs/{RUN}/metrics.jsonl"
    store = runstore.open(tmp_path / "store")
    store.ingest([f"s3://{bucket}/runs"])
    rid = store.sql("select run_id from runs where run_name = $n", {"n": RUN}).rows()[0][0]

    line = json.dumps({"step": 5000, "loss": 0.5}).encode() + b"\n"
    with open(path, "ab") as f:
        f.write(line)
    s3fs_client().put_file(str(path), key)
    rep = store.ingest([f"s3://{bucket}/runs"])
    assert rep.bytes_read == len(line) and not rep.warnings
    assert metric_rows_in_store(store, rid) == oracle_metric_rows(path)

    data = path.read_bytes()
    size = len(data)
    pos = loss_digit(data, True, changes.sample_ranges(size)[3:4], size - changes.TAIL)
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(changed_digit(data[pos]))
    with open(path, "ab") as f:
        f.write(json.dumps({"step": 5001, "loss": 0.25}).encode() + b"\n")
    s3fs_client().put_file(str(path), key)
    rep = store.ingest([f"s3://{bucket}/runs"])
    assert rep.bytes_read == path.stat().st_size  # read whole
    assert metric_rows_in_store(store, rid) == oracle_metric_rows(path)
    assert counts(store) == expected(small_tree)


def test_missing_s3_source_is_a_clear_error(bucket: str, tmp_path: Path) -> None:
    proc = cli("--store", str(tmp_path / "store"), "ingest", f"s3://{bucket}/nothing-here",
               check=False)
    assert proc.returncode == 2
    assert f"s3://{bucket}/nothing-here does not exist" in proc.stderr


def test_s3_paths_without_runs_and_files_of_runs(bucket: str, small_tree: Path,
                                                 tmp_path: Path) -> None:
    fs = s3fs_client()
    fs.pipe_file(f"{bucket}/notes/readme.txt", b"not a run\n")
    store = tmp_path / "store"
    proc = cli("--store", str(store), "ingest", f"s3://{bucket}/notes", check=False)
    assert proc.returncode == 2 and proc.stderr == (
        f"Error: no runs under s3://{bucket}/notes: a run is a directory holding "
        "metrics.jsonl or config.json\n")
    assert not store.exists()
    run_dir = small_tree / "a" / "rl_flat"
    fs.put(str(run_dir), f"{bucket}/runs/rl_flat", recursive=True)
    proc = cli("--store", str(store), "ingest", f"s3://{bucket}/runs/rl_flat/metrics.jsonl")
    assert proc.stderr.startswith("runs: 1 new, 0 updated")
    assert counts(runstore.open(store)) == expected(run_dir)


def test_a_writer_whose_lease_was_taken_over_publishes_nothing(demo_tree: Path, bucket: str) -> None:
    """A writer that stalled past its lease's expiry, and lost it to another, stops at its next
    commit instead of publishing over the other's work."""
    from runstore.storage.manifest import read_manifest
    from runstore.storage.snapshot import read_table
    from runstore.storage.writer import delta_table, writer
    from runstore.errors import StoreLocked
    from runstore.storage.location import S3

    root = S3(f"s3://{bucket}/store")
    runstore.open(root).ingest([demo_tree])
    before = manifests(str(root))
    with writer(root) as w:
        taken = {"pid": 4242, "host": "elsewhere", "token": "other", "expires": time.time() + 60}
        s3fs_client().pipe_file(f"{bucket}/store/_runstore/lock", json.dumps(taken).encode())
        w.append("runs", read_table(root, w.manifest, "runs"))
        with pytest.raises(StoreLocked, match="PID 4242 took the store over"):
            w.commit(ledger=None)
    assert manifests(str(root)) == before
    published = read_manifest(root).tables["runs"]["version"]
    assert delta_table(root / "tables" / "runs").version() == published, "nothing written"
    # The other writer's lease is left alone by the loser's exit.
    assert json.loads(s3fs_client().cat_file(f"{bucket}/store/_runstore/lock"))["token"] == "other"


def test_ingest_check_from_s3_prints_firing_rules(demo_tree: Path, bucket: str,
                                                  tmp_path: Path) -> None:
    """`ingest --check` (the watch loop's single pass) over runs on S3 fires the KL rule for the
    runs the oracle flags, and only those."""
    upload(demo_tree, f"s3://{bucket}/runs")
    proc = cli("--store", str(tmp_path / "store"), "ingest", "-q", "--check",
               f"s3://{bucket}/runs")
    fired = sorted(line.split()[1].rstrip(":") for line in proc.stdout.splitlines()
                   if line.startswith("FIRED "))
    assert fired == sorted(n for n, row in oracle.kl_health(demo_tree).items() if row["flagged"])


def test_runs_on_s3_are_discovered_as_on_disk(awkward_tree: Path, bucket: str) -> None:
    """The awkward tree (nested runs, hidden and decoy directories, both layouts) uploaded to
    S3 yields the same runs, layouts and classified files as the same tree on disk."""
    from runstore.ingest.discover import discover
    from runstore.storage.location import S3

    upload(awkward_tree, f"s3://{bucket}/runs")

    def shape(runs: Any) -> list[tuple[str, str, list[tuple[str, str, int]]]]:
        return sorted((rd.run_name, rd.layout, sorted((f.rel_path, f.kind, f.size) for f in rd.files))
                      for rd in runs)

    local = shape(discover(awkward_tree))
    assert len(local) == len(oracle.run_dirs(awkward_tree))
    assert shape(discover(S3(f"s3://{bucket}/runs"))) == local


# --------------------------------------------------------------------------- the sandbox on S3

def test_s3_store_queries_read_only_the_snapshot_objects(small_tree: Path, bucket: str,
                                                         tmp_path: Path) -> None:
    """The store's queries read through fsspec; DuckDB's sandbox confines them to the
    snapshot's objects: not the manifests beside them, not another prefix or bucket, not a
    local file, not a listing; `allow_read` opens exactly one more object."""
    import boto3

    uri = f"s3://{bucket}/team/store"
    store = runstore.open(uri)
    store.ingest([small_tree])
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    client.put_object(Bucket=bucket, Key="team/private/secret.csv",
                      Body=f"a\n{SECRET}-object\n".encode())
    client.put_object(Bucket=bucket, Key="team/labels.csv",
                      Body=b"run_name,label\nb/c/sl,sft\n")
    other = f"runstore-other-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=other)
    client.put_object(Bucket=other, Key="secret.csv", Body=f"a\n{SECRET}-other\n".encode())
    local = tmp_path / "local.txt"
    local.write_text(f"{SECRET}-local\n")
    manifest = f"{uri}/_runstore/manifests/{manifests(uri)[-1]}"

    assert store.sql("select count(*) as n from runs").item() == 3
    for q in (f"select * from read_csv('s3://{bucket}/team/private/secret.csv')",
              f"select * from read_text('{manifest}')",
              f"select * from read_csv('s3://{other}/secret.csv')",
              f"select * from glob('s3://{bucket}/**')",
              f"select * from read_parquet('{uri}/tables/runs/*.parquet')",
              f"select * from read_text('{local}')",
              f"select * from read_text('gcs://{bucket}/x')"):
        with pytest.raises(runstore.RunstoreError, match="refused") as e:
            store.sql(q)
        assert SECRET not in str(e.value)
        proc = cli("--store", uri, "sql", q, check=False)
        assert proc.returncode == 2 and "refused" in proc.stderr, proc.stderr
        assert SECRET not in proc.stdout + proc.stderr
    probe = ("select * from enable_logging(level='trace', storage='file', storage_path="
             f"'{tmp_path / 'log'}', storage_buffer_size=0) union all select true from runs")
    with pytest.raises(runstore.RunstoreError):
        store.sql(probe)
    assert not (tmp_path / "log").exists()

    join = (f"select r.run_name, l.label from runs r join read_csv('s3://{bucket}/team/"
            "labels.csv') l using (run_name)")
    assert store.sql(join, allow_read=[f"s3://{bucket}/team/labels.csv"]).rows() == \
        [("b/c/sl", "sft")]
    with pytest.raises(runstore.RunstoreError, match="refused"):
        store.sql(f"select * from read_csv('s3://{bucket}/team/private/secret.csv')",
                  allow_read=[f"s3://{bucket}/team/labels.csv"])
    proc = cli("--store", uri, "sql", join, "--format", "json", "--allow-read",
               f"s3://{bucket}/team/labels.csv", check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [{"run_name": "b/c/sl", "label": "sft"}]


# --------------------------------------------------------------------------- notifications

def test_notifications_from_a_store_on_s3_are_posted_once(demo_tree: Path, bucket: str,
                                                          server: Any) -> None:
    """Two `runstore check --notify` in a row against a store on S3: each firing posted once
    (the record is kept in the bucket, made with conditional puts)."""
    base, hook = server
    uri = f"s3://{bucket}/store"
    runstore.open(uri).ingest([demo_tree])
    want = sorted((name, "kl_sample_train_v1|v2 > 0.01", row["first_step_over"])
                  for name, row in oracle.kl_health(demo_tree).items() if row["flagged"])
    assert want
    for _ in range(2):
        proc = cli("--store", uri, "check", "--notify", base + "/ok/s3", "-F", "csv",
                   check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    got = sorted((b["run"], b["rule"], b["step"]) for b in hook.accepted("/ok/s3"))
    assert got == want
    assert [n for n in s3fs_client().ls(f"{bucket}/store/_runstore/notify")
            if n.endswith(".done")]


def test_a_dead_claim_on_s3_is_taken_over_once_expired(bucket: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """S3 has no lock that dies with its holder: a claim holds an expiry. A process that took
    a claim and died leaves it held until then, and taken over after."""
    from runstore.storage.claims import Claims
    from runstore.storage.location import location

    uri = f"s3://{bucket}/store"
    code = ("import os; from runstore.storage.claims import Claims; "
            "from runstore.storage.location import location; "
            f"c = Claims(location({uri!r}), '_runstore/notify'); "
            "assert c.take('k').n == 1; os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120,
                   env={**os.environ, "RUNSTORE_CLAIM_SECONDS": "2"})
    claims = Claims(location(uri), "_runstore/notify")
    assert claims.take("k") is None  # its holder's claim has not expired yet
    time.sleep(2.5)
    taken = claims.take("k")
    assert taken is not None and taken.n == 2
    taken.done({"note": 1})
    assert claims.take("k") is None and claims.done_keys() == {"k"}


# --------------------------------------------------------------------------- requests at once

def test_a_writer_on_s3_writes_its_tables_at_once(small_tree: Path, bucket: str,
                                                  endpoint: dict[str, str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """On S3 each request waits a round trip, so a writer's tables, which are separate Delta
    logs, are written at once: behind a proxy that holds every request 50 ms, an ingest into
    a new store has several tables' first log entries (the store's creation) in flight at
    once, and several tables' later entries (its commit); on a local disk a commit writes
    two at a time (writer.COMMIT_THREADS), and a new store's tables would be made one by one.
    The store answers as the files say."""
    def kind(request_line: str) -> str:
        m = re.search(r"^PUT \S*/_delta_log/(\d{20})\.json", request_line)
        if m is None:
            return "other"
        return "create" if int(m.group(1)) == 0 else "commit"

    uri = f"s3://{bucket}/store"
    with HeldRequests(endpoint["AWS_ENDPOINT_URL"], 0.05, kind) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        runstore.open(uri).ingest([small_tree])
    assert proxy.most.get("create", 0) >= 3, proxy.most
    assert proxy.most.get("commit", 0) >= 3, proxy.most
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint["AWS_ENDPOINT_URL"])
    assert counts(runstore.open(uri)) == expected(small_tree)


def test_a_query_on_s3_fetches_each_small_data_file_once(small_tree: Path, bucket: str,
                                                         endpoint: dict[str, str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB opens a data file again for each scan and reads its footer and column chunks
    apart, a request each. On S3 a data file up to `WHOLE_FILE_BYTES` is fetched whole the
    first time a store's queries open it and its bytes are kept: one GET per file read, none
    when the same store asks again, and the answers are those of reading every range apart
    (`WHOLE_FILE_BYTES` 0) and of the files (`oracle`). With `KEPT_BYTES` below one file,
    only the last file fetched is kept: asking again fetches them all again."""
    from runstore.storage.location import s3 as s3_mod

    uri = f"s3://{bucket}/store"
    runstore.open(uri).ingest([small_tree])

    def kind(request_line: str) -> str:
        m = re.search(r"^(GET|HEAD) \S*/(tables/[^/]+/part-[^ ?]+\.parquet)", request_line)
        return f"{m.group(1)} {m.group(2)}" if m else "other"

    question = "select run_name, count(*) as n from metrics group by all order by all"

    def ask(whole: int, kept: int, times: int) -> tuple[list[Any], list[dict[str, int]]]:
        monkeypatch.setattr(s3_mod, "WHOLE_FILE_BYTES", whole)
        monkeypatch.setattr(s3_mod, "KEPT_BYTES", kept)
        with HeldRequests(endpoint["AWS_ENDPOINT_URL"], 0.0, kind) as proxy:
            monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
            store = runstore.open(uri)
            answers, gets = [], []
            for _ in range(times):
                before = dict(proxy.seen)
                answers.append(store.sql(question).rows())
                gets.append({k: n - before.get(k, 0) for k, n in proxy.seen.items()
                             if k.startswith("GET ") and n > before.get(k, 0)})
            store.close()
            return answers, gets

    whole, kept = s3_mod.WHOLE_FILE_BYTES, s3_mod.KEPT_BYTES  # as shipped
    answers, gets = ask(whole, kept, 2)
    assert gets[0] and set(gets[0].values()) == {1}, gets[0]  # each file read: one GET
    assert gets[1] == {}, gets[1]  # asked again: nothing fetched
    apart, apart_gets = ask(0, kept, 1)
    assert max(apart_gets[0].values()) > 1  # range by range: several GETs a file
    assert answers == [apart[0], apart[0]]
    want = sorted((oracle.run_name(small_tree, run), len(oracle.live_metrics(run)))
                  for run in oracle.run_dirs(small_tree) if oracle.live_metrics(run))
    assert answers[0] == want
    _, few = ask(whole, 1, 2)
    assert set(few[0]) == set(few[1]) == set(gets[0])  # nothing kept long: fetched again


def test_an_object_read_whole_on_s3_is_one_request(small_tree: Path, bucket: str,
                                                   endpoint: dict[str, str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """What runstore reads whole on S3 (a manifest, the ledger, each Delta log's tail) is one
    GET, with no HEAD asking its size first: a no-op re-ingest, which reads those and
    nothing else, makes no HEAD request for a manifest, a ledger or a log entry."""
    uri = f"s3://{bucket}/store"
    runstore.open(uri).ingest([small_tree])

    def kind(request_line: str) -> str:
        m = re.search(r"^(GET|HEAD) \S*/(_runstore/manifests|_runstore/ledger|_delta_log)/",
                      request_line)
        return f"{m.group(1)} {m.group(2)}" if m else "other"

    with HeldRequests(endpoint["AWS_ENDPOINT_URL"], 0.0, kind) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        again = runstore.open(uri).ingest([small_tree])
    assert not any(again.rows_added.values()) and again.snapshots == 0
    assert {k for k in proxy.seen if k.startswith("GET ")} == \
        {"GET _runstore/manifests", "GET _runstore/ledger", "GET _delta_log"}, proxy.seen
    assert not [k for k in proxy.seen if k.startswith("HEAD ")], proxy.seen


def test_a_writer_on_s3_compacts_two_tables_at_once_at_most(small_tree: Path, bucket: str,
                                                            endpoint: dict[str, str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction reads and rewrites a whole table, so however many tables a commit on S3
    writes at once, it compacts `COMPACTIONS_AT_ONCE` (two, as on disk) at once at most: the
    writer's peak memory stays what it is on disk. deltalake's own compaction is watched
    (not replaced) through an ingest that commits often and compacts every table it grows,
    behind a proxy that holds each request 20 ms so that compactions would overlap."""
    from deltalake.table import TableOptimizer

    from runstore.storage import writer as writer_mod

    lock = threading.Lock()
    now, most, calls = [0], [0], [0]
    real = TableOptimizer.compact

    def watched(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
            calls[0] += 1
        try:
            return real(self, *args, **kwargs)
        finally:
            with lock:
                now[0] -= 1

    monkeypatch.setattr(TableOptimizer, "compact", watched)
    monkeypatch.setenv("RUNSTORE_COMPACT_FILES", "1")
    monkeypatch.setenv("RUNSTORE_BATCH_ROWS", "2000")
    uri = f"s3://{bucket}/store"
    with HeldRequests(endpoint["AWS_ENDPOINT_URL"], 0.02) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        report = runstore.open(uri).ingest([small_tree])
    assert report.snapshots >= 2 and calls[0] > writer_mod.COMPACTIONS_AT_ONCE, \
        (report.snapshots, calls[0])
    assert most[0] == writer_mod.COMPACTIONS_AT_ONCE == 2, most[0]
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint["AWS_ENDPOINT_URL"])
    assert counts(runstore.open(uri)) == expected(small_tree)


def test_a_reading_command_on_s3_lists_the_snapshots_once(_small_template: Path, bucket: str,
                                                          endpoint: dict[str, str],
                                                          tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A reading command reads one snapshot from its first read to its end
    (`Store.one_snapshot`): it lists the manifests once, where `doctor` (a statement per
    finding) and `report` (a statement per section) listed them before each statement, a
    round trip each. What they print is what they print with a store on disk."""
    uri = f"s3://{bucket}/store"
    local = tmp_path / "store"
    for store in (uri, local):
        runstore.open(store).ingest([_small_template])

    def kind(request_line: str) -> str:
        return "list manifests" if "list-type=2" in request_line and "manifests" in request_line \
            else "other"

    for args in (["doctor"], ["runs"], ["report", "-o", str(tmp_path / "report.html")]):
        with HeldRequests(endpoint["AWS_ENDPOINT_URL"], 0.0, kind) as proxy:
            monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
            on_s3 = storekit.cli(uri, *args)  # type: ignore[arg-type]
        assert proxy.seen.get("list manifests") == 1, (args, proxy.seen)
        on_disk = storekit.cli(local, *args)
        assert (on_s3.exit_code, on_s3.output) == (on_disk.exit_code, on_disk.output), args
