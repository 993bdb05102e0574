"""`python -m corpus_dagster.run` with its artifacts on an S3 server on 127.0.0.1 (moto's): a store that is
gone and a missing `[deploy]` extra (whole builds on the server: tests/deploy/)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("moto")
pytest.importorskip("s3fs")

from store_box import BUCKET, cli, finished  # noqa: E402


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: a connection there is refused


def test_a_store_that_is_gone_exits_3_with_one_line_naming_it_and_no_secret(tmp_path):
    from store_box import S3_KEYS, write_store_config

    secret = "sk-never-shown-0123456789"
    config = write_store_config(tmp_path, f"s3://{BUCKET}/corpora/gone")
    env = {**S3_KEYS, "AWS_SECRET_ACCESS_KEY": secret, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}"}
    code, out, err = finished(cli(tmp_path, env, "m1", config))
    assert code == 3, out[-3000:] + err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("run: error:")]
    assert len(errors) == 1, err
    assert errors[0].startswith(f"run: error: artifacts store s3://{BUCKET}/corpora/gone: unreachable (")
    assert errors[0].endswith("; failed steps: none (no step had started); rerun when the store is back: "
                              "finished steps are kept")
    assert "Traceback" not in err and secret not in out + err
    log = Path(out.splitlines()[0].removeprefix("run: log "))
    assert secret not in log.read_text()


def test_an_s3_root_without_the_deploy_extra_exits_2_naming_the_install(tmp_path):
    import subprocess
    import sys

    from store_box import cli_env, write_store_config

    config = write_store_config(tmp_path, f"s3://{BUCKET}/corpora/no-extra")
    without_s3fs = ("import sys; sys.modules['s3fs'] = None; from corpus_dagster.run import main; "
                    "sys.exit(main(sys.argv[1:]))")  # `import s3fs` fails as it does where it is not installed
    proc = subprocess.run([sys.executable, "-c", without_s3fs, str(config)], cwd=tmp_path, capture_output=True,
                          text=True, env=cli_env(tmp_path, {}, "m1"), timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("run: error:")]
    assert len(errors) == 1 and errors[0].endswith("pip install 'corpus-dagster[deploy]'"), proc.stderr


def test_explain_on_a_store_that_is_gone_exits_3_naming_it(tmp_path, monkeypatch, capsys):
    from store_box import S3_KEYS, write_store_config

    from corpus_dagster.cli import explain as explain_cli
    from corpus_dagster.core.storage import forget_stores

    config = write_store_config(tmp_path, f"s3://{BUCKET}/corpora/gone")
    for name, value in {**S3_KEYS, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}",
                        "CORPUS_MIRROR": str(tmp_path / "mirror")}.items():
        monkeypatch.setenv(name, value)
    forget_stores()
    assert explain_cli.main(["alpha:0", "--config", str(config)]) == 3
    assert capsys.readouterr().err.startswith(f"error: artifacts store s3://{BUCKET}/corpora/gone: unreachable (")
    forget_stores()
