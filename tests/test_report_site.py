"""``python -m vcast.report site``: the static results site, built from a real demo sweep, read as
files (links, tables, incremental rebuilds) and in a real headless Chromium (Debian's chromium and
chromium-driver, driven by selenium; ``make system-deps`` installs them)."""

from __future__ import annotations

import csv
import re
import html
import json
import os
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from tests.support.shared_once import DEMO_TREE_METHODS, RECORDS_TREE_METHODS, shared_demo_tree, shared_records_tree
from vcast.report.__main__ import main
from vcast.report.paper import SHIPPED, PaperTables
from vcast.report.site import build_site, find_experiments, paper_rows, render_experiment
from vcast.report.site.writer import MANIFEST

REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = REPO / "results" / "site-screenshots"  # ignored by git (results/*)
METHODS = DEMO_TREE_METHODS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def demo_results(synth_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``build demo --run`` as tests/test_report_tables.py runs it (the demo model through lmms-eval,
    2 items of the default set at 8 frames, one ratio), on DEMO_TREE_METHODS, once per session: the
    results root (read-only: tests that change it copy it first)."""
    results = shared_demo_tree(tmp_path_factory)
    assert sorted(p.parent.parent.parent.name for p in (results / "demo").rglob("cell.json")) == sorted(METHODS)
    return results


class _Page(HTMLParser):
    """The links, images, scripts and ``table[data-csv]`` cells of one HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[tuple[str, str]] = []  # (attribute, value)
        self.tables: dict[str, list[list[str]]] = {}
        self.images: list[str] = []
        self.canvases: list[dict[str, str]] = []  # the kept maps: each canvas's attributes
        self._table: Optional[str] = None
        self._cell: Optional[list[str]] = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        values = dict(attrs)
        for name in ("href", "src", "data-sheet"):
            if values.get(name) is not None:
                self.urls.append((name, values[name] or ""))
        if tag == "img":
            self.images.append(values.get("src") or "")
        if tag == "canvas":
            self.canvases.append({key: value or "" for key, value in values.items()})
        if tag == "table" and (values.get("data-csv") or values.get("data-md")):
            self._table = values.get("data-csv") or f"md:{values['data-md']}"
            self.tables[self._table] = []
        elif self._table and tag == "tr":
            self.tables[self._table].append([])
        elif self._table and tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _printed_rows(path: Path) -> list[list[str]]:
    """The report's Markdown table in ``path`` as a reader sees it: each row's cells without the
    Markdown marks, a section row (a title across the table) as its one cell."""
    rows = []
    for line in [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("|")]:
        cells = [re.sub(r"\*\*|\*|</?u>|`", "", cell.strip()) for cell in line.strip().strip("|").split("|")]
        if set("".join(cells)) <= set("-:"):
            continue  # the alignment row
        rows.append(cells[:1] if len(cells) > 1 and not any(cells[1:]) else cells)
    return rows


def _csv_rows(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def _snapshot(site: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(site).as_posix(): (p.stat().st_mtime_ns, p.stat().st_ino)
            for p in sorted(site.rglob("*")) if p.is_file()}


def _check_links(site: Path) -> int:
    """Every href/src of every page resolves to a file inside ``site``; no URL leaves it."""
    pages = sorted(site.rglob("*.html"))
    for page in pages:
        for name, url in _parse(page).urls:
            assert "://" not in url and not url.startswith(("/", "//", "data:")), f"{page}: {name}={url!r}"
            target = (page.parent / url.split("#")[0]).resolve()
            assert target.is_file(), f"{page.relative_to(site)}: {name}={url!r} does not resolve"
            assert site.resolve() in target.parents, f"{page}: {url!r} leaves the site"
    css = (site / "style.css").read_text(encoding="utf-8")
    assert "url(" not in css and "@import" not in css
    return len(pages)


def _write_kept_records(cell: Path, method: str, seed: int) -> dict[int, np.ndarray]:
    """Kept-token records of both items of a demo cell (8 frames: 4 temporal steps of a 4 x 4
    grid), in the format the plugins write; returns each item's mask."""
    from vcast.eval.video import read_qwen_video
    from vcast.eval.tasks.vcast_synth import utils as task
    from vcast.kept_records import Geometry, KeptRecord, append_records, rank_file

    docs = [json.loads(line) for line in task.JSONL.read_text(encoding="utf-8").splitlines()]
    rng = np.random.default_rng(seed)
    masks, records = {}, []
    for doc_id in (0, 1):
        video = read_qwen_video(task.doc_to_visual(docs[doc_id])[0], 8)
        kept = rng.random((len(video.indices) // 2, 4, 4)) < 0.3
        kept[:, 0, 0] = True
        masks[doc_id] = kept
        records.append(KeptRecord(task="vcast_synth", doc_id=doc_id, video=0, method=method,
                                  geometry=Geometry("qwen3_vl", kept.shape, 2, (128, 128)),
                                  frame_indices=list(video.indices), budgets=[int(k.sum()) for k in kept],
                                  kept=kept))
    append_records(rank_file(cell, 0), records)
    return masks


def test_site_files_links_tables_items_and_incremental_rebuilds(demo_results: Path, tmp_path: Path) -> None:
    """No browser: every page's links and images resolve inside the site, each table's cells are
    its CSV's, each item lists every method's answer; a rebuild with nothing changed rewrites
    nothing, one with a changed input rewrites what shows it, and a removed cell's page goes."""
    root = tmp_path / "results"
    shutil.copytree(demo_results, root)  # mtimes kept; this test changes its copy
    experiment_dir = root / "demo"
    for kept in experiment_dir.rglob("kept"):
        shutil.rmtree(kept)  # only this test's records below, whatever the plugins record by default
    cells = {json.loads(p.read_text())["spec"]["method"]: p.parent for p in experiment_dir.rglob("cell.json")}
    masks = {method: _write_kept_records(cells[method], method, seed) for seed, method in
             enumerate(("vcast", "random"))}
    site = tmp_path / "site"
    build = build_site(experiment_dir, site)
    assert build.index == site / "index.html" and build.problems == []
    assert _check_links(site) == 1 + 1 + len(METHODS) + 1 + 2  # index, experiment, cells, item list, 2 items

    # The experiment page: every table and analysis exactly as its CSV; figures copied, PDFs linked.
    page = _parse(site / "demo" / "index.html")
    csvs = sorted(p.name for p in experiment_dir.glob("*.csv"))
    assert csvs == ["demo-analysis.csv", "demo-summary.csv", "demo.csv"]
    printed = sorted(p.with_suffix(".md").name for p in experiment_dir.glob("*.csv") if not p.stem.endswith("-analysis"))
    assert sorted(page.tables) == sorted([*csvs, *(f"md:{name}" for name in printed)])
    for name in csvs:
        assert page.tables[name] == _csv_rows(experiment_dir / name), name
        assert (site / "demo" / "files" / name).read_bytes() == (experiment_dir / name).read_bytes()
    for name in printed:  # each table also as the report prints it: display names, rounding, marks
        assert page.tables[f"md:{name}"] == _printed_rows(experiment_dir / name), name
    assert "<strong>" in (site / "demo" / "index.html").read_text()  # the best of a column, bold
    pngs = sorted(p.name for p in experiment_dir.glob("*.png"))
    assert pngs and sorted(Path(src).name for src in page.images) == pngs
    links = {Path(url).name for _, url in page.urls}
    assert {p.name for p in experiment_dir.glob("*.pdf")} <= links
    assert {f"{c.relative_to(experiment_dir).as_posix().replace('/', '--')}.html" for c in cells.values()} <= links

    # Cell pages: spec, status, versions, the efficiency records' summary.
    vcast_page = (site / "demo" / "cells" / "demo_qwen3vl--8f--vcast--r0.25--vcast_synth.html").read_text()
    record = json.loads((cells["vcast"] / "cell.json").read_text())
    for text in ("state-partial", "partial (limit 2)", "Per-call records (efficiency/rank*.jsonl: 2 records)",
                 f"<th>transformers</th><td>{record['versions']['transformers']}</td>",
                 "<th>method</th><td>vcast</td>"):
        assert text in vcast_page, text

    # Items: every method's parsed answer and correctness, as the samples have them; kept maps.
    samples = {method: {r["doc_id"]: r for r in map(json.loads, next(cell.rglob("*_samples_*.jsonl")).open())}
               for method, cell in cells.items()}
    for doc_id in (0, 1):
        path = site / "demo" / "items" / "vcast_synth" / f"vcast_synth-{doc_id}.html"
        text = html.unescape(path.read_text(encoding="utf-8"))
        assert samples["vanilla"][doc_id]["input"] in text
        for method in METHODS:
            entry = samples[method][doc_id]["vcast_synth_acc"]
            verdict = "right" if entry["score"] == 1.0 else "wrong"
            label = {"vanilla": "Vanilla", "vcast": "V-CAST (r=0.25)", "random": "Random (r=0.25)",
                     "fastv": "FastV (r=0.25)", "vidcom2": "VidCom² (r=0.25)",
                     "vcast_uniform": "Uniform Allocation (r=0.25)"}[method]
            assert f"<td>{label} †</td><td>{entry['pred']}</td>" in text and verdict in text
        parsed = _parse(path)
        assert len(parsed.images) == 1  # the frames read; the kept maps are canvases over one shared sheet
        maps = {canvas["aria-label"]: canvas for canvas in parsed.canvases}
        assert sorted(maps) == ["kept tokens: Random (r=0.25) †", "kept tokens: V-CAST (r=0.25) †"]  # † partial
        assert "Vanilla †</strong>: <span class=\"muted\">no kept-token records in this cell" in text
        [sheet] = {canvas["data-sheet"] for canvas in maps.values()}  # both read the same frames: one image
        from PIL import Image

        with Image.open(path.parent / sheet) as image:  # 128 px square frames scaled to 96, 2 px apart
            # every frame of the 4 temporal steps, left to right: a token covers 2 frames, both drawn
            assert image.size == (8 * 96 + 7 * 2, 96)
        for method, label in (("vcast", "V-CAST (r=0.25) †"), ("random", "Random (r=0.25) †")):
            canvas, kept = maps[f"kept tokens: {label}"], masks[method][doc_id]
            # 8 tiles a row of 96 x 96 pixels, 2 apart, 2 frames a step, 8 tiles; a 4 x 4 grid, dropped cells at 25%
            assert (canvas["data-tiles"], canvas["data-grid"], canvas["data-dim"]) == ("8 96 96 2 2 8", "4 4", "0.25")
            assert (canvas["width"], canvas["height"]) == (str(8 * 96 + 7 * 2), "96")
            shown = [np.unpackbits(np.frombuffer(bytes.fromhex(word), np.uint8))[:16].reshape(4, 4).astype(bool)
                     for word in canvas["data-kept"].split()]
            assert np.array_equal(np.stack(shown), kept)  # each step's kept tokens, as the record has them
            assert f"{kept.sum()}/{kept.size} tokens ({100 * kept.sum() / kept.size:.0f}%) kept" in text
        assert "<polyline" in text  # the per-step budget curve

    # A second build with nothing changed rewrites nothing.
    before = _snapshot(site)
    again = build_site(experiment_dir, site)
    assert again.written == [] and again.removed == [] and _snapshot(site) == before

    # A changed input rewrites the pages that show it, and only them; text is escaped.
    with (cells["fastv"] / "run.log").open("a") as handle:
        handle.write("one more line <b>&\n")
    sample_file = next(cells["vanilla"].rglob("*_samples_*.jsonl"))  # the first cell: its prompt is shown
    lines = sample_file.read_text().splitlines()
    first = json.loads(lines[0])
    first["input"] = "<script>alert('x')</script> & which colour?"
    sample_file.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    changed = build_site(experiment_dir, site)
    written = sorted(changed.written)
    assert written == ["demo/cells/demo_qwen3vl--8f--fastv--r0.25--vcast_synth.html", "demo/items/index.html",
                       "demo/items/vcast_synth/vcast_synth-0.html"]
    assert "one more line &lt;b&gt;&amp;" in (site / written[0]).read_text()
    for rel in written[1:]:
        text = (site / rel).read_text()
        assert "<script>alert" not in text and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; which" in text

    # A cell removed from the tree: missing while a sweep's plan names it; its page goes once none does,
    # after the pages linking to it were rewritten.
    shutil.rmtree(cells["fastv"])
    fastv_page = "demo/cells/demo_qwen3vl--8f--fastv--r0.25--vcast_synth.html"
    missing = build_site(experiment_dir, site)
    assert fastv_page in missing.written and "state-missing" in (site / fastv_page).read_text()
    shutil.rmtree(root / ".hydra")  # the sweep's plan
    removed = build_site(experiment_dir, site)
    assert removed.removed == [fastv_page]
    _check_links(site)
    assert json.loads((site / MANIFEST).read_text())["files"].keys() == {
        p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file() and p.name != MANIFEST}


def test_an_interrupted_build_leaves_a_site_whose_links_resolve(demo_results: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A build cut off after the cell and item pages, before the experiment page and the index
    (a KeyboardInterrupt there), leaves every link of every page resolving: the stale page of a
    removed cell is deleted only once nothing links to it. The next build finishes the job."""
    from vcast.report.site import build as site_build

    root = tmp_path / "results"
    shutil.copytree(demo_results, root)
    site = tmp_path / "site"
    build_site(root / "demo", site)
    fastv = next(p.parent for p in (root / "demo").rglob("cell.json") if "/fastv/" in p.as_posix())
    shutil.rmtree(fastv)
    shutil.rmtree(root / ".hydra")  # no sweep plans it any more
    stale = site / "demo" / "cells" / "demo_qwen3vl--8f--fastv--r0.25--vcast_synth.html"

    def interrupted(*args: object, **kwargs: object) -> str:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(site_build, "render_experiment", interrupted)
        with pytest.raises(KeyboardInterrupt):
            build_site(root / "demo", site)
    item = (site / "demo" / "items" / "vcast_synth" / "vcast_synth-0.html").read_text()
    assert "FastV" not in item  # the items were rewritten before the cut
    assert stale.is_file() and stale.name in (site / "demo" / "index.html").read_text()  # still linked
    _check_links(site)
    finished = build_site(root / "demo", site)
    assert "demo/cells/demo_qwen3vl--8f--fastv--r0.25--vcast_synth.html" in finished.removed
    assert all("--fastv--" in rel for rel in finished.removed)  # its page and its kept maps, where recorded
    assert stale.name not in (site / "demo" / "index.html").read_text()
    _check_links(site)


def test_site_of_a_results_root_and_the_command_line(demo_results: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The results root itself lists its experiments; the command prints where to open the site;
    a root without cells is refused, naming it; --compare paper adds the published numbers to
    paper tables (none to the demo's generic one)."""
    out = tmp_path / "site"
    assert main(["site", str(demo_results), "--out", str(out), "--compare", "paper"]) == 0
    assert f"open file://{(out / 'index.html').resolve()}" in capsys.readouterr().out
    index = _parse(out / "index.html")
    assert ("href", "demo/index.html") in index.urls
    assert "No published numbers for this table (not a paper layout)." in (out / "demo" / "index.html").read_text()
    _check_links(out)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit):
        main(["site", str(empty)])
    assert f"no experiments under {empty}" in capsys.readouterr().err


def test_compare_paper_rows_are_the_reports_numbers(tmp_path: Path) -> None:
    """--compare paper on a paper layout: ours, the published value and ours minus it, as the
    report prints them (a tree made from the paper's numbers: every difference is zero)."""
    from tests.support.paper_results import write_paper_results

    write_paper_results(tmp_path)
    assert main(["build", "rope", "--results", str(tmp_path)]) == 0
    experiment = next(e for e in find_experiments(tmp_path) if e.name == "rope")
    header, rows = paper_rows(experiment, "rope", PaperTables(SHIPPED))
    assert header[:6] == ["method", "frames", "ratio", "MVBench", "MVBench paper", "MVBench Δ"]
    table = {row[0]: dict(zip(header, row)) for row in rows}
    assert table["HoliTom"]["MVBench"] == table["HoliTom"]["MVBench paper"] == "63.0"
    assert table["HoliTom"]["MVBench Δ"] == "+0.0"
    published = [row[header.index("MVBench paper")] for row in rows]
    assert all(published) and all(row[i] in ("+0.0", "") for row in rows
                                  for i, name in enumerate(header) if name.endswith(" Δ"))
    page = render_experiment(experiment, "paper", SHIPPED, has_items=False)
    assert 'data-paper="rope.csv"' in page and "+0.0" in page


# ---------------------------------------------------------------------------------------------
# In a real browser
# ---------------------------------------------------------------------------------------------

def chromium_unavailable_reason() -> Optional[str]:
    """Why the browser test cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (the test extra: pip install -c constraints.txt -e '.[test]')"
    hint = "make system-deps installs Debian's chromium and chromium-driver (scripts/install_chromium.sh, as root)"
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        return f"no chromium on PATH; {hint}"
    if not shutil.which("chromedriver"):
        return f"no chromedriver on PATH; {hint}"
    return None


@pytest.fixture
def browser():
    reason = chromium_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", "--disable-extensions", "--no-first-run",
                     "--allow-file-access-from-files"):  # a canvas drawn from a file:// image may be read back
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver's path given: selenium's own driver manager (which would download one) is not used.
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _settle(driver) -> None:
    """Wait until the page's images have loaded or failed (the window as tall as the page, so
    lazy images load too)."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.set_window_size(1400, 600)  # the page's own height, not the last page's window
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(int(height) + 120, 8000))
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "return document.readyState === 'complete' && Array.from(document.images).every(i => i.complete)"))


def _severe(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def _screenshot(driver, folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    assert driver.save_screenshot(str(path)), path
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, SCREENSHOTS / path.name)
    return path


_DOM_TABLES = """return Array.from(document.querySelectorAll('table[data-csv]')).map(t =>
    [t.getAttribute('data-csv'), Array.from(t.rows).map(r => Array.from(r.cells).map(c => c.textContent))]);"""
_DOM_PRINTED = """return Array.from(document.querySelectorAll('table[data-md]')).map(t =>
    [t.getAttribute('data-md'), Array.from(t.rows).filter(r => !r.hidden).map(r =>
        Array.from(r.cells).map(c => c.textContent))]);"""
_IMAGES = "return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth]);"


def test_site_in_headless_chromium(demo_results: Path, tmp_path: Path, browser) -> None:
    """Chromium opens the site from disk: the index links to the experiment, whose tables read
    from the DOM equal their CSVs and whose figures load; a cell page and an item page render
    with every image loaded; no page logs a console error. Screenshots: results/site-screenshots/."""
    from selenium.webdriver.common.by import By

    experiment_dir = demo_results / "demo"
    site = tmp_path / "site"
    build_site(experiment_dir, site)
    shots = tmp_path / "screenshots"
    browser.get((site / "index.html").resolve().as_uri())
    _settle(browser)
    assert browser.title == "V-CAST results"
    _screenshot(browser, shots, "index")
    assert _severe(browser) == []

    browser.find_element(By.LINK_TEXT, "demo").click()
    _settle(browser)
    assert browser.current_url == (site / "demo" / "index.html").resolve().as_uri()
    tables = dict(browser.execute_script(_DOM_TABLES))
    assert sorted(tables) == ["demo-analysis.csv", "demo-summary.csv", "demo.csv"]
    for name, rows in tables.items():
        assert rows == _csv_rows(experiment_dir / name), name
    printed = dict(browser.execute_script(_DOM_PRINTED))  # the report's table, as it prints it
    assert sorted(printed) == ["demo-summary.md", "demo.md"]
    for name, rows in printed.items():
        assert rows == _printed_rows(experiment_dir / name), name
    header = browser.find_element(By.CSS_SELECTOR, "table[data-md='demo.md'] thead th:nth-child(2)")
    header.click()  # sorted by its first benchmark, best first; section rows hidden
    values = [row[1] for row in dict(browser.execute_script(_DOM_PRINTED))["demo.md"][1:]]
    numbers = [float(value.split()[0]) for value in values if value and value[0].isdigit()]
    assert numbers == sorted(numbers, reverse=True) and len(numbers) >= 2
    images = browser.execute_script(_IMAGES)
    assert len(images) == len(list(experiment_dir.glob("*.png"))) >= 1
    assert all(loaded and width > 0 for _, loaded, width in images), images
    _screenshot(browser, shots, "experiment")
    assert _severe(browser) == []

    browser.find_element(By.PARTIAL_LINK_TEXT, "demo_qwen3vl/8f/vcast/").click()
    _settle(browser)
    assert "partial (limit 2)" in browser.find_element(By.TAG_NAME, "body").text
    _screenshot(browser, shots, "cell")
    assert _severe(browser) == []

    browser.get((site / "demo" / "items" / "index.html").resolve().as_uri())
    _settle(browser)
    browser.find_element(By.ID, "items-vcast_synth").find_element(By.PARTIAL_LINK_TEXT, "#1").click()
    _settle(browser)
    answers = browser.find_element(By.ID, "answers").find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(answers) == len(METHODS)
    images = browser.execute_script(_IMAGES)
    assert images and all(loaded and width > 0 for _, loaded, width in images), images
    _screenshot(browser, shots, "item")
    assert _severe(browser) == []
    # The method picker: all of this demo's 6 cells start shown; unchecking one hides its answer row.
    boxes = browser.find_elements(By.CSS_SELECTOR, "input.pick")
    assert len(boxes) == len(METHODS) and all(box.is_selected() for box in boxes)
    assert all(row.is_displayed() for row in answers)
    boxes[0].click()
    shown = [row.is_displayed() for row in answers]
    assert shown == [False, *[True] * (len(METHODS) - 1)], shown
    boxes[0].click()
    assert all(row.is_displayed() for row in answers)
    # The item list's filter hides the rows without the typed words.
    browser.get((site / "demo" / "items" / "index.html").resolve().as_uri())
    box = browser.find_element(By.CSS_SELECTOR, "input.filter")
    box.send_keys("no-such-words-anywhere")
    rows = browser.find_element(By.ID, "items-vcast_synth").find_elements(By.CSS_SELECTOR, "tbody tr")
    assert rows and not any(row.is_displayed() for row in rows)
    assert _severe(browser) == []
    assert sorted(os.listdir(shots)) == ["cell.png", "experiment.png", "index.png", "item.png"]


# Every kept map of the page once drawn (the window as tall as the page: each one near the viewport),
# as PNG data URLs, beside its frame sheet as the browser decodes it.
_KEPT_MAPS = """
const done = arguments[arguments.length - 1];
const maps = Array.from(document.querySelectorAll('canvas.kept-map')).filter(c => c.offsetParent !== null);
const wait = () => {
  if (!maps.every(c => ['yes', 'failed'].includes(c.getAttribute('data-drawn')))) { setTimeout(wait, 50); return; }
  const sheets = {};
  Promise.all(maps.map(c => new Promise(resolve => {
    const image = new Image();
    image.onload = () => {
      const copy = document.createElement('canvas');
      copy.width = image.naturalWidth; copy.height = image.naturalHeight;
      copy.getContext('2d').drawImage(image, 0, 0);
      sheets[c.getAttribute('data-sheet')] = copy.toDataURL('image/png');
      resolve();
    };
    image.src = c.getAttribute('data-sheet');
  }))).then(() => done([maps.map(c => [c.getAttribute('aria-label'), c.getAttribute('data-drawn'),
                                       c.toDataURL('image/png'), c.getAttribute('data-sheet'),
                                       c.getAttribute('data-tiles'), c.getAttribute('data-grid'),
                                       c.getAttribute('data-kept')]), sheets]));
};
wait();
"""


def _pixels(data_url: str) -> np.ndarray:
    import base64
    import io

    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1]))) as image:
        return np.asarray(image.convert("RGB")).astype(np.int16)


def _tile(pixels: np.ndarray, layout: dict, index: int) -> np.ndarray:
    (width, height), gap, columns = layout["tile"], layout["gap"], layout["columns"]
    row, column = divmod(index, columns)
    top, left = row * (height + gap), column * (width + gap)
    return pixels[top:top + height, left:left + width]


def test_kept_maps_in_headless_chromium(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, browser) -> None:
    """The item page's kept maps as a reader sees them, on the demo model's cells at 32 frames: the page's
    script draws each method's map over the item's one frame sheet, pixel for pixel that sheet with the
    cells of the dropped tokens dimmed to a quarter (±1 for the canvas's rounding); and item #2, whose
    yellow object the model saw in one frame only, the second of its temporal step, shows it in
    vanilla's map (a map of each step's first frame would not)."""
    from vcast.eval.synthetic_benchmark import LETTERS
    from vcast.eval.tasks.vcast_synth import utils as task
    from vcast.eval.video import read_qwen_video
    from vcast.viz import cell_edges

    results = shared_records_tree(tmp_path_factory)
    site = tmp_path / "site"
    build_site(results / "demo", site, max_items=3)
    doc = json.loads(task.JSONL.read_text(encoding="utf-8").splitlines()[2])
    read = [int(i) for i in read_qwen_video(task.doc_to_visual(doc)[0], 32).indices]
    [position] = [p for p, index in enumerate(read) if index in doc["event_frames"]]
    assert doc["category"] == "appear" and doc["options"][LETTERS.index(doc["answer"])] == "D. yellow"
    assert position % 2 == 1  # the second frame of its temporal step (a Qwen3-VL token covers two)

    browser.get((site / "demo" / "items" / "vcast_synth" / "vcast_synth-2.html").resolve().as_uri())
    _settle(browser)
    maps, sheets = browser.execute_async_script(_KEPT_MAPS)
    assert len(maps) == len(RECORDS_TREE_METHODS) and {m[1] for m in maps} == {"yes"}, [m[:2] for m in maps]
    assert len(sheets) == 1  # every method read the same 32 frames: one image for all
    dimmed_somewhere, vanilla = 0, 0
    for label, _, drawn, sheet, tiles, grid, kept in maps:
        drawn, source = _pixels(drawn), _pixels(sheets[sheet])
        columns, width, height, gap, per_step, count = map(int, tiles.split())
        layout = {"tile": [width, height], "gap": gap, "columns": columns}
        h, w = map(int, grid.split())
        masks = [np.unpackbits(np.frombuffer(bytes.fromhex(word), np.uint8))[:h * w].reshape(h, w).astype(bool)
                 for word in kept.split()]
        expected = source.copy()
        assert per_step == 2 and count == 32  # every frame of the 16 steps
        rows, cols = np.diff(cell_edges(height, h)), np.diff(cell_edges(width, w))
        for index in range(count):
            cells = np.repeat(np.repeat(masks[index // per_step], rows, axis=0), cols, axis=1)
            tile = _tile(expected, layout, index)
            tile[~cells] = np.rint(tile[~cells] * 0.25)
            dimmed_somewhere += int((~cells).any())
        assert drawn.shape == source.shape and np.abs(drawn - expected).max() <= 1, label
        if label.startswith("kept tokens: Vanilla"):
            yellow = [int(((t[..., 0] > 170) & (t[..., 1] > 150) & (t[..., 2] < 110)).sum())
                      for t in (_tile(drawn, layout, position - 1), _tile(drawn, layout, position))]
            assert yellow[0] == 0 and yellow[1] >= 20, yellow  # in the frame that holds it, not in its step's first
            vanilla += 1
    assert vanilla == 1 and dimmed_somewhere  # the pruning methods' maps dim what they dropped
    assert _severe(browser) == []


def test_an_item_page_of_many_cells_starts_with_the_papers_methods() -> None:
    """Past a handful of cells, an item page starts with vanilla, V-CAST and the paper's baselines
    checked (the others a click away); every cell has its box, keyed like its answer row."""
    from vcast.report.site import html as H
    from vcast.report.site.item_pages import PAPER_METHODS, PICK_ALL_UP_TO, method_picker
    from vcast.report.site.items import Answer, Item

    methods = ["vanilla", "vcast", "visionzip", "random", "fastv", "pdrop", "sparsevlm", "dycoke", "prunevid"]
    assert len(methods) > PICK_ALL_UP_TO
    item = Item("t", "t", "0", answers=[Answer(f"m/8f/{m}/r0.25/t", f"{m} (r=0.25)", "A", "A", True) for m in methods])
    html = method_picker(item)
    checked = set(re.findall(r'value="([^"]+)" checked', html))
    assert checked == {H.slug(f"{m} (r=0.25)") for m in methods if m in PAPER_METHODS} == {
        H.slug("vanilla (r=0.25)"), H.slug("vcast (r=0.25)"), H.slug("visionzip (r=0.25)")}
    assert len(re.findall(r'class="pick"', html)) == len(methods)
    few = Item("t", "t", "0", answers=item.answers[:3])
    assert len(re.findall(r" checked", method_picker(few))) == 3  # a few cells: every one shown


def test_a_cell_page_rounds_its_figures_and_sums_only_what_adds_up(tmp_path: Path) -> None:
    """27.155885249999983 reads 27.1559; the per-call table totals seconds and tokens, not a peak
    memory (two calls of 200 MB are no 400 MB)."""
    from vcast.report.site import html as H
    from vcast.report.site.cell_page import efficiency_summary
    from vcast.results.tree import Cell

    assert "<td>27.1559</td>" in H.key_values([("prefill_latency_s", 27.155885249999983)])
    (tmp_path / "efficiency").mkdir()
    calls = [{"prefill_s": 1.5, "peak_memory_mb": 200.0, "video_tokens_kept": 10},
             {"prefill_s": 2.0, "peak_memory_mb": 200.0, "video_tokens_kept": 14}]
    (tmp_path / "efficiency" / "rank0.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    rows, count = efficiency_summary(Cell(tmp_path))
    assert count == 2
    assert {row[0]: row[2] for row in rows} == {"peak_memory_mb": "–", "prefill_s": "3.5", "video_tokens_kept": "24"}
    assert {row[0]: row[5] for row in rows}["peak_memory_mb"] == "200"
