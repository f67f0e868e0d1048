"""``simnode report``: the page for run and sweep folders, the answer first (a summary of
plots and a line per run, then the tables folded by kernel, units in their headings, text
said once), nothing external; its user errors (one line, exit 2); and the page opened in
headless Chromium (the ``browser`` fixture finds one, which the README's test command
installs when run as root): no console errors, every plot decoded and non-blank, the first
plot above the first table and the summary plots on the first 1400 x 900 screen, and a test
that this check fails a page in the other order.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import pytest

from simnode.commands.report import published_records
from simnode.report.html import render_html, write_report
from simnode.report.folder import load_folder
from simnode.report.result import from_record


def flat(record: dict) -> dict:
    return from_record(record).to_dict()

IMG_SRC = re.compile(r'<img [^>]*src="([^"]*)"')


def assert_self_contained(page: str) -> None:
    srcs = IMG_SRC.findall(page)
    assert srcs and all(re.fullmatch(r"data:image/png;base64,[A-Za-z0-9+/=]+", s) for s in srcs)
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)
    assert not re.search(r"(https?:|ftp:|file:|//[a-z0-9])", text, re.I), "external URL in the page"
    assert "<script" not in text and "<link" not in text and "@import" not in text and "url(" not in text
    assert not re.search(r'\b(src|href)="[^"]', text), "a reference outside the embedded images"


def headers(page: str) -> list[str]:
    """Every heading cell: column headings and row headings."""
    return re.findall(r"<th(?: scope=\"row\")?>(.*?)</th>", page)


def row_headings(page: str) -> list[str]:
    return re.findall(r'<th scope="row">(.*?)</th>', page)


def summary_of(page: str) -> str:
    found = re.search(r'<section id="summary" class="summary">(.*?)</section>', page, re.S)
    assert found, "the page has no summary section"
    return found.group(1)


def assert_answer_first(page: str, runs: int) -> None:
    """The summary (plots, a line per run) comes before any table; every table is folded."""
    assert page.index("<img") < page.index('id="summary"') + len(summary_of(page)) < page.index("<table")
    assert "<table" not in summary_of(page)
    assert summary_of(page).count("<li>") >= runs and summary_of(page).count("bottleneck ") >= runs
    tables = [m.start() for m in re.finditer("<table", page)]
    opened = [m.start() for m in re.finditer("<details>", page)]
    closed = [m.start() for m in re.finditer("</details>", page)]
    assert all(any(o < t < c for o, c in zip(opened, closed)) for t in tables), "a table outside <details>"


def test_run_report_gemm(gemm_run_dir, cli):
    res = cli("report", gemm_run_dir)
    assert res.code == 0 and res.err == "", res.err
    out = gemm_run_dir / "report.html"
    assert res.out.strip() == f"wrote {out}"
    page = out.read_text()
    assert_self_contained(page)
    assert_answer_first(page, 1)
    heads = row_headings(page)
    assert "simulated / bound (ratio)" in heads and "tflops (TFLOPS)" in heads and "bottleneck busy (%)" in heads
    result = flat(json.loads((gemm_run_dir / "result.json").read_text()))
    assert f"{result['makespan_ns'] / result['roofline_ns']:,.3f}" in page
    assert result["bottleneck"] in summary_of(page)
    assert f"tflops {result['tflops']:,.1f} TFLOPS" in summary_of(page)     # a run's line: its headline figures
    assert "aic" in heads and "aiv" not in heads            # busiest pipe per core kind: a GEMM runs no AIV
    aic = result["busiest_pipe_by_unit"]["aic"].replace(">", "&gt;")
    assert f'<td class="text">{aic}</td>' in page
    # summary: kernels against their bounds and the pipes' busy shares; then the roofline position
    assert re.findall(r'<img alt="([^"]*)"', page) == ["kernels against their bounds", "gemm pipe_busy_frac",
                                                        "roofline position"]
    assert "<summary>Configuration" in page


def test_run_report_deepep(deepep_run_dir, tmp_path, cli):
    target = tmp_path / "deepep.html"
    res = cli("report", deepep_run_dir, "-o", target)
    assert res.code == 0, res.err
    page = target.read_text()
    assert_self_contained(page)
    assert_answer_first(page, 1)
    result = flat(json.loads((deepep_run_dir / "result.json").read_text()))
    for kernel in ("dispatch", "combine"):
        assert f"{result[f'{kernel}_sim_over_bound']:,.3f}" in page
        assert f"{result[f'{kernel}_GBps']:,.1f}" in page
        for link in result[f"{kernel}_hottest_links"]:
            assert f">{link['link'].replace('>', '&gt;')}<" in page
        assert f"<summary>Kernel {kernel} " in page and f"<h4>{kernel}: hottest_links: " in page
    assert "util_frac (%)" in headers(page) and "GBps (GB/s)" in row_headings(page)
    assert "tflops (TFLOPS)" not in headers(page)            # DeepEP computes no FLOPs: absent
    # the byte convention, a run-level text, is said once
    assert page.count(html.escape(result["byte_convention"])) == 1
    # kernels against their bounds, then per run (folded) link and chip utilization heat maps
    assert re.findall(r'<img alt="([^"]*)"', page) == ["kernels against their bounds", "link_util deepep-normal",
                                                        "chip_util deepep-normal"]


def test_sweep_report(deepep_sweep_dir):
    published = published_records()
    page = write_report(deepep_sweep_dir, None, published).read_text()
    assert_self_contained(page)
    assert_answer_first(page, 2)
    summary = summary_of(page)
    assert "swept <b>num_ranks</b> = 8, 16" in page
    assert 'class="summary-plot"><img alt="headline figures against num_ranks"' in summary
    for p in load_folder(deepep_sweep_dir).points:
        assert f"<b>{p.label}</b>" in summary and p.result.bottleneck.replace(">", "&gt;") in summary
    assert "Against the published figures" in summary and "dispatch_GBps</b> at num_ranks=8" in summary
    # the sweep plot, its other panel (time / bound) and per point two heat maps
    assert len(IMG_SRC.findall(page)) == 6
    assert re.search(r"<th>num_ranks=8</th><th>num_ranks=16</th>", page)
    byte_convention = html.escape(load_folder(deepep_sweep_dir).points[0].flat["byte_convention"])
    assert page.count(byte_convention) == 1 and f'colspan="2">{byte_convention}' in page
    assert render_html(load_folder(deepep_sweep_dir), published) == page   # deterministic


def _error(res) -> str:
    assert res.code == 2 and res.out == ""
    assert res.err.count("\n") == 1 and res.err.startswith("simnode: error: ") and "Traceback" not in res.err
    return res.err


def test_layer_sweep_report(layer_sweep_dir):
    """A MoE layer sweep: the time split per run in the summary, beside its headline figures
    against the swept field (a field of names: categories); every point's rank strip, folded."""
    page = write_report(layer_sweep_dir).read_text()
    assert_self_contained(page)
    assert_answer_first(page, 2)
    summary = summary_of(page)
    assert re.findall(r'<img alt="([^"]*)"', summary) == ["headline figures against overlap", "time split per run"]
    assert "compute_ns, exposed_comm_ns, imbalance_wait_ns" in summary
    assert page.count('alt="per-rank breakdown') == 2
    assert render_html(load_folder(layer_sweep_dir)) == page


def test_missing_folder_is_an_error(tmp_path, cli):
    assert "expected an existing folder" in _error(cli("report", tmp_path / "nope"))


def test_folder_that_is_neither_run_nor_sweep_is_an_error(tmp_path, cli):
    (tmp_path / "notes.txt").write_text("hello")
    err = _error(cli("report", tmp_path))
    assert "result.json" in err and "sweep.json" in err


@pytest.mark.parametrize("name, text, expected", [
    ("result.json", "{not json", "invalid JSON at line 1 column 2"),
    ("result.json", "[1, 2]", "a JSON object holding a run result"),
    ("result.json", '{"kind": "gemm"}', "makespan_ns"),
    ("series.json", '[{"name": "u", "kernel": "k", "unit": "fraction", "bin_edges_ns": [0, 1], '
                    '"rows": {"a": [0.1, 0.2]}}]', "one value per time bin (1)"),
])
def test_unreadable_run_json_is_an_error(gemm_run_dir, cli, name, text, expected):
    (gemm_run_dir / name).write_text(text)
    err = _error(cli("report", gemm_run_dir))
    assert str(gemm_run_dir / name) in err and expected in err


def test_unreadable_sweep_json_is_an_error(deepep_sweep_dir, cli):
    (deepep_sweep_dir / "sweep.json").write_text('{"params": {}, "points": [}')
    assert "invalid JSON" in _error(cli("report", deepep_sweep_dir))
    (deepep_sweep_dir / "sweep.json").write_text('{"params": {}, "points": [{"point": {}, "dir": "points/009"}]}')
    assert "points/009/result.json" in _error(cli("report", deepep_sweep_dir))


def test_output_in_a_missing_folder_is_an_error(gemm_run_dir, tmp_path, cli):
    assert "existing folder" in _error(cli("report", gemm_run_dir, "-o", tmp_path / "no" / "r.html"))


# -- headless Chromium -------------------------------------------------------------------------

#: the first screen a reader sees, in CSS pixels
SCREEN = (1400, 900)

#: appended to a copy of the page (the report itself has no scripts): after load, draw every
#: image on a canvas and record its size and its share of non-white pixels; measure, as the
#: page opens (everything folded), where the summary plots are; then open every <details> and
#: measure where the first plot and the first table are. All of it written into the DOM.
_CHECKER = """<script>
window.addEventListener("load", function () {
  function box(el) {
    var r = el.getBoundingClientRect();
    return {top: r.top + window.scrollY, bottom: r.bottom + window.scrollY, left: r.left, right: r.right};
  }
  var out = {images: [], screen: [window.innerWidth, window.innerHeight]};
  document.querySelectorAll("img").forEach(function (img) {
    var n = 0, ink = 0;
    if (img.complete && img.naturalWidth > 0) {
      var c = document.createElement("canvas");
      c.width = img.naturalWidth; c.height = img.naturalHeight;
      var ctx = c.getContext("2d"); ctx.drawImage(img, 0, 0);
      var d = ctx.getImageData(0, 0, c.width, c.height).data;
      for (var i = 0; i < d.length; i += 4) { n++; if (d[i] < 240 || d[i + 1] < 240 || d[i + 2] < 240) ink++; }
    }
    out.images.push({alt: img.alt, width: img.naturalWidth, pixels: n, ink: ink});
  });
  out.summary_plots = Array.from(document.querySelectorAll("#summary img")).map(box);
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  var img = document.querySelector("img"), table = document.querySelector("table");
  out.first_plot = img ? box(img) : null;
  out.first_table = table ? box(table) : null;
  var pre = document.createElement("pre"); pre.id = "page-check"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def chromium(browser: str, page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--hide-scrollbars",
           f"--window-size={SCREEN[0]},{SCREEN[1]}", *extra, page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


def console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]


def check_in_browser(browser: str, page: Path, tmp_path: Path) -> dict:
    """Open a copy of ``page`` with ``_CHECKER`` in headless Chromium; its measurements."""
    checked = tmp_path / f"{page.parent.name}-{page.stem}-checked.html"
    checked.write_text(page.read_text().replace("</body>", _CHECKER + "</body>"))
    dom = chromium(browser, checked, tmp_path / "profile", "--dump-dom")
    assert console_errors(dom.stderr) == []
    found = re.search(r'<pre id="page-check">(.*?)</pre>', dom.stdout, re.S)
    assert found, "the page check did not run"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def order_problems(measured: dict) -> list[str]:
    """What is wrong with the page's order: the first plot must be above the first table (all
    groups open), and every summary plot must be on the first screen (all groups folded)."""
    problems = []
    width, height = SCREEN                       # the page is laid out at measured["screen"][0]
    plot, table = measured["first_plot"], measured["first_table"]
    if plot is None:
        problems.append("the page has no plot")
    elif table is not None and plot["bottom"] > table["top"]:
        problems.append(f"the first plot (top {plot['top']:.0f} px) is not above the first table "
                        f"(top {table['top']:.0f} px)")
    if not measured["summary_plots"]:
        problems.append("the page has no summary plot")
    for box in measured["summary_plots"]:
        if box["top"] < 0 or box["bottom"] > height or box["left"] < 0 or box["right"] > width:
            problems.append(f"a summary plot ({box}) is not on the first {width} x {height} screen")
    return problems


def test_console_errors_are_detected(tmp_path, browser):
    """The detector itself: a page that logs and throws is caught (so a clean run means clean)."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>console.error('x'); missingFn();</script></body></html>")
    lines = console_errors(chromium(browser, bad, tmp_path / "profile", "--dump-dom").stderr)
    assert any("Uncaught ReferenceError" in line for line in lines)


def test_report_in_headless_chromium(deepep_sweep_dir, layer_sweep_dir, gemm_run_dir, tmp_path, browser):
    """A sweep, a sweep with a time split and a run: every plot decodes and is not blank, the
    first plot is above the first table, and the summary plots are on the first screen."""
    for folder in (deepep_sweep_dir, layer_sweep_dir, gemm_run_dir):
        page = write_report(folder)
        measured = check_in_browser(browser, page, tmp_path)          # no console errors either
        assert measured["screen"][0] == SCREEN[0]            # laid out as on a 1400-pixel-wide screen
        assert order_problems(measured) == [], folder.name
        images = measured["images"]
        assert len(images) == len(IMG_SRC.findall(page.read_text())) >= 3
        for img in images:
            assert img["width"] > 100, f"{img['alt']} did not decode"
            assert img["ink"] / img["pixels"] > 0.02, f"{img['alt']} is blank"


def test_a_page_with_a_table_above_its_first_plot_fails_the_check(deepep_sweep_dir, tmp_path, browser):
    """The check itself: the same page with its summary moved below the tables (the order
    the report had before the summary led it) is caught, as is a table put above the plot."""
    page = write_report(deepep_sweep_dir).read_text()
    summary = re.search(r'<section id="summary".*?</section>', page, re.S).group(0)
    late = tmp_path / "late.html"
    late.write_text(page.replace(summary, "").replace("</body>", summary + "</body>"))
    problems = order_problems(check_in_browser(browser, late, tmp_path))
    assert any("is not above the first table" in p for p in problems)
    assert any("is not on the first 1400 x 900 screen" in p for p in problems)
    above = tmp_path / "above.html"
    above.write_text(page.replace("<h1>", "<table><tr><td>a table first</td></tr></table><h1>", 1))
    assert any("is not above the first table" in p for p in order_problems(check_in_browser(browser, above, tmp_path)))


def test_readme_test_command_installs_chromium_as_root_only_and_is_what_ci_runs():
    """A user without root runs the same command: the install is skipped and the browser
    test finds one or says what to install; CI (root) installs one and requires it."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    ci = (root / ".ci" / "run").read_text().strip().splitlines()
    assert f"```\n{ci[-1]}\n```" in readme
    assert ci[-1].startswith('(command -v chromium >/dev/null || [ "$(id -u)" != 0 ] || (apt-get update -q && '
                             'DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)) && ')
    assert ci[-1].endswith("python -m pytest")
    assert "export SIMNODE_REQUIRE_BROWSER=1" in ci


def test_without_a_browser_the_test_says_what_to_install(tmp_path, monkeypatch, browser_search):
    find_browser, how = browser_search
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SIMNODE_BROWSER", raising=False)
    assert find_browser() is None
    assert "apt-get install chromium" in how and "python -m playwright install chromium" in how
    monkeypatch.setenv("SIMNODE_BROWSER", str(tmp_path / "nope"))
    assert find_browser() is None


def test_report_of_real_out_folders(tmp_path, cli):
    """The folders `simnode run --out` and `simnode sweep --out` write, not only the fixtures."""
    root = Path(__file__).resolve().parents[2]
    supernode, deepep = root / "topologies" / "atlas950-supernode.yaml", root / "workloads" / "deepep-normal.yaml"
    res = cli("sweep", supernode, deepep, "--param", "num_ranks=8,16", "--set", "tokens_per_rank=256",
              "--jobs", "1", "--out", tmp_path / "ep")
    assert res.code == 0, res.err
    assert cli("report", tmp_path / "ep").code == 0
    page = (tmp_path / "ep" / "report.html").read_text()
    assert_self_contained(page)
    # bandwidth vs EP, its other panel, and per point a link and a chip (HBM, URMA ceiling) heat map
    assert len(IMG_SRC.findall(page)) == 6
    assert page.count('alt="chip_util num_ranks=') == 2 and page.count('alt="link_util num_ranks=') == 2
    res = cli("run", root / "topologies" / "ascend950dt.yaml", root / "workloads" / "gemm-bf16-4096x7168x16384.yaml",
              "--set", "m=256", "--set", "n=512", "--set", "k=1024", "--out", tmp_path / "gemm")
    assert res.code == 0, res.err
    assert cli("report", tmp_path / "gemm").code == 0
    assert len(IMG_SRC.findall((tmp_path / "gemm" / "report.html").read_text())) == 3
