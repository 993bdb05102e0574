"""`python -m corpus_dagster.run` building whole corpora with its artifacts on an S3 server on 127.0.0.1 (moto's):
keys planted in the bucket, two writers at once, a store gone mid-run. Runs in `make test-deploy` (CORPUS_DEPLOY=1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("CORPUS_DEPLOY") != "1",
                                reason="whole builds on an S3 server: run `make test-deploy`")

pytest.importorskip("moto")
pytest.importorskip("s3fs")

from store_box import BUCKET, cli, client, finished, keys, store_config  # noqa: E402


def _files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_planted_keys_write_nothing_outside_the_mirror_and_stay_in_the_store(s3, tmp_path):
    config, prefix = store_config(tmp_path, s3)
    target = tmp_path / "abs-target.txt"
    planted = [f"{prefix}/../escape-up.txt", f"{prefix}/corpus/../../../escape-climb.txt",
               f"{prefix}/{target}",  # `<prefix>//abs/path`: joined to the mirror, it replaced the base
               f"{prefix}/corpus\\raw\\backslash.txt"]
    s3_client = client(s3)
    for key in planted:
        s3_client.put_object(Bucket=BUCKET, Key=key, Body=b"planted: must never become a local file")
    before = _files_under(tmp_path)

    code, out, err = finished(cli(tmp_path, s3, "m1", config))
    assert code == 0, out[-3000:] + err[-3000:]
    (mirror,) = (tmp_path / "m1" / "mirror").iterdir()
    inside = (f"{mirror.relative_to(tmp_path).as_posix()}/", "m1/dagster_home/")
    written = {f for f in _files_under(tmp_path) - before if not f.startswith(inside)}
    assert written == set(), written  # nothing beside the mirror and the instance
    assert not target.exists()
    assert not [p for p in tmp_path.rglob("*") if "\\" in p.name or "escape" in p.name or "abs-target" in p.name]
    assert set(planted) <= keys(s3, prefix.rsplit("/", 1)[0])  # the run's pushes removed none of them
    warnings = [line for line in (out + err).splitlines() if "refused" in line]
    assert len(warnings) == 1 and warnings[0].startswith("run: warning: artifacts store s3://"), warnings
    for key in planted:
        assert repr(key[len(prefix) + 1:]) in warnings[0]


def test_two_runs_at_once_on_one_prefix_end_well_or_the_loser_heals_on_its_next_run(s3, tmp_path):
    config, prefix = store_config(tmp_path, s3)
    runs = {machine: cli(tmp_path, s3, machine, config) for machine in ("m1", "m2")}
    ended = {machine: finished(proc) for machine, proc in runs.items()}
    codes = sorted(code for code, _, _ in ended.values())
    assert codes in ([0, 0], [0, 3]), {m: (c, out[-2000:], err[-2000:]) for m, (c, out, err) in ended.items()}
    for machine, (code, out, err) in ended.items():
        if code == 3:
            errors = [line for line in err.splitlines() if line.startswith("run: error:")]
            assert any("another writer" in line and str(tmp_path / machine / "mirror") in line and "Rerun" in line
                       for line in errors), err[-3000:]
            code, out, err = finished(cli(tmp_path, s3, machine, config))
            assert code == 0, out[-3000:] + err[-3000:]


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: a connection there is refused


def test_a_store_gone_mid_run_names_the_failed_steps_and_the_rerun_resumes(tmp_path):
    from store_box import S3Server

    server = S3Server()
    try:
        config, prefix = store_config(tmp_path, server.env)
        proc = cli(tmp_path, server.env, "m1", config)
        for line in proc.stdout:  # the store goes away once the first step has finished
            if " raw_documents " in line:
                server.stop()
                break
        code, out, err = finished(proc)
        assert code == 3, out[-3000:] + err[-3000:]
        errors = [line for line in err.splitlines() if line.startswith("run: error:")]
        assert len(errors) == 1, err
        line = errors[0]
        assert line.startswith(f"run: error: artifacts store s3://{BUCKET}/{prefix}: unreachable ("), line
        assert "; failed steps: source " in line and line.endswith("; rerun when the store is back: finished "
                                                                    "steps are kept"), line
        assert "Traceback" not in err
        server.start()
        # and a raw part the first run pushed is damaged in the store meanwhile: rebuilt, and said once
        (part,) = [k for k in keys(server.env, prefix) if "/raw/alpha/" in k and k.endswith(".jsonl.zst")]
        s3 = client(server.env)
        good = s3.get_object(Bucket=BUCKET, Key=part)["Body"].read()
        damaged = good[:-1] + bytes([good[-1] ^ 1])
        s3.put_object(Bucket=BUCKET, Key=part, Body=damaged)
        code, out, err = finished(cli(tmp_path, server.env, "m1", config))
        assert code == 0, out[-3000:] + err[-3000:]
        said = [line for line in (out + err).splitlines() if Path(part).name in line]
        assert len(said) == 1 and "is damaged (sha256 differs from its _RECORD.json); rebuilding it" in said[0], said
        assert s3.get_object(Bucket=BUCKET, Key=part)["Body"].read() != damaged  # fetched again (a new fetched_at)
    finally:
        server.stop()


