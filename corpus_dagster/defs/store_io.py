"""The values passed between steps (small plan dicts) kept in the artifacts store, for clusters that share no disk.

Dagster's default IO manager pickles step outputs under the instance's storage folder, which a step on
another machine cannot read. When `paths.artifacts` is an object store, the definitions use this manager
instead: the pickles go to `<artifacts URL>/.dagster-io/<run id>/<step key>/<output>`, a prefix the artifacts
mirror never pulls (`core.storage.skipped`). A local artifacts root keeps Dagster's default.
"""

import pickle
from typing import Any

import dagster as dg

from corpus_dagster.core.storage import IO_PREFIX


class StoreIOManager(dg.ConfigurableIOManager):
    """Pickles step outputs into the artifacts store (see module doc)."""

    url: str
    storage_options: dict[str, Any] = {}

    def _path(self, identifier: list[str]) -> tuple[Any, str]:
        import fsspec

        fs, root = fsspec.core.url_to_fs(self.url.rstrip("/"), **self.storage_options)
        return fs, "/".join([root.rstrip("/"), IO_PREFIX, *identifier])

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        if obj is None and context.dagster_type.is_nothing:
            return
        fs, path = self._path(context.get_identifier())
        fs.pipe_file(path, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def load_input(self, context: dg.InputContext) -> Any:
        if context.dagster_type.is_nothing:
            return None
        fs, path = self._path(context.upstream_output.get_identifier())
        return pickle.loads(fs.cat_file(path))
