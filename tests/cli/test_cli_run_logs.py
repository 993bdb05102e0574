"""Run logs under the artifacts root keep the newest `paths.keep_run_logs`."""

from pathlib import Path

from corpus_dagster.cli.run_log import prune_run_logs


def _logs(folder: Path, names: list[str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(name)
    return [folder / n for n in names]


def test_the_newest_logs_are_kept_with_the_current_one_counted(tmp_path):
    names = [f"run-20260101T0000{s:02d}Z-1.log" for s in range(5)]
    logs = _logs(tmp_path / "logs", names)
    (tmp_path / "logs" / "notes.txt").write_text("mine")
    removed = prune_run_logs(tmp_path / "logs", keep=2, current=logs[4])
    assert sorted(p.name for p in removed) == names[:3]
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == sorted([*names[3:], "notes.txt"])


def test_the_current_log_is_kept_even_when_older_names_sort_after_it(tmp_path):
    logs = _logs(tmp_path / "logs", ["run-20260101T000000Z-1.log", "run-20270101T000000Z-1.log"])
    prune_run_logs(tmp_path / "logs", keep=1, current=logs[0])
    assert [p.name for p in (tmp_path / "logs").iterdir()] == [logs[0].name]


def test_no_logs_folder_is_nothing_to_do(tmp_path):
    assert prune_run_logs(tmp_path / "logs", keep=1) == []
