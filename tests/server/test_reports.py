"""The reports page and API over a real `suture eval` output folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.fixtures import Server, needs_chromium, run_server, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reports_server(shared_data: Path, hashing_index: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose --reports folder holds one small `suture eval` run."""
    from typer.testing import CliRunner

    from suture.cli import _register, app

    _register()
    root = tmp_path_factory.mktemp("reports") / "runs"
    bench = shared_data / "legalbench_rag" / "benchmarks" / "privacy_qa_fiverr_keep.json"
    corpus = shared_data / "legalbench_rag" / "corpus"
    result = CliRunner().invoke(app, [
        "eval", "--benchmark", str(bench), "--corpus", str(corpus), "--out",
        str(root / "privacy"), "--embedder", "hashing", "--policies", "topk,scar",
        "--k", "1,3", "--limit", "6", "--resamples", "50", "--no-progress",
    ])
    assert result.exit_code == 0, result.output
    (root / "private.png").write_bytes(b"not in any report")
    with run_server(hashing_index, root.parent / "server.log", "--reports", str(root),
                    env={"SUTURE_API_KEYS": ""}) as server:
        yield server


def test_reports_api_serves_the_report_and_only_its_plots(reports_server: Server) -> None:
    folder = next(Path(reports_server.log.parent / "runs").glob("privacy"))
    plots = sorted(p.name for p in folder.glob("*.png"))
    assert plots
    with reports_server.client() as http:
        names = http.get("/v1/reports").json()["reports"]
        view = http.get("/v1/reports/view", params={"name": "runs/privacy"}).json()
        plot = http.get("/v1/reports/file", params={"name": "runs/privacy", "file": plots[0]})
        refused = [
            http.get("/v1/reports/file", params={"name": "runs/privacy", "file": file})
            for file in ("results.json", "../private.png", f"../privacy/{plots[0]}")
        ] + [http.get("/v1/reports/view", params={"name": name})
             for name in ("runs", "../runs/privacy", "/etc")]
    assert names == ["runs/privacy"]
    assert "<table>" in view["html"] and "scar" in view["html"]
    for name in plots:
        assert f'src="/v1/reports/file?name=runs%2Fprivacy&amp;file={name}"' in view["html"]
    assert plot.status_code == 200 and plot.content == (folder / plots[0]).read_bytes()
    assert [r.status_code for r in refused] == [404] * len(refused)


@needs_chromium
def test_reports_page_shows_tables_and_plots(reports_server: Server, browser: Any) -> None:
    browser.get(reports_server.url + "/reports")
    wait_for(browser, "document.body.dataset.shown === 'runs/privacy'")
    images = browser.execute_script(
        "return [...document.querySelectorAll('#report img')].map(i => "
        "[i.dataset.loaded === 'true', i.complete && i.naturalWidth > 0])")
    wait_for(browser, "[...document.querySelectorAll('#report img')]"
                      ".every(i => i.complete && i.naturalWidth > 0)")
    tables = browser.execute_script("return document.querySelectorAll('#report table').length")
    assert images and all(loaded for loaded, _ in images)
    assert tables >= 1
